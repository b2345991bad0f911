"""Plans (`--plan`): the calls a run will make, counted exactly with nothing called or
written; token and cost estimates against what the run then used; budgets per model,
refused by plan before a run starts and enforced while it runs."""

from __future__ import annotations

import json
import math
import sqlite3
from pathlib import Path
from typing import Any

import pytest
import yaml

from batch_scripts import write_requests
from eigenjury.cli import main
from eigenjury.engine import Budget, Call, Engine, Store
from eigenjury.engine.limits import EndpointLimits
from eigenjury.engine.plan import ALLOWANCE_ROLES, ModelHistory, Planner, _Output
from eigenjury.jobs import plan_rank, run_rank
from eigenjury.models import ChatRequest, ModelSpec, Price, PriceTable
from eigenjury.records import PlanRecord, read_record
from eigenjury.testing.server import Judging, ServerThread

MEMBERS = ("kind", "curt", "plain")


def store_rows(path: Path) -> tuple[int, int]:
    """Results and features the store holds."""
    with sqlite3.connect(path) as db:
        results = db.execute("SELECT COUNT(*) FROM results").fetchone()[0]
        features = db.execute("SELECT COUNT(*) FROM features").fetchone()[0]
    return results, features


def sent(accounting: Any) -> dict[tuple[str, str], int]:
    """Calls a run sent (not answered from the store), per model and role."""
    return {
        (row.model, row.role): row.calls - row.cached
        for row in accounting.by_model_and_role
        if row.calls - row.cached
    }


def planned(plan: PlanRecord, *, allowance: bool = False) -> dict[tuple[str, str], int]:
    return {
        (row.model, row.role): row.to_send
        for row in plan.by_model_and_role
        if row.to_send and row.allowance == allowance
    }


def batch_args(requests: Path, tmp_path: Path, base: str, *more: str) -> list[str]:
    return [
        "batch",
        str(requests),
        "--model",
        f"openai-compatible:m@{base}",
        "--out",
        str(tmp_path / "out.jsonl"),
        "--store",
        str(tmp_path / "s.sqlite"),
        "--no-progress",
        *more,
    ]


def test_a_batch_plan_calls_nothing_writes_nothing_and_counts_what_the_run_sends(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    requests = write_requests(tmp_path / "req.jsonl", 40)
    with ServerThread() as server:
        plan_file = tmp_path / "p.json"
        args = batch_args(requests, tmp_path, server.base_url)
        assert main([*args, "--plan", str(plan_file)]) == 0
        assert server.requests == 0  # not even the endpoint check
        assert not (tmp_path / "s.sqlite").exists() and not (tmp_path / "out.jsonl").exists()
        first = read_record(plan_file, PlanRecord)
        assert (first.total.calls, first.total.stored, first.total.to_send) == (40, 0, 40)
        assert "nothing was called" in capsys.readouterr().out
        # a plan never goes over the command's own files
        assert main([*args, "--plan", str(requests)]) == 2
        assert "this is also the request file" in capsys.readouterr().err
        assert main(args) == 0
        assert server.requests == 40
        before = store_rows(tmp_path / "s.sqlite")
        # planned again: everything is stored now, and the store is left as it was
        assert main([*args, "--plan", str(plan_file)]) == 0
        again = read_record(plan_file, PlanRecord)
        assert (again.total.calls, again.total.stored, again.total.to_send) == (40, 40, 0)
        assert store_rows(tmp_path / "s.sqlite") == before
        assert server.requests == 40


def test_tokens_are_planned_from_the_models_own_history_within_ten_percent(
    tmp_path: Path,
) -> None:
    """The test server counts words, not four characters a token: the proxy is far off,
    the model's own history is not."""

    def requests(path: Path, start: int) -> Path:
        with path.open("w") as f:
            for i in range(start, start + 200):
                words = f"item {i}: " + " ".join(f"w{(i * 7 + k) % 50}" for k in range(5 + i % 40))
                line = {"id": f"r{i}", "messages": [{"role": "user", "content": words}]}
                f.write(json.dumps(line) + "\n")
        return path

    pilot, main_file = requests(tmp_path / "a.jsonl", 0), requests(tmp_path / "b.jsonl", 1000)
    with ServerThread() as server:
        args = batch_args(pilot, tmp_path, server.base_url)
        proxy_file, plan_file = tmp_path / "proxy.json", tmp_path / "plan.json"
        assert (
            main([*batch_args(main_file, tmp_path, server.base_url), "--plan", str(proxy_file)])
            == 0
        )
        assert main(args) == 0  # the pilot: the model's history
        later = batch_args(main_file, tmp_path, server.base_url)
        later[later.index("--out") + 1] = str(tmp_path / "out2.jsonl")
        assert main([*later, "--plan", str(plan_file)]) == 0
        assert main(later) == 0
    with sqlite3.connect(tmp_path / "s.sqlite") as db:
        used_in, used_out = db.execute(
            "SELECT SUM(input_tokens), SUM(output_tokens) FROM results WHERE request LIKE '%w%' "
            "AND key IN (SELECT key FROM results ORDER BY created_at DESC LIMIT 200)"
        ).fetchone()
    plan = read_record(plan_file, PlanRecord)
    proxy = read_record(proxy_file, PlanRecord)
    assert plan.by_model_and_role[0].from_history and not proxy.by_model_and_role[0].from_history
    tokens_in, tokens_out = plan.total.input_tokens, plan.total.output_tokens
    assert tokens_in is not None and tokens_out is not None
    assert abs(tokens_in.planned / used_in - 1) < 0.10
    assert abs(tokens_out.planned / used_out - 1) < 0.10
    assert tokens_in.low <= used_in <= tokens_in.high
    assert tokens_out.low <= used_out <= tokens_out.high
    # without history: the reply at its cap (here the default 256), far above the run's
    assert proxy.total.output_tokens is not None
    assert proxy.total.output_tokens.planned == 200 * 256


def served_config(tmp_path: Path, base: str, **engine: Any) -> Path:
    config = {
        "population": [
            {
                "name": name,
                "model": f"openai-compatible:m{name}@{base}",
                "persona": f"You are {name}.",
            }
            for name in MEMBERS
        ],
        "constitution": "kindness",
        "scenarios": {"source": "everyday", "limit": 4, "seed": 0},
        "sampling": {"design": "all"},
        "judging": {"reflections": True, "ties": True},
        "fit": {"bootstrap": 0, "style": "none"},
        "engine": {"store": "store.sqlite", "concurrency": 4, **engine},
    }
    path = tmp_path / "rank.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def test_a_rank_plan_counts_every_stage_as_the_run_makes_it(tmp_path: Path) -> None:
    """Evaluees, reflections on placeholder replies, comparisons of them: the same calls
    per model and role as the run then sends; repairs only as an allowance."""
    judging = Judging("enforce", {"A": 0.5, "B": 0.3, "tie": 0.2}, words=60)
    with ServerThread(judging=judging) as server:
        config = served_config(tmp_path, server.base_url)
        plan = plan_rank(config, out=tmp_path / "out")
        assert server.requests == 0 and not (tmp_path / "store.sqlite").exists()
        assert not (tmp_path / "out").exists()
        run = run_rank(config, out=tmp_path / "out", progress=False)
        assert run.record.run is not None
        accounting = run.record.run.accounting
        assert accounting is not None
        assert sent(accounting) == {
            (m, r): n for (spec, r), n in planned(plan).items() for m in [_member(spec)]
        }
        assert {r for (_, r) in planned(plan, allowance=True)} == {"repair"}
        assert not any(r == "repair" for (_, r) in sent(accounting))
        again = plan_rank(config, out=tmp_path / "out")
    assert again.total.to_send == 0 and again.total.stored == plan.total.calls


def _member(spec: str) -> str:
    """The member a spec of `served_config` belongs to (rank accounts by member)."""
    return next(m for m in MEMBERS if spec.startswith(f"openai-compatible:m{m}@"))


def test_a_cascade_plans_its_escalation_as_an_allowance(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with ServerThread(judging=Judging("enforce", words=40)) as server:
        base = server.base_url
        args = [
            "grade", "triage",
            "--jury", f"openai-compatible:j1@{base}", "--jury", f"openai-compatible:j2@{base}",
            "--escalate-to", f"openai-compatible:j3@{base}",
            "--escalate-to", f"openai-compatible:j4@{base}",
            "--escalate-to", f"openai-compatible:j5@{base}",
            "--candidate", f"openai-compatible:c@{base}",
            "--store", str(tmp_path / "s.sqlite"), "--out", str(tmp_path / "g"), "--no-progress",
        ]  # fmt: skip
        assert main([*args, "--plan", str(tmp_path / "plan.json")]) == 0
        assert server.requests == 0
        plan = read_record(tmp_path / "plan.json", PlanRecord)
        certain = planned(plan)
        assert {r for (_, r) in certain} == {"candidate", "juror"}
        escalation = planned(plan, allowance=True)
        assert {r for (_, r) in escalation} == {"escalation", "juror-retry"}
        assert main(args) in (0, 1)
        results = json.loads((tmp_path / "g" / "results.json").read_text())
        actual = sent(_accounting(results))
        for key, n in certain.items():
            assert actual[key] == n
        for key, n in actual.items():  # what the run escalated, within the allowance
            if key[1] in ALLOWANCE_ROLES:
                assert n <= escalation[key]
    out = capsys.readouterr().out
    assert "calls made only as the replies require (repairs, escalations): at most" in out


def _accounting(results: dict[str, Any]) -> Any:
    from eigenjury.records import AccountingRecord

    return AccountingRecord.model_validate(results["accounting"])


PRICES = {"openai-compatible:cheap": Price(1.0, 2.0), "openai-compatible:dear": Price(30.0, 60.0)}


def test_a_run_over_a_model_budget_by_plan_is_refused_unless_told_to_go(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    requests = tmp_path / "req.jsonl"
    requests.write_text(
        "".join(
            json.dumps(
                {
                    "id": f"r{i}",
                    "messages": [{"role": "user", "content": f"q {i}"}],
                    "max_tokens": 8,
                }
            )
            + "\n"
            for i in range(30)
        )
    )
    prices = tmp_path / "prices.toml"
    prices.write_text('"openai-compatible:m" = {input = 100.0, output = 400.0}\n')
    with ServerThread() as server:
        spec = f"openai-compatible:m@{server.base_url}"
        args = [*batch_args(requests, tmp_path, server.base_url), "--prices", str(prices)]
        assert main([*args, "--budget-model", f"{spec}=0.02"]) == 2
        err = " ".join(capsys.readouterr().err.split())
        assert f"{spec} would cost $" in err and "against its budget of $0.02" in err
        assert "--go" in err and "Traceback" not in err
        assert server.requests == 0 and not (tmp_path / "s.sqlite").exists()
        # a model budget for a model the run does not call is a mistake, said so
        assert main([*args, "--budget-model", "openai:gpt-4o=1"]) == 2
        assert "which this run does not call" in capsys.readouterr().err
        # with --go the run starts, and the model's own budget stops its calls
        assert main([*args, "--budget-model", f"{spec}=0.02", "--go"]) == 1
        lines = [json.loads(x) for x in (tmp_path / "out.jsonl").read_text().splitlines()]
        stopped = [x for x in lines if x["error"] and x["error"]["kind"] == "budget"]
        assert stopped and len(stopped) < 30 and server.requests == 30 - len(stopped)
        # a budget the plan fits runs without a word
        assert main([*args, "--budget-model", f"{spec}=100"]) == 0


def test_a_models_budget_stops_that_model_alone(tmp_path: Path) -> None:
    cheap = ModelSpec("openai-compatible", "cheap", "http://127.0.0.1:9/v1")
    dear = ModelSpec("openai-compatible", "dear", "http://127.0.0.1:9/v1")
    from eigenjury.engine.store import spec_json
    from eigenjury.models.providers.scripted import ScriptedProvider

    engine = Engine(
        Store(tmp_path / "s.sqlite"),
        budget=Budget(by_model={spec_json(dear): 0.01}),
        prices=PriceTable(PRICES),
        providers={str(s): ScriptedProvider(lambda r: "a short reply") for s in (cheap, dear)},
        progress=False,
    )
    calls = [
        Call(spec, ChatRequest.chat(("user", f"question {i} " * 20), max_tokens=10))
        for i in range(40)
        for spec in (cheap, dear)
    ]
    results = engine.run_sync(calls)
    by_model = {
        str(spec): [r.error_kind for r in results if r.call.spec == spec] for spec in (cheap, dear)
    }
    assert by_model[str(cheap)] == [None] * 40
    assert "budget" in by_model[str(dear)] and None in by_model[str(dear)]
    spent = sum(r.completion.cost_usd or 0 for r in results if r.ok and r.call.spec == dear)
    assert spent <= 0.01


def test_output_ranges_hold_the_sum_of_replies_drawn_from_the_history() -> None:
    """The output range (two standard errors of the total, 10% either side) covers the
    total of new replies drawn like the stored ones, in nearly every draw."""
    import numpy as np

    from eigenjury.engine.plan import _output_tokens

    rng = np.random.default_rng(0)
    stored = rng.lognormal(4.0, 0.8, 300).round()
    history = ModelHistory(
        calls=300,
        outputs={512: _Output(300, 0, int(stored.sum()), float((stored**2).sum()))},
    )
    spread = _output_tokens(history, 512, 500)
    totals = [rng.lognormal(4.0, 0.8, 500).round().sum() for _ in range(400)]
    inside = np.mean([spread.low <= t <= spread.high for t in totals])
    assert inside > 0.97
    assert spread.high <= 500 * 512 and math.isclose(spread.point, 500 * stored.mean())


def test_the_planner_counts_allowances_apart_and_times_stages_by_their_slowest_endpoint() -> None:
    history = ModelHistory()
    planner = Planner(
        lambda spec: history,
        PriceTable(PRICES),
        limits_for=lambda endpoint: EndpointLimits(concurrency=4, rpm=60),
        endpoint_of=lambda spec: spec.model,
    )
    cheap = ModelSpec("openai-compatible", "cheap", "http://127.0.0.1:9/v1")
    request = ChatRequest.chat(("user", "x" * 400), max_tokens=100)
    planner.stage()
    for i in range(8):
        planner.planned(cheap, "evaluee", request, 400, f"{i:064x}")
    planner.planned(cheap, "repair", request, 400, "f" * 64)
    record = PlanRecord.model_validate({"command": "t", "budgets": [], **planner.record()})
    assert (record.total.to_send, record.total.allowance_calls) == (8, 1)
    # 8 calls at 60 a minute: 8 s, slower than 8 x 5 s / 4 in flight = 10 s? no: 10 s
    assert record.time_s.planned == pytest.approx(10.0)
    cost = record.total.cost_usd
    assert cost is not None
    # 8 calls of 100 input tokens (400 characters) and 100 output tokens (the cap)
    assert cost.planned == pytest.approx(8 * (100 * 1.0 + 100 * 2.0) / 1e6)
    assert record.total.cost_usd_most is not None and record.total.cost_usd_most > cost.high


def test_an_adaptive_design_is_planned_at_its_budget_of_comparisons(tmp_path: Path) -> None:
    """A plan has no verdicts to choose pairs by: it counts the budget, on random pairs."""
    with ServerThread(judging=Judging("enforce", words=30)) as server:
        config = served_config(tmp_path, server.base_url)
        data = yaml.safe_load(config.read_text())
        data["sampling"] = {"design": "adaptive", "comparisons": 30, "rounds": 3}
        data["judging"]["reflections"] = False
        config.write_text(yaml.safe_dump(data))
        plan = plan_rank(config, out=tmp_path / "out")
        assert server.requests == 0
        run = run_rank(config, out=tmp_path / "out", progress=False)
    roles: dict[str, int] = {}
    for row in plan.by_model_and_role:
        roles[row.role] = roles.get(row.role, 0) + row.calls
    assert roles["comparison"] == 30 and roles["evaluee"] == 3 * 4
    assert run.record.run is not None and run.record.run.accounting is not None
    made: dict[str, int] = {}
    for tally in run.record.run.accounting.by_model_and_role:
        made[tally.role] = made.get(tally.role, 0) + tally.calls
    assert made == {"comparison": 30, "evaluee": 12}


def test_a_plan_is_written_only_over_an_earlier_plan(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Never over the run's store, results, config or prices: a plan file that exists
    and is not a plan is refused, before anything is planned."""
    requests = write_requests(tmp_path / "req.jsonl", 5)
    (tmp_path / "prices.toml").write_text('"scripted:echo" = {input = 1.0, output = 1.0}\n')
    args = [
        "batch", str(requests), "--model", "scripted:echo", "--out", str(tmp_path / "o.jsonl"),
        "--store", str(tmp_path / "s.sqlite"), "--prices", str(tmp_path / "prices.toml"),
        "--no-progress",
    ]  # fmt: skip
    assert main(args) == 0
    for victim in (tmp_path / "s.sqlite", tmp_path / "prices.toml", tmp_path / "o.jsonl"):
        before = victim.read_bytes()
        assert main([*args, "--plan", str(victim)]) == 2
        err = " ".join(capsys.readouterr().err.split())
        assert "give --plan" in err and str(victim) in err
        assert victim.read_bytes() == before
    assert main([*args, "--plan", str(tmp_path / "p.json")]) == 0
    assert main([*args, "--plan", str(tmp_path / "p.json")]) == 0  # over the earlier plan


def test_a_budget_holds_across_every_stream_of_a_run(tmp_path: Path) -> None:
    """A command's stages are streams of one engine: each does not get the budget anew."""
    from eigenjury.engine.store import spec_json
    from eigenjury.models.providers.scripted import ScriptedProvider

    dear = ModelSpec("openai-compatible", "dear", "http://127.0.0.1:9/v1")
    engine = Engine(
        Store(tmp_path / "s.sqlite"),
        budget=Budget(max_cost_usd=0.05, by_model={spec_json(dear): 0.01}),
        prices=PriceTable(PRICES),
        providers={str(dear): ScriptedProvider(lambda r: "a short reply")},
        progress=False,
    )

    async def three_streams() -> float:
        spent = 0.0
        async with engine:
            for stage in range(3):
                calls = [
                    Call(dear, ChatRequest.chat(("user", f"{stage} {i} " * 20), max_tokens=10))
                    for i in range(20)
                ]
                for r in await engine.run(calls):
                    spent += r.completion.cost_usd or 0.0 if r.completion else 0.0
        return spent

    import asyncio

    assert 0.0 < asyncio.run(three_streams()) <= 0.01


def test_a_model_budget_on_an_endpoint_with_hidden_query_values_is_checked(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    requests = write_requests(tmp_path / "req.jsonl", 30)
    prices = tmp_path / "prices.toml"
    prices.write_text('"openai-compatible:m" = {input = 100.0, output = 400.0}\n')
    with ServerThread() as server:
        spec = f"openai-compatible:m@{server.base_url}?deployment=x&api-key=secret1"
        args = [
            "batch", str(requests), "--model", spec, "--out", str(tmp_path / "o.jsonl"),
            "--store", str(tmp_path / "s.sqlite"), "--prices", str(prices), "--no-progress",
            "--budget-model", f"{spec}=0.0001",
        ]  # fmt: skip
        assert main(args) == 2
        err = " ".join(capsys.readouterr().err.split())
        assert "against its budget of $0.0001" in err and "secret1" not in err
        assert server.requests == 0
