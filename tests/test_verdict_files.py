"""Reading verdict and battle files: every format and convention, collapse, streaming,
lengths, and located errors found without a loop over rows."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import eigenjury.verdict_files as vf
from eigenjury.errors import InputError
from eigenjury.stats import (
    PeerRanking,
    ScenarioCounts,
    VerdictCounts,
    VerdictTable,
    make_population,
    simulate_verdicts,
)
from eigenjury.verdict_files import BattleNames, read_verdicts, write_verdicts

HEADER = "scenario,judge,first,second,verdict\n"


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
        for field in ("entry_scenario", "entry_slot", "entry_weight"):
            np.testing.assert_allclose(getattr(sa, field), getattr(sb, field), err_msg=field)
        assert sa.n_scenarios == sb.n_scenarios


@pytest.mark.parametrize("name", ["v.csv", "v.jsonl", "v.json", "v.parquet", "dataset"])
def test_every_format_reads_the_same_table(name: str, small: VerdictTable, tmp_path: Path) -> None:
    got = read_verdicts(_write(tmp_path / name, _rows(small)))
    _same(got, small)
    assert got.lengths is None


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
]


@pytest.mark.parametrize("name", ["b.csv", "b.jsonl", "b.json", "b.parquet"])
def test_arena_battles_the_four_winners_and_both_ties(name: str, tmp_path: Path) -> None:
    table = read_verdicts(_write(tmp_path / name, BATTLES))
    assert table.models == ("crowd", "x", "y", "z")
    assert [table.models[j] for j in table.judge] == ["crowd"] * 4
    assert [table.models[f] for f in table.first] == ["x", "y", "z", "x"]
    assert [table.models[s] for s in table.second] == ["y", "z", "x", "z"]
    assert table.verdict.tolist() == [1, 2, 0, 0]  # a tie either way
    assert isinstance(table.scenarios, BattleNames)
    assert len(table.scenarios) == 4 and table.scenarios[3] == "battle 4"
    assert table.scenario.tolist() == [0, 1, 2, 3]  # each battle its own scenario


@pytest.mark.parametrize("name", ["k.csv", "k.parquet"])
def test_the_one_hot_winner_form(name: str, tmp_path: Path) -> None:
    """Kaggle's arena-human-preference files: the winner as three 0/1 columns."""
    flags = [(1, 0, 0), (0, 1, 0), (0, 0, 1)]
    battles = [
        {
            "id": i,
            "model_a": a,
            "model_b": b,
            "response_a": '["hi"]',
            "response_b": '["x"]',
            "winner_model_a": f[0],
            "winner_model_b": f[1],
            "winner_tie": f[2],
        }
        for i, (a, b, f) in enumerate(zip("xyz", "yzx", flags, strict=True))
    ]
    table = read_verdicts(_write(tmp_path / name, battles))
    assert table.verdict.tolist() == [1, 2, 0] and table.models == ("crowd", "x", "y", "z")
    np.testing.assert_array_equal(table.lengths, [[6, 5]] * 3)
    battles[1]["winner_tie"] = 1
    with pytest.raises(InputError) as error:
        read_verdicts(_write(tmp_path / f"bad-{name}", battles))
    assert error.value.column == "winner_model_a, winner_model_b, winner_tie"
    assert (error.value.line, error.value.row) == ((3, None) if name == "k.csv" else (None, 2))
    assert "'0,1,1' is not a single 1 among the three" in error.value.message


def test_question_ids_are_the_scenarios_and_judges_may_be_mixed(tmp_path: Path) -> None:
    battles = [
        {**b, "question_id": q, "judge": j}
        for b, q, j in zip(BATTLES, [7, 7, 8, 9], ["human", "gpt", "human", "x"], strict=True)
    ]
    table = read_verdicts(_write(tmp_path / "b.jsonl", battles))
    assert table.scenarios == ("7", "8", "9")
    assert table.scenario.tolist() == [0, 0, 1, 2]
    assert table.models == ("gpt", "human", "x", "y", "z")
    assert [table.models[j] for j in table.judge] == ["human", "gpt", "human", "x"]


def test_a_model_named_like_the_crowd_judge_needs_a_judge_column(tmp_path: Path) -> None:
    battles = [*BATTLES, {"model_a": "y", "model_b": "crowd", "winner": "tie"}]
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
    assert "winner 'model_c' is not model_a, model_b, tie or tie (bothbad)" in str(error.value)


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


def test_lengths_from_numbers_and_from_texts(tmp_path: Path) -> None:
    path = tmp_path / "v.csv"
    path.write_text(
        HEADER.strip() + ",first_length,second_length\n"
        "s1,a,b,c,1,120,80.5\ns1,a,c,b,2,,NA\ns2,b,a,c,0,7,oops\n"
    )
    lengths = read_verdicts(path, collapse="cells").lengths  # lengths keep the rows
    np.testing.assert_array_equal(lengths, [[120, 80.5], [np.nan, np.nan], [7, np.nan]])
    texts = [
        {"model_a": "x", "model_b": "y", "winner": "tie", "response_a": "héllo", "response_b": ""},
        {"model_a": "y", "model_b": "x", "winner": "tie", "response_a": "日本", "response_b": None},
    ]
    lengths = read_verdicts(_write(tmp_path / "b.parquet", texts)).lengths
    np.testing.assert_array_equal(lengths, [[5, 0], [2, np.nan]])
    numbers = [{**t, "length_a": 3, "length_b": None} for t in texts]
    lengths = read_verdicts(_write(tmp_path / "n.jsonl", numbers)).lengths
    np.testing.assert_array_equal(lengths, [[3, np.nan], [3, np.nan]])  # numbers first


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
