"""Tiny valid inputs for every `eigenjury` command, and the tables of bad contents that
tests/commands/test_fuzz_commands.py crosses them with.

Every command has a `Command`: `setup(cwd)` writes its valid inputs into the (empty)
working directory and returns a command line that succeeds on them in well under a
second, on scripted models only. Every file a command reads has a `FileInput`: where
it lies, its format, its valid data, and the fields the content mutations aim at.
"""

from __future__ import annotations

import csv
import io
import json
import math
import re
import shutil
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import yaml

from eigenjury.cli import main
from eigenjury.models.providers.scripted import register_script
from eigenjury.models.types import ChatRequest

# --- scripted models --------------------------------------------------------------------

LISTED = re.compile(r"^\[([^\]]+)\] ", re.M)


def _last_user(request: ChatRequest) -> str:
    return next((m.content for m in reversed(request.messages) if m.role == "user"), "")


def _juror(grade: str) -> Callable[[ChatRequest], str]:
    """A juror that always gives `grade` (one line per criterion when they are batched)."""

    def reply(request: ChatRequest) -> str:
        listed = LISTED.findall(_last_user(request))
        if listed and "did not end with" not in _last_user(request):
            return "\n".join(f"GRADE[{ident}]: {grade}" for ident in listed)
        return f"GRADE: {grade}"

    return reply


def _judge(request: ChatRequest) -> str:
    """A bounds judge with no bias at all: the same verdict for every item."""
    text = " ".join(m.content for m in request.messages)
    return "[[A>B]]" if "[[A>>B]]" in text else "Fine. [[7]]"


def _peer(request: ChatRequest) -> str:
    """Peer members: always prefer reply A, and reply at lengths that vary with the
    prompt (style-check measures taste in the spread of the run's reply lengths)."""
    text = " ".join(m.content for m in request.messages)
    if "<verdict>" in text:
        return "<verdict>A</verdict>"
    return "A. Because it is kind." + " Truly." * (sum(map(ord, text)) % 4)


register_script("fuzz-juror", _juror("C"))
register_script("fuzz-juror-no", _juror("I"))
register_script("fuzz-judge", _judge)
register_script("fuzz-peer", _peer)

# --- valid data -------------------------------------------------------------------------


def contract_data() -> dict[str, Any]:
    return {
        "name": "capitals",
        "tasks": [
            {
                "task_id": "france",
                "execution": {"prompt": "What is the capital of France?"},
                "evaluation": {
                    "pass_threshold": 60,
                    "criteria": [
                        {"id": "city", "weight": 50, "grader": "exact_match", "prompt": "Paris"},
                        {"id": "kind", "weight": 50, "grader": "llm_judge", "prompt": "Polite"},
                    ],
                },
            },
            {
                "task_id": "italy",
                "execution": {"prompt": "What is the capital of Italy?"},
                "evaluation": {
                    "criteria": [
                        {"id": "city", "weight": 100, "grader": "exact_match", "prompt": "Rome"}
                    ]
                },
            },
        ],
    }


def submissions_data() -> list[dict[str, Any]]:
    return [
        {"task_id": "france", "submission": "Answer: Paris", "candidate": "a"},
        {"task_id": "italy", "submission": "Answer: Rome", "candidate": "a"},
        {"task_id": "france", "submission": "Answer: Lyon", "candidate": "b"},
    ]


def healthbench_data() -> list[dict[str, Any]]:
    """The contract's two tasks as HealthBench examples (ids the submissions name), and one more."""
    return [
        {
            "prompt": [{"role": "user", "content": f"What is the capital of {country}?"}],
            "rubrics": [
                {"criterion": f"Names {city}.", "points": 5, "tags": ["axis:accuracy"]},
                {"criterion": "Names Lyon.", "points": -5, "tags": ["axis:accuracy"]},
            ],
            "example_tags": ["theme:capitals"],
            "prompt_id": country.lower(),
        }
        for country, city in (("France", "Paris"), ("Italy", "Rome"), ("Spain", "Madrid"))
    ]


def bundle_tasks_data() -> dict[str, Any]:
    return {
        "version": 2,
        "name": "tiny",
        "prompts": [
            {
                "task_id": "france",
                "task_prompt": "Read the note. What is the capital of France?",
                "reference_file": "note.txt",
            },
            {"task_id": "italy", "task_prompt": "Capital of Italy?", "reference_file": ""},
        ],
    }


def bundle_answers_data() -> list[dict[str, Any]]:
    return [
        {
            "task_id": "france",
            "criteria": [
                {"id": "city", "name": "Paris", "weight": 50, "grader_type": "ExactMatch",
                 "semanticPrompt": "Paris"},
                {"id": "kind", "name": "Kind", "weight": 50, "grader_type": "llm-judge",
                 "semanticPrompt": "Polite"},
            ],
            "passThreshold": 60,
        },
        {
            "task_id": "italy",
            "criteria": [
                {"id": "city", "name": "Rome", "weight": 100, "grader_type": "ExactMatch",
                 "semanticPrompt": "Rome"}
            ],
        },
    ]  # fmt: skip


def reference_text() -> str:
    return "A note.\nParis is the capital of France.\nThat is all.\n"


def requests_data() -> list[dict[str, Any]]:
    return [
        {"id": f"r{i}", "messages": [{"role": "user", "content": f"q {i}"}], "temperature": 0}
        for i in range(3)
    ]


def prices_data() -> dict[str, Any]:
    return {
        "scripted:echo": {"input": 1.0, "output": 2.0},
        "openai:fuzz-a": {"input": 0.5, "output": 1.5},
        "openai:fuzz-b": {"input": 0.25, "output": 0.75},
    }


def dataset_data() -> list[dict[str, Any]]:
    return [{"id": f"i{i}", "prompt": "Q?", "response": f"Answer {i}."} for i in range(3)]


def scores_data() -> list[dict[str, Any]]:
    return [{"item": f"t{i}", "score": 1 + i % 10, "model": f"m{i % 3}"} for i in range(30)]


def results_data() -> dict[str, Any]:
    """A contracts results.json as `grade` of eigenjury 0.1 wrote it (no kind)."""
    votes = {"C": 2, "I": 1, "unparsed": 0, "error": 0}
    return {
        "eigenjury": "0.1.0", "contract": "contract.yaml",
        "jury": {"jurors": ["j1", "j2", "j3"], "temperature": 0.0, "seed": 0, "max_tokens": 64,
                 "batch_criteria": False},
        "summary": [],
        "tasks": [
            {"task_id": f"t{i}", "candidate": f"c{i % 3}", "score": 30.0 * (i % 3) + 5,
             "passed": True, "reward": 0.3 * (i % 3) + 0.05, "threshold": 50.0,
             "complete": True,
             "criteria": [{"id": "k1", "grader": "llm_judge", "weight": 1.0,
                           "passed": i % 2 == 0, "awarded": float(i % 2 == 0), "votes": votes,
                           "split": False}],
             "jury_cost_usd": None, "jury_input_tokens": 0, "jury_output_tokens": 0,
             "jury_calls": 3, "candidate_cost_usd": None, "candidate_output_tokens": 0}
            for i in range(30)
        ],
        "warnings": [],
    }  # fmt: skip


def config_data(objective: bool = False) -> dict[str, Any]:
    data: dict[str, Any] = {
        "name": "fuzz",
        "population": [{"name": n, "model": "scripted:fuzz-peer"} for n in ("ann", "bob", "cat")],
        "constitution": "constitution.yaml",
        "scenarios": {"source": "scenarios.jsonl"},
        "sampling": {"design": "all"},
        "judging": {"reflections": False},
        "fit": {"bootstrap": 0},
        "output": "run",
    }
    if objective:
        data["objective"] = {"questions": "questions.jsonl"}
    return data


def answers_data() -> list[dict[str, Any]]:
    """Given answers as a table: two models, three questions."""
    return [
        {"question_id": f"q{i}", "model": model, "answer": f"Answer {i} by {model}.",
         "question": f"Question {i}?"}
        for model in ("base", "other")
        for i in range(3)
    ]  # fmt: skip


def constitution_data() -> dict[str, Any]:
    return {"title": "Kindness", "criteria": ["Prefer the kinder reply.", "Prefer the truth."]}


def scenarios_data() -> list[dict[str, Any]]:
    return [{"id": f"s{i}", "text": f"My friend is sad ({i}). What do I say?"} for i in range(3)]


def questions_data() -> list[dict[str, Any]]:
    return [
        {"id": f"q{i}", "question": f"What is {i} + 1?",
         "options": {"A": str(i + 1), "B": str(i + 2)}, "answer": "A"}
        for i in range(3)
    ]  # fmt: skip


# --- artifacts other commands write (made once, by the commands themselves) -------------


@cache
def artifact(name: str) -> bytes:
    """A file one command writes and another reads: the simulated verdicts and truth, a
    store with three results, a sensitivity profile. Made once per session."""
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        if name in ("verdicts.csv", "verdicts.jsonl", "verdicts.parquet", "truth.json"):
            fmt = name.rsplit(".", 1)[1]
            argv = ["simulate", "--out", str(root), "--models", "3", "--scenarios", "8"]
            code = main([*argv, "--seed", "1", "--format", "csv" if fmt == "json" else fmt])
        elif name == "store.sqlite":
            write(root / "r.jsonl", "jsonl", requests_data())
            argv = ["batch", str(root / "r.jsonl"), "--model", "scripted:echo", "--out",
                    str(root / "o.jsonl"), "--store", str(root / name)]  # fmt: skip
            code = main([*argv, "--no-progress"])
        elif name == "profile.json":
            write(root / "d.jsonl", "jsonl", dataset_data())
            code = main(["bound", "measure", str(root / "d.jsonl"), "--judge",
                         "scripted:fuzz-judge", "--m", "3", "--out", str(root / name), "--store",
                         str(root / "s.sqlite"), "--no-progress"])  # fmt: skip
        else:
            raise KeyError(name)
        assert code == 0, f"could not make the artifact {name}"
        return (root / name).read_bytes()


def parse_artifact(name: str) -> Any:
    text = artifact(name).decode()
    return json.loads(text)


def verdict_rows() -> list[dict[str, Any]]:
    return list(csv.DictReader(io.StringIO(artifact("verdicts.csv").decode())))


# --- writing data in each format --------------------------------------------------------


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return repr(value)
    if isinstance(value, int):
        return str(value)
    if isinstance(value, dict):
        return (
            "{" + ", ".join(f"{json.dumps(k)} = {_toml_value(v)}" for k, v in value.items()) + "}"
        )
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    return json.dumps(value)


def render(fmt: str, data: Any) -> bytes:
    """`data` in `fmt`; JSON keeps NaN and Infinity as Python writes them (not JSON)."""
    if fmt == "jsonl":
        return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in data).encode()
    if fmt == "json":
        return (json.dumps(data, indent=2, ensure_ascii=False) + "\n").encode()
    if fmt == "yaml":
        return yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=10_000).encode()
    if fmt == "toml":
        return "".join(f"{json.dumps(k)} = {_toml_value(v)}\n" for k, v in data.items()).encode()
    if fmt == "csv":
        columns: list[str] = []
        for row in data:
            columns += [k for k in row if k not in columns]
        buffer = io.StringIO()
        writer = csv.DictWriter(buffer, columns, lineterminator="\n")
        writer.writeheader()
        writer.writerows(data)
        return buffer.getvalue().encode()
    if fmt == "text":
        return str(data).encode()
    if fmt == "bytes":
        return bytes(data)
    raise ValueError(fmt)


def write(path: Path, fmt: str, data: Any) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(render(fmt, data))
    return path


# --- commands ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Command:
    """A subcommand with a tiny valid command line.

    `outputs`: the paths (relative to the working directory; a folder with everything
    in it) that a successful run may create. `out_kind`: whether its --out (or output
    positional) is a "file", a "folder", or "either" (a .yaml file or a bundle folder).
    `setup` is None where the command cannot run cheaply here (`demo` loads the bundled
    llama.cpp models: minutes on CPU); its options are then only parsed."""

    name: str
    setup: Callable[[Path], list[str]] | None
    outputs: tuple[str, ...] = ()
    out_kind: str | None = None


STORE = ".eigenjury"  # the default store's folder: the tests' user data folder


def _simulate(cwd: Path) -> list[str]:
    return ["simulate", "--out", "sim", "--models", "3", "--scenarios", "5"]


def _fit(cwd: Path) -> list[str]:
    (cwd / "verdicts.csv").write_bytes(artifact("verdicts.csv"))
    (cwd / "truth.json").write_bytes(artifact("truth.json"))
    return ["fit", "verdicts.csv", "--bootstrap", "0", "--truth", "truth.json", "--out", "fit.json"]


def _rank(cwd: Path) -> list[str]:
    write(cwd / "config.yaml", "yaml", config_data())
    write(cwd / "config-objective.yaml", "yaml", config_data(objective=True))
    priced = config_data()
    priced["engine"] = {"prices": "prices.toml"}
    write(cwd / "config-prices.yaml", "yaml", priced)
    write(cwd / "prices.toml", "toml", prices_data())
    write(cwd / "constitution.yaml", "yaml", constitution_data())
    write(cwd / "scenarios.jsonl", "jsonl", scenarios_data())
    write(cwd / "questions.jsonl", "jsonl", questions_data())
    return ["rank", "config.yaml", "--no-progress"]


def _judge_answers(cwd: Path) -> list[str]:
    write(cwd / "answers.csv", "csv", answers_data())
    write(cwd / "answers.jsonl", "jsonl", answers_data())
    return ["judge", "answers.csv", "--judge", "scripted:fuzz-peer", "--baseline", "base",
            "--bootstrap", "0", "--out", "judged", "--no-progress"]  # fmt: skip


def _style_check(cwd: Path) -> list[str]:
    """A finished rank run to check (made here: the check reads the run's folder), its
    members told apart by personas so that their replies differ in length."""
    _rank(cwd)
    config = config_data()
    personas = ("Be brief.", "Be warm.", "Be calm, please.")
    for member, persona in zip(config["population"], personas, strict=True):
        member["persona"] = persona
    write(cwd / "config.yaml", "yaml", config)
    rank = ["rank", str(cwd / "config.yaml"), "--out", str(cwd / "run"), "--no-progress"]
    assert main(rank) == 0, "could not make the run to check"
    return ["style-check", "run", "--replies", "4", "--bootstrap", "100", "--out", "check",
            "--no-progress"]  # fmt: skip


def _batch(cwd: Path) -> list[str]:
    write(cwd / "requests.jsonl", "jsonl", requests_data())
    return ["batch", "requests.jsonl", "--model", "scripted:echo", "--out", "results.jsonl",
            "--no-progress"]  # fmt: skip


def _export(cwd: Path) -> list[str]:
    (cwd / "store.sqlite").write_bytes(artifact("store.sqlite"))
    return ["export", "all.jsonl", "--store", "store.sqlite"]


def _contract_files(cwd: Path) -> None:
    write(cwd / "contract.yaml", "yaml", contract_data())
    write(cwd / "submissions.jsonl", "jsonl", submissions_data())
    write(cwd / "bundle" / "tasks.json", "json", bundle_tasks_data())
    write(cwd / "bundle" / "answers.json", "json", bundle_answers_data())
    write(cwd / "bundle" / "refs" / "note.txt", "text", reference_text())


def _grade(cwd: Path) -> list[str]:
    _contract_files(cwd)
    return ["grade", "contract.yaml", "--submissions", "submissions.jsonl", "--jury",
            "scripted:fuzz-juror", "--out", "grades", "--no-progress"]  # fmt: skip


def _compare(cwd: Path) -> list[str]:
    _contract_files(cwd)
    return ["juries", "compare", "contract.yaml", "--submissions", "submissions.jsonl",
            "--pool-a", "scripted:fuzz-juror", "--pool-b", "scripted:fuzz-juror-no",
            "--rounds", "20", "--out", "comparison", "--no-progress"]  # fmt: skip


def _agreement(cwd: Path) -> list[str]:
    rows = verdict_rows()
    write(cwd / "verdicts.csv", "csv", rows + [{**r, "judge": "crowd"} for r in rows])
    return ["agreement", "verdicts.csv", "--reference", "crowd", "--bootstrap", "40", "--out",
            "agreement.json"]  # fmt: skip


def _leaderboard(cwd: Path) -> list[str]:
    (cwd / "verdicts.csv").write_bytes(artifact("verdicts.csv"))
    fit = ["fit", str(cwd / "verdicts.csv"), "--bootstrap", "0", "--out", str(cwd / "results.json")]
    assert main(fit) == 0, "could not make the result to export"
    return ["export-leaderboard", "results.json", "--out", "board.md"]


def _check(cwd: Path) -> list[str]:
    _contract_files(cwd)
    return ["contracts", "check", "contract.yaml"]


def _convert(cwd: Path) -> list[str]:
    _contract_files(cwd)
    return ["contracts", "convert", "contract.yaml", "converted"]


def _harbor(cwd: Path) -> list[str]:
    _contract_files(cwd)
    return ["contracts", "export-harbor", "contract.yaml", "harbor", "--jury",
            "scripted:fuzz-juror"]  # fmt: skip


def _measure(cwd: Path) -> list[str]:
    write(cwd / "dataset.jsonl", "jsonl", dataset_data())
    return ["bound", "measure", "dataset.jsonl", "--judge", "scripted:fuzz-judge", "--m", "3",
            "--out", "profile-new.json", "--no-progress"]  # fmt: skip


def _apply(cwd: Path) -> list[str]:
    write(cwd / "scores.csv", "csv", scores_data())
    (cwd / "profile.json").write_bytes(artifact("profile.json"))
    return ["bound", "apply", "scores.csv", "--profile", "profile.json", "--scale", "likert10",
            "--tau", "0.5", "--delta", "0.05", "--out", "released"]  # fmt: skip


def _certify(cwd: Path) -> list[str]:
    return ["bound", "certify", "--sensitivity", "0.02", "--dim", "500", "--tau", "0.5",
            "--delta", "0.01"]  # fmt: skip


COMMANDS: dict[str, Command] = {
    c.name: c
    for c in (
        Command("simulate", _simulate, ("sim",), "folder"),
        Command("fit", _fit, ("fit.json",), "file"),
        Command("agreement", _agreement, ("agreement.json",), "file"),
        Command("rank", _rank, ("run", STORE), "folder"),
        Command("judge", _judge_answers, ("judged", STORE), "folder"),
        Command("style-check", _style_check, ("check", "run", STORE), "folder"),
        Command("demo", None, (), "folder"),
        Command("batch", _batch, ("results.jsonl", STORE), "file"),
        Command("export", _export, ("all.jsonl",), "file"),
        Command("export-leaderboard", _leaderboard, ("board.md",), "file"),
        Command("grade", _grade, ("grades", STORE), "folder"),
        Command("juries compare", _compare, ("comparison", STORE), "folder"),
        Command("contracts check", _check, ()),
        Command("contracts convert", _convert, ("converted",), "either"),
        Command("contracts export-harbor", _harbor, ("harbor",), "folder"),
        Command("bound measure", _measure, ("profile-new.json", STORE), "file"),
        Command("bound apply", _apply, ("released",), "folder"),
        Command("bound certify", _certify, ()),
        Command("view", None, ()),  # serves until interrupted: tests/view/test_view.py runs it
    )
}

# --- file inputs ------------------------------------------------------------------------

FieldPath = tuple[str | int, ...]


@dataclass(frozen=True)
class FileInput:
    """One file a command reads.

    `replaces`: (argument of the command's line, what takes its place) where the file is
    named another way (another format of the same input, the bundle folder holding it,
    another config naming it); `adds`: arguments that name it when the command's line
    does not; `drops`: arguments the line must lose for it (a --scale that does not
    apply). `text`, `number`, `required`: fields (paths into `data()`; for JSONL and CSV
    the first part is the record) a mutation retypes, renumbers or
    removes; `ids`: fields that together must be unique (record 1 gets record 0's).
    `expect`: exit statuses that differ from a mutation's default for this file."""

    id: str
    command: str
    filename: str
    fmt: str
    data: Callable[[], Any]
    replaces: tuple[str, str] | None = None
    adds: tuple[str, ...] = ()
    drops: tuple[str, ...] = ()
    text: FieldPath | None = None
    number: FieldPath | None = None
    required: FieldPath | None = None
    ids: tuple[FieldPath, ...] = ()
    expect: Mapping[str, int | None] = field(default_factory=dict)
    written: bool = False  # the command may write it (a store): a new one is fine

    @property
    def textual(self) -> bool:
        return self.fmt not in ("bytes",)


def _artifact_data(name: str) -> Callable[[], Any]:
    return lambda: list(artifact(name))


FILE_INPUTS: tuple[FileInput, ...] = (
    FileInput("fit.verdicts-csv", "fit", "verdicts.csv", "csv", verdict_rows,
              text=(1, "scenario"), number=(1, "verdict"), required=(1, "second")),
    FileInput("fit.verdicts-jsonl", "fit", "verdicts.jsonl", "jsonl", verdict_rows,
              replaces=("verdicts.csv", "verdicts.jsonl"), text=(1, "scenario"),
              number=(1, "verdict"), required=(1, "second")),
    FileInput("fit.verdicts-parquet", "fit", "verdicts.parquet", "bytes",
              _artifact_data("verdicts.parquet"),
              replaces=("verdicts.csv", "verdicts.parquet")),
    FileInput("fit.truth", "fit", "truth.json", "json", lambda: parse_artifact("truth.json"),
              number=("population", "tie_propensity", 0), required=("population", "lenses")),
    FileInput("rank.config", "rank", "config.yaml", "yaml", config_data,
              text=("population", 0, "name"), number=("fit", "dim"),
              required=("population",), ids=(("population", 1, "name"),)),
    FileInput("rank.constitution", "rank", "constitution.yaml", "yaml", constitution_data,
              text=("criteria", 0), required=("criteria",)),
    FileInput("rank.scenarios", "rank", "scenarios.jsonl", "jsonl", scenarios_data,
              text=(1, "text"), required=(1, "text"), ids=((1, "id"),),
              expect={"extra-field": 0}),
    FileInput("rank.questions", "rank", "questions.jsonl", "jsonl", questions_data,
              replaces=("config.yaml", "config-objective.yaml"), text=(1, "question"),
              required=(1, "answer"), ids=((1, "id"),), expect={"extra-field": 0}),
    FileInput("rank.prices", "rank", "prices.toml", "toml", prices_data,
              replaces=("config.yaml", "config-prices.yaml"),
              number=("scripted:echo", "input"), required=("scripted:echo", "output"),
              expect={"empty": 0}),
    FileInput("judge.answers-csv", "judge", "answers.csv", "csv", answers_data,
              text=(1, "answer"), required=(1, "model"), ids=((1, "question_id"), (1, "model")),
              expect={"extra-field": 0}),
    FileInput("judge.answers-jsonl", "judge", "answers.jsonl", "jsonl", answers_data,
              replaces=("answers.csv", "answers.jsonl"), text=(1, "question"),
              required=(1, "question_id"), ids=((1, "question_id"), (1, "model")),
              expect={"extra-field": 0}),
    FileInput("batch.requests", "batch", "requests.jsonl", "jsonl", requests_data,
              text=(1, "messages", 0, "content"), number=(1, "temperature"),
              required=(1, "messages"), ids=((1, "id"),)),
    FileInput("batch.prices-toml", "batch", "prices.toml", "toml", prices_data,
              adds=("--prices", "prices.toml"), number=("scripted:echo", "input"),
              required=("scripted:echo", "output"), expect={"empty": 0}),
    FileInput("batch.prices-json", "batch", "prices.json", "json", prices_data,
              adds=("--prices", "prices.json"), number=("scripted:echo", "input"),
              required=("scripted:echo", "output")),
    FileInput("batch.store", "batch", "store.sqlite", "bytes", _artifact_data("store.sqlite"),
              adds=("--store", "store.sqlite"), expect={"missing": 0, "empty": None},
              written=True),
    FileInput("export.store", "export", "store.sqlite", "bytes", _artifact_data("store.sqlite"),
              expect={"empty": None}),
    FileInput("grade.contract-yaml", "grade", "contract.yaml", "yaml", contract_data,
              text=("name",), number=("tasks", 0, "evaluation", "criteria", 0, "weight"),
              required=("tasks", 0, "evaluation"), ids=(("tasks", 1, "task_id"),)),
    FileInput("grade.bundle-tasks", "grade", "bundle/tasks.json", "json", bundle_tasks_data,
              replaces=("contract.yaml", "bundle"), text=("prompts", 0, "task_prompt"),
              number=("version",), required=("prompts", 0, "task_id"),
              ids=(("prompts", 1, "task_id"),)),
    FileInput("grade.bundle-answers", "grade", "bundle/answers.json", "json",
              bundle_answers_data, replaces=("contract.yaml", "bundle"),
              text=(0, "criteria", 1, "semanticPrompt"), number=(0, "criteria", 0, "weight"),
              required=(0, "criteria"), ids=((1, "task_id"),)),
    FileInput("grade.bundle-reference", "grade", "bundle/refs/note.txt", "text", reference_text,
              replaces=("contract.yaml", "bundle"),
              expect={"empty": 0, "binary": None, "not-utf8-line-3": None, "deep-nesting": 0}),
    FileInput("grade.submissions", "grade", "submissions.jsonl", "jsonl", submissions_data,
              text=(1, "submission"), required=(1, "task_id"),
              ids=((1, "task_id"), (1, "candidate"))),
    FileInput("grade.healthbench", "grade", "hb.jsonl", "jsonl", healthbench_data,
              replaces=("contract.yaml", "hb.jsonl"), text=(1, "rubrics", 0, "criterion"),
              number=(1, "rubrics", 0, "points"), required=(1, "rubrics"),
              ids=((1, "prompt_id"),)),
    FileInput("grade.prices", "grade", "prices.toml", "toml", prices_data,
              adds=("--prices", "prices.toml"), number=("scripted:echo", "input"),
              required=("scripted:echo", "output"), expect={"empty": 0}),
    FileInput("compare.contract", "juries compare", "contract.yaml", "yaml", contract_data,
              text=("name",), number=("tasks", 0, "evaluation", "criteria", 0, "weight"),
              required=("tasks", 0, "evaluation"), ids=(("tasks", 1, "task_id"),)),
    FileInput("compare.submissions", "juries compare", "submissions.jsonl", "jsonl",
              submissions_data, text=(1, "submission"), required=(1, "task_id"),
              ids=((1, "task_id"), (1, "candidate"))),
    FileInput("check.contract", "contracts check", "contract.yaml", "yaml", contract_data,
              text=("name",), number=("tasks", 0, "evaluation", "criteria", 0, "weight"),
              required=("tasks", 0, "evaluation"), ids=(("tasks", 1, "task_id"),)),
    FileInput("convert.contract", "contracts convert", "contract.yaml", "yaml", contract_data,
              text=("name",), number=("tasks", 0, "evaluation", "criteria", 0, "weight"),
              required=("tasks", 0, "evaluation"), ids=(("tasks", 1, "task_id"),)),
    FileInput("convert.bundle-answers", "contracts convert", "bundle/answers.json", "json",
              bundle_answers_data, replaces=("contract.yaml", "bundle"),
              text=(0, "criteria", 1, "semanticPrompt"), number=(0, "criteria", 0, "weight"),
              required=(0, "criteria"), ids=((1, "task_id"),)),
    FileInput("convert.healthbench", "contracts convert", "hb.jsonl", "jsonl", healthbench_data,
              replaces=("contract.yaml", "hb.jsonl"), text=(1, "rubrics", 0, "criterion"),
              number=(1, "rubrics", 0, "points"), required=(1, "rubrics"),
              ids=((1, "prompt_id"),)),
    FileInput("harbor.contract", "contracts export-harbor", "contract.yaml", "yaml",
              contract_data, text=("name",),
              number=("tasks", 0, "evaluation", "criteria", 0, "weight"),
              required=("tasks", 0, "evaluation"), ids=(("tasks", 1, "task_id"),)),
    FileInput("measure.dataset", "bound measure", "dataset.jsonl", "jsonl", dataset_data,
              text=(1, "response"), required=(1, "prompt"), ids=((1, "id"),),
              expect={"extra-field": 0}),
    FileInput("measure.prices", "bound measure", "prices.json", "json", prices_data,
              adds=("--prices", "prices.json"), number=("scripted:echo", "input"),
              required=("scripted:echo", "output")),
    FileInput("apply.scores-csv", "bound apply", "scores.csv", "csv", scores_data,
              text=(1, "model"), number=(1, "score"), required=(1, "score"), ids=((1, "item"),)),
    FileInput("apply.scores-jsonl", "bound apply", "scores.jsonl", "jsonl", scores_data,
              replaces=("scores.csv", "scores.jsonl"), text=(1, "model"), number=(1, "score"),
              required=(1, "score"), ids=((1, "item"),)),
    FileInput("apply.scores-results", "bound apply", "results.json", "json", results_data,
              replaces=("scores.csv", "results.json"), drops=("--scale", "likert10"),
              text=("tasks", 1, "candidate"), number=("tasks", 1, "score"),
              required=("tasks", 1, "score"), ids=(("tasks", 1, "task_id"),),
              expect={"duplicate-id": None}),
    FileInput("apply.scores-verdicts", "bound apply", "verdicts.csv", "csv", verdict_rows,
              replaces=("scores.csv", "verdicts.csv"), drops=("--scale", "likert10"),
              text=(1, "scenario"), number=(1, "verdict"), required=(1, "second")),
    FileInput("apply.profile", "bound apply", "profile.json", "json",
              lambda: parse_artifact("profile.json"), text=("judge",),
              number=("generators", "identity", "upper_bound"), required=("generators",)),
)  # fmt: skip


# --- bad contents -----------------------------------------------------------------------

MARKUP = "[/][bold]x[/bold] [link=file:///etc/passwd]y[/link] [red"
QUOTES_UNICODE = "q\"uo'te `tick` ünï 日本 💥 \u202eevil\t\\n"
ALIAS_BOMB = (
    'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n'
    + "".join(
        f"{chr(98 + i)}: &{chr(98 + i)} [{','.join(['*' + chr(97 + i)] * 9)}]\n" for i in range(8)
    )
    + "population: *i\n"
)


def _get(data: Any, path: FieldPath) -> Any:
    for part in path:
        data = data[part]
    return data


def _set(data: Any, path: FieldPath, value: Any) -> None:
    _get(data, path[:-1])[path[-1]] = value


def _delete(data: Any, fi: FileInput) -> Any:
    assert fi.required is not None
    if fi.fmt == "csv":  # the whole column
        return [{k: v for k, v in row.items() if k != fi.required[-1]} for row in data]
    del _get(data, fi.required[:-1])[fi.required[-1]]
    return data


def _extra(data: Any, fi: FileInput) -> Any:
    assert fi.required is not None
    if fi.fmt == "csv":
        return [{**row, "zzz_unknown": "1"} for row in data]
    parent = _get(data, fi.required[:-1])
    parent["zzz_unknown"] = 1
    return data


def _duplicate(data: Any, fi: FileInput) -> Any:
    """Item 1 (of the records, or of the list the path goes through) gets item 0's value
    of every id field."""
    for path in fi.ids:
        i = next(k for k, part in enumerate(path) if isinstance(part, int))
        _set(data, path, _get(data, (*path[:i], 0, *path[i + 1 :])))
    return data


def _setter(where: str, value: Any) -> Callable[[Any, FileInput], Any]:
    def mutate(data: Any, fi: FileInput) -> Any:
        path = getattr(fi, where)
        assert path is not None
        _set(data, path, str(value) if fi.fmt == "csv" and not isinstance(value, str) else value)
        return data

    return mutate


EVERY_FILE = ("*",)


@dataclass(frozen=True)
class Mutation:
    """A bad (or odd but valid) content. `expect`: 2 refused, 0 accepted, None either.
    `needs`: the FileInput field it aims at ("" for none); `formats`: the formats it
    applies to (None: every text format; EVERY_FILE: binary files too)."""

    name: str
    expect: int | None
    needs: str = ""
    formats: tuple[str, ...] | None = None
    change: Callable[[Any, FileInput], Any] | None = None


MUTATIONS: tuple[Mutation, ...] = (
    Mutation("missing", 2, formats=EVERY_FILE),
    Mutation("directory", 2, formats=EVERY_FILE),
    Mutation("empty", 2, formats=EVERY_FILE),
    Mutation("binary", 2, formats=EVERY_FILE),
    Mutation("not-utf8-line-3", 2),
    Mutation("control-character-line-3", None),
    Mutation("bom", 0),
    Mutation("deep-nesting", 2),
    Mutation("very-long-line", None),
    Mutation("alias-bomb", 2, formats=("yaml",)),
    Mutation("wrong-type-text", 2, "text", ("json", "jsonl", "yaml", "toml"),
             _setter("text", [1, {"a": 2}])),
    Mutation("wrong-type-number", 2, "number", None, _setter("number", "twelve")),
    Mutation("missing-field", 2, "required", None, _delete),
    Mutation("extra-field", None, "required", None, _extra),
    Mutation("duplicate-id", 2, "ids", None, _duplicate),
    Mutation("huge-int", None, "number", None, _setter("number", 2**70)),
    Mutation("nan", 2, "number", None, _setter("number", float("nan"))),
    Mutation("infinity", 2, "number", None, _setter("number", float("inf"))),
    Mutation("markup-name", 0, "text", None, _setter("text", MARKUP)),
    Mutation("quotes-unicode", 0, "text", None, _setter("text", QUOTES_UNICODE)),
)  # fmt: skip


def applies(mutation: Mutation, fi: FileInput) -> bool:
    if mutation.formats == EVERY_FILE:
        return True
    if not fi.textual:
        return False
    if mutation.formats is not None and fi.fmt not in mutation.formats:
        return False
    if mutation.needs:
        return bool(getattr(fi, mutation.needs))
    return True


def expected(mutation: Mutation, fi: FileInput) -> int | None:
    return fi.expect.get(mutation.name, mutation.expect)


def bad_content(mutation: Mutation, fi: FileInput, path: Path) -> None:
    """Put `mutation` of `fi`'s valid content at `path` (or no file, or a folder)."""
    if path.is_dir():
        shutil.rmtree(path)
    elif path.exists():
        path.unlink()
    path.parent.mkdir(parents=True, exist_ok=True)
    valid = render(fi.fmt, fi.data())
    name = mutation.name
    if name == "missing":
        return
    if name == "directory":
        path.mkdir()
        return
    content: bytes
    if name == "empty":
        content = b""
    elif name == "binary":
        content = bytes(range(256)) * 8
    elif name == "not-utf8-line-3":
        lines = valid.splitlines(keepends=True)
        assert len(lines) >= 3, f"{fi.id}: the valid content needs 3 lines"
        lines[2] = lines[2].rstrip(b"\n") + b"\xff\xfe\n"
        content = b"".join(lines)
    elif name == "control-character-line-3":
        lines = valid.splitlines(keepends=True)
        lines[2] = b"\x14\x00" + lines[2]
        content = b"".join(lines)
    elif name == "bom":
        content = b"\xef\xbb\xbf" + valid
    elif name == "deep-nesting":
        content = b"[" * 100_000
    elif name == "very-long-line":
        content = valid.rstrip(b"\n") + b" " + b"x" * 300_000 + b"\n"
        if fi.text is not None:
            data = fi.data()
            _set(data, fi.text, "x" * 300_000)
            content = render(fi.fmt, data)
    elif name == "alias-bomb":
        content = ALIAS_BOMB.encode()
    else:
        assert mutation.change is not None
        content = render(fi.fmt, mutation.change(fi.data(), fi))
    path.write_bytes(content)


# --- contracts that are wrong (or odd) in what they say ---------------------------------

Criterion = dict[str, Any]


def _first_criterion(contract: dict[str, Any]) -> Criterion:
    criterion: Criterion = contract["tasks"][0]["evaluation"]["criteria"][0]
    return criterion


def _criterion(**fields: Any) -> Callable[[dict[str, Any], list[dict[str, Any]]], None]:
    """Change the first criterion (france's exact_match city) to `fields`."""

    def change(contract: dict[str, Any], submissions: list[dict[str, Any]]) -> None:
        _first_criterion(contract).update(fields)

    return change


def _task(**fields: Any) -> Callable[[dict[str, Any], list[dict[str, Any]]], None]:
    def change(contract: dict[str, Any], submissions: list[dict[str, Any]]) -> None:
        task = contract["tasks"][0]
        for key, value in fields.items():
            section = "execution" if key in ("reference_file", "prompt") else "evaluation"
            if key in ("task_id", "tags"):
                task[key] = value
                for row in submissions:
                    if key == "task_id" and row["task_id"] == "france":
                        row["task_id"] = value
            else:
                task[section][key] = value

    return change


def _no_tasks(contract: dict[str, Any], submissions: list[dict[str, Any]]) -> None:
    contract["tasks"] = []


def _duplicate_criterion(contract: dict[str, Any], submissions: list[dict[str, Any]]) -> None:
    criteria = contract["tasks"][0]["evaluation"]["criteria"]
    criteria[1]["id"] = criteria[0]["id"]


def _evil_submission(contract: dict[str, Any], submissions: list[dict[str, Any]]) -> None:
    """A regex with nested quantifiers against a submission that makes it backtrack."""
    _first_criterion(contract).update(grader="regex", prompt="^(a+)+$")
    submissions[0]["submission"] = "a" * 40 + "!"


def _healthbench_all_negative(contract: dict[str, Any], submissions: list[dict[str, Any]]) -> None:
    evaluation = contract["tasks"][0]["evaluation"]
    evaluation["scoring"] = "healthbench"
    for criterion in evaluation["criteria"]:
        criterion["weight"] = -abs(criterion["weight"]) or -1


def _conversation_ending_assistant(
    contract: dict[str, Any], submissions: list[dict[str, Any]]
) -> None:
    contract["tasks"][0]["execution"]["prompt"] = [
        {"role": "user", "content": "Capital of France?"},
        {"role": "assistant", "content": "Paris."},
    ]


@dataclass(frozen=True)
class ContractCase:
    """`change(contract, submissions)` in place; `expect` as for a Mutation."""

    id: str
    change: Callable[[dict[str, Any], list[dict[str, Any]]], None]
    expect: int | None


CONTRACT_CASES: tuple[ContractCase, ...] = (
    ContractCase("no-tasks", _no_tasks, 2),
    ContractCase("no-criteria", _task(criteria=[]), 2),
    ContractCase("negative-weight", _criterion(weight=-50), None),
    ContractCase("healthbench-no-positive-points", _healthbench_all_negative, 2),
    ContractCase("healthbench", _task(scoring="healthbench"), None),
    ContractCase("unknown-scoring", _task(scoring="vibes"), 2),
    ContractCase("conversation", _task(prompt=[{"role": "user", "content": "Capital?"}]), None),
    ContractCase("conversation-unknown-role", _task(prompt=[{"role": "bot", "content": "x"}]), 2),
    ContractCase("conversation-ends-assistant", _conversation_ending_assistant, 2),
    ContractCase("conversation-not-text", _task(prompt=[{"role": "user", "content": [1]}]), 2),
    ContractCase("criterion-tags-not-text", _criterion(tags=["axis:accuracy", 7]), 2),
    ContractCase("task-tags-not-text", _task(tags=[{"theme": "x"}]), 2),
    ContractCase("markup-tags", _criterion(tags=[MARKUP]), None),
    ContractCase("show-ideal-without-ideal", _task(show_ideal=True), 2),
    ContractCase("repeats", lambda contract, _: contract.update(repeats=3), None),
    ContractCase("repeats-zero", lambda contract, _: contract.update(repeats=0), 2),
    ContractCase("repeats-text", lambda contract, _: contract.update(repeats="many"), 2),
    ContractCase("batch-criteria-task", _task(batch_criteria=True), None),
    ContractCase("huge-weights", _criterion(weight=1e308), None),
    ContractCase("zero-weights", _criterion(weight=0), None),
    ContractCase("threshold-above-100", _task(pass_threshold=101), None),
    ContractCase("threshold-negative", _task(pass_threshold=-1), None),
    ContractCase("threshold-nan", _task(pass_threshold=float("nan")), 2),
    ContractCase("unknown-grader", _criterion(grader="magic"), 2),
    ContractCase("broken-regex", _criterion(grader="regex", prompt="(["), 2),
    ContractCase("backtracking-regex", _evil_submission, 0),
    ContractCase("numeric-with-text", _criterion(grader="numeric", prompt="Paris"), 2),
    ContractCase("negative-tolerance", _criterion(grader="numeric", prompt="4", tolerance=-1), 2),
    ContractCase("python-no-module", _criterion(grader="python", prompt="no_such_mod:grade"), 2),
    ContractCase("python-not-a-path", _criterion(grader="python", prompt="import os"), 2),
    ContractCase("unknown-match", _criterion(match="fuzzy"), 2),
    ContractCase("empty-prompt", _criterion(prompt=""), 2),
    ContractCase("duplicate-criterion-id", _duplicate_criterion, 2),
    ContractCase("reference-outside", _task(reference_file="../../../etc/passwd"), 2),
    ContractCase("reference-absolute", _task(reference_file="/etc/passwd"), 2),
    ContractCase("reference-missing", _task(reference_file="nope.txt"), 2),
    ContractCase("markup-task-id", _task(task_id=MARKUP), 0),
    ContractCase("unicode-task-id", _task(task_id=QUOTES_UNICODE), 0),
)
