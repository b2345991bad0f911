"""Inspect AI: a pairwise scorer that judges a sample's output against a baseline's
answer, in both orders, with eigenjury's comparison prompts and verdict reading, and
an Elo metric over the eval from a Bradley-Terry-Davidson fit of every verdict.

    inspect eval my_task.py --model openai/gpt-4o-mini          # with, in the task,
        scorer=pairwise_scorer(baseline="answers/gpt-4-0314.jsonl", judge="openai/gpt-4.1")
    inspect score logs/run.eval --scorer eigenjury/pairwise_scorer \\
        -S baseline=target -S judge=anthropic/claude-sonnet-4-5

The baseline is `target` (each sample's target is the baseline's answer) or any answer
file `eigenjury judge` reads (peer.answers: Arena-Hard, AlpacaEval, a table, another
Inspect log), matched by sample id; `baseline_model` picks one model of a file holding
several. Each judge compares the two replies twice, the output shown first and then
second, asked for a structured verdict first and in text where the provider refuses
one, and once more (a repair) where its reply cannot be read; an unread verdict is
never a tie. The score is {"win": the output's share of the verdicts read (a tie
half; NaN, so unscored, where none was), "unread": the share of verdicts not read};
its metadata holds every verdict and reply. Metrics: the win rate with its standard
error over samples (samples are the clusters), and `elo_vs_baseline`, the output's
Elo minus the baseline's from one fit of all verdicts (judges' position bias fitted).
With several epochs, Inspect's reducers keep the first epoch's metadata, so the Elo
reads the first epoch's verdicts while the win rate averages them all.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from inspect_ai.model import Model, get_model
from inspect_ai.scorer import (
    Metric,
    SampleScore,
    Score,
    Target,
    mean,
    metric,
    scorer,
    stderr,
)
from inspect_ai.solver import TaskState

from eigenjury.errors import InputError
from eigenjury.integrations.inspect_models import ask_model, model_names, named_models
from eigenjury.peer.answers import member_set, question_id_of, read_answers
from eigenjury.peer.config import Generation
from eigenjury.peer.data import load_constitution
from eigenjury.peer.parsing import parse_single
from eigenjury.peer.prompts import comparison_request, repair_request
from eigenjury.stats.verdicts import FIRST, SECOND, TIE

OUTPUT, BASELINE = "output", "baseline"  # the two evaluees, as the verdicts name them
_WIN = {FIRST: 1.0, TIE: 0.5, SECOND: 0.0}  # the first reply's share of a verdict


@metric
def elo_vs_baseline(strong_weight: float = 3.0) -> Metric:
    """The output's Elo minus the baseline's (0: as good), from a Bradley-Terry-Davidson
    fit of every verdict in the scores' metadata (one latent dimension, each judge's
    position bias and tie propensity fitted, a strong graded verdict at
    `strong_weight`); NaN where the verdicts cannot be fitted."""

    def compute(scores: list[SampleScore]) -> float:
        import numpy as np

        from eigenjury.stats.consensus import PeerRanking
        from eigenjury.stats.verdicts import DataError, VerdictTable

        rows = [
            (str(s.sample_id), v)
            for s in scores
            for v in (s.score.metadata or {}).get("verdicts", [])
            if v.get("verdict") is not None
        ]
        if not rows:
            return math.nan
        table = VerdictTable.from_columns(
            [sample for sample, _ in rows],
            [v["judge"] for _, v in rows],
            [v["first"] for _, v in rows],
            [v["second"] for _, v in rows],
            [v["verdict"] for _, v in rows],
        )
        strong = np.array([bool(v.get("strong")) for _, v in rows])
        table = table.with_strong(strong, strong_weight)
        try:
            ranking = PeerRanking(1, bootstrap=0, style=None).fit(table)
        except DataError:  # one side won every verdict, or too few: no finite Elo
            return math.nan
        elo = dict(zip(ranking.models_, ranking.elo_, strict=True))
        return float(elo[OUTPUT] - elo[BASELINE])

    return compute


def _baseline_answers(baseline: str, baseline_model: str | None) -> dict[str, str] | None:
    """Sample id -> the baseline's answer, from an answer file (None: the target)."""
    if baseline == "target":
        return None
    path = Path(baseline)
    if not path.exists():
        raise InputError("no such baseline answer file or folder", path=path)
    answers = member_set(read_answers(path), "baseline", baseline_model, path)
    return {ident: answer.text for ident, answer in answers.answers.items()}


@scorer(metrics={"win": [mean(), stderr(), elo_vs_baseline()], "unread": [mean()]})
def pairwise_scorer(
    baseline: str = "target",
    baseline_model: str | None = None,
    judge: str | Sequence[str | Model] | None = None,
    constitution: str = "helpfulness",
    ties: bool = True,
    graded: bool = False,
    temperature: float = 0.0,
    seed: int = 0,
    max_tokens: int = 1024,
) -> Any:
    """Judge each sample's output against the baseline's answer in both orders; no
    judge given: the model under evaluation judges."""
    given = _baseline_answers(baseline, baseline_model)
    rules = load_constitution(constitution, Path.cwd())
    settings = Generation(temperature=temperature, max_tokens=max_tokens, seed=seed)
    text_only: set[str] = set()  # judges whose provider refused a structured verdict

    async def verdict(
        name: str, model: Model, first: str, question: str, replies: tuple[str, str]
    ) -> dict[str, Any]:
        request = comparison_request(
            None, rules, question, replies, None, settings, ties=ties, per_criterion=False,
            constrained=False, served=True, graded=graded,
        )  # fmt: skip
        second = BASELINE if first == OUTPUT else OUTPUT
        out: dict[str, Any] = {"judge": name, "first": first, "second": second, "verdict": None}
        try:
            reply = await ask_model(model, request, text_only)
            found = parse_single(reply.text, ties=ties, graded=graded)
            out["reply"] = reply.text
            if found is None:  # one repair, in the form the request asked
                ask = repair_request(
                    request, reply.text, ties=ties, per_criterion=False, n_criteria=1, graded=graded
                )
                repaired = await ask_model(model, ask, text_only)
                out["repair"] = repaired.text
                found = parse_single(repaired.text, ties=ties, graded=graded)
        except Exception as exc:  # a failed call is an unread verdict, never a tie
            out["error"] = f"{type(exc).__name__}: {exc}"
            return out
        if found is not None:
            out["verdict"], out["strong"] = found
        return out

    def baseline_answer(state: TaskState, target: Target) -> str | None:
        """The baseline's answer to this sample: the target, or the file's answer by the
        sample's id, its id and epoch (an Inspect log of several epochs), or its input's
        text (AlpacaEval pairs outputs by instruction)."""
        if given is None:
            return target.text
        ident = str(state.sample_id)
        keys = (ident, f"{ident}/{state.epoch}", question_id_of(state.input_text))
        return next((given[k] for k in keys if k in given), None)

    async def score(state: TaskState, target: Target) -> Score:
        reference = baseline_answer(state, target)
        output = state.output.completion
        if reference is None:
            return Score(
                value={"win": math.nan, "unread": math.nan},
                explanation=f"the baseline has no answer to sample {state.sample_id}",
            )
        question = state.input_text
        judges = named_models(model_names(judge) or [get_model()])
        orders = ((OUTPUT, (output, reference)), (BASELINE, (reference, output)))
        asked = [
            verdict(name, model, first, question, replies)
            for first, replies in orders
            for name, _, model in judges
        ]
        verdicts = await asyncio.gather(*asked)
        shares = [
            _WIN[v["verdict"]] if v["first"] == OUTPUT else 1 - _WIN[v["verdict"]]
            for v in verdicts
            if v["verdict"] is not None
        ]
        win = sum(shares) / len(shares) if shares else math.nan
        lines = [
            f"{v['judge']}, {v['first']} shown first: "
            + ("unread" if v["verdict"] is None else ["tie", "first", "second"][v["verdict"]])
            + (" (strong)" if v.get("strong") else "")
            for v in verdicts
        ]
        return Score(
            value={"win": win, "unread": 1 - len(shares) / len(verdicts)},
            answer=output,
            explanation="\n".join(lines),
            metadata={"verdicts": verdicts, "baseline": reference},
        )

    return score
