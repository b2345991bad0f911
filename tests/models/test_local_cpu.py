"""llama.cpp's CPU code paths: the one-time probe in a child process, its cache, the
forced settings, and the fallback to plain kernels when the fast path crashes (made to
crash here with SIGILL, as AMX does on some virtual machines)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from eigenjury.models import SpecError
from eigenjury.models.providers import local_cpu
from eigenjury.models.providers.local import model_path

if not os.environ.get("EIGENJURY_REQUIRE_LOCAL"):
    pytest.importorskip("llama_cpp", reason="the local extra is not installed")

pytestmark = pytest.mark.local
SIGILL = [sys.executable, "-c", "import os, signal; os.kill(os.getpid(), signal.SIGILL)"]


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("EIGENJURY_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv(local_cpu.SETTING, raising=False)
    return tmp_path / "cache" / "llama-cpu.json"


def crash_when_fast(monkeypatch: pytest.MonkeyPatch, *, plain_too: bool = False) -> list[bool]:
    """The fast path dies with SIGILL (and the plain one too, if asked); returns the
    list of paths probed."""
    probed: list[bool] = []
    real = local_cpu.probe_command

    def command(model: Path, *, extra_buffers: bool) -> list[str]:
        probed.append(extra_buffers)
        if extra_buffers or plain_too:
            return SIGILL
        return real(model, extra_buffers=extra_buffers)

    monkeypatch.setattr(local_cpu, "probe_command", command)
    return probed


@pytest.fixture(scope="module")
def fast_here() -> local_cpu.Probe:
    """Whether llama.cpp's fast path runs on this machine: on AMD Zen 4 it does; on an
    Intel Xeon with AMX under KVM it kills the process (SIGSEGV or SIGILL), and the
    tests must hold on either."""
    return local_cpu.run_probe(model_path("smollm2-135m"), extra_buffers=True)


def test_the_fast_path_is_probed_once_and_cached(
    cache: Path, monkeypatch: pytest.MonkeyPatch, fast_here: local_cpu.Probe
) -> None:
    model = model_path("smollm2-135m")
    assert local_cpu.use_extra_buffers(model) is fast_here.ok  # the probe's verdict here
    [entry] = json.loads(cache.read_text()).values()
    assert entry["extra_buffers"] is fast_here.ok and entry["probe"] == fast_here.detail
    probed = crash_when_fast(monkeypatch)
    assert local_cpu.use_extra_buffers(model) is fast_here.ok and probed == []  # from the cache


@pytest.mark.parametrize("occupant", ["folder", "named pipe"])
def test_a_cache_that_cannot_be_a_file_costs_a_probe_not_the_run(
    cache: Path, occupant: str, fast_here: local_cpu.Probe
) -> None:
    cache.parent.mkdir(parents=True)
    if occupant == "folder":
        cache.mkdir()
    else:
        os.mkfifo(cache)
    model = model_path("smollm2-135m")
    assert local_cpu.use_extra_buffers(model) is fast_here.ok  # probed, neither blocked nor refused
    assert local_cpu.use_extra_buffers(model) is fast_here.ok  # and probed again: nothing cached


def test_a_crashing_fast_path_falls_back_to_plain_kernels(
    cache: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    model = model_path("smollm2-135m")
    probed = crash_when_fast(monkeypatch)
    assert local_cpu.use_extra_buffers(model) is False
    assert probed == [True, False]  # the plain path was checked before it was chosen
    assert "fast CPU path failed for" in capfd.readouterr().err
    [entry] = json.loads(cache.read_text()).values()
    assert entry == {"extra_buffers": False, "model": str(model), "probe": "killed by SIGILL"}
    assert local_cpu.use_extra_buffers(model) is False and probed == [True, False]


def test_a_model_that_runs_on_neither_path_says_how_to_rebuild(
    cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    crash_when_fast(monkeypatch, plain_too=True)
    with pytest.raises(SpecError, match=r"killed by SIGILL.*GGML_NATIVE=OFF"):
        local_cpu.use_extra_buffers(model_path("smollm2-135m"))
    assert not cache.exists()  # nothing learnt: a rebuilt library is probed again


def test_a_damaged_model_file_is_not_blamed_on_the_cpu(
    cache: Path, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """A file with the GGUF magic that llama.cpp cannot load fails on both paths with an
    error, not a signal: the message says the file, not the CPU, is at fault."""
    damaged = tmp_path / "damaged.gguf"
    damaged.write_bytes(b"GGUF" + bytes(range(256)) * 4)
    with pytest.raises(SpecError) as error:
        local_cpu.use_extra_buffers(damaged)
    message = error.value.message
    assert f"llama.cpp could not load {damaged}" in message and "exit status" in message
    assert "CPU" not in message and "GGML_NATIVE" not in message


def test_the_setting_forces_either_path_without_a_probe(
    cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    probed = crash_when_fast(monkeypatch, plain_too=True)
    model = model_path("smollm2-135m")
    monkeypatch.setenv(local_cpu.SETTING, "off")
    assert local_cpu.use_extra_buffers(model) is False
    monkeypatch.setenv(local_cpu.SETTING, " ON ")
    assert local_cpu.use_extra_buffers(model) is True
    assert probed == [] and not cache.exists()
    monkeypatch.setenv(local_cpu.SETTING, "fast")
    with pytest.raises(SpecError, match="must be one of auto, on, off"):
        local_cpu.use_extra_buffers(model)


SCORE = """
import asyncio, json, sys
from eigenjury.models import ChatRequest, ModelSpec
from eigenjury.models.factory import make_provider
from eigenjury.models.providers import local as local_module
request = ChatRequest.chat(
    ("user", "Is water wet? " * 60 + "Answer yes or no."), choices=("yes", "no"), logprobs=True
)
completion = asyncio.run(make_provider(ModelSpec.parse(sys.argv[1])).generate(request))
[loaded] = local_module._models.values()
print(json.dumps({"scores": completion.choice_logprobs,
                  "extra": bool(loaded.llm.model_params.use_extra_bufts)}))
"""


@pytest.mark.parametrize("name", ["smollm2-135m", "gemma3-270m"])
def test_the_plain_kernels_give_the_same_verdicts(
    name: str, tmp_path: Path, fast_here: local_cpu.Probe
) -> None:
    """Each path in its own process (a model loads once per process): the probe's cached
    setting decides, and both paths score the labels alike."""
    if not fast_here.ok:
        pytest.skip(f"llama.cpp's fast path does not run on this CPU ({fast_here.detail})")
    scores = {}
    for choice in ("on", "off"):
        env = {**os.environ, "EIGENJURY_CACHE_DIR": str(tmp_path), local_cpu.SETTING: choice}
        done = subprocess.run(
            [sys.executable, "-c", SCORE, f"local:{name}"],
            env=env,
            capture_output=True,
            text=True,
            check=True,
        )
        result = json.loads(done.stdout.strip().splitlines()[-1])
        assert result["extra"] is (choice == "on")
        scores[choice] = result["scores"]
    # Repacked kernels quantize activations their own way: scores move a little, the
    # preference (the log-odds between the labels) hardly at all.
    margins = {path: s["yes"] - s["no"] for path, s in scores.items()}
    assert abs(margins["on"] - margins["off"]) < 0.5
