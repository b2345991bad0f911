"""One exception tree: every error a user can see derives from EigenjuryError (Ctrl-C
aside), is drawn in errors.py's docstring, and carries its kind and exit code."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from pathlib import Path

import pytest

import eigenjury
from eigenjury import errors
from eigenjury.errors import EigenjuryError, InputError, Interrupted, located
from eigenjury.exit_codes import EXIT_INTERRUPTED, EXIT_SOME_FAILED, EXIT_USAGE
from eigenjury.stats.verdicts import DataError

# Modules with optional dependencies, and the test server (its errors never reach a user).
SKIPPED = ("eigenjury.integrations", "eigenjury.testing", "eigenjury.__main__")


def public_exceptions() -> dict[str, type[BaseException]]:
    modules = [
        importlib.import_module(info.name)
        for info in pkgutil.walk_packages(eigenjury.__path__, "eigenjury.")
        if not info.name.startswith(SKIPPED)
    ]
    return {
        name: value
        for module in modules
        for name, value in vars(module).items()
        if inspect.isclass(value)
        and issubclass(value, BaseException)
        and value.__module__ == module.__name__
        and not name.startswith("_")
    }


def test_every_error_a_user_can_see_has_one_root_and_is_drawn() -> None:
    exceptions = public_exceptions()
    assert {"InputError", "DataError", "SettingError", "ProviderError", "StoreError"} <= set(
        exceptions
    )
    outside = {n for n, cls in exceptions.items() if not issubclass(cls, EigenjuryError)}
    assert outside == {"Interrupted"}
    assert errors.__doc__ is not None
    drawn = {n for n in exceptions if n in errors.__doc__}
    assert drawn == set(exceptions)
    for cls in exceptions.values():
        assert isinstance(cls.kind, str) and isinstance(cls.exit_code, int)  # type: ignore[attr-defined]


def test_exit_codes_by_kind() -> None:
    assert DataError("x").exit_code == InputError("x").exit_code == EXIT_USAGE
    from eigenjury.models.errors import RateLimitError

    assert RateLimitError("x").exit_code == EXIT_SOME_FAILED
    assert Interrupted(Path("s")).exit_code == EXIT_INTERRUPTED
    assert not issubclass(Interrupted, Exception)  # no `except Exception` swallows Ctrl-C


def test_located_fills_only_what_the_error_does_not_say() -> None:
    with pytest.raises(DataError) as raised, located("verdicts.csv", field="--reference"):
        raise DataError("no verdict names the reference")
    assert str(raised.value) == "verdicts.csv, field '--reference': no verdict names the reference"
    with (
        pytest.raises(InputError) as kept,
        located("outer.csv", context="cannot fit", hint="rerun"),
    ):
        raise InputError("bad row", path="inner.csv", row=3)
    assert str(kept.value) == "inner.csv, row 3: cannot fit: bad row; rerun"
    with pytest.raises(ValueError), located("a.csv"):  # not an InputError: untouched
        raise ValueError("internal")
