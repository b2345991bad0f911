"""The viewer's web app: a read-only JSON API over the records found under some folders,
and the static page that renders it.

Runs are addressed by an id (a hash of their record's path), never by a path from the
client; static files come from a fixed list read from the package's static folder;
every other address is 404. Every response forbids inline scripts and content-type
sniffing, and the page builds all text with text nodes, so model text shown here can
never run.
"""

from __future__ import annotations

import asyncio
import hashlib
import ipaddress
import json
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import cached_property
from pathlib import Path
from typing import Any

from aiohttp import web

from eigenjury.contracts.record import GradingRecord
from eigenjury.errors import InputError
from eigenjury.files import within
from eigenjury.names import short_labels
from eigenjury.peer.record import RankingRecord, StyleCheckRecord
from eigenjury.records import Found, Record, find_records
from eigenjury.reports.grading import (
    SUMMARY_COLUMNS,
    agreement_lines,
    summary_rows,
    tag_table,
)
from eigenjury.reports.kit import CSS
from eigenjury.reports.ranking import meaning
from eigenjury.reports.ranking.words import BASELINE_COLUMNS, baseline_cells, baseline_title
from eigenjury.reports.style_check import meaning as style_check_meaning
from eigenjury.view.index import VERDICTS, Filters, TraceIndex, TranscriptIndex

STATIC = Path(__file__).with_name("static")
PAGE_SIZE = 20
MAX_PAGE_SIZE = 100
SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'self'; object-src 'none'; base-uri 'none'; "
    "frame-ancestors 'none'; form-action 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}
RUN_FOLDERS = (
    "a run folder holds results.json (eigenjury rank, eigenjury grade), comparison.json "
    "(eigenjury juries compare), certificate.json (eigenjury bound apply) or a profile "
    "(eigenjury bound measure)"
)


@dataclass
class Run:
    """One record found, with the long files beside it (read only if they are regular
    files inside `area`, the folder given that the record was found in)."""

    id: str
    path: Path
    record: Record
    area: Path

    @property
    def kind(self) -> str:
        return self.record.kind

    @cached_property
    def date(self) -> str:
        """When the run was made: the record says (0.1 records: the file's time)."""
        if self.record.created:
            return self.record.created
        mtime = self.path.stat().st_mtime
        return datetime.fromtimestamp(mtime, UTC).replace(microsecond=0).isoformat()

    @cached_property
    def data(self) -> dict[str, Any]:
        """The record as JSON, as the page reads it."""
        return self.record.model_dump(mode="json")

    def _beside(self, name: str) -> Path | None:
        """The file `name` beside the record, if the viewer may read it."""
        path = self.path.with_name(name)
        return path if path.is_file() and within(path, self.area) else None

    @cached_property
    def transcripts(self) -> TranscriptIndex | None:
        path = self._beside("transcripts.jsonl") if self.kind == "ranking" else None
        return None if path is None else TranscriptIndex(path)

    @cached_property
    def trace(self) -> TraceIndex | None:
        path = self._beside("trace.jsonl") if self.kind == "grading" else None
        return None if path is None else TraceIndex(path)

    def summary(self, roots: list[Path]) -> dict[str, Any]:
        overview = self.record.overview()
        return {
            "id": self.id,
            "kind": self.kind,
            "name": overview.name or self.path.parent.name,
            "date": self.date,
            "models": list(overview.models),
            "cost_usd": overview.cost_usd,
            "where": _shown_path(self.path, roots),
            "transcripts": self.transcripts is not None,
        }


def _shown_path(path: Path, roots: list[Path]) -> str:
    """`path` relative to the folder it was found under (what the user typed)."""
    for root in roots:
        if path.is_relative_to(root):
            return str(path.relative_to(root.parent if root.is_file() else root))
    return path.name


@dataclass
class Catalogue:
    """The runs found under the roots given, and the records that could not be read."""

    roots: list[Path]
    runs: dict[str, Run]
    damaged: list[Found]


CATALOGUE = web.AppKey("catalogue", Catalogue)
HOST = web.AppKey("host", str)


def load_catalogue(paths: Iterable[Path], skipped: Callable[[Found], None]) -> Catalogue:
    """Every record under `paths`; each damaged one is told to `skipped` (and kept aside
    for the page). A missing path, or nothing readable found, is an InputError."""
    roots = []
    for path in paths:
        if not path.exists():
            raise InputError("no such file or folder", path=path)
        roots.append(path.resolve())
    # what each root lets the viewer read: a folder, what is in it; a record file, its
    # folder's files of that run (its transcripts or trace)
    areas = [root if root.is_dir() else root.parent for root in roots]
    # a folder given twice, or inside another given, is searched twice: each file once
    found = list({item.path: item for item in find_records(roots)}.values())
    runs = {}
    for item in found:
        if item.record is not None:
            ident = hashlib.sha256(str(item.path).encode()).hexdigest()[:12]
            area = next(a for a in areas if within(item.path, a))
            runs[ident] = Run(ident, item.path, item.record, area)
    damaged = [item for item in found if item.problem is not None]
    for item in damaged:
        skipped(item)
    where = ", ".join(str(r) for r in roots)
    if not runs:
        if damaged:
            raise InputError(
                f"every eigenjury record found under {where} is damaged "
                f"({len(damaged)}, each named above); nothing to show"
            )
        raise InputError(f"no eigenjury runs found under {where}; {RUN_FOLDERS}")
    return Catalogue(roots, runs, damaged)


def _fail(status: type[web.HTTPException], message: str) -> web.HTTPException:
    return status(text=json.dumps({"error": message}), content_type="application/json")


@web.middleware
async def _secure(
    request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
) -> web.StreamResponse:
    """Every answer, errors too, carries the security headers; the Host must be the
    server itself (a rebound DNS name pointing here reads nothing)."""
    try:
        if not _own_host(request):
            raise web.HTTPMisdirectedRequest(text="this viewer answers on its own address only")
        response = await handler(request)
    except web.HTTPException as exc:
        exc.headers.update(SECURITY_HEADERS)
        raise
    except Exception as exc:  # a fault of the viewer's: told on its terminal, JSON here
        request.app.logger.exception("cannot answer %s", request.path_qs)
        failure = _fail(web.HTTPInternalServerError, f"the viewer failed: {exc!r}")
        failure.headers.update(SECURITY_HEADERS)
        raise failure from None
    response.headers.update(SECURITY_HEADERS)
    return response


def _own_host(request: web.Request) -> bool:
    """Whether the request names this server by an IP address, localhost or the --host
    it was given (other DNS names that resolve here, as a hostile page's would, are
    refused)."""
    header = request.host
    host = header if header.endswith("]") else header.rsplit(":", 1)[0]
    host = host.strip("[]")
    if host in ("localhost", request.app[HOST]):
        return True
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def _run(request: web.Request) -> Run:
    run: Run | None = request.app[CATALOGUE].runs.get(request.match_info["run"])
    if run is None:
        raise _fail(web.HTTPNotFound, "no such run")
    return run


def _page_numbers(request: web.Request) -> tuple[int, int]:
    try:
        page = int(request.query.get("page", "1"))
        size = int(request.query.get("size", str(PAGE_SIZE)))
    except ValueError:
        raise _fail(web.HTTPBadRequest, "page and size are whole numbers") from None
    if page < 1 or not 1 <= size <= MAX_PAGE_SIZE:
        raise _fail(web.HTTPBadRequest, f"page >= 1 and 1 <= size <= {MAX_PAGE_SIZE}")
    return page, size


async def runs_list(request: web.Request) -> web.Response:
    catalogue: Catalogue = request.app[CATALOGUE]
    return web.json_response(
        {
            "runs": sorted(
                (run.summary(catalogue.roots) for run in catalogue.runs.values()),
                key=lambda run: (run["date"], run["where"]),
                reverse=True,
            ),
            "damaged": [
                {"where": _shown_path(d.path, catalogue.roots), "problem": str(d.problem)}
                for d in catalogue.damaged
            ],
        }
    )


async def run_page(request: web.Request) -> web.Response:
    """A run's record, and for a ranking or a style check what it means (as the static
    report and the terminal say it); a ranking run's transcripts start indexing
    meanwhile."""
    run = _run(request)
    if run.transcripts is not None:
        run.transcripts.start()
    summary = run.summary(request.app[CATALOGUE].roots)
    said: dict[str, Any] = {}
    if isinstance(run.record, RankingRecord):
        said = {"meaning": meaning(run.record)}
        against = run.record.baseline
        if against is not None:  # in the words and cells the terminal and report show
            ci = f"{100 * run.record.settings.ci:g}%"
            said["baseline"] = {
                "title": baseline_title(against, ci),
                "columns": list(BASELINE_COLUMNS),
                "rows": [baseline_cells(row, row.model) for row in against.models],
            }
    elif isinstance(run.record, StyleCheckRecord):
        said = {"meaning": style_check_meaning(run.record)}
    elif isinstance(run.record, GradingRecord):  # short juror labels for the vote grid
        jurors = [*run.record.jury.jurors, *(run.record.escalate_to or run.record.jury).jurors]
        names = list(dict.fromkeys(jurors))
        said = {
            "labels": dict(zip(names, short_labels(names), strict=True)),
            "summary": {"columns": SUMMARY_COLUMNS, "rows": summary_rows(run.record)},
        }
        tags = tag_table(run.record)  # in the words and cells the terminal and report show
        if tags is not None:
            said["tags"] = {"columns": tags[0], "rows": tags[1]}
        agreement = agreement_lines(run.record)
        if agreement is not None:
            said["agreement"] = {
                "title": agreement[0],
                "jurors": {"columns": agreement[1][0], "rows": agreement[1][1]},
                "pairs": {"columns": agreement[2][0], "rows": agreement[2][1]},
            }
    return web.json_response({**summary, "record": run.data, **said})


async def transcripts(request: web.Request) -> web.Response:
    """One page of a ranking run's comparisons, filtered by judge, evaluee (either side),
    scenario and verdict; `ready: false` with the progress while still indexing."""
    run = _run(request)
    index = run.transcripts
    if index is None:
        raise _fail(web.HTTPNotFound, "this run has no transcripts")
    page, size = _page_numbers(request)
    query = request.query
    verdict = query.get("verdict") or None
    if verdict is not None and verdict not in VERDICTS:
        raise _fail(web.HTTPBadRequest, f"verdict is one of {', '.join(VERDICTS)}")
    index.start()
    if not index.ready:
        return web.json_response({"ready": False, **index.progress()})
    if index.error is not None:
        raise _fail(web.HTTPInternalServerError, index.error)
    filters = Filters(
        judge=query.get("judge") or None,
        evaluee=query.get("evaluee") or None,
        scenario=query.get("scenario") or None,
        verdict=verdict,
    )
    rows = index.matching(filters)
    shown = rows[(page - 1) * size : page * size]
    try:
        items = index.comparisons(shown)
    except InputError as exc:  # a line damaged after its start: named on the page
        raise _fail(web.HTTPInternalServerError, str(exc)) from None
    return web.json_response(
        {
            **index.progress(),
            "total": len(rows),
            "repaired": index.repaired(rows),
            "page": page,
            "size": size,
            "scenarios": index.scenarios(),
            "verdicts": list(VERDICTS),
            "items": items,
        }
    )


async def votes(request: web.Request) -> web.Response:
    """Every vote of one task of a grading run: the jurors' full replies."""
    run = _run(request)
    if run.trace is None:
        raise _fail(web.HTTPNotFound, "this run has no trace")
    task = request.query.get("task")
    if not task:
        raise _fail(web.HTTPBadRequest, "which task? (?task=...&candidate=...)")
    # the first question reads the whole trace: off the event loop
    try:
        found = await asyncio.to_thread(run.trace.votes, task, request.query.get("candidate"))
    except InputError as exc:  # a damaged trace: the page names it, the run still shows
        raise _fail(web.HTTPInternalServerError, str(exc)) from None
    return web.json_response({"votes": found, **run.trace.unreadable.report()})


def ranking_change(a: Record, b: Record) -> list[dict[str, Any]]:
    """Per model in both ranking runs: its rank and Elo in each, and the change."""
    before = {m["name"]: m for m in a.model_dump(mode="json")["models"]}
    rows = []
    for model in b.model_dump(mode="json")["models"]:
        old = before.get(model["name"])
        if old is None:
            continue
        rows.append(
            {
                "model": model["name"],
                "rank_a": old["rank"],
                "rank_b": model["rank"],
                "rank_change": model["rank"] - old["rank"],
                "elo_a": old["elo"],
                "elo_b": model["elo"],
                "elo_change": model["elo"] - old["elo"],
            }
        )
    return sorted(rows, key=lambda row: row["rank_b"])


async def compare(request: web.Request) -> web.Response:
    runs = request.app[CATALOGUE].runs
    a, b = runs.get(request.query.get("a", "")), runs.get(request.query.get("b", ""))
    if a is None or b is None:
        raise _fail(web.HTTPNotFound, "no such run")
    if a.kind != "ranking" or b.kind != "ranking":
        raise _fail(web.HTTPBadRequest, "only two ranking runs can be compared")
    return web.json_response({"a": a.id, "b": b.id, "models": ranking_change(a.record, b.record)})


async def kit_css(request: web.Request) -> web.Response:
    """The shared report styles, so the viewer and report.html look alike."""
    return web.Response(text=CSS, content_type="text/css")


def _static_files() -> dict[str, Path]:
    """The files the page may load, by name: exactly those in the static folder."""
    return {path.name: path for path in STATIC.iterdir() if path.is_file()}


def make_app(catalogue: Catalogue, host: str = "127.0.0.1") -> web.Application:
    """The viewer over `catalogue`, served on `host`: GET only, everything else 404 or
    405."""
    app = web.Application(middlewares=[_secure])
    app[CATALOGUE] = catalogue
    app[HOST] = host
    files = _static_files()

    async def static(request: web.Request) -> web.FileResponse:
        path = files.get(request.match_info.get("name", "index.html"))
        if path is None:
            raise web.HTTPNotFound()
        return web.FileResponse(path)

    app.router.add_get("/", static)
    app.router.add_get("/static/{name}", static)
    app.router.add_get("/kit.css", kit_css)
    app.router.add_get("/api/runs", runs_list)
    app.router.add_get("/api/runs/{run}", run_page)
    app.router.add_get("/api/runs/{run}/transcripts", transcripts)
    app.router.add_get("/api/runs/{run}/votes", votes)
    app.router.add_get("/api/compare", compare)
    return app
