"""Constitutions, scenarios and objective questions: bundled sets or the user's files.

Bundled sets live in `eigenjury/data/` and were written for eigenjury. A limit picks
scenarios by a seeded hash of their ids, so raising the limit only adds scenarios
and everything already collected stays in use.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from eigenjury.config import FieldPath, load_yaml
from eigenjury.errors import InputError
from eigenjury.files import json_kind, read_csv, read_json_lines, text_value
from eigenjury.names import name_problem


@dataclass(frozen=True)
class Constitution:
    title: str
    criteria: tuple[str, ...]

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
    path: Path | None = None
    lines: dict[FieldPath, int] = {}
    if isinstance(value, str):
        text = _bundled_text("constitutions", value, ".yaml")
        if text is None:
            path = base / value
            if not path.is_file():
                raise InputError(
                    f"unknown constitution '{value}': not a bundled one "
                    f"({', '.join(bundled_names('constitutions', '.yaml'))}) nor a file",
                    field="constitution",
                )
            value, lines = load_yaml(path)
        else:
            value = yaml.safe_load(text)
    elif "file" in value:
        path = base / str(value["file"])
        if not path.is_file():
            raise InputError("no such constitution file", path=path, field="constitution")
        value, lines = load_yaml(path)
    where: dict[str, Any] = {"path": path} if path is not None else {"field": "constitution"}
    if (
        not isinstance(value, dict)
        or not value.get("title")
        or not isinstance(value.get("criteria"), list)
    ):
        raise InputError("a constitution needs a title and a list of criteria", **where)
    texts: list[tuple[FieldPath, Any]] = [(("title",), value["title"])]
    texts += [(("criteria", i), c) for i, c in enumerate(value["criteria"])]
    for at, item in texts:
        if not isinstance(item, str):
            field = ".".join(str(p) for p in at)
            raise InputError(
                f"expected text, got {json_kind(item)}",
                path=path,
                line=lines.get(at),
                field=field if path is not None else f"constitution.{field}",
            )
    criteria = tuple(c.strip() for c in value["criteria"] if c.strip())
    if len(criteria) < 1:
        raise InputError("a constitution needs at least one criterion", **where)
    return Constitution(value["title"].strip(), criteria)


Rows = list[tuple[int, dict[str, Any]]]


def _rows(source: str, base: Path, kind: str, required: tuple[str, ...]) -> tuple[Rows, str]:
    """(line, record) of a bundled set, or of the user's .jsonl or .csv file."""
    text = _bundled_text(kind, source, ".jsonl")
    if text is not None:
        return [(n, json.loads(t)) for n, t in enumerate(text.splitlines(), 1) if t.strip()], source
    path = base / source
    if not path.is_file():
        raise InputError(
            f"unknown {kind} set '{source}': not a bundled one "
            f"({', '.join(bundled_names(kind, '.jsonl'))}) nor a .jsonl or .csv file",
            field=kind,
        )
    if path.suffix.lower() == ".csv":
        needs = f"a {kind} file needs columns {', '.join(required)}"
        return list(read_csv(path, required, needs)), str(path)
    return list(read_json_lines(path)), str(path)


def pick(items: list[Any], limit: int | None, seed: int) -> list[Any]:
    """Up to `limit` items, chosen by a seeded hash of their ids (stable as limit grows)."""
    if limit is None or limit >= len(items):
        return items

    def rank(item: Any) -> str:
        return hashlib.sha256(f"{seed}:{item.id}".encode()).hexdigest()

    chosen = {item.id for item in sorted(items, key=rank)[:limit]}
    return [i for i in items if i.id in chosen]


def _text(value: Any, where: str, line: int, field: str, *, number: bool = False) -> str:
    """A field's value as stripped text ("" when absent; a number too where `number`).
    Anything else is an InputError at the file, line and field: str() would turn a list
    into text nobody wrote."""
    if value is None:
        return ""
    text = text_value(value, numbers=number)
    if text is None:
        raise InputError(
            f"expected text, got {json_kind(value)}", path=where, line=line, field=field
        )
    return text


def _check_id(ident: str, where: str, line: int) -> None:
    """A scenario's (or question's) id names it in verdicts.csv: it must read back as itself."""
    problem = name_problem(ident)
    if problem is not None:
        raise InputError(problem, path=where, line=line, field="id")


def load_scenarios(
    source: str, base: Path, *, limit: int | None = None, seed: int = 0
) -> list[Scenario]:
    rows, where = _rows(source, base, "scenarios", ("id", "text"))
    scenarios = []
    seen: set[str] = set()
    for number, row in rows:
        ident = _text(row.get("id"), where, number, "id", number=True)
        text = _text(row.get("text"), where, number, "text")
        theme = _text(row.get("theme"), where, number, "theme")
        if not ident or not text:
            raise InputError("a scenario needs an id and a text", path=where, line=number)
        _check_id(ident, where, number)
        if ident in seen:
            raise InputError(f"scenario id '{ident}' appears twice", path=where, line=number)
        seen.add(ident)
        scenarios.append(Scenario(ident, text, theme or None))
    if not scenarios:
        raise InputError("the scenario set is empty", path=where)
    return pick(scenarios, limit, seed)


def load_questions(
    source: str, base: Path, *, limit: int | None = None, seed: int = 0
) -> list[Question]:
    rows, where = _rows(source, base, "questions", ("id", "question", "options", "answer"))
    questions = []
    seen: set[str] = set()
    for number, row in rows:
        ident = _text(row.get("id"), where, number, "id", number=True)
        question = _text(row.get("question"), where, number, "question")
        answer = _text(row.get("answer"), where, number, "answer", number=True)
        topic = _text(row.get("topic"), where, number, "topic")
        options = row.get("options")
        if not ident or not question or not isinstance(options, dict) or answer not in options:
            raise InputError(
                "a question needs an id, a question, options (an object: letter -> text) and "
                "an answer among them",
                path=where,
                line=number,
            )
        _check_id(ident, where, number)
        if ident in seen:
            raise InputError(f"question id '{ident}' appears twice", path=where, line=number)
        seen.add(ident)
        choices = {
            str(k): _text(v, where, number, f"options.{k}", number=True) for k, v in options.items()
        }
        questions.append(Question(ident, question, choices, answer, topic or None))
    if not questions:
        raise InputError("the question set is empty", path=where)
    return pick(questions, limit, seed)
