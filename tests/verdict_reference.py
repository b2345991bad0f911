"""A plain, row-by-row twin of the columnar verdict-file reader (eigenjury.verdict_files),
for the formats and conventions the verdict-file tests use: each row is read with the
csv or json module (Parquet: pyarrow's rows as Python values), its cells turned into
names, a verdict and numbers one at a time, and the table built with dicts and sorts.
It is slow and has no error messages: it reads files the columnar reader accepts, so
that the two can be compared table for table (`assert_same_tables`)."""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq

from eigenjury.reply_features import DEFAULT_FEATURES, text_features
from eigenjury.stats.verdicts import ReplyFeatures, VerdictTable
from eigenjury.verdict_files import BattleNames

TIE, FIRST, SECOND = 0, 1, 2
MISSING = ("", "nan", "null", "none", "na", "n/a")  # any case, around any whitespace
KEY = ("scenario", "judge", "first", "second")
PROBABILITIES = {"p_tie": TIE, "p_first": FIRST, "p_second": SECOND}
WINNERS = {"model_a": FIRST, "model_b": SECOND, "tie": TIE, "tie (bothbad)": TIE, "both_bad": TIE}
ONE_HOT = {"winner_model_a": FIRST, "winner_model_b": SECOND, "winner_tie": TIE}
ARENA_NOT_FEATURES = ("model", "response", "winner_model", "conversation")
METADATA = "conv_metadata"
METADATA_FIELDS = {
    "length": "sum_assistant_{}_tokens",
    "headers": "header_count_{}",
    "lists": "list_count_{}",
    "bold": "bold_count_{}",
}


def file_rows(path: Path) -> tuple[list[str], list[dict[str, Any]], bool]:
    """The file's columns, its rows as dicts (a key it lacks: None), and whether it is
    CSV (whose rows blank in every column read are skipped)."""
    if path.is_dir():
        files = sorted(p for p in path.rglob("*") if p.is_file())
        columns = pq.read_schema(files[0]).names
        return columns, [r for f in files for r in pq.read_table(f).to_pylist()], False
    if path.suffix == ".parquet":
        return pq.read_schema(path).names, pq.read_table(path).to_pylist(), False
    if path.suffix == ".csv":
        with path.open(newline="", encoding="utf-8-sig") as f:
            lines = [fields for fields in csv.reader(f) if fields]  # empty lines: no row
        header = [name.strip() for name in lines[0]]
        return header, [dict(zip(header, fields, strict=True)) for fields in lines[1:]], True
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".json":
        objects = json.loads(text)
    else:
        objects = [json.loads(line) for line in text.splitlines() if line.strip()]
    return list(objects[0]), objects, False


def missing(value: Any) -> bool:
    if value is None:
        return True
    if isinstance(value, float):
        return math.isnan(value)
    return isinstance(value, str) and value.strip().lower() in MISSING


def name(value: Any) -> str:
    """A name as text: trimmed; a number written out (JSON allows names as numbers)."""
    return value.strip() if isinstance(value, str) else str(value)


def number(value: Any) -> float:
    """A number, or a number written as text; NaN where missing."""
    if missing(value):
        return math.nan
    return float(value.strip() if isinstance(value, str) else value)


def verdict_code(value: Any) -> int:
    """0, 1 or 2, as a number or as text ("1.0" is 1)."""
    code = number(value)
    assert code in (0.0, 1.0, 2.0), value
    return int(code)


def one_hot_code(row: dict[str, Any]) -> int:
    flags = {label: number(row[column]) for column, label in ONE_HOT.items()}
    assert sorted(flags.values()) == [0.0, 0.0, 1.0], flags
    return next(label for label, flag in flags.items() if flag == 1.0)


def turns_joined(text: str) -> str:
    """Kaggle's replies, a JSON list of turns: the turns joined by a blank line."""
    if isinstance(text, list):
        return "\n\n".join(text)
    if not text.startswith("["):
        return text
    try:
        turns = json.loads(text)
    except ValueError:
        return text
    if isinstance(turns, list) and all(isinstance(t, str) for t in turns):
        return "\n\n".join(turns)
    return text


class Convention:
    """The file's convention, from its columns: which column plays which part."""

    def __init__(self, columns: Sequence[str], metadata: Sequence[str]) -> None:
        found = set(columns)
        self.soft = set(PROBABILITIES) <= found and set(KEY) <= found
        self.battles = not self.soft and not set((*KEY, "verdict")) <= found
        if self.battles:
            assert {"model_a", "model_b"} <= found
            self.roles = {"scenario": "question_id", "judge": "judge"}
            self.roles |= {"first": "model_a", "second": "model_b"}
            self.pair, self.texts = ("{}_a", "{}_b"), ("response_a", "response_b")
            self.not_features: tuple[str, ...] = ARENA_NOT_FEATURES
        else:
            self.roles = {k: k for k in KEY}
            self.pair, self.texts = ("first_{}", "second_{}"), ("first_text", "second_text")
            self.not_features = ("text",)
        self.one_hot = self.battles and "winner" not in found
        self.has_verdict = ("winner" if self.battles else "verdict") in found or self.one_hot
        self.numbered = self.roles["scenario"] not in found  # each battle its own scenario
        self.crowd = self.roles["judge"] not in found  # one judge, the crowd
        self.criteria = "criterion" in found
        self.offered = self.features_offered(columns, metadata)

    def features_offered(self, columns: Sequence[str], metadata: Sequence[str]) -> dict[str, str]:
        """Each feature the file has and where from: columns, else metadata, else texts."""
        offered = {}
        head, tail = self.pair[0].split("{}")
        for column in columns:
            feature = column[len(head) : len(column) - len(tail)]
            if (
                column.startswith(head)
                and column.endswith(tail)
                and feature
                and feature not in self.not_features
                and self.pair[1].format(feature) in columns
            ):
                offered[feature] = "columns"
        for feature, field in METADATA_FIELDS.items():
            sides = (field.format("a"), field.format("b"))
            if self.battles and feature not in offered and all(f in metadata for f in sides):
                offered[feature] = "metadata"
        if all(t in columns for t in self.texts):
            for feature in DEFAULT_FEATURES:
                offered.setdefault(feature, "texts")
        return offered

    def verdict(self, row: dict[str, Any]) -> int | None:
        """The row's verdict; None: not given (a soft verdict's is its likeliest label)."""
        if self.one_hot:
            return one_hot_code(row)
        if self.battles:
            return WINNERS[row["winner"].strip().lower()]
        if not self.has_verdict or missing(row.get("verdict")):
            assert self.soft
            return None
        return verdict_code(row["verdict"])

    def feature(self, row: dict[str, Any], feature: str, side: int) -> float:
        source = self.offered[feature]
        if source == "columns":
            return number(row[self.pair[side].format(feature)])
        if source == "metadata":
            value = row[METADATA][METADATA_FIELDS[feature].format("ab"[side])]
            return sum(map(number, value.values())) if isinstance(value, dict) else number(value)
        text = row[self.texts[side]]
        if text is None:
            return math.nan
        if self.battles:
            text = turns_joined(text)
        return float(text_features([text], [feature])[feature][0])


def read_reference(
    path: str | Path,
    *,
    criterion: str | None = None,
    collapse: str = "rows",
    features: Any = "available",
) -> VerdictTable:
    """The table `read_verdicts` reads from this file with these options, read one row
    at a time."""
    columns, rows, is_csv = file_rows(Path(path))
    first_metadata = rows[0].get(METADATA) if rows else None
    metadata = list(first_metadata) if isinstance(first_metadata, dict) else []
    c = Convention(columns, metadata)
    if features == "available":
        names = [f for f in DEFAULT_FEATURES if f in c.offered]
    else:
        names = list(features or ())
    if c.one_hot:
        outcome = list(ONE_HOT)
    elif c.has_verdict:
        outcome = ["winner" if c.battles else "verdict"]
    else:
        outcome = []
    read = [*c.roles.values(), *outcome, "criterion"]  # a CSV row blank in all: skipped
    kept = []
    for row in rows:
        if is_csv and all(row[x].strip() == "" for x in read if x in row):
            continue  # a blank CSV row
        if criterion is not None and name(row["criterion"]) != criterion:
            continue
        kept.append(row)

    # each kept row: its names, verdict, label probabilities and features
    entries = []
    for i, row in enumerate(kept):
        entry = {
            "scenario": f"battle {i + 1}" if c.numbered else name(row[c.roles["scenario"]]),
            "judge": "crowd" if c.crowd else name(row[c.roles["judge"]]),
            "first": name(row[c.roles["first"]]),
            "second": name(row[c.roles["second"]]),
            "verdict": c.verdict(row),
            "probs": None,
        }
        if c.soft:
            given = [number(row[p]) for p in PROBABILITIES]  # tie, first, second
            if all(math.isnan(p) for p in given):  # a hard verdict: certain
                entry["probs"] = [float(entry["verdict"] == label) for label in range(3)]
            else:
                clipped = [min(max(p, 0.0), 1.0) for p in given]
                total = clipped[0] + clipped[1] + clipped[2]
                entry["probs"] = [p / total for p in clipped]
                if entry["verdict"] is None:  # the likeliest label; ties: tie, then first
                    entry["verdict"] = entry["probs"].index(max(entry["probs"]))
        entry["features"] = [[c.feature(row, f, side) for f in names] for side in (0, 1)]
        entries.append(entry)

    models = tuple(sorted({e[r] for e in entries for r in ("judge", "first", "second")}))
    scenario_names = sorted({e["scenario"] for e in entries})
    model = {m: i for i, m in enumerate(models)}
    scenario = {s: i for i, s in enumerate(scenario_names)}
    mode = collapse
    if mode == "cells" and c.criteria and criterion is None:
        mode = "scenarios"  # the judgment weights need the scenarios
    if names or (c.numbered and mode == "scenarios"):
        mode = "rows"  # features keep every row
    coded = [
        (
            0 if mode == "cells" else i if c.numbered else scenario[e["scenario"]],
            model[e["judge"]],
            model[e["first"]],
            model[e["second"]],
        )
        for i, e in enumerate(entries)
    ]
    if mode == "rows":
        keys = [(*k, e["verdict"]) for k, e in zip(coded, entries, strict=True)]
        weights = [1.0] * len(keys)
    else:  # one row per distinct key, weighing as many rows (a soft one: each label)
        merged: dict[tuple[int, ...], float] = {}
        for k, e in zip(coded, entries, strict=True):
            labels = e["probs"] or [float(e["verdict"] == label) for label in range(3)]
            for label, p in enumerate(labels):
                if p > 0:
                    merged[(*k, label)] = merged.get((*k, label), 0.0) + p
        keys = sorted(merged)
        weights = [merged[k] for k in keys]
    if c.criteria and criterion is None:  # the rows of one judgment share weight 1
        totals: dict[tuple[int, ...], float] = {}
        for k, w in zip(keys, weights, strict=True):
            totals[k[:4]] = totals.get(k[:4], 0.0) + w
        weights = [w / totals[k[:4]] for k, w in zip(keys, weights, strict=True)]

    columns_of = np.array(keys, dtype=np.int64).reshape(len(keys), 5).T
    reply = [np.array([e["features"][side] for e in entries]) for side in (0, 1)]
    return VerdictTable(
        scenario=columns_of[0],
        judge=columns_of[1],
        first=columns_of[2],
        second=columns_of[3],
        verdict=columns_of[4],
        models=models,
        scenarios=BattleNames(len(entries)) if c.numbered else tuple(scenario_names),
        weight=np.array(weights, dtype=np.float64),
        features=ReplyFeatures(tuple(names), *reply) if names else None,
        probs=np.array([e["probs"] for e in entries]) if c.soft and mode == "rows" else None,
    )


def assert_same_tables(fast: VerdictTable, slow: VerdictTable) -> None:
    """The columnar reader's table and the reference's, field by field: the same models
    and scenarios, and the same rows in the same order (weights and probabilities to
    rounding: a sum's order may differ)."""
    assert fast.models == slow.models
    assert list(fast.scenarios) == list(slow.scenarios)
    # numbered battles' names are made when asked for, in both
    assert isinstance(fast.scenarios, BattleNames) == isinstance(slow.scenarios, BattleNames)
    for field in ("scenario", "judge", "first", "second", "verdict"):
        np.testing.assert_array_equal(getattr(fast, field), getattr(slow, field), err_msg=field)
    np.testing.assert_allclose(fast.weight, slow.weight, rtol=1e-12, err_msg="weight")
    assert (fast.probs is None) == (slow.probs is None)
    if fast.probs is not None and slow.probs is not None:
        np.testing.assert_allclose(fast.probs, slow.probs, rtol=1e-12, err_msg="probs")
    assert (fast.features is None) == (slow.features is None)
    if fast.features is not None and slow.features is not None:
        assert fast.features.names == slow.features.names
        for side in ("first", "second"):
            got, expected = getattr(fast.features, side), getattr(slow.features, side)
            np.testing.assert_allclose(got, expected, rtol=1e-12, err_msg=side)
