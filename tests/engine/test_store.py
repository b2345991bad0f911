"""The store: content-addressed keys, success never overwritten, exports."""

from __future__ import annotations

import json
import random
import sqlite3
import subprocess
import sys
import threading
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from eigenjury.engine import store as store_module
from eigenjury.engine.store import Store, StoredResult, StoreError, canonical_json, request_key
from eigenjury.models import ChatRequest, Completion, ModelSpec, Usage

SPEC = ModelSpec.parse("openai-compatible:m@http://127.0.0.1:9/v1")
REQUEST = ChatRequest.chat(("user", "hi"), temperature=0.0, seed=1)


def _result(key: str, text: str | None, kind: str | None = None) -> StoredResult:
    completion = None if text is None else Completion(text, "stop", Usage(2, 3), 0.1, 0.001)
    return StoredResult(
        key,
        str(SPEC),
        canonical_json(REQUEST.identity()),
        0,
        completion,
        kind,
        None if kind is None else f"{kind} failure",
        2,
    )


def test_every_determining_field_changes_the_key() -> None:
    base = request_key(SPEC, REQUEST)
    variants = [
        request_key(SPEC, REQUEST, sample=1),
        request_key(SPEC, ChatRequest.chat(("user", "hi"), temperature=0.5, seed=1)),
        request_key(SPEC, ChatRequest.chat(("user", "hi"), temperature=0.0, seed=2)),
        request_key(SPEC, ChatRequest.chat(("user", "hi!"), temperature=0.0, seed=1)),
        request_key(ModelSpec.parse("openai-compatible:n@http://127.0.0.1:9/v1"), REQUEST),
        request_key(ModelSpec.parse("openai-compatible:m@http://127.0.0.1:8/v1"), REQUEST),
    ]
    assert len({base, *variants}) == 7
    # credentials in the URL are not part of the identity
    with_user = ModelSpec.parse("openai-compatible:m@http://u:pw@127.0.0.1:9/v1")
    assert request_key(with_user, REQUEST) == base


def test_the_key_is_the_hash_of_the_canonical_identity() -> None:
    import hashlib

    identity = {"v": 1, "spec": SPEC.identity(), "request": REQUEST.identity(), "sample": 3}
    expected = hashlib.sha256(canonical_json(identity).encode()).hexdigest()
    assert request_key(SPEC, REQUEST, sample=3) == expected


def test_keys_are_stable_across_processes() -> None:
    code = (
        "from eigenjury.engine.store import request_key;"
        "from eigenjury.models import ChatRequest, ModelSpec;"
        "print(request_key(ModelSpec.parse('openai-compatible:m@http://127.0.0.1:9/v1'),"
        "ChatRequest.chat(('user', 'hi'), temperature=0.0, seed=1)))"
    )
    outputs = {
        subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            check=True,
            env={"PYTHONHASHSEED": str(seed)},
        ).stdout.strip()
        for seed in (1, 2)
    }
    assert outputs == {request_key(SPEC, REQUEST)}


def test_a_success_is_never_replaced_and_errors_are_kept_apart(tmp_path: Path) -> None:
    with Store(tmp_path / "s.sqlite") as store:
        store.put_many([_result("a", None, "server"), _result("b", "fine")])
        assert store.get("a").error_kind == "server"  # type: ignore[union-attr]
        assert store.get("a").completion is None  # type: ignore[union-attr]
        store.put_many([_result("a", "recovered"), _result("b", None, "timeout")])
        assert store.get("a").completion.text == "recovered"  # type: ignore[union-attr]
        assert store.get("b").completion.text == "fine"  # type: ignore[union-attr]
        assert store.counts() == {"ok": 2}
    with Store(tmp_path / "s.sqlite") as reopened:  # committed means durable
        got = reopened.get("b")
        assert got is not None and got.completion is not None
        assert got.completion.usage == Usage(2, 3) and got.completion.cost_usd == 0.001


def strict_json(text: str) -> Any:
    """JSON as the standard has it: NaN and Infinity are not JSON."""

    def refuse(constant: str) -> Any:
        raise ValueError(f"{constant} is not JSON")

    return json.loads(text, parse_constant=refuse)


@pytest.mark.parametrize("bad", [float("nan"), float("-inf"), float("inf")])
def test_a_stored_success_with_non_finite_scores_is_read_as_malformed_and_replaced(
    tmp_path: Path, bad: float
) -> None:
    """A store written before such replies were refused holds them as successes: they are
    read as the malformed replies they were (exported as such, in valid JSON), and the
    next result for the call replaces them; a sound success is still never replaced."""
    scores = {"A": bad, "B": -1.0}
    broken = replace(
        _result("a", "A"),
        completion=Completion("A", "stop", choice_logprobs=scores),
        created_at=1.0,
    )
    sound = replace(
        broken, key="b", completion=Completion("B", "stop", choice_logprobs={"B": -0.5})
    )
    with Store(tmp_path / "s.sqlite") as store:
        store.put_many([broken, sound])
        assert store.get("b") == sound
        read = store.get("a")
        assert read is not None and read.completion is None and read.error_kind == "malformed"
        assert read.error_message is not None and "not finite" in read.error_message
        store.export(tmp_path / "out.jsonl")
        lines = [strict_json(x) for x in (tmp_path / "out.jsonl").read_text().splitlines()]
        assert {r["key"]: (r["status"], r["choice_logprobs"]) for r in lines} == {
            "a": ("error", None),
            "b": ("ok", {"B": -0.5}),
        }
        fixed = replace(broken, completion=Completion("A", "stop", choice_logprobs={"A": -0.1}))
        store.put_many([fixed, replace(fixed, key="b")])
        assert store.get("a") == fixed and store.get("b") == sound


@pytest.mark.parametrize("suffix", [".jsonl", ".parquet"])
def test_export(tmp_path: Path, suffix: str) -> None:
    with Store(tmp_path / "s.sqlite") as store:
        store.put_many([_result("a", "one"), _result("b", None, "auth")])
        assert store.export(tmp_path / f"out{suffix}") == 2
    if suffix == ".jsonl":
        rows = [json.loads(x) for x in (tmp_path / "out.jsonl").read_text().splitlines()]
    else:
        import pyarrow.parquet as pq

        rows = pq.read_table(tmp_path / "out.parquet").to_pylist()
    by_key = {r["key"]: r for r in rows}
    assert by_key["a"]["text"] == "one" and by_key["a"]["status"] == "ok"
    assert by_key["b"]["status"] == "error" and by_key["b"]["text"] is None
    assert by_key["b"]["error_kind"] == "auth"


def _varied_rows(n: int, seed: int) -> list[StoredResult]:
    """Successes with and without costs and choice log-probabilities, and errors, at
    times drawn with ties (order then falls to the key)."""
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        kind = rng.random()
        if kind < 0.2:
            completion = None
        else:
            logprobs = {"A": -0.1, "B": -2.5} if kind > 0.8 else None
            cost = None if kind < 0.5 else rng.random() / 100
            completion = Completion(f"reply {i}", "stop", Usage(i, 2 * i), 0.5, cost, logprobs)
        rows.append(
            StoredResult(
                f"k{rng.getrandbits(64):016x}{i}",
                str(SPEC),
                canonical_json(ChatRequest.chat(("user", f"q {i}")).identity()),
                i % 3,
                completion,
                None if completion else "server",
                None if completion else f"failure {i}",
                1 + i % 4,
                1.7e9 + rng.randrange(n // 4),
            )
        )
    return rows


def _parquet_rows(path: Path) -> list[dict[str, Any]]:
    import pyarrow.parquet as pq

    return list(pq.read_table(path).to_pylist())


def _flat(result: StoredResult) -> dict[str, Any]:
    """A Parquet row as exports wrote it when they built the whole table at once."""
    r = result.record()
    logprobs = r["choice_logprobs"]
    return {
        **r,
        "request": canonical_json(r["request"]),
        "choice_logprobs": canonical_json(logprobs) if logprobs else None,
    }


@pytest.mark.slow
def test_a_large_export_streams_every_row_oldest_first(tmp_path: Path) -> None:
    import pyarrow.parquet as pq

    rows = _varied_rows(50_000, seed=1)
    with Store(tmp_path / "s.sqlite") as store:
        store.put_many(rows)
        listed = list(store)
        assert store.export(tmp_path / "all.jsonl") == store.export(tmp_path / "all.parquet")
    expected = sorted(rows, key=lambda r: (r.created_at, r.key))
    assert [r.key for r in listed] == [r.key for r in expected]
    assert listed == expected
    jsonl = (tmp_path / "all.jsonl").read_text().splitlines()
    assert jsonl == [canonical_json(r.record()) for r in listed]
    assert _parquet_rows(tmp_path / "all.parquet") == [_flat(r) for r in listed]
    assert pq.ParquetFile(tmp_path / "all.parquet").num_row_groups == 5  # written in pages


def test_a_parquet_export_keeps_its_types_when_a_page_holds_only_nulls(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    monkeypatch.setattr(store_module, "_PAGE", 2)
    rows = [replace(_result(f"e{i}", None, "server"), created_at=1.0 + i) for i in range(2)]
    rows += [replace(_result(f"o{i}", "fine"), created_at=3.0 + i) for i in range(2)]
    with Store(tmp_path / "s.sqlite") as store:
        store.put_many(rows)
        assert store.export(tmp_path / "out.parquet") == 4
        whole = pa.Table.from_pylist([_flat(r) for r in store])  # the table built at once
    schema = pq.read_schema(tmp_path / "out.parquet")
    assert schema.field("cost_usd").type == pa.float64()
    assert schema.field("text").type == schema.field("choice_logprobs").type == pa.string()
    assert _parquet_rows(tmp_path / "out.parquet") == whole.to_pylist()
    assert [r["cost_usd"] for r in whole.to_pylist()] == [None, None, 0.001, 0.001]


def test_an_empty_store_exports_its_columns(tmp_path: Path) -> None:
    import pyarrow.parquet as pq

    with Store(tmp_path / "s.sqlite") as store:
        assert store.export(tmp_path / "out.parquet") == store.export(tmp_path / "o.jsonl") == 0
    table = pq.read_table(tmp_path / "out.parquet")
    assert table.num_rows == 0 and "created_at" in table.column_names
    assert (tmp_path / "o.jsonl").read_text() == ""


def test_absorb_adds_another_store_page_by_page(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(store_module, "_PAGE", 3)
    source_rows = _varied_rows(10, seed=2)
    with Store(tmp_path / "old.sqlite") as old:
        old.put_many(source_rows)
    ok = next(r for r in source_rows if r.ok)
    with Store(tmp_path / "new.sqlite") as store:
        store.put_many([replace(ok, completion=None, error_kind="server")])
        assert store.absorb(tmp_path / "old.sqlite") == 10
        assert {r.key: r for r in store} == {r.key: r for r in source_rows}


def test_a_row_the_store_cannot_hold_never_holds_back_the_others(tmp_path: Path) -> None:
    too_big = replace(_result("big", "paid for"), sample=2**64)  # beyond a SQLite INTEGER
    not_encodable = _result("surrogate", "half a pair: \ud800")
    with Store(tmp_path / "s.sqlite") as store:
        left_out = store.put_many(
            [_result("a", "one"), too_big, not_encodable, _result("b", "two")]
        )
        assert set(left_out) == {"big", "surrogate"}
        assert "too large" in left_out["big"] and "surrogates" in left_out["surrogate"]
        assert store.counts() == {"ok": 2}  # the good rows were committed all the same
        assert store.get("a") is not None and store.get("b") is not None


@pytest.mark.parametrize(
    "statement",
    ["BEGIN IMMEDIATE", "PRAGMA locking_mode=EXCLUSIVE; BEGIN EXCLUSIVE; SELECT 1"],
)
def test_a_locked_store_waits_says_so_and_keeps_every_result(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    statement: str,
) -> None:
    monkeypatch.setattr(store_module, "BUSY_TIMEOUT_MS", 20)  # each try gives up fast ...
    monkeypatch.setattr(store_module, "LOCK_REPORT_S", 0.1)  # ... and the wait is reported
    path = tmp_path / "s.sqlite"
    Store(path).close()
    other = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    for part in statement.split("; "):
        other.execute(part)
    notes: list[str] = []
    threading.Timer(0.5, other.close).start()
    with Store(path) as store:  # (an exclusive lock holds back even opening it)
        assert store.put_many([_result("a", "one"), _result("b", "two")], notify=notes.append) == {}
        assert store.counts() == {"ok": 2}
    notes += capsys.readouterr().err.splitlines()  # (waits outside a run go to stderr)
    assert notes and all(str(path) in n and "lock" in n and "nothing is lost" in n for n in notes)


def _foreign(path: Path) -> None:
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE people (name TEXT)")
    db.commit()
    db.close()


def _damaged(path: Path) -> None:
    with Store(path) as store:
        store.put_many([_result(f"k{i}", "x" * 500) for i in range(200)])
    data = bytearray(path.read_bytes())
    data[5000:9000] = b"\x13" * 4000  # pages of the table overwritten
    path.write_bytes(bytes(data))


@pytest.mark.parametrize(
    ("make", "expected"),
    [
        (lambda p: p.write_bytes(bytes(range(256)) * 20), "not an eigenjury store"),
        (lambda p: p.mkdir(), "this is a folder"),
        (_foreign, "database of another program (tables: people)"),
        (_damaged, "damaged"),
    ],
)
def test_a_file_that_is_not_a_store_is_named_with_what_to_do(
    tmp_path: Path, make: Callable[[Path], None], expected: str
) -> None:
    path = tmp_path / "s.sqlite"
    make(path)
    with pytest.raises(StoreError) as caught, Store(path) as store:
        store.get_many(["k1"])  # damage can show only when the data is read
        list(store)
    message = str(caught.value)
    assert message.startswith(str(path)) and expected in message
    assert "another path (--store NEW_FILE)" in message or "give a file path" in message
    if make is _foreign:  # someone else's database is left exactly as it was
        db = sqlite3.connect(path)
        assert db.execute("SELECT name FROM sqlite_master").fetchall() == [("people",)]
        assert db.execute("PRAGMA journal_mode").fetchone() == ("delete",)
