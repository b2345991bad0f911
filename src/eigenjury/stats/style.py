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

from dataclasses import dataclass

import numpy as np

from eigenjury.stats.verdicts import DataError, FloatArray, IntArray, ReplyFeatures

# A feature whose normalised difference varies less than this (standard deviation)
# carries no style signal: its coefficient would not be identified.
_CONSTANT = 1e-9
# A feature whose differences vary less than this share of their variance between
# verdicts on the same pair of evaluees is a property of the pair: its effect is theirs.
_CONFOUNDED = 1e-8

# Up to this many (lower, higher) evaluee pairs, a pair's index is computed, not sorted for.
_DENSE_PAIRS = 1_000_000

CONSTANT = "the same difference in every verdict"
PER_PAIR = "one difference per pair of evaluees: its effect cannot be told from theirs"


@dataclass(frozen=True)
class StyleDesign:
    """The style covariates of a verdict table: the features kept, each one's standard
    deviation of normalised difference (`scale`), and per row the differences divided
    by it (`z`, rows x features). `dropped` gives each feature left out and why."""

    names: tuple[str, ...]
    scale: FloatArray
    z: FloatArray
    dropped: dict[str, str]


def normalised_difference(first: FloatArray, second: FloatArray) -> FloatArray:
    """(a - b) / (|a| + |b|), 0 where both are 0. Where |a| + |b| overflows (finite
    values near the float limit, 1e308 and -1e308) both are first divided by the larger
    of |a| and |b|, which leaves the ratio unchanged, so they give their difference,
    not NaN."""
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
    first: IntArray,
    second: IntArray,
    n_models: int,
) -> StyleDesign:
    """The covariates of `features` for rows (evaluees `first` and `second`) weighted by
    `weight`. Left out (`dropped`), as no fit could tell their effect apart: a feature
    whose difference is the same in every verdict (no markdown in any reply), and one
    whose difference never varies between verdicts on the same two evaluees (every
    reply of a model equally long, or one scenario only): its effect is then
    identified by nothing but the model's form, and would be taken from the evaluees'
    own scores."""
    unknown = ~(np.isfinite(features.first) & np.isfinite(features.second))
    if unknown.any():
        f = int(np.flatnonzero(unknown.any(axis=0))[0])
        raise DataError(
            f"style feature '{features.names[f]}' is unknown for "
            f"{int(unknown[:, f].sum()):,} of {len(features):,} verdicts (a reply without its "
            "text or value); every verdict needs it to control for it: give the values, or "
            "leave the feature out of style control"
        )
    diff = normalised_difference(features.first, features.second)
    total = float(weight.sum())
    mean = weight @ diff / total
    scale = np.sqrt(np.maximum(weight @ (diff - mean) ** 2 / total, 0.0))
    constant = scale <= _CONSTANT
    per_pair = ~constant & (_within_pairs(diff, weight, first, second, n_models) < _CONFOUNDED)
    kept = ~(constant | per_pair)
    names = tuple(n for n, k in zip(features.names, kept, strict=True) if k)
    dropped = {
        name: CONSTANT if constant[f] else PER_PAIR
        for f, name in enumerate(features.names)
        if not kept[f]
    }
    return StyleDesign(names, scale[kept], diff[:, kept] / scale[kept], dropped)


def _within_pairs(
    diff: FloatArray, weight: FloatArray, first: IntArray, second: IntArray, n_models: int
) -> FloatArray:
    """Per feature, the share of the differences' weighted sum of squares left around
    their mean per unordered pair of evaluees (a difference seen from the pair's lower
    index, so the two orders agree): the total sum of squares less the pairs' own. The
    subtraction loses about 1e-16 of the total, far below the 1e-8 share that marks a
    feature as the pair's."""
    low, high = np.minimum(first, second), np.maximum(first, second)
    if n_models**2 <= _DENSE_PAIRS:
        pair, pairs = low * n_models + high, n_models**2
    else:
        _, pair = np.unique(low * n_models + high, return_inverse=True)
        pair, pairs = pair.ravel(), int(pair.max()) + 1
    seen = np.where(first == low, 1.0, -1.0)[:, None] * diff
    total = np.bincount(pair, weight, pairs)
    sums = np.stack([np.bincount(pair, weight * seen[:, f], pairs) for f in range(diff.shape[1])])
    between = (sums**2) @ (1.0 / np.maximum(total, 1e-300))
    spread = weight @ seen**2
    residual = np.maximum(spread - between, 0.0)
    return np.where(spread > 0, residual / np.where(spread > 0, spread, 1.0), 1.0)
