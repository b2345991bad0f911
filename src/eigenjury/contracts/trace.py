"""The audit trail of a grading run, and its summary.

Every task, criterion and juror vote is kept: grade, full juror text (and the repair
reply, if one was needed), tokens, latency, cost and the weight awarded. Written as
results.json (the outcome), trace.jsonl (one line per vote or grader decision) and
tasks.csv, criteria.csv and judgements.csv for spreadsheets.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from eigenjury import __version__
from eigenjury.contracts.grading import CriterionResult, TaskResult
from eigenjury.contracts.jury import Jury, Vote
from eigenjury.files import write_text
from eigenjury.stats.agreement import ClusterBootstrap


def vote_counts(c: CriterionResult) -> dict[str, int]:
    return {"C": c.c_votes, "I": c.i_votes, "unparsed": c.unparsed, "error": c.errors}


def _cost(values: Sequence[float | None]) -> float | None:
    return None if any(v is None for v in values) else float(sum(v for v in values if v))


def result_cost(r: TaskResult) -> dict[str, Any]:
    """What grading (and making) this submission cost, jurors' calls apportioned."""
    votes = [v for c in r.criteria for v in c.all_votes()]
    s = r.submission
    return {
        "jury_cost_usd": _cost([v.apportioned_cost for v in votes]),
        "jury_input_tokens": round(sum(v.input_tokens * v.share for v in votes)),
        "jury_output_tokens": round(sum(v.output_tokens * v.share for v in votes)),
        "jury_calls": sum(v.attempts * v.share for v in votes if v.error is None),
        "candidate_cost_usd": s.cost_usd,
        "candidate_output_tokens": s.output_tokens,
    }


def task_record(r: TaskResult) -> dict[str, Any]:
    return {
        "task_id": r.task_id,
        "candidate": r.candidate,
        "score": r.score,
        "passed": r.passed,
        "reward": r.reward,
        "threshold": r.threshold,
        "complete": r.complete,
        "criteria": [
            {
                "id": c.criterion.id,
                "grader": c.criterion.grader,
                "weight": c.criterion.weight,
                "passed": c.passed,
                "awarded": c.awarded,
                **({"votes": vote_counts(c), "split": c.split} if c.by_jury else {}),
                **({"escalated": True} if c.escalated_from else {}),
            }
            for c in r.criteria
        ],
        **({"error": r.submission.error} if r.submission.error else {}),
        **result_cost(r),
    }


def summary(
    results: Sequence[TaskResult], *, rounds: int = 1000, ci: float = 0.95, seed: int = 0
) -> list[dict[str, Any]]:
    """Per candidate: mean score and pass rate with task-bootstrap intervals, and cost."""
    out = []
    for candidate in dict.fromkeys(r.candidate for r in results):
        mine = [r for r in results if r.candidate == candidate]
        boot = ClusterBootstrap(len(mine), rounds, ci, seed)
        judged = [c for r in mine for c in r.criteria if c.by_jury and c.votes]
        costs = [result_cost(r) for r in mine]
        out.append(
            {
                "candidate": candidate,
                "tasks": len(mine),
                "mean_score": boot.estimate(boot.mean([r.score for r in mine])).record(2),
                "pass_rate": boot.estimate(boot.mean([r.passed for r in mine])).record(),
                "split_criteria": sum(c.split for c in judged),
                "judged_criteria": len(judged),
                "incomplete": sum(not r.complete for r in mine),
                "jury_cost_usd": _cost([c["jury_cost_usd"] for c in costs]),
                "jury_output_tokens": sum(c["jury_output_tokens"] for c in costs),
            }
        )
    return out


def results_record(
    results: Sequence[TaskResult],
    *,
    contract: str,
    jury: Jury | None,
    escalate_to: Jury | None = None,
    escalate_margin: int | None = None,
    warnings: Sequence[str] = (),
) -> dict[str, Any]:
    record: dict[str, Any] = {
        "eigenjury": __version__,
        "contract": contract,
        "jury": _jury_record(jury),
    }
    if escalate_to is not None:
        record["escalate_to"] = {**_jury_record(escalate_to), "margin": escalate_margin}
    record["summary"] = summary(results)
    record["tasks"] = [task_record(r) for r in results]
    record["warnings"] = list(warnings)
    return record


def _jury_record(jury: Jury | None) -> dict[str, Any]:
    """The jury's names and settings (no jurors: every criterion has a grader without a model)."""
    if jury is None:
        return {"jurors": []}
    return {
        "jurors": list(jury.names),
        "temperature": jury.temperature,
        "seed": jury.seed,
        "max_tokens": jury.max_tokens,
        "batch_criteria": jury.batch_criteria,
    }


def _vote_row(r: TaskResult, c: CriterionResult, v: Vote, stage: str) -> dict[str, Any]:
    return {
        "task_id": r.task_id,
        "candidate": r.candidate,
        "criterion_id": c.criterion.id,
        "stage": stage,
        "juror": v.juror,
        "grade": v.grade,
        "weight": c.criterion.weight,
        "awarded": c.awarded,
        "input_tokens": v.input_tokens,
        "output_tokens": v.output_tokens,
        "latency_s": round(v.latency_s, 4),
        "cost_usd": v.cost_usd,
        "criteria_in_call": round(1 / v.share),
        "attempts": v.attempts,
        "cached": v.cached,
        "error": v.error,
        "text": v.text,
        "retry_text": v.retry_text,
    }


def judgement_rows(results: Sequence[TaskResult]) -> Iterator[dict[str, Any]]:
    """One row per juror vote, or per decision of a grader without a model."""
    for r in results:
        for c in r.criteria:
            if not c.by_jury or not c.votes:
                yield {
                    "task_id": r.task_id,
                    "candidate": r.candidate,
                    "criterion_id": c.criterion.id,
                    "stage": c.criterion.grader,
                    "juror": None,
                    "grade": "C" if c.passed else "I",
                    "weight": c.criterion.weight,
                    "awarded": c.awarded,
                    "text": c.explanation,
                }
                continue
            for v in c.escalated_from:
                yield _vote_row(r, c, v, "first")
            for v in c.votes:
                yield _vote_row(r, c, v, "escalated" if c.escalated_from else "jury")


def criterion_rows(results: Sequence[TaskResult]) -> Iterator[dict[str, Any]]:
    for r in results:
        for c in r.criteria:
            yield {
                "task_id": r.task_id,
                "candidate": r.candidate,
                "criterion_id": c.criterion.id,
                "name": c.criterion.name,
                "grader": c.criterion.grader,
                "weight": c.criterion.weight,
                "passed": c.passed,
                "awarded": c.awarded,
                **({f"votes_{k}": n for k, n in vote_counts(c).items()}),
                "split": c.split,
                "escalated": bool(c.escalated_from),
                "explanation": c.explanation,
            }


def task_rows(results: Sequence[TaskResult]) -> Iterator[dict[str, Any]]:
    for r in results:
        record = task_record(r)
        del record["criteria"]
        record["submission"] = r.submission.text
        yield record


def write_trace(out: Path, results: Sequence[TaskResult]) -> None:
    lines = (json.dumps(row, ensure_ascii=False) for row in judgement_rows(results))
    write_text(out / "trace.jsonl", "".join(line + "\n" for line in lines))
    write_text(out / "tasks.csv", _csv(task_rows(results)))
    write_text(out / "criteria.csv", _csv(criterion_rows(results)))
    write_text(out / "judgements.csv", _csv(judgement_rows(results)))


def _csv(rows: Iterator[dict[str, Any]]) -> str:
    rows_ = list(rows)
    columns = list(dict.fromkeys(k for row in rows_ for k in row))
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, columns, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows_)
    return buffer.getvalue()
