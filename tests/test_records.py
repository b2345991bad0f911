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


def test_a_record_states_its_schema_and_files_are_read_by_it(tmp_path: Path) -> None:
    """Written: kind, version, schema first. Read: no schema_version is schema 1 (0.2 and
    0.3.0 wrote none); a newer schema than this eigenjury knows is refused by name."""
    from eigenjury.peer.record import SimulatedDesign, TruthRecord
    from eigenjury.records import record_text

    design = SimulatedDesign(
        scenarios=3, group_size=2, judges_per_scenario=2, scenario_noise=0.0, seed=1
    )
    record = TruthRecord(
        population={"models": ["a", "b"]}, design=design, trust=[0.6, 0.4], elo=[1510, 1490]
    )
    written = json.loads(record_text(record))
    assert list(written)[:3] == ["kind", "eigenjury", "schema_version"]
    assert written["schema_version"] == TruthRecord.SCHEMA == 1
    del written["schema_version"]
    assert read_any_record(_write(tmp_path / "old.json", written)) == record
    newer = _write(tmp_path / "new.json", {**written, "schema_version": 2, "eigenjury": "0.9"})
    with pytest.raises(InputError) as error:
        read_any_record(newer)
    assert str(error.value) == (
        f"{newer}, field 'schema_version': this simulation-truth record has schema 2 (written "
        f"by eigenjury 0.9; this is {__version__}), and this eigenjury reads schemas up to 1; "
        "upgrade eigenjury to read it"
    )
    for bad in ("1", True, 1.5):
        with pytest.raises(InputError, match="schema_version must be a whole number"):
            read_any_record(_write(tmp_path / "bad.json", {**written, "schema_version": bad}))


def test_every_field_of_every_record_says_what_it_is() -> None:
    """Every field of every record and part model has a description (its attribute
    docstring): what a reader of the JSON file needs to know of it."""
    import importlib
    import inspect

    from pydantic import BaseModel

    from eigenjury.records import RECORD_MODULES

    missing, models = [], 0
    for name in ("eigenjury.records", *RECORD_MODULES):
        module = importlib.import_module(name)
        for cls in vars(module).values():
            if not (
                inspect.isclass(cls)
                and issubclass(cls, BaseModel)
                and cls.__module__ == module.__name__
            ):
                continue
            models += 1
            missing += [
                f"{cls.__name__}.{field}"
                for field, info in cls.model_fields.items()
                if not (info.description or "").strip()
            ]
    assert models > 50, "the record modules' models were not found"
    assert not missing, f"fields without a docstring: {', '.join(missing)}"
