"""The settings of a peer-ranking fit: one model for a rank config's `fit:` section and
the `fit` command's options, so the two always offer the same fit. A config key is its
option's name with underscores (`--exclude-self`: `exclude_self`); a setting left
unset (None) is the estimator's default. peer.fitting.peer_ranking builds the estimator
from them. Light on purpose (pydantic only): the command line imports it to declare
`fit`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

if TYPE_CHECKING:
    from eigenjury.stats.verdicts import VerdictTable

Seed = Annotated[int, Field(ge=0)]  # numpy's generators refuse negative seeds
Scale = Annotated[float, Field(gt=0.0)]
# Elo values near 1e9 are 1.2e-7 points apart in floating point: a hundred thousand times
# finer than the 0.01 points within which models tie. (Near 1e21 they are 131,072 apart.)
MAX_ANCHOR_VALUE = 1e9
# The estimator's names for the settings it may refuse, where they differ from ours.
_ESTIMATOR_NAMES = {"external_weights": "external_weight"}


def anchor_value_problem(value: float, given: str | None = None) -> str | None:
    """Why `value` (`given` as the user wrote it) cannot be the anchor's Elo (None: it
    can): floating-point numbers far from 0 are so far apart that every difference
    between models would vanish, and all would tie."""
    if abs(value) <= MAX_ANCHOR_VALUE:
        return None
    import numpy as np

    from eigenjury.stats.elo import ELO_TOLERANCE

    spacing = float(np.spacing(abs(value)))
    shown = given or f"{value:g}"
    return (
        f"{shown} is too large an Elo: floating-point numbers that large are {spacing:.3g} "
        f"apart, so Elo differences below that vanish (models within {ELO_TOLERANCE:g} "
        f"points tie); use a value from {-MAX_ANCHOR_VALUE:g} to {MAX_ANCHOR_VALUE:g}"
    )


def setting_key(setting: str) -> str:
    """The FitSettings key of an estimator setting a SettingError names."""
    return _ESTIMATOR_NAMES.get(setting, setting)


class FitSettings(BaseModel):
    """How verdicts are fitted. `style`: the reply features held equal (style control):
    "default" (those of length, headers, lists and bold the verdicts carry), "none", or
    a list. `prior`: the standard deviations (consensus, judge, self-preference) of the
    prior on the judges' scores, "none" for maximum likelihood, unset for the
    estimator's. `external_weight`: weights of external judges in the pre-trust.
    `exclude_judges`: judges whose verdicts are left out (they stay evaluees).
    `interval`: the intervals, "percentile" or "bca" from the bootstrap, or "sandwich"
    (PeerRanking's `interval`).
    `jobs`: processes for the bootstrap (unset: all cores). `cv`: scenario folds for a
    held-out log-likelihood (0: none). `strong_weight`: how many verdicts a strong graded
    verdict (A>>B, B>>A) counts as (Arena-Hard's 3); the verdicts keep what was said."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    dim: int = Field(2, ge=1)
    bootstrap: int = Field(200, ge=0)
    ci: float = Field(0.95, gt=0.0, lt=1.0)
    interval: Literal["percentile", "bca", "sandwich"] = "percentile"
    seed: Seed = 0
    exclude_self: bool = False
    exclude_judges: list[str] | None = None
    self_preference: bool = True
    prior: tuple[Scale, Scale, Scale] | Literal["none"] | None = None
    position_bias: bool = True
    style: Literal["default", "none"] | list[str] = "default"
    style_per_judge: bool = False
    l2: float | None = Field(None, ge=0.0)
    restarts: int | None = Field(None, ge=1)
    damping: float | None = Field(None, ge=0.0, le=1.0)
    external_weight: dict[str, Annotated[float, Field(ge=0.0)]] | None = None
    anchor: str = "uniform"
    anchor_value: float = 1500.0
    jobs: int | None = Field(None, ge=1)
    cv: int = Field(0, ge=0)
    strong_weight: float = Field(3.0, ge=0.0)

    @field_validator("style", mode="before")
    @classmethod
    def _known_features_once(cls, value: Any) -> Any:
        """One clear message for a value the union of types would report twice."""
        from eigenjury.reply_features import DEFAULT_FEATURES

        known = ", ".join(DEFAULT_FEATURES)
        if isinstance(value, list):
            twice = sorted({name for name in value if value.count(name) > 1})
            if twice:
                raise ValueError(f"{', '.join(twice)} named more than once")
        elif value not in ("default", "none"):
            raise ValueError(f"expected 'default', 'none' or a list of features ({known})")
        return value

    @field_validator("anchor_value")
    @classmethod
    def _resolved(cls, value: float) -> float:
        problem = anchor_value_problem(value)
        if problem:
            raise ValueError(problem)
        return value

    @field_validator("cv")
    @classmethod
    def _folds(cls, value: int) -> int:
        if value == 1:
            raise ValueError("1 fold leaves no scenarios to hold out; use 0 (none) or at least 2")
        return value

    @property
    def style_named(self) -> bool:
        """Whether the features were named (one left out as constant is worth a warning)."""
        return isinstance(self.style, list) and bool(self.style)

    def style_for(self, table: VerdictTable) -> tuple[str, ...] | None:
        """The features the fit of `table` holds equal (None: no style control)."""
        if self.style == "default":
            return table.features.names if table.features is not None else None
        return None if self.style == "none" else tuple(self.style)
