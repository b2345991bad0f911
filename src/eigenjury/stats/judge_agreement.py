"""How well each judge agrees with a reference judge (or a reference panel), with
scenario-cluster bootstrap intervals: the table practitioners read to choose a judge.

Conventions:
- A comparison is one scenario and one unordered pair of evaluees. A verdict's outcome
  is said in identity terms (which evaluee won, or a tie), whatever order the pair was
  shown in. A tie is a third outcome, never half a win.
- The reference majority of a comparison is the outcome with the largest total weight
  among the reference judges' verdicts on it, both orders pooled. When two outcomes
  share the largest weight there is no majority, and the comparison is left out of
  agreement and kappa (and counted).
- A reference judge is compared with the majority of the other references (leave one
  out); a sole reference has no agreement row, only its own biases.
- A judge's row covers its verdicts on the comparisons the references judged (for a
  reference: all its verdicts), so every judge is measured on the reference's items.
- Kappa's chance agreement depends on tie rates only. "This evaluee won" names a
  different model on each comparison, so a marginal such as "the lower-coded evaluee
  won" measures how the models happen to be coded, not the judge (with names in
  strength order one side wins most comparisons and chance looks high). Each comparison
  is counted in both orientations with half weight: agreement is unchanged, each
  rater's marginal becomes (its tie rate t, (1 - t) / 2, (1 - t) / 2), and chance is
  t_judge t_reference + (1 - t_judge)(1 - t_reference) / 2. Kappa 0 is a judge that
  ties at its own rate and otherwise names the winner by a coin flip. Each rater keeps
  its own tie rate (Cohen's): pooling the two raters' marginals (Scott's pi,
  Krippendorff's alpha) would not remove the coding, which both share, and a judge's
  tie rate is one of the traits this table compares.
- So every number of the table is the same whatever the models are called and in
  whatever order the rows come: the other statistics compare outcomes within one
  comparison, and the resampling units are scenarios, coded in name order.

Every statistic is a ratio of sums over scenarios: each judge's per-scenario sums are
tallied once, and all bootstrap rounds follow from one matrix product with the
resampling counts. Rows are never looped over.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from eigenjury.stats.agreement import ClusterBootstrap, Estimate
from eigenjury.stats.verdicts import (
    FIRST,
    TIE,
    Codes,
    DataError,
    FloatArray,
    IntArray,
    VerdictTable,
    tally,
)

# In identity terms: tie, the lower-coded evaluee won, the other won. The codes are
# compared within a comparison only; no statistic counts a side across comparisons.
OUTCOMES = 3
# Resampling counts held in memory at once (rounds x scenarios, 128 MiB); more scenarios
# draw their rounds in chunks.
CHUNK_CELLS = 1 << 24
# Per judge and scenario, the sums every statistic is a ratio of.
SUMS = (
    "verdict_weight",  # all its verdicts in the row
    "majority_weight",  # verdicts on comparisons with a reference majority
    "agree_weight",  # ... equal to it
    "judge_tie",  # ... the judge's ties and the majority's (kappa's chance agreement)
    "majority_tie",
    "decisive_weight",  # ... where the verdict and the majority are both decisive
    "decisive_agree_weight",
    "flip_weight",  # pairs judged in both orders, weighted by how often they flip
    "pair_weight",
    "first_weight",  # decisive verdicts for the first slot
    "decisive_verdicts",
    "longer_weight",  # decisive verdicts for the longer reply, where the lengths differ
    "sized_verdicts",
)
_COLUMN = {name: i for i, name in enumerate(SUMS)}


@dataclass(frozen=True)
class AgreementRow:
    """One judge against the reference majority (NaN where a statistic is undefined)."""

    judge: str
    reference: bool
    comparisons: int  # comparisons in its row: those the references judged
    with_majority: int  # ... that have a reference majority (agreement and kappa)
    verdicts: float  # weight of its verdicts on those comparisons
    agreement: Estimate
    agreement_decisive: Estimate
    kappa: Estimate
    flip_pairs: float  # pairs it judged in both orders
    flip_share: Estimate
    order_kappa: Estimate  # order consistency beyond what its own label shares give
    tie_share: Estimate
    position_bias: Estimate
    longer_preference: Estimate
    # scenarios (resampling units) holding its pairs in both orders / its comparisons with
    # a majority: a measure over few of them has a bootstrap with few distinct draws
    pair_scenarios: int = 0
    majority_scenarios: int = 0

    def record(self) -> dict[str, Any]:
        return {
            "judge": self.judge,
            "reference": self.reference,
            "comparisons": self.comparisons,
            "with_majority": self.with_majority,
            "verdicts": round(self.verdicts, 6),
            "agreement": self.agreement.record(),
            "agreement_decisive": self.agreement_decisive.record(),
            "kappa": self.kappa.record(),
            "flip_pairs": round(self.flip_pairs, 6),
            "flip_share": self.flip_share.record(),
            "order_kappa": self.order_kappa.record(),
            "tie_share": self.tie_share.record(),
            "position_bias": self.position_bias.record(),
            "longer_preference": self.longer_preference.record(),
        }


@dataclass(frozen=True)
class JudgeAgreement:
    """Every judge's row, by agreement (best first, undefined last)."""

    references: tuple[str, ...]
    comparisons: int  # comparisons the references judged
    without_majority: int  # ... left out because outcomes tied for the largest weight
    bootstrap: int
    ci: float
    seed: int
    judges: tuple[AgreementRow, ...]

    def record(self) -> dict[str, Any]:
        return {
            "references": list(self.references),
            "comparisons": self.comparisons,
            "without_majority": self.without_majority,
            "settings": {"bootstrap": self.bootstrap, "ci": self.ci, "seed": self.seed},
            "judges": [row.record() for row in self.judges],
        }


def judge_agreement(
    table: VerdictTable,
    references: Sequence[str] | None,
    *,
    bootstrap: int = 1000,
    ci: float = 0.95,
    seed: int = 0,
    one_vote: bool = False,
) -> JudgeAgreement:
    """Agreement, kappa, flip share, position bias and length preference of every judge
    in `table`, against the majority of the `references` (judge names). None: every
    judge against the majority of the others, each judge's row over all its verdicts (a
    judge that shares no comparison with another gets its own statistics only).

    Raises DataError when a reference is not a judge of the table or shares no
    comparison with any other judge.
    """
    comparison, comparison_scenario = comparison_codes(table)
    n_comparisons = len(comparison_scenario)
    outcome = _outcomes(table)
    judges = np.unique(table.judge)
    every = references is None
    if references is None:
        reference_codes = _sharing(table.judge, comparison, n_comparisons)
    else:
        reference_codes = _reference_codes(table, judges, references, comparison)
    is_reference = np.isin(table.judge, reference_codes)
    votes = _one_vote_each(table.judge, comparison, table.weight) if one_vote else table.weight
    reference_counts = _outcome_counts(comparison, outcome, votes, is_reference, n_comparisons)
    judged = reference_counts.sum(axis=1) > 0
    majority = _majority(reference_counts)

    measured = np.ones(n_comparisons, dtype=bool) if every else judged
    comparison_unit, n_units = _units(comparison_scenario, measured, len(table.scenarios))
    order = np.argsort(table.judge, kind="stable")
    starts = np.searchsorted(table.judge[order], judges)
    ends = np.searchsorted(table.judge[order], judges, side="right")
    per_unit, counted = [], []
    for judge, start, end in zip(judges, starts, ends, strict=True):
        rows = order[start:end]
        if judge in reference_codes:
            others = is_reference & (table.judge != judge)
            own_majority = _majority(
                _outcome_counts(comparison, outcome, votes, others, n_comparisons)
            )
        else:
            rows = rows if every else rows[judged[comparison[rows]]]
            own_majority = majority
        sums, comparisons, with_majority = _judge_sums(
            table, rows, comparison, outcome, own_majority, comparison_unit, n_units
        )
        per_unit.append(sums)
        pair_units = int((sums[:, _COLUMN["pair_weight"]] > 0).sum())
        majority_units = int((sums[:, _COLUMN["majority_weight"]] > 0).sum())
        counted.append((comparisons, with_majority, pair_units, majority_units))
    totals, boot = _resampled_totals(np.hstack(per_unit), bootstrap, ci, seed)
    width = len(SUMS)
    rows_out = [
        _judge_row(
            table.models[judge],
            bool(judge in reference_codes),
            totals[:, i * width : (i + 1) * width],
            boot,
            *counted[i],
        )
        for i, judge in enumerate(judges)
    ]
    rows_out.sort(key=lambda r: -r.agreement.value if np.isfinite(r.agreement.value) else np.inf)
    return JudgeAgreement(
        references=tuple(table.models[c] for c in reference_codes),
        comparisons=int(judged.sum()),
        without_majority=int((judged & (majority < 0)).sum()),
        bootstrap=bootstrap,
        ci=ci,
        seed=seed,
        judges=tuple(rows_out),
    )


def comparison_codes(table: VerdictTable) -> tuple[IntArray, IntArray]:
    """Each row's comparison (scenario, unordered pair) number, and each comparison's
    scenario."""
    low = np.minimum(table.first, table.second)
    high = np.maximum(table.first, table.second)
    order = np.lexsort((high, low, table.scenario))
    keys = np.stack([table.scenario[order], low[order], high[order]])
    starts = np.ones(len(order), dtype=bool)
    starts[1:] = (keys[:, 1:] != keys[:, :-1]).any(axis=0)
    comparison = np.empty(len(order), dtype=np.int64)
    comparison[order] = np.cumsum(starts) - 1
    return comparison, keys[0, starts]


def _one_vote_each(judge: Codes, comparison: IntArray, weight: FloatArray) -> FloatArray:
    """Row weights rescaled so that each judge's rows on a comparison sum to 1."""
    key = comparison * (int(judge.max()) + 1) + judge
    _, where = np.unique(key, return_inverse=True)
    total = np.bincount(where, weights=weight)
    return np.asarray(weight / np.where(total[where] > 0, total[where], 1.0))


def _sharing(judge: Codes, comparison: IntArray, n_comparisons: int) -> IntArray:
    """The judges that share a comparison with another judge."""
    pairs = np.unique(np.stack([comparison, judge]), axis=1)  # (comparison, judge) once
    shared = np.bincount(pairs[0], minlength=n_comparisons) > 1
    return np.unique(pairs[1][shared[pairs[0]]])


def _units(
    comparison_scenario: IntArray, judged: NDArray[np.bool_], n_scenarios: int
) -> tuple[IntArray, int]:
    """The resampling units, the scenarios of the comparisons the references judged:
    each comparison's unit (-1 for the others) and their number."""
    scenario_unit = np.full(n_scenarios, -1, dtype=np.int64)
    unit_scenarios = np.unique(comparison_scenario[judged])
    scenario_unit[unit_scenarios] = np.arange(len(unit_scenarios))
    return scenario_unit[comparison_scenario], len(unit_scenarios)


def _outcomes(table: VerdictTable) -> IntArray:
    """0 tie, 1 the lower-coded evaluee won, 2 the higher-coded one won."""
    low_shown_first = table.first < table.second
    low_won = (table.verdict == FIRST) == low_shown_first
    return np.where(table.verdict == TIE, 0, np.where(low_won, 1, 2)).astype(np.int64)


def _reference_codes(
    table: VerdictTable, judges: Codes, references: Sequence[str], comparison: IntArray
) -> IntArray:
    """The codes of the named reference judges, each checked to be a judge that shares a
    comparison with another judge (else there is nothing to agree with)."""
    names = list(dict.fromkeys(r.strip() for r in references if r.strip()))
    if not names:
        raise DataError("no reference judge given")
    present = {table.models[j]: int(j) for j in judges}
    unknown = [n for n in names if n not in present]
    if unknown:
        shown = sorted(present)
        listed = ", ".join(shown[:20]) + (f" and {len(shown) - 20} more" if len(shown) > 20 else "")
        raise DataError(f"no judge named {unknown[0]!r} in the verdicts; the judges are {listed}")
    codes = np.array([present[n] for n in names], dtype=np.int64)
    for name, code in zip(names, codes, strict=True):
        own = table.judge == code
        theirs = np.zeros(int(comparison.max()) + 1, dtype=bool)
        theirs[comparison[own]] = True
        if not (theirs[comparison] & ~own).any():
            raise DataError(
                f"the reference judge {name!r} shares no comparison with any other judge "
                "(agreement needs verdicts by other judges on the same pair in the same scenario)"
            )
    return codes


def _outcome_counts(
    comparison: IntArray,
    outcome: IntArray,
    weight: FloatArray,
    rows: NDArray[np.bool_],
    n_comparisons: int,
) -> FloatArray:
    """Weight of each outcome per comparison, over the rows selected."""
    index = comparison[rows] * OUTCOMES + outcome[rows]
    return tally(index, weight[rows], OUTCOMES * n_comparisons).reshape(-1, OUTCOMES)


def _majority(counts: FloatArray) -> IntArray:
    """The outcome with the largest weight per comparison; -1 where none was given or two
    outcomes share the largest weight (up to rounding: criterion weights are fractions)."""
    top = counts.max(axis=1)
    shared = np.isclose(counts, top[:, None], rtol=1e-9, atol=0.0).sum(axis=1) > 1
    return np.where((top > 0) & ~shared, counts.argmax(axis=1), -1).astype(np.int64)


def _judge_sums(
    table: VerdictTable,
    rows: IntArray,
    comparison: IntArray,
    outcome: IntArray,
    majority: IntArray,
    comparison_unit: IntArray,
    n_units: int,
) -> tuple[FloatArray, int, int]:
    """A judge's sums (SUMS) per resampling unit over its `rows`; the number of their
    comparisons and of those with a majority."""
    local, row_local = np.unique(comparison[rows], return_inverse=True)
    unit = comparison_unit[comparison[rows]]
    weight = table.weight[rows]
    verdict = table.verdict[rows]
    judge_says = outcome[rows]
    reference_says = majority[comparison[rows]]
    counted = reference_says >= 0
    agree = counted & (judge_says == reference_says)
    decisive = counted & (judge_says != 0) & (reference_says != 0)
    sums: dict[str, NDArray[np.bool_]] = {
        "verdict_weight": np.ones(len(rows), dtype=bool),
        "majority_weight": counted,
        "agree_weight": agree,
        "decisive_weight": decisive,
        "decisive_agree_weight": decisive & agree,
        "first_weight": verdict == FIRST,
        "decisive_verdicts": verdict != TIE,
        "judge_tie": counted & (judge_says == 0),
        "majority_tie": reference_says == 0,
    }
    lengths = None if table.features is None else table.features.get("length")
    if lengths is None:
        sums["longer_weight"] = sums["sized_verdicts"] = np.zeros(len(rows), dtype=bool)
    else:
        first_len, second_len = lengths[0][rows], lengths[1][rows]
        sized = (verdict != TIE) & np.isfinite(first_len) & np.isfinite(second_len)
        sized &= first_len != second_len
        sums["sized_verdicts"] = sized
        sums["longer_weight"] = sized & ((verdict == FIRST) == (first_len > second_len))
    out = np.empty((n_units, len(SUMS)))
    for name, selected in sums.items():
        out[:, _COLUMN[name]] = tally(unit, weight * selected, n_units)
    flips, pairs = _order_flips(table, rows, row_local, judge_says, len(local))
    local_unit = comparison_unit[local]
    out[:, _COLUMN["flip_weight"]] = tally(local_unit, flips, n_units)
    out[:, _COLUMN["pair_weight"]] = tally(local_unit, pairs, n_units)
    return out, len(local), int((majority[local] >= 0).sum())


def _order_flips(
    table: VerdictTable, rows: IntArray, row_local: IntArray, judge_says: IntArray, n_local: int
) -> tuple[FloatArray, FloatArray]:
    """Per comparison of one judge: how many pairs it judged in both orders (the smaller
    of the two orders' weights), and that times the chance that a verdict in one order
    and one in the other name different outcomes (0 or 1 when each order was judged
    once)."""
    low_first = table.first[rows] < table.second[rows]
    weight = table.weight[rows]
    index = row_local * OUTCOMES + judge_says
    size = OUTCOMES * n_local
    one = tally(index, weight * low_first, size).reshape(-1, OUTCOMES)
    other = tally(index, weight * ~low_first, size).reshape(-1, OUTCOMES)
    one_total, other_total = one.sum(axis=1), other.sum(axis=1)
    pairs = np.minimum(one_total, other_total)
    both = pairs > 0
    same = np.zeros(n_local)
    same[both] = (one[both] * other[both]).sum(axis=1) / (one_total[both] * other_total[both])
    return pairs * (1.0 - same), pairs


def _resampled_totals(
    per_unit: FloatArray, bootstrap: int, ci: float, seed: int
) -> tuple[FloatArray, ClusterBootstrap]:
    """Column totals of `per_unit` (units x sums): row 0 on the data, then one row per
    scenario-bootstrap round; and a bootstrap whose interval rule turns a column of them
    into an Estimate. Rounds are drawn in chunks so that the resampling counts stay
    within CHUNK_CELLS."""
    n_units = per_unit.shape[0]
    per_chunk = max(1, CHUNK_CELLS // max(n_units, 1))
    sizes = [min(per_chunk, bootstrap - s) for s in range(0, bootstrap, per_chunk)] or [0]
    seeds = np.random.SeedSequence(seed).spawn(len(sizes))
    totals = [per_unit.sum(axis=0, keepdims=True)]
    for size, child in zip(sizes, seeds, strict=True):
        boot = ClusterBootstrap(n_units, size, ci, seed=int(child.generate_state(1)[0]))
        totals.append(boot.weights[1:] @ per_unit)
    return np.vstack(totals), boot


def _ratio(top: FloatArray, bottom: FloatArray) -> FloatArray:
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(bottom > 0, top / np.where(bottom > 0, bottom, 1.0), np.nan)


def _kappa(totals: FloatArray) -> FloatArray:
    """Cohen's kappa over the three outcomes between the judge and the majority, each
    comparison counted in both orientations (module docstring): chance agreement is
    that of the tie rates plus half that of the decisive rates."""
    col = _COLUMN
    n = totals[:, col["majority_weight"]]
    judge_tie, reference_tie = totals[:, col["judge_tie"]], totals[:, col["majority_tie"]]
    observed = _ratio(totals[:, col["agree_weight"]], n)
    chance = _ratio(judge_tie * reference_tie + (n - judge_tie) * (n - reference_tie) / 2, n * n)
    beyond = 1.0 - chance
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(
            beyond > 1e-12, (observed - chance) / np.where(beyond > 1e-12, beyond, 1), np.nan
        )


def _order_kappa(totals: FloatArray) -> FloatArray:
    """How much more often than chance the judge names the same outcome when a pair is
    shown in both orders: 1 - flips / chance flips, where chance is a judge that labels
    first, second and tie at its own rates whatever the replies (f, s, t), so the two
    orders agree with probability 2 f s + t^2. 0 is a content-blind judge (a coin flip,
    or one that always picks a slot), 1 one that never flips; undefined for a judge
    whose labels could not flip by chance (always the same label)."""
    col = _COLUMN
    verdicts = totals[:, col["verdict_weight"]]
    first = _ratio(totals[:, col["first_weight"]], verdicts)
    tie = 1.0 - _ratio(totals[:, col["decisive_verdicts"]], verdicts)
    chance = 1.0 - 2.0 * first * (1.0 - first - tie) - tie**2
    flips = _ratio(totals[:, col["flip_weight"]], totals[:, col["pair_weight"]])
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(chance > 1e-9, 1.0 - flips / np.where(chance > 1e-9, chance, 1.0), np.nan)


def _judge_row(
    name: str,
    reference: bool,
    totals: FloatArray,
    boot: ClusterBootstrap,
    comparisons: int,
    with_majority: int,
    pair_scenarios: int,
    majority_scenarios: int,
) -> AgreementRow:
    col = _COLUMN

    def share(top: str, bottom: str) -> Estimate:
        return boot.estimate(_ratio(totals[:, col[top]], totals[:, col[bottom]]))

    return AgreementRow(
        judge=name,
        reference=reference,
        comparisons=comparisons,
        with_majority=with_majority,
        pair_scenarios=pair_scenarios,
        majority_scenarios=majority_scenarios,
        verdicts=float(totals[0, col["verdict_weight"]]),
        agreement=share("agree_weight", "majority_weight"),
        agreement_decisive=share("decisive_agree_weight", "decisive_weight"),
        kappa=boot.estimate(_kappa(totals)),
        flip_pairs=float(totals[0, col["pair_weight"]]),
        flip_share=share("flip_weight", "pair_weight"),
        order_kappa=boot.estimate(_order_kappa(totals)),
        tie_share=boot.estimate(
            1.0 - _ratio(totals[:, col["decisive_verdicts"]], totals[:, col["verdict_weight"]])
        ),
        position_bias=share("first_weight", "decisive_verdicts"),
        longer_preference=share("longer_weight", "sized_verdicts"),
    )
