"""Do likelihood verdicts follow length? The bundled judges on replies we wrote.

`benchmarks/data/kind_unkind_replies.jsonl` holds, for 35 of the bundled everyday
scenarios, a kind and an unkind reply written for this benchmark (no model wrote them);
`benchmarks/data/neutral_sentences.json` holds two-sentence paddings, also written for
it: three flat statements and two polite closings. Each judge scores every reply, and
every reply with each padding appended, through eigenjury's own local provider and
`speaker_request` (follows and breaks, the demo's constitution), as a likelihood judge
of a run does. From those scoring calls, for two scoring rules:

- "sum" (eigenjury before issue 26): a reply's score is the sum over its tokens of
  log p(token | follows) - log p(token | breaks), and a verdict is the probability
  sigmoid(score(first) - score(second));
- "per token" (peer.likelihood now): the mean of that log-ratio over the reply's
  tokens, and the verdict is the reply with the higher score (a hard verdict);

it reports
(a) length: the same reply against itself plus a padding: how often the longer one is
    preferred (the share of verdicts, ties half; for the sum also its mean probability,
    the issue's figure), with the standard error over scenarios and the number of
    scenarios where the longer one wins more often than not (a verdict depends on the
    two scores only, so both presentation orders give the same);
(b) the kind reply against the unkind one with a padding appended to it;
(c) the kind reply against the unkind one as written;
and, for the per-token score, whether one temperature could turn score differences
into calibrated probabilities: sigmoid(difference / T) fitted by maximum likelihood on
the kind-unkind pairs of the odd-numbered scenarios and scored on the even ones, and
the other way round (the labelled pairs are never the pairs a temperature is scored on).

    python benchmarks/likelihood_length.py            # 35 scenarios, 4 judges: 3,920 scoring calls
    python benchmarks/likelihood_length.py --quick    # 6 scenarios, SmolLM2 only
    python benchmarks/likelihood_length.py --save calls.json   # keep the scoring calls
    python benchmarks/likelihood_length.py --load calls.json   # the tables again, no call
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from scipy.optimize import minimize_scalar

from _common import ROOT, environment, table
from eigenjury.config import load_config
from eigenjury.models.factory import make_provider
from eigenjury.models.spec import ModelSpec
from eigenjury.models.types import Provider
from eigenjury.peer.config import RankConfig
from eigenjury.peer.data import Constitution, load_constitution, load_scenarios
from eigenjury.peer.likelihood import SPEAKERS, reply_score
from eigenjury.peer.prompts import speaker_request

DEMO = ROOT / "src" / "eigenjury" / "data" / "configs" / "demo.yaml"
DATA = ROOT / "benchmarks" / "data"
REPLIES = DATA / "kind_unkind_replies.jsonl"
# Two sentences each, appended after a space; "flat": no warmth, help or judgement;
# "polite": closings a kindness constitution may well reward.
SENTENCES = json.loads((DATA / "neutral_sentences.json").read_text(encoding="utf-8"))
PADDINGS: dict[str, str] = {**SENTENCES["flat"], **SENTENCES["polite"]}
# (label, model, the demo member whose persona the judge takes, or None)
JUDGES = (
    ("SmolLM2, no persona", "local:smollm2-135m", None),
    ("SmolLM2 as warm-smol", "local:smollm2-135m", "warm-smol"),
    ("SmolLM2 as cold-smol", "local:smollm2-135m", "cold-smol"),
    ("Gemma, no persona", "local:gemma3-270m", None),
)


@dataclass(frozen=True)
class Written:
    """One scenario's text and our two replies to it."""

    scenario: str
    text: str
    kind: str
    unkind: str


@dataclass(frozen=True)
class Scored:
    """A reply's two log-likelihoods (follows, breaks) and its length in tokens."""

    follows: float
    breaks: float
    tokens: int


Rule = Callable[[Scored], float]
RULES: dict[str, Rule] = {
    "sum": lambda s: s.follows - s.breaks,
    "per token": lambda s: reply_score(s.follows, s.breaks, s.tokens),
}


def written(limit: int) -> list[Written]:
    texts = {s.id: s.text for s in load_scenarios("everyday", DEMO.parent)}
    rows = [json.loads(line) for line in REPLIES.read_text(encoding="utf-8").splitlines()]
    return [Written(r["scenario"], texts[r["scenario"]], r["kind"], r["unkind"]) for r in rows][
        :limit
    ]


def variants(w: Written) -> dict[str, str]:
    """The texts a judge scores for one scenario: kind, unkind, and each padded."""
    out = {"kind": w.kind, "unkind": w.unkind}
    for tone in ("kind", "unkind"):
        for name, padding in PADDINGS.items():
            out[f"{tone}+{name}"] = f"{out[tone]} {padding}"
    return out


def score_all(
    provider: Provider,
    persona: str | None,
    constitution: Constitution,
    scenarios: Sequence[Written],
) -> dict[tuple[str, str], Scored]:
    """(scenario, variant) -> its scores, in the engine's order (consecutive calls share
    the prompt: scenario and speaker)."""

    async def go() -> dict[tuple[str, str], Scored]:
        got: dict[tuple[str, str, str], tuple[float, int]] = {}
        for w in scenarios:
            texts = variants(w)
            for speaker in SPEAKERS:
                for name, text in texts.items():
                    request = speaker_request(persona, constitution, w.text, text, speaker)
                    completion = await provider.generate(request)
                    assert completion.choice_logprobs is not None
                    logprob = next(iter(completion.choice_logprobs.values()))
                    got[w.scenario, name, speaker] = (logprob, completion.usage.output_tokens)
        return {
            (s, n): Scored(got[s, n, "follows"][0], got[s, n, "breaks"][0], got[s, n, "follows"][1])
            for s, n, speaker in got
            if speaker == "follows"
        }

    return asyncio.run(go())


def hard(d: float) -> float:
    """A hard verdict for the first reply: 1 if its score is higher, 0.5 if equal."""
    return 1.0 if d > 0 else 0.5 if d == 0 else 0.0


def soft(d: float) -> float:
    """The sum rule's probability for the first reply: sigmoid(d), as eigenjury gave it."""
    return 1.0 / (1.0 + math.exp(-d)) if d >= 0 else math.exp(d) / (1.0 + math.exp(d))


def per_scenario(
    scores: dict[tuple[str, str], Scored],
    scenarios: Sequence[Written],
    rule: Rule,
    pairs: Callable[[str], list[tuple[str, str]]],
    verdict: Callable[[float], float],
) -> list[float]:
    """Per scenario, the mean verdict for the first of each (first, second) variant pair."""
    return [
        statistics.fmean(
            verdict(rule(scores[w.scenario, a]) - rule(scores[w.scenario, b]))
            for a, b in pairs(w.scenario)
        )
        for w in scenarios
    ]


def summary(values: Sequence[float]) -> str:
    """'mean +- s.e. (share of scenarios above 0.5)'."""
    se = statistics.stdev(values) / math.sqrt(len(values)) if len(values) > 1 else math.nan
    above = sum(v > 0.5 for v in values)
    return f"{statistics.fmean(values):.3f} +- {se:.3f} ({above}/{len(values)})"


def padded(names: Sequence[str]) -> Callable[[str], list[tuple[str, str]]]:
    """(longer, shorter) pairs: each reply with a padding against itself. Both orders
    give the same verdict (a verdict depends on the two scores only), so one suffices."""
    return lambda s: [(f"{tone}+{n}", tone) for tone in ("kind", "unkind") for n in names]


def flipped(names: Sequence[str]) -> Callable[[str], list[tuple[str, str]]]:
    return lambda s: [("kind", f"unkind+{n}") for n in names]


def temperature(differences: Sequence[float]) -> float:
    """The T of sigmoid(d / T) with the largest likelihood that the first reply (the
    kind one) is the better, searched over 1e-4 to 1e2 nats per token."""
    d = np.asarray(differences)
    found = minimize_scalar(
        lambda log_t: float(np.logaddexp(0.0, -d / math.exp(log_t)).sum()),
        bounds=(math.log(1e-4), math.log(1e2)),
        method="bounded",
    )
    return math.exp(found.x)


def calibration(scores: dict[tuple[str, str], Scored], scenarios: Sequence[Written]) -> str:
    """Temperatures fitted on each half of the scenarios, and, on the other half, the
    mean probability they give the kind reply against the share of pairs it wins."""
    rule = RULES["per token"]
    d = [rule(scores[w.scenario, "kind"]) - rule(scores[w.scenario, "unkind"]) for w in scenarios]
    halves = (d[0::2], d[1::2])
    fitted = [temperature(h) for h in halves]
    held_p = [soft(x / t) for t, h in zip(fitted, reversed(halves), strict=True) for x in h]
    held_won = [hard(x) for h in reversed(halves) for x in h]
    return (
        f"T = {fitted[0]:.3g} / {fitted[1]:.3g}; held out: mean P(kind) "
        f"{statistics.fmean(held_p):.2f}, kind wins {statistics.fmean(held_won):.2f}"
    )


def rates(scores: dict[tuple[str, str], Scored], scenarios: Sequence[Written]) -> list[str]:
    """How the judge reads each text, in nats per token (mean +- s.e.): the kind and the
    unkind replies, and each padding as appended (its added log-ratio over its added
    tokens, over both replies)."""

    def mean_se(values: Sequence[float]) -> str:
        se = statistics.stdev(values) / math.sqrt(len(values))
        return f"{statistics.fmean(values):+.4f} +- {se:.4f}"

    def ratio(scenario: str, name: str) -> tuple[float, int]:
        s = scores[scenario, name]
        return s.follows - s.breaks, s.tokens

    out = [
        mean_se([RULES["per token"](scores[w.scenario, tone]) for w in scenarios])
        for tone in ("kind", "unkind")
    ]
    for name in PADDINGS:
        added = []
        for w in scenarios:
            for tone in ("kind", "unkind"):
                (longer, n_longer), (shorter, n_shorter) = (
                    ratio(w.scenario, f"{tone}+{name}"),
                    ratio(w.scenario, tone),
                )
                added.append((longer - shorter) / (n_longer - n_shorter))
        out.append(mean_se(added))
    return out


def by_tone(
    scores: dict[tuple[str, str], Scored], scenarios: Sequence[Written], names: Sequence[str]
) -> list[str]:
    """Per token: how often the padded reply wins, for the kind and the unkind replies."""
    rule = RULES["per token"]
    return [
        summary(
            per_scenario(
                scores,
                scenarios,
                rule,
                lambda s, t=tone: [(f"{t}+{n}", t) for n in names],  # type: ignore[misc]
                hard,
            )
        )
        for tone in ("kind", "unkind")
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenarios", type=int, default=35, help="of the 35 written")
    parser.add_argument("--quick", action="store_true", help="6 scenarios, SmolLM2 only")
    parser.add_argument("--save", help="write every scoring call's numbers to this JSON file")
    parser.add_argument("--load", help="read the scoring calls from a --save file, call nothing")
    args = parser.parse_args()
    judges = JUDGES[:1] if args.quick else JUDGES
    scenarios = written(6 if args.quick else args.scenarios)
    print(environment("llama-cpp-python"))
    config = load_config(RankConfig, DEMO)
    constitution = load_constitution(config.constitution, DEMO.parent)
    personas = {m.name: m.persona for m in config.population}
    flat, polite = list(SENTENCES["flat"]), list(SENTENCES["polite"])
    saved = json.loads(Path(args.load).read_text(encoding="utf-8")) if args.load else {}
    rows, read, raw = [], [], {}
    start = time.perf_counter()
    for label, spec, member in judges:
        if args.load:
            scores = {
                (key.split("|")[0], key.split("|")[1]): Scored(**value)
                for key, value in saved[label].items()
            }
        else:
            provider = make_provider(ModelSpec.parse(spec))
            persona = personas[member] if member else None
            scores = score_all(provider, persona, constitution, scenarios)
        raw[label] = {f"{s}|{n}": vars(v) for (s, n), v in scores.items()}
        read.append([label, *rates(scores, scenarios), *by_tone(scores, scenarios, flat)])
        for rule_name, rule in RULES.items():
            forms = [("share", hard)] + ([("mean P", soft)] if rule_name == "sum" else [])
            for form, verdict in forms:

                def measure(pairs: Callable[[str], list[tuple[str, str]]]) -> str:
                    return summary(per_scenario(scores, scenarios, rule, pairs, verdict))  # noqa: B023

                rows.append(
                    [
                        label,
                        f"{rule_name}, {form}",
                        measure(padded(flat)),
                        measure(padded(polite)),
                        measure(flipped(flat)),
                        measure(flipped(polite)),
                        measure(lambda s: [("kind", "unkind")]),
                        calibration(scores, scenarios) if rule_name == "per token" else "",
                    ]
                )
    print(
        table(
            [
                "judge",
                "rule, verdict",
                "(a) longer preferred, flat",
                "(a) longer preferred, polite",
                "(b) kind over unkind + flat",
                "(b) kind over unkind + polite",
                "(c) kind over unkind",
                "one temperature? (fit on one half, scored on the other)",
            ],
            rows,
        )
    )
    print(
        f"mean +- s.e. over {len(scenarios)} scenarios (number of scenarios above 0.5)\n\n"
        "How each judge reads the texts, nats per token (follows - breaks), and, per token, "
        "how often a flat padding wins for each tone:\n"
    )
    print(
        table(
            [
                "judge",
                "kind replies",
                "unkind replies",
                *(f"{n} (appended)" for n in PADDINGS),
                "flat-padded kind wins",
                "flat-padded unkind wins",
            ],
            read,
        )
    )
    took = "read from " + args.load if args.load else f"{time.perf_counter() - start:.0f} s"
    print(f"{len(scenarios)} scenarios; {took}")
    if args.save:
        Path(args.save).write_text(json.dumps(raw, indent=1), encoding="utf-8")


if __name__ == "__main__":
    main()
