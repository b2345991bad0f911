"""When is a length effect taste, and when substance? Style control against the truth,
and the check that tells the two apart (issue 26, part 7).

Style control holds the replies' length equal and reads the Elo off that fit. It
assumes length reaches the verdicts only through the judges' taste. Every study here
is drawn by eigenjury.testing.verdicts (a generator unlike the fit's own model: scenario
effects shared by every judge, judges with tastes of their own for a second trait, a
threshold tie zone, first-slot advantages), with reply lengths: a reply's log length is
log 200 + its model's habit (N(0, 0.3^2) per model) + `substance` x its quality +
N(0, 0.3^2) noise, and each judge adds `taste` x the normalised length difference
(a - b) / (a + b) to its verdict's log-odds. Three worlds, 8 models (strengths 1.2 to
-1.2 logits), 100 scenarios, 3 judges a scenario, groups of 4:

- substance: longer replies really are better (substance 0.5), judges have no taste;
- taste: lengths do not follow quality (substance 0), judges add taste 3.0;
- both: substance 0.5 and taste 3.0.

The truth is what judges with no taste for length give on content alone: a reference
fit (no style control) to 4,000 scenarios of the same design without the taste. Per
study: the fitted length coefficient (per standard deviation of normalised difference)
with its 95% interval (`--rounds` scenario-bootstrap rounds), the Elo spread (top minus
bottom) and the largest Elo error against the truth of the controlled Elo, the
uncontrolled Elo, and the Elo with the length coefficient held at the taste the check
measures (`PeerRanking(style_fixed=...)`).

The check (what `eigenjury style-check` does on a rank run): every judge compares 50
sampled replies with the same reply made longer by one standard deviation of the
study's normalised length differences (a ratio (1 + s) / (1 - s) for the study's scale
s), in both orders; the pooled taste (one coefficient, each judge its own position bias
and tie propensity: stats.taste) with a 95% interval from 300 bootstrap rounds over
the edited replies. "check says substance": the interval of fitted coefficient minus
measured taste (Zou and Donner's MOVER from the two intervals) lies above 0; "fitted
below taste": below 0. The planted taste per standard deviation is the generator's
(taste x the study's scale); Davidson's log-odds on verdicts with the generator's tie
zones run about 2 sigma(zone), 1.1x, above it, in the check and the fit alike.

    python benchmarks/style_substance.py [--studies N] [--quick]
"""

from __future__ import annotations

import argparse
import dataclasses
import time
from concurrent.futures import ProcessPoolExecutor
from typing import Any

import numpy as np

from _common import environment, table
from eigenjury.stats import PeerRanking
from eigenjury.stats.taste import difference_interval, measure_edit_effect
from eigenjury.testing.verdicts import Design, edit_verdicts, verdicts

MILD = (1.2, 0.8, 0.5, 0.2, -0.2, -0.5, -0.8, -1.2)
TRUTH_SCENARIOS = 4000
EDITED_REPLIES = 50
CHECK_ROUNDS = 300
WORLDS = {
    "substance": {"length_substance": 0.5, "length_taste": 0.0},
    "taste": {"length_substance": 0.0, "length_taste": 3.0},
    "both": {"length_substance": 0.5, "length_taste": 3.0},
}


def design(world: str) -> Design:
    world_lengths: dict[str, Any] = WORLDS[world]
    return Design(
        strengths=MILD, scenarios=100, length_sd=0.3, length_habit_sd=0.3, **world_lengths
    )


def truth(world: str) -> np.ndarray:
    """Elo on content alone: the same design, judges without taste, a large study."""
    big = dataclasses.replace(design(world), scenarios=TRUTH_SCENARIOS, length_taste=0.0)
    return np.asarray(PeerRanking(bootstrap=0).fit(verdicts(big, 10_000)).elo_)


def study(world: str, seed: int, rounds: int, true_elo: np.ndarray) -> dict[str, Any]:
    start = time.perf_counter()
    d = design(world)
    fitted = PeerRanking(style=["length"], bootstrap=rounds, seed=seed, n_jobs=1).fit(
        verdicts(d, seed)
    )
    coef, (low, high) = float(fitted.style_coef_[0]), fitted.style_ci_[0]
    scale = float(fitted.style_scale_[0])
    edits = edit_verdicts(d, EDITED_REPLIES, (1 + scale) / (1 - scale), scale, seed)
    pooled = measure_edit_effect(edits, rounds=CHECK_ROUNDS, seed=seed)[-1]
    assert pooled.effect is not None and pooled.effect_ci is not None
    taste_low, taste_high = pooled.effect_ci
    _, diff_low, diff_high = difference_interval(coef, (low, high), pooled.effect, pooled.effect_ci)
    at_taste = PeerRanking(
        style=["length"], style_fixed={"length": pooled.effect}, bootstrap=0, seed=seed
    ).fit(verdicts(d, seed))
    planted = WORLDS[world]["length_taste"] * scale
    elos = {
        "controlled": fitted.elo_,
        "uncontrolled": fitted.elo_uncontrolled_,
        "at measured taste": at_taste.elo_,
    }
    return {
        "coef": coef,
        "excludes 0": bool(low > 0 or high < 0),
        "taste": pooled.effect,
        "taste covers planted": bool(taste_low is not None and taste_low <= planted)
        and bool(taste_high is not None and taste_high >= planted),
        "planted": planted,
        "substance said": bool(diff_low is not None and diff_low > 0),
        "below said": bool(diff_high is not None and diff_high < 0),
        "spread": {k: float(np.ptp(v)) for k, v in elos.items()},
        "error": {k: float(np.max(np.abs(v - true_elo))) for k, v in elos.items()},
        "seconds": time.perf_counter() - start,
    }


def median(results: list[dict[str, Any]], key: str, part: str | None = None) -> float:
    return float(np.median([r[key] if part is None else r[key][part] for r in results]))


def share(results: list[dict[str, Any]], key: str) -> str:
    return f"{sum(r[key] for r in results)} / {len(results)}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--studies", type=int, default=20, help="studies per world")
    parser.add_argument("--rounds", type=int, default=60, help="bootstrap rounds of each fit")
    parser.add_argument("--quick", action="store_true", help="5 studies per world, 40 rounds")
    args = parser.parse_args()
    if args.quick:
        args.studies, args.rounds = 5, 40
    print(environment())
    print(
        f"\n{args.studies} studies per world; 8 models, 100 scenarios, 3 judges a scenario; "
        f"{args.rounds} scenario-bootstrap rounds; check: {EDITED_REPLIES} edited replies a "
        f"judge, both orders, {CHECK_ROUNDS} rounds\n"
    )
    rows, errors = [], []
    with ProcessPoolExecutor(2) as pool:
        for world in WORLDS:
            true_elo = truth(world)
            results = list(
                pool.map(
                    study,
                    [world] * args.studies,
                    range(args.studies),
                    [args.rounds] * args.studies,
                    [true_elo] * args.studies,
                )
            )

            rows.append(
                [
                    world,
                    f"{median(results, 'planted'):.2f}",
                    f"{median(results, 'coef'):.2f}",
                    share(results, "excludes 0"),
                    f"{median(results, 'taste'):.2f}",
                    share(results, "taste covers planted"),
                    share(results, "substance said"),
                    share(results, "below said"),
                    f"{np.ptp(true_elo):.0f}",
                    *(
                        f"{median(results, 'spread', k):.0f}"
                        for k in ("controlled", "uncontrolled", "at measured taste")
                    ),
                ]
            )
            errors.append(
                [
                    world,
                    *(
                        f"{median(results, 'error', k):.0f}"
                        for k in ("controlled", "uncontrolled", "at measured taste")
                    ),
                    f"{median(results, 'seconds'):.1f}",
                ]
            )
    print(
        table(
            [
                "world",
                "true taste per sd",
                "fitted coefficient (median)",
                "its 95% interval excludes 0",
                "measured taste (median)",
                "taste interval covers the planted taste",
                "check says substance",
                "check says fitted below taste",
                "true Elo spread",
                "controlled spread",
                "uncontrolled spread",
                "spread at measured taste",
            ],
            rows,
        )
    )
    print()
    print(
        table(
            [
                "world",
                "largest Elo error, controlled (median)",
                "uncontrolled",
                "at measured taste",
                "seconds a study",
            ],
            errors,
        )
    )


if __name__ == "__main__":
    main()
