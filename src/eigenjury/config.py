"""Config files: YAML validated by pydantic, with errors that name the file, line and field.

YAML is parsed once into data and once into nodes, so every field of the document
knows its line; a validation error then points at the exact place to edit.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from eigenjury.errors import InputError
from eigenjury.files import read_text

M = TypeVar("M", bound=BaseModel)
FieldPath = tuple[str | int, ...]


def load_yaml(path: Path) -> tuple[Any, dict[FieldPath, int]]:
    """The document, and the line of every mapping key and sequence item in it."""
    text = read_text(path)
    try:
        data = yaml.safe_load(text)
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        problem = getattr(exc, "problem", None) or str(exc)
        raise InputError(
            f"not valid YAML ({problem})",
            path=path,
            line=None if mark is None else mark.line + 1,
        ) from None
    lines: dict[FieldPath, int] = {}
    if root is not None:
        _walk(root, (), lines)
    return data, lines


def _walk(node: yaml.Node, at: FieldPath, lines: dict[FieldPath, int]) -> None:
    lines.setdefault(at, node.start_mark.line + 1)
    if isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            here = (*at, str(key.value))
            lines[here] = key.start_mark.line + 1
            _walk(value, here, lines)
    elif isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            _walk(item, (*at, index), lines)


def validate(model: type[M], data: Any, *, path: Path, lines: dict[FieldPath, int]) -> M:
    """`model` from `data`, or an InputError at the first problem's file, line and field."""
    try:
        return model.model_validate(data if data is not None else {})
    except ValidationError as exc:
        error = exc.errors()[0]
        loc = tuple(p for p in error["loc"] if not (isinstance(p, str) and "[" in p))
        line = next((lines[loc[:n]] for n in range(len(loc), -1, -1) if loc[:n] in lines), None)
        more = len(exc.errors()) - 1
        message = error["msg"] + (f" (and {more} more problem{'s' * (more > 1)})" if more else "")
        raise InputError(
            message, path=path, line=line, field=".".join(str(p) for p in loc) or None
        ) from None


def load_config(model: type[M], path: str | Path) -> M:
    path = Path(path)
    data, lines = load_yaml(path)
    return validate(model, data, path=path, lines=lines)
