"""Evaluation contracts graded by juries (the AsymmetryZero method).

Experts write tasks with criteria, weights and a pass threshold; graders without a
model, or a jury of LLM judges by strict majority, decide each criterion; every vote
is kept. See docs/contracts.md.

The names below are imported on first use, so reading a contracts record
(`eigenjury.contracts.record`, which the viewer does) loads no engine or numpy.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from eigenjury.lazy import exports

_EXPORTS = {
    "ContractSource": "eigenjury.contracts.bundle",
    "load_contract": "eigenjury.contracts.bundle",
    "read_bundle": "eigenjury.contracts.bundle",
    "read_yaml": "eigenjury.contracts.bundle",
    "write_bundle": "eigenjury.contracts.bundle",
    "write_yaml": "eigenjury.contracts.bundle",
    "compare_pools": "eigenjury.contracts.compare",
    "CriterionResult": "eigenjury.contracts.grading",
    "Submission": "eigenjury.contracts.grading",
    "TaskResult": "eigenjury.contracts.grading",
    "generate_submissions": "eigenjury.contracts.grading",
    "grade": "eigenjury.contracts.grading",
    "needs_escalation": "eigenjury.contracts.grading",
    "Juror": "eigenjury.contracts.jury",
    "Jury": "eigenjury.contracts.jury",
    "Vote": "eigenjury.contracts.jury",
    "parse_grade": "eigenjury.contracts.rules",
    "passes": "eigenjury.contracts.rules",
    "task_score": "eigenjury.contracts.rules",
    "Contract": "eigenjury.contracts.schema",
    "Criterion": "eigenjury.contracts.schema",
    "Evaluation": "eigenjury.contracts.schema",
    "Execution": "eigenjury.contracts.schema",
    "Task": "eigenjury.contracts.schema",
    "read_submissions": "eigenjury.contracts.submissions",
}
__all__ = [
    "Contract",
    "ContractSource",
    "Criterion",
    "CriterionResult",
    "Evaluation",
    "Execution",
    "Juror",
    "Jury",
    "Submission",
    "Task",
    "TaskResult",
    "Vote",
    "compare_pools",
    "generate_submissions",
    "grade",
    "load_contract",
    "needs_escalation",
    "parse_grade",
    "passes",
    "read_bundle",
    "read_submissions",
    "read_yaml",
    "task_score",
    "write_bundle",
    "write_yaml",
]

if TYPE_CHECKING:
    from eigenjury.contracts.bundle import (
        ContractSource,
        load_contract,
        read_bundle,
        read_yaml,
        write_bundle,
        write_yaml,
    )
    from eigenjury.contracts.compare import compare_pools
    from eigenjury.contracts.grading import (
        CriterionResult,
        Submission,
        TaskResult,
        generate_submissions,
        grade,
        needs_escalation,
    )
    from eigenjury.contracts.jury import Juror, Jury, Vote
    from eigenjury.contracts.rules import parse_grade, passes, task_score
    from eigenjury.contracts.schema import Contract, Criterion, Evaluation, Execution, Task
    from eigenjury.contracts.submissions import read_submissions


__getattr__ = exports(__name__, _EXPORTS)
