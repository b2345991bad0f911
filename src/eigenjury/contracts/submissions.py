"""Submissions made elsewhere: JSONL lines with `task_id`, `submission`, optional `candidate`."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from eigenjury.contracts.grading import Submission
from eigenjury.contracts.schema import Contract
from eigenjury.errors import InputError

DEFAULT_CANDIDATE = "submission"


class _Line(BaseModel):
    model_config = ConfigDict(extra="ignore")
    task_id: str = Field(min_length=1)
    submission: str
    candidate: str = Field(DEFAULT_CANDIDATE, min_length=1)


def read_submissions(path: Path, contract: Contract) -> list[Submission]:
    if not path.is_file():
        raise InputError("no such file", path=path)
    known = set(contract.task_ids)
    seen: dict[tuple[str, str], int] = {}
    out = []
    with path.open(encoding="utf-8") as f:
        for number, text in enumerate(f, start=1):
            if not text.strip():
                continue
            try:
                line = _Line.model_validate_json(text)
            except ValidationError as exc:
                error = exc.errors()[0]
                if error["type"] == "json_invalid":
                    message = f"not valid JSON ({error['msg']})"
                else:
                    where = ".".join(str(p) for p in error["loc"])
                    message = f"field '{where}': {error['msg']}"
                raise InputError(message, path=path, line=number) from None
            if line.task_id not in known:
                raise InputError(
                    f"task_id '{line.task_id}' is not a task of the contract",
                    path=path,
                    line=number,
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
