"""The one writer of a run's outputs: its record, the long parts beside it (verdicts,
transcripts, traces, tables for spreadsheets) and its static HTML report.

Methods never write files; each kind's report module turns a record into `Outputs`,
and this writes them through files.OutputFile: every file is taken (one writer at a
time) and written whole before any is moved into place, so an interrupted write
leaves no torn file, and two runs writing one folder never mix their files.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from eigenjury.files import OutputFile
from eigenjury.records import LinesFile, Record, record_pieces

REPORT = "report.html"


Content = str | LinesFile | Iterable[str]  # text, rows written already, or text in pieces


@dataclass(frozen=True)
class Outputs:
    """What a run writes into its folder: the record (under its kind's file name unless
    `record_file` says otherwise), extra files by name (their text, text in pieces made
    as they are written, or rows already written as the run went: records.LinesFile),
    and the HTML report (text, or text in pieces)."""

    record: Record
    files: Mapping[str, Content] = field(default_factory=dict)
    html: str | Iterable[str] | None = None
    record_file: str | None = None


def write_outputs(folder: Path, outputs: Outputs) -> list[Path]:
    """Write everything into `folder` (made if missing); the paths written, record first."""
    record_path = folder / (outputs.record_file or outputs.record.FILE)
    contents: list[tuple[Path, Content]] = [
        (record_path, record_pieces(outputs.record)),
        *((folder / name, content) for name, content in outputs.files.items()),
    ]
    if outputs.html is not None:
        contents.append((folder / REPORT, outputs.html))
    with contextlib.ExitStack() as taken:
        finished: list[OutputFile | LinesFile] = []
        for path, content in contents:
            if isinstance(content, LinesFile):
                finished.append(content)  # its writer holds it already
                continue
            out = taken.enter_context(OutputFile(path))
            if isinstance(content, str):
                out.write(content)
            else:
                with out.writing() as f:
                    for piece in content:
                        f.write(piece)
            finished.append(out)
        for done in finished:
            done.commit()
    return [path for path, _ in contents]
