"""Constitutions, scenarios and objective questions: bundled sets or the user's files.

Bundled sets live in `eigenjury/data/` and were written for eigenjury. A limit picks
scenarios by a seeded hash of their ids, so raising the limit only adds scenarios
and everything already collected stays in use.
"""

from __future__ import annotations

import csv
import hashlib
import json
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from eigenjury.errors import InputError


@dataclass(frozen=True)
class Constitution:
    title: str
    criteria: tuple[str, ...]
    summary: str = ""

    def numbered(self) -> str:
        return "\n".join(f"{i}. {c}" for i, c in enumerate(self.criteria, start=1))


@dataclass(frozen=True)
class Scenario:
    id: str
    text: str
    theme: str | None = None


@dataclass(frozen=True)
class Question:
    """A multiple-choice question with a hidden key (for objective mode)."""

    id: str
    question: str
    options: dict[str, str]
    answer: str
    topic: str | None = None

    def as_text(self) -> str:
        return self.question + "\n" + "\n".join(f"{k}. {v}" for k, v in self.options.items())


def _data() -> Any:
    return resources.files("eigenjury") / "data"


def bundled_names(kind: str, suffix: str) -> list[str]:
    folder = _data() / kind
    return sorted(p.name[: -len(suffix)] for p in folder.iterdir() if p.name.endswith(suffix))


def _bundled_text(kind: str, name: str, suffix: str) -> str | None:
    entry = _data() / kind / f"{name}{suffix}"
    return entry.read_text(encoding="utf-8") if entry.is_file() else None


def load_constitution(value: str | dict[str, Any], base: Path) -> Constitution:
    """A bundled name, a YAML file, or an inline mapping with title and criteria."""
    where = "constitution"
    if isinstance(value, str):
        text = _bundled_text("constitutions", value, ".yaml")
        if text is None:
            path = base / value
            if not path.is_file():
                raise InputError(
                    f"unknown constitution '{value}': not a bundled one "
                    f"({', '.join(bundled_names('constitutions', '.yaml'))}) nor a file",
                    field=where,
                )
            text, where = path.read_text(encoding="utf-8"), str(path)
        value = yaml.safe_load(text)
    elif "file" in value:
        path = base / str(value["file"])
        if not path.is_file():
            raise InputError("no such constitution file", path=path, field=where)
        value, where = yaml.safe_load(path.read_text(encoding="utf-8")), str(path)
    if not isinstance(value, dict) or not value.get("title") or not value.get("criteria"):
        raise InputError("a constitution needs a title and a list of criteria", field=where)
    criteria = tuple(str(c).strip() for c in value["criteria"] if str(c).strip())
    if len(criteria) < 1:
        raise InputError("a constitution needs at least one criterion", field=where)
    return Constitution(str(value["title"]).strip(), criteria, str(value.get("summary", "")))


def _rows(source: str, base: Path, kind: str) -> tuple[list[dict[str, Any]], str]:
    text = _bundled_text(kind, source, ".jsonl")
    if text is not None:
        return [json.loads(line) for line in text.splitlines() if line.strip()], source
    path = base / source
    if not path.is_file():
        raise InputError(
            f"unknown {kind} set '{source}': not a bundled one "
            f"({', '.join(bundled_names(kind, '.jsonl'))}) nor a .jsonl or .csv file",
            field=kind,
        )
    if path.suffix.lower() == ".csv":
        with path.open(newline="", encoding="utf-8-sig") as f:
            return list(csv.DictReader(f)), str(path)
    rows = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if line.strip():
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError as exc:
                raise InputError(f"not valid JSON ({exc.msg})", path=path, line=number) from None
    return rows, str(path)


def _pick(items: list[Any], limit: int | None, seed: int) -> list[Any]:
    """Up to `limit` items, chosen by a seeded hash of their ids (stable as limit grows)."""
    if limit is None or limit >= len(items):
        return items

    def rank(item: Any) -> str:
        return hashlib.sha256(f"{seed}:{item.id}".encode()).hexdigest()

    chosen = set(sorted(items, key=rank)[:limit])
    return [i for i in items if i in chosen]


def load_scenarios(
    source: str, base: Path, *, limit: int | None = None, seed: int = 0
) -> list[Scenario]:
    rows, where = _rows(source, base, "scenarios")
    scenarios = []
    seen: set[str] = set()
    for number, row in enumerate(rows, start=1):
        ident, text = str(row.get("id", "")).strip(), str(row.get("text", "")).strip()
        if not ident or not text:
            raise InputError(f"scenario {number} needs an id and a text", path=where)
        if ident in seen:
            raise InputError(f"scenario id '{ident}' appears twice", path=where)
        seen.add(ident)
        scenarios.append(Scenario(ident, text, row.get("theme") or None))
    if not scenarios:
        raise InputError("the scenario set is empty", path=where)
    return _pick(scenarios, limit, seed)


def load_questions(
    source: str, base: Path, *, limit: int | None = None, seed: int = 0
) -> list[Question]:
    rows, where = _rows(source, base, "questions")
    questions = []
    for number, row in enumerate(rows, start=1):
        options = row.get("options") or {}
        answer = str(row.get("answer", "")).strip()
        if not row.get("id") or not row.get("question") or answer not in options:
            raise InputError(
                f"question {number} needs an id, a question, options and an answer among them",
                path=where,
            )
        questions.append(
            Question(
                str(row["id"]),
                str(row["question"]),
                {str(k): str(v) for k, v in options.items()},
                answer,
                row.get("topic"),
            )
        )
    return _pick(questions, limit, seed)
