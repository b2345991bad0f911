"""A run's plan: what it would call, already holds and would cost, with nothing sent.

The method's own work runs on an engine that sends nothing (`Engine(planner=...)`): a
call the store holds is answered from it, as in the run; any other is counted and
answered with a placeholder of the expected length, so the calls built from it (a
judge reading an evaluee's reply) are counted and sized as in the run. The placeholder
is filler text that reads as no verdict (with even label scores where the request asks
for them), so calls made only when a reply cannot be read (repairs) or when a first
jury is unsure (a cascade's escalation) are each made once, and counted apart: the most
the run can make (ALLOWANCE_ROLES). Method code knows a plan in three places only,
where a placeholder cannot stand for a reply: an adaptive design's rounds are sized
without verdicts (peer.run._adaptive), a paraphrase is taken as accepted
(bounds.measure._paraphrased), and no python grader runs (contracts.grading.grade).

The estimates, per model (documented for users in docs/cost.md):
- input tokens: the request's characters (its canonical JSON, as the store keys it)
  times the model's own input tokens per character over its stored calls where it has
  at least HISTORY of them, else 1/CHARS_PER_TOKEN; a range of +-10% with history,
  -25%/+50% without (tokenizers and languages differ).
- output tokens: per model and max_tokens, the mean of its stored calls with that cap
  where it has at least HISTORY, the range two standard errors of the total and 10%
  either side; else the cap itself (max_tokens, else DEFAULT_OUTPUT_TOKENS), the range
  a quarter of it to all of it. A call without max_tokens has no upper bound: the plan
  counts them (`uncapped`). An in-process model scoring `choices` replies with one of
  them: the longest, at four characters a token.
- dollars: the price table on the low, planned and high tokens; unknown without a price.
  Calls sent through a provider's batch API (the batch-api backend) at its batch price.
- time: each stream of calls (a stage: evaluees, then judges) lasts as long as its
  slowest endpoint, calls x mean latency / concurrency, or what its rpm and tpm allow
  where slower; the latency is the model's own from the store, else ASSUMED_LATENCY_S.
  A stage with batched calls lasts what a batch does: typically within the hour, at
  most the 24-hour window (models/batch_apis.py).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from eigenjury.engine.limits import EndpointLimits
from eigenjury.models.batch_apis import PRICE_FACTOR, TYPICAL_S, WINDOW_S
from eigenjury.models.prices import Price, PriceTable
from eigenjury.models.spec import ModelSpec
from eigenjury.models.types import ChatRequest, Completion, Usage

DEFAULT_OUTPUT_TOKENS = 256  # a request without max_tokens: what the budget assumes too
CHARS_PER_TOKEN = 4.0  # the proxy without history: about four characters a token (English)
HISTORY = 20  # stored calls of a model (and cap) before its own figures are used
# seconds a call of a model with no stored calls is assumed to take: a served model's
# (a hosted API's reply of a few hundred tokens), an in-process small model's, a script's
ASSUMED_LATENCY_S = {"served": 5.0, "local": 1.0, "scripted": 0.0}
FILLER = "plan "  # placeholder reply text: reads as no verdict and no grade
# Roles whose calls depend on the replies: made only when a reply cannot be read or a
# first jury is unsure. The plan counts them apart, as the most the run can make.
ALLOWANCE_ROLES = frozenset({"repair", "juror-retry", "escalation"})


@dataclass(frozen=True)
class Spread:
    """A planned figure with its low and high ends."""

    low: float
    point: float
    high: float

    def __add__(self, other: Spread) -> Spread:
        return Spread(self.low + other.low, self.point + other.point, self.high + other.high)

    def scaled(self, low: float, high: float) -> Spread:
        return Spread(self.low * low, self.point, self.high * high)


ZERO = Spread(0.0, 0.0, 0.0)


@dataclass
class _Output:
    """A model's stored replies at one max_tokens: how many, and their tokens."""

    calls: int = 0
    chars: int = 0
    tokens: int = 0
    squares: float = 0.0

    @property
    def mean(self) -> float:
        return self.tokens / self.calls

    @property
    def sd(self) -> float:
        mean = self.mean
        return math.sqrt(max(0.0, self.squares / self.calls - mean * mean))


@dataclass
class ModelHistory:
    """What a model's stored successes used (Store.history), by max_tokens."""

    calls: int = 0
    request_chars: int = 0
    input_tokens: int = 0
    latency_s: float = 0.0
    timed: int = 0  # calls with a latency (a batched call has none: 0)
    outputs: dict[int | None, _Output] = field(default_factory=dict)

    @property
    def tokens_per_char(self) -> float | None:
        if self.calls < HISTORY or not self.request_chars:
            return None
        return self.input_tokens / self.request_chars

    @property
    def latency(self) -> float | None:
        return self.latency_s / self.timed if self.timed >= HISTORY else None

    def output(self, cap: int | None) -> _Output | None:
        found = self.outputs.get(cap)
        return found if found is not None and found.calls >= HISTORY and found.tokens else None

    def chars_per_output_token(self) -> float:
        calls = sum(o.calls for o in self.outputs.values())
        tokens = sum(o.tokens for o in self.outputs.values())
        chars = sum(o.chars for o in self.outputs.values())
        return chars / tokens if calls >= HISTORY and tokens and chars else CHARS_PER_TOKEN


def history_of(rows: Iterable[Sequence[Any]]) -> ModelHistory:
    """One model's Store.history rows as its ModelHistory."""
    h = ModelHistory()
    for row in rows:
        _, cap, calls, req_chars, tokens_in, text_chars, tokens_out, squares, latency, timed = row
        h.calls += calls
        h.request_chars += req_chars or 0
        h.input_tokens += tokens_in or 0
        h.latency_s += latency or 0.0
        h.timed += timed or 0
        cap = cap if isinstance(cap, int) else None
        h.outputs[cap] = _Output(calls, text_chars or 0, tokens_out or 0, float(squares or 0))
    return h


@dataclass
class _Tally:
    """One model in one role: calls, those the store holds, and the rest's sizes."""

    calls: int = 0
    stored: int = 0
    request_chars: int = 0  # of the calls to send
    # calls to send per max_tokens; an in-process model's with choices apart (it scores
    # the choices, so its reply is one of them)
    by_cap: dict[int | None, int] = field(default_factory=dict)
    choice_tokens: float = 0.0

    @property
    def to_send(self) -> int:
        return self.calls - self.stored


@dataclass
class _Stage:
    """One stream of calls: per model, the calls to send and their planned tokens."""

    calls: dict[ModelSpec, int] = field(default_factory=dict)
    tokens: dict[ModelSpec, float] = field(default_factory=dict)


class Planner:
    """Counts a run's calls as its engine meets them and answers those not stored with
    placeholders; `record()` is the plan.

    Parameters: history (what the store says a model used, read once per model);
    prices; limits_for (the limits of an endpoint); endpoint_of (the endpoint of a spec);
    batched (whether a model's calls go through its provider's batch API).
    """

    def __init__(
        self,
        history: Callable[[ModelSpec], ModelHistory],
        prices: PriceTable,
        *,
        limits_for: Callable[[str], EndpointLimits],
        endpoint_of: Callable[[ModelSpec], str],
        batched: Callable[[ModelSpec], bool] = lambda spec: False,
    ) -> None:
        self.read_history = history
        self.batched = batched
        self.histories: dict[ModelSpec, ModelHistory] = {}
        self.prices = prices
        self.limits_for = limits_for
        self.endpoint_of = endpoint_of
        self.tallies: dict[tuple[ModelSpec, str], _Tally] = {}
        self.stages: list[_Stage] = []
        self.seen: set[int] = set()  # keys planned in this run (a prefix of each)

    def stage(self) -> None:
        """A new stream of calls begins."""
        self.stages.append(_Stage())

    def _tally(self, spec: ModelSpec, role: str | None) -> _Tally:
        key = (spec, role or "-")
        tally = self.tallies.get(key)
        if tally is None:
            tally = self.tallies[key] = _Tally()
        return tally

    def _history(self, spec: ModelSpec) -> ModelHistory:
        history = self.histories.get(spec)
        if history is None:
            history = self.histories[spec] = self.read_history(spec)
        return history

    def stored(self, spec: ModelSpec, role: str | None) -> None:
        """A call the store (or an earlier identical call of the run) answers."""
        tally = self._tally(spec, role)
        tally.calls += 1
        tally.stored += 1

    def seen_before(self, key: str) -> bool:
        """Whether the run already planned this key (a rerun of it would be a hit);
        marks it planned."""
        short = int(key[:16], 16)
        if short in self.seen:
            return True
        self.seen.add(short)
        return False

    def planned(
        self, spec: ModelSpec, role: str | None, request: ChatRequest, chars: int, key: str
    ) -> Completion:
        """Count a call to send (its request `chars` characters long) and answer it with
        a placeholder of the planned length."""
        tally = self._tally(spec, role)
        tally.calls += 1
        tally.request_chars += chars
        if request.choices and not spec.served:  # option scoring: the reply is a choice
            tally.choice_tokens += _choice_tokens(request.choices)
        else:
            tally.by_cap[request.max_tokens] = tally.by_cap.get(request.max_tokens, 0) + 1
        completion = self.placeholder(spec, request, chars, key)
        if (role or "-") not in ALLOWANCE_ROLES:
            if not self.stages:
                self.stage()
            stage = self.stages[-1]
            stage.calls[spec] = stage.calls.get(spec, 0) + 1
            stage.tokens[spec] = stage.tokens.get(spec, 0.0) + completion.usage.total
        return completion

    def placeholder(
        self, spec: ModelSpec, request: ChatRequest, chars: int, key: str
    ) -> Completion:
        """What the planning engine answers a call with: filler of the planned length,
        with the planned tokens and cost. It begins with the call's key, so no two
        calls' placeholders are alike (two evaluees' identical placeholders would make
        their comparisons one call)."""
        history = self._history(spec)
        rate = history.tokens_per_char or 1 / CHARS_PER_TOKEN
        choices = None if spec.served else request.choices
        output = _output_tokens(history, request.max_tokens, 1, choices).point
        usage = Usage(round(chars * rate), round(output))
        price = self._price(spec)
        return Completion(
            text=_placeholder(key, output * history.chars_per_output_token()),
            finish_reason="stop",
            usage=usage,
            cost_usd=None if price is None else price.cost(usage),
            choice_logprobs={c: -math.log(len(request.choices)) for c in request.choices}
            if request.choices and request.logprobs
            else None,
        )

    def _estimates(self) -> list[tuple[ModelSpec, dict[str, Any], Spread | None]]:
        """Each model and role's row of the plan, sorted by model then role, with its
        model and its cost as a spread (None: no known price)."""
        out = []
        ordered = sorted(self.tallies.items(), key=lambda kv: (str(kv[0][0]), kv[0][1]))
        for (spec, role), tally in ordered:
            history = self._history(spec)
            inputs = _input_tokens(history, tally.request_chars)
            outputs = _outputs(history, tally)
            cost = self._spread_cost(spec, inputs, outputs)
            row = {
                "model": str(spec),
                "role": role,
                "allowance": role in ALLOWANCE_ROLES,
                "calls": tally.calls,
                "stored": tally.stored,
                "to_send": tally.to_send,
                "input_tokens": _dump(inputs),
                "output_tokens": _dump(outputs),
                "cost_usd": None if cost is None else _dump(cost),
                "from_history": history.calls >= HISTORY,
                "uncapped": tally.by_cap.get(None, 0),
            }
            out.append((spec, row, cost))
        return out

    def record(self) -> dict[str, Any]:
        """The plan as plain data (a `records.PlanRecord`)."""
        estimates = self._estimates()
        by_model: dict[ModelSpec, list[dict[str, Any]]] = {}
        for spec, row, _ in estimates:
            by_model.setdefault(spec, []).append(row)
        rows = [row for _, row, _ in estimates]
        return {
            "by_model_and_role": rows,
            "models": [self._model(spec, mine) for spec, mine in by_model.items()],
            "total": _total(rows),
            "time_s": _dump(self._time()),
        }

    def model_costs(self) -> dict[ModelSpec, Spread | None]:
        """Each model's dollars for its certain calls to send (None: no known price)."""
        costs: dict[ModelSpec, Spread | None] = {}
        for spec, row, cost in self._estimates():
            if not row["allowance"]:
                before = costs.get(spec, ZERO)
                costs[spec] = None if cost is None or before is None else before + cost
        return costs

    def _price(self, spec: ModelSpec) -> _Priced | None:
        price = self.prices.lookup(spec)
        if price is None:
            return None
        return _Priced(price, PRICE_FACTOR if self.batched(spec) else 1.0)

    def _spread_cost(self, spec: ModelSpec, inputs: Spread, outputs: Spread) -> Spread | None:
        price = self._price(spec)
        if price is None:
            return None
        return Spread(
            *(
                price.cost(Usage(round(i), round(o)))
                for i, o in zip(
                    (inputs.low, inputs.point, inputs.high),
                    (outputs.low, outputs.point, outputs.high),
                    strict=True,
                )
            )
        )

    def _model(self, spec: ModelSpec, rows: list[dict[str, Any]]) -> dict[str, Any]:
        """One model: what it would cost, with and without the allowances, and what its
        estimate rests on."""
        history = self._history(spec)
        return {
            "model": str(spec),
            **_total(rows),
            "history_calls": history.calls,
            "priced": self.prices.lookup(spec) is not None,
            "latency_s": history.latency,
            "batched": self.batched(spec),
        }

    def _time(self) -> Spread:
        """Seconds: each stage as long as its slowest endpoint (see the module's note);
        the high end with every call at the slower of its own and the assumed latency."""
        point = high = 0.0
        for stage in self.stages:
            if any(self.batched(spec) for spec in stage.calls):
                point += TYPICAL_S
                high += WINDOW_S
                continue
            by_endpoint: dict[str, list[tuple[ModelSpec, int, float]]] = {}
            for spec, n in stage.calls.items():
                by_endpoint.setdefault(self.endpoint_of(spec), []).append(
                    (spec, n, stage.tokens[spec])
                )
            spans = [self._span(endpoint, calls) for endpoint, calls in by_endpoint.items()]
            point += max((s[0] for s in spans), default=0.0)
            high += max((s[1] for s in spans), default=0.0)
        return Spread(point, point, high)

    def _span(
        self, endpoint: str, calls: list[tuple[ModelSpec, int, float]]
    ) -> tuple[float, float]:
        limits = self.limits_for(endpoint)
        n = sum(c[1] for c in calls)
        tokens = sum(c[2] for c in calls)
        floor = 0.0
        if limits.rpm:
            floor = max(floor, 60.0 * n / limits.rpm)
        if limits.tpm:
            floor = max(floor, 60.0 * tokens / limits.tpm)
        work = slow = 0.0
        for spec, count, _ in calls:
            latency = self._history(spec).latency
            assumed = ASSUMED_LATENCY_S.get(spec.provider, ASSUMED_LATENCY_S["served"])
            work += count * (latency if latency is not None else assumed)
            slow += count * max(latency or 0.0, assumed)
        concurrency = limits.concurrency
        return max(floor, work / concurrency), max(floor, slow / concurrency)


@dataclass(frozen=True)
class _Priced:
    """A model's price as its calls would pay it (a batch API's share of the table's)."""

    price: Price
    factor: float

    def cost(self, usage: Usage) -> float:
        return self.price.cost(usage) * self.factor


def _input_tokens(history: ModelHistory, chars: int) -> Spread:
    rate = history.tokens_per_char
    if rate is None:
        proxy = chars / CHARS_PER_TOKEN
        return Spread(proxy, proxy, proxy).scaled(0.75, 1.5)
    return Spread(chars * rate, chars * rate, chars * rate).scaled(0.9, 1.1)


def _choice_tokens(choices: tuple[str, ...]) -> float:
    return max(1.0, max(len(c) for c in choices) / CHARS_PER_TOKEN)


def _outputs(history: ModelHistory, tally: _Tally) -> Spread:
    """The output tokens of a tally's calls to send: option scoring at the longest
    choice, the rest by their caps."""
    capped = sum((_output_tokens(history, cap, n) for cap, n in tally.by_cap.items()), ZERO)
    return capped + Spread(tally.choice_tokens, tally.choice_tokens, tally.choice_tokens)


def _output_tokens(
    history: ModelHistory, cap: int | None, n: int, choices: tuple[str, ...] | None = None
) -> Spread:
    """The output tokens of `n` calls at max_tokens `cap` (see the module's note); a call
    scored over `choices` (an in-process model's) replies with one of them."""
    if choices:
        each = _choice_tokens(choices)
        return Spread(n * each, n * each, n * each)
    limit = cap if cap is not None else DEFAULT_OUTPUT_TOKENS
    seen = history.output(cap)
    if seen is None:
        return Spread(n * limit / 4, n * limit, n * limit)
    point = n * seen.mean
    error = 2 * seen.sd * (math.sqrt(n) + n / math.sqrt(seen.calls))
    high = (point + error) * 1.1
    if cap is not None:
        high = min(high, n * cap)
    return Spread(max(0.0, (point - error) * 0.9), point, max(high, point))


_LETTERS = str.maketrans("0123456789abcdef", "ghijklmnopqrstuv")


def _placeholder(key: str, chars: float) -> str:
    """Filler of about `chars` characters that begins with the call's key, spelt in
    letters: a placeholder holds no number, so no grader reads one in it."""
    head = key[:16].translate(_LETTERS)
    n = max(len(head) + 1, round(chars))
    return (head + " " + FILLER * (n // len(FILLER) + 1))[:n].rstrip()


def _dump(spread: Spread) -> dict[str, float]:
    return {"low": spread.low, "planned": spread.point, "high": spread.high}


def _total(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Calls, and the cost of the certain calls and with the allowances, of `rows`."""

    def add(which: list[dict[str, Any]], what: str) -> dict[str, float] | None:
        values = [row[what] for row in which]
        if any(v is None for v in values):
            return None
        return {k: sum(v[k] for v in values) for k in ("low", "planned", "high")}

    certain = [row for row in rows if not row["allowance"]]
    allowed = [row for row in rows if row["allowance"]]
    cost = add(certain, "cost_usd")
    extra = add(allowed, "cost_usd")
    return {
        "calls": sum(row["calls"] for row in certain),
        "stored": sum(row["stored"] for row in certain),
        "to_send": sum(row["to_send"] for row in certain),
        "allowance_calls": sum(row["to_send"] for row in allowed),
        "input_tokens": add(certain, "input_tokens"),
        "output_tokens": add(certain, "output_tokens"),
        "cost_usd": cost,
        # the most it can cost: every allowance used, at the high end
        "cost_usd_most": None if cost is None or extra is None else cost["high"] + extra["high"],
    }
