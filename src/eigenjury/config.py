"""Config files: YAML validated by pydantic, with errors that name the file, line and field.

YAML is parsed once into nodes, which give every field of the document its line (a
validation error then points at the exact place to edit), and the data is built from them.
"""

from __future__ import annotations

import difflib
import typing
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails, PydanticCustomError

from eigenjury.errors import InputError
from eigenjury.files import read_text

M = TypeVar("M", bound=BaseModel)
FieldPath = tuple[str | int, ...]


def load_yaml(path: Path) -> tuple[Any, dict[FieldPath, int]]:
    """The document, and the line of every mapping key and sequence item in it.

    Aliases (`*name`) may repeat at most MAX_ALIAS_EXPANSION nodes in all: a few lines
    of nested aliases (a "billion laughs") would otherwise fill the memory."""
    text = read_text(path)
    try:
        loader = yaml.SafeLoader(text)  # refuses control characters at once
    except yaml.reader.ReaderError as exc:
        raise InputError(
            f"not valid YAML (character #x{exc.character:04x} is not allowed in YAML text; "
            "remove it)",
            path=path,
            line=text.count("\n", 0, exc.position) + 1,
        ) from None
    try:
        root = loader.get_single_node()
        if root is None:
            return None, {}
        _check_expansion(root, path)
        data = loader.construct_document(root)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        problem = getattr(exc, "problem", None) or str(exc)
        raise InputError(
            f"not valid YAML ({problem})",
            path=path,
            line=None if mark is None else mark.line + 1,
        ) from None
    except RecursionError:
        raise InputError("not valid YAML (nested too deeply)", path=path) from None
    finally:
        loader.dispose()
    lines: dict[FieldPath, int] = {}
    _walk(root, (), lines)
    return data, lines


MAX_ALIAS_EXPANSION = 10_000


def _check_expansion(root: yaml.Node, path: Path) -> None:
    """Refuse a document whose aliases repeat more than MAX_ALIAS_EXPANSION nodes, or
    that contains itself, at the line of the first part that alone is too large."""
    limit = _count_written(root) + MAX_ALIAS_EXPANSION
    sizes: dict[int, int] = {}
    inside: set[int] = set()

    def expanded(node: yaml.Node) -> int:
        key = id(node)
        if key in sizes:
            return sizes[key]
        line = node.start_mark.line + 1
        if key in inside:
            raise InputError(
                "an alias (*name) refers to a node that contains it", path=path, line=line
            )
        inside.add(key)
        size = 1 + sum(expanded(child) for child in _children(node))
        inside.discard(key)
        if size > limit:
            raise InputError(
                f"aliases (*name) repeat more than {MAX_ALIAS_EXPANSION} nodes from here; "
                "write the repeated parts out or nest fewer aliases",
                path=path,
                line=line,
            )
        sizes[key] = size
        return size

    expanded(root)


def _count_written(root: yaml.Node) -> int:
    """The number of distinct nodes (an aliased node counts once)."""
    seen: set[int] = set()
    todo = [root]
    while todo:
        node = todo.pop()
        if id(node) not in seen:
            seen.add(id(node))
            todo.extend(_children(node))
    return len(seen)


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.MappingNode):
        return [n for pair in node.value for n in pair]
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    return []


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
    """`model` from `data`, or an InputError at the first problem's file, line and field,
    said in the config's own terms (never pydantic's or the schema's class names)."""
    try:
        return model.model_validate(data if data is not None else {})
    except ValidationError as exc:
        errors = exc.errors()
        places = list(dict.fromkeys(_place(e)[0] for e in errors))
        said = [_problem(model, errors, loc) for loc in places]

        def line_of(loc: FieldPath) -> int | None:
            return next((lines[loc[:n]] for n in range(len(loc), -1, -1) if loc[:n] in lines), None)

        message = said[0]
        if len(said) > 1:  # every problem, each at its own line and field
            others = [
                f"line {line_of(loc)}, field '{_dotted(loc)}': {text}"
                if line_of(loc) is not None
                else f"field '{_dotted(loc)}': {text}"
                for loc, text in zip(places[1:], said[1:], strict=True)
            ]
            message += f"; {len(others)} more problem{'s' * (len(others) > 1)}: " + "; ".join(
                others
            )
        loc = places[0]
        raise InputError(
            message, path=path, line=line_of(loc), field=_dotted(loc) or None
        ) from None


def _dotted(loc: FieldPath) -> str:
    return ".".join(str(p) for p in loc)


def _problem(model: type[BaseModel], errors: list[ErrorDetails], loc: FieldPath) -> str:
    """What is wrong at `loc`, in the config's terms; a misspelt key with the closest
    known one."""
    branches = [e for e in errors if _place(e)[0] == loc]
    first = branches[0]
    if not _place(first)[1]:
        branches = branches[:1]
    # a field that accepts several kinds reports one error per kind: say them together
    kinds = list(dict.fromkeys(_plain(e) for e in branches))
    message = " or ".join([kinds[0], *(k.removeprefix("expected ") for k in kinds[1:])])
    given = first.get("input")
    if first["type"] in _KINDS and isinstance(given, _SCALARS):
        message += f", got {given!r}"
    if first["type"] == "extra_forbidden" and loc and isinstance(loc[-1], str):
        close = difflib.get_close_matches(loc[-1], _known_keys(model, loc[:-1]), n=1)
        if close:
            message += f" (did you mean '{close[0]}'?)"
    return message


def _known_keys(model: type[BaseModel], loc: FieldPath) -> list[str]:
    """The setting names a mapping at `loc` takes (its model's fields and their
    aliases); empty where `loc` leads to no model."""
    kind: Any = model
    for part in loc:
        kind = _model_in(kind)
        if kind is None:
            return []
        if isinstance(part, int):
            continue
        field = kind.model_fields.get(part)
        if field is None:
            return []
        kind = field.annotation
    found = _model_in(kind)
    if found is None:
        return []
    names = list(found.model_fields)
    names += [f.alias for f in found.model_fields.values() if f.alias]
    return names


def _model_in(kind: Any) -> Any:
    """The pydantic model a field's type holds (itself, the item of a list, one side of
    a union), or None."""
    if isinstance(kind, type) and issubclass(kind, BaseModel):
        return kind
    for arg in typing.get_args(kind):
        found = _model_in(arg)
        if found is not None:
            return found
    return None


def located(message: str, *loc: str | int) -> PydanticCustomError:
    """A problem found by a check across fields, reported at the field `loc` names."""
    return PydanticCustomError("located", "{message}", {"message": message, "loc": loc})


_SCALARS = (str, int, float, bool, type(None))
_WHERE = {  # pydantic error type -> what is wrong with the place itself
    "missing": "required here",
    "extra_forbidden": "not a known setting here; check its spelling and indentation",
}
_KINDS = {  # pydantic error type -> what the config needed there
    "model_type": "expected a mapping of settings (key: value lines)",
    "model_attributes_type": "expected a mapping of settings (key: value lines)",
    "dict_type": "expected a mapping (key: value lines)",
    "list_type": "expected a list (lines starting with '- ')",
    "string_type": "expected text",
    "int_type": "expected a whole number",
    "int_parsing": "expected a whole number",
    "int_from_float": "expected a whole number",
    "float_type": "expected a number",
    "float_parsing": "expected a number",
    "finite_number": "expected a finite number (not inf or nan)",
    "bool_type": "expected true or false",
    "bool_parsing": "expected true or false",
    "string_too_short": "must not be empty",
    "greater_than": "must be more than {gt}",
    "greater_than_equal": "must be at least {ge}",
    "less_than": "must be less than {lt}",
    "less_than_equal": "must be at most {le}",
    "too_short": "needs at least {min_length} item(s)",
    "too_long": "takes at most {max_length} item(s)",
    "literal_error": "expected {expected}",
}


def _place(error: ErrorDetails) -> tuple[FieldPath, bool]:
    """Where the error is, in config keys, and whether pydantic added the name of one
    of a field's accepted kinds to that place (which is then dropped)."""
    ctx = error.get("ctx") or {}
    if "loc" in ctx:
        return tuple(ctx["loc"]), False
    full = error["loc"]
    own_key = len(full) - 1 if error["type"] == "extra_forbidden" else -1  # the user's key
    loc = tuple(p for i, p in enumerate(full) if i == own_key or not _kind_tag(p))
    return loc, len(loc) < len(full)


def _kind_tag(part: str | int) -> bool:
    """'str', 'dict[str,any]', 'Generation', ...: a kind pydantic tried, not a key."""
    return isinstance(part, str) and (
        "[" in part or part[:1].isupper() or part in ("str", "int", "float", "bool", "none")
    )


def _plain(error: ErrorDetails) -> str:
    ctx = error.get("ctx") or {}
    if error["type"] in ("value_error", "assertion_error", "located"):
        return str(ctx.get("message") or ctx.get("error") or error["msg"])
    template = _WHERE.get(error["type"]) or _KINDS.get(error["type"])
    return template.format(**ctx) if template else error["msg"].replace("Input should", "should")


def load_config(model: type[M], path: str | Path) -> M:
    path = Path(path)
    data, lines = load_yaml(path)
    return validate(model, data, path=path, lines=lines)
