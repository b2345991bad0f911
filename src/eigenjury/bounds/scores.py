"""Score files for `eigenjury bound apply`: scales, readers and model-level scores.

Three inputs, told apart by their content:

- a score file (CSV or JSONL) with columns `item`, `score` and optional `model`,
  `criterion` and `unit` (what one neighbour edits: rows sharing a unit change
  together), on a declared raw range (`--scale` or `--range LOW HIGH`);
- a peer-ranking verdict file (columns scenario, judge, first, second, verdict; 0 tie,
  1 first better, 2 second better, as `eigenjury rank` writes it): one item per row,
  scored 1 / 0.5 / 0 for the evaluee shown first;
- a contracts `results.json` (a grading record, read through its model): one item per
  task and candidate on its 0..100 `score`, or with level "criterion" one item per
  criterion on its pass value (0 or 1).

Tolerated in score files, and only this: blank lines, a UTF-8 byte-order mark, extra
columns or fields (ignored), numbers written as strings in CSV. Everything else is a
located error.

Each input also says what one neighbour edits (its `Neighbourhood`): a peer reply feeds
every verdict row it appears in, a submission every criterion item it is graded on, a
score file's unit every row naming it. The most items one such edit reaches is the k a
certificate must assume.
"""

from __future__ import annotations

import csv
import json
import math
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from eigenjury.contracts.record import GradingRecord
from eigenjury.errors import InputError
from eigenjury.files import (
    check_text_file,
    lines,
    load_json,
    not_text,
    read_csv,
    read_json_lines,
    text_value,
)
from eigenjury.records import read_record
from eigenjury.stats.verdicts import FIRST, SECOND, TIE, FloatArray, IntArray
from eigenjury.verdict_files import REQUIRED as VERDICT_COLUMNS
from eigenjury.verdict_files import read_verdicts

_SCORE_FILE_NEEDS = "a score file needs item and score (model and criterion optional)"


@dataclass(frozen=True)
class Scale:
    """A raw score range; scores are normalised to [0, 1] by (x - low) / (high - low)."""

    name: str
    low: float
    high: float

    def normalise(self, raw: ArrayLike) -> FloatArray:
        return (np.asarray(raw, dtype=np.float64) - self.low) / (self.high - self.low)

    def raw(self, normalised: FloatArray) -> FloatArray:
        return np.asarray(self.low + normalised * (self.high - self.low))

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "low": self.low, "high": self.high}


SCALES = {
    s.name: s
    for s in (
        Scale("unit", 0.0, 1.0),
        Scale("likert5", 1.0, 5.0),
        Scale("likert10", 1.0, 10.0),
        Scale("pairwise5", 1.0, 5.0),
        Scale("verdict", 0.0, 2.0),
        Scale("percent", 0.0, 100.0),
    )
}
PREFERENCE = Scale("preference", 0.0, 1.0)  # peer verdicts: 1 first better, 0.5 tie, 0 second
_PREFERENCE_OF = {FIRST: 1.0, TIE: 0.5, SECOND: 0.0}
SCORE_COLUMNS = ("item", "score")
LEVELS = ("task", "criterion")


@dataclass(frozen=True)
class Neighbourhood:
    """What one neighbour edits, read from the input's structure: `k` is the most items
    one edit reaches (a reply, a submission, a unit), `unit` names such a largest unit
    ("scenario s1, evaluee ada"; None when every row is its own unit), and `sizes` are
    the numbers of items the units feed (each is bounded on its own)."""

    k: int
    source: str  # "rows per reply", "items per submission" or "rows per unit"
    unit: str | None
    sizes: tuple[int, ...]

    @property
    def reason(self) -> str:
        """Why k is what it is: "one reply feeds 6 rows (scenario s1, evaluee ada)"."""
        if self.unit is None:
            return "each row is its own unit (the file has no unit column)"
        counted, edited = self.source.split(" per ")
        return f"one {edited} feeds {self.k} {counted} ({self.unit})"


def largest_unit(
    keys: Sequence[Any], source: str, name: Callable[[Any], str | None]
) -> Neighbourhood:
    """The neighbourhood of items whose units are `keys`: one key per item and unit it
    belongs to (a verdict row, fed by two replies, has two); the first largest unit is
    named by `name`."""
    counts = Counter(keys)
    (key, k), *_ = counts.most_common(1)
    return Neighbourhood(
        k=k, source=source, unit=name(key), sizes=tuple(sorted(set(counts.values())))
    )


@dataclass(frozen=True)
class ScoreSet:
    """d scored items, their scale, and which model each item speaks for.

    Model-level scores are means over contributions: contribution c gives model
    `owner[c]` the score of item `source[c]`, or 1 minus it when `flip[c]` (the
    evaluee shown second in a peer verdict).
    """

    items: tuple[str, ...]
    raw: FloatArray
    scale: Scale
    source_format: str
    criteria: tuple[str | None, ...]
    models: tuple[str, ...]
    source: IntArray
    owner: IntArray
    flip: np.ndarray[Any, np.dtype[np.bool_]]
    neighbourhood: Neighbourhood

    @property
    def normalised(self) -> FloatArray:
        return self.scale.normalise(self.raw)

    @property
    def dim(self) -> int:
        return len(self.items)

    def model_scores(self, normalised: FloatArray) -> FloatArray:
        """Each model's mean score (in the units of `normalised`) over its items."""
        values = normalised[self.source]
        values = np.where(self.flip, 1.0 - values, values)
        total = np.bincount(self.owner, values, minlength=len(self.models))
        count = np.bincount(self.owner, minlength=len(self.models))
        return np.asarray(total / np.maximum(count, 1))

    def item_models(self) -> list[str | None]:
        """The model of each item (the first evaluee for peer verdicts), for output."""
        out: list[str | None] = [None] * self.dim
        for c in range(len(self.source) - 1, -1, -1):
            if not self.flip[c]:
                out[self.source[c]] = self.models[self.owner[c]]
        return out


def read_scores(path: Path, *, scale: Scale | None = None, level: str = "task") -> ScoreSet:
    """Read any of the three inputs; `scale` is required for plain score files only."""
    if not path.is_file():
        raise InputError("no such file", path=path)
    suffix = path.suffix.lower()
    if suffix == ".json":
        _no_scale(path, scale, "a contracts results.json")
        return _read_results(path, level)
    if level != "task":
        raise InputError("--level criterion applies to a contracts results.json", path=path)
    if suffix not in (".csv", ".jsonl", ".ndjson", ".parquet"):
        raise InputError(
            f"unknown file type '{suffix or '(none)'}'; use a .csv or .jsonl score file, a "
            "verdict file or a contracts results.json",
            path=path,
        )
    if suffix == ".parquet" or _columns(path, suffix) >= set(VERDICT_COLUMNS):
        _no_scale(path, scale, "a verdict file")
        return _from_verdicts(path)
    if scale is None:
        raise InputError(
            f"declare the raw score range with --scale ({', '.join(SCALES)}) or --range LOW HIGH",
            path=path,
        )
    return _read_score_file(path, suffix, scale)


def _no_scale(path: Path, scale: Scale | None, what: str) -> None:
    if scale is not None:
        raise InputError(f"{what} declares its own scale; drop --scale / --range", path=path)


def _columns(path: Path, suffix: str) -> set[str]:
    """The column names of a CSV header or of the first JSONL object (empty if none);
    bad bytes and bad JSON are located errors here, as in the readers."""
    if suffix != ".csv":
        for number, text in lines(path):
            record = load_json(text, path, number)
            return set(record) if isinstance(record, dict) else set()
        return set()
    check_text_file(path)
    try:
        with path.open(encoding="utf-8-sig", newline="") as f:
            return {h.strip() for h in next(csv.reader(f), [])}
    except UnicodeDecodeError:
        raise not_text(path) from None
    except csv.Error:
        return set()  # the CSV reader reports it, with the line


def _from_verdicts(path: Path) -> ScoreSet:
    table = read_verdicts(path, features=None)
    n = len(table.verdict)
    rows = np.arange(n)
    scenarios = np.asarray(table.scenarios, dtype=object)[table.scenario]
    models = np.asarray(table.models, dtype=object)
    items = tuple(
        f"{s}|{j}|{a}|{b}"
        for s, j, a, b in zip(
            scenarios, models[table.judge], models[table.first], models[table.second], strict=True
        )
    )
    preference = np.array([_PREFERENCE_OF[int(v)] for v in table.verdict])
    # a reply is an evaluee's answer to a scenario: it feeds every row showing it
    n_models = len(table.models)
    replies = n_models * np.concatenate([table.scenario, table.scenario]).astype(
        np.int64
    ) + np.concatenate([table.first, table.second])

    def reply(key: int) -> str:
        scenario, evaluee = divmod(key, n_models)
        return f"scenario {table.scenarios[scenario]}, evaluee {table.models[evaluee]}"

    neighbourhood = largest_unit(replies.tolist(), "rows per reply", reply)
    return ScoreSet(
        items=_numbered_duplicates(items),
        raw=preference,
        scale=PREFERENCE,
        source_format="verdicts",
        criteria=(None,) * n,
        models=table.models,
        source=np.concatenate([rows, rows]),
        owner=np.concatenate([table.first, table.second]).astype(np.int64),
        flip=np.concatenate([np.zeros(n, dtype=bool), np.ones(n, dtype=bool)]),
        neighbourhood=neighbourhood,
    )


def _numbered_duplicates(items: Sequence[str]) -> tuple[str, ...]:
    """Repeated judgments of the same pair get #2, #3, ... so item ids stay unique."""
    seen: dict[str, int] = {}
    out = []
    for item in items:
        seen[item] = seen.get(item, 0) + 1
        out.append(item if seen[item] == 1 else f"{item}#{seen[item]}")
    return tuple(out)


def _read_score_file(path: Path, suffix: str, scale: Scale) -> ScoreSet:
    items: list[str] = []
    raw: list[float] = []
    models: list[str | None] = []
    criteria: list[str | None] = []
    units: list[tuple[str, str]] = []
    first_seen: dict[str, int] = {}
    rows = (
        read_csv(path, SCORE_COLUMNS, _SCORE_FILE_NEEDS)
        if suffix == ".csv"
        else read_json_lines(path)
    )
    for line, record in rows:
        for name in SCORE_COLUMNS:
            if name not in record or _blank(record[name]):
                raise InputError(f"missing value for '{name}'", path=path, line=line, column=name)
        item = _name(record, "item", path, line)
        if item in first_seen:
            raise InputError(
                f"item '{item}' already appeared on line {first_seen[item]}; item ids must "
                "be unique (one score per item)",
                path=path,
                line=line,
                column="item",
            )
        first_seen[item] = line
        value = _number(record["score"])
        if value is None or not scale.low <= value <= scale.high:
            raise InputError(
                f"score {record['score']!r} is outside the declared range "
                f"[{scale.low:g}, {scale.high:g}] ({scale.name})",
                path=path,
                line=line,
                column="score",
            )
        items.append(item)
        raw.append(value)
        models.append(None if _blank(record.get("model")) else _name(record, "model", path, line))
        criteria.append(
            None if _blank(record.get("criterion")) else _name(record, "criterion", path, line)
        )
        # a row without a unit is its own (keyed apart from any unit name)
        units.append(
            ("item", item)
            if _blank(record.get("unit"))
            else ("unit", _name(record, "unit", path, line))
        )
    if not items:
        raise InputError("the file has no scores; expected rows with item and score", path=path)
    named_units = any(kind == "unit" for kind, _ in units)
    neighbourhood = largest_unit(
        units, "rows per unit", lambda key: f"{key[0]} {key[1]}" if named_units else None
    )
    return _score_set(items, raw, scale, "scores", models, criteria, neighbourhood)


def _score_set(
    items: Sequence[str],
    raw: Sequence[float],
    scale: Scale,
    source_format: str,
    models: Sequence[str | None],
    criteria: Sequence[str | None],
    neighbourhood: Neighbourhood,
) -> ScoreSet:
    named = sorted({m for m in models if m is not None})
    index = {m: i for i, m in enumerate(named)}
    source = np.array([i for i, m in enumerate(models) if m is not None], dtype=np.int64)
    return ScoreSet(
        items=tuple(items),
        raw=np.asarray(raw, dtype=np.float64),
        scale=scale,
        source_format=source_format,
        criteria=tuple(criteria),
        models=tuple(named),
        source=source,
        owner=np.array([index[m] for m in models if m is not None], dtype=np.int64),
        flip=np.zeros(len(source), dtype=bool),
        neighbourhood=neighbourhood,
    )


def _name(record: Mapping[str, Any], name: str, path: Path, line: int) -> str:
    """An id or name of a score file row as text, or a located error (a list or an
    object where a name belongs is a mistake, not a name)."""
    text = text_value(record[name])
    if text is None:
        raise InputError(
            f"'{name}' must be text, not {json.dumps(record[name])[:40]}",
            path=path,
            line=line,
            column=name,
        )
    return text


def _blank(value: Any) -> bool:
    return value is None or (isinstance(value, str) and not value.strip())


def _number(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        number = float(value)
    elif isinstance(value, str):
        try:
            number = float(value.strip())
        except ValueError:
            return None
    else:
        return None
    return number if math.isfinite(number) else None


def _read_results(path: Path, level: str) -> ScoreSet:
    """A contracts results.json, read through its record: task scores (percent) or
    criterion pass values."""
    if level not in LEVELS:
        raise InputError(f"--level must be one of {', '.join(LEVELS)}", path=path)
    record = read_record(path, GradingRecord)
    items: list[str] = []
    raw: list[float] = []
    models: list[str | None] = []
    criteria: list[str | None] = []
    submissions: list[tuple[str, str]] = []  # a candidate's answer to a task feeds its items
    for number, task in enumerate(record.tasks):
        if level == "task":
            if task.score > 100.0:
                raise InputError(
                    f"score {task.score:g} is above 100 (the contract's weights sum past 100), "
                    "and task scores are read as percent; use --level criterion",
                    path=path,
                    field=f"tasks.{number}.score",
                )
            items.append(f"{task.task_id}/{task.candidate}")
            raw.append(task.score)
            models.append(task.candidate)
            criteria.append(None)
            submissions.append((task.task_id, task.candidate))
            continue
        for criterion in task.criteria:
            items.append(f"{task.task_id}/{task.candidate}/{criterion.id}")
            raw.append(float(criterion.passed))
            models.append(task.candidate)
            criteria.append(criterion.id)
            submissions.append((task.task_id, task.candidate))
    if not items:
        raise InputError("no scores: the results have no tasks (or no criteria)", path=path)
    duplicates = [item for item, count in Counter(items).items() if count > 1]
    if duplicates:
        raise InputError(
            f"item {duplicates[0]!r} appears twice; task, candidate (and criterion) "
            "must identify one score",
            path=path,
            field="tasks",
        )
    scale = SCALES["percent"] if level == "task" else SCALES["unit"]
    neighbourhood = largest_unit(
        submissions, "items per submission", lambda key: f"task {key[0]}, candidate {key[1]}"
    )
    return _score_set(items, raw, scale, f"contracts-{level}", models, criteria, neighbourhood)
