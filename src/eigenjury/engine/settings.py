"""The engine's settings: one model with one set of defaults, whether they come from a
rank config's `engine:` section or from a command's options. Light on purpose (pydantic
only): every command builds its options from it at start-up."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, Field, field_validator

if TYPE_CHECKING:
    from eigenjury.models.prices import PriceTable

# Before eigenjury 0.3.3 the shared store was one per working directory, so the same
# config run from another folder paid again; such a store is absorbed into the per-user
# one (engine.store.adopt_directory_store).
DIRECTORY_STORE = Path(".eigenjury/store.sqlite")
MIN_PER_MINUTE = 1 / 60  # the lowest rate accepted: one request (or token) an hour
DEFAULT_STORE_SAID = "one per user: store.sqlite in $EIGENJURY_DATA_DIR or the user data folder"


def default_store() -> Path:
    """The store every command shares unless told otherwise: one per user, in
    $EIGENJURY_DATA_DIR, else the platform's user data folder (platformdirs:
    ~/.local/share/eigenjury on Linux, ~/Library/Application Support/eigenjury on
    macOS, %LOCALAPPDATA%\\eigenjury on Windows)."""
    explicit = os.environ.get("EIGENJURY_DATA_DIR")
    if explicit:
        return Path(explicit).expanduser() / "store.sqlite"
    import platformdirs

    return platformdirs.user_data_path("eigenjury", appauthor=False) / "store.sqlite"


class EngineSettings(BaseModel):
    """The engine's knobs. Relative `store` and `prices` paths are resolved against
    `base` (a config file's folder; the working directory for command options)."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    store: str | None = Field(
        None, description=f"SQLite store of call results (default {DEFAULT_STORE_SAID})"
    )
    concurrency: int = Field(16, ge=1, description="calls in flight per endpoint; lower on 429")
    rpm: float | None = Field(None, description="requests per minute per endpoint")
    tpm: float | None = Field(None, description="tokens per minute per endpoint")
    timeout_s: float = Field(120.0, gt=0, description="seconds per attempt")
    max_attempts: int = Field(6, ge=1)
    budget_usd: float | None = Field(None, ge=0)
    budget_tokens: int | None = Field(None, gt=0)  # 0 would stop the run before any call
    budget_usd_by_model: dict[str, float] = Field(
        default_factory=dict,
        description="per model spec (as written for the run), the most its calls may cost",
    )
    prices: str | None = Field(None, description="price table (TOML or JSON)")
    retry_errors: bool = True  # try again calls stored as errors
    backend: str = "local"  # or "batch-api", or a registered backend such as "ray"
    ray_address: str | None = None  # a cluster to join; none starts a local one
    batch_poll_s: float = Field(
        60.0, gt=0, description="the longest wait between two polls of a provider batch"
    )

    @field_validator("budget_usd_by_model")
    @classmethod
    def _model_budgets(cls, budgets: dict[str, float]) -> dict[str, float]:
        for spec, usd in budgets.items():
            if usd < 0:
                raise ValueError(f"the budget of {spec} must be 0 or more US dollars, got {usd:g}")
        return budgets

    @property
    def budgeted(self) -> bool:
        """Whether any budget is set (a run then plans first, and refuses one that would
        exceed it unless told to go)."""
        return (
            self.budget_usd is not None
            or self.budget_tokens is not None
            or bool(self.budget_usd_by_model)
        )

    @field_validator("rpm", "tpm")
    @classmethod
    def _rate(cls, rate: float | None) -> float | None:
        if rate is not None and rate < MIN_PER_MINUTE:  # hours per call, silently
            raise ValueError(
                f"must be at least 1/60 (one an hour), got {rate:g}; leave it out for no limit"
            )
        return rate

    def store_path(self, base: Path | None = None) -> Path:
        if self.store is None:
            return default_store()
        return (base or Path()) / Path(self.store).expanduser()

    def price_table(self, base: Path | None = None) -> PriceTable:
        from eigenjury.models.prices import PriceTable

        return PriceTable.from_file((base or Path()) / self.prices) if self.prices else PriceTable()
