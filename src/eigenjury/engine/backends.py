"""Where calls, bootstrap rounds and simulation sweeps run: here ("local", the
default: the event loop, forked processes) or on a Ray cluster ("ray", the `ray`
extra: endpoint actors, Ray tasks), chosen by name in configs and on the command line."""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from typing import TYPE_CHECKING, Any, TypeVar

from eigenjury.engine.engine import Backend
from eigenjury.errors import InputError

if TYPE_CHECKING:  # the statistics (scipy) load only where a bootstrap runs
    from eigenjury.stats.bootstrap import RoundMap

BACKENDS = ("local", "ray")
T = TypeVar("T")
R = TypeVar("R")
TaskMap = Callable[[Callable[[Any], Any], Sequence[Any]], list[Any]]


def connect(name: str, address: str | None = None) -> tuple[Backend | None, RoundMap | None]:
    """The engine backend and the bootstrap-round runner for `name` (None, None: local).
    `address`: a Ray cluster to join; none starts a local one."""
    if name == "local":
        if address:
            raise InputError("a Ray address was given but the backend is local; add --backend ray")
        return None, None
    ray_backend = _ray(name)
    backend: Backend = ray_backend.RayBackend(address)
    return backend, ray_backend.map_rounds


def task_map(name: str, address: str | None = None) -> TaskMap:
    """`map(fn, items)` for a sweep of independent simulations: forked processes here,
    Ray tasks on a cluster. `fn` must be picklable (a module-level function)."""
    if name == "local":
        return _processes
    ray_backend = _ray(name)
    ray_backend.init(address)
    return ray_backend.map_tasks  # type: ignore[no-any-return]


def _processes(fn: Callable[[T], R], items: Sequence[T]) -> list[R]:
    context = get_context("fork" if sys.platform == "linux" else "spawn")
    with ProcessPoolExecutor(mp_context=context) as pool:
        return list(pool.map(fn, items))


def _ray(name: str) -> Any:
    if name != "ray":
        raise InputError(f"unknown backend '{name}'; use one of {', '.join(BACKENDS)}")
    try:
        from eigenjury.integrations import ray_backend
    except ImportError:
        raise InputError(
            "the ray backend needs Ray: pip install 'eigenjury[ray]'", field="backend"
        ) from None
    return ray_backend
