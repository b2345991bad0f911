"""Cluster bootstrap over scenarios, run across processes.

Verdicts from one scenario share the responses being judged (and usually the
judge), so they are correlated; resampling rows would make intervals too narrow.
Each round draws scenarios with replacement, which is one reweighting of the
per-scenario counts, and refits. Round r always uses the r-th child of the seed, so
results do not depend on how many processes ran them.

Workers are forked on Linux: they start in milliseconds and share the counts
copy-on-write; they die with the command and stop at once on Ctrl-C or SIGTERM
(processes.worker_pool). (Each fit limits itself to one BLAS thread; see `_threads`.)
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Sequence

import numpy as np
from scipy.special import ndtr, ndtri

from eigenjury.processes import worker_pool
from eigenjury.stats.verdicts import FloatArray, ScenarioCounts, VerdictCounts, tally

Statistic = Callable[[VerdictCounts], dict[str, FloatArray]]
RoundMap = Callable[
    [ScenarioCounts, Statistic, Sequence[np.random.SeedSequence]], list[dict[str, FloatArray]]
]

_worker_state: tuple[ScenarioCounts, Statistic] | None = None


def cluster_bootstrap(
    data: ScenarioCounts,
    statistic: Statistic,
    *,
    rounds: int,
    seed: int | None = 0,
    n_jobs: int | None = None,
    map_rounds: RoundMap | None = None,
) -> dict[str, FloatArray]:
    """Apply `statistic` to `rounds` scenario resamples; arrays stacked on axis 0.

    `statistic` must be picklable when n_jobs > 1 (a module-level class instance).
    n_jobs None uses every core available to this process. `map_rounds` runs the
    rounds elsewhere instead (a cluster: it gets the data, the statistic and the
    rounds' seeds, and returns their results in order).
    """
    if rounds < 1:
        raise ValueError(f"rounds must be at least 1, got {rounds}")
    seeds = np.random.SeedSequence(seed).spawn(rounds)
    jobs = min(available_cores() if n_jobs is None else max(1, n_jobs), rounds)
    if map_rounds is not None:
        results = map_rounds(data, statistic, seeds)
    elif jobs == 1:
        results = run_rounds(data, statistic, seeds)
    else:
        chunks = [list(c) for c in np.array_split(np.arange(rounds), 4 * jobs) if len(c)]
        with worker_pool(jobs, _init_worker, (data, statistic)) as pool:
            parts = pool.map(_run_chunk, [[seeds[i] for i in c] for c in chunks])
            results = [r for part in parts for r in part]
    return {key: np.stack([r[key] for r in results]) for key in results[0]}


def min_rounds(ci: float) -> int:
    """The fewest rounds whose equal-tailed `ci` interval has a draw beyond each end.

    With fewer, both ends are the extreme draws (or interpolations towards them): the
    interval is far narrower than its nominal coverage, down to zero width for one round.
    """
    return math.ceil(2.0 / (1.0 - ci) - 1e-9)


def rounds_problem(rounds: int, ci: float) -> str | None:
    """Why `rounds` bootstrap rounds cannot give a `ci` interval (0 means none), or None."""
    need = min_rounds(ci)
    if 0 < rounds < need:
        return (
            f"{rounds} bootstrap round{'s' * (rounds > 1)} cannot give a {100 * ci:g}% interval: "
            f"it needs at least {need} (2 / (1 - ci)) so that each tail holds a draw; "
            f"use {need} or more, or 0 for no intervals"
        )
    return None


def percentile_interval(samples: FloatArray, ci: float = 0.95) -> tuple[FloatArray, FloatArray]:
    """Equal-tailed percentile interval over axis 0."""
    if not 0.0 < ci < 1.0:
        raise ValueError(f"ci must lie in (0, 1), got {ci}")
    tail = 50.0 * (1.0 - ci)
    low, high = np.percentile(samples, [tail, 100.0 - tail], axis=0)
    return np.asarray(low), np.asarray(high)


def group_jackknife(
    data: ScenarioCounts, statistic: Statistic, *, groups: int = 20, seed: int | None = 0
) -> dict[str, FloatArray]:
    """Apply `statistic` with each of `groups` random groups of scenarios left out in
    turn; arrays stacked on axis 0.

    What :func:`bca_interval` needs for its acceleration; leaving out groups of
    scenarios rather than one at a time keeps it at `groups` fits, and whole scenarios
    for the same reason the bootstrap resamples them.
    """
    if groups < 2:
        raise ValueError(f"groups must be at least 2, got {groups}")
    groups = min(groups, data.n_scenarios)
    group = np.random.default_rng(seed).permutation(data.n_scenarios) % groups
    results = [statistic(data.counts((group != g).astype(np.float64))) for g in range(groups)]
    return {key: np.stack([r[key] for r in results]) for key in results[0]}


def bca_interval(
    samples: FloatArray, estimate: FloatArray, jackknife: FloatArray, ci: float = 0.95
) -> tuple[FloatArray, FloatArray]:
    """Bias-corrected and accelerated (BCa) interval over axis 0 (Efron 1987).

    The percentile interval assumes the draws scatter around the estimate the way the
    estimate scatters around the truth. A biased estimator (a shrunk, thinly fitted
    one) puts its draws off-centre by about the same bias again, so the percentile
    interval doubles the bias. BCa shifts the percentile levels by z0, the normal
    quantile of the share of draws below the estimate (that bias), and by the
    acceleration a from the `jackknife` values (how the spread changes with the value).
    """
    if not 0.0 < ci < 1.0:
        raise ValueError(f"ci must lie in (0, 1), got {ci}")
    rounds = len(samples)
    below = np.mean(samples < estimate, axis=0) + 0.5 * np.mean(samples == estimate, axis=0)
    z0 = ndtri(np.clip(below, 0.5 / rounds, 1.0 - 0.5 / rounds))
    influence = jackknife.mean(axis=0) - jackknife
    spread = 6.0 * np.sum(influence**2, axis=0) ** 1.5
    acceleration = np.divide(
        np.sum(influence**3, axis=0), spread, out=np.zeros_like(z0), where=spread > 0
    )
    ordered = np.sort(samples, axis=0)

    def end(z: float) -> FloatArray:
        level = ndtr(z0 + (z0 + z) / (1.0 - acceleration * (z0 + z)))
        position = level * (rounds - 1)  # np.percentile's linear interpolation
        below_index = np.floor(position).astype(np.int64)
        above_index = np.minimum(below_index + 1, rounds - 1)
        low = np.take_along_axis(ordered, below_index[None], axis=0)[0]
        high = np.take_along_axis(ordered, above_index[None], axis=0)[0]
        return np.asarray(low + (position - below_index) * (high - low))

    tail = ndtri(0.5 * (1.0 - ci))
    return end(tail), end(-tail)


def available_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1


def resample_weights(n_scenarios: int, seed: np.random.SeedSequence) -> FloatArray:
    """How many times each scenario is drawn in one bootstrap round."""
    rng = np.random.default_rng(seed)
    drawn = rng.integers(n_scenarios, size=n_scenarios)
    return tally(drawn, None, n_scenarios)


def run_rounds(
    data: ScenarioCounts, statistic: Statistic, seeds: Sequence[np.random.SeedSequence]
) -> list[dict[str, FloatArray]]:
    """The rounds with these seeds, one after another (what every worker runs)."""
    return [statistic(data.counts(resample_weights(data.n_scenarios, s))) for s in seeds]


def _init_worker(data: ScenarioCounts, statistic: Statistic) -> None:
    global _worker_state
    _worker_state = (data, statistic)


def _run_chunk(seeds: list[np.random.SeedSequence]) -> list[dict[str, FloatArray]]:
    assert _worker_state is not None
    data, statistic = _worker_state
    return run_rounds(data, statistic, seeds)
