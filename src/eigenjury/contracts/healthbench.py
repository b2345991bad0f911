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
                show_ideal=show_ideal and bool(ideal and ideal.strip()),
                extra=_kept(kept),
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
            extra=_kept({k: v for k, v in item.items() if k not in _RUBRIC_KEYS}),
        )
    except ValidationError as exc:
        error = exc.errors()[0]
        field = ".".join(str(p) for p in error["loc"])
        field = {"weight": "points"}.get(field, field)
        raise fail(f"{where}: {field + ': ' if field else ''}{error['msg']}") from None


def _kept(fields: dict[str, Any]) -> dict[str, Any]:
    """Fields the contract has no place for, nested so that none can take the place of
    a field the contract's own formats write (an item's own `id` or `weight`)."""
    return {_KEPT: fields} if fields else {}


def dropped(contract: Contract) -> list[str]:
    """What writing `contract` as HealthBench would lose, in words (nothing for a
    contract read from HealthBench)."""
    out = []
    for task in contract.tasks:
        ev, ex, where = task.evaluation, task.execution, f"task '{task.task_id}'"
        lost = [
            name
            for name, gone in (
                (f"its pass threshold {ev.pass_threshold:g}", ev.pass_threshold != 100),
                ("its metadata or environment", bool(ex.metadata or ex.environment)),
                ("its tools", bool(ev.tools)),
                ("show_ideal", ev.show_ideal),
                ("batch_criteria", ev.batch_criteria),
                (
                    "criterion ids or names",
                    any(c.id != f"c{k}" or c.name for k, c in enumerate(ev.criteria, 1)),
                ),
            )
            if gone
        ]
        if lost:
            out.append(f"{where}: HealthBench has no place for {', '.join(lost)}")
    if contract.repeats > 1:
        out.append(f"HealthBench has no place for the contract's repeats ({contract.repeats})")
    return out


def healthbench_lines(contract: Contract, where: Path) -> Iterator[str]:
    """Each task as a HealthBench example (JSON, one line each); an input error for a
    task HealthBench cannot hold: a criterion graded without a model, another scoring
    rule, or a reference file the candidate would see."""
    for task in contract.tasks:
        ev = task.evaluation
        odd = [c.id for c in ev.criteria if c.grader != "llm_judge"]
        problem = (
            f"criteria {', '.join(odd)} are not graded by a jury (llm_judge); HealthBench's "
            "rubric items are"
            if odd
            else f"it is scored by the {ev.scoring} rule; HealthBench scores by its own "
            "(scoring: healthbench), so its scores would change"
            if ev.scoring != "healthbench"
            else "its candidates are shown a reference file, which HealthBench cannot hold"
            if task.execution.reference_file or ev.reference_file
            else None
        )
        if problem:
            raise InputError(f"task '{task.task_id}': {problem}", path=where)
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
        data = kept.pop("ideal_completions_data", None)
        if isinstance(data, dict):  # the ideal as the contract has it now (maybe edited)
            data = {k: v for k, v in data.items() if k != "ideal_completion" or ev.ideal}
            if ev.ideal:
                data["ideal_completion"] = ev.ideal
        elif ev.ideal:
            data = {"ideal_completion": ev.ideal}
        if data is not None or "ideal_completions_data" in ev.extra.get(_KEPT, {}):
            example["ideal_completions_data"] = data
        example["prompt_id"] = task.task_id
        yield json.dumps({**example, **kept})


def _rubric_item(c: Criterion) -> dict[str, Any]:
    points: float | int = int(c.weight) if c.weight.is_integer() else c.weight
    return {"criterion": c.prompt, "points": points, "tags": list(c.tags), **c.extra.get(_KEPT, {})}


def write_healthbench(source: ContractSource, path: Path) -> None:
    write_text(path, "".join(line + "\n" for line in healthbench_lines(source.contract, path)))
