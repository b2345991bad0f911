"""Fuzzing every command's file inputs and options: no traceback, exit status 2 for bad
input with a short located message, nothing written that was not asked for, and
finished results never lost.

Cases come from tables (tests/fuzz_inputs.py) crossed with each other, from seeded
random corruptions of every text input, and from walking `build_parser()` and the rank
config's model, so a new subcommand, option or setting is fuzzed without editing this
file (a new subcommand needs a tiny valid run in fuzz_inputs.COMMANDS; a test says so).
Every run is in-process, in a fresh working directory, on scripted models only, under a
time limit: a hang is a failure that says so. (Hypothesis is not a dependency of the
project; seeded tables keep CI stable without it.)

Decided here:
- A refused run may not create the default store (the per-user one, here in
  .eigenjury of the working directory): input,
  models and keys are checked before the engine opens it. Two exceptions: an
  unreachable endpoint is only found once the engine runs, and a run that fails only
  at the end, on writing its output, keeps the store it filled, so that a rerun answers
  the finished calls (the tests of results surviving such failures check that it does).
- A UTF-8 byte order mark on an otherwise valid text file is accepted.
- `--out` naming one of the command's own inputs is refused, even where the result
  would be equivalent (converting a contract onto itself).
- A huge --bootstrap or --restarts of `fit` (and rank's fit.bootstrap, judge's --bootstrap) is only
  parsed: it asks for that much work. Other sizes are run: 2**70 of anything must be
  refused, not attempted. `demo` (minutes on CPU with the bundled llama.cpp models) and
  `view` (it serves until interrupted) are only parsed.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import shlex
import signal
import traceback
import warnings
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, get_args, get_origin

import fuzz_inputs as fz
import pytest
from pydantic import BaseModel

from eigenjury.cli import build_parser, main
from eigenjury.engine import Store
from eigenjury.errors import InputError
from eigenjury.peer.config import RankConfig

pytestmark = pytest.mark.fuzz

TIME_LIMIT_S = 20
Name = str | tuple[str, ...]  # what a message must name: one text, or any one of several
MESSAGE_LINES = 4  # a refused run explains itself in one located line, or a few


class CaseTimeout(BaseException):
    """Raised by the alarm; a BaseException so that no `except Exception` swallows it."""


@dataclass
class Outcome:
    argv: list[str]
    code: int
    out: str
    err: str
    parse_error: bool  # argparse refused the command line (SystemExit(2))
    warned: list[str]  # Python warnings a user would see on stderr
    created: list[str]
    changed: list[str]
    removed: list[str]

    @property
    def command(self) -> str:
        return "eigenjury " + shlex.join(self.argv)

    def describe(self) -> str:
        def short(text: str) -> str:
            return text if len(text) < 1500 else text[:1500] + " [...]"

        return (
            f"{self.command}\n  exit {self.code}\n  stderr: {short(self.err.strip())!r}\n"
            f"  stdout (end): {short(self.out.strip()[-600:])!r}\n  created: {self.created}\n"
            f"  changed: {self.changed}\n  removed: {self.removed}\n  warnings: {self.warned}"
        )


def snapshot(root: Path) -> dict[str, str]:
    """Every path under `root`: 'dir', or a digest of the file's bytes."""
    found: dict[str, str] = {}
    for folder, dirs, files in os.walk(root):
        for name in dirs:
            found[os.path.relpath(os.path.join(folder, name), root)] = "dir"
        for name in files:
            path = os.path.join(folder, name)
            rel = os.path.relpath(path, root)
            if os.path.islink(path) or not os.path.isfile(path):
                found[rel] = "special"
                continue
            with open(path, "rb") as f:
                found[rel] = hashlib.sha256(f.read()).hexdigest()
    return found


def _on_alarm(signum: int, frame: Any) -> None:
    raise CaseTimeout


def run_cli(
    argv: Sequence[str], capsys: pytest.CaptureFixture[str], limit_s: int = TIME_LIMIT_S
) -> Outcome:
    """`main(argv)` in the working directory, under a time limit; an exception that
    escapes main() (a traceback for the user) fails the test with its first line."""
    argv = list(argv)
    root = Path.cwd()
    capsys.readouterr()
    before = snapshot(root)
    previous = signal.signal(signal.SIGALRM, _on_alarm)
    signal.alarm(limit_s)
    parse_error = False
    shown: list[warnings.WarningMessage] = []
    try:
        with warnings.catch_warnings(record=True) as shown:
            warnings.simplefilter("default")  # what a user's python shows
            code = main(argv)
    except SystemExit as exc:  # argparse: 2 for a refused command line
        code = exc.code if isinstance(exc.code, int) else 1
        parse_error = True
    except CaseTimeout:
        pytest.fail(f"HANG: `eigenjury {shlex.join(argv)}` ran past {limit_s} s", pytrace=False)
    except BaseException as exc:
        lines = traceback.format_exception(exc)
        where = next(
            (line.strip() for line in reversed(lines) if 'File "' in line and "/src/" in line),
            "",
        )
        first = f"{type(exc).__name__}: {str(exc)[:300]}"
        pytest.fail(
            f"TRACEBACK: `eigenjury {shlex.join(argv)[:400]}`\n  {first}\n  at {where}\n"
            + "".join(lines[-12:]),
            pytrace=False,
        )
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
    out, err = capsys.readouterr()
    after = snapshot(root)
    return Outcome(
        argv,
        code,
        out,
        err,
        parse_error,
        warned=[
            f"{w.category.__name__}: {w.message} ({w.filename}:{w.lineno})"
            for w in shown
            if issubclass(w.category, (RuntimeWarning, UserWarning))
        ],
        created=sorted(set(after) - set(before)),
        changed=sorted(p for p in set(after) & set(before) if after[p] != before[p]),
        removed=sorted(set(before) - set(after)),
    )


def _under(path: str, prefixes: Sequence[str]) -> bool:
    parts = Path(path).parts
    return any(parts[: len(Path(p).parts)] == Path(p).parts for p in prefixes)


def _strict_json(text: str) -> Any:
    def refuse(name: str) -> Any:
        raise ValueError(f"{name} is not JSON")

    return json.loads(text, parse_constant=refuse)


def check(
    outcome: Outcome,
    expect: int | None,
    *,
    names: Sequence[Name] = (),
    allowed: Sequence[str] = (),
    allowed_on_error: Sequence[str] = (),
    also: Sequence[int] = (),
    located: bool = True,
) -> None:
    """The house rules for one run. Always: no traceback, no Python warning (a user's
    stderr would show it), no temporary file left, JSON on stdout strictly valid.

    expect: 2 refused, 0 succeeded, None either; `also`: other statuses accepted (1 where
    some calls may fail by design). A refused run: a short message on stderr naming each
    of `names` (any one of a tuple; not checked when not `located`: another test's
    concern), and nothing created, changed or removed except under `allowed_on_error`.
    Any other run: new paths only under `allowed`, no input changed (paths under
    `allowed` may be), every JSON file written strictly valid JSON."""
    text = outcome.out + outcome.err
    assert "Traceback" not in text, f"traceback printed:\n{outcome.describe()}"
    assert not outcome.warned, f"Python warnings on stderr:\n{outcome.describe()}"
    temporary = [p for p in outcome.created if Path(p).name.endswith((".tmp", "~"))]
    assert not temporary, f"temporary files left behind: {temporary}\n{outcome.describe()}"
    codes = ({0, 2} if expect is None else {expect}) | set(also)
    assert outcome.code in codes, (
        f"exit {outcome.code}, expected {sorted(codes)}:\n{outcome.describe()}"
    )
    if outcome.out.lstrip().startswith("{"):  # a JSON record on stdout (bound certify)
        try:
            _strict_json(outcome.out)
        except ValueError as exc:
            message = f"stdout is not valid JSON ({exc}):\n{outcome.describe()}"
            raise AssertionError(message) from None
    if outcome.code == 2:
        stray = [
            p
            for p in (*outcome.created, *outcome.changed, *outcome.removed)
            if not _under(p, allowed_on_error)
        ]
        assert not stray, f"a refused run wrote or changed {stray}:\n{outcome.describe()}"
        if located:
            _check_message(outcome, names)
        return
    stray = [p for p in outcome.created if not _under(p, allowed)]
    assert not stray, f"wrote what was not asked for: {stray}:\n{outcome.describe()}"
    touched = [p for p in (*outcome.changed, *outcome.removed) if not _under(p, allowed)]
    assert not touched, f"changed or removed inputs {touched}:\n{outcome.describe()}"
    for path in outcome.created + outcome.changed:
        if path.endswith((".json", ".jsonl")) and Path(path).is_file():
            text = Path(path).read_text(encoding="utf-8")
            try:
                if path.endswith(".json"):
                    _strict_json(text)
                else:
                    for line in text.splitlines():
                        _strict_json(line)
            except ValueError as exc:
                message = f"{path} is not valid JSON ({exc}):\n{outcome.describe()}"
                raise AssertionError(message) from None


def _check_message(outcome: Outcome, names: Sequence[Name]) -> None:
    err = outcome.err.strip()
    assert err, f"refused without a word on stderr:\n{outcome.describe()}"
    flat = " ".join(err.split())
    if outcome.parse_error:  # argparse: the usage block, then "eigenjury X: error: ..."
        last = err.splitlines()[-1]
        assert "error:" in last, f"no error line:\n{outcome.describe()}"
    else:
        lines = [line for line in err.splitlines() if line.strip()]
        assert len(lines) <= MESSAGE_LINES, f"a {len(lines)}-line message:\n{outcome.describe()}"
        assert lines[0].startswith("error:"), f"message is not an error line:\n{outcome.describe()}"
    assert ".tmp" not in flat, f"the message names a temporary file:\n{outcome.describe()}"
    for name in names:
        options = (name,) if isinstance(name, str) else name
        assert any(o.lower() in flat.lower() for o in options), (
            f"the message does not name {' or '.join(map(repr, options))}:\n{outcome.describe()}"
        )


@pytest.fixture
def cwd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh, empty working directory, with the user data folder inside it so that
    the checks of what a refused run leaves behind see the per-user store too."""
    root = tmp_path / "work"
    root.mkdir()
    monkeypatch.chdir(root)
    monkeypatch.setenv("EIGENJURY_DATA_DIR", str(root / fz.STORE))
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    return root


def runnable(command: str) -> bool:
    """Whether `command` has a tiny valid run (a subcommand fuzz_inputs does not know yet
    fails test_every_subcommand_has_a_fuzzing_setup, not the collection)."""
    known = fz.COMMANDS.get(command)
    return known is not None and known.setup is not None


def setup(command: str, cwd: Path) -> list[str]:
    maker = fz.COMMANDS[command].setup
    assert maker is not None
    return maker(cwd)


# --- the parser, walked -----------------------------------------------------------------


def subcommands(
    parser: argparse.ArgumentParser, prefix: tuple[str, ...] = ()
) -> Iterator[tuple[str, argparse.ArgumentParser]]:
    """(name, parser) of every leaf subcommand: "fit", "juries compare", "bound apply"..."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                if any(isinstance(a, argparse._SubParsersAction) for a in sub._actions):
                    yield from subcommands(sub, (*prefix, name))
                else:
                    yield " ".join((*prefix, name)), sub


def _takes_value(action: argparse.Action) -> bool:
    return bool(action.option_strings) and action.nargs != 0 and action.choices is None


def numeric_options() -> Iterator[tuple[str, argparse.ArgumentParser, argparse.Action]]:
    """Options whose type is a number parser (int, float, or one of the CLI's own)."""
    for name, sub in subcommands(build_parser()):
        for action in sub._actions:
            if _takes_value(action) and action.type not in (None, str, Path):
                yield name, sub, action


def path_options() -> Iterator[tuple[str, argparse.ArgumentParser, argparse.Action]]:
    for name, sub in subcommands(build_parser()):
        for action in sub._actions:
            if _takes_value(action) and action.type is Path:
                yield name, sub, action


def _width(action: argparse.Action) -> int:
    return action.nargs if isinstance(action.nargs, int) else 1


def without(argv: list[str], action: argparse.Action) -> list[str]:
    """`argv` with every use of `action` (and its values) taken out."""
    kept: list[str] = []
    skip = 0
    for arg in argv:
        if skip:
            skip -= 1
        elif arg in action.option_strings:
            skip = _width(action)
        elif not any(arg.startswith(f"{o}=") for o in action.option_strings):
            kept.append(arg)
    return kept


def with_option(
    argv: list[str], parser: argparse.ArgumentParser, action: argparse.Action, value: str
) -> list[str]:
    """`argv` with `action` set to `value` (its rivals in a mutually exclusive group out)."""
    argv = without(argv, action)
    for group in parser._mutually_exclusive_groups:
        if action in group._group_actions:
            for rival in group._group_actions:
                argv = without(argv, rival)
    flag = action.option_strings[-1]
    if _width(action) == 1:
        return [*argv, f"{flag}={value}"]
    return [*argv, flag, *[value] * _width(action)]


def value_of(argv: list[str], flag: str) -> str | None:
    for i, arg in enumerate(argv):
        if arg == flag and i + 1 < len(argv):
            return argv[i + 1]
    return None


# --- every subcommand has a tiny valid run ----------------------------------------------


def test_every_subcommand_has_a_fuzzing_setup() -> None:
    """A new subcommand fails here until fuzz_inputs.COMMANDS knows how to run it."""
    assert {name for name, _ in subcommands(build_parser())} == set(fz.COMMANDS)


RUNNABLE = [name for name, c in fz.COMMANDS.items() if c.setup is not None]


@pytest.mark.parametrize("command", RUNNABLE)
def test_the_valid_baseline_runs(
    command: str, cwd: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The tiny inputs every case below starts from are valid (so a refusal below is
    the mutation's doing)."""
    outcome = run_cli(setup(command, cwd), capsys)
    check(outcome, 0, allowed=fz.COMMANDS[command].outputs)


# --- every file input x every bad content -----------------------------------------------


def _file_cases() -> Iterator[Any]:
    for fi in fz.FILE_INPUTS:
        for mutation in fz.MUTATIONS:
            if fz.applies(mutation, fi):
                yield pytest.param(fi, mutation, id=f"{fi.id}-{mutation.name}")


def file_argv(fi: fz.FileInput, cwd: Path) -> list[str]:
    argv = setup(fi.command, cwd)
    if fi.replaces is not None:
        old, new = fi.replaces
        assert old in argv, f"{fi.id}: {old} is not in {argv}"
        argv = [new if a == old else a for a in argv]
    if fi.drops:
        i = argv.index(fi.drops[0])
        assert argv[i : i + len(fi.drops)] == list(fi.drops)
        argv = argv[:i] + argv[i + len(fi.drops) :]
    return [*argv, *fi.adds]


# A batch streams its requests: a bad line stops it with the results before it stored.
KEPT_BEFORE_A_BAD_LINE = {"batch.requests": (fz.STORE,)}


@pytest.mark.parametrize(("fi", "mutation"), list(_file_cases()))
def test_bad_file_contents(
    fi: fz.FileInput, mutation: fz.Mutation, cwd: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = file_argv(fi, cwd)
    fz.bad_content(mutation, fi, cwd / fi.filename)
    outcome = run_cli(argv, capsys)
    names: list[Name] = [(Path(fi.filename).name, fi.filename)]
    if mutation.name == "not-utf8-line-3":
        names.append("line 3")
    outputs = fz.COMMANDS[fi.command].outputs
    check(
        outcome,
        fz.expected(mutation, fi),
        names=names,
        allowed=(*outputs, fi.filename) if fi.written else outputs,
        allowed_on_error=KEPT_BEFORE_A_BAD_LINE.get(fi.id, ()),
    )


# --- seeded random corruptions of every text input --------------------------------------

CORRUPTION_SEEDS = range(4)
SPECIAL_BYTES = b'{}[]",:\n\r\t -0123456789.eE+naNInfty\\\x00\xff\xc3'


def corrupt(content: bytes, seed: str) -> bytes:
    """`content` with one to four seeded edits: a byte replaced, inserted or removed, the
    end cut off, or a slice repeated (structure characters are the likeliest picks)."""
    rng = random.Random(seed)
    data = bytearray(content)
    for _ in range(rng.randint(1, 4)):
        i = rng.randrange(len(data) + 1)
        byte = rng.choice(SPECIAL_BYTES) if rng.random() < 0.8 else rng.randrange(256)
        op = rng.choice(("replace", "insert", "delete", "cut", "repeat"))
        if op == "replace" and i < len(data):
            data[i] = byte
        elif op == "insert":
            data.insert(i, byte)
        elif op == "delete" and i < len(data):
            del data[i]
        elif op == "cut":
            del data[i:]
        elif op == "repeat":
            data[i:i] = data[i : i + rng.randint(1, 200)]
    return bytes(data)


def _corruption_cases() -> Iterator[Any]:
    for fi in fz.FILE_INPUTS:
        if fi.textual:
            for seed in CORRUPTION_SEEDS:
                yield pytest.param(fi, seed, id=f"{fi.id}-{seed}")


@pytest.mark.parametrize(("fi", "seed"), list(_corruption_cases()))
def test_randomly_corrupted_files(
    fi: fz.FileInput, seed: int, cwd: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Whatever the damage: refused with a located message, or run correctly."""
    argv = file_argv(fi, cwd)
    path = cwd / fi.filename
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(corrupt(fz.render(fi.fmt, fi.data()), f"{fi.id}:{seed}"))
    # the damage may show in another file's terms (a model name the truth lacks)
    inputs = (*(a for a in argv if (cwd / a).exists()), Path(fi.filename).name)
    outcome = run_cli(argv, capsys)
    check(
        outcome,
        None,
        names=[inputs],
        allowed=fz.COMMANDS[fi.command].outputs,
        allowed_on_error=KEPT_BEFORE_A_BAD_LINE.get(fi.id, ()),
    )


# --- contracts wrong in what they say -------------------------------------------------


@pytest.mark.parametrize("command", ["grade", "contracts check"])
@pytest.mark.parametrize("case", fz.CONTRACT_CASES, ids=lambda c: c.id)
def test_contract_contents(
    case: fz.ContractCase, command: str, cwd: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Refused naming the contract before any call, or graded correctly (and in time:
    a regex that backtracks on a submission must not hang the grader)."""
    argv = setup(command, cwd)
    contract, submissions = fz.contract_data(), fz.submissions_data()
    case.change(contract, submissions)
    fz.write(cwd / "contract.yaml", "yaml", contract)
    fz.write(cwd / "submissions.jsonl", "jsonl", submissions)
    outcome = run_cli(argv, capsys)
    expect = case.expect
    if command == "contracts check" and case.id.startswith("reference-missing"):
        expect = None  # check may only warn: the file can be added before grading
    check(outcome, expect, names=["contract.yaml"], allowed=fz.COMMANDS[command].outputs)


# --- every numeric option x odd values --------------------------------------------------

NUMERIC_VALUES = ("-1", "0", "nan", "inf", "-inf", "1e400", "1e-300", str(2**70), "", "text")
HUGE = str(2**70)
# Accepted huge values that ask for that much work (bootstrap rounds, restarts of the
# fit): only parsed, never run. (Other sizes, such as --scenarios or --dim, must be
# refused or fail fast: 2**70 of anything cannot be allocated.)
SIZE_OPTIONS = {("fit", "--bootstrap"), ("fit", "--restarts"), ("judge", "--bootstrap")}
# Options under which calls may end in errors by design (exit 1, errors in the output).
CALL_LIMITS = {"--budget-usd", "--budget-tokens", "--timeout", "--max-attempts"}


def _numeric_cases() -> Iterator[Any]:
    for name, parser, action in numeric_options():
        flag = action.option_strings[-1]
        for value in NUMERIC_VALUES:
            yield pytest.param(name, parser, action, value, id=f"{name}-{flag}={value[:8]}")


@pytest.mark.parametrize(("command", "parser", "action", "value"), list(_numeric_cases()))
def test_numeric_option_values(
    command: str,
    parser: argparse.ArgumentParser,
    action: argparse.Action,
    value: str,
    cwd: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Refused at once (exit 2, naming the option), or run correctly on tiny input."""
    spec = fz.COMMANDS[command]
    flag = action.option_strings[-1]
    base = spec.setup(cwd) if spec.setup else command.split()
    argv = with_option(base, parser, action, value)
    try:
        build_parser().parse_args(argv)
    except SystemExit as exc:
        err = capsys.readouterr().err
        assert exc.code == 2 and "Traceback" not in err
        assert flag in err.splitlines()[-1], f"`eigenjury {shlex.join(argv)}`: {err!r}"
        return
    capsys.readouterr()
    if spec.setup is None or ((command, flag) in SIZE_OPTIONS and value == HUGE):
        return  # parsed; running it would cost what it asks for (or minutes of CPU)
    outcome = run_cli(argv, capsys)
    check(
        outcome,
        None,
        names=[(flag, flag.lstrip("-"), flag.lstrip("-").replace("-", "_"))],
        allowed=spec.outputs,
        also=(1,) if flag in CALL_LIMITS else (),
    )


# --- every model spec option x bad specs -------------------------------------------------

SPEC_DESTS = {"model", "jury", "escalate_to", "candidate", "pool_a", "pool_b", "judge",
              "paraphraser"}  # fmt: skip
UNREACHABLE = "openai-compatible:m@http://127.0.0.1:9/v1"  # nothing listens on port 9
BAD_SPECS = {
    "empty": "",
    "no-provider": "gpt-4o",
    "unknown-provider": "opnai:gpt-4o",
    "unknown-script": "scripted:nobody",
    "no-model": "scripted:",
    "bad-url": "openai-compatible:m@not a url",
    "unreachable": UNREACHABLE,
    "no-api-key": "openai:gpt-4o-mini",
    "unknown-local": "local:no-such-model",
    "markup": "[bold]x:[/]y",
}
# Specs a command keeps without calling them: writing them down is all it does.
UNCALLED = {
    ("contracts export-harbor", k)
    for k in ("unreachable", "no-api-key", "unknown-local", "unknown-script")
}


def _spec_cases() -> Iterator[Any]:
    for name, sub in subcommands(build_parser()):
        if not runnable(name):
            continue
        for action in sub._actions:
            if action.option_strings and action.dest in SPEC_DESTS:
                for kind in BAD_SPECS:
                    flag = action.option_strings[-1]
                    yield pytest.param(name, sub, action, kind, id=f"{name}-{flag}-{kind}")


@pytest.mark.parametrize(("command", "parser", "action", "kind"), list(_spec_cases()))
def test_bad_model_specs(
    command: str,
    parser: argparse.ArgumentParser,
    action: argparse.Action,
    kind: str,
    cwd: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A model that cannot be used is refused before any call, naming it. Only an
    unreachable endpoint is found once the engine runs: its store may then exist."""
    spec = fz.COMMANDS[command]
    value = BAD_SPECS[kind]
    argv = with_option(setup(command, cwd), parser, action, value)
    if action.dest == "paraphraser":  # used only with the paraphrase neighbour
        argv = [*argv, "--generators", "identity,paraphrase"]
    if action.dest == "escalate_to":  # escalate when the first jury splits at all
        argv = [*argv, "--jury", "scripted:fuzz-juror-no"]
    outcome = run_cli(argv, capsys)
    flag = action.option_strings[-1]
    check(
        outcome,
        None if (command, kind) in UNCALLED else 2,
        names=[(flag, value, "127.0.0.1:9")] if value else [],
        allowed=spec.outputs,
        allowed_on_error=(fz.STORE,) if kind == "unreachable" else (),
    )


# --- every other text option x odd text --------------------------------------------------

TEXT_VALUES = {"empty": "", "commas": ",,", "unknown": "nope", "markup": fz.MARKUP,
               "long": "x" * 20_000}  # fmt: skip


def _text_cases() -> Iterator[Any]:
    for name, sub in subcommands(build_parser()):
        if not runnable(name):
            continue
        for action in sub._actions:
            if (
                _takes_value(action)
                and action.type in (None, str)
                and action.dest not in SPEC_DESTS
            ):
                for kind in TEXT_VALUES:
                    flag = action.option_strings[-1]
                    yield pytest.param(name, sub, action, kind, id=f"{name}-{flag}-{kind}")


@pytest.mark.parametrize(("command", "parser", "action", "kind"), list(_text_cases()))
def test_text_option_values(
    command: str,
    parser: argparse.ArgumentParser,
    action: argparse.Action,
    kind: str,
    cwd: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Names, generator lists, addresses: refused naming the option, or run correctly."""
    value = TEXT_VALUES[kind]
    argv = with_option(setup(command, cwd), parser, action, value)
    outcome = run_cli(argv, capsys)
    flag = action.option_strings[-1]
    words = flag.lstrip("-").replace("-", " ")  # "a Ray address was given" names it too
    names = (flag, words, value[:40]) if value else (flag, words)
    check(outcome, None, names=[names], allowed=fz.COMMANDS[command].outputs)


# --- every numeric setting of the rank config x odd values -------------------------------

CONFIG_VALUES: tuple[Any, ...] = (-1, 0, float("nan"), float("inf"), 1e-300, 2**70, "text")
# Accepted huge values that ask for that much work: only validated, never run.
SIZE_SETTINGS = {"fit.bootstrap", "fit.restarts"}


def _numbers(model: type[BaseModel], prefix: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    """Paths of the numeric settings of a config model, through its sections."""
    for name, info in model.model_fields.items():
        kinds = [
            get_args(k)[0] if get_origin(k) is Annotated else k
            for k in (get_args(info.annotation) or (info.annotation,))
        ]
        sections = [k for k in kinds if isinstance(k, type) and issubclass(k, BaseModel)]
        if sections:
            yield from _numbers(sections[0], (*prefix, name))
        elif bool not in kinds and any(k in (int, float) for k in kinds):
            yield (*prefix, name)


def _config_cases() -> Iterator[Any]:
    base = fz.config_data()
    for path in _numbers(RankConfig):
        if path[0] not in base and path[0] in ("objective", "greenbeard"):
            continue  # a mode of its own (objective questions, a greenbeard clique)
        for value in CONFIG_VALUES:
            yield pytest.param(path, value, id=f"{'.'.join(path)}={str(value)[:8]}")


@pytest.mark.parametrize(("path", "value"), list(_config_cases()))
def test_numeric_config_settings(
    path: tuple[str, ...], value: Any, cwd: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Every numeric setting of a rank config: refused naming the field, or run."""
    argv = setup("rank", cwd)
    data = fz.config_data()
    section = data
    for part in path[:-1]:
        section = section.setdefault(part, {})
    section[path[-1]] = value
    fz.write(cwd / "config.yaml", "yaml", data)
    dotted = ".".join(path)
    if dotted in SIZE_SETTINGS and value == 2**70:
        from eigenjury.config import load_config

        try:
            load_config(RankConfig, cwd / "config.yaml")
        except InputError as exc:
            assert f"'{dotted}'" in str(exc)
        return  # valid: running it would cost what it asks for
    outcome = run_cli(argv, capsys)
    check(outcome, None, names=[f"'{dotted}'"], allowed=fz.COMMANDS["rank"].outputs)


# --- every path option x odd paths ------------------------------------------------------

PATH_VALUES = ("empty", "directory", "under-a-file", "new-folders")
ROLE_OVERRIDES = {("export", "store"): "input"}


def _role(command: str, action: argparse.Action) -> str:
    if (command, action.dest) in ROLE_OVERRIDES:
        return ROLE_OVERRIDES[command, action.dest]
    return {"out": "output", "store": "store", "plan": "output"}.get(action.dest, "input")


def _path_cases() -> Iterator[Any]:
    for name, parser, action in path_options():
        if not runnable(name):
            continue
        for kind in PATH_VALUES:
            flag = action.option_strings[-1]
            yield pytest.param(name, parser, action, kind, id=f"{name}-{flag}-{kind}")


@pytest.mark.parametrize(("command", "parser", "action", "kind"), list(_path_cases()))
def test_path_option_values(
    command: str,
    parser: argparse.ArgumentParser,
    action: argparse.Action,
    kind: str,
    cwd: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    spec = fz.COMMANDS[command]
    base = setup(command, cwd)
    flag = action.option_strings[-1]
    (cwd / "adir").mkdir()
    (cwd / "afile").write_text("a regular file\n")
    role = _role(command, action)
    current = value_of(base, flag)
    folder_out = role == "output" and spec.out_kind == "folder" and action.dest == "out"
    # a folder never takes a file's name (files.check_output_folder)
    default = "store.sqlite" if role == "store" else "x" if folder_out else "x.json"
    leaf = Path(current).name if current else default
    value = {
        "empty": "",
        "directory": "adir",
        "under-a-file": f"afile/{leaf}",
        "new-folders": f"new/deeper/{leaf}",
    }[kind]
    expect: int | None = 2
    if (kind == "new-folders" and role in ("output", "store")) or (
        kind == "directory" and folder_out
    ):
        expect = 0
    elif kind == "empty" and folder_out:
        expect = None  # "." is the working directory: writing there was asked for
    argv = with_option(base, parser, action, value)
    outcome = run_cli(argv, capsys)
    # "" (the working directory) as the output folder: anything may be written there
    allowed = (*spec.outputs, "new", "adir") if kind != "empty" else ("",)
    check(
        outcome,
        expect,
        names=[(flag, value, value.split("/")[0])] if value else [],
        allowed=allowed,
        # the calls ran before the output could not be written: they stay in the store
        allowed_on_error=(fz.STORE,) if role == "output" else (),
    )


# --- paths with odd names ---------------------------------------------------------------

ODD_NAMES = ("with space", "[x]", "[/]", "[bold]x", "quo'te\"s", "ünï 日本", "-dash")


@pytest.mark.parametrize("name", ODD_NAMES)
@pytest.mark.parametrize("command", [c for c in RUNNABLE if c != "bound certify"])
def test_odd_folder_names(
    command: str, name: str, cwd: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Every input and output lies in a folder with an odd name; all is written where
    asked, nothing elsewhere."""
    folder = cwd / name
    folder.mkdir(parents=True)  # "[/]" is a folder "[" holding a folder "]"
    spec = fz.COMMANDS[command]
    base = setup(command, folder)
    names = set(spec.outputs) | {p.name for p in folder.iterdir()}
    argv = [str(folder / a) if a in names and not a.startswith(".") else a for a in base]
    outcome = run_cli(argv, capsys)
    check(outcome, 0, allowed=(name, fz.STORE))
    if spec.outputs and spec.outputs[0] != fz.STORE:
        assert (folder / spec.outputs[0]).exists(), outcome.describe()


# --- --out where it cannot or must not be written ---------------------------------------

OUT_CASES = [
    # (command, flag or None for the output positional, value, reason)
    ("simulate", "--out", "afile", "a file where a folder goes"),
    ("simulate", "--out", "afile/sim", "under a regular file"),
    ("fit", "--out", "verdicts.csv", "the input itself"),
    ("fit", "--out", "truth.json", "another input"),
    ("fit", "--out", "adir", "an existing folder"),
    ("fit", "--out", "afile/fit.json", "under a regular file"),
    ("rank", "--out", "config.yaml", "the input itself"),
    ("rank", "--out", "afile", "a file where a folder goes"),
    ("rank", "--out", "afile/run", "under a regular file"),
    ("batch", "--out", "requests.jsonl", "the input itself"),
    ("batch", "--out", "adir", "an existing folder"),
    ("batch", "--out", "afile/results.jsonl", "under a regular file"),
    ("batch", "--out", ".eigenjury/store.sqlite", "the store"),
    ("export", None, "store.sqlite", "the store itself"),
    ("export", None, "adir.jsonl", "an existing folder"),
    ("export", None, "afile/all.jsonl", "under a regular file"),
    ("grade", "--out", "contract.yaml", "the input itself"),
    ("grade", "--out", "submissions.jsonl", "another input"),
    ("grade", "--out", "afile/grades", "under a regular file"),
    ("juries compare", "--out", "contract.yaml", "the input itself"),
    ("juries compare", "--out", "afile/comparison", "under a regular file"),
    ("contracts convert", None, "contract.yaml", "the input itself"),
    ("contracts convert", None, "bundle", "the input bundle itself"),
    ("contracts convert", None, "adir.yaml", "an existing folder"),
    ("contracts convert", None, "afile/c.yaml", "under a regular file"),
    ("contracts convert", None, "afile/bundle", "under a regular file"),
    ("contracts export-harbor", None, "contract.yaml", "the input itself"),
    ("contracts export-harbor", None, "afile/harbor", "under a regular file"),
    ("bound measure", "--out", "dataset.jsonl", "the input itself"),
    ("bound measure", "--out", "adir", "an existing folder"),
    ("bound measure", "--out", "afile/p.json", "under a regular file"),
    ("bound apply", "--out", "scores.csv", "the input itself"),
    ("bound apply", "--out", "profile.json", "another input"),
    ("bound apply", "--out", "afile/released", "under a regular file"),
]
# Which positional is the output, for commands that take it so (counted from the end).
OUT_POSITIONAL = {
    "export": "all.jsonl",
    "contracts convert": "converted",
    "contracts export-harbor": "harbor",
}


@pytest.mark.parametrize(
    ("command", "flag", "value"),
    [pytest.param(c, f, v, id=f"{c}-{v}") for c, f, v, _ in OUT_CASES],
)
def test_unwritable_or_clobbering_outputs_are_refused(
    command: str, flag: str | None, value: str, cwd: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Exit 2 naming the path; no input changed; nothing written but the store of calls
    already made (which a rerun answers from)."""
    base = setup(command, cwd)
    (cwd / "afile").write_text("a regular file\n")
    for folder in ("adir", "adir.jsonl", "adir.yaml"):
        (cwd / folder).mkdir()
    if command == "contracts convert" and value == "bundle":
        base = [a if a != "contract.yaml" else "bundle" for a in base]
    if flag is None:
        argv = [value if a == OUT_POSITIONAL[command] else a for a in base]
    elif flag in base:
        i = base.index(flag)
        argv = [*base[: i + 1], value, *base[i + 2 :]]
    else:
        argv = [*base, flag, value]
    outcome = run_cli(argv, capsys)
    check(outcome, 2, names=[(value, value.split("/")[0])], allowed_on_error=(fz.STORE,))


@pytest.mark.parametrize(
    ("command", "value"),
    [
        ("batch", "requests.jsonl"),
        ("grade", "contract.yaml"),
        ("grade", "submissions.jsonl"),
        ("juries compare", "submissions.jsonl"),
        ("bound measure", "dataset.jsonl"),
    ],
)
def test_a_store_that_is_an_input_is_refused(
    command: str, value: str, cwd: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--store naming one of the command's own (text) inputs: refused, the file intact."""
    argv = [*setup(command, cwd), "--store", value]
    check(run_cli(argv, capsys), 2, names=[value])


# --- finished results are never lost ----------------------------------------------------


def _rows(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_batch_whose_output_cannot_be_written_keeps_its_results(
    cwd: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base = setup("batch", cwd)
    (cwd / "afile").write_text("in the way\n")
    bad = [a if a != "results.jsonl" else "afile/results.jsonl" for a in base]
    check(run_cli(bad, capsys), 2, allowed_on_error=(fz.STORE,), located=False)
    outcome = run_cli(base, capsys)
    check(outcome, 0, allowed=fz.COMMANDS["batch"].outputs)
    rows = _rows(cwd / "results.jsonl")
    assert len(rows) == 3 and all(r["error"] is None for r in rows)
    if (cwd / fz.STORE).exists() and any(r["cached"] for r in rows):
        assert all(r["cached"] for r in rows), "some finished calls were made again"


def test_batch_stopped_by_its_budget_resumes_from_the_store(
    cwd: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    requests = [
        {"id": f"r{i}", "messages": [{"role": "user", "content": f"q {i}"}], "max_tokens": 4}
        for i in range(6)
    ]
    fz.write(cwd / "requests.jsonl", "jsonl", requests)
    base = ["batch", "requests.jsonl", "--model", "scripted:echo", "--out", "results.jsonl",
            "--no-progress", "--concurrency", "1"]  # fmt: skip
    # about 5 tokens a call; --go: started although its plan sees the budget short
    first = run_cli([*base, "--budget-tokens", "12", "--go"], capsys)
    check(first, 1, allowed=fz.COMMANDS["batch"].outputs)
    done = {r["id"] for r in _rows(cwd / "results.jsonl") if r["error"] is None}
    assert 0 < len(done) < 6, first.describe()
    check(run_cli(base, capsys), 0, allowed=fz.COMMANDS["batch"].outputs)
    rows = _rows(cwd / "results.jsonl")
    assert all(r["error"] is None for r in rows)
    assert {r["id"] for r in rows if r["cached"]} == done


@pytest.mark.parametrize(
    ("command", "budget", "result"),
    [
        # juror calls are planned at prompt/4 + max tokens: 200 tokens pays for one of two
        ("grade", ["--budget-tokens", "200", "--juror-max-tokens", "16"], "grades/results.json"),
        ("bound measure", ["--budget-tokens", "600"], "profile-new.json"),  # 7 of 15 calls
    ],
)
def test_a_run_stopped_by_its_budget_resumes_from_the_store(
    command: str, budget: list[str], result: str, cwd: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """What the budget paid for is kept; the rerun sends only the rest."""
    base = setup(command, cwd)
    first = run_cli([*base, *budget, "--concurrency", "1", "--go"], capsys)
    check(first, None, allowed=fz.COMMANDS[command].outputs, also=(1,))
    stored = _stored(cwd / fz.STORE / "store.sqlite")
    assert stored > 0, f"the budget paid for nothing:\n{first.describe()}"
    check(run_cli(base, capsys), 0, allowed=fz.COMMANDS[command].outputs)
    total = json.loads((cwd / result).read_text())["accounting"]["total"]
    sent = total["calls"] - total["cached"]
    assert sent == _stored(cwd / fz.STORE / "store.sqlite") - stored, f"rerun: {total}"


@pytest.mark.parametrize(
    ("command", "result"),
    [
        ("grade", "grades/results.json"),
        ("juries compare", "comparison/comparison.json"),
        ("bound measure", "profile-new.json"),
    ],
)
def test_a_run_whose_output_cannot_be_written_is_answered_from_the_store(
    command: str, result: str, cwd: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base = setup(command, cwd)
    (cwd / "afile").write_text("in the way\n")
    out = result.split("/")[0]
    bad = [f"afile/{a}" if a == out else a for a in base]
    check(run_cli(bad, capsys), 2, allowed_on_error=(fz.STORE,), located=False)
    stored = _stored(cwd / fz.STORE / "store.sqlite")
    check(run_cli(base, capsys), 0, allowed=fz.COMMANDS[command].outputs)
    total = json.loads((cwd / result).read_text())["accounting"]["total"]
    if stored:  # the calls were made before the output failed: none is made again
        assert total["cached"] == total["calls"], f"{stored} results stored; rerun: {total}"


def _stored(path: Path) -> int:
    """Finished calls in the store at `path` (0 when there is none)."""
    if not path.exists():
        return 0
    with Store(path) as store:
        return int(store.counts().get("ok", 0))


def test_rank_whose_output_cannot_be_written_is_answered_from_the_store(
    cwd: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base = setup("rank", cwd)
    fz.write(cwd / "config.yaml", "yaml", {**fz.config_data(), "engine": {"store": "s.sqlite"}})
    (cwd / "afile").write_text("in the way\n")
    bad = run_cli([*base, "--out", "afile/run"], capsys)
    check(bad, 2, allowed_on_error=("s.sqlite",), located=False)
    stored = _stored(cwd / "s.sqlite")
    check(run_cli(base, capsys), 0, allowed=("run", "s.sqlite"))
    total = json.loads((cwd / "run" / "results.json").read_text())["run"]["accounting"]["total"]
    if stored:
        assert total["cached"] == total["calls"], f"{stored} results stored; rerun: {total}"
