"""The store: content-addressed keys, success never overwritten, exports."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import threading
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

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
