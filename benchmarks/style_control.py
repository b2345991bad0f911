"""Style control side by side with LMArena's arena-rank (its ContextualBradleyTerry).

Battles are simulated with a known truth: 60 models with Bradley-Terry strengths
(N(0, 0.8^2) logits), per-model style habits (log length around a model's own mean,
stronger models a little more verbose, as on the arena; headers, list items and bold
spans as Poisson counts at a model's own rates), random pairs in random order, and a
planted style effect on the win logit: BETA times the normalised difference
(a - b) / (a + b) of each feature divided by its standard deviation over the battles.
Two data sets: one without ties (Bradley-Terry), one with ties (Davidson's model,
tie propensity NU). Each is written as a Parquet battle file in the arena convention
(model_a, model_b, winner, length_a, length_b, headers_a, ..., bold_b), and every
method starts from that file.

- eigenjury: `read_verdicts(path, features=FEATURES)`, then
  `PeerRanking(dim=1, position_bias=False, style=FEATURES, bootstrap=0)`: one external
  judge (the crowd); its style-held-equal Elo (`elo_`), and the fit without style
  (`elo_uncontrolled_`) from the same call. With ties its Elo is compressed (a tie
  counts as half of "at least as good", see PeerRanking), so the crowd's Davidson
  scores (`btd_.scores()`, 400 / ln 10 per logit) are shown too.
- arena-rank, same features: the same normalised differences divided by the same
  standard deviation (not centred, as eigenjury), `normalize_features=False`,
  `reweighted=False`, reg 1e-8: the maximum-likelihood fit of the same model, so
  coefficients and Elo must agree without ties. With ties they differ by design:
  eigenjury fits Davidson's tie model, arena-rank counts a tie as half a win.
  Its `BradleyTerry` (no features, not reweighted) is the uncontrolled counterpart.
- arena-rank as published: LMArena's recipe (examples/example_utils.py and the
  leaderboard notebook: the normalised difference centred and divided by its standard
  deviation, then the defaults: reweighting by pair, reg 1.0), for reference.
- referee: the logistic maximum likelihood (a tie as half a win) by Newton's method in
  numpy on the same features: arena-rank's objective solved to machine precision, and
  eigenjury's too where there are no ties.

Elo is compared after centring (arena-rank: 1000 + 400 / ln 10 per logit; eigenjury's
Elo with one external judge and no ties has the same spread). arena-rank recompiles
its L-BFGS loop on every fit (a fresh jitted closure per call), so each fit's XLA
compile time, read from jax.monitoring, is shown beside its wall time; the first call
also compiles the loss.

arena-rank pins numpy and jax, so it runs in a virtual environment of its own:

    python -m venv /tmp/arena-venv && . /tmp/arena-venv/bin/activate
    pip install arena-rank==0.1.1 -e .
    python benchmarks/style_control.py [--battles N] [--repeat K] [--quick]
"""

from __future__ import annotations

import argparse
import math
import statistics
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jax
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
from arena_rank.models.bradley_terry import BradleyTerry
from arena_rank.models.contextual_bradley_terry import ContextualBradleyTerry
from arena_rank.utils.data_utils import ContextualPairDataset, PairDataset
from jax import monitoring
from scipy.stats import kendalltau, spearmanr

from _common import environment, spread, table, timed
from eigenjury.stats.consensus import PeerRanking
from eigenjury.verdict_files import CROWD, read_verdicts

FEATURES = ("length", "headers", "lists", "bold")
BETA = np.array([0.25, 0.04, 0.06, 0.03])  # planted logit shift per SD of normalised difference
NU = 0.6  # Davidson tie propensity of the data set with ties
WINNERS = np.array(["tie", "model_a", "model_b"])  # by outcome code: 0 tie, 1 a, 2 b
OUTCOME = {"model_a": 1.0, "model_b": 0.0, "tie": 0.5}  # arena-rank's, for the referee
ELO_PER_LOGIT = 400 / math.log(10)
SAME_REG = 1e-8  # arena-rank's L2 on the coefficients in the like-for-like fit
CONTROLLED = "eigenjury PeerRanking, elo_"
SCORES = "eigenjury PeerRanking, crowd's scores"
UNCONTROLLED = "eigenjury PeerRanking, elo_uncontrolled_"
REFEREE = "referee: logistic MLE, Newton"
SAME = "arena-rank CBT, same features"
PUBLISHED = "arena-rank CBT, as published"
ARENA_BT = "arena-rank BradleyTerry"

FloatArray = np.ndarray[Any, np.dtype[np.float64]]


@dataclass(frozen=True)
class Battles:
    """A simulated data set: its truth and the file holding its battles."""

    name: str
    models: tuple[str, ...]
    strength: FloatArray  # true logit strength per model, centred
    path: Path
    n: int
    tie_share: float


@dataclass(frozen=True)
class Estimates:
    coef: FloatArray | None  # per feature; None without style control
    elo: dict[str, float]  # centred


Measured = tuple[str, Estimates, float, float, float]  # name, estimates, prepare, fit, compile


@dataclass
class Result:
    """One method's estimates on one data set (from the last round), and its timings."""

    estimates: Estimates
    prepare: list[float] = field(default_factory=list)  # reading the file into its form
    fit: list[float] = field(default_factory=list)
    compile: list[float] = field(default_factory=list)  # XLA compile seconds within `fit`


def simulate(n_models: int, n_battles: int, ties: bool, seed: int, folder: Path) -> Battles:
    """Draw battles with planted strengths and style effects and write their Parquet file."""
    rng = np.random.default_rng(seed)
    strength = rng.normal(0.0, 0.8, n_models)
    strength -= strength.mean()
    log_length = np.log(350.0) + 0.25 * strength + rng.normal(0.0, 0.35, n_models)
    markdown_rate = rng.gamma(1.0, (1.5, 4.0, 3.0), size=(n_models, 3))  # headers, lists, bold
    a = rng.integers(n_models, size=n_battles)
    b = (a + 1 + rng.integers(n_models - 1, size=n_battles)) % n_models  # uniform over others

    def replies(model: np.ndarray) -> np.ndarray:
        length = np.rint(np.exp(log_length[model] + rng.normal(0.0, 0.5, len(model))))
        return np.column_stack([np.maximum(length, 1.0), rng.poisson(markdown_rate[model])])

    style_a, style_b = replies(a), replies(b)
    z = standardised(normalised_difference(style_a, style_b))
    half = 0.5 * (strength[a] - strength[b] + z @ BETA)
    # Davidson relative to the midpoint of the two strengths: logits (log nu, x, -x).
    tie_logit = np.full(n_battles, np.log(NU) if ties else -np.inf)
    logits = np.column_stack([tie_logit, half, -half])
    p = np.exp(logits - logits.max(axis=1, keepdims=True))
    cumulative = np.cumsum(p / p.sum(axis=1, keepdims=True), axis=1)
    outcome = np.minimum((rng.random(n_battles)[:, None] > cumulative).sum(axis=1), 2)
    models = tuple(f"model-{i:02d}" for i in range(n_models))
    names = np.array(models)
    columns: dict[str, Any] = {"model_a": names[a], "model_b": names[b], "winner": WINNERS[outcome]}
    for f, feature in enumerate(FEATURES):
        columns[f"{feature}_a"] = style_a[:, f].astype(np.int64)
        columns[f"{feature}_b"] = style_b[:, f].astype(np.int64)
    name = "with ties" if ties else "no ties"
    path = folder / f"battles-{name.replace(' ', '-')}.parquet"
    pq.write_table(pa.table(columns), path)
    return Battles(name, models, strength, path, n_battles, float(np.mean(outcome == 0)))


def normalised_difference(a: np.ndarray, b: np.ndarray) -> FloatArray:
    """LMArena's (a - b) / (a + b), the sum 0 replaced by 1 (examples/example_utils.py)."""
    total = a + b
    return np.asarray((a - b) / np.where(total == 0, 1, total), dtype=np.float64)


def standardised(diff: FloatArray) -> FloatArray:
    """Divided by the standard deviation, not centred: eigenjury's (stats.style)."""
    return diff / diff.std(axis=0)


def sides(frame: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """The feature columns of reply a and of reply b, (battles, features) each."""
    a = frame[[f"{f}_a" for f in FEATURES]].to_numpy(np.float64)
    b = frame[[f"{f}_b" for f in FEATURES]].to_numpy(np.float64)
    return a, b


def centred_elo(names: Any, logits: Any) -> dict[str, float]:
    elo = np.asarray(logits, dtype=np.float64) * ELO_PER_LOGIT
    return dict(zip(names, elo - elo.mean(), strict=True))


def logistic_mle(frame: pd.DataFrame, z: FloatArray) -> tuple[list[str], FloatArray, FloatArray]:
    """Competitors, ratings and coefficients maximising the Bradley-Terry likelihood with
    covariates (ties as half wins) by Newton's method; the first rating is fixed at 0."""
    models, index = np.unique(np.concatenate([frame.model_a, frame.model_b]), return_inverse=True)
    n, m = len(frame), len(models)
    x = np.zeros((n, m + z.shape[1]))
    rows = np.arange(n)
    x[rows, index[:n]] += 1.0
    x[rows, index[n:]] -= 1.0
    x[:, m:] = z
    x = x[:, 1:]
    y = frame.winner.map(OUTCOME).to_numpy(np.float64)
    theta = np.zeros(x.shape[1])
    for _ in range(50):
        p = 1.0 / (1.0 + np.exp(-(x @ theta)))
        step = np.linalg.solve((x * (p * (1.0 - p))[:, None]).T @ x, x.T @ (y - p))
        theta += step
        if np.max(np.abs(step)) < 1e-12:
            break
    return [str(s) for s in models], np.concatenate([[0.0], theta[: m - 1]]), theta[m - 1 :]


class CompileClock:
    """XLA's compile seconds, from jax.monitoring (tracing is left out: nested jitted
    functions are traced inside their caller's trace, so its events overlap)."""

    def __init__(self) -> None:
        self.seconds = 0.0
        monitoring.register_event_duration_secs_listener(self._record)

    def _record(self, event: str, duration: float, **_: Any) -> None:
        if event == "/jax/core/compile/backend_compile_duration":
            self.seconds += duration

    def arena_fit(self, model: Any, dataset: Any) -> tuple[float, float]:
        """Wall and compile seconds of one arena-rank fit."""
        before = self.seconds
        seconds, _ = timed(lambda: jax.block_until_ready(model.fit(dataset).params))
        return seconds, self.seconds - before


def run_all(battles: Battles, repeat: int, clock: CompileClock) -> dict[str, Result]:
    """Every method on one data set, interleaved `repeat` times (estimates from the last)."""
    results: dict[str, Result] = {}
    for _ in range(repeat):
        measured = eigenjury_fits(battles.path)
        measured += arena_fits(battles.path, clock)
        for name, estimates, prepare, fit, compiled in measured:
            result = results.setdefault(name, Result(estimates))
            result.estimates = estimates
            result.prepare.append(prepare)
            result.fit.append(fit)
            result.compile.append(compiled)
    return results


def eigenjury_fits(path: Path) -> list[Measured]:
    """PeerRanking's controlled Elo, the crowd's scores behind it, its uncontrolled Elo;
    it also checks that eigenjury's feature scales are LMArena's standard deviations."""
    read_s, verdicts = timed(lambda: read_verdicts(path, features=FEATURES))
    ranking = PeerRanking(dim=1, position_bias=False, style=FEATURES, bootstrap=0)
    fit_s, _ = timed(lambda: ranking.fit(verdicts))
    scale = normalised_difference(*sides(pd.read_parquet(path))).std(axis=0)
    if not np.allclose(scale, ranking.style_scale_, rtol=1e-9, atol=0.0):
        raise SystemExit(f"feature scales differ: {scale} vs {ranking.style_scale_}")
    coef = np.asarray(ranking.style_coef_, dtype=np.float64)
    judges = list(ranking.judges_)
    crowd = ranking.btd_.scores()[judges.index(CROWD)]
    scores = crowd[[judges.index(name) for name in ranking.models_]]
    elo, plain = (np.asarray(e) / ELO_PER_LOGIT for e in (ranking.elo_, ranking.elo_uncontrolled_))
    return [
        (CONTROLLED, Estimates(coef, centred_elo(ranking.models_, elo)), read_s, fit_s, 0.0),
        (SCORES, Estimates(coef, centred_elo(ranking.models_, scores)), read_s, fit_s, 0.0),
        (UNCONTROLLED, Estimates(None, centred_elo(ranking.models_, plain)), read_s, fit_s, 0.0),
    ]


def arena_frame(path: Path, features: Callable[[pd.DataFrame], None] | None = None) -> pd.DataFrame:
    """The battles as pandas reads them, with the feature columns `features` adds."""
    frame = pd.read_parquet(path)
    if features is not None:
        features(frame)
    return frame


def same_features(frame: pd.DataFrame) -> None:
    frame[list(FEATURES)] = standardised(normalised_difference(*sides(frame)))


def published_features(frame: pd.DataFrame) -> None:
    raw = pd.DataFrame(normalised_difference(*sides(frame)), columns=FEATURES)
    frame[list(FEATURES)] = (raw - raw.mean()) / raw.std()


def arena_fits(path: Path, clock: CompileClock) -> list[Measured]:
    """The referee, and arena-rank with the same features, as published, and without."""
    prepare_s, frame = timed(lambda: arena_frame(path, same_features))
    referee_s, (names, ratings, coef) = timed(
        lambda: logistic_mle(frame, frame[list(FEATURES)].to_numpy())
    )
    measured: list[Measured] = [
        (REFEREE, Estimates(coef, centred_elo(names, ratings)), prepare_s, referee_s, 0.0)
    ]
    datasets: list[tuple[str, Callable[[], Any], Callable[[int], Any]]] = [
        (
            SAME,
            lambda: ContextualPairDataset.from_pandas(
                arena_frame(path, same_features),
                list(FEATURES),
                reweighted=False,
                normalize_features=False,
            ),
            lambda n: ContextualBradleyTerry(n, len(FEATURES), reg=SAME_REG),
        ),
        (
            PUBLISHED,
            lambda: ContextualPairDataset.from_pandas(
                arena_frame(path, published_features), list(FEATURES)
            ),
            lambda n: ContextualBradleyTerry(n, len(FEATURES)),
        ),
        (ARENA_BT, lambda: PairDataset.from_pandas(arena_frame(path)), BradleyTerry),
    ]
    for name, dataset, rating_system in datasets:
        prepare_s, data = timed(dataset)
        model = rating_system(len(data.competitors))
        fit_s, compile_s = clock.arena_fit(model, data)
        coef = np.asarray(model.params["coeffs"]) if "coeffs" in model.params else None
        elo = centred_elo(data.competitors, model.params["ratings"])
        measured.append((name, Estimates(coef, elo), prepare_s, fit_s, compile_s))
    return measured


def compare(elo: dict[str, float], reference: dict[str, float]) -> tuple[float, float, float]:
    """Spearman, Kendall and max |Elo difference| against `reference` (same names)."""
    names = sorted(reference)
    x = np.array([elo[n] for n in names])
    y = np.array([reference[n] for n in names])
    return (
        float(spearmanr(x, y).statistic),
        float(kendalltau(x, y).statistic),
        float(np.max(np.abs(x - y))),
    )


def rank_change(controlled: Result, plain: Result) -> dict[str, int]:
    """Per model, its rank without style control minus its rank with it."""

    def rank(result: Result) -> dict[str, int]:
        elo = result.estimates.elo
        return {name: r for r, name in enumerate(sorted(elo, key=lambda n: -elo[n]))}

    with_style, without = rank(controlled), rank(plain)
    return {name: without[name] - with_style[name] for name in with_style}


def report(battles: Battles, results: dict[str, Result], repeat: int) -> None:
    truth = centred_elo(battles.models, battles.strength)
    truth_elo = np.array([truth[n] for n in battles.models])
    base = results[CONTROLLED].estimates
    assert base.coef is not None
    print(
        f"\n## {battles.name}: {len(battles.models)} models, {battles.n:,} battles "
        f"({battles.tie_share:.0%} ties)\n"
    )
    rows: list[list[Any]] = [
        ["truth (planted)", *(f"{b:.4f}" for b in BETA), *[""] * 6, "1.000", "1.0000"]
    ]
    for name in (CONTROLLED, SCORES, REFEREE, SAME, PUBLISHED):
        result = results[name].estimates
        assert result.coef is not None
        rho, tau, gap = compare(result.elo, base.elo)
        ratio = result.coef / base.coef
        slope = np.polyfit(truth_elo, [result.elo[n] for n in battles.models], 1)[0]
        rows.append(
            [
                name,
                *(f"{c:.4f}" for c in result.coef),
                f"{np.max(np.abs(result.coef - base.coef)):.2g}",
                f"{ratio.min():.5f} - {ratio.max():.5f}",
                f"{np.max(np.abs(result.coef - BETA)):.3f}",
                f"{rho:.6f}",
                f"{tau:.6f}",
                f"{gap:.3g}",
                f"{slope:.3f}",
                f"{compare(result.elo, truth)[0]:.4f}",
            ]
        )
    print(
        table(
            [
                "method",
                *(f"β {f}" for f in FEATURES),
                "max abs Δβ vs eigenjury",
                "β ratio to eigenjury",
                "max abs Δβ vs planted",
                "Spearman vs eigenjury elo_",
                "Kendall vs eigenjury elo_",
                "max abs ΔElo vs eigenjury elo_",
                "Elo slope vs truth",
                "Spearman vs truth",
            ],
            rows,
        )
    )
    rho, tau, gap = compare(results[ARENA_BT].estimates.elo, results[UNCONTROLLED].estimates.elo)
    same, scores = results[SAME].estimates, results[SCORES].estimates
    assert same.coef is not None and scores.coef is not None
    ratings_slope = np.polyfit(
        [scores.elo[n] for n in battles.models], [same.elo[n] for n in battles.models], 1
    )[0]
    coef_ratio = np.median(same.coef / scores.coef)
    print(
        "\narena-rank (same features) against eigenjury's crowd scores: ratings slope "
        f"{ratings_slope:.4f}, β ratio {coef_ratio:.4f} (median over features)."
    )
    eigenjury_change = rank_change(results[CONTROLLED], results[UNCONTROLLED])
    arena_change = rank_change(results[SAME], results[ARENA_BT])
    agree = sum(eigenjury_change[n] == arena_change[n] for n in battles.models)
    print(
        f"Without style control, arena-rank BradleyTerry vs eigenjury's elo_uncontrolled_: "
        f"Spearman {rho:.6f}, Kendall {tau:.6f}, max abs ΔElo {gap:.3g}. Style control moves "
        f"{sum(v != 0 for v in eigenjury_change.values())} of {len(battles.models)} models "
        f"in eigenjury, {sum(v != 0 for v in arena_change.values())} in arena-rank (same "
        f"features); the rank change is the same for {agree} models.\n"
    )
    timing_rows = []
    for name in (CONTROLLED, REFEREE, SAME, PUBLISHED, ARENA_BT):
        result = results[name]
        later = result.fit[1:] or result.fit
        compiled = result.compile[1:] or result.compile
        timing_rows.append(
            [
                "eigenjury PeerRanking (controlled + uncontrolled)" if name == CONTROLLED else name,
                spread(result.prepare),
                f"{result.fit[0]:.3g}",
                f"{result.compile[0]:.3g}",
                spread(later),
                f"{statistics.median(compiled):.3g}",
            ]
        )
    print(
        table(
            [
                f"seconds (best / median of {repeat})",
                "read file + prepare",
                "first fit",
                "of which XLA compile",
                "later fits",
                "of which XLA compile (median)",
            ],
            timing_rows,
        )
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--battles", type=int, default=100_000)
    parser.add_argument("--models", type=int, default=60)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--seed", type=int, default=14)
    parser.add_argument("--quick", action="store_true", help="10,000 battles, 2 rounds")
    args = parser.parse_args()
    if args.quick:
        args.battles, args.repeat = 10_000, 2
    clock = CompileClock()
    planted = ", ".join(f"{f} {b}" for f, b in zip(FEATURES, BETA, strict=True))
    print(f"# Style control: eigenjury vs arena-rank (planted β: {planted}; ties: ν {NU})\n")
    print(environment("jax", "arena-rank", "pyarrow", "pandas"))
    with tempfile.TemporaryDirectory() as folder:
        for ties in (False, True):
            battles = simulate(args.models, args.battles, ties, args.seed, Path(folder))
            report(battles, run_all(battles, args.repeat, clock), args.repeat)


if __name__ == "__main__":
    main()
