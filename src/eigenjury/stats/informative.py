"""Whether each judge's verdicts carry information about the replies (issue 32).

A ranking is only as good as its judges, and a judge can look busy while saying
nothing: a coin flip, one that always picks the first reply, one that always ties, one
that reliably picks the worse reply. Two measures, from stats.judge_agreement with
every judge measured against the others:

- order consistency beyond chance (``order_kappa``): a pair shown in both orders in one
  scenario holds the same two replies, so a judge that reads them names the same
  outcome both times, whatever the models' strengths; a content-blind judge with fixed
  label rates agrees with itself only as often as they allow (2 f s + t^2). It needs
  pairs shown both ways.
- agreement with the others (``kappa``): Cohen's kappa against the majority of the
  other judges on the same comparisons (leave one out; each judge one vote a
  comparison, so repeating verdicts outvotes no one). It needs shared comparisons, and
  it is what tells a contrarian (consistent, against everyone) from a good judge.

A measure counts only over at least MIN_SCENARIOS scenarios (the resampling units: a
bootstrap over two scenarios has an interval of almost no width). Its interval for the
verdict is normal, from the spread of 2,000 scenario-bootstrap rounds, at a Bonferroni
level over the two measures of every judge, so that the statements hold together.

The verdict, by the first rule that applies:

1. uninformative, "contrary": kappa with the others wholly below 0 (its verdicts point
   the wrong way);
2. informative or weak: some measure's interval lies wholly above 0 (a signal shown):
   informative when that measure's value reaches SIGNAL, else weak. A judge with a
   strong slot preference that still reads the replies lands here, not below;
3. uninformative, "same label": ties in at least SAME_LABEL of its verdicts;
4. uninformative, "position": at least LOCKED_SLOT of its decisive verdicts for one slot;
5. unmeasured: neither measure has its scenarios;
6. uninformative, "slight": every interval ends below SIGNAL (at most a slight signal:
   its verdicts say little, though not nothing, about the replies);
7. undetermined: too few scenarios to tell it from chance.

The majority the others' kappa is taken against leaves out judges that answer by label
alone (rules 3 and 4 without a signal shown on order): two judges that always pick A
would otherwise make the slot the "consensus", and a coin flip look contrary to it.
SIGNAL is 0.2, the upper end of "slight" on the usual reading of kappa (Landis and
Koch 1977). The baseline assumes fixed label rates: a content-blind judge whose tie
rate changes from scenario to scenario agrees with itself more than it allows.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Literal

import numpy as np
from numpy.typing import NDArray
from scipy.special import ndtri

from eigenjury.stats.agreement import Estimate
from eigenjury.stats.judge_agreement import AgreementRow, comparison_codes, judge_agreement
from eigenjury.stats.verdicts import FIRST, TIE, VerdictTable, tally

SAME_LABEL = 0.95
LOCKED_SLOT = 0.9
SIGNAL = 0.2
SIGNAL_ROUNDS = 2000
MIN_SCENARIOS = 10
NORMAL_95 = 1.959963984540054  # the normal quantile of a 95% two-sided interval

Verdict = Literal["informative", "weak", "uninformative", "undetermined", "unmeasured"]
Reason = Literal["same label", "position", "contrary", "slight"]


@dataclass(frozen=True)
class JudgeSignal:
    """One judge's verdict on its own verdicts, the measures behind it, and why in words
    (``why``: a clause that follows the judge's name)."""

    judge: str
    verdict: Verdict
    reason: Reason | None
    why: str
    order_kappa: Estimate
    kappa: Estimate
    pairs: float  # pairs it judged in both orders
    shared: int  # comparisons it shares with another judge's majority
    tie_share: float
    first_share: float  # of its decisive verdicts


def _defined(e: Estimate) -> bool:
    return bool(np.isfinite(e.value) and np.isfinite(e.low) and np.isfinite(e.high))


def _said(name: str, e: Estimate) -> str:
    return f"{name} {e.value:.2f} [{e.low:.2f}, {e.high:.2f}]"


def _widened(e: Estimate, z: float) -> Estimate:
    """A 95% percentile interval made a normal one at `z` (its spread read from the
    95% width: the far tails of 2,000 rounds rest on a draw or two)."""
    spread = (e.high - e.low) / (2.0 * NORMAL_95)
    return Estimate(e.value, e.value - z * spread, e.value + z * spread)


def _label_only(row: AgreementRow) -> bool:
    """Rules 3 and 4: labels one-sided enough that they may not depend on the replies."""
    tie, first = row.tie_share.value, row.position_bias.value
    return bool(
        (np.isfinite(tie) and tie >= SAME_LABEL)
        or (np.isfinite(first) and max(first, 1.0 - first) >= LOCKED_SLOT)
    )


def classify(row: AgreementRow, z: float = NORMAL_95) -> JudgeSignal:
    """The verdict on one judge's row (the module docstring's rules, in order), with
    its measures' intervals at `z` (normal quantile)."""
    tie, first = row.tie_share.value, row.position_bias.value
    order, kappa = _widened(row.order_kappa, z), _widened(row.kappa, z)
    measures = {
        "order consistency beyond chance": (order, row.pair_scenarios),
        "kappa with the other judges": (kappa, row.majority_scenarios),
    }
    defined = {
        name: e
        for name, (e, scenarios) in measures.items()
        if _defined(e) and scenarios >= MIN_SCENARIOS
    }

    def signal(verdict: Verdict, reason: Reason | None, why: str) -> JudgeSignal:
        return JudgeSignal(
            judge=row.judge,
            verdict=verdict,
            reason=reason,
            why=why,
            order_kappa=order,
            kappa=kappa,
            pairs=row.flip_pairs,
            shared=row.with_majority,
            tie_share=float(tie),
            first_share=float(first),
        )

    against = defined.get("kappa with the other judges")
    if against is not None and against.high < 0.0:
        return signal(
            "uninformative",
            "contrary",
            f"disagreed with the other judges more than chance would ({_said('kappa', against)})",
        )
    shown = {name: e for name, e in defined.items() if e.low > 0.0}
    if shown:
        name, best = max(shown.items(), key=lambda item: item[1].value)
        verdict: Verdict = "informative" if best.value >= SIGNAL else "weak"
        return signal(verdict, None, f"shows {_said(name, best)}")
    if np.isfinite(tie) and tie >= SAME_LABEL:
        return signal("uninformative", "same label", f"called {tie:.0%} of its comparisons a tie")
    if _label_only(row):
        slot, share = ("A", first) if first >= 0.5 else ("B", 1.0 - first)
        return signal(
            "uninformative",
            "position",
            f"picked reply {slot} in {share:.0%} of its decisive verdicts, with no sign of "
            "reading the replies",
        )
    if not defined:
        return signal(
            "unmeasured",
            None,
            f"judged pairs in both orders in {row.pair_scenarios} scenarios and shared "
            f"comparisons with the other judges in {row.majority_scenarios} (at least "
            f"{MIN_SCENARIOS} of either are needed), so nothing measures whether it read "
            "the replies",
        )
    said = " and ".join(_said(name, e) for name, e in defined.items())
    if all(e.high < SIGNAL for e in defined.values()):
        return signal("uninformative", "slight", f"showed at most a slight signal ({said})")
    return signal("undetermined", None, f"cannot be told from chance on so few scenarios ({said})")


def judge_signals(
    table: VerdictTable, *, ci: float = 0.95, rounds: int = SIGNAL_ROUNDS, seed: int = 0
) -> tuple[JudgeSignal, ...]:
    """Every judge of `table` (rows or scenario cells: the scenarios must be kept),
    each against the others, in the table's judge order; the verdicts' intervals at
    1 - (1 - ci) / (2 x judges), two-sided (module docstring).

    Only the scenarios that can feed a measure (a pair judged in both orders by one
    judge, or a comparison judged by two) are resampled, and order consistency's label
    rates are read there; tie and slot shares are over every verdict. So arena data, one
    vote a battle, costs one pass rather than a bootstrap over a million scenarios."""
    judges = len(np.unique(table.judge))
    z = float(ndtri(1.0 - (1.0 - ci) / (4.0 * max(judges, 1))))
    feeding = _feeding_rows(table)
    measured: VerdictTable | None = table
    if feeding.all():
        every = judge_agreement(table, None, bootstrap=rounds, seed=seed, one_vote=True)
        rows = {row.judge: row for row in every.judges}
    else:
        rows = _unmeasured_rows(table)
        measured = table.select(feeding)
        if len(np.unique(measured.scenario)) < MIN_SCENARIOS:
            measured = None
        else:
            every = judge_agreement(measured, None, bootstrap=rounds, seed=seed, one_vote=True)
            for row in every.judges:
                shares = rows[row.judge]
                rows[row.judge] = replace(
                    row, tie_share=shares.tie_share, position_bias=shares.position_bias
                )
    blind = {
        name
        for name, row in rows.items()
        if _label_only(row) and not _widened(row.order_kappa, z).low > 0.0
    }
    kappa = {}
    if measured is not None:
        voters = [name for name in every.references if name not in blind]
        if voters:
            against = judge_agreement(measured, voters, bootstrap=rounds, seed=seed, one_vote=True)
            kappa = {row.judge: row for row in against.judges}
    undefined = Estimate(float("nan"), float("nan"), float("nan"))
    return tuple(
        classify(
            replace(
                rows[name],
                kappa=kappa[name].kappa if name in kappa else undefined,
                with_majority=kappa[name].with_majority if name in kappa else 0,
                majority_scenarios=kappa[name].majority_scenarios if name in kappa else 0,
            ),
            z,
        )
        for name in table.models
        if name in rows
    )


def _feeding_rows(table: VerdictTable) -> NDArray[np.bool_]:
    """Rows of the scenarios holding a pair one judge saw in both orders or a comparison
    two judges judged: the only scenarios either measure reads."""
    crowded = np.bincount(table.scenario, minlength=len(table.scenarios))[table.scenario] > 1
    feeding = np.zeros(len(table), dtype=bool)
    if not crowded.any():
        return feeding
    within = table if crowded.all() else table.select(crowded)
    comparison, comparison_scenario = comparison_codes(within)
    judges = int(within.judge.max()) + 1
    seen, where = np.unique(comparison * judges + within.judge, return_inverse=True)
    orders = np.zeros((len(seen), 2), dtype=bool)
    orders[where, (within.first < within.second).astype(np.int64)] = True
    of_comparison = seen // judges
    feeds = np.bincount(of_comparison, minlength=len(comparison_scenario)) > 1
    feeds[of_comparison[orders.all(axis=1)]] = True
    scenario_feeds = np.zeros(len(table.scenarios), dtype=bool)
    scenario_feeds[comparison_scenario[feeds]] = True
    feeding[crowded] = scenario_feeds[within.scenario]
    return feeding


def _unmeasured_rows(table: VerdictTable) -> dict[str, AgreementRow]:
    """Every judge's row with its tie and slot shares over all its verdicts and nothing
    measured: what a judge seen in no scenario that feeds a measure has."""
    judges = len(table.models)
    weight = tally(table.judge, table.weight, judges)
    decisive = tally(table.judge, table.weight * (table.verdict != TIE), judges)
    first = tally(table.judge, table.weight * (table.verdict == FIRST), judges)
    nothing = Estimate(float("nan"), float("nan"), float("nan"))

    def share(top: float, bottom: float) -> Estimate:
        return Estimate(top / bottom if bottom > 0 else float("nan"), float("nan"), float("nan"))

    return {
        table.models[j]: AgreementRow(
            judge=table.models[j],
            reference=False,
            comparisons=0,
            with_majority=0,
            verdicts=float(weight[j]),
            agreement=nothing,
            agreement_decisive=nothing,
            kappa=nothing,
            flip_pairs=0.0,
            flip_share=nothing,
            order_kappa=nothing,
            tie_share=share(weight[j] - decisive[j], weight[j]),
            position_bias=share(first[j], decisive[j]),
            longer_preference=nothing,
        )
        for j in np.unique(table.judge)
    }
