"""Which names a verdict file can hold, so that every name a command writes is read
back as itself.

A verdict file's reader (eigenjury.verdict_files) trims whitespace at the edges of a
name and takes the missing-value words (an empty cell, "NA", "null", "nan", ... in any
case) for no value, as files from spreadsheets and data frames mean them. A model,
judge or scenario named "ann " would be read back as "ann", one named "NA" as a
missing value; so such names are refused where they are given, not written.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

# Cell values that mean "no value", compared after trimming and in lower case.
MISSING_WORDS = ("", "nan", "null", "none", "na", "n/a")


def name_problem(name: str) -> str | None:
    """Why `name` cannot be written to a verdict file and read back as itself (None:
    it can)."""
    if name.strip() != name:
        return (
            f"the name {name!r} starts or ends with whitespace, which verdict files do not "
            f"keep (it would be read back as {name.strip()!r}); remove it"
        )
    if name.lower() in MISSING_WORDS:
        words = ", ".join(repr(w) for w in MISSING_WORDS)
        return (
            f"the name {name!r} would be read back from a verdict file as a missing value "
            f"(as would {words}, in any case); choose another name"
        )
    return None


_SPEC = re.compile(r"([a-z][a-z0-9\-]*):(.+)")  # provider:model[@scheme://endpoint]
_ENDPOINT = re.compile(r"@[A-Za-z][A-Za-z0-9+.\-]*://")


def short_labels(names: Sequence[str]) -> list[str]:
    """A short label per name, for table headers: a name that is a model spec becomes its
    model's last path part (`openai-compatible:org/m@http://h:8080/v1` -> `m`), a repeat
    keeping its `#n`; where two names would share a label, both keep their full name.
    Other names stay as they are."""

    def label(name: str) -> str:
        base, hash_, repeat = name.rpartition("#")
        if not (hash_ and repeat.isdigit()):
            base, repeat = name, ""
        spec = _SPEC.fullmatch(base)
        if spec is None:
            return name
        model = _ENDPOINT.split(spec.group(2))[0].rstrip("/")
        short = model.rsplit("/", 1)[-1] or name
        return short + (f"#{repeat}" if repeat else "")

    labels = [label(n) for n in names]
    owners: dict[str, set[str]] = {}
    for name, short in zip(names, labels, strict=True):
        owners.setdefault(short, set()).add(name)
    return [n if len(owners[s]) > 1 else s for n, s in zip(names, labels, strict=True)]
