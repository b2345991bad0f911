"""Request and result files of `eigenjury batch`, for the batch and Ray tests."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def write_requests(path: Path, n: int, prefix: str = "q") -> Path:
    with path.open("w") as f:
        for i in range(n):
            line = {
                "id": f"r{i}",
                "messages": [{"role": "user", "content": f"{prefix} {i}"}],
                "temperature": 0,
            }
            f.write(json.dumps(line) + "\n")
    return path


def read_results(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def essence(rows: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    """What must be identical between runs (timings and cache flags may differ)."""
    return [(r["id"], r["text"], json.dumps(r["usage"]), json.dumps(r["error"])) for r in rows]
