"""Reading and writing contracts: the AsymmetryZero bundle layout and a single YAML file.

Bundle (a folder):

    tasks.json    {"version": 2, "name", "repeats", "prompts": [{"task_id", "task_prompt",
                   "reference_file", "metadata", "environment"}]}  (also read: version 1,
                   a plain list, "prompt" or "task" for "task_prompt"; a prompt may be a
                   list of {"role", "content"} turns)
    answers.json  [{"task_id", "reference_file", "tools", "passThreshold", "scoring",
                    "tags", "ideal", "show_ideal", "batch_criteria",
                    "criteria": [{"id", "name", "weight", "grader_type", "semanticPrompt",
                                  "tags"}]}]
    refs/         reference files named by "reference_file"

`grader_type` ExactMatch means what it meant to the reference tool (case-insensitive
containment in the final answer) unless the criterion says `"match": "equals"`;
eigenjury writes `match` explicitly. The prompt is `semanticPrompt`, else `description`,
else `name`. Other fields are kept. YAML is the same model as a mapping (`name`,
`tasks` with `task_id`, `execution`, `evaluation`); its refs/ folder sits beside it.
"""

from __future__ import annotations

import json
import math
import os
import shutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import ValidationError

from eigenjury.config import load_yaml, validate
from eigenjury.contracts.schema import (
    DEFAULT_PASS_THRESHOLD,
    GRADERS,
    Contract,
    Criterion,
    Evaluation,
    Execution,
    GraderKind,
    Task,
)
from eigenjury.errors import InputError
from eigenjury.files import read_text, write_json, write_text

M = TypeVar("M")

_GRADER_NAMES: dict[str, GraderKind] = {
    "exactmatch": "exact_match",
    "llmjudge": "llm_judge",
    "regex": "regex",
    "numeric": "numeric",
    "python": "python",
}
_BUNDLE_GRADER: dict[GraderKind, str] = {
    "exact_match": "ExactMatch",
    "llm_judge": "llm-judge",
    "regex": "regex",
    "numeric": "numeric",
    "python": "python",
}
_TASK_KEYS = (
    "task_id",
    "task_prompt",
    "prompt",
    "task",
    "reference_file",
    "metadata",
    "environment",
)
_ANSWER_KEYS = (
    "task_id",
    "criteria",
    "passThreshold",
    "reference_file",
    "tools",
    "scoring",
    "tags",
    "ideal",
    "show_ideal",
    "batch_criteria",
)
_CRITERION_KEYS = (
    "id",
    "name",
    "weight",
    "grader_type",
    "semanticPrompt",
    "match",
    "tolerance",
    "relative_tolerance",
    "tags",
)
BUNDLED_DIR = "contracts"


@dataclass(frozen=True)
class ContractSource:
    """A contract and where it came from (its reference files live in `refs_dir`)."""

    contract: Contract
    path: Path
    refs_dir: Path
    _texts: dict[str, str | None] = field(default_factory=dict, compare=False, repr=False)

    def reference_path(self, name: str) -> Path:
        """The file `name` in refs/; an input error when it lies outside refs/ (through
        `..`, an absolute path or a symbolic link), so no other file of the machine can
        reach a model or an export."""
        problem = self.reference_problem(name)
        if problem:
            raise InputError(f"reference_file {name!r} {problem}", path=self.path)
        return self.refs_dir / name

    def reference_problem(self, name: str) -> str | None:
        """Why `name` is not a path inside refs/, or None."""
        if ".." in Path(name).parts or Path(name).is_absolute():
            return "must be a path inside refs/ (no '..', not absolute)"
        refs = self.refs_dir.parent.resolve() / self.refs_dir.name
        if not (self.refs_dir / name).resolve().is_relative_to(refs):
            return f"leads outside {self.refs_dir} (a symbolic link); copy the file into refs/"
        return None

    def reference_text(self, name: str) -> str | None:
        """A text reference file's content (read once); None for binary files."""
        if name not in self._texts:
            try:
                self._texts[name] = self.reference_path(name).read_text(encoding="utf-8")
            except UnicodeDecodeError:
                self._texts[name] = None
        return self._texts[name]

    def task_reference(self, task: Task) -> str | None:
        """The text of the reference file the solver sees with `task`, if any."""
        name = task.execution.reference_file
        return self.reference_text(name) if name else None


def load_contract(where: str | Path) -> ContractSource:
    """A bundle folder, a YAML file, a HealthBench JSONL file, or the name of a bundled
    example contract."""
    path = Path(where)
    if not path.exists() and not path.suffix and os.sep not in str(where):
        bundled = resources.files("eigenjury") / "data" / BUNDLED_DIR / str(where)
        if bundled.is_dir():
            path = Path(str(bundled))
        else:
            raise InputError(
                f"no such contract file or folder, nor a bundled contract; bundled: "
                f"{', '.join(bundled_contracts())}",
                path=where,
            )
    if path.is_dir():
        source = read_bundle(path)
    elif path.suffix.lower() in (".yaml", ".yml"):
        source = read_yaml(path)
    elif not path.exists():
        raise InputError("no such contract file or folder", path=path)
    elif path.suffix.lower() == ".jsonl":
        from eigenjury.contracts.healthbench import read_healthbench

        source = read_healthbench(path)
    else:
        raise InputError(
            "a contract is a bundle folder, a .yaml file or a HealthBench .jsonl file", path=path
        )
    _check_references(source)
    return source


def bundled_contracts() -> list[str]:
    root = resources.files("eigenjury") / "data" / BUNDLED_DIR
    return sorted(p.name for p in root.iterdir() if p.is_dir())


def read_yaml(path: Path) -> ContractSource:
    data, lines = load_yaml(path)
    contract = validate(Contract, data, path=path, lines=lines)
    return ContractSource(contract, path, path.parent / "refs")


def write_yaml(source: ContractSource, path: Path) -> None:
    """Write `source.contract` as one YAML file, its reference files into refs/ beside it."""
    data = source.contract.model_dump(mode="json", exclude_defaults=True)
    write_text(path, yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=100))
    copy_references(source, path.parent / "refs")


def read_bundle(folder: Path) -> ContractSource:
    tasks_path, answers_path = folder / "tasks.json", folder / "answers.json"
    tasks_data = _read_json(tasks_path)
    prompts = _task_records(tasks_data, tasks_path)
    name = tasks_data.get("name") if isinstance(tasks_data, dict) else None
    answers = _read_json(answers_path)
    if not isinstance(answers, list):
        raise InputError("answers.json must be a list of answer records", path=answers_path)
    by_task: dict[str, dict[str, Any]] = {}
    for task_id, answer in _by_task_id(answers, "record", answers_path):
        if task_id not in prompts:
            raise InputError(
                f"task '{task_id}' is not in tasks.json (known: {_some(prompts)})",
                path=answers_path,
            )
        if task_id in by_task:
            raise InputError(f"task '{task_id}' has two answer records", path=answers_path)
        by_task[task_id] = answer
    tasks = []
    for task_id, record in prompts.items():
        if task_id not in by_task:
            raise InputError(
                f"task '{task_id}' has no answer record (criteria) in answers.json",
                path=answers_path,
            )
        tasks.append(_task_from_bundle(record, by_task[task_id], folder))
    repeats = tasks_data.get("repeats", 1) if isinstance(tasks_data, dict) else 1
    contract = _build(
        lambda: Contract(tasks=tuple(tasks), name=str(name or folder.name), repeats=repeats),
        tasks_path,
        "",
    )
    return ContractSource(contract, folder, folder / "refs")


def write_bundle(source: ContractSource, folder: Path) -> None:
    """Write `source.contract` as a bundle, copying its reference files into refs/."""
    contract = source.contract
    prompts = []
    answers = []
    for task in contract.tasks:
        ex, ev = task.execution, task.evaluation
        prompt: dict[str, Any] = {"task_id": task.task_id, "task_prompt": ex.prompt}
        prompt["reference_file"] = ex.reference_file
        if ex.metadata:
            prompt["metadata"] = ex.metadata
        if ex.environment:
            prompt["environment"] = ex.environment
        if not isinstance(ex.prompt, str):
            prompt["task_prompt"] = [m.model_dump() for m in ex.prompt]
        prompts.append({**prompt, **ex.extra})
        answer: dict[str, Any] = {
            "task_id": task.task_id,
            "reference_file": ev.reference_file,
            "tools": list(ev.tools),
            "criteria": [_criterion_to_bundle(c) for c in ev.criteria],
            "passThreshold": ev.pass_threshold,
        }
        if ev.scoring != "weighted":
            answer["scoring"] = ev.scoring
        if task.tags:
            answer["tags"] = list(task.tags)
        if ev.ideal:
            answer["ideal"] = ev.ideal
        if ev.show_ideal:
            answer["show_ideal"] = True
        if ev.batch_criteria:
            answer["batch_criteria"] = True
        answers.append({**answer, **ev.extra})
    folder.mkdir(parents=True, exist_ok=True)
    head: dict[str, Any] = {"version": 2, "name": contract.name}
    if contract.repeats > 1:
        head["repeats"] = contract.repeats
    write_json(folder / "tasks.json", {**head, "prompts": prompts})
    write_json(folder / "answers.json", answers)
    copy_references(source, folder / "refs")


def copy_references(source: ContractSource, refs_dir: Path) -> None:
    names = {t.execution.reference_file for t in source.contract.tasks} | {
        t.evaluation.reference_file for t in source.contract.tasks
    }
    for name in sorted(n for n in names if n):
        target = refs_dir / name
        if source.reference_path(name).resolve() != target.resolve():
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source.reference_path(name), target)


def _criterion_to_bundle(c: Criterion) -> dict[str, Any]:
    out: dict[str, Any] = {
        "id": c.id,
        "name": c.name,
        "weight": c.weight,
        "grader_type": _BUNDLE_GRADER[c.grader],
        "semanticPrompt": c.prompt,
    }
    if c.grader == "exact_match":
        out["match"] = c.match
    if c.grader == "numeric":
        out["tolerance"] = c.tolerance
        out["relative_tolerance"] = c.relative_tolerance
    if c.tags:
        out["tags"] = list(c.tags)
    return {**out, **c.extra}


def _task_records(data: Any, path: Path) -> dict[str, dict[str, Any]]:
    if isinstance(data, dict):
        if "prompts" not in data:
            raise InputError("expected a 'prompts' list (or a plain list of tasks)", path=path)
        version = data.get("version", 2)
        if isinstance(version, bool) or version not in (1, 2):
            raise InputError(f"unknown bundle version {version!r}; expected 1 or 2", path=path)
        data = data["prompts"]
    if not isinstance(data, list) or not data:
        raise InputError("expected a non-empty list of tasks", path=path)
    out: dict[str, dict[str, Any]] = {}
    for task_id, record in _by_task_id(data, "task", path):
        if task_id in out:
            raise InputError(f"task id '{task_id}' is used twice", path=path)
        if not any(_prompt(record.get(k)) for k in _PROMPT_KEYS):
            raise InputError(
                f"task '{task_id}' has no prompt (task_prompt, prompt or task)", path=path
            )
        out[task_id] = record
    return out


_PROMPT_KEYS = ("task_prompt", "prompt", "task")
_CRITERION_TEXT_KEYS = ("semanticPrompt", "description", "name")  # the prompt: the first given


def _by_task_id(records: list[Any], label: str, path: Path) -> Iterator[tuple[str, dict[str, Any]]]:
    """(task_id, record) for each record, which must be an object with a task_id."""
    for i, record in enumerate(records):
        if not isinstance(record, dict):
            raise InputError(f"{label} {i + 1} is not an object", path=path)
        task_id = record.get("task_id")
        if not isinstance(task_id, str) or not task_id:
            raise InputError(f"{label} {i + 1} has no task_id", path=path)
        yield task_id, record


def _task_from_bundle(record: dict[str, Any], answer: dict[str, Any], folder: Path) -> Task:
    task_id = record["task_id"]
    answers_path = folder / "answers.json"
    where = f"task '{task_id}'"
    prompt_key = next(k for k in _PROMPT_KEYS if _prompt(record.get(k)))
    criteria_raw = answer.get("criteria")
    if not isinstance(criteria_raw, list) or not criteria_raw:
        raise InputError(f"{where} has no criteria", path=answers_path)
    criteria = tuple(
        _criterion_from_bundle(raw, i, where, answers_path) for i, raw in enumerate(criteria_raw)
    )
    threshold = answer.get("passThreshold", DEFAULT_PASS_THRESHOLD)
    if not _is_number(threshold):
        raise InputError(f"{where}: passThreshold must be a number", path=answers_path)
    ignored = {k for k in _PROMPT_KEYS if k != prompt_key}
    execution = _build(
        lambda: Execution(
            prompt=record[prompt_key],
            reference_file=record.get("reference_file") or "",
            metadata=record.get("metadata") or {},
            environment=record.get("environment") or {},
            extra={k: v for k, v in record.items() if k not in _TASK_KEYS or k in ignored},
        ),
        folder / "tasks.json",
        where,
    )
    settings = {
        k: answer[k] for k in ("scoring", "ideal", "show_ideal", "batch_criteria") if k in answer
    }
    evaluation = _build(
        lambda: Evaluation(
            criteria=criteria,
            pass_threshold=float(threshold),
            reference_file=answer.get("reference_file") or "",
            tools=tuple(answer.get("tools") or ()),
            extra={k: v for k, v in answer.items() if k not in _ANSWER_KEYS},
            **settings,
        ),
        answers_path,
        where,
    )
    return _build(
        lambda: Task(
            task_id=task_id,
            execution=execution,
            evaluation=evaluation,
            tags=answer.get("tags") or (),
        ),
        answers_path,
        where,
    )


def _criterion_from_bundle(raw: Any, index: int, where: str, path: Path) -> Criterion:
    if not isinstance(raw, dict):
        raise InputError(f"{where}, criterion {index + 1} is not an object", path=path)
    ident = raw.get("id")
    if not isinstance(ident, str) or not ident:
        raise InputError(f"{where}, criterion {index + 1} has no id", path=path)
    here = f"{where}, criterion '{ident}'"
    if not _is_number(raw.get("weight")):
        raise InputError(f"{here}: weight must be a number, got {raw.get('weight')!r}", path=path)
    kind = str(raw.get("grader_type", "")).strip()
    grader = _GRADER_NAMES.get(kind.lower().replace("-", "").replace("_", ""))
    if grader is None:
        raise InputError(
            f"{here}: unknown grader_type {kind!r}; known: ExactMatch, llm-judge, "
            f"{', '.join(g for g in GRADERS if g not in ('exact_match', 'llm_judge'))}",
            path=path,
        )
    for key in _CRITERION_TEXT_KEYS:
        if raw.get(key) is not None and not isinstance(raw[key], str):
            raise InputError(f"{here}: {key} must be text, got {raw[key]!r}", path=path)
    prompt_key = next((k for k in _CRITERION_TEXT_KEYS if _text(raw.get(k))), None)
    if prompt_key is None:
        raise InputError(f"{here} has no prompt (semanticPrompt, description or name)", path=path)
    extra = {k: v for k, v in raw.items() if k not in _CRITERION_KEYS}
    settings: dict[str, Any] = {}
    if grader == "exact_match":
        settings["match"] = raw.get("match", "contains")  # the reference tool's meaning
    for key in ("tolerance", "relative_tolerance", "tags"):
        if key in raw:
            settings[key] = raw[key]
    return _build(
        lambda: Criterion(
            id=ident,
            name=raw.get("name") or "",
            weight=float(raw["weight"]),
            grader=grader,
            prompt=raw[prompt_key],
            extra=extra,
            **settings,
        ),
        path,
        here,
    )


def _build(make: Callable[[], M], path: Path, where: str) -> M:
    """Run a model constructor; a validation error becomes a located input error."""
    try:
        return make()
    except ValidationError as exc:
        error = exc.errors()[0]
        field = ".".join(str(p) for p in error["loc"])
        prefix = f"{where}: " if where else ""
        at = f"{field}: " if field else ""
        raise InputError(f"{prefix}{at}{error['msg']}", path=path) from None


def _check_references(source: ContractSource) -> None:
    for task in source.contract.tasks:
        for name in (task.execution.reference_file, task.evaluation.reference_file):
            if not name:
                continue
            problem = source.reference_problem(name)
            if problem:
                raise InputError(
                    f"task '{task.task_id}': reference_file {name!r} {problem}", path=source.path
                )
            path = source.reference_path(name)
            if not path.is_file():
                raise InputError(
                    f"task '{task.task_id}': reference file {name!r} is missing "
                    f"(looked for {path})",
                    path=source.path,
                )


def _read_json(path: Path) -> Any:
    if not path.is_file():
        raise InputError("missing: a bundle needs tasks.json and answers.json", path=path)
    text = read_text(path)
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(f"not valid JSON ({exc.msg})", path=path, line=exc.lineno) from None
    except RecursionError:
        raise InputError("not valid JSON (nested too deeply)", path=path) from None


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _text(value: Any) -> bool:
    return isinstance(value, str) and bool(value.strip())


def _prompt(value: Any) -> bool:
    """A prompt given: text, or a list of turns (checked when the task is built)."""
    return _text(value) or (isinstance(value, list) and bool(value))


def _some(ids: dict[str, Any]) -> str:
    names = list(ids)
    return ", ".join(names[:5]) + (", ..." if len(names) > 5 else "")
