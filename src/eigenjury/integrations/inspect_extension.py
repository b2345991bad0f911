"""Inspect AI extension: a contract task and a contract scorer (ties fail), and a
pairwise scorer against a baseline with an Elo metric (integrations.inspect_pairwise).

Registered through the `inspect_ai` entry point, so after `pip install eigenjury[inspect]`

    inspect eval eigenjury/contract -T bundle=path/to/bundle --model openai/gpt-4o-mini \\
        -T jury=openai/gpt-4o-mini,anthropic/claude-3-5-haiku-latest

answers each task with the model under evaluation and grades it with eigenjury's rules:
graders without a model directly; `llm_judge` criteria by a jury of Inspect models, each
asked the same prompt at a fixed temperature and seed, read by the last verdict line,
repaired once, and decided by strict majority (Inspect's own `model_graded_qa` majority
leaves a tie unscored; here it fails). A one-criterion verdict is asked as a structured
verdict first (reasons, then one of the verdict lines: a JSON schema the provider
enforces where it can), as `eigenjury grade` asks served jurors; a provider that refuses
the schema is asked in text from then on. `-T submissions=FILE` grades pre-made answers
(JSONL: task_id, submission, candidate) instead of generating. The score value is
{"score": S / 100, "passed": 0 or 1, "unread": the share of jury votes no reading could
grade}, so the log's metrics say how many votes went unread; the metadata carries every
criterion and vote.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from inspect_ai import Task, task
from inspect_ai.dataset import MemoryDataset, Sample
from inspect_ai.model import (
    ChatMessage,
    ChatMessageAssistant,
    ChatMessageSystem,
    ChatMessageUser,
    Model,
    ModelOutput,
    get_model,
)
from inspect_ai.scorer import Score, Target, accuracy, mean, scorer, stderr
from inspect_ai.solver import Generate, Solver, TaskState, generate, solver

from eigenjury.contracts.bundle import ContractSource, load_contract
from eigenjury.contracts.graders import check_python_graders
from eigenjury.contracts.grading import Submission, assemble
from eigenjury.contracts.jury import REPEAT_STRIDE, Vote, criterion_groups, votes_from_replies
from eigenjury.contracts.prompts import juror_request, repair_request, task_messages
from eigenjury.contracts.sandbox import GraderSandbox
from eigenjury.contracts.schema import Criterion
from eigenjury.contracts.schema import Task as ContractTask
from eigenjury.contracts.submissions import read_submissions
from eigenjury.contracts.trace import judgements, task_outcome
from eigenjury.errors import InputError
from eigenjury.integrations.inspect_models import ask_model, model_names, named_models


async def _juror_votes(
    name: str,
    model: Model,
    source: ContractSource,
    task_id: str,
    submission: str,
    group: tuple[Criterion, ...],
    settings: dict[str, Any],
    text_only: set[str],
    repeat: int = 0,
) -> dict[str, Vote]:
    contract_task = source.contract.task(task_id)
    request = juror_request(
        contract_task,
        source.task_reference(contract_task),
        submission,
        group,
        constrained=False,
        verdict_format="auto",
        **settings,
    )
    try:
        first = await ask_model(model, request, text_only)
    except Exception as exc:  # a failed call is an error vote, never a grade
        error = f"{type(exc).__name__}: {exc}"
        return votes_from_replies(name, group, None, error=error, repeat=repeat)
    votes = votes_from_replies(name, group, first, repeat=repeat)
    if all(v.grade is not None for v in votes.values()):
        return votes
    try:
        retry = await ask_model(model, repair_request(request, first.text, group))
    except Exception:
        retry = None
    return votes_from_replies(name, group, first, retry=retry, retried=True, repeat=repeat)


@scorer(
    metrics={
        "score": [mean(), stderr()],
        "passed": [accuracy(), stderr()],
        "unread": [mean()],
    }
)
def contract_scorer(
    bundle: str,
    jury: str | Sequence[str | Model] | None = None,
    temperature: float = 0.0,
    seed: int = 0,
    max_tokens: int = 1024,
    batch_criteria: bool = False,
) -> Any:
    """Grade the completion against the sample's task; no jury given: the model under
    evaluation is the only juror."""
    source = load_contract(bundle)
    sandbox = GraderSandbox()  # python graders' child, stopped with the scorer (or at exit)
    check_python_graders(source.contract, source.path, sandbox)  # before any sample is answered
    settings = {"temperature": temperature, "seed": seed, "max_tokens": max_tokens}
    text_only: set[str] = set()  # jurors whose provider refused a structured verdict

    async def score(state: TaskState, target: Target) -> Score:
        task_id = str(state.sample_id)
        contract_task = source.contract.task(task_id)
        text = state.output.completion
        jurors = named_models(model_names(jury) or [get_model()])
        judged = tuple(c for c in contract_task.evaluation.criteria if c.grader == "llm_judge")
        groups = criterion_groups(contract_task, judged, batch_criteria)
        asked = [
            # each copy of a repeated model, and each repeat, gets its own seed, as in
            # `eigenjury grade`
            _juror_votes(
                name,
                model,
                source,
                task_id,
                text,
                group,
                {**settings, "seed": seed + sample + r * REPEAT_STRIDE},
                text_only,
                r,
            )
            for group in groups
            for name, sample, model in jurors
            for r in range(source.contract.repeats)
        ]
        votes: dict[str, list[Vote]] = {c.id: [] for c in judged}
        for found in await asyncio.gather(*asked):
            for criterion_id, v in found.items():
                votes[criterion_id].append(v)
        submission = Submission(task_id, str(state.model), text)
        result = assemble(contract_task, submission, votes, sandbox=sandbox)
        lines = [
            f"{c.criterion.id}: {'pass' if c.passed else 'fail'}"
            + (f" ({c.c_votes}/{len(c.votes)} C)" if c.by_jury else f" ({c.explanation})")
            for c in result.criteria
        ]
        cast = [v for c in result.criteria if c.by_jury for v in c.votes]
        unread = sum(v.grade is None for v in cast)
        if cast and 2 * unread > len(cast):
            lines.insert(
                0,
                f"most jury votes were unread ({unread} of {len(cast)}: no verdict line, "
                "or the call failed), and an unread vote counts against the criterion; "
                "this grade says more about the jurors' replies than the submission",
            )
        return Score(
            value={
                "score": result.reward,
                "passed": float(result.passed),
                "unread": unread / len(cast) if cast else 0.0,
            },
            answer=text,
            explanation="\n".join(lines),
            metadata={
                **task_outcome(result).model_dump(mode="json", exclude={"submission"}),
                "trace": [j.model_dump(mode="json") for j in judgements([result])],
            },
        )

    return score


@solver
def submitted(answers: dict[str, str]) -> Solver:
    """Use a pre-made submission as the model's output (no generation)."""

    async def solve(state: TaskState, generate: Generate) -> TaskState:
        text = answers[str(state.sample_id)]
        state.output = ModelOutput.from_content(model="submission", content=text)
        state.messages.append(ChatMessageAssistant(content=text))
        return state

    return solve


@task
def contract(
    bundle: str,
    jury: str | Sequence[str] | None = None,
    submissions: str | None = None,
    candidate: str | None = None,
    temperature: float = 0.0,
    seed: int = 0,
    max_tokens: int = 1024,
    batch_criteria: bool = False,
) -> Task:
    """Every task of an eigenjury contract (bundle folder, YAML file or bundled name)."""
    source = load_contract(bundle)
    samples = [
        Sample(
            input=_sample_input(t, source.task_reference(t)),
            id=t.task_id,
            metadata={"criteria": [c.id for c in t.evaluation.criteria]},
        )
        for t in source.contract.tasks
    ]
    solve: Solver = generate()
    if submissions is not None:
        answers = _pick_submissions(Path(submissions), source, candidate)
        samples = [s for s in samples if str(s.id) in answers]
        solve = submitted(answers)
    return Task(
        dataset=MemoryDataset(samples, name=source.contract.name or "contract"),
        solver=solve,
        scorer=contract_scorer(
            bundle,
            jury=model_names(jury),
            temperature=temperature,
            seed=seed,
            max_tokens=max_tokens,
            batch_criteria=batch_criteria,
        ),
    )


def _sample_input(task: ContractTask, reference: str | None) -> str | list[ChatMessage]:
    """The prompt, or a conversation as Inspect's chat messages (turns as the candidate
    is sent them)."""
    turns = task_messages(task, reference)
    if isinstance(task.execution.prompt, str):
        return turns[0].content
    kinds: dict[str, type[ChatMessage]] = {
        "system": ChatMessageSystem,
        "user": ChatMessageUser,
        "assistant": ChatMessageAssistant,
    }
    return [kinds[m.role](content=m.content) for m in turns]


def _pick_submissions(path: Path, source: ContractSource, candidate: str | None) -> dict[str, str]:
    given = read_submissions(path, source.contract)
    names = sorted({s.candidate for s in given})
    if candidate is None and len(names) > 1:
        raise InputError(
            f"submissions from {len(names)} candidates ({', '.join(names)}); choose one with "
            "-T candidate=NAME",
            path=path,
        )
    wanted = candidate or names[0]
    return {s.task_id: s.text or "" for s in given if s.candidate == wanted}


# The pairwise scorer lives beside this module; importing it here registers it with
# Inspect, which loads this module through the entry point.
from eigenjury.integrations.inspect_pairwise import (  # noqa: E402
    elo_vs_baseline,
    pairwise_scorer,
)

__all__ = ["contract", "contract_scorer", "elo_vs_baseline", "pairwise_scorer", "submitted"]
