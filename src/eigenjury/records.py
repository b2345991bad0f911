"""Typed, versioned records: what every method produces, and the only thing reports and
the viewer read.

A record is a pydantic model whose JSON starts with `kind` (what it is) and `eigenjury`
(the version that wrote it). Each method declares its kinds in its own `record` module
(listed in RECORD_MODULES); importing those modules registers them. Files written before
records carried a kind (eigenjury 0.1) are still read: each kind says how to recognise
its older files (`legacy`). A file that is not a record, of an unknown kind, or that
does not match its kind's model is refused with a message naming the file and field.
"""

from __future__ import annotations

import importlib
import json
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, TextIO, TypeVar

from pydantic import (
    BaseModel,
    ConfigDict,
    SerializerFunctionWrapHandler,
    ValidationError,
    model_serializer,
)

from eigenjury import __version__
from eigenjury.errors import InputError
from eigenjury.files import (
    OutputFile,
    json_text,
    load_json,
    open_regular,
    read_text,
    validation_problem,
    within,
    write_text,
)

if TYPE_CHECKING:  # (the viewer imports records without the model layer)
    from eigenjury.models.verdict_format import VerdictMode

# Where record kinds are declared: a new method adds its record module here.
RECORD_MODULES = ("eigenjury.peer.record", "eigenjury.contracts.record", "eigenjury.bounds.record")
# Folders a search for records never enters: caches, environments, version control.
SKIPPED_FOLDERS = frozenset({".eigenjury", ".git", ".venv", "venv", "node_modules", "__pycache__"})
# A record states its kind (or, written by 0.1, its version) in its first bytes.
_HEAD_BYTES = 1024

R = TypeVar("R", bound="Record")


def now() -> str:
    """The time a record is made, ISO 8601 in UTC to the second."""
    return datetime.now(UTC).replace(microsecond=0).isoformat()


class Record(BaseModel):
    """Base of every record. Unknown fields and non-finite numbers are refused: a record
    is read back by reports, `bound apply` and the viewer, and must mean one thing."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    KIND: ClassVar[str] = ""
    FILE: ClassVar[str] = ""  # the file name it is usually written under
    ALIASES: ClassVar[tuple[str, ...]] = ()  # names this kind had in older versions
    KINDS: ClassVar[dict[str, type[Record]]] = {}

    kind: str
    eigenjury: str = __version__
    created: str | None = None  # when the record was made (records of 0.1 have none)

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if cls.KIND:
            Record.KINDS[cls.KIND] = cls

    @classmethod
    def legacy(cls, data: dict[str, Any]) -> bool:
        """Whether `data`, a JSON object with no `kind`, is this kind as eigenjury 0.1
        wrote it."""
        return False

    def overview(self) -> Overview:
        """What a list of runs shows of this record."""
        return Overview()


class Part(BaseModel):
    """A part of a record: strict like the record itself."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)


class Sparse(Part):
    """A part whose `OMITTED` fields are left out of its JSON when they are None (as
    eigenjury 0.1 wrote them: absent, not null)."""

    OMITTED: ClassVar[frozenset[str]] = frozenset()

    @model_serializer(mode="wrap")
    def _omit_absent(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data: dict[str, Any] = handler(self)
        return {k: v for k, v in data.items() if not (v is None and k in self.OMITTED)}


class VerdictModes(Part):
    """How one judge's first replies gave their verdicts (models.verdict_format.
    verdict_mode), and how many of them no reading could grade, before any repair."""

    structured: int
    scores: int
    text: int
    unread: int
    unread_rate: float | None  # None: no reply

    @classmethod
    def tally(cls, replies: Iterable[tuple[VerdictMode, bool]]) -> VerdictModes:
        """From (verdict mode, read) per first reply."""
        modes: dict[str, int] = {"structured": 0, "scores": 0, "text": 0}
        unread = 0
        for mode, read in replies:
            modes[mode] += 1
            unread += not read
        total = sum(modes.values())
        return cls(**modes, unread=unread, unread_rate=unread / total if total else None)

    def line(self) -> str:
        """One line for a terminal or a report: the modes used and the failure rate."""
        counts = (("structured", self.structured), ("scores", self.scores), ("text", self.text))
        used = ", ".join(f"{n} {mode}" for mode, n in counts if n)
        rate = "" if self.unread_rate is None else f"; unread {self.unread_rate:.0%}"
        return f"{used or 'no replies'}{rate}"


class Latency(Part):
    mean: float
    p50: float
    p95: float


class _Counts(Part):
    calls: int
    cached: int
    errors: dict[str, int]
    input_tokens: int
    output_tokens: int
    cost_usd: float | None
    cost_complete: bool
    latency_s: Latency | None


class Tally(_Counts):
    """Calls, tokens, cost and latency of some calls (engine.accounting.Tally.record())."""


class _Labels(Part):
    model: str
    role: str


class TallyByRole(_Counts, _Labels):
    """A tally of one model in one role (model and role first, as they are written)."""


class AccountingRecord(Part):
    """What a run's calls cost, in total and per model and role (Accounting.record())."""

    total: Tally
    by_model_and_role: list[TallyByRole]


@dataclass(frozen=True)
class Overview:
    """A record as one row of a run list."""

    name: str | None = None
    models: tuple[str, ...] = ()
    cost_usd: float | None = None


def kinds() -> dict[str, type[Record]]:
    """Every record kind, by name (importing the methods' record modules)."""
    for module in RECORD_MODULES:
        importlib.import_module(module)
    return dict(Record.KINDS)


def record_kind(data: Any) -> str | None:
    """The kind of a parsed JSON value: its `kind` (or the newer name of an older one),
    or the 0.1 kind its shape matches; None when it is no record."""
    if not isinstance(data, dict):
        return None
    known = kinds()
    kind = data.get("kind")
    if kind is None:
        return next((name for name, cls in known.items() if cls.legacy(data)), None)
    if not isinstance(kind, str):
        return None
    named = next((name for name, cls in known.items() if kind in (name, *cls.ALIASES)), None)
    if named is None and "eigenjury" not in data:
        return None  # someone else's JSON with a field called kind
    return named or kind


def parse_record(data: Any, path: Path, expect: type[R] | None = None) -> Record:
    """`data` (parsed JSON from `path`) as its record, or a located InputError."""
    kind = record_kind(data)
    wanted = f"a {expect.KIND} record" if expect is not None else "an eigenjury record"
    if kind is None:
        raise InputError(
            f"not {wanted} (expected a JSON object with a 'kind' written by eigenjury)", path=path
        )
    assert isinstance(data, dict)
    cls = kinds().get(kind)
    writer = data.get("eigenjury")
    by = f" (written by eigenjury {writer}; this is {__version__})" if writer != __version__ else ""
    if cls is None:
        raise InputError(
            f"unknown record kind {kind!r}{by}; this eigenjury reads {', '.join(sorted(kinds()))}",
            path=path,
            field="kind",
        )
    if expect is not None and cls is not expect:
        raise InputError(f"this is a {kind} record, not {wanted}", path=path, field="kind")
    try:
        return cls.model_validate({**data, "kind": cls.KIND})
    except ValidationError as exc:
        # validation_problem leads with the field
        raise InputError(
            f"not a valid {kind} record{by}: {validation_problem(exc)}", path=path
        ) from None


def read_record(path: Path, expect: type[R]) -> R:
    """The record of kind `expect` in the JSON file at `path`."""
    record = parse_record(load_json(read_text(path), path), path, expect)
    assert isinstance(record, expect)
    return record


def read_any_record(path: Path) -> Record:
    """Whatever record the JSON file at `path` holds."""
    return parse_record(load_json(read_text(path), path), path)


def record_text(record: Record) -> str:
    """The record as the JSON text of its file; `kind` and the version come first."""
    return json_text(record.model_dump(mode="json"))


def write_record(path: Path, record: Record) -> None:
    """The record as JSON, atomically."""
    write_text(path, record_text(record))


def dump_lines(rows: Iterable[BaseModel]) -> str:
    """Rows as JSON lines (a record's long parts: transcripts, traces)."""
    return "".join(_line(r) for r in rows)


def _line(row: BaseModel) -> str:
    return json.dumps(row.model_dump(mode="json"), ensure_ascii=False) + "\n"


class LinesFile:
    """Rows written as JSON lines while a run goes, for parts too long to hold in memory
    (a run's transcripts). Entering takes the output (files.OutputFile: one writer at a
    time, or a clear refusal, before anything is spent); rows go to its temporary file,
    which the run's outputs move into place at the end (reports.output.write_outputs,
    through `commit`); leaving the `with` block any other way removes it."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._output = OutputFile(path)
        self._file: TextIO | None = None

    def __call__(self, row: BaseModel) -> None:
        assert self._file is not None, "rows are written inside the with block"
        self._file.write(_line(row))

    def commit(self) -> None:
        """Move the rows written so far into place (an empty file if none came)."""
        self._close()
        self._output.commit()

    def _close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None

    def __enter__(self) -> LinesFile:
        self._output.__enter__()
        try:
            self._file = self._output.tmp.open("w", encoding="utf-8")
        except OSError as exc:
            self._output.__exit__(None, None, None)
            raise self._output.problem(exc) from None
        return self

    def __exit__(self, *exc: object) -> None:
        self._close()
        self._output.__exit__(*exc)


@dataclass(frozen=True)
class Found:
    """A record file found by `find_records`: the record, or why it could not be read."""

    path: Path
    record: Record | None
    problem: InputError | None


def looks_like_record(path: Path) -> bool:
    """Whether a JSON file may be a record, cheaply, so a search parses only those: its
    first bytes name a kind or a version, or it has a record's usual file name (0.1
    wrote some records with neither near the top). Only a regular file may: a named
    pipe is never waited on."""
    try:
        with open_regular(path) as f:
            head = f.read(_HEAD_BYTES)
    except OSError:
        return False
    if head.lstrip()[:1] != b"{":
        return False
    return _usual_name(path) or b'"kind"' in head or b'"eigenjury"' in head


def _usual_name(path: Path) -> bool:
    return path.name in {cls.FILE for cls in kinds().values()}


# Why a record file under a searched folder is not read.
OUTSIDE = "a symbolic link to a file outside the folders given; not read"


def record_files(root: Path) -> Iterator[Path]:
    """JSON files under `root` (itself, when a file) that start like a record, in a
    stable order; caches, environments and hidden folders are not entered. A symbolic
    link is read only if it leads to a file inside `root`; one that leads out is never
    read, but is listed if it has a record's usual name, for find_records to name."""
    if root.is_file():
        yield root
        return
    inside = Path(os.path.realpath(root))
    for folder, subfolders, files in os.walk(root):
        subfolders[:] = sorted(
            d for d in subfolders if d not in SKIPPED_FOLDERS and not d.startswith(".")
        )
        for name in sorted(files):
            path = Path(folder, name)
            if not name.endswith(".json"):
                continue
            if looks_like_record(path) if within(path, inside) else _usual_name(path):
                yield path


def find_records(roots: Iterable[Path]) -> list[Found]:
    """Every record under `roots`, read and validated; damaged ones with their problem,
    and links that lead out of the roots with OUTSIDE (never read). JSON that is no
    record at all (another tool's results.json) is passed over."""
    found = []
    for root in roots:
        inside = Path(os.path.realpath(root))  # a record file given: its own folder
        inside = inside if inside.is_dir() else inside.parent
        for path in record_files(root):
            if not within(path, inside):
                found.append(Found(path, None, InputError(OUTSIDE, path=path)))
                continue
            try:
                data = load_json(read_text(path), path)
                if record_kind(data) is not None:
                    found.append(Found(path, parse_record(data, path), None))
            except InputError as exc:
                found.append(Found(path, None, exc))
    return found
