"""Pairwise verdicts drawn with numpy from per-model strengths, written apart from
eigenjury.stats.simulate so that the agreement checks share no assumption with the code
under test.

Every comparison (scenario, pair of models) has a hidden margin: the strength difference
plus the scenario's own noise, shared by all judges, so judges agree for a reason. A
judge ties at its own rate; otherwise it picks the first slot with probability
sigmoid(sharpness * margin + first-slot bonus). With strengths in decreasing order the
lower-numbered model wins most comparisons: the case where an agreement table that
counts "the lower-coded evaluee won" as a category depends on the models' names.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from eigenjury.stats.verdicts import ReplyFeatures, VerdictTable

STRENGTHS = np.linspace(3.0, -3.0, 8)  # model i is stronger than model i + 1


@dataclass(frozen=True)
class Judge:
    name: str
    sharpness: float  # logits of preference per logit of margin
    tie_rate: float
    first_bonus: float = 0.0  # logits toward the reply shown first
    both_orders: bool = True  # judges each pair in both orders (else in one, at random)


# Three references (their majority is the reference), judges of different quality, and
# model 0 judging as a peer.
JUDGES = (
    Judge("crowd-1", 1.0, 0.2, both_orders=False),
    Judge("crowd-2", 1.0, 0.2, both_orders=False),
    Judge("crowd-3", 1.0, 0.2, both_orders=False),
    Judge("sharp", 2.0, 0.1),
    Judge("dull", 0.3, 0.3),
    Judge("slot", 0.5, 0.1, first_bonus=2.0),
    Judge("model-0", 1.0, 0.05),
)
REFERENCES = ("crowd-1", "crowd-2", "crowd-3")


@dataclass(frozen=True)
class Verdicts:
    """One row per verdict; models are numbered, judges named."""

    scenario: np.ndarray
    judge: np.ndarray  # names
    first: np.ndarray  # model numbers
    second: np.ndarray
    verdict: np.ndarray  # 0 tie, 1 first, 2 second
    first_length: np.ndarray
    second_length: np.ndarray

    def table(
        self, names: Mapping[str, str] | None = None, order: np.ndarray | None = None
    ) -> VerdictTable:
        """The verdicts as a table whose names (models "model-i" and judges) are renamed
        by `names` and whose rows come in `order`."""
        names = names or {}
        rows = np.arange(len(self.verdict)) if order is None else order

        def named(column: np.ndarray) -> list[str]:
            return [names.get(str(n), str(n)) for n in column[rows]]

        table = VerdictTable.from_columns(
            [f"s{s:03d}" for s in self.scenario[rows]],
            named(self.judge),
            named(np.char.add("model-", self.first.astype(str))),
            named(np.char.add("model-", self.second.astype(str))),
            self.verdict[rows],
        )
        lengths = ReplyFeatures(
            ("length",), self.first_length[rows, None], self.second_length[rows, None]
        )
        return dataclasses.replace(table, features=lengths)

    def csv(self, names: Mapping[str, str] | None = None, order: np.ndarray | None = None) -> str:
        """The same, as a verdict file with reply lengths."""
        table = self.table(names, order)
        assert table.features is not None
        lengths = table.features.first[:, 0], table.features.second[:, 0]
        lines = ["scenario,judge,first,second,verdict,first_length,second_length"] + [
            f"{table.scenarios[table.scenario[r]]},{table.models[table.judge[r]]},"
            f"{table.models[table.first[r]]},{table.models[table.second[r]]},"
            f"{table.verdict[r]},{lengths[0][r]:g},{lengths[1][r]:g}"
            for r in range(len(table.verdict))
        ]
        return "\n".join(lines) + "\n"


def draw(scenarios: int, seed: int, judges: tuple[Judge, ...] = JUDGES) -> Verdicts:
    """Every judge's verdicts on every pair of models in each scenario."""
    rng = np.random.default_rng(seed)
    n = len(STRENGTHS)
    low, high = np.triu_indices(n, k=1)
    columns: dict[str, list[np.ndarray]] = {f.name: [] for f in dataclasses.fields(Verdicts)}
    for s in range(scenarios):
        margin = STRENGTHS[low] - STRENGTHS[high] + rng.normal(0.0, 1.5, len(low))
        # longer replies from stronger models, so that length and verdicts correlate
        length = np.round(rng.lognormal(5.0 + 0.1 * STRENGTHS, 0.3))
        for judge in judges:
            if judge.both_orders:
                pair = np.concatenate([np.arange(len(low))] * 2)
                low_first = np.repeat([True, False], len(low))
            else:
                pair = np.arange(len(low))
                low_first = rng.random(len(low)) < 0.5
            first = np.where(low_first, low[pair], high[pair])
            second = np.where(low_first, high[pair], low[pair])
            shown_margin = np.where(low_first, margin[pair], -margin[pair])
            logit = judge.sharpness * shown_margin + judge.first_bonus
            first_wins = rng.random(len(pair)) < 1.0 / (1.0 + np.exp(-logit))
            tie = rng.random(len(pair)) < judge.tie_rate
            columns["scenario"].append(np.full(len(pair), s))
            columns["judge"].append(np.full(len(pair), judge.name))
            columns["first"].append(first)
            columns["second"].append(second)
            columns["verdict"].append(np.where(tie, 0, np.where(first_wins, 1, 2)))
            columns["first_length"].append(length[first])
            columns["second_length"].append(length[second])
    return Verdicts(**{name: np.concatenate(parts) for name, parts in columns.items()})


def renamed_and_shuffled(verdicts: Verdicts, seed: int) -> tuple[dict[str, str], np.ndarray]:
    """New names for every model and judge, in an order unrelated to the old one, and a
    shuffled row order."""
    rng = np.random.default_rng(seed)
    old = [f"model-{i}" for i in range(len(STRENGTHS))] + sorted(
        {str(j) for j in verdicts.judge} - {f"model-{i}" for i in range(len(STRENGTHS))}
    )
    new = [f"n{k:02d}" for k in rng.permutation(len(old))]
    return dict(zip(old, new, strict=True)), rng.permutation(len(verdicts.verdict))
