"""Per-endpoint limits: concurrency that adapts to 429s, requests and tokens per minute,
and the retry policy with backoff that honours Retry-After."""

from __future__ import annotations

import asyncio
import collections
import contextlib
import math
import random
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from eigenjury.engine.settings import MIN_PER_MINUTE
from eigenjury.errors import InputError

# Connection failures in a row (across calls, no answer from the server in between)
# after which an endpoint counts as down for the rest of the run: its remaining calls
# end at once as connection errors instead of each retrying with backoff for minutes.
DEAD_AFTER = 5
# The share of a server's stated rate (its x-ratelimit headers) the engine keeps to.
STATED_SHARE = 0.95
# A throttled endpoint is paced at this share of the answers it accepted in the last
# second; throttled means refusals (429s) were at least THROTTLED_SHARE of the answers
# of that second (and two or more), not a stray one.
PACE_SHARE = 0.9
THROTTLED_SHARE = 0.1
MIN_PACE = 1 / 60  # requests a second: the pace never falls below one a minute
JUDGED_AFTER = 30  # answers after a pace was set, to judge whether it helps


@dataclass(frozen=True)
class EndpointLimits:
    """Limits for one endpoint (a base URL, or a local/scripted model).

    concurrency: calls in flight at most; with `adaptive`, cut by a quarter on a 429 (at
    most once a second) and raised by a sixteenth (at least one) a second while calls
    succeed, back up to this.
    rpm / tpm: requests and tokens per minute (None: unlimited), at least MIN_PER_MINUTE
    (a slower rate would wait hours per call, silently); tokens are estimated before a
    call (prompt characters / 4 + max_tokens) and corrected after it.
    """

    concurrency: int = 16
    rpm: float | None = None
    tpm: float | None = None
    adaptive: bool = True

    def __post_init__(self) -> None:
        if self.concurrency < 1:
            raise InputError(f"concurrency must be at least 1, got {self.concurrency}")
        for name, what in (("rpm", "requests"), ("tpm", "tokens")):
            rate = getattr(self, name)
            if rate is not None and not (math.isfinite(rate) and rate >= MIN_PER_MINUTE):
                raise InputError(
                    f"{name} ({what} per minute per endpoint) must be a finite number of at "
                    f"least 1/60 (one an hour), got {rate:g}; leave it out for no limit"
                )


@dataclass(frozen=True)
class RetryPolicy:
    """max_attempts counts the first try; timeout_s bounds each attempt."""

    max_attempts: int = 6
    timeout_s: float = 120.0
    backoff_s: float = 1.0
    backoff_max_s: float = 60.0

    def delay(self, attempt: int, retry_after: float | None, rng: random.Random) -> float:
        """Seconds before the next attempt: the server's Retry-After if it gave one,
        else exponential backoff with full jitter."""
        if retry_after is not None:
            return min(retry_after, self.backoff_max_s)
        return rng.uniform(0.0, min(self.backoff_max_s, self.backoff_s * 2 ** (attempt - 1)))


class TokenBucket:
    """Refills at `per_minute / 60` per second, holding at most one second's worth
    (so a full minute's quota is never spent in one burst)."""

    def __init__(self, per_minute: float) -> None:
        self.rate = per_minute / 60.0
        self.capacity = max(1.0, self.rate)
        self.level = self.capacity
        self.stamp = time.monotonic()
        self._lock = asyncio.Lock()

    async def take(self, amount: float) -> None:
        amount = min(amount, self.capacity)  # a call bigger than the bucket waits for a full one
        async with self._lock:
            while True:
                now = time.monotonic()
                self.level = min(self.capacity, self.level + (now - self.stamp) * self.rate)
                self.stamp = now
                if self.level >= amount:
                    self.level -= amount
                    return
                await asyncio.sleep((amount - self.level) / self.rate)

    def set_rate(self, per_minute: float) -> None:
        """A new rate (a server's stated limit), from now on."""
        self.rate = per_minute / 60.0
        self.capacity = max(1.0, self.rate)
        self.level = min(self.level, self.capacity)

    def refund(self, amount: float) -> None:
        """Give back (or, negative, charge) the difference between estimate and actual.
        A debt is capped at one full bucket: a call far bigger than its estimate delays
        the next by one bucket's refill, not by hours."""
        self.level = max(-self.capacity, min(self.capacity, self.level + amount))


class EndpointLimiter:
    """Concurrency, rates and health of one endpoint, shared by the calls to it in a run.

    `dead` says why the endpoint is given up on (DEAD_AFTER connection failures in a
    row); from then on `acquire` refuses and `pause` ends early."""

    def __init__(
        self, limits: EndpointLimits, *, start: int | None = None, pace: float | None = None
    ) -> None:
        self.limits = limits
        # where an earlier run found the endpoint's limits (kept in the store), this one
        # starts: its concurrency, and its pace (requests a second) where it was throttled
        self.start = limits.concurrency if start is None else max(1, min(start, limits.concurrency))
        self.limit = self.start
        self.pace = pace if limits.adaptive else None
        self.start_pace = self.pace
        self._trusted = self.pace is not None  # a pace judged to follow the rate (or kept)
        self.stated: dict[str, float] = {}  # the rates the server says it allows
        self._stated_by_model: dict[str, dict[str, float]] = {}
        self.active = 0
        self._free = asyncio.Condition()
        self._requests: TokenBucket | None = None
        self._tokens = TokenBucket(limits.tpm) if limits.tpm else None
        self._answers: collections.deque[tuple[float, bool]] = collections.deque()  # last second
        self._refusals = 0  # of them
        self._cut = -math.inf  # when the limit was last cut, and last changed
        self._changed = -math.inf
        self._pace_cut = self._pace_changed = -math.inf
        self.pacing = limits.adaptive  # off once the refusals are found not to follow the rate
        self._judged_share: float | None = None  # the refusals' share when the pace was cut
        self._judge_from = -math.inf
        self._after_cut = [0, 0]  # answers and refusals since a second after the cut
        self._since: float | None = None  # the first answer
        self._pace_requests(starting=True)
        self.rate_limited = 0
        self.connection_failures = 0
        self.dead: str | None = None
        self._died = asyncio.Event()

    def revive(self) -> None:
        """Give the endpoint a fresh chance (a new run)."""
        self.connection_failures = 0
        self.dead = None
        self._died.clear()

    async def acquire(self, estimated_tokens: float) -> bool:
        """Wait for a slot under the limits; False (holding nothing) if the endpoint is
        dead, before or after the wait."""
        async with self._free:
            await self._free.wait_for(lambda: self.active < self.limit or self.given_up())
            if self.given_up():
                return False
            self.active += 1
        try:
            if self._requests is not None:
                await self._requests.take(1.0)
            if self._tokens is not None:
                await self._tokens.take(estimated_tokens)
        except BaseException:
            await self.release()
            raise
        if self.given_up():  # while this call waited its turn
            await self.release()
            return False
        return True

    def given_up(self) -> bool:
        """Whether the endpoint is given up on (a call, as it can change while one waits)."""
        return self.dead is not None

    async def pause(self, seconds: float) -> None:
        """Sleep before a retry; over at once if the endpoint is given up on meanwhile."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._died.wait(), seconds)

    def on_reply(self) -> None:
        """The server answered (well or not): it is up."""
        self.connection_failures = 0

    def on_connection_failure(self, message: str) -> None:
        self.connection_failures += 1
        if self.connection_failures >= DEAD_AFTER and self.dead is None:
            self.dead = (
                f"{DEAD_AFTER} connection failures in a row (the last: {message}); the calls "
                "still to make there are not sent. Rerun once the server is up to send them"
            )
            self._died.set()

    async def release(self) -> None:
        async with self._free:
            self.active -= 1
            self._free.notify_all()

    def settle_tokens(self, estimated: float, actual: float) -> None:
        if self._tokens is not None:
            self._tokens.refund(estimated - actual)

    def on_success(self) -> None:
        """Raise the limit on the server's timescale: at most once a second (and a
        second after a cut), by a sixteenth (at least one), up to the configured
        concurrency. Raising it by one a round trip, as TCP does, overshoots a server
        that counts requests per second far before its next 429 (BENCHMARKS 25). A
        pace rises by a sixty-fourth a second (at least one request a second): near
        the server's rate, slowly, so its 429s stay few."""
        if not self.limits.adaptive:
            return
        now = time.monotonic()
        answers, _ = self._answered(now, False)
        if (
            self.pace is not None
            and self.pace < 2 * answers  # a pace far above what is sent binds nothing
            and now - self._pace_cut >= 1.0
            and now - self._pace_changed >= 1.0
        ):
            self._pace_changed = now
            self.pace += max(1.0, self.pace / 64)
            self._pace_requests()
        if self.limit < self.limits.concurrency and now - self._changed >= 1.0:
            self._changed = now
            self.limit = min(self.limits.concurrency, self.limit + max(1, self.limit // 16))

    def learned(self) -> dict[str, str]:
        """What the next run at this endpoint should start from: where the endpoint
        was paced and the pace was judged to follow the rate (its refusals fell once
        paced), the pace and calls in flight it ended at; else nothing ("": an earlier
        run's is forgotten). A server refusing at random, or a run never refused,
        leaves no lower start behind."""
        if not self.limits.adaptive:
            return {}
        judged = self._trusted and self._judged_share is None  # no judgement pending
        if self.pace is not None and self.pacing and judged:
            return {"concurrency": str(self.limit), "pace": f"{self.pace:.6g}"}
        if self.start < self.limits.concurrency or self.start_pace is not None:
            return {"concurrency": "", "pace": ""}
        return {}

    def report(self) -> dict[str, Any]:
        """The limits as the run found them, for the accounting."""
        return {
            "concurrency": self.limits.concurrency,
            "started_at": self.start,
            "ended_at": self.limit,
            "rate_limited": self.rate_limited,
            "paced_from": self.start_pace,
            "paced_at": self.pace,
            "stated_rpm": self.stated.get("rpm"),
            "stated_tpm": self.stated.get("tpm"),
        }

    def heed(self, model: str, stated: Mapping[str, float]) -> None:
        """A server's stated limits for `model` (its rate-limit headers: requests and
        tokens a minute) as the ceiling of the endpoint's rates, a little under them
        (STATED_SHARE) as the server's clock and window are not ours; a lower
        configured rate stays. Where several models of one endpoint state their own
        (OpenAI's limits are per model), the endpoint's ceiling is their sum."""
        if self._stated_by_model.get(model) == stated:
            return
        self._stated_by_model[model] = dict(stated)
        self.stated = {
            name: sum(s[name] for s in self._stated_by_model.values() if name in s)
            for name in ("rpm", "tpm")
            if any(name in s for s in self._stated_by_model.values())
        }
        self._pace_requests()
        rates = [r for r in (self.limits.tpm, self._stated_rate("tpm")) if r is not None]
        if not rates:
            self._tokens = None
        elif self._tokens is None:
            self._tokens = TokenBucket(min(rates))
        elif self._tokens.rate * 60.0 != min(rates):
            self._tokens.set_rate(min(rates))

    def _stated_rate(self, name: str) -> float | None:
        value = self.stated.get(name)
        return None if value is None else value * STATED_SHARE

    def _pace_requests(self, *, starting: bool = False) -> None:
        """The request bucket at the lowest of the configured rate, the server's stated
        one and the pace found; none while all three are open. A bucket made mid-run
        starts owing the calls in flight (they were sent within this second); one made
        at the start, full."""
        rates = [
            rate
            for rate in (
                self.limits.rpm,
                self._stated_rate("rpm"),
                None if self.pace is None else self.pace * 60.0,
            )
            if rate is not None
        ]
        if not rates:
            self._requests = None
            return
        per_minute = min(rates)
        if self._requests is None:
            self._requests = TokenBucket(per_minute)
            if not starting:
                bucket = self._requests
                bucket.level = max(-float(self.active), -bucket.capacity)
        elif self._requests.rate * 60.0 != per_minute:
            self._requests.set_rate(per_minute)

    def _answered(self, now: float, refused: bool) -> tuple[int, int]:
        """Note an answer; the answers and the refusals of the last second. After a pace
        was set, judge it: where the refusals stay (at half their share or more), they do
        not follow the rate (a server refusing at random, or for reasons of its own), so
        pacing stops for the run, and refusals no longer slow the endpoint."""
        if self._since is None:
            self._since = now
        self._answers.append((now, refused))
        self._refusals += refused
        while self._answers and self._answers[0][0] <= now - 1.0:
            self._refusals -= self._answers.popleft()[1]
        answers, refusals = len(self._answers), self._refusals
        if self._judged_share is not None and now - self._judge_from >= 1.0:
            # the answers from a second after the cut on (that second still holds what
            # the server counted before it), judged once JUDGED_AFTER have come
            self._after_cut[0] += 1
            self._after_cut[1] += refused
            seen, refused_since = self._after_cut
            if seen >= JUDGED_AFTER:
                if refused_since >= max(3, 0.5 * self._judged_share * seen):
                    self.pacing = False
                    self.pace = None
                    self._pace_requests()
                else:
                    self._trusted = True  # the refusals followed the rate
                self._judged_share = None
        return answers, refusals

    def on_rate_limit(self) -> None:
        """Where the 429s are a share of the last second's answers (THROTTLED_SHARE,
        two or more), cut the limit by a quarter, at most once a second (a burst is one
        signal), and pace the requests at PACE_SHARE of those the server accepted, from
        then on in place of cutting the calls in flight."""
        self.rate_limited += 1
        if not self.limits.adaptive:
            return
        now = time.monotonic()
        answers, refused = self._answered(now, True)
        # "too fast": refusals are a share of the last second's answers, not a stray
        # one; and once refusals were found not to follow the rate (a server refusing
        # at random), none slows the endpoint: the retries answer them
        if refused < max(2, THROTTLED_SHARE * answers) or not self.pacing:
            return
        # once paced, the pace answers a throttling server: cutting the calls in flight
        # too would take it well below what the server allows
        if self.pace is None and now - self._cut >= 1.0:
            self._cut = self._changed = now
            self.limit = max(1, self.limit * 3 // 4)
        accepted = answers - refused  # none: a closed quota, for Retry-After to wait out
        # a pace is read off a whole second of answers (the first burst is no rate)
        whole = self._since is not None and now - self._since >= 1.0
        if accepted and whole and now - self._pace_cut >= 1.0:
            pace = max(MIN_PACE, PACE_SHARE * accepted)
            if self.pace is None or pace < self.pace:
                self._pace_cut = self._pace_changed = now
                if self._judged_share is None:  # judged from the first cut of a run of them
                    self._judged_share, self._judge_from = refused / answers, now
                    self._after_cut = [0, 0]
                self.pace = pace
                self._pace_requests()
