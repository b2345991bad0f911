"""A compact jury against a large one, and the cascade between them, on simulated jurors.

Each criterion has a hidden truth (met or not) and a difficulty; a juror's vote is
right with probability that falls with difficulty (compact jurors fall faster), so
errors are correlated within a criterion, as with real juries. Votes are put into
eigenjury's own result objects and compared by `compare_pools`, the code behind
`eigenjury juries compare`; accuracy against the hidden truth is added here.

    python benchmarks/jury_cascade.py [--submissions 2000] [--quick]
"""

from __future__ import annotations

import argparse

import numpy as np

from _common import environment, table, timed
from eigenjury.contracts import (
    Criterion,
    CriterionResult,
    Jury,
    Submission,
    TaskResult,
    Vote,
    compare_pools,
    needs_escalation,
)

CRITERIA = 5  # per task, 20 points each, pass at 60
COMPACT = {"jurors": 5, "skill": 0.88, "slope": 0.4, "cost": 0.00012, "tokens": 90, "s": 0.6}
LARGE = {"jurors": 5, "skill": 0.96, "slope": 0.15, "cost": 0.0024, "tokens": 360, "s": 2.6}


def simulate(
    n: int, pool: dict[str, float], truth: np.ndarray, hard: np.ndarray, rng: np.random.Generator
) -> list[TaskResult]:
    criteria = [
        Criterion(id=f"c{k}", weight=20, grader="llm_judge", prompt="p") for k in range(CRITERIA)
    ]
    p_right = np.clip(pool["skill"] - pool["slope"] * hard, 0.5, 1.0)
    jurors = int(pool["jurors"])
    right = rng.random((n, CRITERIA, jurors)) < p_right[..., None]
    says_c = np.where(right, truth[..., None], ~truth[..., None])
    results = []
    for i in range(n):
        done = []
        for k, c in enumerate(criteria):
            votes = tuple(
                Vote(
                    f"j{j}",
                    "C" if says_c[i, k, j] else "I",
                    "",
                    output_tokens=int(pool["tokens"]),
                    latency_s=pool["s"],
                    cost_usd=pool["cost"],
                )
                for j in range(jurors)
            )
            done.append(CriterionResult(c, 2 * int(says_c[i, k].sum()) > jurors, votes))
        results.append(TaskResult(f"t{i}", "m", 60, tuple(done), Submission(f"t{i}", "m", "")))
    return results


def accuracy(results: list[TaskResult], truth: np.ndarray) -> float:
    passed = np.array([[c.passed for c in r.criteria] for r in results])
    return float((passed == truth).mean())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--submissions", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=1000)
    parser.add_argument("--quick", action="store_true", help="small smoke run")
    args = parser.parse_args()
    if args.quick:
        args.submissions, args.rounds = 200, 100
    rng = np.random.default_rng(7)
    n = args.submissions
    truth = rng.random((n, CRITERIA)) < 0.6
    hard = rng.beta(1.2, 2.5, size=(n, CRITERIA))  # most criteria easy, some hard
    compact = simulate(n, COMPACT, truth, hard, rng)
    large = simulate(n, LARGE, truth, hard, rng)
    jury_a = Jury.from_specs(["scripted:compact"] * 5)
    jury_b = Jury.from_specs(["scripted:large"] * 5)
    rows = []
    for margin in (1, 2):
        seconds, record = timed(
            lambda m=margin: compare_pools(
                compact, large, jury_a, jury_b, margin=m, rounds=args.rounds, seed=1
            )
        )
        cascade_right = []
        for rc, rl, tr in zip(compact, large, truth, strict=True):
            for k, (cc, cl) in enumerate(zip(rc.criteria, rl.criteria, strict=True)):
                chosen = cl if needs_escalation(cc.votes, 5, margin) else cc
                cascade_right.append(chosen.passed == tr[k])
        c = record["cascade"]

        def fmt(e: dict[str, object]) -> str:
            lo, hi = e["ci"]  # type: ignore[misc]
            return f"{e['value']:.3f} [{lo:.3f}, {hi:.3f}]"

        rows.append(
            [
                margin,
                fmt(record["agreement"]),
                fmt(record["split_rate"]["a"]),
                fmt(record["split_rate"]["b"]),
                fmt(record["task_score_pearson"]),
                fmt(record["identical_task_scores"]),
                fmt(c["escalation_rate"]),
                fmt(c["agreement_with_b"]),
                fmt(c["identical_task_scores_with_b"]),
                fmt(c["relative_to_b"]["cost_usd"]),
                f"{accuracy(compact, truth):.3f} / {accuracy(large, truth):.3f} / "
                f"{np.mean(cascade_right):.3f}",
                f"{seconds:.2f}",
            ]
        )
    print(environment())
    print(f"{n} submissions x {CRITERIA} criteria, two pools of 5 jurors, {args.rounds} rounds")
    print(
        table(
            [
                "margin",
                "agreement A-B",
                "split A",
                "split B",
                "Pearson scores",
                "identical scores",
                "escalated",
                "cascade agrees with B",
                "cascade identical scores",
                "cascade cost / B",
                "accuracy A / B / cascade",
                "compare s",
            ],
            rows,
        )
    )


if __name__ == "__main__":
    main()
