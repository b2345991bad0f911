"""Judge calls needed by the adaptive design against random groups, in simulation.

A population from `make_population` plays through the whole `rank` pipeline with the
scripted provider: evaluees sign their replies, and each judge draws its verdict from
the true low-rank BTD model (its lens, tie propensity and position bias). For each
budget of judge calls, random groups of 4 (one judge per scenario, both orders) and
the adaptive design spend the same number of calls; the score is Kendall's tau
between the fitted Elo and the true trust. The table gives the mean tau per budget
and the calls each design needs to reach a given tau (interpolated).

    python benchmarks/adaptive_design.py [--quick]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import re
import tempfile
from pathlib import Path

import numpy as np
import yaml
from scipy.stats import kendalltau

from _common import environment, table, timed
from eigenjury.jobs import run_rank
from eigenjury.models.providers.scripted import register_script
from eigenjury.models.types import ChatRequest
from eigenjury.stats import Population, make_population

MEMBER = re.compile(r"\[member (\S+)\]")
REPLY = re.compile(r"Reply ([AB]):\n<reply>\n(.*?)\n</reply>", re.S)


def population_script(population: Population) -> None:
    """Register `scripted:sim`: replies and verdicts drawn from `population`."""
    index = {name: i for i, name in enumerate(population.models)}
    scores = population.lenses @ population.dispositions.T

    def reply(request: ChatRequest) -> str:
        system = request.messages[0].content
        me = MEMBER.search(system)
        assert me is not None
        if "Someone has come to you" in system:
            return f"[member {me.group(1)}]"
        judge = index[me.group(1)]
        replies = dict(REPLY.findall(request.messages[-1].content))
        a = index[MEMBER.search(replies["A"]).group(1)]  # type: ignore[union-attr]
        b = index[MEMBER.search(replies["B"]).group(1)]  # type: ignore[union-attr]
        half = 0.5 * population.position_bias[judge]
        logits = np.array(
            [
                np.log(population.tie_propensity[judge])
                + 0.5 * (scores[judge, a] + scores[judge, b]),
                scores[judge, a] + half,
                scores[judge, b] - half,
            ]
        )
        p = np.exp(logits - logits.max())
        digest = hashlib.sha256(repr(request.identity()).encode()).digest()
        u = random.Random(int.from_bytes(digest[:8], "big")).random() * p.sum()
        label = "tie" if u < p[0] else "A" if u < p[0] + p[1] else "B"
        return f"<verdict>{label}</verdict>"

    register_script("sim", reply)


def run(folder: Path, population: Population, design: str, calls: int, seed: int) -> float:
    sampling: dict[str, object] = {"design": design, "group_size": 4, "seed": seed}
    if design == "adaptive":
        sampling |= {"comparisons": calls, "rounds": 6}
        limit = None
    else:
        limit = max(1, calls // 12)
    config = {
        "population": [
            {"name": n, "model": "scripted:sim", "persona": f"[member {n}]"}
            for n in population.models
        ],
        "scenarios": {"source": str(folder / "scenarios.jsonl"), "limit": limit, "seed": seed},
        "sampling": sampling,
        "judging": {"reflections": False},
        "fit": {"bootstrap": 0},
        "output": str(folder / f"{design}-{calls}-{seed}"),
    }
    path = folder / f"{design}-{calls}-{seed}.yaml"
    path.write_text(yaml.safe_dump(config))
    result = run_rank(path, progress=False)
    assert result.record.run is not None
    spent = result.record.run.comparisons
    assert abs(spent - calls) <= 12, (design, calls, spent)
    elo = dict(zip(result.ranking.models_, result.ranking.elo_, strict=True))
    truth = population.trust()
    return float(kendalltau([elo[n] for n in population.models], truth).statistic)


def calls_to_reach(budgets: list[int], taus: list[float], target: float) -> float | None:
    """Judge calls at which the mean tau first reaches `target` (log-linear interpolation)."""
    for (b0, t0), (b1, t1) in zip(
        zip(budgets, taus, strict=True), zip(budgets[1:], taus[1:], strict=True), strict=False
    ):
        if t0 >= target:
            return float(b0)
        if t1 >= target:
            frac = (target - t0) / (t1 - t0)
            return float(np.exp(np.log(b0) + frac * (np.log(b1) - np.log(b0))))
    return float(budgets[0]) if taus and taus[0] >= target else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small smoke run")
    parser.add_argument("--models", type=int, default=12)
    parser.add_argument("--seeds", type=int, default=5)
    args = parser.parse_args()
    budgets = [240, 960] if args.quick else [240, 480, 960, 1920, 3840, 7680]
    seeds = range(2 if args.quick else args.seeds)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        with (folder / "scenarios.jsonl").open("w") as f:
            for i in range(1000):
                f.write(json.dumps({"id": f"s{i:04d}", "text": f"Scenario number {i}."}) + "\n")
        means: dict[str, list[float]] = {"random-groups": [], "adaptive": []}
        seconds = 0.0
        for calls in budgets:
            for design in means:
                taus = []
                for seed in seeds:
                    population = make_population(args.models, 2, seed=seed)
                    population_script(population)
                    elapsed, tau = timed(
                        lambda d=design, c=calls, s=seed, p=population: run(folder, p, d, c, s)
                    )
                    seconds += elapsed
                    taus.append(tau)
                means[design].append(float(np.mean(taus)))
    rows = [
        [f"{b:,}", f"{r:.3f}", f"{a:.3f}"]
        for b, r, a in zip(budgets, means["random-groups"], means["adaptive"], strict=True)
    ]
    print(
        f"# adaptive vs random groups: {args.models} models, d = 2, mean Kendall tau "
        f"over {len(seeds)} populations\n"
    )
    print(environment())
    print()
    print(table(["judge calls", "random groups", "adaptive"], rows))
    print()
    reach = []
    for target in (0.7, 0.8, 0.85, 0.9):
        r = calls_to_reach(budgets, means["random-groups"], target)
        a = calls_to_reach(budgets, means["adaptive"], target)
        ratio = f"{r / a:.1f}x" if r and a else "-"
        reach.append(
            [target, "-" if r is None else f"{r:,.0f}", "-" if a is None else f"{a:,.0f}", ratio]
        )
    print(table(["tau", "calls, random groups", "calls, adaptive", "fewer calls"], reach))
    print(f"\n{seconds:.0f} s in rank runs")


if __name__ == "__main__":
    main()
