"""HealthBench-format rubric sets, read into a contract and written back unchanged.

One JSON object a line: `prompt` (the conversation, `{role, content}` turns),
`rubrics` (each `{criterion, points, tags}`; negative points for what the reply must
not do), `example_tags` (themes), `ideal_completions_data` (optional, with the
`ideal_completion` text), `prompt_id`, and anything else (`canary`, ...).

Each example becomes a task scored by the healthbench rule: `prompt_id` its id, the
conversation its prompt, each rubric item an llm_judge criterion (`c1`, `c2`, ... in
order, its points the weight, its tags kept), `example_tags` the task's tags, the ideal
completion its ideal reply. Every field is kept: those of an example the contract has
no place for (`canary`, the whole `ideal_completions_data`) in the evaluation's extra
fields, a rubric item's own in the criterion's, in their order. Writing a contract back
gives each line the same content, in HealthBench's key order.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from eigenjury.contracts.bundle import ContractSource
from eigenjury.contracts.schema import (
    DEFAULT_PASS_THRESHOLD,
    Contract,
    Criterion,
    Evaluation,
    Execution,
    Task,
)
from eigenjury.errors import InputError
from eigenjury.files import read_json_lines, write_text

_EXAMPLE_KEYS = ("prompt", "rubrics", "example_tags", "ideal_completions_data", "prompt_id")
_RUBRIC_KEYS = ("criterion", "points", "tags")
_KEPT = "healthbench"  # the evaluation's extra field holding an example's other fields
_NEEDS = " (HealthBench: prompt, rubrics, prompt_id, ...)"


def read_healthbench(
    path: Path, *, pass_threshold: float = DEFAULT_PASS_THRESHOLD, show_ideal: bool = False
) -> ContractSource:
    """The examples of a HealthBench JSONL file as a contract; a bad line is an input
    error naming the line and field."""
    tasks = []
    seen: dict[str, int] = {}
    for number, example in read_json_lines(path, needs=_NEEDS):
        task = _task(example, path, number, pass_threshold, show_ideal)
        if task.task_id in seen:
            raise InputError(
                f"prompt_id '{task.task_id}' is also on line {seen[task.task_id]}",
                path=path,
                line=number,
            )
        seen[task.task_id] = number
        tasks.append(task)
    if not tasks:
        raise InputError(f"no examples; expected one JSON object a line{_NEEDS}", path=path)
    return ContractSource(Contract(tasks=tuple(tasks), name=path.stem), path, path.parent / "refs")


def _task(
    example: dict[str, Any], path: Path, line: int, pass_threshold: float, show_ideal: bool
) -> Task:
    def fail(message: str) -> InputError:
        return InputError(message, path=path, line=line)

    prompt_id = example.get("prompt_id")
    if not isinstance(prompt_id, str) or not prompt_id:
        raise fail("prompt_id must be a non-empty string")
    rubrics = example.get("rubrics")
    if not isinstance(rubrics, list) or not rubrics:
        raise fail("rubrics must be a non-empty list of {criterion, points, tags}")
    criteria = [_criterion(item, k, fail) for k, item in enumerate(rubrics, 1)]
    ideal_data = example.get("ideal_completions_data")
    ideal = ideal_data.get("ideal_completion") if isinstance(ideal_data, dict) else None
    if ideal is not None and not isinstance(ideal, str):
        raise fail("ideal_completions_data.ideal_completion must be text")
    kept = {k: v for k, v in example.items() if k not in _EXAMPLE_KEYS}
    if "ideal_completions_data" in example:
        kept["ideal_completions_data"] = ideal_data
    try:
        return Task(
            task_id=prompt_id,
            execution=Execution(prompt=example.get("prompt")),
            evaluation=Evaluation(
                criteria=tuple(criteria),
                pass_threshold=pass_threshold,
                scoring="healthbench",
                ideal=ideal or "",
                show_ideal=show_ideal and bool(ideal),
                extra={_KEPT: kept} if kept else {},
            ),
            tags=example.get("example_tags", ()),
        )
    except ValidationError as exc:
        error = exc.errors()[0]
        field = ".".join(str(p) for p in error["loc"] if p not in ("execution", "evaluation"))
        if field == "tags" or field.startswith("tags."):
            field = "example_tags" + field[len("tags") :]
        raise fail(
            f"prompt_id '{prompt_id}': {field + ': ' if field else ''}{error['msg']}"
        ) from None


def _criterion(item: Any, number: int, fail: Any) -> Criterion:
    where = f"rubrics item {number}"
    if not isinstance(item, dict):
        raise fail(f"{where} is not an object")
    text, points = item.get("criterion"), item.get("points")
    if not isinstance(text, str) or not text.strip():
        raise fail(f"{where}: criterion must be non-empty text")
    if isinstance(points, bool) or not isinstance(points, int | float):
        raise fail(f"{where}: points must be a number, got {points!r}")
    try:
        return Criterion(
            id=f"c{number}",
            weight=points,
            grader="llm_judge",
            prompt=text,
            tags=item.get("tags", ()),
            extra={k: v for k, v in item.items() if k not in _RUBRIC_KEYS},
        )
    except ValidationError as exc:
        error = exc.errors()[0]
        field = ".".join(str(p) for p in error["loc"])
        field = {"weight": "points"}.get(field, field)
        raise fail(f"{where}: {field + ': ' if field else ''}{error['msg']}") from None


def healthbench_lines(contract: Contract, where: Path) -> Iterator[str]:
    """Each task as a HealthBench example (JSON, one line each); an input error for a
    task HealthBench cannot hold (a criterion graded without a model)."""
    for task in contract.tasks:
        ev = task.evaluation
        odd = [c.id for c in ev.criteria if c.grader != "llm_judge"]
        if odd:
            raise InputError(
                f"task '{task.task_id}': criteria {', '.join(odd)} are not graded by a jury "
                "(llm_judge); HealthBench's rubric items are",
                path=where,
            )
        prompt = task.execution.prompt
        turns = (
            [{"role": "user", "content": prompt}]
            if isinstance(prompt, str)
            else [m.model_dump() for m in prompt]
        )
        kept = dict(ev.extra.get(_KEPT, {}))
        example: dict[str, Any] = {
            "prompt": turns,
            "rubrics": [_rubric_item(c) for c in ev.criteria],
            "example_tags": list(task.tags),
        }
        if "ideal_completions_data" in kept:
            example["ideal_completions_data"] = kept.pop("ideal_completions_data")
        elif ev.ideal:
            example["ideal_completions_data"] = {"ideal_completion": ev.ideal}
        example["prompt_id"] = task.task_id
        yield json.dumps({**example, **kept})


def _rubric_item(c: Criterion) -> dict[str, Any]:
    points: float | int = int(c.weight) if c.weight.is_integer() else c.weight
    return {"criterion": c.prompt, "points": points, "tags": list(c.tags), **c.extra}


def write_healthbench(source: ContractSource, path: Path) -> None:
    write_text(path, "".join(line + "\n" for line in healthbench_lines(source.contract, path)))
