"""The judges' agreement with reference judges as a record's table: what `eigenjury
agreement` reports and `fit --agreement` adds to a ranking."""

from __future__ import annotations

from collections.abc import Sequence

from eigenjury.peer.record import AgreementTable
from eigenjury.stats.judge_agreement import judge_agreement
from eigenjury.stats.verdicts import VerdictTable


def agreement_table(
    table: VerdictTable, references: Sequence[str], *, bootstrap: int, ci: float, seed: int
) -> AgreementTable:
    """Every judge against the majority of the `references`, each named as
    `named_judges` reads them (rounds already checked against `ci`). Raises DataError
    for references the verdicts cannot support."""
    names = named_judges(references, table.models)
    result = judge_agreement(table, names, bootstrap=bootstrap, ci=ci, seed=seed)
    return AgreementTable.model_validate(result.record())


def named_judges(values: Sequence[str], names: Sequence[str]) -> list[str]:
    """The judges an option repeated once per judge names. A value that is one of the
    verdicts' `names` is that judge, commas and all ("Smith, J."); any other value is
    split at its commas, the older form of naming several at once ("a,b")."""
    known = set(names)
    judges: list[str] = []
    for value in values:
        if value in known or "," not in value:
            judges.append(value)
        else:
            judges.extend(part.strip() for part in value.split(","))
    return judges
