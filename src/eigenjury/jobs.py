"""Whole jobs as the command line runs them, for Python callers: check the input, run
it through the engine, fit, and write every output file. The methods' own `run`
functions take an engine and return a record; a job adds the engine's lifetime and
the files (reports), which is why it sits above the methods and the reports."""

from __future__ import annotations

from pathlib import Path

from eigenjury.engine.runner import run_engine
from eigenjury.errors import InputError
from eigenjury.peer.run import (
    RankRun,
    adopt_run_store,
    assemble,
    collect,
    first_members,
    member_error,
    prepare,
)
from eigenjury.records import LinesFile
from eigenjury.reports.output import write_outputs
from eigenjury.reports.ranking import outputs


def run_rank(
    config_path: Path, *, out: Path | None = None, progress: bool = True, seed: int | None = None
) -> RankRun:
    """A rank config's whole run: check it, collect through the engine, fit once the
    engine has closed (the bootstrap gets the processes and the backend's rounds to
    itself), and write results.json, verdicts.csv, transcripts.jsonl and report.html.
    `seed` replaces every seed of the config."""
    inputs = prepare(config_path, out, seed=seed)
    config = inputs.config
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
