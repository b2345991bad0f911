"""Data files for the bias-bound tests: judged datasets and score files."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def write_dataset(path: Path, n: int = 40) -> Path:
    with path.open("w") as f:
        for i in range(n):
            text = f"Answer {i}. It covers the point, and then some [quality {2 + i % 6}]"
            if i == 3:
                text += " mumble"
            f.write(json.dumps({"id": f"i{i}", "prompt": "Q?", "response": text}) + "\n")
    return path


def write_scores(path: Path, rows: list[tuple[str, Any, str]]) -> Path:
    path.write_text("item,score,model\n" + "".join(f"{i},{s},{m}\n" for i, s, m in rows))
    return path
