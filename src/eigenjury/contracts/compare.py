"""Two juries on the same submissions (the AsymmetryZero jury study), and the cascade.

Criterion-level statistics use the criteria graded by juries (`llm_judge`); graders
without a model give both pools the same outcome and would only inflate agreement.
The cascade (pool A first, escalate to pool B) is evaluated from the votes both pools
already gave: its outcome on a criterion is A's unless A was within `margin` votes of
flipping or had an unread vote, and then B's; its cost is A's plus B's where escalated.
That is exactly what `eigenjury grade --escalate-to` would spend and decide.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from eigenjury.contracts.grading import CriterionResult, TaskResult, needs_escalation
from eigenjury.contracts.jury import Jury
from eigenjury.contracts.rules import task_score
from eigenjury.stats.agreement import ClusterBootstrap, Estimate, cohen_kappa_rounds


def _per_criterion(c: CriterionResult) -> tuple[float, float, float]:
    """Cost (NaN where a price is unknown), juror seconds and output tokens."""
    costs = [v.apportioned_cost for v in c.votes]
    return (
        np.nan if None in costs else sum(x for x in costs if x is not None),
        sum(v.latency_s * v.share for v in c.votes),
        sum(v.output_tokens * v.share for v in c.votes),
    )


def compare_pools(
    results_a: Sequence[TaskResult],
    results_b: Sequence[TaskResult],
    jury_a: Jury,
    jury_b: Jury,
    *,
    margin: int = 1,
    rounds: int = 1000,
    ci: float = 0.95,
    seed: int = 0,
) -> dict[str, Any]:
    """The comparison record; results must grade the same submissions in the same order."""
    unit, pa, pb, sa, sb, esc, place, common = [], [], [], [], [], [], [], []
    cost_a, cost_b = [], []
    for u, (ra, rb) in enumerate(zip(results_a, results_b, strict=True)):
        if (ra.task_id, ra.candidate) != (rb.task_id, rb.candidate):
            raise ValueError("the two pools graded different submissions")
        for k, (ca, cb) in enumerate(zip(ra.criteria, rb.criteria, strict=True)):
            if not ca.by_jury or not ca.votes:
                continue
            unit.append(u)
            pa.append(ca.passed)
            pb.append(cb.passed)
            sa.append(ca.split)
            sb.append(cb.split)
            esc.append(needs_escalation(ca.votes, len(ca.votes), margin))
            place.append(k)
            common.append(not any(v.grade is None for v in (*ca.votes, *cb.votes)))
            cost_a.append(_per_criterion(ca))
            cost_b.append(_per_criterion(cb))
    boot = ClusterBootstrap(len(results_a), rounds, ci, seed)
    score_a = np.array([r.score for r in results_a])
    score_b = np.array([r.score for r in results_b])
    record: dict[str, Any] = {
        "pools": {
            "a": {"jurors": list(jury_a.names), "size": jury_a.size},
            "b": {"jurors": list(jury_b.names), "size": jury_b.size},
        },
        "submissions": len(results_a),
        "criteria": len(unit),
        "settings": {"rounds": rounds, "ci": ci, "seed": seed, "cascade_margin": margin},
        "task_score_pearson": boot.estimate(boot.pearson(score_a, score_b)).record(),
        "identical_task_scores": boot.estimate(
            boot.mean(np.isclose(score_a, score_b, rtol=0, atol=1e-9))
        ).record(),
        "task_pass_agreement": boot.estimate(
            boot.mean([a.passed == b.passed for a, b in zip(results_a, results_b, strict=True)])
        ).record(),
    }
    if not unit:
        record["note"] = "no criterion is graded by a jury; only task scores are compared"
        return record
    u_ = np.array(unit)
    pa_, pb_, esc_ = np.array(pa), np.array(pb), np.array(esc)
    figures_a, figures_b = np.array(cost_a), np.array(cost_b)

    def mean(x: Any) -> dict[str, Any]:
        return boot.estimate(boot.mean(np.asarray(x, float), u_)).record()

    def ratio(num: Any, den: Any) -> dict[str, Any]:
        return boot.estimate(boot.ratio(num, den, u_)).record()

    common_ = np.array(common)
    record["agreement"] = mean(pa_ == pb_)
    chance, kappa = cohen_kappa_rounds(boot, u_, pa_, pb_)
    record["chance_agreement"] = boot.estimate(chance).record()
    record["kappa"] = boot.estimate(kappa).record()
    record["agreement_common"] = (
        boot.estimate(boot.mean((pa_ == pb_)[common_], u_[common_])).record()
        if common_.any()
        else Estimate(np.nan, np.nan, np.nan).record()
    )
    record["criteria_common"] = int(common_.sum())
    record["split_rate"] = {"a": mean(sa), "b": mean(sb)}
    record["pass_rate"] = {"a": mean(pa_), "b": mean(pb_)}
    names = ("cost_usd", "latency_s", "output_tokens")
    record["per_criterion"] = {
        side: {name: mean(figures[:, k]) for k, name in enumerate(names)}
        for side, figures in (("a", figures_a), ("b", figures_b))
    }
    record["a_relative_to_b"] = {
        name: ratio(figures_a[:, k], figures_b[:, k]) for k, name in enumerate(names)
    }
    cascade_pass = np.where(esc_, pb_, pa_)
    score_cascade = _cascade_scores(results_a, unit, place, cascade_pass)
    spent = figures_a + esc_[:, None] * figures_b
    record["cascade"] = {
        "first": "a",
        "escalate_to": "b",
        "margin": margin,
        "escalation_rate": mean(esc_),
        "agreement_with_b": mean(cascade_pass == pb_),
        "task_score_pearson_with_b": boot.estimate(boot.pearson(score_cascade, score_b)).record(),
        "identical_task_scores_with_b": boot.estimate(
            boot.mean(np.isclose(score_cascade, score_b, rtol=0, atol=1e-9))
        ).record(),
        "relative_to_b": {
            name: ratio(spent[:, k], figures_b[:, k]) for k, name in enumerate(names)
        },
    }
    return record


def _cascade_scores(
    results_a: Sequence[TaskResult], unit: list[int], place: list[int], cascade_pass: np.ndarray
) -> np.ndarray:
    """Each submission's task score by its rule, with the cascade's outcome on each
    jury-graded criterion (at `place` in submission `unit`) in place of A's."""
    met = [[c.passed for c in r.criteria] for r in results_a]
    for u, k, passed in zip(unit, place, cascade_pass, strict=True):
        met[u][k] = bool(passed)
    return np.array(
        [
            task_score([c.criterion.weight for c in r.criteria], flags, r.scoring)
            for r, flags in zip(results_a, met, strict=True)
        ]
    )
