"""Names a package exports but imports only on first use (PEP 562), so importing the
package, or one light module of it such as a record, loads no engine, numpy or scipy."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any


def exports(package: str, names: Mapping[str, str | tuple[str, str]]) -> Callable[[str], Any]:
    """A module `__getattr__` for `names`: each name -> the module that defines it, or
    (module, its name there)."""

    def attribute_of(name: str) -> Any:
        where = names.get(name)
        if where is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        module, attribute = (where, name) if isinstance(where, str) else where
        return getattr(importlib.import_module(module), attribute)

    return attribute_of
