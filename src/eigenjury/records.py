"""Typed, versioned records: what every method produces, and the only thing reports and
the viewer read.

A record is a pydantic model whose JSON starts with `kind` (what it is), `eigenjury`
(the version that wrote it) and `schema_version` (the layout of its kind, counted per
kind). Each method declares its kinds in its own `record` module (listed in
RECORD_MODULES); importing those modules registers them.

Old files are read by their schema, never by guessing at their fields: a file with a
kind and no `schema_version` (eigenjury 0.2 and 0.3.0) is schema 1; a file with no
kind at all is schema 0, as only eigenjury 0.1 wrote them, and its kind is the one
whose 0.1 layout (`SHAPE_0_1`, the fields that kind alone had) it carries. A kind whose
layout changes raises its `SCHEMA` and says in `upgrade` how to read the older one; a
file of a newer schema than this eigenjury knows is refused with the versions named.
A file that is not a record, of an unknown kind, or that does not match its kind's
model is refused with a message naming the file and field.
"""

from __future__ import annotations

import importlib
import json
import os
import secrets
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Self, TextIO, TypeVar

from pydantic import (
    BaseModel,
    ConfigDict,
    SerializerFunctionWrapHandler,
    ValidationError,
    model_serializer,
    model_validator,
)

from eigenjury._version import __version__
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

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, use_attribute_docstrings=True)

    KIND: ClassVar[str] = ""
    FILE: ClassVar[str] = ""  # the file name it is usually written under
    ALIASES: ClassVar[tuple[str, ...]] = ()  # names this kind had in older versions
    SCHEMA: ClassVar[int] = 1  # this kind's layout, raised when it changes
    SHAPE_0_1: ClassVar[frozenset[str]] = frozenset()  # fields only this kind had in 0.1
    LONG: ClassVar[str | None] = None  # a list field written an item at a time (record_pieces)
    KINDS: ClassVar[dict[str, type[Record]]] = {}

    kind: str
    """What the record is ("ranking", "grading", ...): the first field of its file."""
    eigenjury: str = __version__
    """The version of eigenjury that wrote the file."""
    schema_version: int = 1
    """The layout of its kind, counted per kind (`SCHEMA`); files of 0.2 and 0.3.0 have none and are
    read as 1."""
    created: str | None = None
    """When the record was made: ISO 8601 in UTC, to the second (None in records of 0.1, which have
    none)."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if cls.KIND:
            Record.KINDS[cls.KIND] = cls

    @model_validator(mode="after")
    def _current_layout(self) -> Self:
        """A record in memory is in its kind's current layout (files are upgraded as
        they are read), so that is the schema it writes."""
        self.schema_version = self.SCHEMA
        return self

    @classmethod
    def upgrade(cls, data: dict[str, Any], schema: int) -> dict[str, Any]:
        """`data`, a file of this kind in layout `schema` (0 to SCHEMA - 1), as the
        current layout. Every schema so far only added fields, so nothing moves."""
        return data

    def overview(self) -> Overview:
        """What a list of runs shows of this record."""
        return Overview()


class Part(BaseModel):
    """A part of a record: strict like the record itself."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, use_attribute_docstrings=True)


class Sparse(Part):
    """A part whose `OMITTED` fields are left out of its JSON when they are None (as
    eigenjury 0.1 wrote them: absent, not null)."""

    OMITTED: ClassVar[frozenset[str]] = frozenset()

    @model_serializer(mode="wrap")
    def _omit_absent(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data: dict[str, Any] = handler(self)
        return {k: v for k, v in data.items() if not (v is None and k in self.OMITTED)}


class EstimatePart(Part):
    """A bootstrap estimate (stats.agreement.Estimate.record()); None where undefined."""

    value: float | None
    """The statistic on the data itself, to 4 decimals (a mean task score to 2); None where
    undefined."""
    ci: tuple[float | None, float | None]
    """Its bootstrap percentile interval [low, high] at the record's confidence (95% in a grading's
    summary); an end is None where undefined."""


class VerdictModes(Part):
    """How one judge's first replies gave their verdicts (models.verdict_format.
    verdict_mode), and how many of them no reading could grade, before any repair."""

    structured: int
    """First replies that gave a structured verdict (JSON naming one of the choices)."""
    scores: int
    """First replies in free text whose call also scored the choices (log-probabilities)."""
    text: int
    """First replies in free text alone."""
    unread: int
    """First replies, of the three kinds above, that no reading could grade (before any repair)."""
    unread_rate: float | None
    """`unread` over all first replies, from 0 to 1; None: no reply."""

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
    """Mean seconds per call, over the calls answered and not from the store."""
    p50: float
    """Median seconds per call, over the same calls."""
    p95: float
    """95th percentile of seconds per call, over the same calls."""


class _Counts(Part):
    calls: int
    """Calls, those answered from the store and those that failed or were not sent (a budget stop)
    included."""
    cached: int
    """Of them, those answered from the store (or by the same call earlier in the run)."""
    errors: dict[str, int]
    """Calls that failed or were not sent, by error kind ("timeout", "budget", ...)."""
    input_tokens: int
    """Prompt tokens of the answered calls, those from the store included."""
    output_tokens: int
    """Reply tokens of the answered calls, those from the store included."""
    cost_usd: float | None
    """US dollars of the answered calls with a known price (those from the store at what they cost
    when made); None when some had no known price and the rest cost nothing."""
    cost_complete: bool
    """Whether every answered call had a known price (else `cost_usd` leaves some out)."""
    latency_s: Latency | None
    """Seconds per call, of the calls answered and not from the store; None: no such call."""


class TallyPart(_Counts):
    """Calls, tokens, cost and latency of some calls (engine.accounting.Tally.record())."""


class _Labels(Part):
    model: str
    """The model, as its spec; in a `rank` run or a style check, the member's name instead."""
    role: str
    """What its calls were for ("juror", "candidate", "comparison", ...; "-": not said)."""


class TallyByRole(_Counts, _Labels):
    """A tally of one model in one role (model and role first, as they are written)."""


class EndpointLimitsPart(Part):
    """How one served endpoint's limits went in a run (engine.limits.EndpointLimiter)."""

    endpoint: str
    """The endpoint's URL, its secrets hidden."""
    concurrency: int
    """Calls in flight at most, as configured."""
    started_at: int
    """The limit the run started from: the configured one, or lower where an earlier run
    found the endpoint bears less (kept in the store)."""
    ended_at: int
    """The limit at the end of the run (cut on 429s, raised while calls succeed); kept for
    the next run where the run was refused."""
    rate_limited: int
    """Answers that were 429s (each retried)."""
    paced_from: float | None = None
    """Requests a second the run was paced at from its start, as an earlier run found the
    endpoint throttles; None: not paced."""
    paced_at: float | None = None
    """Requests a second it was paced at in the end: the share of what the endpoint accepted
    when it throttled, raised while calls succeed; kept for the next run. None: never
    throttled."""
    stated_rpm: float | None
    """Requests a minute the server's headers said it allows (the rate's ceiling); None:
    not said."""
    stated_tpm: float | None
    """Tokens a minute the server's headers said it allows; None: not said."""


class AccountingRecord(Part):
    """What a run's calls cost, in total and per model and role (Accounting.record())."""

    total: TallyPart
    """Every call of the run."""
    by_model_and_role: list[TallyByRole]
    """The same calls per model and role, sorted by model, then role."""
    endpoints: list[EndpointLimitsPart] = []
    """The served endpoints' limits as the run found them (empty in older records, and where
    the calls ran on a cluster)."""


class Spread(Part):
    """A planned figure and its range (engine.plan.Spread)."""

    low: float
    """The low end: what the calls use if they run short."""
    planned: float
    """The estimate."""
    high: float
    """The high end: what the calls use if they run long."""


class _PlanCounts(Part):
    calls: int
    """Calls the run makes for certain (allowances apart)."""
    stored: int
    """Of them, those the store already answers (or an identical call earlier in the run)."""
    to_send: int
    """Of them, those to send."""


class PlanRow(_PlanCounts):
    """One model in one role of a plan."""

    model: str
    """The model, as its spec."""
    role: str
    """What its calls are for ("evaluee", "comparison", "juror", ...; "-": not said)."""
    allowance: bool
    """Whether these calls are made only as the replies require (a repair of a reply that
    cannot be read, a cascade's escalation): counted at the most the run can make."""
    input_tokens: Spread
    """Prompt tokens of the calls to send."""
    output_tokens: Spread
    """Reply tokens of the calls to send."""
    cost_usd: Spread | None
    """US dollars of the calls to send; None when the model has no known price."""
    from_history: bool
    """Whether the tokens are estimated from the model's own calls in the store (else from a
    stated proxy: four characters a token, and the reply at its max_tokens)."""
    uncapped: int = 0
    """Of the calls to send, those whose requests set no max_tokens: their replies have no upper
    bound, so the high end is not one (planned at 256 tokens, or the model's history)."""


class PlanTotal(_PlanCounts):
    """Calls and cost of several models and roles of a plan."""

    allowance_calls: int
    """Calls made only as the replies require, at most."""
    input_tokens: Spread | None
    """Prompt tokens of the certain calls to send."""
    output_tokens: Spread | None
    """Reply tokens of the certain calls to send."""
    cost_usd: Spread | None
    """US dollars of the certain calls to send; None when a model has no known price."""
    cost_usd_most: float | None
    """The most the calls can cost: the high end with every allowance used."""


class PlanModel(PlanTotal):
    """One model's share of a plan."""

    model: str
    """The model, as its spec."""
    history_calls: int
    """Its successful calls in the store that the estimates learn from."""
    priced: bool
    """Whether the price table knows it."""
    latency_s: float | None
    """Its mean seconds per call in the store; None with too few calls (an assumed latency is
    used)."""
    batched: bool = False
    """Whether its calls go through its provider's batch API (the batch-api backend): at the
    batch price, within 24 hours."""


class PlanRecord(Record):
    """What a run would call and cost, with nothing called or written (`--plan`;
    engine/plan.py says how each figure is estimated)."""

    KIND: ClassVar[str] = "plan"
    FILE: ClassVar[str] = "plan.json"
    kind: str = KIND
    """Always "plan"."""

    command: str
    """The command planned ("rank", "grade", ...)."""
    by_model_and_role: list[PlanRow]
    """The calls per model and role, sorted by model, then role."""
    models: list[PlanModel]
    """The calls and cost per model."""
    total: PlanTotal
    """Every model's calls and cost."""
    time_s: Spread
    """Seconds the calls to send take under the configured limits (the high end at the slower of
    each model's own and an assumed latency)."""
    budgets: list[str]
    """Where the plan exceeds a budget: a sentence each (empty when within every budget or none is
    set)."""

    def overview(self) -> Overview:
        cost = self.total.cost_usd
        return Overview(
            name=f"plan of {self.command}",
            models=tuple(m.model for m in self.models),
            cost_usd=None if cost is None else cost.planned,
        )


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


def schema_of(data: dict[str, Any]) -> int:
    """The layout a record file says it has: 0 without a kind (eigenjury 0.1), 1 with a
    kind and no schema_version (0.2 and 0.3.0), else what it states."""
    if "kind" not in data:
        return 0
    stated = data.get("schema_version", 1)
    return stated if isinstance(stated, int) and not isinstance(stated, bool) else -1


def record_kind(data: Any) -> str | None:
    """The kind of a parsed JSON value: its `kind` (or the newer name of an older one),
    or the 0.1 kind its shape matches; None when it is no record."""
    if not isinstance(data, dict):
        return None
    known = kinds()
    kind = data.get("kind")
    if kind is None:
        return next((name for name, cls in known.items() if _shaped_0_1(cls, data)), None)
    if not isinstance(kind, str):
        return None
    named = next((name for name, cls in known.items() if kind in (name, *cls.ALIASES)), None)
    if named is None and "eigenjury" not in data:
        return None  # someone else's JSON with a field called kind
    return named or kind


def _shaped_0_1(cls: type[Record], data: dict[str, Any]) -> bool:
    return bool(cls.SHAPE_0_1) and data.keys() >= cls.SHAPE_0_1


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
    schema = schema_of(data)
    if schema < 0:
        raise InputError(
            f"schema_version must be a whole number, not {data['schema_version']!r}",
            path=path,
            field="schema_version",
        )
    if schema > cls.SCHEMA:
        raise InputError(
            f"this {kind} record has schema {schema}{by}, and this eigenjury reads schemas "
            f"up to {cls.SCHEMA}; upgrade eigenjury to read it",
            path=path,
            field="schema_version",
        )
    data = cls.upgrade(dict(data), schema)
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


def record_pieces(record: Record) -> Iterator[str]:
    """`record_text` in pieces: the record's `LONG` list an item at a time, so that a
    large record (a grading's tasks) is written without its whole JSON tree in memory."""
    long = record.LONG
    items = getattr(record, long) if long else None
    if not long or not items:
        yield record_text(record)
        return
    marker = f"eigenjury-{secrets.token_hex(8)}"  # where the list goes; in no user's text
    head = record.model_copy(update={long: []}).model_dump(mode="json")
    head[long] = marker  # in the field's place
    before, after = json_text(head).split(json.dumps(marker), 1)
    yield before + "["
    for k, item in enumerate(items):
        text = json.dumps(item.model_dump(mode="json"), indent=2, ensure_ascii=False)
        yield ("," if k else "") + "\n    " + text.replace("\n", "\n    ")
    yield "\n  ]" + after


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


def is_kind(path: Path, kind: str) -> bool:
    """Whether the file is a record of `kind`, from its first bytes (where every record
    written by eigenjury 0.2 on names its kind): a plan may be written over only an
    earlier plan."""
    try:
        with open_regular(path) as f:
            head = f.read(_HEAD_BYTES)
    except OSError:
        return False
    return head.lstrip()[:1] == b"{" and f'"kind": {json.dumps(kind)}'.encode() in head


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
