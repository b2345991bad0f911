"""The one engine runner: one set of defaults, one store per working directory shared
by every command, backends found by name."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import yaml

import peer_scripts  # noqa: F401  (registers the scripted population)
from batch_scripts import write_requests
from eigenjury.cli import build_parser, main
from eigenjury.commands.options import engine_settings
from eigenjury.engine import Store
from eigenjury.engine.backends import backend_names, connect
from eigenjury.engine.settings import DIRECTORY_STORE, EngineSettings, default_store
from eigenjury.errors import InputError
from eigenjury.peer.config import RankConfig

QUALITIES = {"ann": 1.0, "bob": 0.0, "cy": -1.0}


def _config(folder: Path) -> Path:
    """A small scripted population with no engine section: the defaults apply."""
    data = {
        "name": "shared store",
        "population": [
            {"name": n, "model": "scripted:peer-truth", "persona": f"[quality {q}]"}
            for n, q in QUALITIES.items()
        ],
        "scenarios": {"source": "everyday", "limit": 3},
        "judging": {"reflections": False},
        "fit": {"bootstrap": 0},
    }
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "config.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_configs_and_commands_share_one_set_of_engine_defaults() -> None:
    config = RankConfig.model_validate(
        {"population": [{"name": n, "model": "scripted:echo"} for n in "abc"]}
    )
    for argv in (
        ["batch", "r.jsonl", "--model", "scripted:echo", "--out", "o.jsonl"],
        ["grade", "starter", "--submissions", "s.jsonl", "--jury", "scripted:echo"],
        ["bound", "measure", "d.jsonl", "--judge", "scripted:echo", "--out", "p.json"],
    ):
        assert engine_settings(build_parser().parse_args(argv)) == config.engine == EngineSettings()
    assert EngineSettings().store_path() == default_store()
    assert default_store() == Path(os.environ["EIGENJURY_DATA_DIR"], "store.sqlite")


def test_a_rank_into_another_folder_or_from_another_folder_is_served_from_the_store(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """One store per user: neither the output folder nor the working directory decides
    where the calls are kept (the same config run from elsewhere used to pay again)."""
    path = _config(Path("project")).resolve()
    assert main(["rank", str(path), "--out", "first", "--no-progress"]) == 0
    assert default_store().is_file()
    assert not Path("first/store.sqlite").exists() and not DIRECTORY_STORE.exists()
    elsewhere = Path("elsewhere").resolve()
    elsewhere.mkdir()
    for folder, out in ((Path(), "second"), (elsewhere, "third")):
        monkeypatch.chdir(folder)
        assert main(["rank", str(path), "--out", out, "--no-progress"]) == 0
        total = json.loads(Path(out, "results.json").read_text())["run"]["accounting"]["total"]
        assert total["calls"] > 0 and total["cached"] == total["calls"]


def test_a_folders_store_of_an_older_eigenjury_is_absorbed_once(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Calls kept in ./.eigenjury/store.sqlite (the default before 0.3.3) are taken into
    the per-user store the first time a command uses it from that folder: nothing is
    paid for again, the old file is renamed (never deleted), and it happens once."""
    requests = write_requests(Path("requests.jsonl"), 4)
    batch = ["batch", str(requests), "--model", "scripted:echo", "--no-progress"]
    assert main([*batch, "--out", "a.jsonl", "--store", str(DIRECTORY_STORE)]) == 0
    kept = _keys(DIRECTORY_STORE)
    capsys.readouterr()
    assert main([*batch, "--out", "b.jsonl"]) == 0
    assert all(json.loads(line)["cached"] for line in Path("b.jsonl").read_text().splitlines())
    said = capsys.readouterr().err
    assert f"absorbed {len(kept)} stored calls of {DIRECTORY_STORE}" in said
    assert str(default_store()) in said
    assert _keys(default_store()) == kept and not DIRECTORY_STORE.exists()
    assert _keys(DIRECTORY_STORE.with_name("store.sqlite.absorbed")) == kept
    assert main([*batch, "--out", "c.jsonl"]) == 0
    assert "absorbed" not in capsys.readouterr().err


def test_a_call_rank_made_is_a_cache_hit_for_batch(capsys: pytest.CaptureFixture[str]) -> None:
    """The same request from another method is answered from the store: nothing is sent."""
    path = _config(Path("project"))
    assert main(["rank", str(path), "--out", "run", "--no-progress"]) == 0
    lines = Path("run/transcripts.jsonl").read_text().splitlines()
    transcripts = [json.loads(line) for line in lines]
    answer = next(t for t in transcripts if t["role"] == "evaluee")
    request = {
        "id": "again",
        "messages": [{"role": r, "content": c} for r, c in answer["messages"]],
        "temperature": 0.7,  # the evaluees' sampling in a rank config by default
        "max_tokens": 300,
        "seed": 0,
    }
    Path("requests.jsonl").write_text(json.dumps(request) + "\n")
    capsys.readouterr()
    assert main(["batch", "requests.jsonl", "--model", "scripted:peer-truth", "--out", "o.jsonl",
                 "--no-progress"]) == 0  # fmt: skip
    result = json.loads(Path("o.jsonl").read_text())
    assert result["text"] == answer["reply"] and result["cached"] is True


def test_backends_are_found_by_name() -> None:
    assert backend_names()[0] == "local" and "ray" in backend_names()  # an entry point
    assert connect("local") == (None, None)
    assert "batch-api" in backend_names()  # built in
    known = "local, batch-api, ray"
    with pytest.raises(InputError, match=f"unknown backend 'slurm'; use one of {known}"):
        connect("slurm")


def test_a_run_folder_of_eigenjury_0_1_gives_its_calls_to_the_shared_store(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """0.1 kept a rank run's calls in its output folder: a rerun takes them into the
    shared store (keeping the old file) and pays for nothing."""
    path = _config(Path("project"))
    data = yaml.safe_load(path.read_text())
    path.write_text(yaml.safe_dump({**data, "engine": {"store": "run/store.sqlite"}}))
    assert main(["rank", str(path), "--out", "project/run", "--no-progress"]) == 0
    path.write_text(yaml.safe_dump(data))  # as 0.1 left it: no store named
    record = Path("project/run/results.json")
    old = json.loads(record.read_text())
    for field in ("kind", "eigenjury", "created"):  # and its record as 0.1 wrote it
        old.pop(field)
    record.write_text(json.dumps(old))
    capsys.readouterr()
    assert main(["rank", str(path), "--out", "project/run", "--no-progress"]) == 0
    total = json.loads(Path("project/run/results.json").read_text())["run"]["accounting"]
    assert total["total"]["cached"] == total["total"]["calls"] > 0
    assert "into the shared store" in capsys.readouterr().err
    assert Path("project/run/store.sqlite.moved").is_file() and default_store().is_file()
    assert not Path("project/run/store.sqlite").exists()


def _keys(store: Path) -> list[str]:
    with Store(store, create=False) as opened:
        return sorted(result.key for result in opened)


@pytest.mark.parametrize("out", [".eigenjury", "proj"])
def test_a_store_in_the_output_folder_is_adopted_only_from_a_run_of_0_1(
    out: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A folder is taken for a 0.1 run's by its record, never by a file called
    store.sqlite: `--out .eigenjury` used to move the shared store into itself (and pay
    for every call again), and `--out proj` emptied the store of `batch --store
    proj/store.sqlite`."""
    if out == ".eigenjury":  # the user data folder there, as a user may set it
        monkeypatch.setenv("EIGENJURY_DATA_DIR", str(Path(out).resolve()))
    path = _config(Path("project"))
    assert main(["rank", str(path), "--out", "first", "--no-progress"]) == 0
    store = Path(out, "store.sqlite")
    if out == "proj":
        requests = write_requests(Path("requests.jsonl"), 3)
        batch = ["batch", str(requests), "--model", "scripted:echo", "--out", "b.jsonl"]
        assert main([*batch, "--store", str(store), "--no-progress"]) == 0
    kept = _keys(store)
    capsys.readouterr()
    assert main(["rank", str(path), "--out", out, "--no-progress"]) == 0
    total = json.loads(Path(out, "results.json").read_text())["run"]["accounting"]["total"]
    assert total["cached"] == total["calls"] > 0  # nothing paid for again
    assert _keys(store) == kept and not Path(out, "store.sqlite.moved").exists()
    assert "into the shared store" not in capsys.readouterr().err
