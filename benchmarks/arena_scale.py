"""Arena-size style control: eigenjury against LMArena's arena-rank and evalica, with
intervals, side by side in one run.

1,670,000 simulated battles between 129 models (the size of the leaderbot data; the
data itself cannot be downloaded here), style habits per model and a planted style
effect on 4 features, Davidson ties (style_control.simulate, the generator of section
14), written as one Parquet battle file. Every method starts from that file:

- eigenjury: `read_verdicts(path, features=...)` then `PeerRanking(dim=1,
  position_bias=False, style=..., bootstrap=0)` (the controlled and the uncontrolled
  fits in one call), and without style (`style=()`, the file read without its
  features: the fit evalica and arena-rank's BradleyTerry make); with
  `interval="sandwich"` (200 draws from the cluster-robust
  covariance); with 100 scenario-bootstrap rounds (`--rounds`, each battle its own
  scenario).
- arena-rank 0.1.1: `ContextualBradleyTerry` on the same standardised features
  (reg 1e-8) and `BradleyTerry` without them, XLA compilation included.
- evalica 0.4.2: `bradley_terry` without style (it has none).

Rankings are compared by Kendall's tau: eigenjury's crowd scores with style against
arena-rank's contextual ratings, without style against arena-rank's and evalica's.

    python -m venv /tmp/arena-venv && . /tmp/arena-venv/bin/activate
    pip install arena-rank==0.1.1 evalica==0.4.2 pandas==3.1.1 -e .
    python benchmarks/arena_scale.py [--battles 1670000] [--repeat 2] [--quick]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import evalica
import numpy as np
import pandas as pd
from arena_rank.models.bradley_terry import BradleyTerry
from arena_rank.models.contextual_bradley_terry import ContextualBradleyTerry
from arena_rank.utils.data_utils import ContextualPairDataset, PairDataset
from scipy.stats import kendalltau

from _common import environment, spread, table
from eigenjury.stats.consensus import PeerRanking
from eigenjury.verdict_files import CROWD, read_verdicts
from style_control import FEATURES, CompileClock, arena_frame, same_features, simulate


def eigenjury_fit(
    path: Path, features: tuple[str, ...] = FEATURES, **settings: Any
) -> tuple[float, PeerRanking]:
    start = time.perf_counter()
    verdicts = read_verdicts(path, features=features or None)
    ranking = PeerRanking(dim=1, position_bias=False, style=features, **settings).fit(verdicts)
    return time.perf_counter() - start, ranking


def arena_rank_fit(
    clock: CompileClock, dataset: Callable[[], Any], model: Callable[[int], Any]
) -> tuple[float, dict[str, float]]:
    """Seconds to build an arena-rank dataset from the file and fit `model` on it
    (compilation included), and the ratings by name."""
    start = time.perf_counter()
    data = dataset()
    fitted = model(len(data.competitors))
    clock.arena_fit(fitted, data)
    ratings = np.asarray(fitted.params["ratings"])
    return time.perf_counter() - start, dict(zip(data.competitors, ratings, strict=True))


def crowd_scores(ranking: PeerRanking) -> dict[str, float]:
    judges = list(ranking.judges_)
    scores = ranking.btd_.scores()[judges.index(CROWD)]
    return {name: float(scores[judges.index(name)]) for name in ranking.models_}


def tau(a: dict[str, float], b: dict[str, float]) -> float:
    names = sorted(a)
    return float(kendalltau([a[n] for n in names], [b[n] for n in names]).statistic)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--battles", type=int, default=1_670_000)
    parser.add_argument("--models", type=int, default=129)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=100)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--seed", type=int, default=33)
    parser.add_argument("--quick", action="store_true", help="100,000 battles, once")
    args = parser.parse_args()
    if args.quick:
        args.battles, args.repeat, args.rounds = 100_000, 1, 40
    clock = CompileClock()
    seconds: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory() as folder:
        battles = simulate(args.models, args.battles, True, args.seed, Path(folder))
        runs: dict[str, Any] = {}
        for _ in range(args.repeat):
            for name, settings in (
                ("eigenjury, point fit (with and without style)", {"bootstrap": 0}),
                ("eigenjury, point fit without style", {"bootstrap": 0, "features": ()}),
                (
                    "eigenjury, sandwich intervals (200 draws)",
                    {"bootstrap": 200, "interval": "sandwich"},
                ),
            ):
                took, runs[name] = eigenjury_fit(battles.path, **settings)
                seconds.setdefault(name, []).append(took)
            took, runs["arena-rank CBT"] = arena_rank_fit(
                clock,
                lambda: ContextualPairDataset.from_pandas(
                    arena_frame(battles.path, same_features),
                    list(FEATURES),
                    reweighted=False,
                    normalize_features=False,
                ),
                lambda n: ContextualBradleyTerry(n, len(FEATURES), reg=1e-8),
            )
            seconds.setdefault("arena-rank ContextualBradleyTerry", []).append(took)
            took, runs["arena-rank BT"] = arena_rank_fit(
                clock, lambda: PairDataset.from_pandas(arena_frame(battles.path)), BradleyTerry
            )
            seconds.setdefault("arena-rank BradleyTerry (no style)", []).append(took)
            start = time.perf_counter()
            frame = pd.read_parquet(battles.path, columns=["model_a", "model_b", "winner"])
            winner = evalica.Winner
            codes = {"model_a": winner.X, "model_b": winner.Y, "tie": winner.Draw}
            outcome = frame["winner"].map(codes)
            result = evalica.bradley_terry(frame["model_a"], frame["model_b"], outcome)
            runs["evalica"] = {k: float(np.log(v)) for k, v in result.scores.items()}
            seconds.setdefault("evalica.bradley_terry (no style)", []).append(
                time.perf_counter() - start
            )
        took, runs["boot"] = eigenjury_fit(
            battles.path, bootstrap=args.rounds, n_jobs=args.jobs, seed=0
        )
        seconds[f"eigenjury, {args.rounds} bootstrap rounds (n_jobs {args.jobs}, once)"] = [took]
    point = runs["eigenjury, point fit (with and without style)"]
    sandwich = runs["eigenjury, sandwich intervals (200 draws)"]
    boot = runs["boot"]
    controlled = crowd_scores(point)
    uncontrolled = dict(zip(point.models_, point.elo_uncontrolled_, strict=True))
    width = {
        name: float(np.median(np.diff(r.elo_ci_, axis=1)))
        for name, r in (("sandwich", sandwich), ("bootstrap", boot))
    }
    print(f"# arena scale: {args.battles:,} battles, {args.models} models, 4 style features\n")
    print(environment("jax", "arena-rank", "evalica", "pyarrow"))
    print()
    rows = [[name, spread(times)] for name, times in seconds.items()]
    print(table(["method", "seconds (best / median)"], rows))
    print()
    agreement = [
        ("eigenjury with style vs arena-rank CBT", controlled, runs["arena-rank CBT"]),
        ("eigenjury without style vs arena-rank BT", uncontrolled, runs["arena-rank BT"]),
        ("eigenjury without style vs evalica", uncontrolled, runs["evalica"]),
    ]
    print(table(["comparison", "Kendall tau"], [[n, f"{tau(a, b):.4f}"] for n, a, b in agreement]))
    print(
        f"\nmedian 95% Elo interval width: sandwich {width['sandwich']:.1f}, "
        f"bootstrap {width['bootstrap']:.1f}; style coefficients "
        f"{np.round(point.style_coef_, 4).tolist()}"
    )


if __name__ == "__main__":
    main()
