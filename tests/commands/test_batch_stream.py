"""`eigenjury batch` streams: bad lines found late keep what ran before them, results in
either order, memory that does not grow with the file."""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from batch_scripts import essence, read_results, write_requests
from eigenjury.batch import CHUNK, SeenIds, read_requests
from eigenjury.cli import main
from eigenjury.engine import Store
from eigenjury.errors import InputError
from eigenjury.testing.server import Faults, ServerThread


def _batch(requests: Path, out: Path, store: Path, *more: str) -> int:
    model = "scripted:echo"
    args = ["batch", str(requests), "--model", model, "--out", str(out), "--store", str(store)]
    return main([*args, "--no-progress", *more])


def _replace_line(path: Path, number: int, text: str) -> str:
    """Put `text` on line `number` of `path`; returns the line it replaced."""
    rows = path.read_text().splitlines(keepends=True)
    before, rows[number - 1] = rows[number - 1], text + "\n"
    path.write_text("".join(rows))
    return before


def _stored(path: Path) -> dict[str, int]:
    with Store(path, create=False) as store:
        return store.counts()


@pytest.mark.slow
def test_a_bad_line_late_keeps_every_result_before_it_and_a_rerun_repeats_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    requests = write_requests(tmp_path / "req.jsonl", 6000)
    good = _replace_line(requests, 5000, '{"id": "r4999", "messages": [{"role": "user"}]}')
    out, store = tmp_path / "out.jsonl", tmp_path / "s.sqlite"
    code = _batch(requests, out, store)
    err = " ".join(capsys.readouterr().err.split())
    assert code == 2 and "Traceback" not in err
    assert f"{requests}, line 5000: field 'messages.0.content'" in err
    assert "the 4999 results before it are in the store" in err
    assert "fix the line and rerun: nothing done is repeated" in err
    assert _stored(store) == {"ok": 4999}
    assert not out.exists() and not (tmp_path / ".out.jsonl.tmp").exists()  # no half file
    _replace_line(requests, 5000, good.rstrip("\n"))
    assert _batch(requests, out, store) == 0
    rows = read_results(out)
    assert [r["id"] for r in rows] == [f"r{i}" for i in range(6000)]
    assert [r["text"] for r in rows] == [f"echo: q {i}" for i in range(6000)]
    assert [r["cached"] for r in rows] == [True] * 4999 + [False] * 1001  # nothing repeated
    assert _stored(store) == {"ok": 6000}


@pytest.mark.parametrize("earlier", [10, 2990])  # in an earlier chunk, and in the same one
def test_an_id_used_twice_late_is_named_with_both_lines(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], earlier: int
) -> None:
    requests = write_requests(tmp_path / "req.jsonl", 4000)
    repeated = json.loads(requests.read_text().splitlines()[3000 - 1])
    repeated["id"] = f"r{earlier - 1}"
    _replace_line(requests, 3000, json.dumps(repeated))
    code = _batch(requests, tmp_path / "out.jsonl", tmp_path / "s.sqlite")
    err = " ".join(capsys.readouterr().err.split())
    assert code == 2
    assert f"line 3000: id 'r{earlier - 1}' was already used on line {earlier}" in err
    assert _stored(tmp_path / "s.sqlite") == {"ok": 2999}


def test_the_file_is_read_as_its_requests_are_taken(tmp_path: Path) -> None:
    requests = write_requests(tmp_path / "req.jsonl", 3 * CHUNK)
    with requests.open("a") as f:
        f.write("not json\n")
    rows = read_requests(requests)
    assert next(rows)[0] == 1  # handed over before the bad last line was read
    assert [number for number, _ in itertools.islice(rows, 3 * CHUNK - 1)][-1] == 3 * CHUNK
    with pytest.raises(InputError, match="not valid JSON") as caught:
        next(rows)
    assert caught.value.line == 3 * CHUNK + 1
    assert f"the {3 * CHUNK} results before it are in the store" in caught.value.message


def test_seen_ids_find_the_first_repeat_of_a_chunk() -> None:
    seen = SeenIds()
    assert seen.add([("a", 1), ("b", 2)]) is None
    assert seen.add([("c", 3), ("d", 4), ("d", 5), ("a", 6)]) == (2, 4)
    assert seen.add([("a", 7)]) == (0, 1)
    assert seen.add([("e", 8)]) is None  # what came before a repeat was recorded
    assert seen.add([("c", 9)]) == (0, 3)
    seen.close()


def test_an_empty_file_is_refused_before_the_store_opens(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "req.jsonl").write_text("\n  \n")
    code = _batch(tmp_path / "req.jsonl", tmp_path / "out.jsonl", tmp_path / "s.sqlite")
    assert code == 2 and "the file has no requests" in capsys.readouterr().err
    assert not (tmp_path / "s.sqlite").exists()


def test_a_file_of_exactly_one_chunk_runs_every_line(tmp_path: Path) -> None:
    requests = write_requests(tmp_path / "req.jsonl", CHUNK)
    assert _batch(requests, tmp_path / "out.jsonl", tmp_path / "s.sqlite") == 0
    assert len(read_results(tmp_path / "out.jsonl")) == CHUNK


def test_completion_order_gives_every_id_once_with_the_results_of_input_order(
    tmp_path: Path,
) -> None:
    requests = write_requests(tmp_path / "req.jsonl", 300)
    # calls refused for a rate limit finish late, so completion order differs from the file's
    faults = Faults(rate_limit=0.3, retry_after_s=0.01)
    with ServerThread(latency_s=0.002, faults=faults, seed=3) as server:
        model = f"openai-compatible:test@{server.base_url}"

        def batch(order: str, name: str) -> list[dict[str, Any]]:
            out = tmp_path / f"{name}.jsonl"
            args = ["batch", str(requests), "--model", model, "--out", str(out)]
            args += ["--store", str(tmp_path / f"{name}.sqlite"), "--order", order]
            assert main([*args, "--concurrency", "8", "--max-attempts", "20", "--no-progress"]) == 0
            return read_results(out)

        finished = batch("completion", "finished")
        ordered = batch("input", "ordered")
    ids = [r["id"] for r in ordered]
    assert ids == [f"r{i}" for i in range(300)]
    assert [r["id"] for r in finished] != ids and sorted(r["id"] for r in finished) == sorted(ids)
    by_id = {r["id"]: r for r in finished}
    assert essence([by_id[i] for i in ids]) == essence(ordered)


# VmHWM, the high-water mark of this process's own memory: getrusage's ru_maxrss also
# counts the image the child was forked from (a test worker's hundreds of MB)
PEAK_RSS = """
import re, sys
from pathlib import Path
from eigenjury.cli import main
code = main(sys.argv[1:])
peak = re.search(r"VmHWM:\\s+(\\d+) kB", Path("/proc/self/status").read_text()).group(1)
print("peak_rss_kb", peak, file=sys.stderr)
sys.exit(code)
"""


def peak_rss_mb(requests: Path, out: Path, store: Path) -> float:
    """Peak resident memory of `eigenjury batch` over `requests` (scripted echo), in MB."""
    args = ["batch", str(requests), "--model", "scripted:echo", "--out", str(out)]
    args += ["--store", str(store), "--no-progress"]
    done = subprocess.run(
        [sys.executable, "-c", PEAK_RSS, *args], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    kb = int(done.stderr.split("peak_rss_kb")[-1])
    return kb / 1024


@pytest.mark.slow
def test_memory_does_not_grow_with_the_number_of_requests(tmp_path: Path) -> None:
    """200,000 requests: today's engine held about 770 MB; a stream holds a window."""
    requests = write_requests(tmp_path / "req.jsonl", 200_000)
    peak = peak_rss_mb(requests, tmp_path / "out.jsonl", tmp_path / "s.sqlite")
    assert peak < 250, f"peak resident memory {peak:.0f} MB"
    assert len(read_results(tmp_path / "out.jsonl")) == 200_000
