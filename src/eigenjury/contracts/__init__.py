"""Evaluation contracts graded by juries (the AsymmetryZero method).

Experts write tasks with criteria, weights and a pass threshold; graders without a
model, or a jury of LLM judges by strict majority, decide each criterion; every vote
is kept. See docs/contracts.md.
"""

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
