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
    """(a - b) / (|a| + |b|), 0 where both are 0. Both are first divided by the larger of
    |a| and |b| (which leaves the ratio unchanged), so that finite values near the float
    limit (1e308 and -1e308) give their difference, not an overflow to NaN."""
    largest = np.maximum(np.abs(first), np.abs(second))
    some = largest > 0
    with np.errstate(invalid="ignore", divide="ignore"):
        a, b = first / np.where(some, largest, 1.0), second / np.where(some, largest, 1.0)
        return np.where(some, (a - b) / (np.abs(a) + np.abs(b)), 0.0)


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
    index, so the two orders agree)."""
    low, high = np.minimum(first, second), np.maximum(first, second)
    _, pair = np.unique(low * n_models + high, return_inverse=True)
    pair = pair.ravel()
    seen = np.where(first == low, 1.0, -1.0)[:, None] * diff
    pairs = int(pair.max()) + 1
    total = np.bincount(pair, weight, pairs)
    mean = (
        np.stack(
            [np.bincount(pair, weight * seen[:, f], pairs) for f in range(diff.shape[1])], axis=1
        )
        / np.maximum(total, 1e-300)[:, None]
    )
    residual = weight @ (seen - mean[pair]) ** 2
    spread = weight @ seen**2
    return np.where(spread > 0, residual / np.where(spread > 0, spread, 1.0), 1.0)
