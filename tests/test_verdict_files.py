"""Reading verdict and battle files: every format and convention, collapse, streaming,
reply features, and located errors found without a loop over rows."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from numpy.typing import NDArray

import eigenjury.verdict_files as vf
from eigenjury.cli import main
from eigenjury.errors import InputError
from eigenjury.reply_features import DEFAULT_FEATURES
from eigenjury.stats import (
    PeerRanking,
    ScenarioCounts,
    VerdictCounts,
    VerdictTable,
    make_population,
    simulate_verdicts,
)
from eigenjury.verdict_files import BattleNames, write_verdicts
from verdict_reference import assert_same_tables, read_reference

HEADER = "scenario,judge,first,second,verdict\n"


def read_verdicts(path: str | Path, **options: Any) -> VerdictTable:
    """The columnar reader; on every file it reads here, its row-by-row twin
    (verdict_reference.py) must read the same table."""
    table = vf.read_verdicts(path, **options)
    assert_same_tables(table, read_reference(path, **options))
    return table


@pytest.fixture(scope="module")
def small() -> VerdictTable:
    return simulate_verdicts(make_population(5, 2, seed=1), n_scenarios=40, seed=2)


def _rows(table: VerdictTable, **extra: list[Any]) -> list[dict[str, Any]]:
    models, scenarios = table.models, table.scenarios
    rows = [
        {
            "scenario": scenarios[s],
            "judge": models[j],
            "first": models[f],
            "second": models[k],
            "verdict": int(v),
        }
        for s, j, f, k, v in zip(
            table.scenario, table.judge, table.first, table.second, table.verdict, strict=True
        )
    ]
    for name, values in extra.items():
        for row, value in zip(rows, values, strict=True):
            row[name] = value
    return rows


def _write(path: Path, rows: list[dict[str, Any]]) -> Path:
    """Rows as the file type `path` names (a folder: a Parquet dataset of two files)."""
    if path.suffix == ".json":
        path.write_text(json.dumps(rows, indent=1))
    elif path.suffix == ".jsonl":
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    elif path.suffix == ".parquet":
        pq.write_table(pa.Table.from_pylist(rows), path)
    elif path.suffix == ".csv":
        import csv

        with path.open("w", newline="") as f:
            writer = csv.DictWriter(f, list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)
    else:
        path.mkdir()
        half = len(rows) // 2
        pq.write_table(pa.Table.from_pylist(rows[:half]), path / "part-0.parquet")
        pq.write_table(pa.Table.from_pylist(rows[half:]), path / "part-1.parquet")
    return path


def _same(a: VerdictTable, b: VerdictTable) -> None:
    for field in ("scenario", "judge", "first", "second", "verdict", "weight"):
        np.testing.assert_array_equal(getattr(a, field), getattr(b, field), err_msg=field)
    assert a.models == b.models
    assert list(a.scenarios) == list(b.scenarios)


def _same_counts(a: VerdictTable, b: VerdictTable, *, scenarios: bool = True) -> None:
    ca, cb = VerdictCounts.from_table(a), VerdictCounts.from_table(b)
    for field in ("judge", "first", "second", "n"):
        np.testing.assert_allclose(getattr(ca, field), getattr(cb, field), err_msg=field)
    if scenarios:
        sa, sb = ScenarioCounts.from_table(a), ScenarioCounts.from_table(b)
        for field in ("entry_scenario", "entry_cell", "entry_label", "entry_weight"):
            np.testing.assert_allclose(getattr(sa, field), getattr(sb, field), err_msg=field)
        assert sa.n_scenarios == sb.n_scenarios


@pytest.mark.parametrize("name", ["v.csv", "v.jsonl", "v.json", "v.parquet", "dataset"])
def test_every_format_reads_the_same_table(name: str, small: VerdictTable, tmp_path: Path) -> None:
    got = read_verdicts(_write(tmp_path / name, _rows(small)))
    _same(got, small)
    assert got.features is None


@pytest.mark.parametrize("suffix", [".csv", ".jsonl", ".parquet"])
def test_written_verdicts_read_back(suffix: str, small: VerdictTable, tmp_path: Path) -> None:
    path = tmp_path / f"v{suffix}"
    write_verdicts(small, path)
    _same(read_verdicts(path), small)


BATTLES = [
    {"model_a": "x", "model_b": "y", "winner": "model_a", "conversation_a": '[{"a": "b,\\n"}]'},
    {"model_a": "y", "model_b": "z", "winner": "model_b", "conversation_a": "multi\nline, text"},
    {"model_a": "z", "model_b": "x", "winner": "tie", "conversation_a": None},
    {"model_a": "x", "model_b": "z", "winner": " tie (bothbad) ", "conversation_a": "[]"},
    {"model_a": "y", "model_b": "x", "winner": "both_bad", "conversation_a": "[]"},
]


@pytest.mark.parametrize("name", ["b.csv", "b.jsonl", "b.json", "b.parquet"])
def test_arena_battles_the_five_winners_and_all_ties(name: str, tmp_path: Path) -> None:
    table = read_verdicts(_write(tmp_path / name, BATTLES))
    assert table.models == ("crowd", "x", "y", "z")
    assert [table.models[j] for j in table.judge] == ["crowd"] * 5
    assert [table.models[f] for f in table.first] == ["x", "y", "z", "x", "y"]
    assert [table.models[s] for s in table.second] == ["y", "z", "x", "z", "x"]
    assert table.verdict.tolist() == [1, 2, 0, 0, 0]  # a tie every way
    assert isinstance(table.scenarios, BattleNames)
    assert len(table.scenarios) == 5 and table.scenarios[3] == "battle 4"
    assert table.scenario.tolist() == [0, 1, 2, 3, 4]  # each battle its own scenario


@pytest.mark.parametrize("name", ["k.csv", "k.parquet"])
def test_the_one_hot_winner_form(name: str, tmp_path: Path) -> None:
    """Kaggle's arena-human-preference files: the winner as three 0/1 columns."""
    flags = [(1, 0, 0), (0, 1, 0), (0, 0, 1)]
    battles = [
        {
            "id": i,
            "model_a": a,
            "model_b": b,
            "response_a": '["hi **you**", "### more"]',
            "response_b": '["x"]',
            "winner_model_a": f[0],
            "winner_model_b": f[1],
            "winner_tie": f[2],
        }
        for i, (a, b, f) in enumerate(zip("xyz", "yzx", flags, strict=True))
    ]
    table = read_verdicts(_write(tmp_path / name, battles))
    assert table.verdict.tolist() == [1, 2, 0] and table.models == ("crowd", "x", "y", "z")
    features = table.features
    assert features is not None and features.names == DEFAULT_FEATURES
    np.testing.assert_array_equal(features.first, [[10, 1, 0, 1]] * 3)  # the turns joined
    np.testing.assert_array_equal(features.second, [[1, 0, 0, 0]] * 3)
    battles[1]["winner_tie"] = 1
    with pytest.raises(InputError) as error:
        read_verdicts(_write(tmp_path / f"bad-{name}", battles))
    assert error.value.column == "winner_model_a, winner_model_b, winner_tie"
    assert (error.value.line, error.value.row) == ((3, None) if name == "k.csv" else (None, 2))
    assert "'0,1,1' is not a single 1 among the three" in error.value.message


def test_question_ids_are_the_scenarios_and_judges_may_be_mixed(tmp_path: Path) -> None:
    battles = [
        {**b, "question_id": q, "judge": j}
        for b, q, j in zip(BATTLES[:4], [7, 7, 8, 9], ["human", "gpt", "human", "x"], strict=True)
    ]
    table = read_verdicts(_write(tmp_path / "b.jsonl", battles))
    assert table.scenarios == ("7", "8", "9")
    assert table.scenario.tolist() == [0, 0, 1, 2]
    assert table.models == ("gpt", "human", "x", "y", "z")
    assert [table.models[j] for j in table.judge] == ["human", "gpt", "human", "x"]


def test_a_model_named_like_the_crowd_judge_needs_a_judge_column(tmp_path: Path) -> None:
    battles = [*BATTLES[:4], {"model_a": "y", "model_b": "crowd", "winner": "tie"}]
    with pytest.raises(InputError) as error:
        read_verdicts(_write(tmp_path / "b.jsonl", battles))
    assert error.value.line == 5 and error.value.column == "model_b"
    assert "named 'crowd'" in error.value.message and "add a judge column" in error.value.message
    with_judges = [{**b, "judge": "people"} for b in battles]
    assert "crowd" in read_verdicts(_write(tmp_path / "j.jsonl", with_judges)).models


def test_a_file_of_neither_convention_names_both(tmp_path: Path) -> None:
    path = tmp_path / "b.csv"
    path.write_text("model_a,model_b,verdict\nx,y,1\n")
    with pytest.raises(InputError) as error:
        read_verdicts(path)
    message = str(error.value)
    assert "b.csv, line 1" in message and "missing column(s) winner" in message
    assert "found model_a, model_b, verdict" in message
    assert "scenario, judge, first, second, verdict" in message
    path.write_text("judge,model_b,winner\nh,y,tie\n")
    with pytest.raises(InputError, match=r"missing column\(s\) model_a; found judge, model_b"):
        read_verdicts(path)
    path.write_text("judge,scenario\nx,y\n")
    with pytest.raises(InputError, match=r"missing column\(s\) first, second, verdict"):
        read_verdicts(path)


@pytest.mark.parametrize(
    ("name", "line"), [("b.csv", 5), ("b.jsonl", 3), ("b.json", None), ("b.parquet", None)]
)  # CSV: the second battle's conversation spans two lines
def test_an_unknown_winner_is_located(name: str, line: int | None, tmp_path: Path) -> None:
    battles = [dict(b) for b in BATTLES]
    battles[2]["winner"] = "model_c"
    with pytest.raises(InputError) as error:
        read_verdicts(_write(tmp_path / name, battles))
    assert error.value.column == "winner"
    assert (error.value.line, error.value.row) == ((line, None) if line else (None, 3))
    assert "winner 'model_c' is not model_a, model_b, tie, tie (bothbad) or both_bad" in str(
        error.value
    )


def _elo(table: VerdictTable) -> Any:
    return PeerRanking(2, bootstrap=0, restarts=1).fit(table).elo_


@pytest.mark.parametrize("name", ["v.csv", "dataset"])
def test_collapse_keeps_the_counts_and_the_ranking(
    name: str, small: VerdictTable, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(vf, "BATCH_ROWS", 50)  # several merges while streaming
    rows = _rows(small)
    path = _write(tmp_path / name, rows + rows[:300])  # some rows twice: merged
    table = read_verdicts(path)
    by_scenario = read_verdicts(path, collapse="scenarios")
    by_cell = read_verdicts(path, collapse="cells")
    assert len(by_cell) < len(by_scenario) < len(table)
    _same_counts(table, by_scenario)
    _same_counts(table, by_cell, scenarios=False)
    assert set(by_cell.scenario.tolist()) == {0} and by_cell.scenarios == table.scenarios
    elo = _elo(table)
    np.testing.assert_allclose(_elo(by_scenario), elo, rtol=1e-9)
    np.testing.assert_allclose(_elo(by_cell), elo, rtol=1e-9)


def test_collapse_with_criteria_keeps_the_judgment_weights(
    small: VerdictTable, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(vf, "BATCH_ROWS", 64)
    rows = _rows(small)
    labelled = [{**r, "criterion": c} for r in rows for c in ("care", "wit", "tact")]
    for i, row in enumerate(labelled):
        row["verdict"] = (row["verdict"] + i) % 3  # criteria disagree
    path = _write(tmp_path / "dataset", labelled)
    table = read_verdicts(path)
    assert VerdictCounts.from_table(table).total == pytest.approx(len(rows))  # judgments
    for collapse in ("scenarios", "cells"):  # cells: the weights need the judgments
        _same_counts(table, read_verdicts(path, collapse=collapse))
    wit = read_verdicts(path, criterion="wit", collapse="cells")
    assert VerdictCounts.from_table(wit).total == len(rows)
    with pytest.raises(InputError, match="no rows have criterion 'kindness'; present: care"):
        read_verdicts(path, criterion="kindness")
    with pytest.raises(InputError, match="the file has no criterion column"):
        read_verdicts(_write(tmp_path / "v.csv", rows), criterion="wit")


@pytest.mark.parametrize("collapse", ["rows", "scenarios", "cells"])
def test_streaming_in_tiny_batches_reads_what_one_batch_reads(
    collapse: Any, small: VerdictTable, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = _write(tmp_path / "dataset", _rows(small))
    whole = read_verdicts(path, collapse=collapse)
    monkeypatch.setattr(vf, "BATCH_ROWS", 7)
    _same(read_verdicts(path, collapse=collapse), whole)


def test_a_bad_value_in_a_streamed_batch_names_its_file_and_row(
    small: VerdictTable, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(vf, "BATCH_ROWS", 7)
    rows = _rows(small)
    half = len(rows) // 2
    rows[half + 30]["verdict"] = 5
    with pytest.raises(InputError) as error:
        read_verdicts(_write(tmp_path / "dataset", rows))
    assert error.value.path == str(tmp_path / "dataset" / "part-1.parquet")
    assert error.value.row == 31 and error.value.column == "verdict"


def _features(table: VerdictTable) -> dict[str, list[list[float]]]:
    """Each feature's [first, second] values per row."""
    features = table.features
    assert features is not None
    return {
        name: np.stack([features.first[:, f], features.second[:, f]], axis=1).tolist()
        for f, name in enumerate(features.names)
    }


def test_features_from_numeric_columns(tmp_path: Path) -> None:
    path = tmp_path / "v.csv"
    path.write_text(
        HEADER.strip() + ",first_length,second_length,first_tone,second_tone,first_x\n"
        "s1,a,b,c,1,120,80.5,1,0,9\ns1,a,c,b,2, 7 ,1e3,0.5,-2,9\n"
    )
    table = read_verdicts(path, collapse="cells")  # features keep the rows
    assert len(table) == 2
    assert _features(table) == {"length": [[120, 80.5], [7, 1000]]}  # the default ones
    table = read_verdicts(path, features=["tone", "length"])  # any name, in this order
    assert _features(table) == {"tone": [[1, 0], [0.5, -2]], "length": [[120, 80.5], [7, 1000]]}


def test_features_from_texts_and_columns_first(tmp_path: Path) -> None:
    rows = [
        {"scenario": "s", "judge": "a", "first": "b", "second": "c", "verdict": 1,
         "first_text": "# Title\n\n- one **two**\n- three", "second_text": "plain words",
         "first_bold": 5, "second_bold": 0},
        {"scenario": "s", "judge": "a", "first": "c", "second": "b", "verdict": 0,
         "first_text": "", "second_text": "日本 ok!", "first_bold": 0, "second_bold": 1},
    ]  # fmt: skip
    table = read_verdicts(_write(tmp_path / "v.jsonl", rows))
    assert _features(table) == {
        "length": [[11, 2], [0, 4]],
        "headers": [[1, 0], [0, 0]],
        "lists": [[2, 0], [0, 0]],
        "bold": [[5, 0], [0, 1]],  # the columns, not the texts
    }
    assert _features(read_verdicts(_write(tmp_path / "v.csv", rows))) == _features(table)


@pytest.mark.parametrize("name", ["b.csv", "b.parquet"])
def test_arena_features_from_columns_and_kaggle_turns(name: str, tmp_path: Path) -> None:
    battles = [
        {**b, "response_a": '["a **b**", "c"]', "response_b": "[not json", "length_a": 3,
         "length_b": 4, "model_length_a": 1}
        for b in BATTLES[:2]
    ]  # fmt: skip
    table = read_verdicts(_write(tmp_path / name, battles))
    assert _features(table) == {
        "length": [[3, 4]] * 2,  # the columns
        "headers": [[0, 0]] * 2,
        "lists": [[0, 0]] * 2,
        "bold": [[1, 0]] * 2,  # the turns joined; text that is not a JSON list, as it is
    }
    with pytest.raises(InputError, match="'model': model_a and model_b are not features"):
        read_verdicts(_write(tmp_path / name, battles), features=["model"])
    with pytest.raises(InputError, match="needs columns model_length_a and model_length_b"):
        read_verdicts(_write(tmp_path / name, battles), features=["model_length"])


def _metadata(side: str, tokens: int, headers: int) -> dict[str, Any]:
    return {
        f"sum_assistant_{side}_tokens": tokens,
        f"header_count_{side}": {f"h{i}": headers if i == 2 else 0 for i in range(1, 7)},
        f"list_count_{side}": {"ordered": 1, "unordered": 2},
        f"bold_count_{side}": {"**": 3, "__": 0},
    }


def test_lmarena_conv_metadata_in_a_streamed_parquet_dataset(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(vf, "BATCH_ROWS", 2)
    battles = [
        {"model_a": "x", "model_b": "y", "winner": w, "response_a": "ignored",
         "response_b": "ignored",
         "conv_metadata": {**_metadata("a", 100 + i, i), **_metadata("b", 50, 1), "turns": 1}}
        for i, w in enumerate(["model_a", "both_bad", "tie", "model_b", "model_a"])
    ]  # fmt: skip
    path = _write(tmp_path / "dataset", battles)
    assert pa.types.is_struct(pq.read_schema(path / "part-0.parquet").field("conv_metadata").type)
    table = read_verdicts(path)
    assert table.verdict.tolist() == [1, 0, 0, 2, 1]
    assert _features(table) == {
        "length": [[100 + i, 50] for i in range(5)],
        "headers": [[i, 1] for i in range(5)],
        "lists": [[3, 3]] * 5,
        "bold": [[3, 3]] * 5,
    }
    battles[3]["conv_metadata"]["header_count_b"]["h4"] = None
    with pytest.raises(InputError) as error:
        read_verdicts(_write(tmp_path / "bad", battles), features=["headers"])
    assert error.value.path == str(tmp_path / "bad" / "part-1.parquet")
    assert (error.value.row, error.value.column) == (2, "conv_metadata")
    assert "missing value (None) in header_count_b.h4" in error.value.message


def test_features_stream_with_their_rows_and_criterion(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(vf, "BATCH_ROWS", 3)
    rows = [
        {"scenario": f"s{i // 2}", "judge": "a", "first": "b", "second": "c", "verdict": 1,
         "criterion": ("wit", "care")[i % 2], "first_text": "word " * i, "second_text": "x",
         "first_length": 10 * i, "second_length": 1}
        for i in range(14)
    ]  # fmt: skip
    path = _write(tmp_path / "dataset", rows)
    table = read_verdicts(path, criterion="wit", collapse="cells")
    assert len(table) == 7
    assert _features(table)["length"] == [[10 * i, 1] for i in range(0, 14, 2)]  # the columns
    assert _features(table)["lists"] == [[0, 0]] * 7  # the texts
    whole = read_verdicts(path)
    np.testing.assert_array_equal(whole.weight, 0.5)
    assert _features(whole)["length"] == [[10 * i, 1] for i in range(14)]


def test_features_none_merges_rows_and_available_keeps_them(tmp_path: Path) -> None:
    path = tmp_path / "v.csv"
    path.write_text(
        HEADER.strip() + ",first_text,second_text\n" + "s1,a,b,c,1,hi,ho\n" * 3 + "s2,a,b,c,1,x,y\n"
    )
    assert len(read_verdicts(path, collapse="scenarios")) == 4
    merged = read_verdicts(path, collapse="scenarios", features=None)
    assert len(merged) == 2 and merged.features is None
    assert merged.weight.tolist() == [3, 1]


def test_a_requested_feature_the_file_lacks_names_what_it_needs(tmp_path: Path) -> None:
    path = tmp_path / "v.csv"
    path.write_text(HEADER.strip() + ",first_length,second_length,first_tone\ns,a,b,c,1,1,2,3\n")
    with pytest.raises(InputError) as error:
        read_verdicts(path, features=["length", "bold", "tone"])
    assert error.value.line == 1
    assert (
        "no style feature 'bold': it needs columns first_bold and second_bold or the texts "
        "first_text and second_text; no style feature 'tone': it needs columns first_tone and "
        "second_tone; the file offers length"
    ) in error.value.message
    battles = tmp_path / "b.jsonl"
    _write(battles, BATTLES)
    with pytest.raises(InputError, match="conv_metadata with list_count_a and list_count_b"):
        read_verdicts(battles, features=["lists"])
    assert read_verdicts(battles).features is None  # none offered
    with pytest.raises(ValueError, match="named twice: length"):
        read_verdicts(path, features=["length", "tone", "length"])


@pytest.mark.parametrize(
    ("name", "value", "where", "message"),
    [
        ("v.csv", "oops", {"line": 3}, "'oops' in second_length is not a number"),
        ("v.csv", " NA ", {"line": 3}, "missing value (' NA ') in second_length"),
        ("v.csv", "", {"line": 3}, "missing value ('') in second_length"),
        ("v.csv", "inf", {"line": 3}, "'inf' in second_length is not a finite number"),
        ("v.jsonl", None, {"line": 2}, "missing value (None) in second_length"),
        ("v.jsonl", "12x", {"line": 2}, "'12x' in second_length is not a number"),
        ("v.json", [1], {"row": 2}, "'[1]' in second_length is not a number"),
        ("v.parquet", None, {"row": 2}, "missing value (None) in second_length"),
        ("v.parquet", float("nan"), {"row": 2}, "missing value (nan) in second_length"),
    ],
)
def test_a_bad_feature_value_is_located(
    name: str, value: Any, where: dict[str, int], message: str, tmp_path: Path
) -> None:
    rows = [
        {"scenario": "s", "judge": "a", "first": "b", "second": "c", "verdict": 1,
         "first_length": 1, "second_length": 2},
        {"scenario": "s", "judge": "a", "first": "c", "second": "b", "verdict": 2,
         "first_length": 3, "second_length": value},
    ]  # fmt: skip
    path = _write(tmp_path / name, rows)
    with pytest.raises(InputError) as error:
        read_verdicts(path, features=["length"])
    assert error.value.column == "second_length"
    assert {k: getattr(error.value, k) for k in where} == where
    assert message in error.value.message
    assert "--style none" in error.value.message or "missing" not in message
    if "missing" in message:  # features not named: unknown, for the fit to refuse or not
        table = read_verdicts(path)
        assert table.features is not None and np.isnan(table.features.second[1, 0])


def test_a_reply_without_its_text_is_an_error(tmp_path: Path) -> None:
    battles = [
        {"model_a": "x", "model_b": "y", "winner": "tie", "response_a": "a", "response_b": "b"},
        {"model_a": "y", "model_b": "x", "winner": "tie", "response_a": "c", "response_b": None},
    ]
    path = _write(tmp_path / "b.parquet", battles)
    with pytest.raises(InputError) as error:
        read_verdicts(path, features=["length"])
    assert (error.value.row, error.value.column) == (2, "response_b")
    assert "has no features" in error.value.message
    assert "--style none" in error.value.message
    assert read_verdicts(path, features=None).features is None
    unknown = read_verdicts(path).features  # not named: unknown, NaN
    assert unknown is not None and np.isnan(unknown.second[1]).all()
    assert not np.isnan(unknown.first).any()


@pytest.mark.parametrize("suffix", [".csv", ".jsonl", ".parquet"])
def test_features_are_written_and_read_back(suffix: str, tmp_path: Path) -> None:
    texts = tmp_path / "t.jsonl"
    rows = [
        {"scenario": f"s{i}", "judge": "a", "first": "b", "second": "c", "verdict": i % 3,
         "first_text": "**x** " * i, "second_text": f"# {i}\n- y", "first_tone": i / 3,
         "second_tone": 0.25}
        for i in range(5)
    ]  # fmt: skip
    table = read_verdicts(_write(texts, rows), features=[*DEFAULT_FEATURES, "tone"])
    path = tmp_path / f"v{suffix}"
    write_verdicts(table, path)
    header = pq.read_schema(path).names if suffix == ".parquet" else None
    if header is not None:
        assert header[5:7] == ["first_length", "second_length"]
    back = read_verdicts(path, features=[*DEFAULT_FEATURES, "tone"])
    _same(back, table)
    assert back.features is not None and table.features is not None
    assert back.features.names == table.features.names
    np.testing.assert_array_equal(back.features.first, table.features.first)
    np.testing.assert_array_equal(back.features.second, table.features.second)
    assert vf.verdicts_csv(table).splitlines()[0] == (
        "scenario,judge,first,second,verdict,first_length,second_length,first_headers,"
        "second_headers,first_lists,second_lists,first_bold,second_bold,first_tone,second_tone"
    )


NAMES = ['say "hi"', "a, b", "[bold]x[/]", "日本語-模型", "007", " padded "]


@pytest.mark.parametrize("suffix", [".csv", ".jsonl", ".json", ".parquet"])
def test_odd_names_survive(suffix: str, tmp_path: Path) -> None:
    rows = [
        {"scenario": "0042", "judge": j, "first": f, "second": s, "verdict": "1.0"}
        for j in NAMES
        for f in NAMES
        for s in NAMES
        if f != s
    ]
    table = read_verdicts(_write(tmp_path / f"v{suffix}", rows))
    assert table.models == tuple(sorted(n.strip() for n in NAMES))
    assert table.scenarios == ("0042",)
    assert set(table.verdict.tolist()) == {1}


def test_names_given_as_numbers_or_mixed_with_text_are_read(tmp_path: Path) -> None:
    rows = [
        {"scenario": 1, "judge": "a", "first": "b", "second": "c", "verdict": 1},
        {"scenario": "s2", "judge": 7, "first": "b", "second": "c", "verdict": "2"},
    ]
    for name in ("v.jsonl", "v.json"):
        table = read_verdicts(_write(tmp_path / name, rows))
        assert table.scenarios == ("1", "s2") and table.models == ("7", "a", "b", "c")
        assert table.verdict.tolist() == [1, 2]


@pytest.mark.fuzz
@pytest.mark.parametrize("name", ["v.jsonl", "v.json"])
def test_whole_numbers_beyond_64_bits_are_read_or_refused_never_overflow(
    name: str, tmp_path: Path
) -> None:
    """JSON has no size limit on integers: one beyond 64 bits is a name as text, a
    feature as a float, and a verdict that is not 0, 1 or 2, each located."""
    big = 2**70
    rows = [
        {"scenario": big, "judge": "a", "first": big, "second": "c", "verdict": 1,
         "first_length": big, "second_length": 3},
        {"scenario": "s2", "judge": "a", "first": "b", "second": "c", "verdict": 2,
         "first_length": 1, "second_length": 2},
    ]  # fmt: skip
    table = read_verdicts(_write(tmp_path / name, rows))
    assert str(big) in table.models and str(big) in table.scenarios
    assert table.features is not None and table.features.first[0, 0] == float(big)
    rows[1]["verdict"] = big
    with pytest.raises(InputError) as error:
        read_verdicts(_write(tmp_path / f"bad-{name}", rows))
    assert (error.value.column, error.value.line or error.value.row) == ("verdict", 2)
    assert f"verdict {str(big)!r} is not 0 (tie)" in error.value.message
    rows[1]["verdict"], rows[1]["first_length"] = 1, 10**400  # beyond any float
    with pytest.raises(InputError, match=r"first_length is not a finite number") as error:
        read_verdicts(_write(tmp_path / f"huge-{name}", rows))
    assert len(error.value.message) < 200  # the value is cut short
    text = (tmp_path / f"huge-{name}").read_text().replace(str(10**400), "9" * 5000)
    (tmp_path / f"giant-{name}").write_text(text)  # Python reads no int of 4301+ digits
    with pytest.raises(InputError, match="a whole number of more than 4300 digits"):
        read_verdicts(tmp_path / f"giant-{name}")


@pytest.mark.fuzz
def test_fit_and_agreement_on_numbers_beyond_64_bits_exit_2_without_a_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rows = [
        {"scenario": f"s{i}", "judge": j, "first": f, "second": k, "verdict": v}
        for i in range(4)
        for j in ("x", "y")
        for f, k, v in (("a", "b", 1), ("b", "c", 2), ("c", "a", 0))
    ]
    rows[5]["verdict"] = 2**64
    path = _write(tmp_path / "v.jsonl", rows)
    for argv in (["fit", str(path)], ["agreement", str(path), "--reference", "x"]):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert "Traceback" not in err and "v.jsonl, line 6, column 'verdict'" in err


@pytest.mark.parametrize(
    ("name", "text", "where"),
    [
        ("v.csv", HEADER.replace("verdict", "verdict,verdict") + "s1,a,b,c,1,2\n", "line 1"),
        ("v.csv", "scenario,judge,first,second,verdict, judge \ns1,a,b,c,1,x\n", "line 1"),
        (
            "v.jsonl",
            '{"scenario": "s1", "judge": "a", "first": "b", "second": "c", "verdict": 1, '
            '"verdict": 2}\n',
            "line 1",
        ),
        (
            "v.json",
            '[{"scenario": "s1", "judge": "a", "first": "b", "second": "c", "verdict": 1}, '
            '{"scenario": "s1", "judge": "a", "first": "c", "second": "b", "verdict": 1, '
            '"verdict": 0}]',
            "v.json",
        ),
    ],
)
def test_a_column_given_twice_is_refused_naming_it(
    name: str, text: str, where: str, tmp_path: Path
) -> None:
    """Which of two `verdict` columns is meant is not clear: the CSV reader read the
    first, the JSON readers the last, silently."""
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(InputError) as error:
        read_verdicts(path)
    message = str(error.value)
    assert where in message and name in message
    assert "twice" in message and ("'verdict'" in message or "'judge'" in message)


def test_columns_without_a_name_may_repeat(tmp_path: Path) -> None:
    path = tmp_path / "v.csv"
    path.write_text("scenario,judge,first,second,verdict,,\ns1,a,b,c,1,,\n")  # a spreadsheet's
    assert read_verdicts(path).verdict.tolist() == [1]


@pytest.mark.fuzz
@pytest.mark.parametrize("suffix", [".csv", ".jsonl", ".json"])
@pytest.mark.parametrize("encoding", ["utf-16-le", "utf-16-be", "utf-16", "utf-32-le", "utf-32"])
def test_text_in_utf16_or_utf32_is_named_with_what_to_do(
    suffix: str, encoding: str, tmp_path: Path
) -> None:
    """Without a byte-order mark, UTF-16 text of ASCII characters reads as UTF-8 with a
    NUL after each character, which messages then printed."""
    rows = [{"scenario": "s1", "judge": "Zoë", "first": "b", "second": "日本", "verdict": 1}]
    text = _write(tmp_path / f"plain{suffix}", rows).read_text()
    path = tmp_path / f"v{suffix}"
    path.write_bytes(text.encode(encoding))
    with pytest.raises(InputError) as error:
        read_verdicts(path)
    expected = "UTF-32" if "32" in encoding else "UTF-16"
    assert str(error.value) == (
        f"{path}: this is {expected} text; eigenjury reads UTF-8: save it as UTF-8 (in most "
        "editors: Save As, encoding UTF-8)"
    )


@pytest.mark.fuzz
def test_every_text_input_names_utf16_text(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The check is in the shared readers: configs, contracts, submissions too."""
    config = tmp_path / "rank.yaml"
    config.write_bytes("population: []\n".encode("utf-16-le"))
    contract = tmp_path / "c.yaml"
    contract.write_bytes("tasks: []\n".encode("utf-16-be"))
    for argv, path in (
        (["rank", str(config)], config),
        (["contracts", "check", str(contract)], contract),
    ):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert f"{path}: this is UTF-16 text" in err and "\x00" not in err


def test_a_byte_order_mark_and_a_padded_header_are_read(tmp_path: Path) -> None:
    path = tmp_path / "v.csv"
    path.write_bytes("\ufeffscenario, judge ,first,second,verdict\r\ns1,a,b,c,2\r\n".encode())
    table = read_verdicts(path)
    assert table.models == ("a", "b", "c") and table.verdict.tolist() == [2]


@pytest.mark.parametrize("value", ["", " NA ", "None", "n/a", "null", "NaN"])
def test_missing_values_are_located(value: str, tmp_path: Path) -> None:
    path = tmp_path / "v.csv"
    path.write_text(HEADER + "s1,a,b,c,1\n\n" + f's2,"{value}",b,c,1\n')
    with pytest.raises(InputError) as error:
        read_verdicts(path)
    assert (error.value.line, error.value.column) == (4, "judge")
    assert f"missing value ({value!r})" in error.value.message


def test_lines_are_physical_lines(tmp_path: Path) -> None:
    """Empty lines, quoted line breaks and blank rows before the bad row are counted."""
    path = tmp_path / "v.csv"
    path.write_text(HEADER + '\ns1,a,b,c,1\n"s\n2",a,b,c,1\n,,,,\ns3,a,b,b,1\n')
    with pytest.raises(InputError, match=r"line 7: first and second are both 'b'"):
        read_verdicts(path)
    path.write_text(HEADER + "s1,a,b,c,1\n   \ns3,a,c,b,x\n")  # pyarrow refuses; rows read it
    with pytest.raises(InputError, match=r"line 4, column 'verdict': verdict 'x'"):
        read_verdicts(path)
    path.write_text(HEADER + "s1,a,b,c,1\n,,,,\n , ,,,\n")  # blank rows are skipped
    assert len(read_verdicts(path)) == 1


@pytest.mark.parametrize(
    ("name", "data", "expected"),
    [
        (
            "v.csv",
            b"scenario,judge,first,second,verdict\ns1,a,b,c,1\ns2,a,\xffb,c,1\n",
            ["v.csv, line 3", "not UTF-8"],
        ),
        (
            "v.jsonl",
            b'{"scenario": "s1", "judge": "a", "first": "b", "second": "c", "verdict": 1}\n\n'
            b'{"scenario": "s2", "judge": "\xff", "first": "b", "second": "c", "verdict": 1}\n',
            ["v.jsonl, line 3", "not UTF-8"],
        ),
        (
            "v.csv",
            b"scenario,judge,first,second,verdict\ns1,a,b,c,1\ns2,a,b,c,3\n",
            ["line 3", "column 'verdict'", "'3' is not 0 (tie), 1 (first better) or 2"],
        ),
        (
            "v.jsonl",
            b'{"scenario": "s1", "judge": "a", "first": "b", "second": "c", "verdict": 1.5}\n',
            ["line 1", "column 'verdict'", "1.5 is not 0 (tie)"],
        ),
        (
            "v.jsonl",
            b'{"scenario": "s1", "judge": "a", "first": "b", "second": "c", "verdict": 1}\n'
            b'{"scenario": "s1", "judge": ["a"], "first": "b", "second": "c", "verdict": 1}\n',
            ["line 2", "column 'judge'", "expected a name (text), got a list"],
        ),
        (
            "v.json",
            b'[{"scenario": "s1", "judge": "a", "first": "b", "second": "c", "verdict": 1}, 3]',
            ["v.json, row 2", "expected an object"],
        ),
        ("v.json", b'{"scenario": "s1"}', ["v.json", "expected a JSON array of objects"]),
        ("v.txt", b"", ["v.txt", "unknown file type '.txt'"]),
    ],
)
def test_unreadable_verdict_files_are_located(
    name: str, data: bytes, expected: list[str], tmp_path: Path
) -> None:
    path = tmp_path / name
    path.write_bytes(data)
    with pytest.raises(InputError) as error:
        read_verdicts(path)
    for fragment in expected:
        assert fragment in str(error.value)


def test_parquet_verdicts_outside_0_1_2_name_the_row(tmp_path: Path) -> None:
    path = tmp_path / "v.parquet"
    columns = {"scenario": ["s1", "s2"], "judge": ["a", "a"], "first": ["b", "b"],
               "second": ["c", "c"], "verdict": [1, -1]}  # fmt: skip
    pq.write_table(pa.table(columns), path)
    with pytest.raises(InputError, match=r"v.parquet, row 2, column 'verdict': verdict -1"):
        read_verdicts(path)
    pq.write_table(pa.table({**columns, "judge": [None, True]}), path)
    with pytest.raises(InputError) as error:
        read_verdicts(path)
    assert (error.value.row, error.value.column) == (1, "judge")  # the first bad row
    assert "missing value (None)" in error.value.message
    pq.write_table(pa.table({**columns, "judge": [True, None]}), path)
    with pytest.raises(
        InputError, match=r"row 1, column 'judge': expected a name .text., got true"
    ):
        read_verdicts(path)
    path.write_bytes(b"")
    with pytest.raises(InputError, match="not a readable Parquet file"):
        read_verdicts(path)


@pytest.mark.slow
def test_a_bad_value_in_a_million_rows_names_its_line(tmp_path: Path) -> None:
    n = 1_000_000
    lines = np.char.add(np.char.add("s", np.arange(n).astype(str)), ",a,b,c,1\n")
    lines[n // 2] = f"s{n // 2},a,b,c,first\n"
    path = tmp_path / "v.csv"
    path.write_text(HEADER + "".join(lines.tolist()))
    with pytest.raises(InputError) as error:
        read_verdicts(path)
    assert (error.value.line, error.value.column) == (n // 2 + 2, "verdict")
    assert "verdict 'first' is not" in error.value.message


def test_battle_names_are_a_sequence() -> None:
    names = BattleNames(3)
    assert list(names) == ["battle 1", "battle 2", "battle 3"]
    assert names[-1] == "battle 3" and names[1:] == ["battle 2", "battle 3"]
    with pytest.raises(IndexError):
        names[3]


# Soft verdicts: the judge's label probabilities as p_first, p_second, p_tie.


@pytest.fixture(scope="module")
def soft(small: VerdictTable) -> VerdictTable:
    """`small` with label probabilities in tenths, leaning to the label given."""
    rng = np.random.default_rng(5)
    lean = np.full((len(small), 3), 0.5 / 3)
    lean[np.arange(len(small)), small.verdict] += 0.5
    tenths = np.stack([rng.multinomial(10, p) for p in lean])
    return replace(small, probs=tenths / 10)


def _probability_columns(probs: NDArray[np.float64]) -> dict[str, list[Any]]:
    return {
        "p_first": probs[:, 1].tolist(),
        "p_second": probs[:, 2].tolist(),
        "p_tie": probs[:, 0].tolist(),
    }


def _soft_rows(table: VerdictTable) -> list[dict[str, Any]]:
    assert table.probs is not None
    return _rows(table, **_probability_columns(table.probs))


def _replicated(table: VerdictTable) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Each soft row ten times, and the hard rows they stand for: per row, ten verdicts
    of which 10 p are each label."""
    assert table.probs is not None
    tenths = np.rint(table.probs * 10).astype(int)
    hard = [
        {**row, "verdict": label}
        for row, counts in zip(_rows(table), tenths, strict=True)
        for label in range(3)
        for _ in range(counts[label])
    ]
    return _soft_rows(table) * 10, hard


@pytest.mark.parametrize("suffix", [".csv", ".jsonl", ".parquet"])
def test_soft_verdicts_are_written_and_read_back(
    suffix: str, soft: VerdictTable, tmp_path: Path
) -> None:
    path = tmp_path / f"v{suffix}"
    write_verdicts(soft, path)
    got = read_verdicts(path)
    _same(got, soft)
    assert got.probs is not None and soft.probs is not None
    np.testing.assert_allclose(got.probs, soft.probs, atol=1e-12)
    _same_counts(got, soft)
    thirds = replace(soft, probs=np.full((len(soft), 3), 1 / 3))
    write_verdicts(thirds, path)  # written to 6 digits, read back renormalised
    assert read_verdicts(path).probs == pytest.approx(thirds.probs, abs=1e-15)


def test_the_probability_columns_follow_the_verdict_and_hard_tables_lack_them() -> None:
    hard = VerdictTable.from_columns(["s", "s"], ["j", "j"], ["a", "b"], ["b", "a"], [1, 0])
    assert (
        vf.verdicts_csv(hard) == "scenario,judge,first,second,verdict\r\ns,j,a,b,1\r\ns,j,b,a,0\r\n"
    )
    probs = [[0.25, 0.5, 0.25], [2 / 3, 1 / 6, 1 / 6]]
    text = vf.verdicts_csv(replace(hard, probs=np.array(probs)), criterion=["wit", "wit"])
    assert text.splitlines() == [
        "scenario,judge,first,second,verdict,criterion,p_first,p_second,p_tie",
        "s,j,a,b,1,wit,0.5,0.25,0.25",
        "s,j,b,a,0,wit,0.166667,0.166667,0.666667",
    ]


@pytest.mark.parametrize("name", ["v.csv", "v.jsonl", "v.json", "v.parquet", "dataset"])
def test_soft_rows_count_as_the_hard_rows_they_stand_for(
    name: str, soft: VerdictTable, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(vf, "BATCH_ROWS", 500)  # several merges while streaming
    soft_rows, hard_rows = _replicated(soft)
    soft_path = _write(tmp_path / name, soft_rows)
    hard_path = _write(tmp_path / f"hard-{name}", hard_rows)
    for collapse in vf.COLLAPSES:
        got = read_verdicts(soft_path, collapse=collapse)
        assert (got.probs is not None) == (collapse == "rows")  # merged: fractional weights
        _same_counts(
            got, read_verdicts(hard_path, collapse=collapse), scenarios=collapse != "cells"
        )
    rows = read_verdicts(soft_path)
    assert rows.probs is not None and len(rows) == len(soft_rows)
    np.testing.assert_array_equal(rows.verdict, np.tile(soft.verdict, 10))  # the labels given


@pytest.mark.slow
def test_a_soft_file_fits_as_its_replicated_hard_file(soft: VerdictTable, tmp_path: Path) -> None:
    soft_rows, hard_rows = _replicated(soft)
    soft_path = _write(tmp_path / "soft.csv", soft_rows)
    hard_path = _write(tmp_path / "hard.csv", hard_rows)
    elo = _elo(read_verdicts(hard_path))
    for collapse in vf.COLLAPSES:
        np.testing.assert_allclose(
            _elo(read_verdicts(soft_path, collapse=collapse)), elo, rtol=1e-6
        )
    hard_only = _elo(read_verdicts(_write(tmp_path / "labels.csv", _rows(soft) * 10)))
    assert np.abs(hard_only - elo).max() > 1.0  # the probabilities matter
    records = []
    for path, rounds in ((hard_path, "40"), (soft_path, "40"), (soft_path, "0")):
        out = tmp_path / f"fit{len(records)}.json"
        assert main(["fit", str(path), "--bootstrap", rounds, "--out", str(out)]) == 0
        records.append({m["name"]: m for m in json.loads(out.read_text())["models"]})
    for name, model in records[0].items():  # scenarios (bootstrap), and cells
        assert records[1][name]["elo_ci"] == pytest.approx(model["elo_ci"], rel=1e-6)
        assert records[1][name]["elo"] == pytest.approx(model["elo"], rel=1e-6)
        assert records[2][name]["elo"] == pytest.approx(model["elo"], rel=1e-6)


@pytest.mark.parametrize("name", ["v.csv", "v.jsonl", "v.json", "v.parquet"])
def test_hard_and_soft_rows_mix_and_the_verdict_is_optional(name: str, tmp_path: Path) -> None:
    rows: list[dict[str, Any]] = [
        {"scenario": "s", "judge": "j", "first": "a", "second": "b", "verdict": 1},  # hard
        {"scenario": "s", "judge": "j", "first": "b", "second": "a", "verdict": 0},
        {"scenario": "t", "judge": "j", "first": "a", "second": "b", "verdict": None},
        {"scenario": "t", "judge": "j", "first": "b", "second": "a", "verdict": None},
        {"scenario": "u", "judge": "j", "first": "a", "second": "b", "verdict": 2},
    ]
    given = [(None,) * 3, (None,) * 3, (0.1, 0.7, 0.2), (0.4, 0.4, 0.2), (0.6, 0.1, 0.3001)]
    for row, (p_first, p_second, p_tie) in zip(rows, given, strict=True):
        row.update(p_first=p_first, p_second=p_second, p_tie=p_tie)
    table = read_verdicts(_write(tmp_path / name, rows))
    assert table.verdict.tolist() == [1, 0, 2, 1, 2]  # the most probable; the label given
    assert table.probs is not None
    np.testing.assert_allclose(
        table.probs,
        [
            [0, 1, 0],
            [1, 0, 0],
            [0.2, 0.1, 0.7],
            [0.2, 0.4, 0.4],
            np.array([0.3001, 0.6, 0.1]) / 1.0001,
        ],
    )
    unlabelled = [{k: v for k, v in row.items() if k != "verdict"} for row in rows[2:4]]
    table = read_verdicts(_write(tmp_path / f"bare-{name}", unlabelled))
    assert table.verdict.tolist() == [2, 1]  # equal first and second: the first


@pytest.mark.parametrize(
    ("name", "where"),
    [
        ("v.csv", {"line": 4}),
        ("v.jsonl", {"line": 3}),
        ("v.json", {"row": 3}),
        ("v.parquet", {"row": 3}),
    ],
)
@pytest.mark.parametrize(
    ("p", "column", "message"),
    [
        (
            (1.25, -0.25, 0.0),
            "p_first, p_second",
            "label probabilities p_first 1.25, p_second -0.25, p_tie 0.0 (sum 1): each must "
            "lie in [0, 1] and the three must sum to 1 (within 0.001)",
        ),
        ((0.5, 0.3, 0.19), "p_first, p_second, p_tie", "p_tie 0.19 (sum 0.99)"),
        ((0.5, 0.5, "none of it"), "p_tie", "'none of it' in p_tie is not a number"),
        (
            (0.5, None, 0.5),
            "p_second",
            "missing value(s) in p_second; a soft verdict needs all three of p_first, "
            "p_second, p_tie, a hard verdict none",
        ),
        ((None, None, None), "verdict", "needs a value here or all of p_first, p_second, p_tie"),
    ],
)
def test_a_bad_probability_is_located(
    name: str,
    where: dict[str, int],
    p: tuple[Any, Any, Any],
    column: str,
    message: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    rows = [
        {"scenario": "s", "judge": "j", "first": "a", "second": "b", "verdict": 1} for _ in range(4)
    ]
    for row in rows:
        row.update(p_first=0.25, p_second=0.5, p_tie="0.25" if isinstance(p[2], str) else 0.25)
    rows[2].update(p_first=p[0], p_second=p[1], p_tie=p[2], verdict=None)
    path = _write(tmp_path / name, rows)
    with pytest.raises(InputError) as error:
        read_verdicts(path)
    assert (error.value.path, error.value.column) == (str(path), column)
    assert (error.value.line, error.value.row) == (where.get("line"), where.get("row"))
    assert message in error.value.message
    assert main(["fit", str(path), "--bootstrap", "0"]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


@pytest.mark.parametrize("name", ["v.csv", "v.parquet"])
def test_two_probability_columns_of_three_name_the_third(name: str, tmp_path: Path) -> None:
    rows = [
        {
            "scenario": "s",
            "judge": "j",
            "first": "a",
            "second": "b",
            "p_first": 0.6,
            "p_second": 0.4,
        }
    ]
    with pytest.raises(InputError) as error:
        read_verdicts(_write(tmp_path / name, rows))
    assert error.value.path == str(tmp_path / name)
    assert "missing column(s) p_tie; found p_first, p_second: soft verdicts need all three" in (
        error.value.message
    )
    assert "p_tie without ties" in error.value.message


@pytest.mark.slow
def test_soft_verdicts_stream_through_a_dataset_with_their_criteria(
    soft: VerdictTable, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert soft.probs is not None
    rows = [{**row, "criterion": c} for row in _soft_rows(soft) for c in ("care", "wit", "tact")]
    for i, row in enumerate(rows[::2]):  # half the criterion rows hard
        row.update(p_first=None, p_second=None, p_tie=None, verdict=i % 3)
    for row in rows[1::4]:  # some soft ones without a label
        row["verdict"] = None
    path = _write(tmp_path / "dataset", rows)
    whole = {c: read_verdicts(path, collapse=c) for c in vf.COLLAPSES}
    assert VerdictCounts.from_table(whole["rows"]).total == pytest.approx(len(soft))  # judgments
    monkeypatch.setattr(vf, "BATCH_ROWS", 7)
    for collapse, table in whole.items():
        streamed = read_verdicts(path, collapse=collapse)
        _same(streamed, table)
        _same_counts(streamed, whole["rows"], scenarios=collapse != "cells")
    rows[len(rows) // 2 + 5]["p_tie"] = 2.0
    with pytest.raises(InputError) as error:
        read_verdicts(_write(tmp_path / "bad", rows))
    assert error.value.path == str(tmp_path / "bad" / "part-1.parquet")
    assert error.value.row == 6 and error.value.column == "p_tie"


def test_the_row_by_row_twin_tells_every_field_apart(small: VerdictTable, tmp_path: Path) -> None:
    """The comparison every read above makes can fail: a table that differs from the
    twin's in any one field is told apart."""
    n = len(small)
    rows = _rows(
        small,
        first_length=list(range(n)),
        second_length=[7] * n,
        p_first=[0.5] * n,
        p_second=[0.3] * n,
        p_tie=[0.2] * n,
    )
    path = _write(tmp_path / "v.jsonl", rows)
    table, twin = read_verdicts(path), read_reference(path)
    assert table.features is not None and table.probs is not None
    verdict = table.verdict.copy()
    verdict[0] = (verdict[0] + 1) % 3
    weight = table.weight.copy()
    weight[-1] *= 1.5
    changed = {
        "verdict": verdict,
        "models": table.models[::-1],
        "scenarios": tuple(table.scenarios)[::-1],
        "weight": weight,
        "probs": table.probs[:, ::-1],
        "features": replace(table.features, first=table.features.first + 1),
    }
    for field, value in changed.items():
        with pytest.raises(AssertionError):
            assert_same_tables(replace(table, **{field: value}), twin)


@pytest.mark.parametrize("collapse", ["rows", "cells"])
def test_question_ids_trimmed_alike_are_one_question(tmp_path: Path, collapse: str) -> None:
    """Arena battles with a question id each: ids that differ only in surrounding
    spaces are one question, whether the ids need re-encoding or not, and the
    questions' names read back sorted however the point fit leaves them."""
    path = tmp_path / "battles.csv"
    ids = ["q3", "q1", " q1", "q2 ", "q10"]
    lines = ["model_a,model_b,winner,question_id"]
    lines += [f"m{i % 2},m{(i + 1) % 2},model_a,{q}" for i, q in enumerate(ids)]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    table = vf.read_verdicts(path, collapse=collapse)  # type: ignore[arg-type]
    assert len(table.scenarios) == 4
    assert table.scenarios == ("q1", "q10", "q2", "q3")
    assert list(table.scenarios)[1:3] == ["q10", "q2"]
    lines = lines[:2] + lines[4:]  # every id distinct and untrimmed
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    table = vf.read_verdicts(path, collapse=collapse)  # type: ignore[arg-type]
    assert tuple(table.scenarios) == ("q10", "q2", "q3") and table.scenarios[-1] == "q3"
    assert ("q10", "q2", "q3") == table.scenarios  # noqa: SIM300 (the reflected ==)
