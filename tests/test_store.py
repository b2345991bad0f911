"""The store: content-addressed keys, success never overwritten, exports."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from eigenjury.engine.store import Store, StoredResult, canonical_json, request_key
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
