"""Style control: differences in reply style as covariates of the pairwise model.

Judges, human crowds too, prefer longer and more heavily formatted replies. Style
control (LMArena's method) lets each verdict's style difference enter the win logits
with its own coefficient, so that the models' scores are those with style held equal.

A feature's difference between the first and the second reply is normalised as
(a - b) / (|a| + |b|) (0 when both are 0): in [-1, 1], and the same whatever unit or
proxy measures the feature (tokens or characters). It is then divided by its standard
deviation over the verdicts, so a coefficient is the logit shift per standard deviation
of style difference. Unlike LMArena it is not centred: z = 0 must mean equal style,
which is where trust and Elo are read off, and the first slot's overall advantage is
the position bias's to take.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
from numpy.typing import NDArray

from eigenjury.stats.verdicts import (
    STYLE_IN_MEMORY,
    Codes,
    DataError,
    FloatArray,
    IntArray,
    ReplyFeatures,
    Values,
    chunks,
    tally,
)

# A feature whose normalised difference varies less than this (standard deviation)
# carries no style signal: its coefficient would not be identified.
_CONSTANT = 1e-9
# A feature whose differences vary less than this share of their variance between
# verdicts on the same pair of evaluees is a property of the pair: its effect is theirs.
_CONFOUNDED = 1e-8

# Up to this many (lower, higher) evaluee pairs, a pair's index is computed, not sorted for.
_DENSE_PAIRS = 1_000_000
# Rows per chunk of style_design's passes over the features.
_CHUNK = 1 << 20

CONSTANT = "the same difference in every verdict"
PER_PAIR = "one difference per pair of evaluees: its effect cannot be told from theirs"


@dataclass(frozen=True, eq=False)
class StyleDesign:
    """The style covariates of a verdict table: the features kept, each one's standard
    deviation of normalised difference (`scale`), and per row the differences divided
    by it (`z`, rows x features; `kept`, the same as features x rows), kept in memory up
    to STYLE_IN_MEMORY rows; beyond
    them (None) a row's are computed when asked for, from `features` (the kept
    features' values), so that they take no memory of their own. `dropped` gives each
    feature left out and why. Called with rows, it gives theirs as features x rows (a
    StyleSource)."""

    names: tuple[str, ...]
    scale: FloatArray
    dropped: dict[str, str]
    features: ReplyFeatures | None = None
    kept: FloatArray | None = None  # z's features x rows (z is its transpose)

    @property
    def z(self) -> FloatArray | None:
        return None if self.kept is None else self.kept.T

    @property
    def n_features(self) -> int:
        return len(self.names)

    def __call__(self, rows: slice | NDArray[np.integer]) -> FloatArray:
        if self.kept is not None:
            return self.kept[:, rows]
        assert self.features is not None
        first, second = self.features.first[rows], self.features.second[rows]
        return (normalised_difference(first, second) / self.scale).T


def normalised_difference(first: Values, second: Values) -> FloatArray:
    """(a - b) / (|a| + |b|), 0 where both are 0. Where |a| + |b| overflows (finite
    values near the float limit, 1e308 and -1e308) both are first divided by the larger
    of |a| and |b|, which leaves the ratio unchanged, so they give their difference,
    not NaN. Single-precision values (counts read compactly) are taken in double."""
    first = np.asarray(first, dtype=np.float64)
    second = np.asarray(second, dtype=np.float64)
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        total = np.abs(first) + np.abs(second)
        out = np.asarray((first - second) / total, dtype=np.float64)
    odd = ~(np.isfinite(out) & np.isfinite(total))
    if odd.any():
        a, b = np.broadcast_to(first, out.shape)[odd], np.broadcast_to(second, out.shape)[odd]
        largest = np.maximum(np.abs(a), np.abs(b))
        some = largest > 0
        with np.errstate(invalid="ignore", divide="ignore"):
            a, b = a / np.where(some, largest, 1.0), b / np.where(some, largest, 1.0)
            out[odd] = np.where(some, (a - b) / (np.abs(a) + np.abs(b)), 0.0)
    return out


def style_design(
    features: ReplyFeatures,
    weight: FloatArray,
    first: Codes,
    second: Codes,
    n_models: int,
) -> StyleDesign:
    """The covariates of `features` for rows (evaluees `first` and `second`) weighted by
    `weight`. Left out (`dropped`), as no fit could tell their effect apart: a feature
    whose difference is the same in every verdict (no markdown in any reply), and one
    whose difference never varies between verdicts on the same two evaluees (every
    reply of a model equally long, or one scenario only): its effect is then
    identified by nothing but the model's form, and would be taken from the evaluees'
    own scores. The rows are taken _CHUNK at a time, so that a table of 1e8 verdicts
    needs no whole-length temporaries."""
    n_rows, n_features = len(features), len(features.names)
    parts = chunks(n_rows, _CHUNK)

    def differences(rows: slice) -> FloatArray:
        return normalised_difference(features.first[rows], features.second[rows])

    unknown = np.zeros(n_features, dtype=np.int64)
    total, sums = 0.0, np.zeros(n_features)
    for rows in parts:
        unknown += np.sum(
            ~(np.isfinite(features.first[rows]) & np.isfinite(features.second[rows])), axis=0
        )
        w = weight[rows]
        total += float(w.sum())
        sums += w @ differences(rows)
    if unknown.any():
        f = int(np.flatnonzero(unknown)[0])
        raise DataError(
            f"style feature '{features.names[f]}' is unknown for {int(unknown[f]):,} of "
            f"{n_rows:,} verdicts (a reply without its text or value); every verdict needs "
            "it to control for it: give the values, or leave the feature out of style control"
        )
    mean = sums / total
    pairs = _Pairs(first, second, n_models, n_features, parts)
    squares = np.zeros(n_features)
    for rows in parts:
        diff = differences(rows)
        squares += weight[rows] @ (diff - mean) ** 2
        pairs.add(rows, diff, weight[rows])
    scale = np.sqrt(np.maximum(squares / total, 0.0))
    constant = scale <= _CONSTANT
    per_pair = ~constant & (pairs.within() < _CONFOUNDED)
    kept = ~(constant | per_pair)
    names = tuple(n for n, k in zip(features.names, kept, strict=True) if k)
    dropped = {
        name: CONSTANT if constant[f] else PER_PAIR
        for f, name in enumerate(features.names)
        if not kept[f]
    }
    used = features.only(names)
    design = StyleDesign(names, scale[kept], dropped, used)
    if n_rows > STYLE_IN_MEMORY:
        return design
    columns = np.empty((len(names), n_rows))
    for rows in parts:
        columns[:, rows] = design(rows)
    return replace(design, kept=columns)


class _Pairs:
    """Per feature, the share of the differences' weighted sum of squares left around
    their mean per unordered pair of evaluees (a difference seen from the pair's lower
    index, so the two orders agree): the total sum of squares less the pairs' own,
    summed chunk by chunk (`add`). The subtraction loses about 1e-16 of the total, far
    below the 1e-8 share that marks a feature as the pair's."""

    def __init__(
        self, first: Codes, second: Codes, n_models: int, n_features: int, parts: list[slice]
    ):
        self.first, self.second, self.n_models = first, second, n_models
        self.keys: IntArray | None = None
        if n_models**2 > _DENSE_PAIRS:  # the pairs present, in order
            found = [np.unique(self._key(rows)) for rows in parts]
            self.keys = np.unique(np.concatenate(found)) if found else np.zeros(0, np.int64)
        size = n_models**2 if self.keys is None else len(self.keys)
        self.total = np.zeros(size)
        self.sums = np.zeros((n_features, size))
        self.spread = np.zeros(n_features)

    def _key(self, rows: slice) -> IntArray:
        first = self.first[rows].astype(np.int64)
        second = self.second[rows].astype(np.int64)
        return np.minimum(first, second) * self.n_models + np.maximum(first, second)

    def add(self, rows: slice, diff: FloatArray, weight: FloatArray) -> None:
        key = self._key(rows)
        pair = key if self.keys is None else np.searchsorted(self.keys, key)
        size = len(self.total)
        seen = np.where(self.first[rows] <= self.second[rows], 1.0, -1.0)[:, None] * diff
        self.total += tally(pair, weight, size)
        self.sums += np.stack(
            [tally(pair, weight * seen[:, f], size) for f in range(len(self.spread))]
        )
        self.spread += weight @ seen**2

    def within(self) -> FloatArray:
        between = (self.sums**2) @ (1.0 / np.maximum(self.total, 1e-300))
        residual = np.maximum(self.spread - between, 0.0)
        spread = self.spread
        return np.asarray(
            np.where(spread > 0, residual / np.where(spread > 0, spread, 1.0), 1.0),
            dtype=np.float64,
        )
