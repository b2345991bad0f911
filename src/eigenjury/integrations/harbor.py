"""Harbor export: one Harbor task directory per contract task, graded by eigenjury.

    task.toml               timeouts and resources; [verifier.env] names the API keys the
                            jurors need as ${VAR} references, resolved by Harbor at run time
    instruction.md          the task prompt, and where to leave the answer (/app/answer.txt)
    environment/Dockerfile  Python with eigenjury's runtime dependencies; refs/ under /app
    tests/test.sh           runs the verifier below; a crash still leaves a reward of 0
    tests/contract.yaml     this task alone (criteria, weights, threshold)
    tests/jury.json         juror specs and settings (never keys)
    tests/vendor/eigenjury  the grading core, exactly the installed version

The verifier (`python -m eigenjury.integrations.harbor verify ...`) grades the answer
with the same code as `eigenjury grade` and writes `reward.json`
({"reward": S / 100, "passed": 0 or 1}), `result.json`, `trace.jsonl` and its call
store into the verifier's log folder. Paths in test.sh sit under $EIGENJURY_HARBOR_ROOT
(empty inside Harbor), so the same script runs against a temporary root in tests.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import shutil
import sys
import unicodedata
from collections.abc import Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

from eigenjury import _version
from eigenjury.contracts.bundle import ContractSource, copy_references, load_contract, write_yaml
from eigenjury.contracts.graders import check_python_graders
from eigenjury.contracts.grading import Submission, grade, require_jury
from eigenjury.contracts.jury import Jury
from eigenjury.contracts.prompts import task_text
from eigenjury.contracts.sandbox import GraderSandbox
from eigenjury.contracts.schema import Contract, Task
from eigenjury.contracts.trace import judgements, task_outcome
from eigenjury.errors import InputError
from eigenjury.files import write_json, write_text
from eigenjury.models.spec import ModelSpec
from eigenjury.records import dump_lines

ANSWER_PATH = "/app/answer.txt"
_TEST_SH = """\
#!/usr/bin/env bash
# Grades /app/answer.txt with eigenjury; Harbor reads /logs/verifier/reward.json.
ROOT="${EIGENJURY_HARBOR_ROOT:-}"
LOGS="$ROOT/logs/verifier"
mkdir -p "$LOGS"
if ! PYTHONPATH="$ROOT/tests/vendor" python3 -m eigenjury.integrations.harbor verify \\
    --contract "$ROOT/tests/contract.yaml" --jury "$ROOT/tests/jury.json" \\
    --submission "$ROOT/app/answer.txt" --logs "$LOGS"; then
  echo "eigenjury verifier failed; reward 0" >&2
  echo '{"reward": 0.0, "passed": 0}' > "$LOGS/reward.json"
fi
"""
_INSTRUCTION = """\
{prompt}

When you are done, write your final answer to `{answer}`{refs}.
"""


def export_harbor(
    source: ContractSource, out: Path, jury: Jury | None, *, timeout_s: float = 600.0
) -> list[Path]:
    """Write one Harbor task directory per task; returns the directories. No jury is
    needed when every criterion has a grader without a model."""
    require_jury(source, jury)
    _refuse_url_secrets(jury)
    with GraderSandbox() as sandbox:
        check_python_graders(source.contract, source.path, sandbox)
    names = folder_names(source)
    folders = []
    requirements = _runtime_requirements()
    for task in source.contract.tasks:
        folder = out / names[task.task_id]
        tests = folder / "tests"
        one = ContractSource(
            Contract(tasks=(task,), name=source.contract.name, repeats=source.contract.repeats),
            source.path,
            source.refs_dir,
        )
        write_yaml(one, tests / "contract.yaml")  # copies the reference files to tests/refs
        write_json(tests / "jury.json", _jury_record(jury))
        write_text(tests / "test.sh", _TEST_SH)
        (tests / "test.sh").chmod(0o755)
        _vendor(tests / "vendor" / "eigenjury")
        _vendor_graders(task, tests / "vendor")
        write_text(folder / "task.toml", _task_toml(task, jury, timeout_s))
        refs = task.execution.reference_file
        where = f" (the reference file is /app/refs/{refs})" if refs else ""
        write_text(
            folder / "instruction.md",
            _INSTRUCTION.format(prompt=task_text(task, None), answer=ANSWER_PATH, refs=where),
        )
        if refs:
            task_only = Contract(
                tasks=(task.model_copy(update={"evaluation": _no_reference(task)}),),
            )
            copy_references(
                ContractSource(task_only, source.path, source.refs_dir),
                folder / "environment" / "refs",
            )
        write_text(folder / "environment" / "Dockerfile", _dockerfile(requirements, bool(refs)))
        folders.append(folder)
    return folders


def _no_reference(task: Task) -> Any:
    """The solver's environment gets the execution reference only, never the evaluation's."""
    return task.evaluation.model_copy(update={"reference_file": ""})


_MAX_NAME_BYTES = 255  # the longest file name most file systems take


def folder_names(source: ContractSource) -> dict[str, str]:
    """Task id -> its folder name. Ids that would share a folder (`a/b` and `a-b`, or
    names differing only in case or Unicode form, one folder on macOS and Windows) are refused
    before anything is written: renaming one silently would lose the link to the id."""
    names: dict[str, str] = {}
    taken: dict[str, str] = {}
    for task in source.contract.tasks:
        name = _safe(task.task_id)
        if len(name.encode()) > _MAX_NAME_BYTES:
            raise InputError(
                f"task '{task.task_id}' is too long for a folder name (at most "
                f"{_MAX_NAME_BYTES} bytes); shorten its task_id",
                path=source.path,
            )
        other = taken.setdefault(unicodedata.normalize("NFC", name).casefold(), task.task_id)
        if other != task.task_id:
            raise InputError(
                f"tasks '{other}' and '{task.task_id}' would both be written to the folder "
                f"'{name}' (characters other than letters, digits, '-', '_' and '.' become "
                "'-', and case may not count); rename one of them",
                path=source.path,
            )
        names[task.task_id] = name
    return names


def _safe(task_id: str) -> str:
    """A folder name for `task_id`; leading dots become '-' ('.', '..', hidden folders)."""
    name = "".join(ch if ch.isalnum() or ch in "-_." else "-" for ch in task_id)
    visible = name.lstrip(".")
    return "-" * (len(name) - len(visible)) + visible


def _jury_record(jury: Jury | None) -> dict[str, Any]:
    if jury is None:
        return {"jurors": []}
    return {
        "jurors": [_spec_value(spec) for spec in jury.specs],
        "temperature": jury.temperature,
        "seed": jury.seed,
        "max_tokens": jury.max_tokens,
        "batch_criteria": jury.batch_criteria,
    }


def _refuse_url_secrets(jury: Jury | None) -> None:
    """A task's files are handed around; an endpoint's user info or query values (maybe
    secrets, see ModelSpec.secrets) cannot go into them, and without them it would
    not be reached, so such a juror is refused before anything is written."""
    for spec in jury.specs if jury is not None else ():
        if not spec.shown_in_full:
            raise InputError(
                f"juror {spec}: a Harbor task cannot carry its endpoint's user info or query "
                "values (they may be secrets, and the task's files are shared); serve the "
                "endpoint without them, with its key in an environment variable (api_key_env)"
            )


def _spec_value(spec: ModelSpec) -> str | dict[str, Any]:
    """A spec as written; one that reads its key from a named variable keeps the name,
    never a value."""
    if spec.api_key_env is None:
        return str(spec)
    return {"spec": str(spec), "api_key_env": spec.api_key_env}


def _key_variables(jury: Jury | None) -> list[str]:
    if jury is None:
        return []
    return sorted({spec.key_variable for spec in jury.specs if spec.key_variable})


def _toml_string(text: str) -> str:
    return json.dumps(text)  # a JSON string is a valid TOML basic string


def _task_toml(task: Task, jury: Jury | None, timeout_s: float) -> str:
    env = task.execution.environment
    lines = [
        'version = "1.0"',
        "",
        "[metadata]",
        f"eigenjury_task_id = {_toml_string(task.task_id)}",
        f"eigenjury_version = {_toml_string(_version.__version__)}",
        'tags = ["eigenjury", "contract"]',
        "",
        "[verifier]",
        f"timeout_sec = {float(timeout_s)}",
        "",
        "[verifier.env]",
        *(f'{name} = "${{{name}}}"' for name in _key_variables(jury)),
        "",
        "[agent]",
        f"timeout_sec = {float(env.get('agent_timeout_sec', 600.0))}",
        "",
        "[environment]",
        f"build_timeout_sec = {float(env.get('build_timeout_sec', 600.0))}",
        f"cpus = {int(env.get('cpus', 1))}",
        f"memory_mb = {int(env.get('memory_mb', 2048))}",
        f"storage_mb = {int(env.get('storage_mb', 10240))}",
    ]
    return "\n".join(lines) + "\n"


def _runtime_requirements() -> list[str]:
    """eigenjury's own dependencies (no extras), pinned to the installed versions."""
    pinned = []
    for requirement in metadata.requires("eigenjury") or []:
        if "extra ==" in requirement:
            continue
        name = requirement.split(";")[0].split("[")[0]
        for stop in "<>=!~ ":
            name = name.split(stop)[0]
        pinned.append(f"{name}=={metadata.version(name)}")
    return pinned


def _dockerfile(requirements: Sequence[str], refs: bool) -> str:
    lines = [
        "FROM python:3.12-slim",
        f"RUN pip install --no-cache-dir {' '.join(requirements)}",
        "WORKDIR /app",
    ]
    if refs:
        lines.append("COPY refs/ /app/refs/")
    return "\n".join(lines) + "\n"


def _vendor(target: Path) -> None:
    """Copy the installed package's code (not its data) for the verifier to import."""
    package = Path(_version.__file__).parent
    if target.exists():
        shutil.rmtree(target)
    shutil.copytree(
        package, target, ignore=shutil.ignore_patterns("__pycache__", "data", "*.pyc", "testing")
    )


def _vendor_graders(task: Task, vendor: Path) -> None:
    """Copy the module (or top-level package) of each `python` grader beside eigenjury,
    so the verifier imports the same code as `eigenjury grade` (it runs in the task's
    container, where the user's modules are not installed)."""
    for criterion in task.evaluation.criteria:
        if criterion.grader != "python":
            continue
        top = criterion.prompt.partition(":")[0].strip().split(".")[0]
        found = importlib.util.find_spec(top)  # importable: check_python_graders ran first
        if found is None or found.origin is None or not found.origin.endswith(".py"):
            raise InputError(
                f"task '{task.task_id}', criterion '{criterion.id}': the python grader's "
                f"module {top!r} is not Python source that can be copied into the Harbor task",
            )
        origin = Path(found.origin)
        if found.submodule_search_locations:  # a package: copy its folder
            shutil.copytree(
                origin.parent,
                vendor / top,
                dirs_exist_ok=True,
                ignore=shutil.ignore_patterns("__pycache__", "*.pyc"),
            )
        else:
            shutil.copy2(origin, vendor / f"{top}.py")


def _read_jury(path: Path) -> Jury | None:
    """The exported jury; None when the task needs none."""
    data = json.loads(path.read_text(encoding="utf-8"))
    specs = [ModelSpec.from_value(v) for v in data["jurors"]]
    if not specs:
        return None
    return Jury.from_specs(
        specs,
        temperature=data["temperature"],
        seed=data["seed"],
        max_tokens=data["max_tokens"],
        batch_criteria=data["batch_criteria"],
    )


def verify(contract: Path, jury_path: Path, submission: Path, logs: Path) -> dict[str, Any]:
    """Grade the agent's answer; write reward.json, result.json and trace.jsonl into `logs`."""
    from eigenjury.engine import Engine, Store

    source = load_contract(contract)
    jury = _read_jury(jury_path)
    task = source.contract.tasks[0]
    text = submission.read_text(encoding="utf-8") if submission.is_file() else ""
    logs.mkdir(parents=True, exist_ok=True)
    engine = Engine(Store(logs / "store.sqlite"), progress=False)

    async def go() -> Any:
        async with engine:
            return await grade(engine, source, [Submission(task.task_id, "agent", text)], jury)

    try:
        [result] = asyncio.run(go())
    finally:
        engine.store.close()
    reward = {"reward": result.reward, "passed": int(result.passed)}
    outcome = task_outcome(result).model_dump(mode="json", exclude={"submission"})
    write_json(logs / "result.json", {**outcome, "submission_found": submission.is_file()})
    write_text(logs / "trace.jsonl", dump_lines(judgements([result])))
    write_json(logs / "reward.json", reward)
    return reward


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m eigenjury.integrations.harbor")
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("verify", help="grade a Harbor agent's answer")
    run.add_argument("--contract", type=Path, required=True)
    run.add_argument("--jury", type=Path, required=True)
    run.add_argument("--submission", type=Path, required=True)
    run.add_argument("--logs", type=Path, required=True)
    args = parser.parse_args(argv)
    reward = verify(args.contract, args.jury, args.submission, args.logs)
    print(json.dumps(reward))
    return 0


if __name__ == "__main__":
    sys.exit(main())
