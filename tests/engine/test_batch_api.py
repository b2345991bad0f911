"""The batch-api backend against the test server's fakes of OpenAI's and Anthropic's
batch endpoints (testing/batch_fakes.py): every call sent once and committed once, at
half price; partial failure, expiry, lost and refused sends; a process killed while it
waits, and two processes at once, on the same calls."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from eigenjury.engine import Call, Engine, Store
from eigenjury.engine.batch_api import BatchApiBackend
from eigenjury.engine.engine import Budget
from eigenjury.engine.journal import (
    SUBMIT_LEASE_S,
    BatchRow,
    claim,
    claims,
    create,
    prune,
    submitted,
)
from eigenjury.engine.plan import history_of
from eigenjury.engine.store import StoredResult, request_key
from eigenjury.models import ChatRequest, ModelSpec
from eigenjury.models.batch_apis import AnthropicBatches, batch_api
from eigenjury.models.factory import make_provider
from eigenjury.models.prices import Price, PriceTable
from eigenjury.models.providers.anthropic import AnthropicProvider
from eigenjury.models.types import Completion
from eigenjury.models.verdict_format import read_structured
from eigenjury.testing.batch_fakes import BatchSettings
from eigenjury.testing.server import FaultServer, Judging, ServerThread

KEY = "sk-batch-test-secret"
PROVIDERS = ("openai", "anthropic")
PRICE = Price(2.0, 8.0)


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[FaultServer]:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    monkeypatch.setenv("OPENAI_COMPATIBLE_API_KEY", KEY)
    with ServerThread(api_key=KEY) as served:
        yield served


def _spec(provider: str, server: FaultServer, model: str = "m1") -> ModelSpec:
    return ModelSpec.parse(f"{provider}:{model}@{server.base_url}")


def _calls(spec: ModelSpec, n: int, **params: object) -> list[Call]:
    return [
        Call(spec, ChatRequest.chat(("user", f"q {i}"), max_tokens=20, **params)) for i in range(n)
    ]  # type: ignore[arg-type]


def _engine(store: Path, *, backend: bool = True, **options: object) -> Engine:
    prices = PriceTable({f"{p}:m1": PRICE for p in PROVIDERS})
    return Engine(
        Store(store),
        backend=BatchApiBackend(poll_s=0.05, gather_s=0.05, first_poll_s=0.02, lease_s=0.3)
        if backend
        else None,
        prices=prices,
        progress=False,
        **options,  # type: ignore[arg-type]
    )


@pytest.mark.parametrize("provider", PROVIDERS)
def test_each_call_is_sent_once_and_committed_at_half_the_price(
    server: FaultServer, provider: str, tmp_path: Path
) -> None:
    spec = _spec(provider, server)
    results = _engine(tmp_path / "s.sqlite").run_sync(_calls(spec, 40))
    assert [r.completion.text for r in results if r.completion] == [
        f"reply to: q {i}" for i in range(40)
    ]
    assert server.stats()["most_sends_for_one_batch_call"] == 1
    assert server.stats()["batches"] == 1 and server.requests == 0  # no live call
    for r in results:
        assert r.completion is not None and r.attempts == 1
        assert r.completion.cost_usd == pytest.approx(PRICE.cost(r.completion.usage) / 2)
    live = _engine(tmp_path / "live.sqlite", backend=False).run_sync(_calls(spec, 40))
    assert [r.completion for r in live] != [r.completion for r in results]  # (latency differs)
    assert sum(r.completion.cost_usd for r in live if r.completion) == pytest.approx(
        2 * sum(r.completion.cost_usd for r in results if r.completion)
    )
    with Store(tmp_path / "s.sqlite") as store:
        assert store.counts() == {"ok": 40}
    assert KEY.encode() not in (tmp_path / "s.sqlite").read_bytes()


@pytest.mark.parametrize("provider", PROVIDERS)
def test_failed_calls_are_sent_again_rejected_and_expired_ones_end_as_errors(
    server: FaultServer, provider: str, tmp_path: Path
) -> None:
    """A server error passes when sent again (in this run); an invalid request does not
    (not sent again by this run); a call the expired batch left unanswered ends as an
    `expired` error, which a rerun sends again."""
    server.batches.settings = BatchSettings(fail_share=0.3, reject_share=0.1, expire_share=0.1)
    spec = _spec(provider, server)
    results = _engine(tmp_path / "s.sqlite").run_sync(_calls(spec, 200))
    by_kind: dict[str | None, list[str]] = {}
    for r in results:
        by_kind.setdefault(r.error_kind, []).append(r.key)
    assert set(by_kind) == {None, "bad_request", "expired"}
    assert 5 < len(by_kind["bad_request"]) < 40 and 5 < len(by_kind["expired"]) < 40
    sent = server.batches.sent
    retried = [r for r in results if r.ok and r.attempts == 2]
    assert 30 < len(retried) < 90 and all(sent[r.key] == 2 for r in retried)
    assert all(sent[key] == 1 for key in by_kind["bad_request"] + by_kind["expired"])
    assert sum(sent.values()) == 200 + len(retried)

    again = _engine(tmp_path / "s.sqlite").run_sync(_calls(spec, 200))
    assert [r.error_kind for r in again] == [r.error_kind for r in results]
    assert all(sent[key] == 2 for key in by_kind["bad_request"] + by_kind["expired"])
    assert sum(sent.values()) == 200 + len(retried) + len(by_kind["bad_request"]) + len(
        by_kind["expired"]
    )


def test_a_batch_that_fails_as_a_whole_ends_its_calls_with_its_reason(
    server: FaultServer, tmp_path: Path
) -> None:
    server.batches.settings = BatchSettings(fail_batches=1)
    results = _engine(tmp_path / "s.sqlite").run_sync(_calls(_spec("openai", server), 5))
    assert {r.error_kind for r in results} == {"bad_request"}
    assert "a validation step failed" in (results[0].error_message or "")
    rerun = _engine(tmp_path / "s.sqlite").run_sync(_calls(_spec("openai", server), 5))
    assert all(r.ok for r in rerun)


@pytest.mark.parametrize("provider", PROVIDERS)
def test_refused_sends_are_tried_again(server: FaultServer, provider: str, tmp_path: Path) -> None:
    server.batches.settings = BatchSettings(refuse_sends=2)
    results = _engine(tmp_path / "s.sqlite").run_sync(_calls(_spec(provider, server), 10))
    assert all(r.ok for r in results)
    assert server.stats()["batch_sends"] == 3 and server.stats()["batches"] == 1


def test_a_send_whose_answer_was_lost_is_found_not_sent_twice(
    server: FaultServer, tmp_path: Path
) -> None:
    """OpenAI's batches carry our id in their metadata: the batch a lost answer made is
    found in the list and waited for."""
    server.batches.settings = BatchSettings(lose_answers=1)
    results = _engine(tmp_path / "s.sqlite").run_sync(_calls(_spec("openai", server), 10))
    assert all(r.ok for r in results)
    assert server.stats()["batches"] == 1 and server.stats()["most_sends_for_one_batch_call"] == 1


def _journal(store: Path, row: BatchRow, keys: list[str], provider_id: str | None) -> None:
    """The store as a run left it that claimed `keys` for `row`."""
    Store(store).close()
    db = sqlite3.connect(store, isolation_level=None)
    create(db)
    claim(db, row, keys)
    if provider_id is not None:
        submitted(db, row.id, provider_id)
    db.close()


def _row(server: FaultServer, created: float, provider: str = "openai") -> BatchRow:
    spec = f"{provider}:m1@{server.base_url}"
    return BatchRow("ours", None, server.base_url, spec, "submitting", 6, created, created)


def test_a_batch_the_provider_does_not_know_is_sent_again(
    server: FaultServer, tmp_path: Path
) -> None:
    calls = _calls(_spec("openai", server), 6)
    _journal(tmp_path / "s.sqlite", _row(server, time.time()), _keys(calls), "batch_gone")
    results = _engine(tmp_path / "s.sqlite").run_sync(calls)
    assert all(r.ok for r in results) and server.stats()["batches"] == 1


def test_a_claim_whose_sender_died_before_sending_is_given_up(
    server: FaultServer, tmp_path: Path
) -> None:
    calls = _calls(_spec("openai", server), 6)
    stale = _row(server, time.time() - SUBMIT_LEASE_S - 1)
    _journal(tmp_path / "s.sqlite", stale, _keys(calls), None)
    results = _engine(tmp_path / "s.sqlite").run_sync(calls)
    assert all(r.ok for r in results) and server.stats()["batches"] == 1


def _keys(calls: list[Call]) -> list[str]:
    return [request_key(c.spec, c.request, c.sample) for c in calls]


def test_other_models_are_called_live_beside_the_batched_ones(
    server: FaultServer, tmp_path: Path
) -> None:
    served = ModelSpec.parse(f"openai-compatible:m2@{server.base_url}")
    calls = [*_calls(_spec("anthropic", server), 5), *_calls(served, 5)]
    results = _engine(tmp_path / "s.sqlite").run_sync(calls)
    assert all(r.ok for r in results)
    assert server.requests == 5 and server.stats()["batch_calls_sent"] == 5


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_verdict_is_asked_and_read_as_a_live_call_would_be(
    server: FaultServer, provider: str, tmp_path: Path
) -> None:
    """Structured output (OpenAI's json_schema, Anthropic's forced tool call) in a batch:
    the server answers with the schema's labels only where it was asked with one."""
    server.judging = Judging(response_format="enforce")
    calls = _calls(_spec(provider, server), 8, choices=("A", "B", "tie"))
    results = _engine(tmp_path / "s.sqlite").run_sync(calls)
    for r in results:
        assert r.completion is not None
        assert read_structured(r.completion.text, ("A", "B", "tie")) is not None


def test_a_budget_counts_calls_at_the_batch_price(server: FaultServer, tmp_path: Path) -> None:
    """A budget of three quarters of the calls' estimate at the table's price admits
    them all at the batch price (every call is reserved before any is answered)."""
    calls = _calls(_spec("openai", server), 40)
    live = _engine(tmp_path / "l.sqlite", backend=False)
    full = sum(live._estimate(c.spec, c.request)[0] for c in calls)
    batched = _engine(tmp_path / "b.sqlite", budget=Budget(max_cost_usd=0.75 * full))
    assert all(r.ok for r in batched.run_sync(calls))
    assert batched.spent.cost < 0.75 * full / 2


def test_a_store_with_batch_tables_opens_and_others_are_still_refused(tmp_path: Path) -> None:
    path = tmp_path / "s.sqlite"
    Store(path).close()
    db = sqlite3.connect(path)
    create(db)
    db.close()
    Store(path, create=False).close()
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE orders (id INTEGER)")
    db.close()
    with pytest.raises(Exception, match="another program"):
        Store(path)


BATCH_FILE_LINES = 120


def _command(server: FaultServer, provider: str, folder: Path) -> list[str]:
    requests = folder / "requests.jsonl"
    if not requests.exists():
        requests.write_text(
            "".join(
                json.dumps({"id": i, "messages": [{"role": "user", "content": f"q {i}"}],
                            "max_tokens": 30}) + "\n"
                for i in range(BATCH_FILE_LINES)
            )
        )  # fmt: skip
    return [
        sys.executable, "-m", "eigenjury", "batch", str(requests),
        "--model", f"{provider}:m1@{server.base_url}", "--backend", "batch-api",
        "--batch-poll-s", "0.1", "--no-progress", "--store", str(folder / "s.sqlite"),
    ]  # fmt: skip


def _submitted(store: Path) -> bool:
    try:
        db = sqlite3.connect(f"file:{store}?mode=ro", uri=True)
        try:
            return bool(db.execute("SELECT 1 FROM batches WHERE state = 'submitted'").fetchone())
        finally:
            db.close()
    except sqlite3.Error:
        return False


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_run_killed_while_it_waits_resumes_sending_nothing_again(
    server: FaultServer, provider: str, tmp_path: Path
) -> None:
    """kill -9 while the batch is out; the rerun finds it in the store, waits for it and
    commits every result once: no call is sent twice."""
    server.batches.settings = BatchSettings(end_after_s=2.0)
    command = _command(server, provider, tmp_path)
    first = subprocess.Popen([*command, "--out", str(tmp_path / "first.jsonl")])
    deadline = time.monotonic() + 60
    while not _submitted(tmp_path / "s.sqlite") and time.monotonic() < deadline:
        time.sleep(0.05)
    os.kill(first.pid, signal.SIGKILL)
    first.wait(10)
    with Store(tmp_path / "s.sqlite") as store:
        assert store.counts() == {}  # killed mid-wait: nothing committed yet
    rerun = subprocess.run([*command, "--out", str(tmp_path / "out.jsonl")], capture_output=True,
                           text=True, timeout=60)  # fmt: skip
    assert rerun.returncode == 0, rerun.stderr
    assert "sent earlier; its calls are not sent again" in rerun.stderr
    lines = [json.loads(x) for x in (tmp_path / "out.jsonl").read_text().splitlines()]
    assert sorted(x["id"] for x in lines) == list(range(BATCH_FILE_LINES))
    assert all(x["text"] == f"reply to: q {x['id']}" for x in lines)
    stats = server.stats()
    assert stats["batches"] == 1 and stats["most_sends_for_one_batch_call"] == 1
    with Store(tmp_path / "s.sqlite") as store:
        assert store.counts() == {"ok": BATCH_FILE_LINES}


def test_two_processes_on_the_same_calls_share_one_batch(
    server: FaultServer, tmp_path: Path
) -> None:
    server.batches.settings = BatchSettings(end_after_s=1.0)
    command = _command(server, "openai", tmp_path)
    runs = [
        subprocess.Popen([*command, "--out", str(tmp_path / f"out{n}.jsonl")],
                         stderr=subprocess.PIPE, text=True)
        for n in range(2)
    ]  # fmt: skip
    for run in runs:
        _, err = run.communicate(timeout=60)
        assert run.returncode == 0, err
    for n in range(2):
        assert len((tmp_path / f"out{n}.jsonl").read_text().splitlines()) == BATCH_FILE_LINES
    assert server.stats()["most_sends_for_one_batch_call"] == 1
    assert server.stats()["distinct_batch_calls"] == BATCH_FILE_LINES


def test_a_claim_leaves_out_calls_whose_success_is_committed(tmp_path: Path) -> None:
    """Another process may commit a call between this one's store lookup and its claim:
    the claim hands over the stored result, and nothing is sent for it."""
    spec = ModelSpec.parse("openai:m1")
    calls = _calls(spec, 4)
    keys = _keys(calls)
    with Store(tmp_path / "s.sqlite") as store:
        done = StoredResult(keys[0], str(spec), "{}", 0, Completion("kept", "stop"))
        store.put_many([done])
        found = store.run("test", lambda db: (create(db), claim(db, _plain_row(), keys))[1])
        assert set(found.done) == {keys[0]} and found.done[keys[0]].completion.text == "kept"
        again = store.run("test", lambda db: claims(db, keys))
    assert set(again.held) == set(keys[1:]) and set(again.done) == {keys[0]}


def _plain_row() -> BatchRow:
    now = time.time()
    return BatchRow("b1", None, "https://api.openai.com/v1", "openai:m1", "submitting", 0, now, now)


def _made_elsewhere(server: FaultServer, provider: str, calls: list[Call], tag: str) -> str:
    """A batch of `calls` made at the provider by a sender that then died (sent with our
    id `tag` in its metadata, where the provider keeps one)."""

    async def send() -> str:
        provider_ = make_provider(calls[0].spec)
        try:
            api = batch_api(provider_)
            assert api is not None
            lines = [api.line(k, c.request, {}) for k, c in zip(_keys(calls), calls, strict=True)]
            return await api.submit(lines, tag)
        finally:
            await provider_.aclose()

    return asyncio.run(send())


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_batch_whose_sender_died_before_keeping_its_id_is_found_not_sent_again(
    server: FaultServer, provider: str, tmp_path: Path
) -> None:
    """kill -9 between the provider making the batch and the store keeping its id: the
    rerun waits out the claim, finds the batch at the provider and reads it."""
    server.batches.settings = BatchSettings(end_after_s=0.2)
    calls = _calls(_spec(provider, server), 6)
    stale = _row(server, time.time() - SUBMIT_LEASE_S - 1, provider)
    _journal(tmp_path / "s.sqlite", stale, _keys(calls), None)
    _made_elsewhere(server, provider, calls, stale.id)
    results = _engine(tmp_path / "s.sqlite").run_sync(calls)
    assert all(r.ok for r in results)
    assert server.stats()["batches"] == 1 and server.stats()["most_sends_for_one_batch_call"] == 1


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_lost_answer_whose_batch_cannot_be_looked_for_yet_is_looked_for_later(
    server: FaultServer, provider: str, tmp_path: Path
) -> None:
    """The send made the batch but its answer was lost, and the provider's list of
    batches fails too: the claim stays, and once the send is stale the batch is found."""
    server.batches.settings = BatchSettings(lose_answers=1, fail_lists=1)
    engine = _engine(tmp_path / "s.sqlite")
    assert isinstance(engine.backend, BatchApiBackend)
    engine.backend.lease_s = 0.3
    results = engine.run_sync(_calls(_spec(provider, server), 10))
    assert all(r.ok for r in results)
    assert server.stats()["batches"] == 1 and server.batches.lists == 2


def test_calls_that_keep_trickling_in_are_sent_while_they_come(
    server: FaultServer, tmp_path: Path
) -> None:
    spec = _spec("openai", server)
    engine = _engine(tmp_path / "s.sqlite")
    assert isinstance(engine.backend, BatchApiBackend)
    engine.backend.gather_s, engine.backend.max_gather_s = 0.5, 0.3
    times: list[float] = []

    async def trickle() -> AsyncIterator[Call]:
        for call in _calls(spec, 20):
            yield call
            await asyncio.sleep(0.05)

    async def run() -> float:
        async with engine, contextlib.aclosing(engine.stream(trickle(), ordered=False)) as out:
            start = time.monotonic()
            async for result in out:
                assert result.ok
                times.append(time.monotonic() - start)
        return time.monotonic() - start

    total = asyncio.run(run())
    assert len(times) == 20 and times[0] < total - 0.3  # the first came back long before
    assert server.stats()["batches"] >= 2


def test_calls_a_cancelled_batch_leaves_unlisted_end_as_expired_not_sent_again(
    server: FaultServer, tmp_path: Path
) -> None:
    """A user cancels the batch (OpenAI may then list none of the calls it left unrun):
    the calls end as `expired` errors rather than undoing the cancel; a rerun sends them."""
    server.batches.settings = BatchSettings(end_after_s=60, quiet_cancel=True)
    calls = _calls(_spec("openai", server), 5)
    batch_id = _made_elsewhere(server, "openai", calls, "ours")
    _journal(tmp_path / "s.sqlite", _row(server, time.time()), _keys(calls), batch_id)
    with urllib.request.urlopen(
        urllib.request.Request(
            f"{server.base_url}/batches/{batch_id}/cancel",
            method="POST",
            headers={"Authorization": f"Bearer {KEY}"},
        )
    ) as answer:
        assert json.load(answer)["status"] == "cancelled"
    results = _engine(tmp_path / "s.sqlite").run_sync(calls)
    assert {r.error_kind for r in results} == {"expired"}
    assert server.stats()["batches"] == 1


@pytest.mark.parametrize(
    ("error", "kind", "retryable"),
    [
        ({"type": "invalid_request_error", "message": "prompt is too long: 210000 tokens"},
         "context_length", False),
        ({"type": "invalid_request_error", "message": "messages: empty"}, "bad_request", False),
        ({"type": "overloaded_error", "message": "Overloaded"}, "server", True),
        ({"type": "rate_limit_error", "message": "slow down"}, "rate_limit", True),
        ({"type": "authentication_error", "message": "invalid x-api-key"}, "auth", False),
        ({"type": "not_found_error", "message": "model: no such model"}, "bad_request", False),
    ],
)  # fmt: skip
def test_an_anthropic_batch_error_reads_as_the_same_call_live_would(
    error: dict[str, str], kind: str, retryable: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    api = AnthropicBatches(AnthropicProvider(ModelSpec.parse("anthropic:m1"), sessions=None))
    result = {"type": "errored", "error": {"type": "error", "error": error}}
    completion, raised = api._outcome(result, ChatRequest.chat(("user", "q")))
    assert completion is None and raised is not None
    assert (raised.kind, raised.retryable) == (kind, retryable)
    assert error["message"] in raised.message


def test_batched_calls_carry_no_latency_of_their_own(server: FaultServer, tmp_path: Path) -> None:
    """What a batched call waited is its batch's: stored as none, so the accounting and a
    later plan's latency of the model come from live calls only."""
    engine = _engine(tmp_path / "s.sqlite")
    results = engine.run_sync(_calls(_spec("openai", server), 30))
    assert all(r.completion is not None and r.completion.latency_s == 0 for r in results)
    assert engine.accounting.record()["total"]["latency_s"] is None
    with Store(tmp_path / "s.sqlite") as store:
        history = history_of(store.history(str(_spec("openai", server))))
    assert history.calls == 30 and history.latency is None


def test_two_lost_anthropic_sends_of_equal_size_are_told_apart_by_their_results(
    server: FaultServer, tmp_path: Path
) -> None:
    """Anthropic's batches carry nothing of ours: where two batches of as many calls
    could be a lost send's, the one whose results hold its calls is it."""
    server.batches.settings = BatchSettings(lose_answers=2, end_after_s=0.2)
    calls = [*_calls(_spec("anthropic", server), 10), *_calls(_spec("anthropic", server, "m2"), 10)]
    results = _engine(tmp_path / "s.sqlite").run_sync(calls)
    assert all(r.ok for r in results)
    assert server.stats()["batches"] == 2 and server.stats()["most_sends_for_one_batch_call"] == 1


def test_a_lost_send_is_found_among_many_later_batches(server: FaultServer, tmp_path: Path) -> None:
    """OpenAI lists the whole organisation's batches, a hundred at a time: a dead
    sender's batch is found however many were made since."""
    calls = _calls(_spec("openai", server), 6)
    stale = _row(server, time.time() - SUBMIT_LEASE_S - 1)
    _journal(tmp_path / "s.sqlite", stale, _keys(calls), None)
    _made_elsewhere(server, "openai", calls, stale.id)
    others = _calls(_spec("openai", server, "other"), 1)
    for n in range(150):
        _made_elsewhere(server, "openai", others, f"other-{n}")
    results = _engine(tmp_path / "s.sqlite").run_sync(calls)
    assert all(r.ok for r in results) and server.stats()["batches"] == 151


def test_a_send_taken_over_while_it_went_cancels_the_batch_it_made(
    server: FaultServer, tmp_path: Path
) -> None:
    """A sender suspended past its lease finds its claim given up (another process took
    the calls): it cancels the batch it made, and its calls go by the claim there is."""
    server.batches.settings = BatchSettings(send_delay_s=1.0, end_after_s=0.2)
    store = tmp_path / "s.sqlite"
    Store(store).close()

    def take_over() -> None:  # what another process does to a send it judges dead
        deadline = time.monotonic() + 20
        while server.batches.sends == 0 and time.monotonic() < deadline:
            time.sleep(0.01)
        db = sqlite3.connect(store, isolation_level=None)
        (batch,) = db.execute("SELECT id FROM batches").fetchone()
        db.execute("DELETE FROM batch_calls WHERE batch = ?", (batch,))
        db.execute("DELETE FROM batches WHERE id = ?", (batch,))
        db.close()

    taker = threading.Thread(target=take_over)
    taker.start()
    results = _engine(store).run_sync(_calls(_spec("openai", server), 5))
    taker.join()
    assert all(r.ok for r in results)
    states = [b.state for b in server.batches.batches.values() if b.kind == "openai"]
    assert states == ["cancelled", "ended"]


def test_a_lost_send_that_cannot_be_looked_for_is_sent_again_in_the_end(
    server: FaultServer, tmp_path: Path
) -> None:
    """The provider's list of batches keeps failing: after the retry policy's attempts
    the calls are sent again rather than waiting for ever."""
    server.batches.settings = BatchSettings(lose_answers=1, fail_lists=1000)
    results = _engine(tmp_path / "s.sqlite").run_sync(_calls(_spec("openai", server), 5))
    assert all(r.ok for r in results) and server.stats()["batches"] == 2


def test_a_success_with_unusable_scores_keeps_its_claim(tmp_path: Path) -> None:
    """The store reads such a success as an error (it is asked again): its call is not
    done, so a tidy-up must not free it for a second sender."""
    with Store(tmp_path / "s.sqlite") as store:
        store.run("test", create)
        store.run("test", lambda db: claim(db, _plain_row(), ["k1", "k2"]))
        store.run(
            "test",
            lambda db: db.executemany(
                "INSERT INTO results (key, spec, request, sample, status, text, choice_logprobs,"
                " attempts, created_at) VALUES (?, 's', '{}', 0, 'ok', 'x', ?, 1, 0)",
                [("k1", '{"A": NaN}'), ("k2", None)],
            ),
        )
        store.run("test", prune)
        left = store.run("test", lambda db: claims(db, ["k1", "k2"]))
    assert set(left.held) == {"k1"} and set(left.done) == {"k2"}
