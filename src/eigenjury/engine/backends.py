"""Where calls (and bootstrap rounds) run: here ("local", the default) or on a Ray
cluster ("ray", the `ray` extra), chosen by name in configs and on the command line."""

from __future__ import annotations

from typing import TYPE_CHECKING

from eigenjury.engine.engine import Backend
from eigenjury.errors import InputError

if TYPE_CHECKING:  # the statistics (scipy) load only where a bootstrap runs
    from eigenjury.stats.bootstrap import RoundMap

BACKENDS = ("local", "ray")


def connect(name: str, address: str | None = None) -> tuple[Backend | None, RoundMap | None]:
    """The engine backend and the bootstrap-round runner for `name` (None, None: local).
    `address`: a Ray cluster to join; none starts a local one."""
    if name == "local":
        if address:
            raise InputError("a Ray address was given but the backend is local; add --backend ray")
        return None, None
    if name != "ray":
        raise InputError(f"unknown backend '{name}'; use one of {', '.join(BACKENDS)}")
    try:
        from eigenjury.integrations import ray_backend
    except ImportError:
        raise InputError(
            "the ray backend needs Ray: pip install 'eigenjury[ray]'", field="backend"
        ) from None
    backend: Backend = ray_backend.RayBackend(address)
    return backend, ray_backend.map_rounds
