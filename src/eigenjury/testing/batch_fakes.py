"""Fakes of OpenAI's Batch API and Anthropic's Message Batches API, on the test server
(testing/server.py), shaped as the live endpoints are documented:

- OpenAI: POST /v1/files (multipart, purpose "batch") takes a JSONL file of calls;
  POST /v1/batches makes a batch of it; GET /v1/batches (the latest, with their
  metadata) and /v1/batches/{id}; POST /v1/batches/{id}/cancel; GET
  /v1/files/{id}/content gives the output and error files once the batch has ended.
- Anthropic: POST /v1/messages/batches takes the calls; GET /v1/messages/batches (the
  latest) and /v1/messages/batches/{id};
  GET /v1/messages/batches/{id}/results gives the results once processing has ended.

A batch ends `end_after_s` after it is sent; each of its calls is answered as the
server's live endpoint would answer it (the same reply writers). Chosen by their
custom_id: `fail_share` of the calls are answered with a server error the first time
they are sent (and as usual when sent again), `reject_share` with an invalid-request
error every time; with `expire_share`, that share of the calls is left unanswered and
the batch expires. The first `refuse_sends` sends are refused with a 500; the next
`lose_answers` are made but answered with a 500 (an answer lost on the way); the
first `fail_batches` batches made fail as a whole (OpenAI's "failed"). It counts
how often each call (custom_id) was sent in a batch, so a test can check none was sent
twice.
"""

from __future__ import annotations

import asyncio
import hashlib
import itertools
import json
import re
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from aiohttp import web

CHAT_PATH = "/v1/chat/completions"
ANTHROPIC_ID = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
Answer = Callable[[dict[str, Any], bool], dict[str, Any]]


@dataclass
class BatchSettings:
    end_after_s: float = 0.0
    fail_share: float = 0.0
    expire_share: float = 0.0
    reject_share: float = 0.0
    refuse_sends: int = 0
    lose_answers: int = 0
    fail_batches: int = 0
    quiet_cancel: bool = False
    fail_lists: int = 0
    send_delay_s: float = 0.0


def _share(custom_id: str) -> float:
    """Where a call falls in [0, 1), by its id: the same call always falls alike."""
    return int(hashlib.sha256(custom_id.encode()).hexdigest()[:8], 16) / 2**32


@dataclass
class _Batch:
    id: str
    kind: str  # "openai" or "anthropic"
    calls: list[tuple[str, dict[str, Any]]]  # custom_id, body
    created: float
    made_at: float  # the wall clock's time (created is the monotonic one)
    metadata: dict[str, Any] = field(default_factory=dict)
    input_file_id: str | None = None
    state: str = "in_progress"
    results: list[dict[str, Any]] | None = None  # once ended
    output_file_id: str | None = None
    error_file_id: str | None = None
    problem: str | None = None
    resent: set[str] = field(default_factory=set)  # calls sent in an earlier batch too


class BatchFakes:
    def __init__(
        self,
        settings: BatchSettings,
        *,
        chat: Answer,
        messages: Answer,
        authorized: Callable[[web.Request], web.Response | None],
    ) -> None:
        self.settings = settings
        self._chat, self._messages = chat, messages
        self._authorized = authorized
        self.files: dict[str, bytes] = {}
        self.batches: dict[str, _Batch] = {}
        self.sent: Counter[str] = Counter()  # custom_id -> times it came in a batch
        self.sends = 0  # batch sends received (refused ones too)
        self.lists = 0  # asks for the list of batches
        self._ids = itertools.count(1)

    def add_routes(self, app: web.Application) -> None:
        app.router.add_post("/v1/files", self._upload)
        app.router.add_get("/v1/files/{id}/content", self._file)
        app.router.add_post("/v1/batches", self._openai_create)
        app.router.add_get("/v1/batches", self._openai_list)
        app.router.add_get("/v1/batches/{id}", self._openai_get)
        app.router.add_post("/v1/batches/{id}/cancel", self._openai_cancel)
        app.router.add_post("/v1/messages/batches", self._anthropic_create)
        app.router.add_get("/v1/messages/batches", self._anthropic_list)
        app.router.add_get("/v1/messages/batches/{id}", self._anthropic_get)
        app.router.add_get("/v1/messages/batches/{id}/results", self._anthropic_results)
        app.router.add_post("/v1/messages/batches/{id}/cancel", self._anthropic_cancel)

    def stats(self) -> dict[str, Any]:
        return {
            "batches": len(self.batches),
            "batch_sends": self.sends,
            "batch_calls_sent": sum(self.sent.values()),
            "distinct_batch_calls": len(self.sent),
            "most_sends_for_one_batch_call": max(self.sent.values(), default=0),
        }

    # -- shared --

    def _next_id(self, prefix: str) -> str:
        return f"{prefix}{next(self._ids):06d}"

    def _refused_send(self) -> web.Response | None:
        self.sends += 1
        if self.sends <= self.settings.refuse_sends:
            return _error(500, "the batch service is busy; try again")
        return None

    def _lost(self) -> web.Response | None:
        """A 500 in place of the answer to a send that made its batch, while any is to be
        lost (the sends before counted: refused ones are not made)."""
        made = self.sends - self.settings.refuse_sends
        if made <= self.settings.lose_answers:
            return _error(500, "the gateway lost its way")
        return None

    def _listing(self, request: web.Request) -> web.Response | None:
        self.lists += 1
        refused = self._authorized(request)
        if refused is None and self.lists <= self.settings.fail_lists:
            return _error(502, "bad gateway")
        return refused

    def _failing(self) -> bool:
        return sum(b.kind == "openai" for b in self.batches.values()) < self.settings.fail_batches

    def _batch(self, request: web.Request, kind: str) -> _Batch:
        batch = self.batches.get(request.match_info["id"])
        if batch is None or batch.kind != kind:
            raise web.HTTPNotFound(
                text=json.dumps({"error": {"message": "no such batch", "type": "not_found_error"}}),
                content_type="application/json",
            )
        self._advance(batch)
        return batch

    def _advance(self, batch: _Batch) -> None:
        """End the batch once its time has come: answer its calls."""
        if (
            batch.results is not None
            or time.monotonic() < batch.created + self.settings.end_after_s
        ):
            return
        expiring = self.settings.expire_share > 0
        batch.results = []
        s = self.settings
        for custom_id, body in batch.calls:
            share = _share(custom_id)
            if share < s.expire_share:
                outcome = "expired"
            elif share < s.expire_share + s.reject_share:
                outcome = "rejected"
            elif share < s.expire_share + s.reject_share + s.fail_share:
                outcome = "answered" if custom_id in batch.resent else "failed"
            else:
                outcome = "answered"
            answer = self._chat if batch.kind == "openai" else self._messages
            reply = answer(body, False) if outcome == "answered" else None
            batch.results.append({"custom_id": custom_id, "outcome": outcome, "reply": reply})
        batch.state = "expired" if expiring else "ended"
        if batch.kind == "openai":
            self._openai_files(batch)

    # -- OpenAI --

    async def _upload(self, request: web.Request) -> web.Response:
        refused = self._authorized(request)
        if refused is not None:
            return refused
        form = await request.post()
        upload = form.get("file")
        if form.get("purpose") != "batch" or not isinstance(upload, web.FileField):
            return _error(400, "give a file and purpose=batch")
        data = upload.file.read()
        file_id = self._next_id("file-")
        self.files[file_id] = data
        return web.json_response(
            {"id": file_id, "object": "file", "bytes": len(data), "purpose": "batch"}
        )

    async def _file(self, request: web.Request) -> web.Response:
        refused = self._authorized(request)
        if refused is not None:
            return refused
        data = self.files.get(request.match_info["id"])
        if data is None:
            return _error(404, "no such file")
        return web.Response(body=data, content_type="application/octet-stream")

    async def _openai_create(self, request: web.Request) -> web.Response:
        refused = self._authorized(request) or self._refused_send()
        if refused is not None:
            return refused
        await asyncio.sleep(self.settings.send_delay_s)
        asked = await request.json()
        data = self.files.get(asked.get("input_file_id"))
        if data is None or asked.get("endpoint") != CHAT_PATH:
            return _error(400, "input_file_id must name an uploaded file; endpoint must be chat")
        if asked.get("completion_window") != "24h":
            return _error(400, "completion_window must be 24h")
        calls, problem = [], None
        for n, text in enumerate(data.splitlines(), 1):
            line = json.loads(text)
            if line.get("method") != "POST" or line.get("url") != CHAT_PATH:
                problem = f"line {n}: method must be POST and url {CHAT_PATH}"
            calls.append((line["custom_id"], line["body"]))
        ids = [c for c, _ in calls]
        if len(set(ids)) < len(ids):
            problem = "the custom_id of each request must be unique"
        if len({body.get("model") for _, body in calls}) > 1:
            problem = "all requests in a batch must use the same model"
        batch = _Batch(
            self._next_id("batch_"),
            "openai",
            calls,
            time.monotonic(),
            time.time(),
            metadata=asked.get("metadata") or {},
            input_file_id=asked["input_file_id"],
        )
        if problem is None and self._failing():
            problem = "the batch cannot be run now (a validation step failed)"
        if problem is not None:
            batch.state, batch.problem, batch.results = "failed", problem, []
        else:
            batch.resent = {i for i in ids if i in self.sent}
            self.sent.update(ids)
        self.batches[batch.id] = batch
        return self._lost() or web.json_response(_openai_view(batch))

    async def _openai_list(self, request: web.Request) -> web.Response:
        """The newest first, `limit` at a time, from after the batch `after` names."""
        refused = self._listing(request)
        if refused is not None:
            return refused
        newest = [b for b in self.batches.values() if b.kind == "openai"][::-1]
        for batch in newest:
            self._advance(batch)
        after = request.query.get("after")
        if after is not None:
            ids = [b.id for b in newest]
            newest = newest[ids.index(after) + 1 :] if after in ids else []
        limit = int(request.query.get("limit", "20"))
        page = newest[:limit]
        return web.json_response(
            {
                "object": "list",
                "data": [_openai_view(b) for b in page],
                "has_more": len(newest) > limit,
                "last_id": page[-1].id if page else None,
            }
        )

    async def _openai_get(self, request: web.Request) -> web.Response:
        refused = self._authorized(request)
        return refused or web.json_response(_openai_view(self._batch(request, "openai")))

    async def _openai_cancel(self, request: web.Request) -> web.Response:
        refused = self._authorized(request)
        if refused is not None:
            return refused
        batch = self._batch(request, "openai")
        self._cancel(batch)
        return web.json_response(_openai_view(batch))

    async def _anthropic_cancel(self, request: web.Request) -> web.Response:
        refused = self._authorized(request)
        if refused is not None:
            return refused
        batch = self._batch(request, "anthropic")
        self._cancel(batch)
        return web.json_response(_anthropic_view(batch, request))

    def _cancel(self, batch: _Batch) -> None:
        """Cancelled before it ended: none of its calls is answered (or, with
        `quiet_cancel`, listed)."""
        if batch.results is None:
            batch.results = [
                {"custom_id": c, "outcome": "cancelled", "reply": None} for c, _ in batch.calls
            ]
            if self.settings.quiet_cancel:
                batch.results = []
            batch.state = "cancelled"
            if batch.kind == "openai":
                self._openai_files(batch)

    def _openai_files(self, batch: _Batch) -> None:
        output, errors = [], []
        for n, result in enumerate(batch.results or []):
            line: dict[str, Any] = {"id": f"batch_req_{n}", "custom_id": result["custom_id"]}
            if result["outcome"] == "answered":
                line |= {"response": {"status_code": 200, "body": result["reply"]}, "error": None}
                output.append(line)
            elif result["outcome"] in ("failed", "rejected"):
                status, body = _OPENAI_ERRORS[result["outcome"]]
                line |= {"response": {"status_code": status, "body": body}, "error": None}
                errors.append(line)
            else:
                code = "batch_expired" if result["outcome"] == "expired" else "batch_cancelled"
                said = "This request could not be executed before the window ran out."
                line |= {"response": None, "error": {"code": code, "message": said}}
                errors.append(line)
        for name, lines in (("output_file_id", output), ("error_file_id", errors)):
            if lines:
                file_id = self._next_id("file-")
                self.files[file_id] = b"".join(json.dumps(x).encode() + b"\n" for x in lines)
                setattr(batch, name, file_id)

    # -- Anthropic --

    async def _anthropic_create(self, request: web.Request) -> web.Response:
        refused = self._authorized(request) or self._refused_send()
        if refused is not None:
            return refused
        asked = await request.json()
        requests = asked.get("requests")
        if not isinstance(requests, list) or not requests:
            return _error(400, "requests: give at least one")
        ids = [r.get("custom_id") for r in requests]
        if not all(isinstance(i, str) and ANTHROPIC_ID.match(i) for i in ids):
            return _error(400, "custom_id must be 1 to 64 letters, digits, - or _")
        if len(set(ids)) < len(ids):
            return _error(400, "custom_id must be unique within a batch")
        calls = [(r["custom_id"], r["params"]) for r in requests]
        batch = _Batch(
            self._next_id("msgbatch_"), "anthropic", calls, time.monotonic(), time.time()
        )
        batch.resent = {i for i in ids if i in self.sent}
        self.sent.update(ids)
        self.batches[batch.id] = batch
        return self._lost() or web.json_response(_anthropic_view(batch, request))

    async def _anthropic_list(self, request: web.Request) -> web.Response:
        refused = self._listing(request)
        if refused is not None:
            return refused
        latest = [b for b in self.batches.values() if b.kind == "anthropic"][::-1][:100]
        for batch in latest:
            self._advance(batch)
        return web.json_response({"data": [_anthropic_view(b, request) for b in latest]})

    async def _anthropic_get(self, request: web.Request) -> web.Response:
        refused = self._authorized(request)
        return refused or web.json_response(
            _anthropic_view(self._batch(request, "anthropic"), request)
        )

    async def _anthropic_results(self, request: web.Request) -> web.Response:
        refused = self._authorized(request)
        if refused is not None:
            return refused
        batch = self._batch(request, "anthropic")
        if batch.results is None:
            return _error(400, "the batch is still being processed")
        lines = []
        for result in batch.results:
            outcome = result["outcome"]
            if outcome == "answered":
                said: dict[str, Any] = {"type": "succeeded", "message": result["reply"]}
            elif outcome in ("failed", "rejected"):
                error = _ANTHROPIC_ERRORS[outcome]
                said = {"type": "errored", "error": {"type": "error", "error": error}}
            else:
                said = {"type": "expired" if outcome == "expired" else "canceled"}
            lines.append(json.dumps({"custom_id": result["custom_id"], "result": said}))
        return web.Response(text="\n".join(lines) + "\n", content_type="application/binary")


_OPENAI_ERRORS = {
    "failed": (500, {"error": {"message": "The server had an error", "type": "server_error"}}),
    "rejected": (
        400,
        {"error": {"message": "Invalid value for 'messages'", "type": "invalid_request_error"}},
    ),
}
_ANTHROPIC_ERRORS = {
    "failed": {"type": "api_error", "message": "Internal server error"},
    "rejected": {"type": "invalid_request_error", "message": "messages: invalid content"},
}


def _error(status: int, message: str) -> web.Response:
    return web.json_response({"error": {"message": message}}, status=status)


def _openai_view(batch: _Batch) -> dict[str, Any]:
    results = batch.results or []
    answered = sum(r["outcome"] == "answered" for r in results)
    status = {"ended": "completed"}.get(batch.state, batch.state)
    return {
        "id": batch.id,
        "object": "batch",
        "endpoint": CHAT_PATH,
        "errors": (
            {"object": "list", "data": [{"code": "invalid", "message": batch.problem}]}
            if batch.problem
            else None
        ),
        "input_file_id": batch.input_file_id,
        "completion_window": "24h",
        "status": status,
        "output_file_id": batch.output_file_id,
        "error_file_id": batch.error_file_id,
        "request_counts": {
            "total": len(batch.calls),
            "completed": answered,
            "failed": len(results) - answered,
        },
        "metadata": batch.metadata,
        "created_at": int(batch.made_at),
    }


def _anthropic_view(batch: _Batch, request: web.Request) -> dict[str, Any]:
    results = batch.results
    counts = {"processing": 0, "succeeded": 0, "errored": 0, "canceled": 0, "expired": 0}
    if results is None:
        counts["processing"] = len(batch.calls)
    else:
        named = {
            "answered": "succeeded",
            "failed": "errored",
            "rejected": "errored",
            "expired": "expired",
        }
        for result in results:
            counts[named.get(result["outcome"], "canceled")] += 1
    ended = results is not None
    base = f"{request.scheme}://{request.host}/v1/messages/batches/{batch.id}"
    return {
        "id": batch.id,
        "type": "message_batch",
        "processing_status": "ended" if ended else "in_progress",
        "created_at": datetime.fromtimestamp(batch.made_at, UTC).isoformat(),
        "request_counts": counts,
        "results_url": f"{base}/results" if ended else None,
    }
