"""Whole jobs as the command line runs them, for Python callers: check the input, run
it through the engine, fit, and write every output file. The methods' own `run`
functions take an engine and return a record; a job adds the engine's lifetime and
the files (reports), which is why it sits above the methods and the reports."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from eigenjury.engine.runner import plan_run, refuse_over_budget, run_engine
from eigenjury.errors import InputError, located
from eigenjury.peer.run import (
    Inputs,
    RankRun,
    adopt_run_store,
    assemble,
    collect,
    first_members,
    member_error,
    prepare,
)
from eigenjury.records import LinesFile, PlanRecord
from eigenjury.reports.output import write_outputs
from eigenjury.reports.ranking import outputs


def run_rank(
    config_path: Path,
    *,
    out: Path | None = None,
    progress: bool = True,
    seed: int | None = None,
    go: bool = False,
) -> RankRun:
    """A rank config's whole run: check it, collect through the engine, fit once the
    engine has closed (the bootstrap gets the processes and the backend's rounds to
    itself), and write results.json, verdicts.csv, transcripts.jsonl and report.html.
    `seed` replaces every seed of the config. Where the config sets a budget, the run is
    planned first and refused if the plan exceeds it, unless `go`."""
    inputs = prepare(config_path, out, seed=seed)
    config = inputs.config
    if config.engine.budgeted and not go:
        refuse_over_budget(_plan(inputs, "rank"), path=inputs.path)
    # the run's output is taken first: a second run writing the same folder is refused
    # before either touches a store
    with LinesFile(inputs.out / "transcripts.jsonl") as transcripts:
        adopt_run_store(inputs)
        try:
            ran = run_engine(
                config.engine,
                list(first_members(config)),
                lambda engine: collect(engine, inputs, transcripts),
                base=inputs.path.parent,
                progress=progress,
                describe=member_error(inputs),
            )
        except InputError as exc:
            if exc.field == "backend":  # the config's engine section names the backend
                raise InputError(exc.message, path=inputs.path, field="engine.backend") from None
            raise
        ranked = assemble(inputs, ran.value, map_rounds=ran.map_rounds)
        write_outputs(ranked.out, outputs(ranked, transcripts))
    return ranked


def plan_rank(config_path: Path, *, out: Path | None = None, seed: int | None = None) -> PlanRecord:
    """What `run_rank` would call and cost (engine/plan.py); nothing is called or written."""
    return _plan(prepare(config_path, out, seed=seed), "rank")


def _plan(inputs: Inputs, command: str) -> PlanRecord:
    config = inputs.config
    return plan_run(
        config.engine,
        list(first_members(config)),
        lambda engine: collect(engine, inputs),  # no transcript: nothing is written
        command=command,
        base=inputs.path.parent,
    )


def run_judge(
    answers: list[Path], judges: list[str], *, out: Path, progress: bool = True, **options: Any
) -> RankRun:
    """`eigenjury judge`: rank the answers in `answers` (every model each file holds a
    member) by `judges` (SPEC or NAME=SPEC), with no config to write: the config is
    written to `out/config.yaml`, where it can be read, edited and run again with
    `eigenjury rank`, and the run goes as that config's would. `options`: those of
    `judge_config` (baseline, design, questions, constitution, limit, reflections,
    bootstrap, seed)."""
    import yaml

    from eigenjury.files import write_text

    path, _, written = judge_config(answers, judges, out=out, **options)
    out.mkdir(parents=True, exist_ok=True)
    write_text(path, yaml.safe_dump(written, sort_keys=False, allow_unicode=True))
    return run_rank(path, progress=progress)


def plan_judge(answers: list[Path], judges: list[str], *, out: Path, **options: Any) -> PlanRecord:
    """What `run_judge` would call and cost; nothing is called or written."""
    _, inputs, _ = judge_config(answers, judges, out=out, **options)
    return _plan(inputs, "judge")


def judge_config(
    answers: list[Path],
    judges: list[str],
    *,
    out: Path,
    baseline: str | None = None,
    design: str | None = None,
    questions: Path | None = None,
    constitution: str | None = None,
    limit: int | None = None,
    reflections: bool = False,
    bootstrap: int | None = None,
    seed: int | None = None,
) -> tuple[Path, Inputs, dict[str, object]]:
    """The config `eigenjury judge` runs: where it goes (out/config.yaml), its inputs,
    every one checked, and the config as written there (paths relative to it). Nothing
    is written."""
    import os

    from eigenjury.config import validate
    from eigenjury.engine.runner import check_engine_specs
    from eigenjury.files import check_output_folder
    from eigenjury.models.spec import named_spec
    from eigenjury.peer.answers import read_answers
    from eigenjury.peer.config import RankConfig
    from eigenjury.peer.run import planned, prepare_config

    check_output_folder(out)
    where: dict[str, Path] = {}  # each model, and the file holding its answers
    for source in answers:
        if not source.exists():
            raise InputError("no such answer file or folder", path=source)
        for answer_set in read_answers(source):
            model = answer_set.model
            if model in where:
                raise InputError(
                    f"model '{model}' has answers in {where[model]} and here; give each "
                    "model's answers once",
                    path=answer_set.path,
                )
            where[model] = answer_set.path
    if len(where) < 2:
        held = ", ".join(where) or "none"
        raise InputError(
            f"judging compares answers of at least 2 models; the answers hold {held}: give "
            "another model's answers (a baseline's, say)",
            field="ANSWERS",
        )
    if baseline is not None and baseline not in where:
        raise InputError(
            f"'{baseline}' is not a model of the answers; they hold {', '.join(where)}",
            field="--baseline",
        )
    with located(field="--judge"):
        named = [named_spec(spec) for spec in judges]
    sampling: dict[str, object] = {"design": design or ("baseline" if baseline else "all")}
    if baseline is not None:
        sampling["baseline"] = baseline
    if len(named) > 1:  # a panel: every judge judges every pair
        sampling["judges_per_group"] = len(named)
    bundled = constitution is not None and not Path(constitution).is_file()

    def config(place: Callable[[Path], str]) -> dict[str, object]:
        """The run's config, with each file given as `place` writes it."""
        data: dict[str, object] = {
            "name": f"answers judged by {', '.join(n or str(spec) for n, spec in named)}",
            "population": [
                {"name": model, "answers": {"path": place(file), "model": model}}
                for model, file in where.items()
            ],
            "judges": [{"name": n, "model": str(spec)} if n else str(spec) for n, spec in named],
            "sampling": sampling,
            "judging": {"reflections": reflections},
            "output": ".",
        }
        if questions is not None or limit is not None:
            scenarios: dict[str, object] = {"limit": limit} if limit is not None else {}
            if questions is not None:
                scenarios["source"] = place(questions)
            data["scenarios"] = scenarios
        if constitution is not None:
            data["constitution"] = constitution if bundled else place(Path(constitution))
        fit = {k: v for k, v in (("bootstrap", bootstrap), ("seed", seed)) if v is not None}
        if fit:
            data["fit"] = fit
        return data

    path = out / "config.yaml"
    # everything checked before a file is written (the options, the files the config
    # names and the judges), with the files where they are: the folder is not made yet
    checked = validate(RankConfig, config(lambda p: str(p.resolve())), path=path, lines={})
    inputs = prepare_config(checked, path, out)
    try:  # answers that share no question are refused here, not once the engine runs
        planned(inputs)
    except InputError as exc:
        exc.path, exc.field = None, "ANSWERS"  # the config is not written yet: the answers
        raise
    check_engine_specs(
        checked.engine, list(first_members(checked)), base=out, describe=member_error(inputs)
    )
    folder = out.resolve()
    return path, inputs, config(lambda p: os.path.relpath(p.resolve(), folder))
