"""How the bundled small models judge: do their verdicts follow the replies, the slot,
or the question's wording?

The replies are the demo's own (src/eigenjury/data/configs/demo.yaml: each member's
persona and opening, the evaluee settings and seed of the config), to the first
`--scenarios` everyday scenarios of the config's seeded pick. Each bundled model then
judges, without a persona, every warm-against-cold pair of replies to a scenario (the 4
pairs of 2 warm and 2 cold members), in three formats:

- letters: `comparison_request` (the demo's constitution, ties allowed, constrained), the
  log-odds of the labels A and B from the option scores, in both presentation orders;
- letters, reverse question: the same prompt asking which reply goes against the
  constitution more (sign flipped), so a judge that reads the question flips its
  answer, and one driven by the replies' surface (length, wording) does not;
- likelihood: each reply's score, `speaker_request` follows minus breaks per token of
  the reply (peer.likelihood.reply_score); the verdict goes to the higher score, the
  same in both orders, so the warm advantage is the difference of the two scores (nats
  per token, not log-odds); also against the bundled kindness constitution (ten long
  criteria) in place of the demo's three short ones, and judging in the demo's warm and
  cold personas (as its judges do).

Per pair (scenario x warm x cold), the warm advantage is the judge's log-odds for the
warm reply (letters), averaged over the two orders, or its score difference
(likelihood); "position" is its mean log-odds for slot A. The table gives their means
over pairs with standard errors, the share of pairs that favour warm (for likelihood:
the share of verdicts for the warm reply), and the seconds per judge call.

    python benchmarks/small_judges.py [--scenarios 16] [--seed 0] [--quick]
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
from eigenjury.peer.likelihood import SPEAKERS, reply_score
from eigenjury.peer.prompts import comparison_request, evaluee_request, speaker_request

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
    """One judge model, loaded before any call is timed."""

    def __init__(self, spec: str) -> None:
        self.provider: Provider = make_provider(ModelSpec.parse(spec))
        asyncio.run(self.provider.generate(ChatRequest.chat(("user", "Hi."), max_tokens=1)))

    def logprobs(self, request: ChatRequest) -> tuple[dict[str, float], int, float]:
        """The choices' log-probabilities, the longest choice's tokens, and the call's
        wall seconds."""
        start = time.perf_counter()
        completion = asyncio.run(self.provider.generate(request))
        took = time.perf_counter() - start
        assert completion.choice_logprobs is not None
        return dict(completion.choice_logprobs), completion.usage.output_tokens, took


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
) -> tuple[Measured, Measured]:
    """Log-odds of A against B in both orders, for the question and its reverse (asked
    right after it: the two prompts share everything up to the question). The warm
    reply's log-odds, sign flipped for the reverse question."""
    odds: dict[bool, list[tuple[float, float]]] = {False: [], True: []}
    seconds: dict[bool, list[float]] = {False: [], True: []}
    for scenario, warm, cold in pairs:
        by_order: dict[bool, list[float]] = {False: [], True: []}
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
            for reverse in (False, True):
                scores, _, took = judge.logprobs(reverse_question(request) if reverse else request)
                by_order[reverse].append(scores["A"] - scores["B"])
                seconds[reverse].append(took)
        for reverse in (False, True):
            first, second = by_order[reverse]
            odds[reverse].append((first, second))
    forward, backward = (
        Measured(
            [sign * (first - second) / 2 for first, second in odds[reverse]],
            [(first + second) / 2 for first, second in odds[reverse]],
            seconds[reverse],
        )
        for reverse, sign in ((False, 1.0), (True, -1.0))
    )
    return forward, backward


def likelihood(
    judge: Judge,
    constitution: Constitution,
    pairs: Sequence[tuple[Scenario, str, str]],
    persona: str | None = None,
) -> Measured:
    """Score (follows minus breaks, per token) of each reply once, in the engine's order
    (consecutive calls share their prompt: scenario and speaker), by the judge in
    `persona`; warm minus cold per pair."""
    replies: dict[str, tuple[Scenario, set[str]]] = {}
    for scenario, warm, cold in pairs:
        replies.setdefault(scenario.id, (scenario, set()))[1].update((warm, cold))
    loglik: dict[tuple[str, str, str], float] = {}
    tokens: dict[tuple[str, str], int] = {}
    seconds = []
    for scenario, texts in replies.values():
        for speaker in SPEAKERS:
            for reply in sorted(texts):
                request = speaker_request(persona, constitution, scenario.text, reply, speaker)
                scores, tokens[scenario.id, reply], took = judge.logprobs(request)
                (loglik[scenario.id, reply, speaker],) = scores.values()
                seconds.append(took)

    def score(scenario: Scenario, reply: str) -> float:
        return reply_score(
            loglik[scenario.id, reply, "follows"],
            loglik[scenario.id, reply, "breaks"],
            tokens[scenario.id, reply],
        )

    advantage = [score(s, warm) - score(s, cold) for s, warm, cold in pairs]
    return Measured(advantage, None, seconds)


def summary(values: Sequence[float]) -> str:
    """'mean (s.e.)' over pairs."""
    se = statistics.stdev(values) / math.sqrt(len(values)) if len(values) > 1 else math.nan
    return f"{statistics.fmean(values):+.3f} ({se:.3f})"


def share_positive(values: Sequence[float]) -> float:
    return sum(v > 0 for v in values) / len(values)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--scenarios", type=int, default=16, help="the demo's 16")
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
        forward, reverse = letters(judge, constitution, config, pairs)
        scored = likelihood(judge, constitution, pairs)
        bundled = likelihood(judge, load_constitution("kindness", DEMO.parent), pairs)
        in_character = [
            (f"likelihood, judging as {m.name.split('-')[0]} persona", m.persona)
            for m in (warm[0], cold[0])
        ]
        driven = [(f + r) / 2 for f, r in zip(forward.advantage, reverse.advantage, strict=True)]
        surface = [(f - r) / 2 for f, r in zip(forward.advantage, reverse.advantage, strict=True)]
        for name, measured in (
            ("letters", forward),
            ("letters, reverse question (sign flipped)", reverse),
            ("letters: question-driven part (fwd + rev)/2", Measured(driven, None, [])),
            ("letters: surface part (fwd - rev)/2", Measured(surface, None, [])),
            ("likelihood (follows - breaks, per token)", scored),
            ("likelihood, the bundled kindness constitution (10 criteria)", bundled),
            *(
                (name, likelihood(judge, constitution, pairs, persona))
                for name, persona in in_character
            ),
        ):
            rows.append(
                [
                    spec.removeprefix("local:"),
                    name,
                    summary(measured.advantage),
                    f"{share_positive(measured.advantage):.2f}",
                    summary(measured.position) if measured.position else "",
                    f"{statistics.fmean(measured.seconds):.3f}" if measured.seconds else "",
                ]
            )
    print(
        table(
            [
                "judge",
                "format",
                "warm advantage (s.e.): letters log-odds, likelihood nats/token",
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
