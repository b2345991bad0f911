"""A small OpenAI- and Anthropic-compatible server for tests and benchmarks.

It answers deterministically ("reply to: <last user message>"), after a fixed
latency, and injects faults at chosen rates: 429 with Retry-After, 500/503, hangs
past any sensible timeout, malformed or truncated JSON, and empty choices. It counts
every request and every successful reply per distinct request body, so a test can
check that nothing was asked twice. A test can also make it hold requests (`hold`) until
it says so (`release`): a run it interrupts is then provably in the middle, whatever the
load on the machine. It binds to loopback only.

It can also judge (see `Judging`): enforce, refuse or ignore a verdict schema in
`response_format`, answer a forced Anthropic tool call, and return log-probabilities
whose alternatives at the verdict are the labels with chosen probabilities. Its judges
may have a taste for length (`LengthTaste`): they read the two replies of a peer
comparison and favour the longer by a planted amount, or the one that makes more
points, while its evaluees' replies vary in length and points.

It can throttle (`Throttle`), as hosted APIs do at a rate they do not tell: a 429
beyond so many requests a second, answers slower under load, x-ratelimit headers.

It has OpenAI's and Anthropic's batch endpoints too (testing/batch_fakes.py), whose
batches end after a set time, with chosen shares of calls failed or expired.

    python -m eigenjury.testing.server --port 8000 --latency 0.05 --faults 0.3
    python -m eigenjury.testing.server --latency 0.05 --throttle 200 --per-in-flight 0.002
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import hashlib
import ipaddress
import json
import math
import random
import re
import threading
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any, Literal

from aiohttp import web

from eigenjury.testing.batch_fakes import BatchFakes, BatchSettings

FAULT_KINDS = ("rate_limit", "server_error", "hang", "malformed", "truncated", "empty_choices")


@dataclass
class Faults:
    """Probability of each fault per request (they are exclusive: total at most 1)."""

    rate_limit: float = 0.0
    server_error: float = 0.0
    hang: float = 0.0
    malformed: float = 0.0
    truncated: float = 0.0
    empty_choices: float = 0.0
    retry_after_s: float = 0.05
    hang_s: float = 30.0

    @classmethod
    def uniform(cls, total: float, **settings: float) -> Faults:
        """`total` spread evenly over every kind of fault."""
        share = total / len(FAULT_KINDS)
        return cls(**{kind: share for kind in FAULT_KINDS}, **settings)

    def draw(self, rng: random.Random) -> str | None:
        u, edge = rng.random(), 0.0
        for kind in FAULT_KINDS:
            edge += getattr(self, kind)
            if u < edge:
                return kind
        return None


_REPLY = re.compile(r"Reply ([AB]):\n<reply>\n(.*?)\n</reply>", re.S)  # peer.prompts' layout
_POINT = re.compile(r"\bPoint\.")


@dataclass(frozen=True)
class LengthTaste:
    """Peer judges with a planted taste for length, and evaluees whose replies vary.

    A comparison (a request showing "Reply A:" and "Reply B:" blocks, peer.prompts'
    layout) is judged by Davidson's model with tie propensity `tie`: reply A's log-odds
    over B are `taste[M]` (M: the request's model, the judge; 0 when not named) times the
    normalised difference (a - b) / (a + b) of the replies' lengths (reply_features'
    proxy: the fit's), plus `merit` times the difference of the points they make (each
    "Point." is one). The label is drawn by a hash of the request. Any other request
    (an evaluee's) is answered "reply to: <message>" followed by 0 to `points` points and
    0 to `words` words of padding ("indeed"), each count drawn by a hash of the request:
    with `merit`, longer replies really are better; without it, length is noise."""

    taste: Mapping[str, float]
    merit: float = 0.0
    points: int = 0
    words: int = 0
    tie: float = 0.3

    def answer(
        self, body: dict[str, Any], enum: list[str] | None
    ) -> tuple[str, int, dict[str, float]]:
        """The reply, where its label starts (-1: none) and the labels' probabilities."""
        messages = body.get("messages") or []
        last = str(
            next((m.get("content", "") for m in reversed(messages) if m.get("role") == "user"), "")
        )
        replies = dict(_REPLY.findall(last))
        if set(replies) != {"A", "B"}:  # an evaluee (or a reflection): a reply to it
            digest = hashlib.sha256(json.dumps(body, sort_keys=True).encode()).digest()
            points = int.from_bytes(digest[:4], "big") % (self.points + 1)
            words = int.from_bytes(digest[4:8], "big") % (self.words + 1)
            return reply_text(messages) + " Point." * points + " indeed" * words, -1, {}
        labels = self._probabilities(str(body.get("model", "")), replies["A"], replies["B"])
        if enum is not None:
            labels = {name: labels.get(name, 0.0) for name in enum}
            total = sum(labels.values())
            labels = {name: p / total for name, p in labels.items()}
        label = _draw(body, labels)
        if enum is not None:
            text = json.dumps({"reasoning": "compared", "verdict": label})
            return text, text.rindex(json.dumps(label)) + 1, labels
        head = "compared\n<verdict>"
        return f"{head}{label}</verdict>", len(head), labels

    def _probabilities(self, judge: str, a: str, b: str) -> dict[str, float]:
        from eigenjury.reply_features import text_features

        length_a, length_b = text_features([a, b], ("length",))["length"]
        total = length_a + length_b
        x = self.taste.get(judge, 0.0) * ((length_a - length_b) / total if total else 0.0)
        x += self.merit * (len(_POINT.findall(a)) - len(_POINT.findall(b)))
        first, second, tie = math.exp(x / 2), math.exp(-x / 2), self.tie
        norm = first + second + tie
        return {"A": first / norm, "B": second / norm, "tie": tie / norm}


@dataclass
class Judging:
    """How the server answers verdict requests.

    `response_format`: "ignore" it (free text, as before), "enforce" a `json_schema`
    verdict schema (a JSON reply: reasons, then a label of the schema's enum), "refuse"
    it with a 400 naming the field (as OpenAI does for an unknown argument), or take
    only the "json_object" form with a `schema`, refusing `json_schema` with a 500 that
    names what it takes (as llama-cpp-python's server does). `verdicts` gives labels
    their probabilities (missing ones: 0; none: all alike); with it, a free-text reply
    ends in a line "VERDICT: <label>". The label is drawn from a hash of the request, so
    the same request gets the same label. With `logprobs`, replies to requests that ask
    for them carry tokens whose alternatives at the label are the labels, with their
    log-probabilities; elsewhere the token is certain. `broken_logprob` (NaN, an
    infinity) replaces every log-probability at the label, as a broken server sends
    them. With `echo`, a free-text verdict is followed by the format the judge was
    shown, repeated as some models do: the last paragraph of the request's system
    message and of its last user message, where every protocol puts its format. With
    `words`, replies are written as a model writes them rather than echoed: a length
    drawn from the request's hash (half to one and a half times `words`), whatever the
    prompt's, and different words for every request (its persona, temperature, seed).
    """

    response_format: Literal["ignore", "enforce", "refuse", "json_object"] = "ignore"
    verdicts: Mapping[str, float] | None = None
    logprobs: bool = False
    broken_logprob: float | None = None
    echo: bool = False
    length: LengthTaste | None = None
    words: int | None = None

    def reply(self, body: dict[str, Any]) -> str:
        messages = body.get("messages") or []
        if self.words is None:
            return reply_text(messages)
        digest = hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()
        n = self.words // 2 + int(digest[:8], 16) % (self.words + 1)
        return " ".join(f"w{digest[k % 56 : k % 56 + 8]}" for k in range(n))

    def labels(self, enum: list[str] | None = None) -> dict[str, float]:
        """The labels to draw from (a schema's `enum`, else those of `verdicts`) and their
        probabilities, summing to 1."""
        if self.verdicts is None:
            weights = dict.fromkeys(enum or [], 1.0)
        else:
            names = enum if enum is not None else list(self.verdicts)
            weights = {name: self.verdicts.get(name, 0.0) for name in names}
        total = sum(weights.values())
        return {n: w / total for n, w in weights.items()} if total > 0 else {}


@dataclass
class Throttle:
    """Throttling as hosted APIs do it, at a rate the client is not told: a request
    beyond `rate` accepted in the last second is refused with a 429 (with Retry-After
    `retry_after_s` where given), and an answer takes longer the more requests are in
    flight (`per_in_flight_s` more for each one beside it), as a loaded server does.
    With `headers`, every answer carries OpenAI's x-ratelimit-limit-requests (per
    minute), -remaining-requests and -reset-requests."""

    rate: float
    per_in_flight_s: float = 0.0
    retry_after_s: float | None = None
    headers: bool = False
    accepted: collections.deque[float] = field(default_factory=collections.deque)

    def admit(self, now: float) -> bool:
        """Whether a request arriving `now` (seconds) is within the rate."""
        while self.accepted and self.accepted[0] <= now - 1.0:
            self.accepted.popleft()
        if len(self.accepted) >= self.rate:
            return False
        self.accepted.append(now)
        return True

    def limits(self, now: float) -> dict[str, str]:
        if not self.headers:
            return {}
        reset = self.accepted[0] + 1.0 - now if self.accepted else 0.0
        remaining = max(0, math.floor(self.rate) - len(self.accepted))
        return {
            "x-ratelimit-limit-requests": f"{self.rate * 60:g}",
            "x-ratelimit-remaining-requests": str(remaining),
            "x-ratelimit-reset-requests": f"{max(reset, 0.0):.3f}s",
        }


class RefusedError(Exception):
    """A request the server refuses, with the status and message to answer."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class FaultServer:
    """Start with `await server.start()` (returns the /v1 base URL), stop with `stop()`;
    or use `ServerThread` from synchronous code."""

    def __init__(
        self,
        *,
        latency_s: float = 0.0,
        faults: Faults | None = None,
        seed: int = 0,
        host: str = "127.0.0.1",
        port: int = 0,
        api_key: str | None = None,
        judging: Judging | None = None,
        keep_bodies: bool = False,
        throttle: Throttle | None = None,
        batches: BatchSettings | None = None,
    ) -> None:
        """With `keep_bodies`, `bodies` lists every request body received, for tests
        that check what was asked. With `api_key`, requests must carry it (Bearer or
        x-api-key); a wrong key gets a 401 whose message quotes the credentials sent and
        the URL asked for (its query too), as some real APIs and proxies do, so tests can
        check that clients never let them through."""
        if not _is_loopback(host):
            raise ValueError(f"the test server binds to loopback only, not {host}")
        self.latency_s = latency_s
        self.throttle = throttle
        self.in_flight = 0  # requests being answered now
        self.throttled = 0  # requests refused by the throttle
        self.faults = faults or Faults()
        self.judging = judging or Judging()
        self.host, self.port = host, port
        self._rng = random.Random(seed)
        self.api_key = api_key
        self.requests = 0
        self.paths: Counter[str] = Counter()  # requests by path and query, as received
        self.faults_served: Counter[str] = Counter()
        self.successes: Counter[str] = Counter()
        self.successes_by_prompt: Counter[str] = Counter()
        self.bodies: list[dict[str, Any]] | None = [] if keep_bodies else None
        self.held = 0  # requests waiting now for `release()`
        self._passes: int | None = None  # requests still answered before holding; None: all
        self._gate = asyncio.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._runner: web.AppRunner | None = None
        self.batches = BatchFakes(
            batches or BatchSettings(),
            chat=lambda body, empty: _chat_answer(body, empty, self.judging),
            messages=lambda body, empty: _messages_answer(body, empty, self.judging),
            authorized=self._refused_key,
        )

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}/v1"

    async def start(self) -> str:
        app = web.Application(client_max_size=300 * 2**20)  # (a batch: up to 256 MB)
        app.router.add_post("/v1/chat/completions", self._chat)
        app.router.add_post("/v1/messages", self._messages)
        app.router.add_get("/v1/models", self._models)
        app.router.add_get("/stats", self._stats)
        self.batches.add_routes(app)
        self._runner = web.AppRunner(
            app, handler_cancellation=True, access_log=None, shutdown_timeout=0.5
        )
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port)
        await site.start()
        self.port = int(self._runner.addresses[0][1])
        self._loop = asyncio.get_running_loop()
        return self.base_url

    def hold(self, after: int = 0) -> None:
        """Answer `after` more requests, then keep every later one waiting (counted in
        `held`) until `release()`. Both may be called from any thread (a test's, while
        `ServerThread` serves on its own)."""
        self._gate = asyncio.Event()
        self._passes = after

    def release(self) -> None:
        """Answer the held requests, and every later one, as usual."""
        self._passes, gate = None, self._gate
        if self._loop is not None and not self._loop.is_closed():
            self._loop.call_soon_threadsafe(gate.set)

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    def stats(self) -> dict[str, Any]:
        return {
            "requests": self.requests,
            "faults": dict(self.faults_served),
            "successes": sum(self.successes.values()),
            "distinct_successes": len(self.successes),
            "most_successes_for_one_request": max(self.successes.values(), default=0),
            "throttled": self.throttled,
            **self.batches.stats(),
        }

    def _refused_key(self, request: web.Request) -> web.Response | None:
        """A 401 for a request without the server's key, where it has one."""
        if self.api_key is None:
            return None
        sent = request.headers.get("x-api-key") or request.headers.get(
            "Authorization", ""
        ).removeprefix("Bearer ")
        if sent == self.api_key:
            return None
        message = f"Incorrect API key provided: {sent} (for {request.path_qs})"
        return web.json_response({"error": {"message": message}}, status=401)

    async def _stats(self, request: web.Request) -> web.Response:
        return web.json_response(self.stats())

    async def _models(self, request: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": [{"id": "test", "object": "model"}]})

    async def _serve(self, request: web.Request, answer: Any) -> web.StreamResponse:
        self.in_flight += 1
        try:
            response = await self._answer(request, answer)
        finally:
            self.in_flight -= 1
        if self.throttle is not None:
            response.headers.update(self.throttle.limits(asyncio.get_running_loop().time()))
        return response

    async def _answer(self, request: web.Request, answer: Any) -> web.StreamResponse:
        self.requests += 1
        self.paths[request.path_qs] += 1
        if self._passes is not None:
            if self._passes > 0:
                self._passes -= 1
            else:
                gate = self._gate
                self.held += 1
                try:
                    await gate.wait()
                finally:
                    self.held -= 1
        raw = await request.read()
        refused = self._refused_key(request)
        if refused is not None:
            return refused
        latency = self.latency_s
        if self.throttle is not None:
            if not self.throttle.admit(asyncio.get_running_loop().time()):
                self.throttled += 1
                after = self.throttle.retry_after_s
                return web.json_response(
                    {"error": {"message": "rate limit reached", "type": "rate_limit"}},
                    status=429,
                    headers={} if after is None else {"Retry-After": f"{after:g}"},
                )
            latency += self.throttle.per_in_flight_s * (self.in_flight - 1)
        fault = self.faults.draw(self._rng)
        if latency:
            await asyncio.sleep(latency)
        if fault is not None:
            self.faults_served[fault] += 1
        if fault == "rate_limit":
            return web.json_response(
                {"error": {"message": "rate limit reached", "type": "rate_limit"}},
                status=429,
                headers={"Retry-After": f"{self.faults.retry_after_s:g}"},
            )
        if fault == "server_error":
            return web.json_response(
                {"error": {"message": "server overloaded"}}, status=self._rng.choice((500, 503))
            )
        if fault == "hang":
            await asyncio.sleep(self.faults.hang_s)
        try:
            body = json.loads(raw)
        except json.JSONDecodeError:
            return web.json_response({"error": {"message": "request is not JSON"}}, status=400)
        if self.bodies is not None:
            self.bodies.append(body)
        try:
            payload = answer(body, fault == "empty_choices")
        except RefusedError as refusal:
            return web.json_response({"error": {"message": str(refusal)}}, status=refusal.status)
        text = json.dumps(payload)
        if fault == "malformed":
            return web.Response(text="<html>upstream error</html>", content_type="text/html")
        if fault == "truncated":
            return web.Response(text=text[: len(text) // 2], content_type="application/json")
        transport = request.transport
        if transport is None or transport.is_closing():
            # the client gave up (a hang, or a reply slower than its timeout) and asks
            # again: this answer reaches no one, so it is no success (aiohttp does not
            # cancel a handler when its client goes)
            return web.Response(status=499)
        if fault != "empty_choices":
            self.successes[hashlib.sha256(raw).hexdigest()] += 1
            self.successes_by_prompt[reply_text(body.get("messages") or [])] += 1
        return web.Response(text=text, content_type="application/json")

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        return await self._serve(request, lambda b, e: _chat_answer(b, e, self.judging))

    async def _messages(self, request: web.Request) -> web.StreamResponse:
        return await self._serve(request, lambda b, e: _messages_answer(b, e, self.judging))


def _last_user(messages: list[dict[str, Any]]) -> str:
    return str(
        next((m.get("content", "") for m in reversed(messages) if m.get("role") == "user"), "")
    )


def reply_text(messages: list[dict[str, Any]]) -> str:
    return f"reply to: {_last_user(messages)}"


def _words(messages: list[dict[str, Any]]) -> int:
    return sum(len(str(m.get("content", "")).split()) for m in messages)


def _draw(body: dict[str, Any], labels: dict[str, float]) -> str:
    """A label drawn with its probability, by a hash of the request (reproducible)."""
    digest = hashlib.sha256(json.dumps(body, sort_keys=True).encode()).digest()
    u, edge = int.from_bytes(digest[:8], "big") / 2**64, 0.0
    for label, probability in labels.items():
        edge += probability
        if u < edge:
            return label
    return next(reversed(labels))  # (rounding at the top end)


def _schema_enum(response_format: Any, judging: Judging) -> list[str] | None:
    """The labels of a verdict schema the server enforces (None: it answers in free
    text); raises RefusedError where the server refuses the request."""
    if not isinstance(response_format, dict) or judging.response_format == "ignore":
        return None
    kind = response_format.get("type")
    if judging.response_format == "refuse":
        raise RefusedError(400, "Unrecognized request argument supplied: response_format")
    if judging.response_format == "json_object":
        if kind != "json_object":
            raise RefusedError(
                500,
                "1 validation error: ('body', 'response_format', 'type'): Input should be "
                f"'text' or 'json_object', input: {kind!r}",
            )
        schema = response_format.get("schema") or {}
    else:
        schema = (response_format.get("json_schema") or {}).get("schema") or {}
        if kind != "json_schema":
            return None
    enum = ((schema.get("properties") or {}).get("verdict") or {}).get("enum")
    return [str(label) for label in enum] if isinstance(enum, list) else None


_TOKEN = re.compile(r"\s*[^\w\s]*\w+|\s*[^\w\s]+|\s+")  # a word with what leads it


def _logprobs(
    text: str, label_at: int, labels: dict[str, float], broken: float | None = None
) -> dict[str, Any]:
    """Tokens of `text`; at the one holding the label (from `label_at`), the labels are
    the alternatives, each after what the token holds before it (each with the
    log-probability `broken` instead, where given)."""
    content = []
    for match in _TOKEN.finditer(text):
        token = match.group()
        if match.start() <= label_at < match.end():
            lead = text[match.start() : label_at]
            alternatives = [
                {"token": lead + label, "logprob": math.log(p) if broken is None else broken}
                for label, p in sorted(labels.items(), key=lambda item: -item[1])
                if p > 0
            ]
            chosen = {a["token"]: a["logprob"] for a in alternatives}.get(token, 0.0)
            content.append({"token": token, "logprob": chosen, "top_logprobs": alternatives})
        else:
            content.append(
                {"token": token, "logprob": 0.0, "top_logprobs": [{"token": token, "logprob": 0.0}]}
            )
    return {"content": content}


def _judged_text(body: dict[str, Any], judging: Judging) -> tuple[str, int, dict[str, float]]:
    """The reply, where its label starts (-1: none) and the labels drawn from."""
    reply = judging.reply(body)
    enum = _schema_enum(body.get("response_format"), judging)
    if judging.length is not None:
        return judging.length.answer(body, enum)
    labels = judging.labels(enum) if enum is not None or judging.verdicts else {}
    if not labels:
        return reply, -1, labels
    label = _draw(body, labels)
    if enum is not None:
        text = json.dumps({"reasoning": reply, "verdict": label})
        return text, text.rindex(json.dumps(label)) + 1, labels
    head = f"{reply}\nVERDICT: "
    return head + label + (_format_echo(body) if judging.echo else ""), len(head), labels


def _format_echo(body: dict[str, Any]) -> str:
    """The format a judge was shown, as it repeats it after its verdict: the last
    paragraph of the system message and of the last user message."""
    messages = body.get("messages") or []
    paragraphs = [
        str(next((m.get("content", "") for m in reversed(messages) if m.get("role") == role), ""))
        .rstrip()
        .rpartition("\n\n")[2]
        for role in ("system", "user")
    ]
    return "".join(f"\n{p}" for p in paragraphs if p)


def _chat_answer(body: dict[str, Any], empty: bool, judging: Judging) -> dict[str, Any]:
    messages = body.get("messages") or []
    text, label_at, labels = _judged_text(body, judging)
    choice: dict[str, Any] = {
        "index": 0,
        "message": {"role": "assistant", "content": text},
        "finish_reason": "stop",
    }
    if judging.logprobs and body.get("logprobs"):
        choice["logprobs"] = _logprobs(text, label_at, labels, judging.broken_logprob)
    return {
        "id": "chatcmpl-test",
        "object": "chat.completion",
        "model": body.get("model", "test"),
        "choices": [] if empty else [choice],
        "usage": {
            "prompt_tokens": _words(messages),
            "completion_tokens": len(text.split()),
            "total_tokens": _words(messages) + len(text.split()),
        },
    }


def _messages_answer(body: dict[str, Any], empty: bool, judging: Judging) -> dict[str, Any]:
    messages = body.get("messages") or []
    text = judging.reply(body)
    block: dict[str, Any] = {"type": "text", "text": text}
    forced = (body.get("tool_choice") or {}).get("name")
    tool = next((t for t in body.get("tools") or [] if t.get("name") == forced), None)
    if tool is not None:  # a forced tool call: its input follows the tool's schema
        enum = ((tool["input_schema"].get("properties") or {}).get("verdict") or {}).get("enum")
        input_: dict[str, Any] = {"reasoning": text}
        if isinstance(enum, list) and enum:
            input_["verdict"] = _draw(body, judging.labels([str(e) for e in enum]))
        block = {"type": "tool_use", "id": "toolu-test", "name": forced, "input": input_}
    return {
        "id": "msg-test",
        "type": "message",
        "role": "assistant",
        "content": [] if empty else [block],
        "stop_reason": "end_turn" if tool is None else "tool_use",
        "usage": {"input_tokens": _words(messages), "output_tokens": len(text.split())},
    }


class ServerThread:
    """The server on its own event loop in a daemon thread, for synchronous tests:

    with ServerThread(latency_s=0.01) as server:
        run_something(server.base_url)
    """

    def __init__(self, **options: Any) -> None:
        self.server = FaultServer(**options)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)

    def __enter__(self) -> FaultServer:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self.server.start(), self._loop).result(10)
        return self.server

    def __exit__(self, *exc: object) -> None:
        asyncio.run_coroutine_threadsafe(self.server.stop(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--latency", type=float, default=0.0, help="seconds per request")
    parser.add_argument(
        "--faults",
        type=float,
        default=0.0,
        help="share of requests that fail, spread over every fault kind",
    )
    parser.add_argument("--seed", type=int, default=0)
    for f in fields(Faults):
        if f.name not in FAULT_KINDS:
            parser.add_argument(f"--{f.name.replace('_', '-')}", type=float, default=f.default)
    parser.add_argument(
        "--throttle", type=float, help="requests a second answered; more get a 429 (Throttle)"
    )
    parser.add_argument(
        "--per-in-flight", type=float, default=0.0, help="seconds more per request in flight"
    )
    parser.add_argument("--ratelimit-headers", action="store_true", help="send x-ratelimit-*")
    parser.add_argument(
        "--reply-words",
        type=int,
        help="write replies of about this many words, as a model would (default: echo)",
    )
    parser.add_argument(
        "--batch-end-after", type=float, default=0.0, help="seconds before a batch ends"
    )
    parser.add_argument("--batch-fail-share", type=float, default=0.0)
    parser.add_argument("--batch-expire-share", type=float, default=0.0)
    parser.add_argument("--batch-reject-share", type=float, default=0.0)
    args = parser.parse_args()
    faults = Faults.uniform(args.faults, retry_after_s=args.retry_after_s, hang_s=args.hang_s)
    throttle = (
        None
        if args.throttle is None
        else Throttle(args.throttle, args.per_in_flight, headers=args.ratelimit_headers)
    )
    server = FaultServer(
        latency_s=args.latency,
        faults=faults,
        seed=args.seed,
        host=args.host,
        port=args.port,
        throttle=throttle,
        judging=Judging(words=args.reply_words),
        batches=BatchSettings(
            end_after_s=args.batch_end_after,
            fail_share=args.batch_fail_share,
            expire_share=args.batch_expire_share,
            reject_share=args.batch_reject_share,
        ),
    )

    async def serve() -> None:
        print(f"serving on {await server.start()}", flush=True)
        try:
            await asyncio.Event().wait()
        finally:
            await server.stop()

    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(serve())


if __name__ == "__main__":
    main()
