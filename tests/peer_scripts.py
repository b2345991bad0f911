"""Scripted stand-ins for a peer-ranking population whose judges follow a known truth.

Members carry a hidden quality in their persona ("[quality 1.5]"). Evaluees sign their
replies with it; judges read both replies' qualities and draw a verdict from the
Bradley-Terry-Davidson model with those strengths, seeded by the request, so runs are
reproducible. Judges whose persona says "[sloppy]" forget the verdict tag (the
repair prompt gets it). Greenbeard instructions make a judge favour the marker.
"""

from __future__ import annotations

import hashlib
import math
import random
import re
from pathlib import Path
from typing import Any

import yaml

from eigenjury.models.providers.scripted import register_script
from eigenjury.models.types import ChatRequest

QUALITY = re.compile(r"\[quality (-?[\d.]+)\]")
REPLY = re.compile(r"Reply ([AB]):\n<reply>\n(.*?)\n</reply>", re.S)
FAVOUR = re.compile(r"favour any reply containing '([^']+)'")
MARKER = re.compile(r"Work the phrase '([^']+)'")


def _rng(request: ChatRequest) -> random.Random:
    digest = hashlib.sha256(repr(request.identity()).encode()).digest()
    return random.Random(int.from_bytes(digest[:8], "big"))


def peer_truth(request: ChatRequest) -> str:
    system = request.messages[0].content if request.messages[0].role == "system" else ""
    user = request.messages[-1].content
    if "Someone has come to you" in system:  # an evaluee answering
        quality = QUALITY.search(system)
        marker = MARKER.search(system)
        text = f"My advice [quality {quality.group(1) if quality else 0}]."
        if "[script]" in system:
            text += " <script>alert('pwned')</script>"
        return text + (f" {marker.group(1)}" if marker else "")
    if "did not end with" in user:  # a repair request
        return "<verdict>A</verdict>"
    if "You assess replies" in system:
        return "A thoughtful reflection."
    replies = dict(REPLY.findall(user))
    strength = {}
    for label in ("A", "B"):
        found = QUALITY.search(replies.get(label, ""))
        strength[label] = float(found.group(1)) if found else 0.0
    favour = FAVOUR.search(system)
    if favour:
        for label in ("A", "B"):
            if favour.group(1) in replies.get(label, ""):
                strength[label] += 3.0
    a, b = math.exp(strength["A"]), math.exp(strength["B"])
    tie = 0.4 * math.sqrt(a * b)
    u = _rng(request).random() * (a + b + tie)
    label = "A" if u < a else "B" if u < a + b else "tie"
    if "criterion n=" in user:
        n = len(re.findall(r'<criterion n="\d+">\.\.\.</criterion>', user))
        return "\n".join(f'<criterion n="{i}">{label}</criterion>' for i in range(1, n + 1))
    if "[sloppy]" in system:
        return f"I would go with {label}."
    return f"Both have merits. <verdict>{label}</verdict>"


register_script("peer-truth", peer_truth)

VERBOSITY = re.compile(r"\[verbosity ([\d.]+)\]")
LOVES_LENGTH = re.compile(r"\[loves length (-?[\d.]+)\]")


def verbose_truth(request: ChatRequest) -> str:
    """peer-truth with a taste for length: evaluees pad their replies with a number of
    words that varies by scenario around their "[verbosity v]", and judges add
    "[loves length b]" times the normalised word-count difference to the first reply's
    strength (what style control should find)."""
    system = request.messages[0].content if request.messages[0].role == "system" else ""
    if "Someone has come to you" in system:
        quality = QUALITY.search(system)
        verbosity = VERBOSITY.search(system)
        words = int(_rng(request).random() * 40 * (float(verbosity.group(1)) if verbosity else 1))
        return f"My advice [quality {quality.group(1) if quality else 0}]." + " indeed" * words
    if "You assess replies" in system or "did not end with" in request.messages[-1].content:
        return peer_truth(request)
    replies = dict(REPLY.findall(request.messages[-1].content))
    strength = {}
    for label in ("A", "B"):
        found = QUALITY.search(replies.get(label, ""))
        strength[label] = float(found.group(1)) if found else 0.0
    a_words, b_words = (len(replies.get(label, "").split()) for label in ("A", "B"))
    love = LOVES_LENGTH.search(system)
    shift = (float(love.group(1)) if love else 0.0) * (a_words - b_words) / (a_words + b_words)
    a, b = math.exp(strength["A"] + shift / 2), math.exp(strength["B"] - shift / 2)
    tie = 0.4 * math.sqrt(a * b)
    u = _rng(request).random() * (a + b + tie)
    return f"<verdict>{'A' if u < a else 'B' if u < a + b else 'tie'}</verdict>"


register_script("verbose-truth", verbose_truth)


def _objective_keys() -> dict[str, str]:
    from pathlib import Path

    from eigenjury.peer.data import load_questions

    return {q.question: q.answer for q in load_questions("general", Path("."))}


KEYS = _objective_keys()
SKILL = re.compile(r"\[skill ([\d.]+)\]")


def objective_truth(request: ChatRequest) -> str:
    """Evaluees answer right with their skill; judges know the key and prefer the right
    letter 85% of the time (the recovered order should follow accuracy)."""
    system = request.messages[0].content
    user = request.messages[-1].content
    rng = _rng(request)
    if "Someone has come to you" in system:
        question = next(q for q in KEYS if user.startswith(q))
        skill = float(SKILL.search(system).group(1))  # type: ignore[union-attr]
        key = KEYS[question]
        wrong = [x for x in "ABCD" if x != key]
        return f"{key if rng.random() < skill else rng.choice(wrong)}. Because."
    question = next(q for q in KEYS if q in user)
    replies = dict(REPLY.findall(user))
    right = {label: replies.get(label, "").startswith(KEYS[question]) for label in ("A", "B")}
    if right["A"] == right["B"]:
        return "<verdict>tie</verdict>"
    better = "A" if right["A"] else "B"
    worse = "B" if better == "A" else "A"
    return f"<verdict>{better if rng.random() < 0.85 else worse}</verdict>"


register_script("objective-truth", objective_truth)


QUALITIES = {"ada": 1.2, "bo": 0.6, "cy": 0.0, "di": -0.6, "ed": -1.2}


def config(tmp_path: Path, **overrides: Any) -> Path:
    data: dict[str, Any] = {
        "name": "scripted truth",
        "population": [
            {"name": n, "model": "scripted:peer-truth", "persona": f"[quality {q}]"}
            for n, q in QUALITIES.items()
        ],
        "constitution": "kindness",
        "scenarios": {"source": "everyday", "limit": 40},
        "sampling": {"design": "random-groups", "group_size": 4},
        "judging": {"reflections": True},
        "fit": {"bootstrap": 30, "ci": 0.9},
        "engine": {"concurrency": 16},
        "output": str(tmp_path / "run"),
    }
    for key, value in overrides.items():
        if isinstance(value, dict) and isinstance(data.get(key), dict):
            data[key] = {**data[key], **value}
        else:
            data[key] = value
    tmp_path.mkdir(parents=True, exist_ok=True)
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path
