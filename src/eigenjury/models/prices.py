"""Prices per million tokens, and the cost of a call.

The built-in table covers a few common hosted models at list prices (USD, late 2025)
and is a starting point only: prices change, so pass your own table (TOML or JSON,
``"provider:model" = {input = 0.15, output = 0.60}``) to override or extend it. Local
and scripted models cost nothing; a model with no known price has cost None, and
reports say so rather than show zero.
"""

from __future__ import annotations

import math
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from eigenjury.errors import InputError
from eigenjury.files import TOO_DEEP, load_json, read_text
from eigenjury.models.spec import ModelSpec
from eigenjury.models.types import Usage


@dataclass(frozen=True)
class Price:
    """USD per million input and output tokens: finite and not negative, or costs and
    budget caps would mean nothing."""

    input_per_mtok: float
    output_per_mtok: float

    def __post_init__(self) -> None:
        for name in ("input_per_mtok", "output_per_mtok"):
            value = getattr(self, name)
            if not math.isfinite(value) or value < 0:
                raise ValueError(f"{name} must be a finite number of USD, 0 or more; got {value}")

    def cost(self, usage: Usage) -> float:
        return (
            usage.input_tokens * self.input_per_mtok + usage.output_tokens * self.output_per_mtok
        ) / 1e6


BUILTIN_PRICES: dict[str, Price] = {
    "openai:gpt-4o": Price(2.50, 10.00),
    "openai:gpt-4o-mini": Price(0.15, 0.60),
    "openai:gpt-4.1": Price(2.00, 8.00),
    "openai:gpt-4.1-mini": Price(0.40, 1.60),
    "openai:gpt-4.1-nano": Price(0.10, 0.40),
    "anthropic:claude-3-5-haiku": Price(0.80, 4.00),
    "anthropic:claude-sonnet-4": Price(3.00, 15.00),
    "anthropic:claude-opus-4": Price(15.00, 75.00),
}
FREE_PROVIDERS = ("local", "scripted")


_DATED = re.compile(r"-(\d{4}-\d{2}-\d{2}|\d{8}|latest)$")


class PriceTable:
    """Look up a model's price: exact "provider:model", else the same name without a
    date or "-latest" suffix (so gpt-4o-mini-2024-07-18 finds gpt-4o-mini)."""

    def __init__(self, prices: Mapping[str, Price] | None = None) -> None:
        self.prices: dict[str, Price] = dict(BUILTIN_PRICES if prices is None else prices)

    @classmethod
    def from_file(cls, path: str | Path, *, base: PriceTable | None = None) -> PriceTable:
        path = Path(path)
        text = read_text(path)
        if path.suffix.lower() == ".json":
            raw: Any = load_json(text, path)
        else:
            try:
                raw = tomllib.loads(text)
            except tomllib.TOMLDecodeError as exc:
                raise InputError(f"not a readable price table ({exc})", path=path) from None
            except RecursionError:
                raise InputError(TOO_DEEP, path=path) from None
        if not isinstance(raw, dict):
            raise InputError(
                "a price table maps 'provider:model' to {input, output} prices", path=path
            )
        table = PriceTable((base or cls()).prices)
        for name, entry in raw.items():
            table.prices[name] = _price_entry(entry, path, name)
        return table

    def lookup(self, spec: ModelSpec) -> Price | None:
        name = f"{spec.provider}:{spec.model}"
        price = self.prices.get(name) or self.prices.get(_DATED.sub("", name))
        if price is None and spec.provider in FREE_PROVIDERS:
            return Price(0.0, 0.0)
        return price

    def cost(self, spec: ModelSpec, usage: Usage) -> float | None:
        price = self.lookup(spec)
        return None if price is None else price.cost(usage)


def _price_entry(entry: Any, path: Path, name: str) -> Price:
    """One model's price from a table, or an InputError naming the file and the model."""
    try:
        prices = {side: float(entry[side]) for side in ("input", "output")}
    except (KeyError, TypeError, ValueError, OverflowError):
        raise InputError(
            f"price for '{name}' must give input and output USD per million tokens, "
            "e.g. {input = 0.15, output = 0.60}",
            path=path,
            field=name,
        ) from None
    for side, value in prices.items():
        if not math.isfinite(value) or value < 0:
            raise InputError(
                f"the {side} price must be a finite number of USD per million tokens, "
                f"0 or more; got {value}",
                path=path,
                field=name,
            )
    return Price(prices["input"], prices["output"])
