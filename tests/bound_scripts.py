"""Data files for the bias-bound tests: judged datasets and score files; and the
scripted judge `bounds-biased` that judges them (registered on import)."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any

from eigenjury.models.providers.scripted import register_script
from eigenjury.models.types import ChatRequest


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


QUALITY = re.compile(r"\[quality (\d+)\]")


def biased_judge(request: ChatRequest) -> str:
    """Scores the hidden quality; +3 points for bold text (a markdown bias); +-1 jitter
    on a quarter of judgments, drawn from the request (so from its seed); no verdict
    when the response says 'mumble'."""
    user = request.messages[-1].content
    if "mumble" in user:
        return "I cannot decide."
    score = int(QUALITY.search(user).group(1))  # type: ignore[union-attr]
    score += 3 if "**" in user else 0
    digest = hashlib.sha256(repr(request.identity()).encode()).digest()
    if digest[0] < 64:
        score += 1 if digest[1] % 2 else -1
    return f"Fine. [[{min(max(score, 1), 10)}]]"


register_script("bounds-biased", biased_judge)


def brittle_judge(request: ChatRequest) -> str:
    """`bounds-biased`, but no verdict at all once a response carries bold text: a
    judge that breaks under the markdown edit."""
    if "**" in request.messages[-1].content:
        return "Too much formatting to judge."
    return biased_judge(request)


register_script("bounds-brittle", brittle_judge)
