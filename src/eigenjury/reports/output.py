"""The one writer of a run's outputs: its record, the long parts beside it (verdicts,
transcripts, traces, tables for spreadsheets) and its static HTML report.

Methods never write files; each kind's report module turns a record into `Outputs`,
and this writes them, each file atomically, so an interrupted write leaves no torn file.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from eigenjury.files import write_text
from eigenjury.records import Record, write_record

REPORT = "report.html"


@dataclass(frozen=True)
class Outputs:
    """What a run writes into its folder: the record (under its kind's file name unless
    `record_file` says otherwise), extra files by name (their text, or a finished file
    to move into place: records.LinesFile), and the HTML report."""

    record: Record
    files: Mapping[str, str | Path] = field(default_factory=dict)
    html: str | None = None
    record_file: str | None = None


def write_outputs(folder: Path, outputs: Outputs) -> list[Path]:
    """Write everything into `folder` (made if missing); the paths written, record first."""
    folder.mkdir(parents=True, exist_ok=True)
    record_path = folder / (outputs.record_file or outputs.record.FILE)
    write_record(record_path, outputs.record)
    written = [record_path]
    for name, content in outputs.files.items():
        if isinstance(content, Path):
            os.replace(content, folder / name)
        else:
            write_text(folder / name, content)
        written.append(folder / name)
    if outputs.html is not None:
        write_text(folder / REPORT, outputs.html)
        written.append(folder / REPORT)
    return written
