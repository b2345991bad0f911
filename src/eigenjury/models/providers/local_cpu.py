"""Which llama.cpp CPU code paths are safe on this machine.

llama.cpp's "extra buffer types" (AMX tiles, and weight repacking for the AVX2 and
AVX-512 kernels) are its fast CPU path, but on some machines they kill the process:
on Intel Xeons with AMX under KVM the kernel grants the tile state, yet batched
matrix products die with SIGILL, while a one-token prompt works. A crash cannot be
caught in-process, so before a model is first loaded on a machine a child process
loads it with extra buffer types and evaluates a batched prompt. If the child dies or
fails, models load without them (llama.cpp's plain CPU kernels); if even those fail,
loading stops with a message saying how to rebuild llama.cpp for a generic CPU.

The verdict is cached per CPU, llama.cpp build and model file in the user cache
folder ($EIGENJURY_CACHE_DIR, else $XDG_CACHE_HOME/eigenjury, else ~/.cache/eigenjury),
so the probe (a second or two) runs once per machine and model. The setting
EIGENJURY_LLAMA_EXTRA_BUFFERS = auto (default) | on | off forces either path.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import platform
import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from eigenjury.errors import InputError
from eigenjury.files import write_json
from eigenjury.models.spec import SpecError

SETTING = "EIGENJURY_LLAMA_EXTRA_BUFFERS"
CHOICES = ("auto", "on", "off")
PROBE_TIMEOUT_S = 300.0
PROBE_PROMPT_TOKENS = 256  # a batched prompt: one-token prompts never reach the faulting kernels
REBUILD = (
    "rebuild llama-cpp-python for a generic CPU: CMAKE_ARGS='-DGGML_NATIVE=OFF' "
    "pip install --force-reinstall --no-cache-dir --no-deps llama-cpp-python==0.3.36"
)


@dataclass(frozen=True)
class Probe:
    """The outcome of loading and running a model in a child process."""

    ok: bool
    detail: str  # "ok", "killed by SIGILL", "exit status 1: <last line of stderr>", ...
    killed: bool = False  # by a signal (the CPU's doing), not an error llama.cpp reported


def setting() -> str:
    value = os.environ.get(SETTING, "auto").strip().lower() or "auto"
    if value not in CHOICES:
        raise SpecError(f"{SETTING} must be one of {', '.join(CHOICES)}, not {value!r}")
    return value


def use_extra_buffers(model: Path) -> bool:
    """Whether `model` may load with llama.cpp's extra buffer types on this machine."""
    chosen = setting()
    if chosen != "auto":
        return chosen == "on"
    key = _machine_key(model)
    cached = _read_cache().get(key)
    if isinstance(cached, dict) and isinstance(cached.get("extra_buffers"), bool):
        return bool(cached["extra_buffers"])
    fast = run_probe(model, extra_buffers=True)
    extra_buffers = fast.ok
    if not fast.ok:
        plain = run_probe(model, extra_buffers=False)
        if not plain.ok and plain.killed:
            raise SpecError(
                f"llama.cpp cannot run {model.name} on this CPU ({plain.detail}); {REBUILD}"
            )
        if not plain.ok:  # the file, not the CPU: llama.cpp said why
            raise SpecError(
                f"llama.cpp could not load {model} ({plain.detail}); is it a whole GGUF "
                "model file, of an architecture this llama.cpp knows?"
            )
        sys.stderr.write(
            f"note: llama.cpp's fast CPU path failed for {model.name} on this machine "
            f"({fast.detail}); using its plain kernels (slower; {SETTING}=on forces the "
            "fast path)\n"
        )
    _write_cache(key, {"extra_buffers": extra_buffers, "model": str(model), "probe": fast.detail})
    return extra_buffers


def run_probe(model: Path, *, extra_buffers: bool) -> Probe:
    """Load `model` and evaluate a batched prompt in a child process."""
    try:
        done = subprocess.run(
            probe_command(model, extra_buffers=extra_buffers),
            capture_output=True,
            text=True,
            errors="replace",
            timeout=PROBE_TIMEOUT_S,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return Probe(False, f"no answer within {PROBE_TIMEOUT_S:.0f} s")
    if done.returncode == 0:
        return Probe(True, "ok")
    if done.returncode < 0:
        return Probe(False, f"killed by {_signal_name(-done.returncode)}", killed=True)
    last = (done.stderr.strip().splitlines() or [""])[-1][:300]
    return Probe(False, f"exit status {done.returncode}: {last}")


def probe_command(model: Path, *, extra_buffers: bool) -> list[str]:
    return [sys.executable, "-m", __name__, str(model), "on" if extra_buffers else "off"]


@contextlib.contextmanager
def model_params(*, extra_buffers: bool) -> Iterator[None]:
    """While loading a model, llama.cpp's default model parameters with extra buffer
    types on or off. (llama_cpp.Llama does not expose `use_extra_bufts`; it reads
    `llama_model_default_params()` from the binding module, so that is wrapped here.
    Callers hold the model-loading lock: nothing else loads a model meanwhile.)"""
    import llama_cpp.llama_cpp as binding

    defaults = binding.llama_model_default_params

    def with_choice() -> Any:
        params = defaults()
        params.use_extra_bufts = extra_buffers
        return params

    binding.llama_model_default_params = with_choice
    try:
        yield
    finally:
        binding.llama_model_default_params = defaults


def cache_dir() -> Path:
    explicit = os.environ.get("EIGENJURY_CACHE_DIR")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "eigenjury"


def _cache_path() -> Path:
    return cache_dir() / "llama-cpu.json"


def _read_cache() -> dict[str, Any]:
    path = _cache_path()
    if not path.is_file():  # (a named pipe there would block the read)
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}  # no cache yet, or a damaged one: probe again
    return data if isinstance(data, dict) else {}


def _write_cache(key: str, entry: dict[str, Any]) -> None:
    data = _read_cache()
    data[key] = entry
    # a read-only home, or a folder or pipe where the cache goes, costs a probe per process
    with contextlib.suppress(OSError, InputError):
        _cache_path().parent.mkdir(parents=True, exist_ok=True)
        write_json(_cache_path(), data, wait=True)  # another process may be writing it too


def _machine_key(model: Path) -> str:
    """What the probe's verdict depends on: the CPU, the llama.cpp build, the model."""
    import llama_cpp
    import llama_cpp.llama_cpp as binding

    library = Path(binding._lib._name).resolve().parent
    parts: dict[str, Any] = {
        "cpu": _cpu_description(),
        "llama_cpp": llama_cpp.__version__,
        "libraries": sorted(
            (p.name, p.stat().st_size, p.stat().st_mtime_ns)
            for p in library.iterdir()
            if ".so" in p.name or p.suffix in (".dylib", ".dll")
        ),
        "model": (str(model.resolve()), model.stat().st_size, model.stat().st_mtime_ns),
    }
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()[:32]


def _cpu_description() -> str:
    """The CPU model and feature flags (Linux), else what the platform says."""
    with contextlib.suppress(OSError):
        wanted = {}
        for line in Path("/proc/cpuinfo").read_text(errors="replace").splitlines():
            name, _, value = line.partition(":")
            name = name.strip()
            if name in ("model name", "flags", "Features", "CPU part") and name not in wanted:
                wanted[name] = value.strip()
        if wanted:
            return json.dumps(wanted, sort_keys=True)
    return f"{platform.machine()} {platform.processor()}"


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def _probe(model: str, extra_buffers: bool) -> None:
    """The child's work: load the model and evaluate a batched prompt, then a token."""
    from llama_cpp import Llama

    with model_params(extra_buffers=extra_buffers):
        llm = Llama(model_path=model, n_ctx=1024, n_threads=os.cpu_count() or 1, verbose=False)
    text = " ".join(f"word{i}" for i in range(PROBE_PROMPT_TOKENS))
    tokens = llm.tokenize(text.encode(), add_bos=True)[:PROBE_PROMPT_TOKENS]
    llm.eval(tokens)
    llm.eval([tokens[-1]])


if __name__ == "__main__":
    _probe(sys.argv[1], sys.argv[2] == "on")
