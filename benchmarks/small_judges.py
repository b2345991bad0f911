"""How the bundled small models judge: do their verdicts follow the replies, the slot,
or the question's wording?

The replies are the demo's own (src/eigenjury/data/configs/demo.yaml: each member's
persona and opening, the evaluee settings and seed of the config), to the first
`--scenarios` everyday scenarios of the config's seeded pick. Each bundled model then
judges, without a persona, every warm-against-cold pair of replies to a scenario (the 4
pairs of 2 warm and 2 cold members), in three formats:

- letters: `comparison_request` (kindness constitution, ties allowed, constrained), the
  log-odds of the labels A and B from the option scores, in both presentation orders;
- letters, reverse question: the same prompt asking which reply goes against the
  constitution more (sign flipped), so a judge that reads the question flips its
  answer, and one driven by the replies' surface (length, wording) does not;
- likelihood: `speaker_request` follows minus breaks, per reply (peer.likelihood); the
  log-odds of its verdict for warm over cold is the difference of the two scores.

Per pair (scenario x warm x cold), the warm advantage is the judge's log-odds for the
warm reply, averaged over the two orders; "position" is its mean log-odds for slot A.
The table gives their means over pairs with standard errors, the share of pairs that
favour warm, and the seconds per judge call.

    python benchmarks/small_judges.py [--scenarios 8] [--seed 0] [--quick]
"""

from __future__ import annotations

import argparse
import asyncio
import math
import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace

from _common import ROOT, environment, table
from eigenjury.config import load_config
from eigenjury.models.factory import make_provider
from eigenjury.models.spec import ModelSpec
from eigenjury.models.types import ChatRequest, Message, Provider
from eigenjury.peer.config import RankConfig
from eigenjury.peer.data import Constitution, Scenario, load_constitution, load_scenarios
from eigenjury.peer.likelihood import SPEAKERS, speaker_request
from eigenjury.peer.prompts import comparison_request, evaluee_request

DEMO = ROOT / "src" / "eigenjury" / "data" / "configs" / "demo.yaml"
TONES = ("warm", "cold")  # the demo members' name prefixes
JUDGES = ("local:smollm2-135m", "local:gemma3-270m")
# The forward question of a constrained comparison with ties (peer.prompts), and its reverse.
FORWARD = (
    "Which reply better follows the constitution as a whole? Answer with one word only: "
    "A if reply A is better, B if reply B is better, or tie if they are equally good."
)
REVERSE = (
    "Which reply goes against the constitution more? Answer with one word only: "
    "A if reply A goes against it more, B if reply B goes against it more, or tie if "
    "they are equally bad."
)


@dataclass
class Measured:
    """Per pair: the warm advantage (and the mean log-odds for slot A, letters only)."""

    advantage: list[float]
    position: list[float] | None
    seconds: list[float]


class Judge:
    """One judge model, timing each call."""

    def __init__(self, spec: str) -> None:
        self.provider: Provider = make_provider(ModelSpec.parse(spec))
        self.seconds: list[float] = []

    def logprobs(self, request: ChatRequest) -> dict[str, float]:
        start = time.perf_counter()
        completion = asyncio.run(self.provider.generate(request))
        self.seconds.append(time.perf_counter() - start)
        assert completion.choice_logprobs is not None
        return dict(completion.choice_logprobs)


def demo_replies(config: RankConfig, scenarios: Sequence[Scenario]) -> dict[tuple[str, str], str]:
    """Each member's reply to each scenario, as the demo generates it (opening included)."""
    replies = {}
    for member in config.population:
        provider = make_provider(member.spec)  # a local model loads once per process
        for scenario in scenarios:
            request = evaluee_request(
                member.persona, scenario.text, config.judging.evaluee, member.opening
            )
            text = asyncio.run(provider.generate(request)).text
            replies[member.name, scenario.id] = (member.opening or "") + text
    return replies


def reverse_question(request: ChatRequest) -> ChatRequest:
    """The same comparison, asking which reply goes against the constitution more."""
    *before, user = request.messages
    if FORWARD not in user.content:
        raise RuntimeError("the comparison prompt changed: update FORWARD in this benchmark")
    return replace(
        request, messages=(*before, Message("user", user.content.replace(FORWARD, REVERSE)))
    )


def letters(
    judge: Judge,
    constitution: Constitution,
    config: RankConfig,
    pairs: Sequence[tuple[Scenario, str, str]],
    *,
    reverse: bool,
) -> Measured:
    """Log-odds of A against B in both orders; the warm reply's, sign flipped for the
    reverse question."""
    judge.seconds = []
    advantage, position = [], []
    sign = -1.0 if reverse else 1.0
    for scenario, warm, cold in pairs:
        odds = []
        for replies in ((warm, cold), (cold, warm)):
            request = comparison_request(
                None,
                constitution,
                scenario.text,
                replies,
                None,
                config.judging.judge,
                ties=True,
                per_criterion=False,
                constrained=True,
            )
            scores = judge.logprobs(reverse_question(request) if reverse else request)
            odds.append(scores["A"] - scores["B"])
        advantage.append(sign * (odds[0] - odds[1]) / 2)
        position.append((odds[0] + odds[1]) / 2)
    return Measured(advantage, position, judge.seconds)


def likelihood(
    judge: Judge, constitution: Constitution, pairs: Sequence[tuple[Scenario, str, str]]
) -> Measured:
    """Score (follows minus breaks) of each reply once; warm minus cold per pair."""
    judge.seconds = []
    scores: dict[tuple[str, str], float] = {}
    for scenario, *replies in pairs:
        for reply in replies:
            if (scenario.id, reply) not in scores:
                follows, breaks = (
                    next(
                        iter(
                            judge.logprobs(
                                speaker_request(None, constitution, scenario.text, reply, speaker)
                            ).values()
                        )
                    )
                    for speaker in SPEAKERS
                )
                scores[scenario.id, reply] = follows - breaks
    advantage = [scores[s.id, warm] - scores[s.id, cold] for s, warm, cold in pairs]
    return Measured(advantage, None, judge.seconds)


def summary(values: Sequence[float]) -> str:
    """'mean (s.e.)' over pairs."""
    se = statistics.stdev(values) / math.sqrt(len(values)) if len(values) > 1 else math.nan
    return f"{statistics.fmean(values):+.2f} ({se:.2f})"


def share_positive(values: Sequence[float]) -> float:
    return sum(v > 0 for v in values) / len(values)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--scenarios", type=int, default=8)
    parser.add_argument("--seed", type=int, default=0, help="every seed of the demo config")
    parser.add_argument("--quick", action="store_true", help="2 scenarios")
    args = parser.parse_args()
    if args.quick:
        args.scenarios = 2
    print(environment("llama-cpp-python"))
    config = load_config(RankConfig, DEMO).reseeded(args.seed)
    constitution = load_constitution(config.constitution, DEMO.parent)
    scenarios = load_scenarios(
        config.scenarios.source, DEMO.parent, limit=args.scenarios, seed=config.scenarios.seed
    )
    start = time.perf_counter()
    replies = demo_replies(config, scenarios)
    generated = time.perf_counter() - start
    warm, cold = ([m for m in config.population if m.name.startswith(t)] for t in TONES)
    pairs = [
        (s, replies[w.name, s.id], replies[c.name, s.id])
        for s in scenarios
        for w in warm
        for c in cold
    ]
    rows = []
    for spec in JUDGES:
        judge = Judge(spec)
        forward = letters(judge, constitution, config, pairs, reverse=False)
        reverse = letters(judge, constitution, config, pairs, reverse=True)
        scored = likelihood(judge, constitution, pairs)
        driven = [(f + r) / 2 for f, r in zip(forward.advantage, reverse.advantage, strict=True)]
        surface = [(f - r) / 2 for f, r in zip(forward.advantage, reverse.advantage, strict=True)]
        for name, measured in (
            ("letters", forward),
            ("letters, reverse question (sign flipped)", reverse),
            ("letters: question-driven part (fwd + rev)/2", Measured(driven, None, [])),
            ("letters: surface part (fwd - rev)/2", Measured(surface, None, [])),
            ("likelihood (follows - breaks)", scored),
        ):
            rows.append(
                [
                    spec.removeprefix("local:"),
                    name,
                    summary(measured.advantage),
                    share_positive(measured.advantage),
                    summary(measured.position) if measured.position else "",
                    f"{statistics.fmean(measured.seconds):.3f}" if measured.seconds else "",
                ]
            )
    print(
        table(
            [
                "judge",
                "format",
                "warm advantage, log-odds (s.e.)",
                "share of pairs > 0",
                "position: log-odds for slot A (s.e.)",
                "s per call",
            ],
            rows,
        )
    )
    print(
        f"{len(scenarios)} scenarios x {len(pairs) // len(scenarios)} warm-cold pairs, seed "
        f"{args.seed}; replies generated in {generated:.0f} s; "
        f"{time.perf_counter() - start:.0f} s in all"
    )


if __name__ == "__main__":
    main()
