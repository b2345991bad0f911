"""Which models the verdicts cannot place: Ford's condition, pooled and per judge.

A Bradley-Terry strength has a finite maximum-likelihood estimate only when, for every
split of the models into two groups, some model of each group beat some model of the
other at least once (Ford 1957; Hunter 2004): the directed graph "j beat k" (a tie
counts both ways) must be strongly connected. Where it is not, a group won every
comparison it had with another, and the verdicts say "above" but never "by how much":
the fit's prior sets the gap (stats.btd.ScorePrior) and a bootstrap, whose every round
keeps the perfect record, cannot show the uncertainty.

So the gap is reported for what it is. Pooled over judges, a group that never lost to
a model outside it has no upper limit on its Elo, and one that never won has no lower
limit; the other end is bounded by an exact binomial limit on its record against the
models it met (`record_bound`), counting each scenario in which it beat them as one
trial (`scenarios_won`): the verdicts of one scenario share the same two replies and
are not independent. Per judge, the same check says which models a judge's
own verdicts cannot place: the low-rank fit places them through the other judges and
the prior, which the report says.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import connected_components

from eigenjury.stats.elo import ELO_SCALE
from eigenjury.stats.verdicts import (
    FIRST,
    SECOND,
    TIE,
    FloatArray,
    IntArray,
    ScenarioCounts,
    VerdictCounts,
    tally,
)


@dataclass(frozen=True)
class Separation:
    """`above` won every one of the `verdicts` (weight of decisive verdicts) it had
    against `below`, by `judge` (None: all judges pooled); `scenarios`: in how many
    distinct scenarios it beat them (pooled groups; None where not counted)."""

    judge: str | None
    above: tuple[str, ...]
    below: tuple[str, ...]
    verdicts: float
    scenarios: int | None = None

    def sentence(self) -> str:
        who = "the verdicts" if self.judge is None else f"judge '{self.judge}'s verdicts"
        where = "" if self.scenarios is None else f" (in {self.scenarios} scenarios)"
        return (
            f"{_names(self.above)} won all {self.verdicts:g} of {who}{where} against "
            f"{_names(self.below)}: above them, by an amount the verdicts cannot measure"
        )


@dataclass(frozen=True)
class PooledSeparation:
    """The pooled check over the evaluees: the groups found and, per evaluee, whether
    its Elo is unbounded above or below (a group that never lost, or never won, to the
    models outside it)."""

    groups: tuple[Separation, ...]
    unbounded_above: NDArray[np.bool_]
    unbounded_below: NDArray[np.bool_]


def win_graph(
    counts: VerdictCounts, judge: int | None = None, *, self_judged: bool = True
) -> FloatArray:
    """wins[j, k]: verdict weight in which j beat k (by `judge`, or by all); a tie counts
    half each way, so tied models always reach each other. Without `self_judged`, the
    verdicts in which the judge is one of the two are left out: where the fit gives
    each judge a preference for its own reply, they measure that preference, not the
    gap between the judge and the other reply."""
    counts = counts.without_style()  # style splits cells, never who beat whom
    m = counts.n_models
    keep = np.ones(counts.n_cells, dtype=bool) if judge is None else counts.judge == judge
    if not self_judged:
        keep &= counts.self_side == 0
    first, second, n = counts.first[keep], counts.second[keep], counts.n[keep]
    wins = tally(first * m + second, n[:, FIRST] + 0.5 * n[:, TIE], m * m)
    wins += tally(second * m + first, n[:, SECOND] + 0.5 * n[:, TIE], m * m)
    return wins.reshape(m, m)


def components(wins: FloatArray, members: IntArray) -> IntArray:
    """Strongly connected component of each of `members` in the win graph restricted
    to them (labels 0..k-1)."""
    sub = wins[np.ix_(members, members)]
    rows, cols = np.nonzero(sub > 0)
    graph = coo_matrix((np.ones(len(rows)), (rows, cols)), shape=sub.shape)
    _, label = connected_components(graph, directed=True, connection="strong")
    return np.asarray(label, dtype=np.int64)


def scenarios_won(
    data: ScenarioCounts,
    winners: NDArray[np.bool_],
    losers: NDArray[np.bool_],
    *,
    self_judged: bool = True,
) -> int:
    """The number of distinct scenarios in which a model of `winners` beat one of
    `losers` (masks over the models) in a decisive verdict; `self_judged` as in
    `win_graph`. Each is one trial of a perfect record: the verdicts of one scenario
    (the same two replies, several judges, both orders) are not independent."""
    cells = data.cells
    cell, verdict = data.entry_cell, data.entry_label
    first, second = cells.first[cell], cells.second[cell]
    won = ((verdict == FIRST) & winners[first] & losers[second]) | (
        (verdict == SECOND) & winners[second] & losers[first]
    )
    won &= data.entry_weight > 0
    if not self_judged:
        won &= cells.self_side[cell] == 0
    return int(np.unique(data.entry_scenario[won]).size)


def separations(
    wins: FloatArray,
    members: IntArray,
    names: tuple[str, ...],
    judge: str | None = None,
    data: ScenarioCounts | None = None,
    *,
    self_judged: bool = True,
) -> list[Separation]:
    """Per group (strongly connected component) that beat another without a loss, the
    groups it beat: one Separation each, strongest groups first (with `data`, each
    counts the scenarios in which it beat them, `scenarios_won`)."""
    label = components(wins, members)
    k = int(label.max()) + 1 if len(label) else 0
    if k <= 1:
        return []
    group_wins = np.zeros((k, k))
    sub = wins[np.ix_(members, members)]
    np.add.at(group_wins, (label[:, None], label[None, :]), sub)
    np.fill_diagonal(group_wins, 0.0)
    out = []
    for g in np.argsort(-(group_wins > 0).sum(axis=1), kind="stable"):
        beaten = np.flatnonzero(group_wins[g] > 0)
        if len(beaten):
            above, below = members[label == g], members[np.isin(label, beaten)]
            scenarios = None
            if data is not None:
                winners = np.zeros(len(names), dtype=bool)
                losers = np.zeros(len(names), dtype=bool)
                winners[above], losers[below] = True, True
                scenarios = scenarios_won(data, winners, losers, self_judged=self_judged)
            out.append(
                Separation(
                    judge,
                    tuple(names[i] for i in above),
                    tuple(names[i] for i in below),
                    float(group_wins[g, beaten].sum()),
                    scenarios,
                )
            )
    return out


def pooled_separation(
    counts: VerdictCounts,
    evaluees: IntArray,
    *,
    self_judged: bool = True,
    data: ScenarioCounts | None = None,
) -> PooledSeparation:
    """Ford's condition over the evaluees, all judges pooled.

    Elo is relative to every model's trust, so when one group's lead is unmeasurable,
    strictly so is everyone else's standing; what users need is where the unmeasured
    gaps are. The main body is the largest group (the most verdicts among equals); a
    group that beat it, directly or through others, without a loss is unbounded above,
    one it beat is unbounded below, one neither above nor below it, both ways. The main
    body's own Elo stays bounded, its gaps to the separated groups set by the prior.
    `self_judged`: as in `win_graph`; with `data` (the same verdicts by scenario), each
    group says in how many scenarios it won.
    """
    wins = win_graph(counts, self_judged=self_judged)
    label = components(wins, evaluees)
    k = int(label.max()) + 1
    above = np.zeros(len(evaluees), dtype=bool)
    below = np.zeros(len(evaluees), dtype=bool)
    if k > 1:
        sub = wins[np.ix_(evaluees, evaluees)]
        between = np.zeros((k, k))
        np.add.at(between, (label[:, None], label[None, :]), sub)
        beats = (between > 0) & ~np.eye(k, dtype=bool)
        size = np.bincount(label, minlength=k)
        weight = np.bincount(label, sub.sum(axis=1) + sub.sum(axis=0), minlength=k)
        main = int(np.lexsort((-weight, -size))[0])
        over_main = _reaches(beats, main)  # groups from which main can be reached
        under_main = _reaches(beats.T, main)  # groups main reaches
        group_above = over_main | ~(over_main | under_main)
        group_below = under_main | ~(over_main | under_main)
        group_above[main] = group_below[main] = False
        above, below = group_above[label], group_below[label]
    groups = separations(wins, evaluees, counts.models, data=data, self_judged=self_judged)
    return PooledSeparation(tuple(groups), above, below)


def _reaches(edges: NDArray[np.bool_], target: int) -> NDArray[np.bool_]:
    """Nodes with a path to `target` along `edges` (edges[a, b]: a -> b)."""
    found = np.zeros(len(edges), dtype=bool)
    found[target] = True
    while True:
        grown = found | (edges & found[None, :]).any(axis=1)
        if (grown == found).all():
            return found
        found = grown


def judge_separations(counts: VerdictCounts, *, self_judged: bool = True) -> list[Separation]:
    """Per judge, the groups of models its own verdicts cannot place against each other
    (`self_judged`: as in `win_graph`)."""
    out: list[Separation] = []
    for judge in np.flatnonzero(counts.judge_totals() > 0):
        wins = win_graph(counts, int(judge), self_judged=self_judged)
        seen = np.flatnonzero((wins + wins.T).sum(axis=1) > 0)
        out += separations(wins, seen, counts.models, counts.models[judge])
    return out


def record_bound(wins: int | float, level: float) -> float:
    """The least log-odds, in Elo, of beating the opponents met that a record of `wins`
    wins in `wins` independent trials allows at one-sided `level` (Clopper-Pearson:
    p >= (1 - level) ** (1 / wins)). The consensus counts a trial per scenario in which
    the record was won (`scenarios_won`), not per verdict: a scenario's verdicts are
    correlated, and counting them as independent made the bound far too high."""
    p = (1.0 - level) ** (1.0 / wins)
    return ELO_SCALE * math.log10(p / (1.0 - p))


def _names(names: tuple[str, ...], limit: int = 6) -> str:
    shown = ", ".join(f"'{n}'" for n in names[:limit])
    more = len(names) - limit
    return shown + (f" and {more} more" if more > 0 else "")
