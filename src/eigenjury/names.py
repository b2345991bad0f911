"""Which names a verdict file can hold, so that every name a command writes is read
back as itself.

A verdict file's reader (eigenjury.verdict_files) trims whitespace at the edges of a
name and takes the missing-value words (an empty cell, "NA", "null", "nan", ... in any
case) for no value, as files from spreadsheets and data frames mean them. A model,
judge or scenario named "ann " would be read back as "ann", one named "NA" as a
missing value; so such names are refused where they are given, not written.
"""

from __future__ import annotations

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
