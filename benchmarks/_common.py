"""Small helpers shared by the benchmark scripts: timing, tables, environment."""

from __future__ import annotations

import hashlib
import os
import platform
import statistics
import subprocess
import time
from collections.abc import Callable, Sequence
from importlib import metadata
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")

ROOT = Path(__file__).resolve().parent.parent


def timed(fn: Callable[[], T]) -> tuple[float, T]:
    """Wall seconds of one call, and its result."""
    start = time.perf_counter()
    result = fn()
    return time.perf_counter() - start, result


def timed_cpu(fn: Callable[[], T]) -> tuple[float, float, T]:
    """Wall and CPU seconds (this process, all its threads) of one call, and its result."""
    wall, cpu = time.perf_counter(), time.process_time()
    result = fn()
    return time.perf_counter() - wall, time.process_time() - cpu, result


def spread(times: Sequence[float]) -> str:
    """'best / median' of repeated timings, in seconds."""
    if len(times) == 1:
        return f"{times[0]:.3g}"
    return f"{min(times):.3g} / {statistics.median(times):.3g}"


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A markdown table; floats are written with 4 significant digits."""

    def cell(value: Any) -> str:
        return f"{value:.4g}" if isinstance(value, float) else str(value)

    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)


def environment(*packages: str) -> str:
    """One line: CPU count, Python and package versions, OpenBLAS settings."""
    versions = []
    for name in ("numpy", "scipy", *packages):
        try:
            versions.append(f"{name} {metadata.version(name)}")
        except metadata.PackageNotFoundError:
            versions.append(f"{name} (absent)")
    blas = {k: v for k, v in os.environ.items() if k.startswith("OPENBLAS")}
    return (
        f"{os.cpu_count()} cores, Python {platform.python_version()}, "
        + ", ".join(versions)
        + (f", {blas}" if blas else "")
        + f"; eigenjury {source_version()}"
    )


def source_version() -> str:
    """Git commit of the checkout, and a hash of src/ (it may hold uncommitted changes)."""
    digest = hashlib.sha256()
    for path in sorted((ROOT / "src").rglob("*.py")):
        digest.update(path.read_bytes())
    try:
        commit = subprocess.run(
            ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        commit = "unknown"
    return f"commit {commit}, src sha256 {digest.hexdigest()[:10]}"
