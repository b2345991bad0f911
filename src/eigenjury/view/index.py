"""Byte-offset indexes over a run's long JSON-lines files, so the viewer shows a page of
a several-hundred-megabyte transcript without parsing the whole file.

A ranking run's transcripts.jsonl is read once, line by line: a compiled pattern reads
who, what and which verdict from the first bytes of each line (its keys come in a fixed
order), and only the offsets are kept. A page then seeks to its twenty lines. A line
the pattern does not recognise (another key order) is parsed in full, so nothing is
missed, only slower. A line that cannot be read (not JSON, not an object, verdicts that
are not verdicts) is left out and counted, and the first few are named, so one bad line
never hides the rest of the file. Only regular files are opened (files.open_regular):
a named pipe in a run folder never blocks the viewer.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from eigenjury.errors import InputError
from eigenjury.files import json_kind, open_regular

_STRING = rb'"(?:[^"\\]|\\.)*"'
_TRANSCRIPT_HEAD = re.compile(
    rb'\{"role": "(evaluee|reflection|comparison|repair)", "member": (' + _STRING + rb"), "
    rb'"scenario": (' + _STRING + rb")"
    rb'(?:, "evaluee": (' + _STRING + rb"))?"
    rb'(?:, "first": (' + _STRING + rb'), "second": (' + _STRING + rb")"
    rb'(?:, "verdicts": (null|\[[^\]]*\])'
    rb'(?:, "failure": (null|' + _STRING + rb"))?)?)?"
)
_TRACE_HEAD = re.compile(
    rb'\{"task_id": (' + _STRING + rb'), "candidate": (' + _STRING + rb"|null)"
)
# What a comparison's verdicts (one per criterion: 0 tie, 1 first, 2 second, null
# unread) come to, as the transcript filter offers them: after its repair, if it had
# one; "unread" and "failed" are the terminal's "parse" and "judge error".
VERDICTS = ("first", "second", "tie", "mixed", "unread", "failed", "unrecorded")
_VERDICT_OF = {0: "tie", 1: "first", 2: "second"}
_NO_LINE = -1
NAMED_LINES = 5  # unreadable lines named in full; the rest are counted


@dataclass
class Unreadable:
    """The lines of a file an index could not read: how many, and the first few named
    ("line 12: not a JSON object but a list")."""

    lines: int = 0
    named: list[str] = field(default_factory=list)
    _seen: set[str] = field(default_factory=set)

    def add(self, where: str, problem: object) -> None:
        """A line that cannot be read (each `where` counted once)."""
        if where in self._seen:
            return
        self._seen.add(where)
        self.lines += 1
        if len(self.named) < NAMED_LINES:
            self.named.append(f"{where}: {problem}")

    def report(self) -> dict[str, Any]:
        return {"unreadable_lines": self.lines, "unreadable": list(self.named)}


@dataclass(frozen=True)
class Damaged:
    """A line whose start the index read, but which cannot be read whole now (cut or
    edited since)."""

    offset: int
    problem: str

    @property
    def where(self) -> str:
        return f"the line at byte {self.offset}"


Line = dict[str, Any] | Damaged | None


def json_line(line: bytes) -> dict[str, Any]:
    """One JSON-lines line as an object; anything else is a ValueError saying what."""
    data = json.loads(line)
    if not isinstance(data, dict):
        raise ValueError(f"not a JSON object but {json_kind(data)}")
    return data


def verdict_category(verdicts: Any, recorded: bool = True, failure: Any = None) -> str:
    """One word for a comparison's verdicts (a list of 0, 1, 2 or null, one per
    criterion): all criteria agree (first, second, tie), they differ (mixed), none was
    read (unread), the call failed (failed: `failure` other than "parse"), or the file
    predates verdicts. Anything else is a ValueError."""
    if not recorded:
        return "unrecorded"
    if failure is not None and failure != "parse":
        return "failed"
    if verdicts is not None and not (
        isinstance(verdicts, list) and all(v is None or v in _VERDICT_OF for v in verdicts)
    ):
        raise ValueError("'verdicts' is not a list of 0, 1, 2 or null")
    read = {v for v in verdicts or () if v is not None}
    if not read:
        return "unread"
    if len(read) > 1:
        return "mixed"
    return _VERDICT_OF.get(read.pop(), "unread")


def read_lines(path: Path, offsets: Iterable[int]) -> Iterator[Line]:
    """The JSON objects starting at `offsets` in `path`: None for no line, Damaged for a
    line damaged past what the index read of it. A file gone since is an InputError."""
    try:
        with open_regular(path) as f:
            for offset in offsets:
                if offset == _NO_LINE:
                    yield None
                    continue
                f.seek(offset)
                try:
                    line: Line = json_line(f.readline())
                except ValueError as exc:
                    line = Damaged(offset, str(exc))
                yield line
    except OSError as exc:
        raise InputError(f"cannot read the file: {exc}", path=path) from None


class _Names:
    """Interned names: each distinct string once, comparisons hold small codes."""

    def __init__(self) -> None:
        self.names: list[str] = []
        self.codes: dict[str, int] = {}

    def code(self, name: str) -> int:
        found = self.codes.get(name)
        if found is None:
            found = self.codes[name] = len(self.names)
            self.names.append(name)
        return found


@dataclass
class _Comparisons:
    """Column per field, one entry per comparison line (and per repair line that
    follows no unread comparison of its judge, pair and scenario). `verdict` is the
    verdict that counted: a repaired comparison's is its repair's."""

    offset: list[int] = field(default_factory=list)
    repair: list[int] = field(default_factory=list)  # its repair line's offset, or _NO_LINE
    role: list[str] = field(default_factory=list)
    judge: list[int] = field(default_factory=list)
    first: list[int] = field(default_factory=list)
    second: list[int] = field(default_factory=list)
    scenario: list[int] = field(default_factory=list)
    verdict: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Filters:
    """A transcript query; None matches anything. `evaluee` is either side."""

    judge: str | None = None
    evaluee: str | None = None
    scenario: str | None = None
    verdict: str | None = None


def _whole_head(head: re.Match[bytes], line: bytes) -> bool:
    """Whether the first bytes read all that the line's role needs (a comparison its
    sides and any verdicts, a reflection its evaluee); if not, the line is parsed."""
    role, evaluee, first, verdicts, failure = head.group(1, 4, 5, 7, 8)
    if role in (b"comparison", b"repair"):
        unread_verdicts = verdicts is None and line.startswith(b', "verdicts"', head.end())
        unread_failure = failure is None and line.startswith(b', "failure"', head.end())
        return first is not None and not unread_verdicts and not unread_failure
    return role != b"reflection" or evaluee is not None


def _name(data: dict[str, Any], key: str) -> str:
    """A transcript line's name at `key` (a member, a scenario)."""
    value = data.get(key)
    if not isinstance(value, str):
        raise ValueError(f"'{key}' is {json_kind(value)}, not a name")
    return value


class TranscriptIndex:
    """Where each comparison, reply and reflection of a transcripts.jsonl lies.

    `start()` indexes in a background thread; until `ready`, queries are answered with
    the progress so far, so a run's page paints before its transcripts are read."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.size = path.stat().st_size
        self.bytes_read = 0
        self.error: str | None = None  # why indexing stopped (the file is gone, ...)
        self.unreadable = Unreadable()
        self._names = _Names()
        self._tokens: dict[bytes, int] = {}  # a name as written in the file -> its code
        self._verdict_tokens: dict[tuple[bytes | None, bytes | None], str] = {}
        self._rows = _Comparisons()
        # (judge, first, second, scenario) of unread comparisons -> row: where a repair goes
        self._repairable: dict[tuple[int, int, int, int], int] = {}
        self._replies: dict[tuple[int, int], int] = {}  # (evaluee, scenario) -> offset
        self._reflections: dict[tuple[int, int, int], int] = {}  # (judge, evaluee, scenario)
        self._done = threading.Event()
        self._started = False
        self._lock = threading.Lock()
        self._queries: dict[Filters, list[int]] = {}  # the last few answers, for paging

    @property
    def ready(self) -> bool:
        return self._done.is_set()

    def start(self) -> None:
        with self._lock:
            if self._started:
                return
            self._started = True
        threading.Thread(target=self._build, name=f"index {self.path}", daemon=True).start()

    def wait(self, timeout: float | None = None) -> bool:
        self.start()
        return self._done.wait(timeout)

    def _build(self) -> None:
        number = 0
        try:
            with open_regular(self.path) as f:
                offset = 0
                for number, line in enumerate(f, 1):
                    try:
                        self._add(line, offset)
                    except ValueError as exc:  # (UnicodeDecodeError and JSON errors too)
                        self.unreadable.add(f"line {number}", exc)
                    offset += len(line)
                    self.bytes_read = offset
        except OSError as exc:  # the file changed, vanished or is not a file
            self.error = f"{self.path}, line {number}: cannot index the transcripts: {exc}"
        except Exception as exc:  # a fault of the viewer's: named, never a partial index
            self.error = f"{self.path}, line {number}: the viewer failed indexing: {exc!r}"
        finally:
            self._done.set()

    def _code(self, token: bytes) -> int:
        """The code of a name as it is written in the file (a JSON string): each
        distinct one is decoded once."""
        found = self._tokens.get(token)
        if found is None:
            found = self._tokens[token] = self._names.code(json.loads(token))
        return found

    def _verdict(self, token: bytes | None, failure: bytes | None) -> str:
        key = (token, failure)
        found = self._verdict_tokens.get(key)
        if found is None:
            verdicts = None if token is None else json.loads(token)
            said = None if failure is None else json.loads(failure)
            found = verdict_category(verdicts, token is not None, said)
            self._verdict_tokens[key] = found
        return found

    def _add(self, line: bytes, offset: int) -> None:
        head = _TRANSCRIPT_HEAD.match(line)
        if head is None or not _whole_head(head, line):
            self._add_parsed(line, offset)
            return
        role, member, scenario, evaluee, first, second, verdicts, failure = head.groups()
        if role in (b"comparison", b"repair"):
            self._add_comparison(
                offset,
                role.decode(),
                (self._code(member), self._code(first), self._code(second), self._code(scenario)),
                self._verdict(verdicts, failure),
            )
        elif role == b"evaluee":
            self._replies.setdefault((self._code(member), self._code(scenario)), offset)
        else:
            key = (self._code(member), self._code(evaluee), self._code(scenario))
            self._reflections.setdefault(key, offset)

    def _add_parsed(self, line: bytes, offset: int) -> None:
        """A line whose keys are not in the usual order, parsed in full: one that is no
        transcript line is a ValueError saying why."""
        if not line.strip():
            return
        data = json_line(line)
        role, code = data.get("role"), self._names.code
        if role not in ("comparison", "repair", "evaluee", "reflection"):
            return  # a line of another kind: nothing to index
        member, scenario = _name(data, "member"), _name(data, "scenario")
        if role in ("comparison", "repair"):
            codes = (code(member), code(_name(data, "first")), code(_name(data, "second")),
                     code(scenario))  # fmt: skip
            recorded = "verdicts" in data
            verdict = verdict_category(data.get("verdicts"), recorded, data.get("failure"))
            self._add_comparison(offset, role, codes, verdict)
        elif role == "evaluee":
            self._replies.setdefault((code(member), code(scenario)), offset)
        else:
            key = (code(member), code(_name(data, "evaluee")), code(scenario))
            self._reflections.setdefault(key, offset)

    def _add_comparison(
        self, offset: int, role: str, codes: tuple[int, int, int, int], verdict: str
    ) -> None:
        """A comparison line a row; a repair line joins the unread comparison it
        repairs (its verdict is the one that counted), or is a row of its own."""
        rows = self._rows
        repaired = self._repairable.pop(codes, None) if role == "repair" else None
        if repaired is not None:
            rows.repair[repaired] = offset
            if verdict != "unread":
                rows.verdict[repaired] = verdict
            return
        if role == "comparison" and verdict == "unread":
            self._repairable[codes] = len(rows.offset)
        rows.offset.append(offset)
        rows.repair.append(_NO_LINE)
        rows.role.append(role)
        rows.judge.append(codes[0])
        rows.first.append(codes[1])
        rows.second.append(codes[2])
        rows.scenario.append(codes[3])
        rows.verdict.append(verdict)

    def progress(self) -> dict[str, Any]:
        """How far indexing is, and the lines it could not read so far."""
        return {
            "ready": self.ready,
            "bytes_read": self.bytes_read,
            "bytes": self.size,
            **self.unreadable.report(),
        }

    def scenarios(self) -> list[str]:
        """Every scenario with a comparison, sorted (once indexed)."""
        names = self._names.names
        return sorted({names[s] for s in set(self._rows.scenario)})

    def matching(self, filters: Filters) -> list[int]:
        """Row numbers of the comparisons that pass `filters`, in file order."""
        cached = self._queries.get(filters)
        if cached is not None:
            return cached
        rows, codes = self._rows, self._names.codes
        wanted = [filters.judge, filters.evaluee, filters.scenario]
        if any(name is not None and name not in codes for name in wanted):
            return []
        judge, evaluee, scenario = (None if n is None else codes[n] for n in wanted)
        verdict = filters.verdict
        found = [
            i
            for i in range(len(rows.offset))
            if (judge is None or rows.judge[i] == judge)
            and (evaluee is None or rows.first[i] == evaluee or rows.second[i] == evaluee)
            and (scenario is None or rows.scenario[i] == scenario)
            and (verdict is None or rows.verdict[i] == verdict)
        ]
        if len(self._queries) >= 8:
            self._queries.pop(next(iter(self._queries)))
        self._queries[filters] = found
        return found

    def repaired(self, rows: list[int]) -> int:
        """How many of the comparisons at row numbers `rows` had a repair request."""
        return sum(self._rows.repair[i] != _NO_LINE for i in rows)

    def comparisons(self, rows: list[int]) -> list[dict[str, Any]]:
        """The comparisons at row numbers `rows`, each with the judge's full call, both
        replies and the judge's reflections on them; a line among them that cannot be
        read whole is named in `unreadable` (and counted), and its parts are missing."""
        r, names = self._rows, self._names.names
        offsets: list[int] = []
        for i in rows:
            judge, first, second, scenario = r.judge[i], r.first[i], r.second[i], r.scenario[i]
            offsets += [
                r.offset[i],
                r.repair[i],
                self._replies.get((first, scenario), _NO_LINE),
                self._replies.get((second, scenario), _NO_LINE),
                self._reflections.get((judge, first, scenario), _NO_LINE),
                self._reflections.get((judge, second, scenario), _NO_LINE),
            ]
        lines = list(read_lines(self.path, offsets))
        shown = []
        for n, i in enumerate(rows):
            read = lines[6 * n : 6 * n + 6]
            damaged = [line for line in read if isinstance(line, Damaged)]
            for line in damaged:
                self.unreadable.add(line.where, line.problem)
            call, repair, first_reply, second_reply, first_notes, second_notes = map(_object, read)
            shown.append(
                {
                    "row": i,
                    "role": r.role[i],
                    "judge": names[r.judge[i]],
                    "first": names[r.first[i]],
                    "second": names[r.second[i]],
                    "scenario": names[r.scenario[i]],
                    "verdict": r.verdict[i],
                    "verdicts": call.get("verdicts"),
                    "failure": call.get("failure"),
                    "error": call.get("error"),
                    "messages": _messages(call.get("messages")),
                    "reply": call.get("reply"),
                    "scores": call.get("scores"),
                    "rule": call.get("rule"),
                    "choice_logprobs": call.get("choice_logprobs"),
                    "repair": {
                        key: repair.get(key) for key in ("verdicts", "reply", "failure", "error")
                    }
                    if repair
                    else None,
                    "question": _question(first_reply or second_reply),
                    "first_reply": first_reply.get("reply"),
                    "second_reply": second_reply.get("reply"),
                    "first_reflection": first_notes.get("reply"),
                    "second_reflection": second_notes.get("reply"),
                    "unreadable": [f"{line.where}: {line.problem}" for line in damaged] or None,
                }
            )
        return shown


def _object(line: Line) -> dict[str, Any]:
    """What was read of a line ({} for none, or a damaged one)."""
    return line if isinstance(line, dict) else {}


def _messages(value: Any) -> list[list[str]] | None:
    """A call's messages as [role, text] pairs (None where the line holds anything else)."""
    if isinstance(value, list) and all(
        isinstance(m, list) and len(m) == 2 and all(isinstance(x, str) for x in m) for m in value
    ):
        return value
    return None


def _question(evaluee_line: dict[str, Any]) -> str | None:
    """The scenario's message, as the evaluee was asked it (its last user message)."""
    users = [text for role, text in _messages(evaluee_line.get("messages")) or () if role == "user"]
    return users[-1] if users else None


class TraceIndex:
    """Where each task's votes lie in a grading run's trace.jsonl (built on first use;
    a grading trace is read in full once, then by offset). Lines that cannot be read
    are left out and counted (`unreadable`)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._by_task: dict[tuple[str, str | None], list[int]] | None = None
        self.unreadable = Unreadable()

    def _build(self) -> dict[tuple[str, str | None], list[int]]:
        """Offsets by (task, candidate); a vanished trace is an InputError naming the
        file and line, so the page can say which."""
        by_task: dict[tuple[str, str | None], list[int]] = {}
        number = 0
        try:
            with open_regular(self.path) as f:
                offset = 0
                for number, line in enumerate(f, 1):
                    try:
                        key = self._task(line)
                    except ValueError as exc:
                        self.unreadable.add(f"line {number}", exc)
                        key = None
                    if key is not None:
                        by_task.setdefault(key, []).append(offset)
                    offset += len(line)
        except OSError as exc:
            raise InputError(
                f"cannot read the trace: {exc}", path=self.path, line=number or None
            ) from None
        return by_task

    @staticmethod
    def _task(line: bytes) -> tuple[str, str | None] | None:
        """The (task, candidate) of a trace line (None for a blank line)."""
        head = _TRACE_HEAD.match(line)
        if head is not None:
            task, candidate = (json.loads(g) for g in head.group(1, 2))
        elif line.strip():
            data = json_line(line)
            task, candidate = data.get("task_id"), data.get("candidate")
        else:
            return None
        if task is None:
            return None
        return str(task), None if candidate is None else str(candidate)

    def votes(self, task: str, candidate: str | None) -> list[dict[str, Any]]:
        """Every trace line of one task and candidate, in file order."""
        with self._lock:
            if self._by_task is None:
                self._by_task = self._build()
        votes = []
        for line in read_lines(self.path, self._by_task.get((task, candidate), [])):
            if isinstance(line, Damaged):
                self.unreadable.add(line.where, line.problem)
            elif line is not None:
                votes.append(line)
        return votes
