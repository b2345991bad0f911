"""Whether each judge's verdicts carry information about the replies (issue 32).

A ranking is only as good as its judges, and a judge can look busy while saying
nothing: a coin flip, one that always picks the first reply, one that always ties, one
that reliably picks the worse reply. Two measures, each with a scenario-bootstrap
interval, from stats.judge_agreement with every judge measured against the others:

Their intervals hold for all judges at once (Bonferroni; `judge_signals`).

- order consistency beyond chance (``order_kappa``): a pair shown in both orders in one
  scenario holds the same two replies, so a judge that reads them names the same
  outcome both times, whatever the models' strengths; a content-blind judge agrees with
  itself only as often as its label shares allow (2 f s + t^2). It needs pairs shown
  both ways.
- agreement with the others (``kappa``): Cohen's kappa against the majority of the
  other judges on the same comparisons (leave one out). It needs shared comparisons,
  and it is what tells a contrarian (consistent, against everyone) from a good judge.

The verdict, by the first rule that applies:

1. uninformative, "same label": ties in at least SAME_LABEL of its verdicts;
2. uninformative, "position": at least LOCKED_SLOT of its decisive verdicts for one slot;
3. uninformative, "contrary": kappa with the others wholly below 0 (the others: the
   judges that rules 1 and 2 leave, whose labels depend on the replies);
4. unmeasured: neither measure is defined (fewer than MIN_ITEMS pairs both ways and
   comparisons shared with the others);
5. informative or weak: some measure's interval lies wholly above 0 (signal shown):
   informative when that measure's value reaches SIGNAL, else weak;
6. uninformative, "chance": no interval above 0, and each reaches below SIGNAL at
   most (the data rule out all but a slight signal);
7. undetermined: no interval above 0, but too wide to rule a signal out.

SIGNAL is 0.2, the upper end of "slight" on the usual reading of kappa (Landis and
Koch 1977).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Literal

import numpy as np

from eigenjury.stats.agreement import Estimate
from eigenjury.stats.judge_agreement import AgreementRow, judge_agreement
from eigenjury.stats.verdicts import VerdictTable

SAME_LABEL = 0.95
LOCKED_SLOT = 0.9
SIGNAL = 0.2
SIGNAL_ROUNDS = 2000
# A measure on fewer pairs (or shared comparisons) than this is not taken: its bootstrap
# has too few distinct draws (one scenario's pairs give an interval of no width)
MIN_ITEMS = 10

Verdict = Literal["informative", "weak", "uninformative", "undetermined", "unmeasured"]
Reason = Literal["same label", "position", "contrary", "chance"]


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


def classify(row: AgreementRow) -> JudgeSignal:
    """The verdict on one judge's row (the module docstring's rules, in order)."""
    order, kappa = row.order_kappa, row.kappa
    tie, first = row.tie_share.value, row.position_bias.value
    measures = {
        "order consistency beyond chance": (order, row.flip_pairs),
        "kappa with the other judges": (kappa, row.with_majority),
    }
    defined = {
        name: e for name, (e, items) in measures.items() if _defined(e) and items >= MIN_ITEMS
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

    if np.isfinite(tie) and tie >= SAME_LABEL:
        return signal("uninformative", "same label", f"called {tie:.0%} of its comparisons a tie")
    if _label_only(row):
        slot, share = ("A", first) if first >= 0.5 else ("B", 1.0 - first)
        return signal(
            "uninformative",
            "position",
            f"picked reply {slot}, whichever reply was shown there, in {share:.0%} of its "
            "decisive verdicts",
        )
    if "kappa with the other judges" in defined and kappa.high < 0.0:
        return signal(
            "uninformative",
            "contrary",
            f"disagreed with the other judges more than chance would ({_said('kappa', kappa)})",
        )
    if not defined:
        return signal(
            "unmeasured",
            None,
            f"judged {row.flip_pairs:g} pairs in both orders and shared "
            f"{row.with_majority} comparisons with the other judges (at least {MIN_ITEMS} "
            "of either are needed), so nothing measures whether it read the replies",
        )
    shown = {name: e for name, e in defined.items() if e.low > 0.0}
    if shown:
        name, best = max(shown.items(), key=lambda item: item[1].value)
        verdict: Verdict = "informative" if best.value >= SIGNAL else "weak"
        return signal(verdict, None, f"shows {_said(name, best)}")
    said = " and ".join(_said(name, e) for name, e in defined.items())
    if all(e.high < SIGNAL for e in defined.values()):
        return signal("uninformative", "chance", f"did no better than chance ({said})")
    return signal("undetermined", None, f"cannot be told from chance on so few verdicts ({said})")


def judge_signals(
    table: VerdictTable, *, ci: float = 0.95, rounds: int = SIGNAL_ROUNDS, seed: int = 0
) -> tuple[JudgeSignal, ...]:
    """Every judge of `table` (rows or scenario cells: the scenarios must be kept),
    each against the others, in the table's judge order.

    One statement is made per judge, so the intervals behind them hold together:
    Bonferroni over the judges, each at 1 - (1 - ci) / judges (a population of ten
    honest judges would otherwise see one called contrary or at chance about one time
    in four). They cost a matrix product per round, so `rounds` is far more than a
    fit's bootstrap: the tails they reach are thin.

    A judge that answers by label alone (rules 1 and 2) says nothing about the replies,
    so it has no vote in the majority the others' kappa is taken against: with two
    judges that always pick A, the "majority" would be the slot, and a coin flip would
    look contrary to it."""
    judges = len(np.unique(table.judge))
    level = 1.0 - (1.0 - ci) / max(judges, 1)
    every = judge_agreement(table, None, bootstrap=rounds, ci=level, seed=seed)
    rows = {row.judge: row for row in every.judges}
    blind = {name for name, row in rows.items() if _label_only(row)}
    voters = [name for name in every.references if name not in blind]
    kappa = {}
    if voters:
        against = judge_agreement(table, voters, bootstrap=rounds, ci=level, seed=seed)
        kappa = {row.judge: row for row in against.judges}
    undefined = Estimate(float("nan"), float("nan"), float("nan"))
    return tuple(
        classify(
            replace(
                rows[name],
                kappa=kappa[name].kappa if name in kappa else undefined,
                with_majority=kappa[name].with_majority if name in kappa else 0,
            )
        )
        for name in table.models
        if name in rows
    )


def _label_only(row: AgreementRow) -> bool:
    """Rules 1 and 2: a judge whose labels do not depend on the replies."""
    tie, first = row.tie_share.value, row.position_bias.value
    return bool(
        (np.isfinite(tie) and tie >= SAME_LABEL)
        or (np.isfinite(first) and max(first, 1.0 - first) >= LOCKED_SLOT)
    )
