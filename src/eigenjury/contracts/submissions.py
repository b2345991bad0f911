"""Submissions made elsewhere: JSONL lines with `task_id`, `submission`, optional `candidate`."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from eigenjury.contracts.grading import Submission
from eigenjury.contracts.schema import Contract
from eigenjury.errors import InputError
from eigenjury.files import read_jsonl

DEFAULT_CANDIDATE = "submission"


class _Line(BaseModel):
    model_config = ConfigDict(extra="ignore")
    task_id: str = Field(min_length=1)
    submission: str
    candidate: str = Field(DEFAULT_CANDIDATE, min_length=1)


def read_submissions(path: Path, contract: Contract) -> list[Submission]:
    known = set(contract.task_ids)
    seen: dict[tuple[str, str], int] = {}
    out = []
    for number, line in read_jsonl(path, _Line):
        if line.task_id not in known:
            raise InputError(
                f"task_id '{line.task_id}' is not a task of the contract", path=path, line=number
            )
        pair = (line.task_id, line.candidate)
        if pair in seen:
            raise InputError(
                f"candidate '{line.candidate}' already submitted task '{line.task_id}' "
                f"on line {seen[pair]}",
                path=path,
                line=number,
            )
        seen[pair] = number
        out.append(Submission(line.task_id, line.candidate, line.submission))
    if not out:
        raise InputError("no submissions; expected one JSON object a line", path=path)
    return out
