"""Secrets never reach a file or the terminal: secrets planted in every form a spec can
carry them (user info, query parameters of any name, keys from the environment by the
default variable or a named one), every command that takes a spec run against the test
server, every file written and every line printed scanned.

Run twice: against a sound server (the secrets go into stores, records, tables, reports)
and against one that rejects every call, quoting back the credentials and the URL it
got (the secrets go into error messages)."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest
import yaml

from eigenjury.cli import main
from eigenjury.testing.server import FaultServer, Judging, ServerThread

USER, PASSWORD = "USER-SECRET-1", "PASS-SECRET-2"
QUERY = {"auth": "QUERY-SECRET-3", "api-version": "QUERY-SECRET-4", "sig": "QUERY-SECRET-5"}
DEFAULT_KEY, NAMED_KEY = "KEY-SECRET-6", "KEY-SECRET-7"
SECRETS = (
    USER,
    PASSWORD,
    *QUERY.values(),
    DEFAULT_KEY,
    NAMED_KEY,
    base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode(),  # as HTTP Basic sends it
    "SECRET",  # any part of any of them
)
CONTRACT = """\
name: capitals
tasks:
  - task_id: france
    execution: {prompt: "What is the capital of France?"}
    evaluation:
      criteria:
        - {id: city, weight: 20, grader: exact_match, prompt: Paris}
        - {id: names-paris, weight: 80, grader: llm_judge, prompt: The answer names paris}
"""


def spec_forms(base: str) -> dict[str, str | dict[str, str]]:
    """The same served model, with its secrets in each form a spec can carry them."""
    query = "&".join(f"{name}={value}" for name, value in QUERY.items())
    with_user = base.replace("http://", f"http://{USER}:{PASSWORD}@")
    return {
        "user info": f"openai-compatible:m@{with_user}",
        "query": f"openai-compatible:m@{base}/?{query}",
        "named key": {"spec": f"openai-compatible:m@{base}?{query}", "api_key_env": "NAMED_KEY"},
    }


def commands(work: Path, forms: dict[str, str | dict[str, str]]) -> list[list[str]]:
    """Every command that takes a spec, with the specs on its command line (as strings)
    or in its config (every form)."""
    store = ["--store", str(work / "store.sqlite"), "--no-progress", "--max-attempts", "1"]
    texts = [f for f in forms.values() if isinstance(f, str)]
    (work / "contract.yaml").write_text(CONTRACT)
    requests = work / "requests.jsonl"
    requests.write_text(
        "".join(
            json.dumps({"id": f"r{i}", "messages": [{"role": "user", "content": f"q{i}"}]}) + "\n"
            for i in range(2)
        )
    )
    dataset = work / "dataset.jsonl"
    dataset.write_text(
        "".join(
            json.dumps({"id": f"i{i}", "prompt": "Q?", "response": f"Answer {i}."}) + "\n"
            for i in range(4)
        )
    )
    config = {
        "population": [
            {"name": name.replace(" ", "-"), "model": form, "persona": f"You are {name}."}
            for name, form in forms.items()
        ],
        "constitution": "kindness",
        "scenarios": {"source": "everyday", "limit": 2, "seed": 0},
        "sampling": {"design": "all"},
        "judging": {"reflections": False, "ties": True, "soft": True},
        "fit": {"bootstrap": 0, "style": "none"},
        "engine": {"store": "store.sqlite", "max_attempts": 1},
        "output": "rank",
    }
    (work / "rank.yaml").write_text(yaml.safe_dump(config))
    contract = str(work / "contract.yaml")
    out: list[list[str]] = [["rank", str(work / "rank.yaml"), "--no-progress"]]
    for i, spec in enumerate(texts):
        judge = ["--judge", spec, "--paraphraser", spec, "--generators", "identity,paraphrase"]
        judge += ["--m", "3"]
        jury = ["--jury", spec, "--candidate", spec, "--escalate-to", spec]
        pools = ["--pool-a", spec, "--pool-b", spec, "--candidate", spec, "--rounds", "10"]
        out += [
            ["batch", str(requests), "--model", spec, "--out", str(work / f"b{i}.jsonl"), *store],
            ["grade", contract, *jury, "--out", str(work / f"g{i}"), *store],
            ["juries", "compare", contract, *pools, "--out", str(work / f"j{i}"), *store],
            ["contracts", "export-harbor", contract, str(work / f"h{i}"), "--jury", spec],
            ["bound", "measure", str(dataset), *judge, "--out", str(work / f"p{i}.json"), *store],
        ]
    for exported in ("export.jsonl", "export.parquet"):
        out.append(["export", str(work / exported), "--store", str(work / "store.sqlite")])
    return out


def scan(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    server: FaultServer,
) -> dict[str, int]:
    """Run every command against `server`; the exit status of each, and every secret
    found in what it printed or any file under the folder."""
    monkeypatch.setenv("OPENAI_COMPATIBLE_API_KEY", DEFAULT_KEY)
    monkeypatch.setenv("NAMED_KEY", NAMED_KEY)
    monkeypatch.chdir(tmp_path)
    work = tmp_path / "work"
    work.mkdir()
    codes: dict[str, int] = {}
    leaks: list[str] = []
    for command in commands(work, spec_forms(server.base_url)):
        codes[" ".join(command[:2])] = main(command)
        printed = capsys.readouterr()
        lines = (printed.out + printed.err).splitlines()
        leaks += [f"{command[0]} printed: {x}" for x in lines if any(s in x for s in SECRETS)]
    inputs = {work / "rank.yaml"}  # the user's own config holds them, as written
    for path in sorted(tmp_path.rglob("*")):
        if path.is_file() and path not in inputs:
            data = path.read_bytes()
            leaks += [
                f"{path.relative_to(tmp_path)} holds {s}" for s in SECRETS if s.encode() in data
            ]
    assert leaks == []
    assert server.requests > 0
    return codes


@pytest.mark.slow
def test_no_secret_of_any_spec_form_reaches_a_file_or_the_terminal(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    with ServerThread(judging=Judging("enforce", logprobs=True)) as server:
        codes = scan(tmp_path, capsys, monkeypatch, server)
        # every call reached the server where it belongs, with the query after the path
        assert {p.partition("?")[0] for p in server.paths} == {"/v1/chat/completions"}
        queries = {p.partition("?")[2] for p in server.paths}
    assert queries == {"", "&".join(f"{k}={v}" for k, v in QUERY.items())}
    assert codes.pop("contracts export-harbor") == 2  # refused: the task files would hold them
    assert codes == dict.fromkeys(codes, 0)


@pytest.mark.fuzz
def test_a_server_quoting_back_every_credential_gets_none_of_them_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every call is rejected with a 401 quoting the key (or HTTP Basic credentials) and
    the URL with its query: the errors are stored, written and printed redacted."""
    with ServerThread(api_key="not-any-of-ours") as server:
        codes = scan(tmp_path, capsys, monkeypatch, server)
    assert all(code != 0 for name, code in codes.items() if not name.startswith("export"))
