"""Is the consensus right on small, unbalanced, self-serving and tied data? (issue 26)

Every study is drawn by eigenjury.testing.verdicts, a generator unlike the fit's own
model: scenario effects shared by every judge, judges with tastes of their own, a
threshold tie zone, first-slot advantages, unbalanced designs. The truth is what the
fit converges to on the same population (the mean of `TRUTH_FITS` reference fits to
`TRUTH_SCENARIOS` scenarios, whose own error is a twentieth of a 300-scenario study's;
one fit to 4,000 was off by a third, enough to move the coverage by several points), as in
benchmarks/calibration.py. Six parts:

1. Collapse at 30 scenarios (8 models, one 3 logits above the field, one 3 below):
   the share of point estimates with any Elo more than 600 from the truth or any trust
   below 1e-6; beside it, the same fit without the prior and the self-preference term
   (maximum likelihood, as before issue 26), in the same run; then the prior's scales:
   bias, RMSE and collapses.
2. Coverage of the 95% Elo intervals (percentile, the default, and BCa from the same
   draws), RMSE, family-wise error of the simultaneous
   "A above B" statements and their power (share of the true orderings stated), at
   30 / 100 / 300 scenarios, unbalanced design (models drawn into groups with odds 1
   to 3, judges 1 to 4), and the share of bootstrap rounds that broke down.
3. Self-serving judges: the weakest model's Elo with one, two and all peers picking
   themselves whenever they judge themselves, minus honest (the same noise), peers
   only and beside an honest crowd; and a judge of a population drawn by `eigenjury
   simulate` that always crowns itself, by the prior of its self-preference.
4. Ties: a 1-logit pair's Elo gap among N = 2, 8, 32, 128 models, judged by one crowd
   that ties often (no Elo should shrink as models are added).
5. Time per fit.
6. Collusion: a judge that never favours itself but always picks a friend (m7 picks
   m6), and a ring of two (m6 and m7 pick each other); peers only and beside an
   honest crowd, 60 and 400 scenarios, three judges a scenario. The friend's Elo gain
   over honest verdicts (the same noise), median and largest over the studies (for
   the ring, the larger of the two members' gains), by the self-trust rule (s_ii +
   min(delta_i^+, 0) with delta_i^+ the bound on the self-preference, eigenjury's since
   0.3.4; s_ii + min(delta_i, 0), 0.3.1 to 0.3.3; the fitted s_ii alone, as 0.3.0, on
   the same fit),
   beside the EigenBench model (no self-preference term) and the ring under damping
   toward uniform pre-trust; and how far the rule moves honest fits. Whether the fit
   names the colluders (stats.favour), and how often it names an honest judge.

    python benchmarks/consensus_validity.py [--quick] [--part intervals|collusion] [--jobs N]
"""

from __future__ import annotations

import argparse
import dataclasses
import time
from concurrent.futures import ProcessPoolExecutor
from typing import Any

import numpy as np

from _common import environment, table
from eigenjury.stats import PeerRanking, ScorePrior, make_population, simulate_verdicts
from eigenjury.stats.bootstrap import percentile_interval
from eigenjury.stats.eigentrust import own_scores
from eigenjury.stats.elo import to_elo
from eigenjury.stats.verdicts import VerdictTable
from eigenjury.testing.verdicts import Design, verdicts

TRUTH_SCENARIOS = 40_000
TRUTH_FITS = 4
MILD = (1.2, 0.8, 0.5, 0.2, -0.2, -0.5, -0.8, -1.2)
UNBALANCED = {"inclusion": (1, 3, 1, 2, 1, 3, 1, 2), "judge_weight": (1, 4, 2, 1, 3, 1, 4, 2)}
COLLAPSE_ELO = 600.0


def truth(design: Design) -> np.ndarray:
    """The mean of TRUTH_FITS reference fits: one fit to 40,000 scenarios still moves by
    2 to 4 Elo from draw to draw, a tenth of a 300-scenario study's error, enough to
    move that study's coverage by two points."""
    big = dataclasses.replace(design, scenarios=TRUTH_SCENARIOS)
    fits = [PeerRanking(bootstrap=0).fit(verdicts(big, 10_000 + k)).elo_ for k in range(TRUTH_FITS)]
    return np.mean(fits, axis=0)


def collapse(seed: int, design: Design, true_elo: np.ndarray) -> tuple[bool, bool]:
    table_ = verdicts(design, seed)
    now = PeerRanking(bootstrap=0).fit(table_)
    before = PeerRanking(bootstrap=0, prior=None, self_preference=False).fit(table_)

    def broke(r: PeerRanking) -> bool:
        return bool(np.abs(r.elo_ - true_elo).max() > COLLAPSE_ELO or r.trust_.min() < 1e-6)

    return broke(now), broke(before)


def prior_sweep(
    seed: int, prior: tuple[float, float, float] | None, true_elo: np.ndarray
) -> np.ndarray:
    """One 30-scenario study's Elo error under a prior (None: maximum likelihood)."""
    fit = PeerRanking(bootstrap=0, prior=None if prior is None else ScorePrior(*prior))
    return np.asarray(fit.fit(verdicts(Design(scenarios=30), seed)).elo_ - true_elo)


def crowned_gain(self_sd: float) -> float:
    """A judge of a simulated population (eigenjury simulate, 6 models, 1,500 scenarios)
    that always crowns itself: its Elo gain over honest verdicts, by the prior of its
    self-preference."""
    population = make_population(6, 2, seed=5)
    table = simulate_verdicts(population, n_scenarios=1500, seed=6)
    verdict = table.verdict.copy()
    verdict[(table.judge == 0) & (table.first == 0)] = 1
    verdict[(table.judge == 0) & (table.second == 0)] = 2
    prior = ScorePrior(self_sd=self_sd)
    honest = PeerRanking(bootstrap=0, prior=prior).fit(table)
    crowned = PeerRanking(bootstrap=0, prior=prior).fit(dataclasses.replace(table, verdict=verdict))
    return float(crowned.elo_[0] - honest.elo_[0])


def study(seed: int, design: Design, true_elo: np.ndarray, rounds: int) -> dict[str, Any]:
    start = time.perf_counter()
    r = PeerRanking(bootstrap=rounds, seed=seed, n_jobs=1, interval="bca")
    r.fit(verdicts(design, seed))
    lo, hi = percentile_interval(r.bootstrap_["elo"])
    bca_lo, bca_hi = r.elo_ci_[:, 0], r.elo_ci_[:, 1]
    above = true_elo[:, None] > true_elo[None, :]
    stated = r.elo_difference_ci_[:, :, 0] > 0.01
    return {
        "inside": (lo <= true_elo) & (true_elo <= hi),
        "inside_bca": (bca_lo <= true_elo) & (true_elo <= bca_hi),
        "error": r.elo_ - true_elo,
        "wrong": bool((stated & ~above).any()),
        "power": float((stated & above).sum() / above.sum()),
        "top_bottom": bool(stated[int(np.argmax(true_elo)), int(np.argmin(true_elo))]),
        "degenerate": r.bootstrap_degenerate_ / rounds,
        "separated": bool(r.separation_.groups),
        "seconds": time.perf_counter() - start,
    }


def gain(seed: int, design: Design, crown: tuple[int, ...]) -> float:
    honest = PeerRanking(bootstrap=0).fit(verdicts(design, seed))
    crowned = PeerRanking(bootstrap=0).fit(
        verdicts(dataclasses.replace(design, self_serving=crown), seed)
    )
    k = honest.models_.index("m7")
    return float(crowned.elo_[k] - honest.elo_[k])


def tie_gap(n: int, seed: int) -> float:
    """The Elo gap of m0 over m1 (1 logit apart), half the scenarios showing them alone,
    the rest a random pair of all n models."""
    rng = np.random.default_rng(seed)
    design = Design(
        strengths=(1.0, 0.0, *rng.normal(0.0, 0.7, n - 2)),
        scenarios=3000,
        group_size=2,
        peers_judge=False,
        crowd=1,
        tie_zone=0.8,
        scenario_sd=0.0,
        taste_sd=0.0,
        focus=(0, 1),
    )
    r = PeerRanking(bootstrap=0).fit(verdicts(design, seed))
    return float(r.elo_[r.models_.index("m0")] - r.elo_[r.models_.index("m1")])


def befriend(table: VerdictTable, judge: str, friend: str) -> VerdictTable:
    """`judge` picks `friend` whenever the friend is one of the two (by name: a crowd's
    judges come first in the table's models)."""
    judge_, friend_ = table.models.index(judge), table.models.index(friend)
    verdict = table.verdict.copy()
    verdict[(table.judge == judge_) & (table.first == friend_)] = 1
    verdict[(table.judge == judge_) & (table.second == friend_)] = 2
    return dataclasses.replace(table, verdict=verdict)


def collusion_gains(seed: int, design: Design, ring: bool) -> dict[str, float]:
    """The friend's Elo gain (a ring: the larger of its two members') over honest
    verdicts, by trust rule and model, and for a ring under damping."""
    honest_table = verdicts(design, seed)
    rigged_table = befriend(honest_table, "m7", "m6")
    members = ["m6", "m7"] if ring else ["m6"]
    if ring:
        rigged_table = befriend(rigged_table, "m6", "m7")

    def elo(table: VerdictTable, rule: str, **options: Any) -> np.ndarray:
        fit = PeerRanking(bootstrap=0, **options).fit(table)
        return rule_elo(fit, rule)[[fit.models_.index(m) for m in members]]

    def gain(rule: str, **options: Any) -> float:
        moved = elo(rigged_table, rule, **options) - elo(honest_table, rule, **options)
        return float(moved.max())

    rigged = PeerRanking(bootstrap=0).fit(rigged_table)
    colluders = {("m7", "m6"), ("m6", "m7")} if ring else {("m7", "m6")}
    named = {(f.judge, f.evaluee) for f in rigged.favours_}
    out = {
        "named": float(colluders <= named),
        "bound": gain("bound"),
        "estimate": gain("estimate"),
        "fitted": gain("fitted"),
        "eigenbench": gain("bound", self_preference=False),
    }
    if ring and not design.crowd:
        for damping in (0.2, 0.5):
            out[f"damping {damping:g}"] = gain("bound", damping=damping)
    return out


def rule_elo(fit: PeerRanking, rule: str) -> np.ndarray:
    """Elo on the same fit by a self-trust rule: "bound" (eigenjury's, s_ii +
    min(delta_i^+, 0)), "estimate" (0.3.1 to 0.3.3: s_ii + min(delta_i, 0)) or
    "fitted" (0.3.0: the fitted s_ii alone)."""
    if rule == "bound":
        return np.asarray(fit.elo_)
    scores = fit.btd_.scores()
    if rule == "estimate":
        scores = own_scores(scores, fit.btd_.self_bias_)
    _, trust = fit._statistic.trust(scores, fit.btd_.judge_mask_)
    return np.asarray(to_elo(trust))


RULES = ("bound", "estimate", "fitted")


def rules_truth(design: Design) -> list[np.ndarray]:
    big = dataclasses.replace(design, scenarios=TRUTH_SCENARIOS)
    fit = PeerRanking(bootstrap=0).fit(verdicts(big, 10_000))
    return [rule_elo(fit, rule) for rule in RULES]


def rules_error(seed: int, design: Design, truths: list[np.ndarray]) -> list[float]:
    """One honest study's Elo RMSE against each rule's own large-sample truth."""
    fit = PeerRanking(bootstrap=0).fit(verdicts(design, seed))
    return [
        float(np.sqrt(np.mean((rule_elo(fit, rule) - truth) ** 2)))
        for rule, truth in zip(RULES, truths, strict=True)
    ]


def false_alarm(seed: int, population: str) -> float:
    """Whether an honest study names a judge as favouring an evaluee (stats.favour)."""
    if population.startswith("simulate"):
        models, scenarios = (int(x) for x in population.split()[1:])
        population_ = make_population(models, 2, seed=seed)
        table_ = simulate_verdicts(population_, n_scenarios=scenarios, seed=seed)
    else:
        design = {
            "default 30": Design(scenarios=30, **UNBALANCED),  # type: ignore[arg-type]
            "default 300": Design(scenarios=300, **UNBALANCED),  # type: ignore[arg-type]
            "mild 400": Design(strengths=MILD, scenarios=400, judges_per_scenario=3),
            "strong tastes 400": Design(
                strengths=MILD, scenarios=400, judges_per_scenario=3, taste_sd=1.0
            ),
        }[population]
        table_ = verdicts(design, seed)
    return float(bool(PeerRanking(bootstrap=0).fit(table_).favours_))


def collusion(pool: ProcessPoolExecutor, n: int) -> None:
    rows = []
    for label, crowd in (("peers only", 0), ("beside a crowd", 1)):
        for scenarios in (60, 400):
            design = Design(strengths=MILD, scenarios=scenarios, judges_per_scenario=3, crowd=crowd)
            for ring in (False, True):
                gains = list(pool.map(collusion_gains, range(n), [design] * n, [ring] * n))
                row = [label, scenarios, "ring of two" if ring else "one colluder"]
                for key in (
                    "bound",
                    "estimate",
                    "fitted",
                    "eigenbench",
                    "damping 0.2",
                    "damping 0.5",
                ):
                    got = [g[key] for g in gains if key in g]
                    row.append(f"{np.median(got):.0f} / {np.max(got):.0f}" if got else "")
                row.append(f"{np.mean([g['named'] for g in gains]):.2f}")
                rows.append(row)
    print(f"\n6. collusion: the friend's Elo gain over honest verdicts, median / largest of {n}")
    print(
        table(
            [
                "judges",
                "scenarios",
                "attack",
                "s_ii + min(delta_i^+, 0)",
                "s_ii + min(delta_i, 0) (0.3.1-0.3.3)",
                "fitted s_ii (0.3.0)",
                "no self-preference",
                "damping 0.2",
                "damping 0.5",
                "named",
            ],
            rows,
        )
    )
    rows = []
    for scenarios in (30, 100, 300):
        design = Design(scenarios=scenarios)
        truths = rules_truth(design)
        count = 4 * n
        errors = np.array(
            list(pool.map(rules_error, range(count), [design] * count, [truths] * count))
        )
        rows.append([scenarios, count, *(f"{e:.1f}" for e in errors.mean(axis=0))])
    print("\n6b. honest studies (the default design): Elo RMSE against each rule's own truth")
    print(
        table(
            ["scenarios", "studies", "delta_i^+ (bound)", "delta_i (0.3.1-0.3.3)", "fitted s_ii"],
            rows,
        )
    )
    rows = []
    count = 4 * n
    for population in (
        "default 30",
        "default 300",
        "mild 400",
        "strong tastes 400",
        "simulate 8 200",
        "simulate 8 1000",
        "simulate 16 400",
    ):
        named = list(pool.map(false_alarm, range(count), [population] * count))
        rows.append([population, count, f"{np.mean(named):.3f}"])
    print("\n6c. honest studies in which some judge is named as favouring an evaluee")
    print(table(["population (scenarios)", "studies", "named"], rows))


def coverage(results: list[dict[str, Any]], key: str) -> str:
    """Mean share of a study's intervals that hold the truth, with its standard error
    over studies (a study's intervals share its draws)."""
    per_study = np.array([r[key] for r in results]).mean(axis=1)
    return f"{per_study.mean():.3f} ({per_study.std(ddof=1) / np.sqrt(len(results)):.3f})"


def intervals(pool: ProcessPoolExecutor, studies: dict[int, int], rounds: int) -> None:
    """Part 2: coverage by both interval methods (from the same draws), errors,
    simultaneous statements and their power."""
    rows = []
    for scenarios, count in studies.items():
        design = Design(scenarios=scenarios, **UNBALANCED)  # type: ignore[arg-type]
        true_elo = truth(design)
        results = list(
            pool.map(study, range(count), [design] * count, [true_elo] * count, [rounds] * count)
        )

        error = np.array([r["error"] for r in results])
        rows.append(
            [
                scenarios,
                count,
                coverage(results, "inside"),
                coverage(results, "inside_bca"),
                f"{np.sqrt(np.mean(error**2)):.0f}",
                f"{np.abs(error.mean(axis=0)).max():.0f}",
                f"{np.mean([r['wrong'] for r in results]):.3f}",
                f"{np.mean([r['power'] for r in results]):.2f}",
                f"{np.mean([r['top_bottom'] for r in results]):.2f}",
                f"{np.mean([r['degenerate'] for r in results]):.4f}",
                f"{np.mean([r['separated'] for r in results]):.2f}",
                f"{np.median([r['seconds'] for r in results]):.1f}",
            ]
        )
    print(f"\n2. 95% intervals, {rounds} bootstrap rounds, unbalanced design")
    print(
        table(
            [
                "scenarios",
                "studies",
                "Elo coverage, percentile (se)",
                "BCa (se)",
                "RMSE",
                "largest bias",
                "family-wise error",
                "power",
                "top above bottom",
                "rounds broken",
                "separated",
                "s per fit",
            ],
            rows,
        )
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer studies and rounds")
    parser.add_argument("--part", choices=("all", "intervals", "collusion"), default="all")
    parser.add_argument("--jobs", type=int, default=2, help="processes")
    args = parser.parse_args()
    studies = {30: 12, 100: 8, 300: 6} if args.quick else {30: 60, 100: 40, 300: 72}
    rounds = 100 if args.quick else 200
    print(environment())
    pool = ProcessPoolExecutor(args.jobs)
    if args.part == "collusion":
        collusion(pool, 4 if args.quick else 10)
        pool.shutdown()
        return
    if args.part == "intervals":
        intervals(pool, studies, rounds)
        pool.shutdown()
        return

    base = Design(scenarios=30)
    true_elo = truth(base)
    n_collapse = 20 if args.quick else 200
    flags = list(
        pool.map(collapse, range(n_collapse), [base] * n_collapse, [true_elo] * n_collapse)
    )
    now, before = np.mean([f[0] for f in flags]), np.mean([f[1] for f in flags])
    print(
        f"\n1. collapse at 30 scenarios, {n_collapse} studies: {now:.1%} now, "
        f"{before:.1%} without the prior and the self-preference term"
    )

    n_sweep = 10 if args.quick else 40
    rows = []
    for prior in ((2.0, 1.0, 20.0), (4.0, 2.0, 20.0), (8.0, 4.0, 20.0), None):
        errors = np.array(
            list(pool.map(prior_sweep, range(n_sweep), [prior] * n_sweep, [true_elo] * n_sweep))
        )
        rows.append(
            [
                "none (maximum likelihood)"
                if prior is None
                else ", ".join(f"{x:g}" for x in prior),
                f"{np.abs(errors.mean(axis=0)).max():.0f}",
                f"{np.sqrt(np.mean(errors**2)):.0f}",
                f"{np.mean(np.abs(errors).max(axis=1) > COLLAPSE_ELO):.2f}",
            ]
        )
    print(f"\n1b. prior scales at 30 scenarios, {n_sweep} studies (consensus, judge, self sd)")
    print(table(["prior", "largest bias", "RMSE", "collapsed"], rows))

    intervals(pool, studies, rounds)

    rows = []
    for label, crowd, scenarios, per in (
        ("peers only", 0, 60, 1),
        ("peers only", 0, 30, 3),
        ("peers only", 0, 400, 1),
        ("beside a crowd", 1, 60, 1),
        ("beside a crowd", 1, 400, 1),
    ):
        design = Design(strengths=MILD, scenarios=scenarios, judges_per_scenario=per, crowd=crowd)
        for crown in ((7,), (6, 7), tuple(range(8))):
            n = 6 if args.quick else 20
            gains = list(pool.map(gain, range(n), [design] * n, [crown] * n))
            rows.append(
                [
                    label,
                    f"{scenarios} x {per}",
                    len(crown),
                    f"{np.median(gains):.1f}",
                    f"{np.max(gains):.1f}",
                ]
            )
    print("\n3. self-serving judges: the weakest model's Elo gain over honest verdicts")
    print(table(["judges", "scenarios x judges", "self-serving", "median gain", "largest"], rows))

    gains = list(pool.map(crowned_gain, (4.0, 20.0)))
    print("\n3b. a judge that always crowns itself (simulated population, 1,500 scenarios):")
    print(
        table(
            ["self-preference prior sd", "Elo gain"],
            [[4, f"{gains[0]:.1f}"], [20, f"{gains[1]:.1f}"]],
        )
    )

    ns, repeats = (2, 8, 32, 128), 3 if args.quick else 10
    rows = []
    for n in ns:
        gaps = np.array(list(pool.map(tie_gap, [n] * repeats, range(repeats))))
        rows.append([n, f"{gaps.mean():.1f} ({gaps.std(ddof=1) / np.sqrt(repeats):.1f})"])
    print(f"\n4. a 1-logit pair's Elo gap, one crowd judge tying often ({repeats} studies each)")
    print(table(["models", "Elo gap, mean (se)"], rows))
    collusion(pool, 4 if args.quick else 10)
    pool.shutdown()


if __name__ == "__main__":
    main()
