"""What a run did and cost: calls, cache hits, errors, tokens, money and latency,
per model and per role (evaluee, judge, juror, ...)."""

from __future__ import annotations

import random
from array import array
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from eigenjury.models.types import Completion


class Latencies:
    """Call latencies in bounded memory, for a run of any size: every value up to KEPT
    calls (exact percentiles), then a uniform random sample of KEPT of them (reservoir
    sampling, seeded: the same run reports the same figures); the mean is always exact."""

    KEPT = 65_536

    def __init__(self, seed: int = 0) -> None:
        self.count = 0
        self.total = 0.0
        self._kept = array("d")
        self._seed = seed
        self._rng: random.Random | None = None  # made once the sample is full (seeding costs)

    def add(self, value: float) -> None:
        self.count += 1
        self.total += value
        if len(self._kept) < self.KEPT:
            self._kept.append(value)
            return
        if self._rng is None:
            self._rng = random.Random(self._seed)
        slot = self._rng.randrange(self.count)
        if slot < self.KEPT:
            self._kept[slot] = value

    def mean(self) -> float:
        return self.total / self.count if self.count else 0.0

    def sample(self) -> np.ndarray[Any, np.dtype[np.float64]]:
        return np.frombuffer(self._kept, dtype=np.float64)


@dataclass
class Tally:
    calls: int = 0
    cached: int = 0
    errors: Counter[str] = field(default_factory=Counter)
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    unpriced: int = 0  # completions of models with no known price
    latencies: Latencies = field(default_factory=lambda: Latencies())

    def add(self, completion: Completion | None, error_kind: str | None, cached: bool) -> None:
        self.calls += 1
        self.cached += cached
        if completion is None:
            self.errors[error_kind or "error"] += 1
            return
        self.input_tokens += completion.usage.input_tokens
        self.output_tokens += completion.usage.output_tokens
        if completion.cost_usd is None:
            self.unpriced += 1
        else:
            self.cost_usd += completion.cost_usd
        if not cached and completion.latency_s > 0:  # (0: none, as a batched call has)
            self.latencies.add(completion.latency_s)

    def record(self) -> dict[str, Any]:
        lat = self.latencies.sample()
        return {
            "calls": self.calls,
            "cached": self.cached,
            "errors": dict(self.errors),
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "cost_usd": None if self.unpriced and not self.cost_usd else round(self.cost_usd, 6),
            "cost_complete": self.unpriced == 0,
            "latency_s": {
                "mean": round(self.latencies.mean(), 4),
                "p50": round(float(np.percentile(lat, 50)), 4),
                "p95": round(float(np.percentile(lat, 95)), 4),
            }
            if lat.size
            else None,
        }


class Accounting:
    """Tallies per (model spec, role); `total` sums them all."""

    def __init__(self) -> None:
        self.by_key: dict[tuple[str, str], Tally] = {}
        self.total = Tally()

    def add(
        self,
        spec: str,
        role: str | None,
        completion: Completion | None,
        error_kind: str | None,
        cached: bool,
    ) -> None:
        key = (spec, role or "-")
        tally = self.by_key.get(key)
        if tally is None:
            tally = self.by_key[key] = Tally()
        tally.add(completion, error_kind, cached)
        self.total.add(completion, error_kind, cached)

    def record(self) -> dict[str, Any]:
        return {
            "total": self.total.record(),
            "by_model_and_role": [
                {"model": spec, "role": role, **tally.record()}
                for (spec, role), tally in sorted(self.by_key.items())
            ],
        }
