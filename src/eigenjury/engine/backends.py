"""Where calls, bootstrap rounds and simulation sweeps run: here ("local", the
default: the event loop, forked processes), through the providers' batch APIs
("batch-api", engine/batch_api.py: OpenAI's and Anthropic's calls at half price within
24 hours, everything else here), or on a registered backend, chosen by name in configs
and on the command line.

A backend registers itself as an entry point in the `eigenjury.backends` group, naming
a module with `connect(address) -> (Backend, RoundMap)` and `task_map(address) ->
TaskMap`; the engine never imports one. The Ray backend (`integrations/ray_backend`,
the `ray` extra) is registered that way by eigenjury's own package metadata.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import cache
from typing import TYPE_CHECKING, Any, TypeVar

from eigenjury.errors import InputError

if TYPE_CHECKING:  # the engine and the statistics load only where they run
    from importlib.metadata import EntryPoint

    from eigenjury.engine.engine import Backend
    from eigenjury.models.spec import ModelSpec

LOCAL = "local"
BATCH_API = "batch-api"
GROUP = "eigenjury.backends"
T = TypeVar("T")
R = TypeVar("R")
TaskMap = Callable[[Callable[[Any], Any], Sequence[Any]], list[Any]]
# A backend's runner of bootstrap rounds, passed through to the statistics untouched
# (stats.bootstrap.RoundMap says its arguments; the engine never imports statistics).
RoundMap = Callable[..., list[dict[str, Any]]]


@cache
def _registered() -> tuple[EntryPoint, ...]:
    """The backends' entry points, read once and only when a backend is named: the
    scan reads every installed distribution's metadata (60 ms with its imports in a
    full venv), a tenth of the command's start."""
    from importlib.metadata import entry_points

    return tuple(entry_points(group=GROUP))


def backend_names() -> tuple[str, ...]:
    """ "local", "batch-api" and every registered backend."""
    return (LOCAL, BATCH_API, *sorted(ep.name for ep in _registered()))


def connect(
    name: str, address: str | None = None, *, poll_s: float = 60.0
) -> tuple[Backend | None, RoundMap | None]:
    """The engine backend and the bootstrap-round runner for `name` (None, None: local).
    `address`: a cluster to join; none starts a local one. `poll_s`: the longest wait
    between two polls of a provider's batch (batch-api)."""
    if name == BATCH_API:
        from eigenjury.engine import batch_api

        return batch_api.connect(address, poll_s=poll_s), None
    if name == LOCAL:
        if address:
            raise InputError("a Ray address was given but the backend is local; add --backend ray")
        return None, None
    backend: tuple[Backend, RoundMap] = _plugin(name).connect(address)
    return backend


def batched_by(name: str) -> Callable[[ModelSpec], bool]:
    """Whether backend `name` sends a model's calls through its provider's batch API
    (for a plan, which connects to no backend)."""
    if name != BATCH_API:
        return lambda spec: False
    from eigenjury.engine.batch_api import PROVIDERS

    return lambda spec: spec.provider in PROVIDERS


def task_map(name: str, address: str | None = None) -> TaskMap:
    """`map(fn, items)` for a sweep of independent simulations: forked processes here,
    tasks on a cluster. `fn` must be picklable (a module-level function)."""
    if name in (LOCAL, BATCH_API):
        return _processes
    return _plugin(name).task_map(address)  # type: ignore[no-any-return]


def _processes(fn: Callable[[T], R], items: Sequence[T]) -> list[R]:
    from eigenjury.processes import worker_pool

    with worker_pool(None) as pool:
        return list(pool.map(fn, items))


def _plugin(name: str) -> Any:
    """The module registered for backend `name`."""
    found = [ep for ep in _registered() if ep.name == name]
    if not found:
        raise InputError(
            f"unknown backend '{name}'; use one of {', '.join(backend_names())}", field="backend"
        )
    try:
        return found[0].load()
    except ImportError as exc:
        raise InputError(
            f"the {name} backend cannot be loaded ({exc}); install it: "
            f"pip install 'eigenjury[{name}]'",
            field="backend",
        ) from None
