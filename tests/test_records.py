"""Records: what is and is not one, located errors, and the search for them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from eigenjury import __version__
from eigenjury.errors import InputError
from eigenjury.records import find_records, kinds, read_any_record, record_files


def _write(path: Path, data: object) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data))
    return path


def test_every_method_declares_its_kinds() -> None:
    assert {"ranking", "grading", "jury-comparison", "sensitivity-profile",
            "bound-certificate"} <= set(kinds())  # fmt: skip


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"name": "x", "kind": "pizza"}, "not an eigenjury record"),  # someone else's JSON
        ([1, 2, 3], "not an eigenjury record"),
        ({"models": []}, "not an eigenjury record"),
        (
            {"kind": "leaderboard", "eigenjury": "9.0.0"},
            "unknown record kind 'leaderboard' (written by eigenjury 9.0.0; this is "
            f"{__version__}); this eigenjury reads ",
        ),
    ],
)
def test_what_is_not_a_record_is_refused_with_its_file_named(
    tmp_path: Path, data: object, message: str
) -> None:
    path = _write(tmp_path / "x.json", data)
    with pytest.raises(InputError) as caught:
        read_any_record(path)
    assert str(caught.value).startswith(str(path)) and message in str(caught.value)


def test_a_search_reads_records_only_and_keeps_out_of_caches(tmp_path: Path) -> None:
    record = {"kind": "ranking", "eigenjury": __version__, "models": "not a list"}
    _write(tmp_path / "runs" / "a" / "results.json", record)  # damaged: found, with its problem
    _write(tmp_path / "runs" / ".eigenjury" / "results.json", record)  # a cache: not entered
    _write(tmp_path / "runs" / ".hidden" / "results.json", record)
    _write(tmp_path / "runs" / "package.json", {"name": "some npm package"})
    assert list(record_files(tmp_path / "runs")) == [tmp_path / "runs" / "a" / "results.json"]
    [found] = find_records([tmp_path / "runs"])
    assert found.record is None and found.problem is not None
    assert "not a valid ranking record" in str(found.problem)


def test_a_search_passes_over_json_of_other_tools_and_finds_old_records(tmp_path: Path) -> None:
    _write(tmp_path / "other" / "results.json", {"accuracy": 0.9})  # not ours: no problem
    certificate = {"bounded": "x", "guarantee": "y"}  # 0.1 wrote no kind, a damaged one here
    _write(tmp_path / "old" / "certificate.json", certificate)
    [found] = find_records([tmp_path])
    assert found.path == tmp_path / "old" / "certificate.json" and found.problem is not None
    assert "bound-certificate" in str(found.problem)
