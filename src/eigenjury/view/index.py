"""Byte-offset indexes over a run's long JSON-lines files, so the viewer shows a page of
a several-hundred-megabyte transcript without parsing the whole file.

A ranking run's transcripts.jsonl is read once, line by line: a compiled pattern reads
who, what and which verdict from the first bytes of each line (its keys come in a fixed
order), and only the offsets are kept. A page then seeks to its twenty lines. A line
the pattern does not recognise (another key order) is parsed in full, so nothing is
missed, only slower.
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

_STRING = rb'"(?:[^"\\]|\\.)*"'
_TRANSCRIPT_HEAD = re.compile(
    rb'\{"role": "(evaluee|reflection|comparison|repair)", "member": (' + _STRING + rb"), "
    rb'"scenario": (' + _STRING + rb")"
    rb'(?:, "evaluee": (' + _STRING + rb"))?"
    rb'(?:, "first": (' + _STRING + rb'), "second": (' + _STRING + rb")"
    rb'(?:, "verdicts": (null|\[[^\]]*\]))?)?'
)
_TRACE_HEAD = re.compile(
    rb'\{"task_id": (' + _STRING + rb'), "candidate": (' + _STRING + rb"|null)"
)
# What a comparison's verdicts (one per criterion: 0 tie, 1 first, 2 second, null
# unread) come to, as the transcript filter offers them.
VERDICTS = ("first", "second", "tie", "mixed", "unread", "unrecorded")
_VERDICT_OF = {0: "tie", 1: "first", 2: "second"}
_NO_LINE = -1


def verdict_category(verdicts: list[int | None] | None, recorded: bool = True) -> str:
    """One word for a comparison's verdicts: all criteria agree (first, second, tie),
    they differ (mixed), none was read (unread), or the file predates verdicts."""
    if not recorded:
        return "unrecorded"
    read = {v for v in verdicts or () if v is not None}
    if not read:
        return "unread"
    if len(read) > 1:
        return "mixed"
    return _VERDICT_OF.get(read.pop(), "unread")


def read_lines(path: Path, offsets: Iterable[int]) -> Iterator[dict[str, Any] | None]:
    """The JSON objects starting at `offsets` in `path` (None for no line). A line
    damaged past what the index read of it (or a file gone since) is an InputError."""
    offset = _NO_LINE
    try:
        with path.open("rb") as f:
            for offset in offsets:
                if offset == _NO_LINE:
                    yield None
                    continue
                f.seek(offset)
                value = json.loads(f.readline())
                yield value if isinstance(value, dict) else None
    except (OSError, ValueError) as exc:
        where = f"the line at byte {offset}" if offset != _NO_LINE else "the file"
        raise InputError(f"cannot read {where}: {exc}", path=path) from None


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
    """Column per field, one entry per comparison (or repair) line."""

    offset: list[int] = field(default_factory=list)
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


class TranscriptIndex:
    """Where each comparison, reply and reflection of a transcripts.jsonl lies.

    `start()` indexes in a background thread; until `ready`, queries are answered with
    the progress so far, so a run's page paints before its transcripts are read."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.size = path.stat().st_size
        self.bytes_read = 0
        self.error: str | None = None
        self._names = _Names()
        self._tokens: dict[bytes, int] = {}  # a name as written in the file -> its code
        self._verdict_tokens: dict[bytes | None, str] = {}
        self._rows = _Comparisons()
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
            with self.path.open("rb") as f:
                offset = 0
                for number, line in enumerate(f, 1):  # noqa: B007 (read after the loop)
                    self._add(line, offset)
                    offset += len(line)
                    self.bytes_read = offset
        except (OSError, ValueError) as exc:  # the file changed or is damaged
            self.error = f"{self.path}, line {number}: cannot index the transcripts: {exc}"
        finally:
            self._done.set()

    def _code(self, token: bytes) -> int:
        """The code of a name as it is written in the file (a JSON string): each
        distinct one is decoded once."""
        found = self._tokens.get(token)
        if found is None:
            found = self._tokens[token] = self._names.code(json.loads(token))
        return found

    def _verdict(self, token: bytes | None) -> str:
        found = self._verdict_tokens.get(token)
        if found is None:
            verdicts = None if token is None else json.loads(token)
            found = self._verdict_tokens[token] = verdict_category(verdicts, token is not None)
        return found

    def _add(self, line: bytes, offset: int) -> None:
        head = _TRANSCRIPT_HEAD.match(line)
        if head is None:
            self._add_parsed(line, offset)
            return
        role, member, scenario, evaluee, first, second, verdicts = head.groups()
        if role in (b"comparison", b"repair") and first is not None and second is not None:
            self._add_comparison(
                offset,
                role.decode(),
                (self._code(member), self._code(first), self._code(second), self._code(scenario)),
                self._verdict(verdicts),
            )
        elif role == b"evaluee":
            self._replies.setdefault((self._code(member), self._code(scenario)), offset)
        elif role == b"reflection" and evaluee is not None:
            key = (self._code(member), self._code(evaluee), self._code(scenario))
            self._reflections.setdefault(key, offset)

    def _add_parsed(self, line: bytes, offset: int) -> None:
        """A line whose keys are not in the usual order, parsed in full."""
        if not line.strip():
            return
        data = json.loads(line)
        role, code = data.get("role"), self._names.code
        member, scenario = str(data.get("member")), str(data.get("scenario"))
        first, second, evaluee = data.get("first"), data.get("second"), data.get("evaluee")
        if role in ("comparison", "repair") and first is not None and second is not None:
            codes = (code(member), code(str(first)), code(str(second)), code(scenario))
            verdict = verdict_category(data.get("verdicts"), "verdicts" in data)
            self._add_comparison(offset, role, codes, verdict)
        elif role == "evaluee":
            self._replies.setdefault((code(member), code(scenario)), offset)
        elif role == "reflection" and evaluee is not None:
            self._reflections.setdefault((code(member), code(str(evaluee)), code(scenario)), offset)

    def _add_comparison(
        self, offset: int, role: str, codes: tuple[int, int, int, int], verdict: str
    ) -> None:
        rows = self._rows
        rows.offset.append(offset)
        rows.role.append(role)
        rows.judge.append(codes[0])
        rows.first.append(codes[1])
        rows.second.append(codes[2])
        rows.scenario.append(codes[3])
        rows.verdict.append(verdict)

    def progress(self) -> dict[str, Any]:
        return {"ready": self.ready, "bytes_read": self.bytes_read, "bytes": self.size}

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

    def comparisons(self, rows: list[int]) -> list[dict[str, Any]]:
        """The comparisons at row numbers `rows`, each with the judge's full call, both
        replies and the judge's reflections on them."""
        r, names = self._rows, self._names.names
        offsets: list[int] = []
        for i in rows:
            judge, first, second, scenario = r.judge[i], r.first[i], r.second[i], r.scenario[i]
            offsets += [
                r.offset[i],
                self._replies.get((first, scenario), _NO_LINE),
                self._replies.get((second, scenario), _NO_LINE),
                self._reflections.get((judge, first, scenario), _NO_LINE),
                self._reflections.get((judge, second, scenario), _NO_LINE),
            ]
        lines = list(read_lines(self.path, offsets))
        shown = []
        for n, i in enumerate(rows):
            call, first_reply, second_reply, first_notes, second_notes = lines[5 * n : 5 * n + 5]
            assert call is not None
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
                    "messages": call.get("messages"),
                    "reply": call.get("reply"),
                    "question": _question(first_reply or second_reply),
                    "first_reply": _reply(first_reply),
                    "second_reply": _reply(second_reply),
                    "first_reflection": _reply(first_notes),
                    "second_reflection": _reply(second_notes),
                }
            )
        return shown


def _reply(line: dict[str, Any] | None) -> str | None:
    return None if line is None else line.get("reply")


def _question(evaluee_line: dict[str, Any] | None) -> str | None:
    """The scenario's message, as the evaluee was asked it (its last user message)."""
    if evaluee_line is None:
        return None
    users = [m[1] for m in evaluee_line.get("messages") or () if m and m[0] == "user"]
    return users[-1] if users else None


class TraceIndex:
    """Where each task's votes lie in a grading run's trace.jsonl (built on first use;
    a grading trace is read in full once, then by offset)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._by_task: dict[tuple[str, str | None], list[int]] | None = None

    def _build(self) -> dict[tuple[str, str | None], list[int]]:
        """Offsets by (task, candidate); a damaged or vanished trace is an InputError
        naming the file and line, so the page can say which."""
        by_task: dict[tuple[str, str | None], list[int]] = {}
        number = 0
        try:
            with self.path.open("rb") as f:
                offset = 0
                for number, line in enumerate(f, 1):  # noqa: B007 (read after the loop)
                    head = _TRACE_HEAD.match(line)
                    if head is not None:
                        task, candidate = (json.loads(g) for g in head.group(1, 2))
                    elif line.strip():
                        data = json.loads(line)
                        if not isinstance(data, dict):
                            raise ValueError("not a JSON object")
                        task, candidate = data.get("task_id"), data.get("candidate")
                    else:
                        task = None
                    if task is not None:
                        by_task.setdefault((str(task), candidate), []).append(offset)
                    offset += len(line)
        except (OSError, ValueError) as exc:
            raise InputError(
                f"cannot read the trace: {exc}", path=self.path, line=number or None
            ) from None
        return by_task

    def votes(self, task: str, candidate: str | None) -> list[dict[str, Any]]:
        """Every trace line of one task and candidate, in file order."""
        with self._lock:
            if self._by_task is None:
                self._by_task = self._build()
        offsets = self._by_task.get((task, candidate), [])
        return [line for line in read_lines(self.path, offsets) if line is not None]
