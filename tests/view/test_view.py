"""`eigenjury view`: the HTTP API over real run folders, its refusals, and bad input."""

from __future__ import annotations

import asyncio
import json
import os
import random
import select
import shutil
import signal
import socket
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml
from aiohttp.test_utils import TestClient, TestServer

import contract_scripts  # noqa: F401  (registers the scripted jurors)
import peer_scripts  # noqa: F401  (registers the scripted population)
from bound_scripts import write_dataset, write_scores
from contract_scripts import CONTRACT, XSS, write_submissions
from eigenjury.cli import main
from eigenjury.records import Found
from eigenjury.view.index import Filters, TranscriptIndex, verdict_category
from eigenjury.view.server import Catalogue, load_catalogue, make_app
from peer_scripts import QUALITIES
from peer_scripts import config as rank_config

SCRIPT = "<script>alert('pwned')</script>"  # what the "[script]" evaluee writes
HANG_S = 60  # what a command that should answer at once may take before it is a hang


def _rank(folder: Path, name: str, scenarios: int, *personas: str) -> None:
    path = rank_config(folder / f"config-{name}", output=str(folder / name), name=name,
                       scenarios={"source": "everyday", "limit": scenarios})  # fmt: skip
    data = yaml.safe_load(path.read_text())
    for member, persona in zip(data["population"], personas, strict=False):
        member["persona"] += persona
    path.write_text(yaml.safe_dump(data))
    assert main(["rank", str(path), "--no-progress"]) == 0


def make_runs(folder: Path) -> Path:
    """Two ranking runs (one evaluee writes a <script>), a grading run with a <script> in
    a submission, a jury comparison, a sensitivity profile and a bound certificate, all
    made by the commands themselves, in `folder`/runs."""
    runs = folder / "runs"
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(folder)  # the commands' shared store goes here, never in the checkout
        _rank(runs, "before", 8, " [script]")
        _rank(runs, "after", 10)
        contract = folder / "contract.yaml"
        contract.write_text(CONTRACT)
        subs = write_submissions(folder / "subs.jsonl", [
            {"task_id": "france", "submission": f"Lovely {XSS}\nAnswer: Paris", "candidate": "a"},
            {"task_id": "italy", "submission": "Answer: Milan", "candidate": "a"},
            {"task_id": "france", "submission": "Answer: Lyon", "candidate": "b"},
        ])  # fmt: skip
        jurors = ["scripted:juror-keyword", "scripted:juror-keyword", "scripted:juror-no"]
        jury = [arg for juror in jurors for arg in ("--jury", juror)]
        grade = ["grade", str(contract), "--submissions", str(subs), "--no-progress"]
        assert main([*grade, "--out", str(runs / "grade"), *jury]) == 0
        assert main(["juries", "compare", str(contract), "--submissions", str(subs),
                     "--pool-a", "scripted:juror-yes", "--pool-a", "scripted:juror-no",
                     "--pool-b", "scripted:juror-keyword", "--rounds", "20", "--no-progress",
                     "--out", str(runs / "juries")]) == 0  # fmt: skip
        profile = runs / "bound" / "profile.json"
        assert main(["bound", "measure", str(write_dataset(folder / "d.jsonl")), "--judge",
                     "scripted:bounds-biased", "--generators", "formatting,identity", "--m",
                     "20", "--out", str(profile), "--no-progress"]) == 0  # fmt: skip
        rng = np.random.default_rng(0)
        scores = [(f"t{i}", int(rng.integers(1, 10)), f"m{i % 3}") for i in range(60)]
        assert main(["bound", "apply", str(write_scores(folder / "scores.csv", scores)),
                     "--profile", str(profile), "--scale", "likert10", "--tau", "0.5",
                     "--delta", "0.05", "--out", str(runs / "bound")]) == 0  # fmt: skip
    return runs


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_runs(tmp_path_factory.mktemp("view"))


@pytest.fixture(scope="module")
def catalogue(runs: Path) -> Catalogue:
    return load_catalogue([runs], skipped=_no_damage)


def _no_damage(found: Found) -> None:
    raise AssertionError(f"damaged: {found.problem}")


class Answer:
    def __init__(self, status: int, headers: dict[str, str], body: bytes) -> None:
        self.status, self.headers, self.body = status, headers, body

    def json(self) -> Any:
        return json.loads(self.body)


def get(catalogue: Catalogue, *paths: str, raw: bool = False) -> list[Answer]:
    """GET each path from the viewer over `catalogue`. raw: sent byte for byte on a
    socket (no client normalises `..` or percent-escapes first)."""

    async def go() -> list[Answer]:
        async with TestClient(TestServer(make_app(catalogue))) as client:
            answers = []
            for path in paths:
                if raw:
                    answers.append(await _raw(client.port, path))
                    continue
                async with client.get(path) as response:
                    body = await response.read()
                    answers.append(Answer(response.status, dict(response.headers), body))
            return answers

    return asyncio.run(go())


async def _raw(port: int | None, target: str) -> Answer:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    request = f"GET {target} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n"
    writer.write(request.encode())
    data = await reader.read()
    writer.close()
    head, _, body = data.partition(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1])
    lines = head.decode().split("\r\n")[1:]
    headers = dict(line.split(": ", 1) for line in lines if ": " in line)
    return Answer(status, headers, body)


def run_id(catalogue: Catalogue, where: str) -> str:
    """The id of the run whose record is `where` (its folder, or folder/file)."""
    [found] = [
        run.id
        for run in catalogue.runs.values()
        if where in (run.path.parent.name, f"{run.path.parent.name}/{run.path.name}")
    ]
    return found


def transcripts(catalogue: Catalogue, run: str, query: str = "") -> dict[str, Any]:
    index = catalogue.runs[run].transcripts
    assert index is not None and index.wait(30)
    [answer] = get(catalogue, f"/api/runs/{run}/transcripts?{query}")
    assert answer.status == 200, answer.body
    data: dict[str, Any] = answer.json()
    return data


# --- the API ---------------------------------------------------------------------------


def test_the_list_shows_every_run_with_kind_name_date_models_and_cost(
    catalogue: Catalogue,
) -> None:
    [answer] = get(catalogue, "/api/runs")
    assert answer.status == 200
    runs = {run["where"]: run for run in answer.json()["runs"]}
    assert set(runs) == {
        "before/results.json", "after/results.json", "grade/results.json",
        "juries/comparison.json", "juries/pool_a/results.json", "juries/pool_b/results.json",
        "bound/profile.json", "bound/certificate.json",
    }  # fmt: skip
    before = runs["before/results.json"]
    assert (before["kind"], before["name"]) == ("ranking", "before")
    assert set(before["models"]) == set(QUALITIES) and before["cost_usd"] == 0.0
    assert before["date"].startswith("20") and before["transcripts"]
    assert runs["grade/results.json"]["kind"] == "grading"
    assert runs["bound/certificate.json"]["kind"] == "bound-certificate"
    assert runs["bound/profile.json"]["kind"] == "sensitivity-profile"
    assert runs["juries/comparison.json"]["kind"] == "jury-comparison"
    assert answer.json()["damaged"] == []


def test_every_answer_carries_the_security_headers(catalogue: Catalogue) -> None:
    for answer in get(catalogue, "/", "/static/app.js", "/kit.css", "/api/runs", "/nowhere"):
        assert answer.headers["Content-Security-Policy"].startswith("default-src 'self'")
        assert answer.headers["X-Content-Type-Options"] == "nosniff"
    # the page names its icon, so a browser never asks for /favicon.ico (a 404 in the log)
    [icon] = get(catalogue, "/static/favicon.svg")
    assert icon.status == 200 and icon.headers["Content-Type"] == "image/svg+xml"
    page, script = get(catalogue, "/", "/static/app.js")
    assert b'<script src="/static/app.js"' in page.body and b"innerHTML" not in script.body
    assert b'<link rel="icon" href="/static/favicon.svg"' in page.body


def test_a_ranking_run_has_its_record_and_the_comparison_of_two_runs(
    catalogue: Catalogue,
) -> None:
    before, after = run_id(catalogue, "before"), run_id(catalogue, "after")
    page, change = get(catalogue, f"/api/runs/{before}", f"/api/compare?a={before}&b={after}")
    record = page.json()["record"]
    assert page.json()["kind"] == "ranking"
    assert {m["name"] for m in record["models"]} == set(QUALITIES)
    assert {"judges", "dispositions", "trust_matrix", "run"} <= set(record)
    rows = change.json()["models"]
    assert {row["model"] for row in rows} == set(QUALITIES)
    first = {m["name"]: m for m in record["models"]}
    for row in rows:
        assert row["rank_a"] == first[row["model"]]["rank"]
        assert row["elo_change"] == pytest.approx(row["elo_b"] - row["elo_a"])
        assert row["rank_change"] == row["rank_b"] - row["rank_a"]


def test_transcripts_page_and_filter(catalogue: Catalogue) -> None:
    run = run_id(catalogue, "before")
    everything = transcripts(catalogue, run, "size=5")
    assert everything["ready"] and everything["total"] == 8 * 12 and len(everything["items"]) == 5
    item = everything["items"][0]
    assert item["first_reply"].startswith("My advice") and item["reply"]
    assert item["first_reflection"] == "A thoughtful reflection." and item["question"]
    assert item["verdict"] in ("first", "second", "tie")
    second_page = transcripts(catalogue, run, "size=5&page=2")
    assert [i["row"] for i in second_page["items"]] == [5, 6, 7, 8, 9]

    by_judge = transcripts(catalogue, run, "judge=ada&size=100")
    assert by_judge["total"] > 0 and {i["judge"] for i in by_judge["items"]} == {"ada"}
    by_evaluee = transcripts(catalogue, run, "evaluee=bo&size=100")["items"]
    assert by_evaluee and all("bo" in (i["first"], i["second"]) for i in by_evaluee)
    scenario = everything["scenarios"][0]
    by_scenario = transcripts(catalogue, run, f"scenario={scenario}&size=100")["items"]
    assert len(by_scenario) == 12 and {i["scenario"] for i in by_scenario} == {scenario}
    verdicts = {
        v: transcripts(catalogue, run, f"verdict={v}&size=100")["total"]
        for v in ("first", "second", "tie")
    }
    assert sum(verdicts.values()) == everything["total"]
    both = transcripts(catalogue, run, "judge=ada&verdict=first&size=100")["items"]
    assert all((i["judge"], i["verdict"]) == ("ada", "first") for i in both)
    assert transcripts(catalogue, run, "judge=nobody")["total"] == 0


def test_model_text_reaches_the_page_as_data_never_as_markup(catalogue: Catalogue) -> None:
    """The API hands model text over as JSON strings; the page (app.js) only ever makes
    text nodes of them (the browser test watches it not run)."""
    items = transcripts(catalogue, run_id(catalogue, "before"), "evaluee=ada&size=100")["items"]
    replies = [i["first_reply"] if i["first"] == "ada" else i["second_reply"] for i in items]
    assert all(SCRIPT in reply for reply in replies)
    [answer] = get(catalogue, "/api/runs")
    assert answer.headers["Content-Type"].startswith("application/json")


def test_a_grading_run_has_its_tasks_and_each_jurors_full_reply(catalogue: Catalogue) -> None:
    run = run_id(catalogue, "grade")
    page, votes, missing = get(
        catalogue,
        f"/api/runs/{run}",
        f"/api/runs/{run}/votes?task=france&candidate=a",
        f"/api/runs/{run}/votes",
    )
    record = page.json()["record"]
    task = next(t for t in record["tasks"] if (t["task_id"], t["candidate"]) == ("france", "a"))
    assert task["submission"].startswith(f"Lovely {XSS}")
    assert [c["split"] for c in task["criteria"] if "split" in c] == [True]
    jury = [v for v in votes.json()["votes"] if v["stage"] == "jury"]
    assert sorted(v["juror"] for v in jury) == [
        "scripted:juror-keyword", "scripted:juror-keyword#2", "scripted:juror-no",
    ]  # fmt: skip
    assert all(v["text"] and v["criterion_id"] == "lovely" for v in jury)
    assert missing.status == 400


def test_a_jury_comparison_a_profile_and_a_certificate(catalogue: Catalogue) -> None:
    where = ("juries", "bound/profile.json", "bound/certificate.json")
    juries, profile, certificate = get(
        catalogue, *(f"/api/runs/{run_id(catalogue, w)}" for w in where)
    )
    assert juries.json()["record"]["pools"]["a"]["size"] == 2
    generators = {"formatting", "identity"}
    assert set(profile.json()["record"]["generators"]) == generators
    assert set(certificate.json()["record"]["generators"]) == generators


# --- refusals ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "target",
    [
        "/static/../../etc/passwd",
        "/static/..%2f..%2fetc%2fpasswd",
        "/static/%2e%2e/%2e%2e/etc/passwd",
        "/static/..%5c..%5cetc%5cpasswd",
        "/static/%252e%252e%252fetc%252fpasswd",
        "/../../../../etc/passwd",
        "/static//etc/passwd",
        "/static/",
        "/api/runs/..%2f..%2fetc%2fpasswd",
        "/api/runs/000000000000",
        "/api/runs/000000000000/transcripts",
        "/api/compare?a=x&b=y",
        "/results.json",
    ],
)
def test_nothing_outside_the_runs_and_the_page_is_served(catalogue: Catalogue, target: str) -> None:
    [answer] = get(catalogue, target, raw=True)
    assert answer.status in (400, 404), (target, answer.status)
    assert b"root:" not in answer.body and b"models" not in answer.body


def test_it_is_read_only_and_answers_only_to_its_own_address(catalogue: Catalogue) -> None:
    async def go() -> list[int]:
        async with TestClient(TestServer(make_app(catalogue))) as client:
            statuses = []
            for method in ("POST", "PUT", "DELETE"):
                async with client.request(method, "/api/runs") as response:
                    statuses.append(response.status)
            headers = {"Host": "attacker.example:8000"}  # DNS rebinding
            async with client.get("/api/runs", headers=headers) as response:
                statuses.append(response.status)
            return statuses

    assert asyncio.run(go()) == [405, 405, 405, 421]


def test_bad_page_numbers_and_verdicts_are_refused(catalogue: Catalogue) -> None:
    run = run_id(catalogue, "before")
    for query in ("page=0", "page=x", "size=1000", "verdict=maybe"):
        [answer] = get(catalogue, f"/api/runs/{run}/transcripts?{query}")
        assert answer.status == 400 and "error" in answer.json()


def test_the_index_reads_lines_in_any_key_order(tmp_path: Path) -> None:
    """Lines in `rank`'s key order are read from their first bytes; others in full."""
    lines = [
        {"role": "evaluee", "member": "a", "scenario": "s\"1", "messages": [["user", "Hi?"]],
         "reply": "from a"},
        {"reply": "from b", "scenario": 's"1', "member": "b", "role": "evaluee", "messages": []},
        {"role": "reflection", "member": "j", "scenario": 's"1', "evaluee": "a", "reply": "ok"},
        {"role": "comparison", "member": "j", "scenario": 's"1', "first": "a", "second": "b",
         "verdicts": [2, None], "failure": None, "messages": [], "reply": "B"},
        {"verdicts": [1], "first": "b", "second": "a", "role": "repair", "member": "j",
         "scenario": "s2", "reply": "A"},
        {"role": "comparison", "member": "k", "scenario": "s2", "first": "a", "second": "b",
         "messages": [], "reply": "?"},
    ]  # fmt: skip
    path = tmp_path / "transcripts.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines) + "\n")
    index = TranscriptIndex(path)
    assert index.wait(10) and index.error is None
    assert index.scenarios() == ['s"1', "s2"]
    [first] = index.comparisons(index.matching(Filters(scenario='s"1')))
    assert (first["verdict"], first["question"]) == ("second", "Hi?")
    assert (first["first_reply"], first["second_reply"]) == ("from a", "from b")
    assert (first["first_reflection"], first["second_reflection"]) == ("ok", None)
    [repair] = index.comparisons(index.matching(Filters(verdict="first")))
    assert (repair["role"], repair["first"], repair["reply"]) == ("repair", "b", "A")
    assert index.matching(Filters(verdict="unrecorded")) == [2]
    assert index.matching(Filters(judge="j", evaluee="a")) == [0, 1]

    path.write_text(path.read_text() + '{"role": "comparison", "member": "j", "sce\n')
    damaged = TranscriptIndex(path)  # the bad line is named and left out, never the rest
    assert damaged.wait(10) and damaged.error is None
    assert damaged.progress()["unreadable_lines"] == 1
    [named] = damaged.progress()["unreadable"]
    assert named.startswith("line 8: ") and len(damaged.matching(Filters())) == 3


def test_a_repair_joins_its_comparison_and_the_filters_count_as_the_terminal(
    tmp_path: Path,
) -> None:
    """Three comparisons of judge j: one read, one unread then repaired, one unread whose
    repair was unread too; one of k whose call failed. The list holds the four
    comparisons (repairs are not comparisons), each filed under the verdict that
    counted; "unread" and "failed" are what the terminal counts as parse failures and
    judge errors."""

    def line(role: str, scenario: str, verdicts: list[int | None] | None, **more: Any) -> str:
        fields = {"role": role, "member": more.pop("member", "j"), "scenario": scenario,
                  "first": "a", "second": "b", "verdicts": verdicts, **more}  # fmt: skip
        return json.dumps(fields) + "\n"

    lines = [
        line("comparison", "s1", [1], failure=None, reply="A"),
        line("comparison", "s2", None, failure="parse", reply="hmm"),
        line("comparison", "s3", None, failure="parse", reply="?"),
        line("comparison", "s4", None, failure="judge error", reply=None, member="k"),
        line("repair", "s2", [2], failure=None, reply="B"),
        line("repair", "s3", None, failure="parse", reply="still ?"),
    ]
    path = tmp_path / "transcripts.jsonl"
    path.write_text("".join(lines))
    index = TranscriptIndex(path)
    assert index.wait(10) and index.error is None
    every = index.matching(Filters())
    assert len(every) == 4 and index.repaired(every) == 2
    assert index.matching(Filters(verdict="unread")) == [2]
    assert index.matching(Filters(verdict="failed")) == [3]
    [fixed] = index.comparisons(index.matching(Filters(verdict="second")))
    assert (fixed["scenario"], fixed["reply"], fixed["failure"]) == ("s2", "hmm", "parse")
    assert fixed["repair"] == {"verdicts": [2], "reply": "B", "failure": None, "error": None}


def test_damaged_transcripts_are_named_and_the_rest_of_the_run_still_shows(
    tmp_path: Path, runs: Path, catalogue: Catalogue
) -> None:
    shutil.copytree(runs / "before", tmp_path / "before")
    every = transcripts(catalogue, run_id(catalogue, "before"))
    with (tmp_path / "before" / "transcripts.jsonl").open("a") as f:
        f.write('{"role": "comparison", "member": "ada", "scena\n')
    catalogue = load_catalogue([tmp_path], _no_damage)
    run = run_id(catalogue, "before")
    listing = transcripts(catalogue, run)
    assert listing["total"] == every["total"] and listing["unreadable_lines"] == 1
    assert listing["unreadable"][0].startswith("line ")


def test_a_line_damaged_past_its_start_is_named_not_a_crash(tmp_path: Path, runs: Path) -> None:
    """A line whose first bytes index well but whose rest is damaged (a transcript or a
    trace cut or edited by hand) is named, with where it starts, and the rest of its
    page (or the task's other votes) is shown."""
    shutil.copytree(runs / "before", tmp_path / "before")
    shutil.copytree(runs / "grade", tmp_path / "grade")
    transcripts = tmp_path / "before" / "transcripts.jsonl"
    lines = transcripts.read_text().splitlines(keepends=True)
    first = next(i for i, line in enumerate(lines) if line.startswith('{"role": "comparison"'))
    lines[first] = lines[first][:200] + "\n"  # the head (who, what, verdicts) survives
    transcripts.write_text("".join(lines))
    trace = tmp_path / "grade" / "trace.jsonl"
    before = trace.stat().st_size
    trace.write_text(trace.read_text() + '{"task_id": "france", "candidate": "a", "crit\n')
    catalogue = load_catalogue([tmp_path], _no_damage)
    ranking, grading = run_id(catalogue, "before"), run_id(catalogue, "grade")
    index = catalogue.runs[ranking].transcripts
    assert index is not None and index.wait(30) and index.error is None
    listing, votes = get(
        catalogue,
        f"/api/runs/{ranking}/transcripts",
        f"/api/runs/{grading}/votes?task=france&candidate=a",
    )
    assert listing.status == 200 and len(listing.json()["items"]) == 20
    damaged = listing.json()["items"][0]
    start = sum(len(line.encode()) for line in lines[:first])
    assert damaged["unreadable"][0].startswith(f"the line at byte {start}: ")
    assert damaged["reply"] is None and listing.json()["unreadable_lines"] == 1
    assert votes.status == 200 and votes.json()["votes"]
    [named] = votes.json()["unreadable"]
    assert named.startswith(f"the line at byte {before}: ")


def test_a_fault_of_the_viewer_is_json_with_the_security_headers(
    catalogue: Catalogue, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(a: object, b: object) -> None:
        raise RuntimeError("a bug")

    monkeypatch.setattr("eigenjury.view.server.ranking_change", broken)
    before = run_id(catalogue, "before")
    [answer] = get(catalogue, f"/api/compare?a={before}&b={before}")
    assert answer.status == 500 and "RuntimeError('a bug')" in answer.json()["error"]
    assert answer.headers["X-Content-Type-Options"] == "nosniff"


def test_verdict_categories() -> None:
    assert verdict_category([1]) == "first" and verdict_category([2, 2]) == "second"
    assert verdict_category([0, None]) == "tie" and verdict_category([1, 2]) == "mixed"
    assert verdict_category([None]) == "unread" and verdict_category(None) == "unread"
    assert verdict_category(None, recorded=False) == "unrecorded"


# --- the command ---------------------------------------------------------------------------


def test_no_runs_a_missing_path_and_only_damaged_records_exit_2(
    tmp_path: Path, runs: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    assert main(["view", str(empty)]) == 2
    err = capsys.readouterr().err
    assert f"no eigenjury runs found under {empty}" in err and "results.json" in err
    assert main(["view", str(tmp_path / "nowhere")]) == 2
    assert "nowhere: no such file or folder" in capsys.readouterr().err
    damaged = tmp_path / "damaged" / "results.json"
    damaged.parent.mkdir()
    record = json.loads((runs / "before" / "results.json").read_text())
    damaged.write_text(json.dumps({**record, "models": "not a list"}))
    assert main(["view", str(damaged.parent)]) == 2
    err = capsys.readouterr().err
    assert f"skipped: {damaged}" in err and "models" in err and "is damaged" in err


def test_a_damaged_record_is_named_and_the_others_are_served(tmp_path: Path, runs: Path) -> None:
    folder = tmp_path / "some"
    (folder / "bad").mkdir(parents=True)
    record = json.loads((runs / "before" / "results.json").read_text())
    (folder / "bad" / "results.json").write_text(json.dumps({**record, "models": 3}))
    (folder / "good").mkdir()
    (folder / "good" / "results.json").write_text(json.dumps(record))
    skipped: list[Found] = []
    catalogue = load_catalogue([folder], skipped.append)
    assert [f.path.parent.name for f in skipped] == ["bad"] and len(catalogue.runs) == 1
    skipped.clear()  # a folder given twice, or within another given, is named once
    again = load_catalogue([folder, folder / "bad", folder / "good", folder], skipped.append)
    assert [f.path.parent.name for f in skipped] == ["bad"] and len(again.damaged) == 1
    assert [run.path.parent.name for run in again.runs.values()] == ["good"]
    [answer] = get(catalogue, "/api/runs")
    [damaged] = answer.json()["damaged"]
    assert damaged["where"] == "bad/results.json" and "models" in damaged["problem"]


def test_a_port_in_use_exits_2(runs: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert main(["view", str(runs), "--port", str(port)]) == 2
    assert (
        f"port {port} on 127.0.0.1 is in use; pick another with --port or use --port 0"
        in capsys.readouterr().err
    )


@pytest.fixture
def served(runs: Path) -> Iterator[tuple[subprocess.Popen[str], str]]:
    process = subprocess.Popen(
        [sys.executable, "-m", "eigenjury", "view", str(runs)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    assert process.stdout is not None
    first = process.stdout.readline().strip()
    try:
        yield process, first
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def test_it_prints_its_url_first_serves_and_stops_quietly_on_ctrl_c(
    served: tuple[subprocess.Popen[str], str],
) -> None:
    process, url = served
    assert url.startswith("http://127.0.0.1:") and url.endswith("/"), url
    with urllib.request.urlopen(url + "api/runs", timeout=10) as response:
        assert len(json.load(response)["runs"]) == 8
    process.send_signal(signal.SIGINT)
    _, err = process.communicate(timeout=10)
    assert process.returncode == 0 and "Traceback" not in err


# --- hostile folders: links, pipes, lines that are not what they should be ---------------


def _hostile_lines() -> list[str]:
    """Lines of a transcript that are JSON but no transcript line, or no JSON at all."""
    return [
        "[1, 2]",
        '"a comparison"',
        "null",
        "7",
        '{"role": "comparison", "member": "j", "scenario": "s", "first": "a", '
        '"second": "b", "verdicts": {"first": 1}}',
        '{"role": "comparison", "member": "j", "scenario": "s", "first": "a", '
        '"second": "b", "verdicts": [[1]]}',
        '{"role": "comparison", "member": "j\\x", "scenario": "s", "first": "a", '
        '"second": "b", "verdicts": [1]}',
        '{"verdicts": [9], "role": "repair", "member": "j", "scenario": "s", "first": "a", '
        '"second": "b"}',
        "\udcff not UTF-8",
        "{" * 5000,
    ]


def test_a_line_that_is_json_but_no_object_is_named_and_the_rest_is_indexed(
    tmp_path: Path, runs: Path, catalogue: Catalogue
) -> None:
    """A line that is JSON but not a transcript line (a list, a string, a number, null,
    an object whose verdicts are not verdicts) used to kill the indexing thread, which
    then reported a partial index as ready; each is named and left out."""
    every = transcripts(catalogue, run_id(catalogue, "before"))
    shutil.copytree(runs / "before", tmp_path / "before")
    path = tmp_path / "before" / "transcripts.jsonl"
    lines = path.read_bytes().splitlines(keepends=True)
    bad = _hostile_lines()
    middle = len(lines) // 2
    hostile = [line.encode("utf-8", "surrogateescape") + b"\n" for line in bad]
    path.write_bytes(b"".join(lines[:2] + hostile[:4] + lines[2:middle] + hostile[4:]
                              + lines[middle:]))  # fmt: skip
    catalogue = load_catalogue([tmp_path], _no_damage)
    listing = transcripts(catalogue, run_id(catalogue, "before"))
    assert listing["total"] == every["total"]
    assert listing["unreadable_lines"] == len(bad)
    assert listing["unreadable"][0] == "line 3: not a JSON object but a list"
    assert [named.split(":")[0] for named in listing["unreadable"]] == [
        "line 3", "line 4", "line 5", "line 6", f"line {middle + 5}",
    ]  # fmt: skip


@pytest.mark.fuzz
def test_links_out_of_the_given_folders_are_never_read(tmp_path: Path, runs: Path) -> None:
    """The README promises that nothing outside the folders given is served: a record,
    a transcript or a trace reached through a symbolic link that leads out is not read
    (a record's link is named on the terminal); links within the folders are followed."""
    outside, served = tmp_path / "outside", tmp_path / "served"
    shutil.copytree(runs / "after", outside / "after")
    shutil.copytree(runs / "grade", outside / "grade")
    shutil.copytree(runs / "before", served / "before")
    shutil.copytree(runs / "grade", served / "grade")
    (served / "escape").mkdir()
    (served / "escape" / "results.json").symlink_to(outside / "after" / "results.json")
    (served / "folder-link").symlink_to(outside / "after")  # a folder link: never entered
    for run, name in (("before", "transcripts.jsonl"), ("grade", "trace.jsonl")):
        (served / run / name).unlink()
        (served / run / name).symlink_to(outside / ("after" if run == "before" else "grade")
                                         / name)  # fmt: skip
    (served / "inside").mkdir()
    (served / "inside" / "results.json").symlink_to(served / "before" / "results.json")
    skipped: list[Found] = []
    catalogue = load_catalogue([served], skipped.append)
    assert [str(f.path.relative_to(served)) for f in skipped] == ["escape/results.json"]
    assert "outside the folders given" in str(skipped[0].problem)
    folders = sorted(run.path.parent.name for run in catalogue.runs.values())
    assert folders == ["before", "grade", "inside"]  # "inside" is a link within
    for run in catalogue.runs.values():
        assert run.transcripts is None and run.trace is None
    listing, *pages = get(catalogue, "/api/runs", *(f"/api/runs/{r}" for r in catalogue.runs))
    assert b"after" not in listing.body and str(outside).encode() not in listing.body
    assert all(page.status == 200 and not page.json()["transcripts"] for page in pages)
    grade = run_id(catalogue, "grade")
    [votes] = get(catalogue, f"/api/runs/{grade}/votes?task=france&candidate=a")
    assert votes.status == 404


@pytest.mark.fuzz
def test_named_pipes_in_the_folders_never_block_the_viewer(tmp_path: Path, runs: Path) -> None:
    """A named pipe called like a record or a run's long file used to block `eigenjury
    view` before it printed its URL (opening a pipe waits for a writer)."""
    served = tmp_path / "served"
    shutil.copytree(runs / "before", served / "before")
    shutil.copytree(runs / "grade", served / "grade")
    os.mkfifo(served / "pipe.json")
    (served / "piped").mkdir()
    os.mkfifo(served / "piped" / "results.json")
    for run, name in (("before", "transcripts.jsonl"), ("grade", "trace.jsonl")):
        (served / run / name).unlink()
        os.mkfifo(served / run / name)
    process = subprocess.Popen(
        [sys.executable, "-m", "eigenjury", "view", str(served)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    try:
        assert process.stdout is not None
        ready, _, _ = select.select([process.stdout], [], [], HANG_S)
        assert ready, f"HANG: `eigenjury view` printed no URL in {HANG_S} s"
        url = process.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:"), url
        with urllib.request.urlopen(url + "api/runs", timeout=30) as response:
            listed = json.load(response)
        where = sorted(run["where"] for run in listed["runs"])
        assert where == ["before/results.json", "grade/results.json"]
        assert not any(run["transcripts"] for run in listed["runs"])
    finally:
        process.kill()
        process.wait()


def _damage(line: bytes, rng: random.Random) -> bytes:
    """`line` (one JSON line, newline included) damaged one random way."""
    body = line.rstrip(b"\n")
    other: Any = rng.choice([[1, "x"], "text", 3.5, None, True, {"k": [None]}, [], {}])
    how = rng.randrange(5)
    if how == 0:  # cut short
        return body[: rng.randrange(len(body))] + b"\n"
    if how == 1:  # another JSON value altogether
        return json.dumps(other).encode() + b"\n"
    if how == 2:  # one field of another type, the key order kept
        data = json.loads(body)
        data[rng.choice(list(data))] = other
        return json.dumps(data).encode() + b"\n"
    if how == 3:  # bytes that are no JSON (or no UTF-8) somewhere in it
        at = rng.randrange(len(body))
        noise = bytes(rng.choice(b'"{}[]\\:,\xff\xfe\x00 ') for _ in range(rng.randint(1, 4)))
        return body[:at] + noise + body[at:] + b"\n"
    return line + line  # the same line twice


@pytest.mark.fuzz
@pytest.mark.parametrize("seed", range(4))
def test_randomly_damaged_transcripts_and_traces_never_stop_the_viewer(
    tmp_path: Path, runs: Path, seed: int
) -> None:
    """A fifth of the lines of a transcript and a trace damaged at random (cut, another
    JSON value, a field of another type, stray bytes, doubled): the index always
    finishes, every intact comparison is listed, and every page and every task's votes
    answer, naming the lines they could not read."""
    rng = random.Random(seed)
    shutil.copytree(runs / "before", tmp_path / "before")
    shutil.copytree(runs / "grade", tmp_path / "grade")
    intact = 0
    for name in ("before/transcripts.jsonl", "grade/trace.jsonl"):
        path = tmp_path / name
        lines = path.read_bytes().splitlines(keepends=True)
        damaged = [_damage(line, rng) if rng.random() < 0.2 else line for line in lines]
        if name.startswith("before"):
            intact = sum(
                line == kept and b'"role": "comparison"' in line
                for line, kept in zip(lines, damaged, strict=True)
            )
        path.write_bytes(b"".join(damaged))
    catalogue = load_catalogue([tmp_path], _no_damage)
    ranking, grading = run_id(catalogue, "before"), run_id(catalogue, "grade")
    index = catalogue.runs[ranking].transcripts
    assert index is not None and index.wait(30) and index.error is None
    first = transcripts(catalogue, ranking, "size=100")
    assert first["total"] >= intact > 0
    pages = -(-first["total"] // 100)
    record = catalogue.runs[grading].record.model_dump(mode="json")
    tasks = {(t["task_id"], t["candidate"]) for t in record["tasks"]}
    answers = get(
        catalogue,
        *(f"/api/runs/{ranking}/transcripts?size=100&page={n}" for n in range(1, pages + 1)),
        *(f"/api/runs/{grading}/votes?task={t}&candidate={c}" for t, c in sorted(tasks)),
    )
    assert all(answer.status == 200 for answer in answers)
