"""OpenAI's Batch API and Anthropic's Message Batches API: many calls sent at once,
answered within 24 hours, at half the price of the same calls made one by one.

Each client speaks for one provider (`OpenAICompatibleProvider`, `AnthropicProvider`):
its session, key, error classes, request bodies and reply reading are the provider's
own, so a batched call is asked and read as the same call made live would be. A call's
`custom_id` is its store key. Results are read from the endpoint the batch was sent to
(never from a URL the reply names, which would get the key).

- OpenAI: the calls as a JSONL file (POST /files, purpose "batch"), then POST /batches;
  GET /batches/{id} until it is completed, failed, expired or cancelled; the answers
  in its output file, the failures in its error file (GET /files/{id}/content). One
  model per batch, at most 50,000 calls and 200 MB.
- Anthropic: POST /messages/batches with the calls; GET /messages/batches/{id} until
  its processing has ended; the results from GET /messages/batches/{id}/results. At
  most 100,000 calls and 256 MB.
"""

from __future__ import annotations

import io
import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

import aiohttp

from eigenjury.files import json_kind
from eigenjury.models.errors import (
    BatchExpiredError,
    MalformedResponseError,
    ProviderError,
)
from eigenjury.models.providers.anthropic import AnthropicProvider
from eigenjury.models.providers.http import HttpProvider
from eigenjury.models.providers.openai_compat import OpenAICompatibleProvider
from eigenjury.models.types import ChatRequest, Completion, Provider

PRICE_FACTOR = 0.5  # both providers charge half for a batched call
FIND_SLACK_S = 300.0  # clocks differ: a batch made this long before our send still fits
FIND_PAGES = 20  # pages of a hundred batches read back for a lost send's batch
FIND_LATER = ""  # what `find` says where it can tell only once some batches have ended
TYPICAL_S = 3600.0  # most batches end within the hour (as Anthropic says of its own)
WINDOW_S = 86400.0  # and every one within 24 hours
CHAT_PATH = "/v1/chat/completions"  # what an OpenAI batch's lines are calls of


@dataclass(frozen=True)
class BatchStatus:
    """Where a batch stands: `ended` once nothing more will be answered; `problem`:
    why the batch as a whole failed, where it did; `files`: where its results are
    (OpenAI's output and error files)."""

    state: str
    ended: bool
    problem: str | None = None
    files: tuple[str, ...] = ()


# One call's result: its key, and its completion or its error.
Outcome = tuple[str, Completion | None, ProviderError | None]


class BatchApi(Protocol):
    """A provider's batch endpoints. `features`: what was known of the endpoint when the
    batch was sent (the provider's `features`), so its calls are read as they were asked."""

    max_calls: int
    max_bytes: int

    def features(self) -> dict[str, str]: ...

    def line(self, key: str, request: ChatRequest, features: Mapping[str, str]) -> bytes: ...

    async def submit(self, lines: Sequence[bytes], tag: str) -> str: ...

    async def find(
        self, tag: str, keys: Sequence[str], since: float, until: float, known: set[str]
    ) -> str | None: ...

    async def cancel(self, batch_id: str) -> None: ...

    async def status(self, batch_id: str) -> BatchStatus: ...

    async def outcomes(
        self,
        batch_id: str,
        status: BatchStatus,
        requests: Mapping[str, ChatRequest],
        features: Mapping[str, str],
    ) -> list[Outcome]: ...


def batch_api(provider: Provider) -> BatchApi | None:
    """The batch endpoints of `provider`'s API, where it has them."""
    if isinstance(provider, AnthropicProvider):
        return AnthropicBatches(provider)
    if isinstance(provider, OpenAICompatibleProvider):
        return OpenAIBatches(provider)
    return None


def _field(provider: HttpProvider, data: Mapping[str, Any], name: str, what: str) -> str:
    value = data.get(name)
    if not isinstance(value, str) or not value:
        raise MalformedResponseError(
            f"{provider.public_base} answered {what} without an {name} (got {json_kind(value)})"
        )
    return value


def _jsonl(body: bytes) -> Iterator[dict[str, Any]]:
    """The objects of a JSONL body, one at a time (a batch's results run to hundreds of
    megabytes); a line that is not one is left out (its call then has no result, and is
    sent again)."""
    for line in io.BytesIO(body):
        try:
            value = json.loads(line)
        except (json.JSONDecodeError, UnicodeDecodeError, RecursionError):
            continue
        if isinstance(value, dict) and isinstance(value.get("custom_id"), str):
            yield value


def _read(read: Callable[[], Completion]) -> tuple[Completion | None, ProviderError | None]:
    try:
        return read(), None
    except ProviderError as exc:
        return None, exc


def _timestamp(value: Any) -> float | None:
    """Seconds since the epoch of an RFC 3339 time, as Anthropic writes them."""
    if not isinstance(value, str):
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def _count(counts: Any, name: str) -> int:
    value = counts.get(name) if isinstance(counts, dict) else None
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


class OpenAIBatches:
    max_calls = 50_000
    max_bytes = 190_000_000  # of 200 MB, with room for a file's framing

    def __init__(self, provider: OpenAICompatibleProvider) -> None:
        self.provider = provider

    def features(self) -> dict[str, str]:
        return dict(self.provider.features)

    def line(self, key: str, request: ChatRequest, features: Mapping[str, str]) -> bytes:
        body = self.provider.batch_body(request, self.provider.verdict_form(request, features))
        call = {"custom_id": key, "method": "POST", "url": CHAT_PATH, "body": body}
        return json.dumps(call, ensure_ascii=False).encode() + b"\n"

    async def submit(self, lines: Sequence[bytes], tag: str) -> str:
        p = self.provider
        form = aiohttp.FormData()
        form.add_field("purpose", "batch")
        form.add_field(
            "file",
            b"".join(lines),
            filename=f"eigenjury-{tag}.jsonl",
            content_type="application/jsonl",
        )
        uploaded = p.json_of(await p.send("POST", "/files", p.headers(), data=form))
        batch = {
            "input_file_id": _field(p, uploaded, "id", "the upload of a batch's calls"),
            "endpoint": CHAT_PATH,
            "completion_window": "24h",
            "metadata": {"eigenjury_batch": tag},
        }
        made = p.json_of(await p.send("POST", "/batches", p.headers(), payload=batch))
        return _field(p, made, "id", "a new batch")

    async def find(
        self, tag: str, keys: Sequence[str], since: float, until: float, known: set[str]
    ) -> str | None:
        """The batch sent with `tag` in its metadata (a send whose answer was lost), read
        from the newest back to those made before `since` (the list is the whole
        organisation's: other work may have made many since)."""
        p = self.provider
        after: str | None = None
        for _ in range(FIND_PAGES):
            params = {"limit": "100", **({"after": after} if after else {})}
            listed = p.json_of(await p.send("GET", "/batches", p.headers(), params=params))
            page = [b for b in listed.get("data") or () if isinstance(b, dict)]
            for batch in page:
                if (batch.get("metadata") or {}).get("eigenjury_batch") == tag:
                    return _field(p, batch, "id", "a batch in its list")
            made = [b.get("created_at") for b in page]
            older = any(isinstance(t, int | float) and t < since - FIND_SLACK_S for t in made)
            if not page or older or not listed.get("has_more"):
                return None
            after = _field(p, page[-1], "id", "a batch in its list")
        return None

    async def cancel(self, batch_id: str) -> None:
        p = self.provider
        await p.send("POST", f"/batches/{batch_id}/cancel", p.headers())

    async def status(self, batch_id: str) -> BatchStatus:
        p = self.provider
        batch = p.json_of(await p.send("GET", f"/batches/{batch_id}", p.headers()))
        state = str(batch.get("status"))
        problem = None
        if state == "failed":
            errors = (batch.get("errors") or {}).get("data") or []
            said = [str(e.get("message")) for e in errors if isinstance(e, dict)]
            problem = f"{p.public_base} refused the batch: " + (
                "; ".join(said[:3]) or "no reason given"
            )
        files = (batch.get("output_file_id"), batch.get("error_file_id"))
        return BatchStatus(
            state,
            state in ("completed", "failed", "expired", "cancelled"),
            problem,
            tuple(f for f in files if isinstance(f, str) and f),
        )

    async def outcomes(
        self,
        batch_id: str,
        status: BatchStatus,
        requests: Mapping[str, ChatRequest],
        features: Mapping[str, str],
    ) -> list[Outcome]:
        p = self.provider
        forms = {key: p.verdict_form(request, features) for key, request in requests.items()}
        found: list[Outcome] = []
        for file_id in status.files:
            body = await p.send("GET", f"/files/{file_id}/content", p.headers())
            for line in _jsonl(body):
                key = line["custom_id"]
                if key in requests:
                    found.append((key, *self._outcome(line, requests[key], forms[key])))
        return found

    def _outcome(
        self, line: dict[str, Any], request: ChatRequest, form: tuple[bool, str | None]
    ) -> tuple[Completion | None, ProviderError | None]:
        p = self.provider
        response = line.get("response")
        error = line.get("error")
        if isinstance(response, dict) and response.get("status_code") == 200:
            body = response.get("body")
            if not isinstance(body, dict):
                return None, MalformedResponseError(
                    f"{p.public_base} batched a reply that is not JSON"
                )
            label_scores, structured = form
            return _read(
                lambda: p.read_reply(request, body, 0.0, label_scores=label_scores, form=structured)
            )
        if isinstance(response, dict) and isinstance(response.get("status_code"), int):
            detail = json.dumps(response.get("body")).encode()
            return None, p.status_error(response["status_code"], detail, None)
        said = error if isinstance(error, dict) else {}
        message = f"{p.public_base}: {said.get('message') or 'the batch gave no answer'}"
        if said.get("code") in ("batch_expired", "batch_cancelled"):
            return None, BatchExpiredError(message)
        return None, ProviderError(message)


# Anthropic's error types and the statuses its live API answers them with, so that a
# batched call's error is read as the same call's live one (a prompt too long is a
# context-length error, an overloaded server's may pass)
_ANTHROPIC_STATUSES = {
    "invalid_request_error": 400,
    "authentication_error": 401,
    "billing_error": 402,
    "permission_error": 403,
    "not_found_error": 404,
    "request_too_large": 413,
    "rate_limit_error": 429,
    "api_error": 500,
    "timeout_error": 504,
    "overloaded_error": 529,
}


class AnthropicBatches:
    max_calls = 100_000
    max_bytes = 240_000_000  # of 256 MB

    def __init__(self, provider: AnthropicProvider) -> None:
        self.provider = provider

    def features(self) -> dict[str, str]:
        return {}  # a request is asked one way only

    def line(self, key: str, request: ChatRequest, features: Mapping[str, str]) -> bytes:
        call = {"custom_id": key, "params": self.provider.payload(request)}
        return json.dumps(call, ensure_ascii=False).encode()

    async def submit(self, lines: Sequence[bytes], tag: str) -> str:
        p = self.provider
        body = b'{"requests":[' + b",".join(lines) + b"]}"
        headers = {**p.headers(), "Content-Type": "application/json"}
        made = p.json_of(await p.send("POST", "/messages/batches", headers, data=body))
        return _field(p, made, "id", "a new batch")

    async def find(
        self, tag: str, keys: Sequence[str], since: float, until: float, known: set[str]
    ) -> str | None:
        """The batch a send of `keys` whose answer was lost made: among the latest
        hundred, those made between `since` and `until` (the send's start and its last
        renewal, our clock, with FIND_SLACK_S either side) with as many calls, that the
        store does not know (`known`; its batches carry nothing of ours). One that fits
        is it; of several, the one whose results hold our calls, once they have ended
        (FIND_LATER until then); None where none fits."""
        p = self.provider
        listed = p.json_of(
            await p.send("GET", "/messages/batches", p.headers(), params={"limit": "100"})
        )
        fitting = []
        for batch in listed.get("data") or ():
            if not isinstance(batch, dict) or batch.get("id") in known:
                continue
            counts = batch.get("request_counts")
            total = sum(
                _count(counts, k)
                for k in ("processing", "succeeded", "errored", "canceled", "expired")
            )
            made = _timestamp(batch.get("created_at"))
            if (
                total == len(keys)
                and made is not None
                and since - FIND_SLACK_S <= made <= until + FIND_SLACK_S
            ):
                fitting.append((_field(p, batch, "id", "a batch in its list"), batch))
        if len(fitting) <= 1:
            return fitting[0][0] if fitting else None
        ours, later = set(keys), False
        for batch_id, batch in fitting:
            if batch.get("processing_status") != "ended":
                later = True
                continue
            if any(line["custom_id"] in ours for line in await self._results(batch_id)):
                return batch_id
        return FIND_LATER if later else None

    async def cancel(self, batch_id: str) -> None:
        p = self.provider
        await p.send("POST", f"/messages/batches/{batch_id}/cancel", p.headers())

    async def status(self, batch_id: str) -> BatchStatus:
        p = self.provider
        batch = p.json_of(await p.send("GET", f"/messages/batches/{batch_id}", p.headers()))
        state = str(batch.get("processing_status"))
        return BatchStatus(state, state == "ended")

    async def outcomes(
        self,
        batch_id: str,
        status: BatchStatus,
        requests: Mapping[str, ChatRequest],
        features: Mapping[str, str],
    ) -> list[Outcome]:
        found: list[Outcome] = []
        for line in await self._results(batch_id):
            key = line["custom_id"]
            if key in requests:
                found.append((key, *self._outcome(line.get("result"), requests[key])))
        return found

    async def _results(self, batch_id: str) -> Iterator[dict[str, Any]]:
        """An ended batch's result lines, read from the endpoint it was sent to."""
        p = self.provider
        return _jsonl(await p.send("GET", f"/messages/batches/{batch_id}/results", p.headers()))

    def _outcome(
        self, result: Any, request: ChatRequest
    ) -> tuple[Completion | None, ProviderError | None]:
        p = self.provider
        result = result if isinstance(result, dict) else {}
        kind = result.get("type")
        if kind == "succeeded" and isinstance(result.get("message"), dict):
            message = result["message"]
            return _read(lambda: p.read_reply(request, message, 0.0))
        if kind in ("canceled", "expired"):
            return None, BatchExpiredError(f"{p.public_base}: the batch {kind} before this call")
        error = result.get("error") if isinstance(result.get("error"), dict) else {}
        error = error["error"] if isinstance(error.get("error"), dict) else error  # (nested)
        status = _ANTHROPIC_STATUSES.get(str(error.get("type")), 500)
        detail = json.dumps({"error": {"message": error.get("message") or f"the call {kind}"}})
        return None, p.status_error(status, detail.encode(), None)
