"""What a ranking means, in two or three plain sentences: said last by the terminal
summary and the static report, and first by the viewer."""

from __future__ import annotations

import math

from eigenjury.peer.record import JudgeRow, RankingRecord
from eigenjury.reports.ranking.words import STYLE_ASSUMPTION, is_styled, plural

# What a ranking means, in plain sentences, for both renderers. A judge is
# position-locked when its fitted first-slot log-odds reach LOCKED_BIAS (it then picks
# one slot e^3, about 20, times as often as the other between replies it rates equal), or
# when the same slot won both orders in at least LOCKED_SAME_SLOT of the pairs it saw
# both ways, over at least LOCKED_PAIRS pairs.
LOCKED_BIAS = 3.0
LOCKED_SAME_SLOT = 0.9
LOCKED_PAIRS = 5
LISTED = 6  # names (or pairs) a sentence lists before "and N more"


def _joined(items: list[str]) -> str:
    """Items in prose: "a", "a and b", "a, b and c"."""
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def _listed(items: list[str]) -> str:
    """Joined, past LISTED items cut short: "a, ..., f and 3 more"."""
    if len(items) > LISTED:
        return _joined([*items[:LISTED], f"{len(items) - LISTED} more"])
    return _joined(items)


def _count(value: float) -> str:
    """A verdict count: whole, or to one decimal when fractional (soft verdicts)."""
    return f"{value:,.0f}" if value == round(value) else f"{value:,.1f}"


def _verdicts(record: RankingRecord) -> str:
    """How many verdicts, what likelihood verdicts are, and where probabilities stood in
    for verdicts. (Likelihood runs recorded before issue 26 gave probabilities: their
    soft counts are recorded, and they keep the sentence they had.)"""
    run = record.run
    if run is None:
        return f"{_count(record.fit.verdicts)} verdicts"
    given = f"{_count(run.verdicts)} verdicts"
    by_judge = run.soft_verdicts_by_judge
    if run.judging.mode == "likelihood" and by_judge is None:
        return (
            f"{given}, each for the reply that the judge model finds likelier, per token, "
            "from a speaker who follows the constitution than from one who breaks it (a "
            "score, not a probability)"
        )
    if run.judging.mode == "likelihood":
        source = (
            "how much likelier each judge model finds each reply from a speaker who "
            "follows the constitution than from one who breaks it"
        )
    elif run.judging.soft:
        source = "the judges' confidence in A, B or tie"
    else:
        return given
    soft = run.verdicts if by_judge is None else sum(by_judge.values())
    share = "" if soft >= run.verdicts else f", {_count(soft)} of them"
    return f"{given}{share} as probabilities from {source}"


def _what_was_ranked(record: RankingRecord) -> str:
    """Sentence 1: what was ranked, against what, by whom, on how many verdicts."""
    run = record.run
    ranked = [m.name for m in record.models]
    peers = [j.name for j in record.judges if not j.external]
    external = [j.name for j in record.judges if j.external]
    if run is not None:
        subject = (
            f"{plural(len(ranked), 'member')} ({_listed(ranked)}) were ranked against the "
            f'constitution "{run.constitution.title}" on {plural(run.scenarios, "scenario")}'
        )
    else:
        scenarios = plural(record.fit.scenarios, "scenario")
        subject = f"{plural(len(ranked), 'model')} were ranked on {scenarios}"
    panel = []
    if set(peers) == set(ranked):
        panel.append(f"all {len(peers)} of them as judges")
    elif peers:
        panel.append(f"{len(peers)} of them as judges ({_listed(peers)})")
    if external:
        panel.append(f"{plural(len(external), 'external judge')} ({_listed(external)})")
    return f"{subject}, by {' and '.join(panel)}, giving {_verdicts(record)}."


def _what_intervals_allow(record: RankingRecord) -> str:
    """Sentence 2: the pairs the family-wise intervals tell apart, by the model above."""
    noun = "member" if record.run is not None else "model"
    settings = record.settings
    if settings.pairwise_intervals is None:
        why = "bootstrap: 0" if settings.bootstrap == 0 else "made before eigenjury computed them"
        return (
            f"The ranking carries no intervals ({why}), so it supports no conclusion about "
            f"which {noun} is above another; bootstrap rounds would give them."
        )
    ci = f"{100 * settings.ci:g}%"
    held = " with style held equal" if is_styled(record) else ""
    pairs = [(m.name, below) for m in record.models for below in m.above or []]
    if not pairs:
        return (
            f"At {ci} confidence no {noun} can be told apart from another{held}: the "
            f"differences may be chance; {_what_would_help(record)}."
        )
    told: dict[str, list[str]] = {}
    for name, below in pairs[:LISTED]:
        told.setdefault(name, []).append(below)
    clauses = [
        f"{name} {'' if i else 'is '}above {_joined(below)}"
        for i, (name, below) in enumerate(told.items())
    ]
    if len(pairs) > LISTED:
        clauses.append(plural(len(pairs) - LISTED, "more pair"))
    n = len(record.models)
    every = len(pairs) == n * (n - 1) // 2
    ending = "every pair is told apart" if every else "no other pair can be told apart"
    lead = (
        f"With style held equal and {ci} family-wise confidence"
        if held
        else (f"With {ci} family-wise confidence")
    )
    return f"{lead}, {', and '.join(clauses)}; {ending}."


def _signals(record: RankingRecord) -> dict[str, str]:
    """Each measured judge's verdict on its own verdicts (stats.informative)."""
    return {j.name: j.signal.verdict for j in record.judges if j.signal is not None}


# Reasons for which a judge's verdicts say nothing about the replies: it answered by
# label alone
BLIND = {"same label", "position"}


def _blind(record: RankingRecord) -> bool:
    """Every measured judge answered by label alone."""
    signals = [j.signal for j in record.judges if j.signal is not None]
    return bool(signals) and all(s.reason in BLIND for s in signals)


def _what_would_help(record: RankingRecord) -> str:
    """What would narrow the intervals: more scenarios, unless no judge reads the
    replies at all."""
    verdicts = set(_signals(record).values())
    if not verdicts or verdicts & {"informative", "weak"}:
        return "more scenarios would narrow the intervals"
    if _blind(record):
        return "more scenarios would not help, as no judge's verdicts follow the replies"
    return (
        "no judge was shown to read the replies clearly, so more scenarios help only as "
        "far as the judges do"
    )


def _means_nothing(record: RankingRecord) -> list[str]:
    """A first sentence for a ranking whose judges all answered by label alone (it
    means nothing), or all showed at most a slight signal while no pair was told apart
    (it says little; where pairs are told apart, their intervals are the evidence)."""
    if _blind(record):
        return [
            "None of the judges' verdicts carry information about the replies (each is "
            "named below with why), so this ranking means nothing: its order and intervals "
            "come from how the judges answered, not from the replies."
        ]
    verdicts = set(_signals(record).values())
    told = any(m.above for m in record.models)
    if verdicts and verdicts <= {"uninformative", "undetermined"} and not told:
        return [
            "No judge showed more than a slight signal about the replies (each is named "
            "below), and no pair is told apart, so this ranking says little: its order may "
            "be chance."
        ]
    return []


def _position_evidence(record: RankingRecord, judge: JudgeRow) -> str | None:
    """Why a judge counts as position-locked, in words (None when it is not)."""
    bias = judge.position_bias or 0.0  # None: not fitted
    strong = abs(bias) >= LOCKED_BIAS
    slot, other = ("B", "A") if bias < 0 else ("A", "B")
    order = record.run.order_consistency.get(judge.name) if record.run else None
    if order and order.pairs >= LOCKED_PAIRS and order.same_slot >= LOCKED_SAME_SLOT:
        chose = f"reply {slot}" if strong else "the same slot"  # else A and B may mix
        return (
            f"chose {chose} in both orders for {order.same_slot:.0%} of the "
            f"{order.pairs} pairs it saw both ways"
        )
    if strong:
        odds = math.exp(abs(bias))
        times = f"{odds:,.0f} times" if odds < 1000 else "over 1,000 times"
        return f"picks reply {slot} {times} as often as {other} between replies it rates equal"
    return None


def _uninformative(record: RankingRecord) -> list[str]:
    """Sentence 3, when it applies: judges whose verdicts carry no information, or that
    cannot be told from chance, and members that did not judge, with why. Records made
    before judges were measured (no `signal`) name position-locked judges only."""
    sentences = []
    if any(j.signal is not None for j in record.judges):
        sentences += _judged_signals(record)
    else:
        locked = [
            f"{j.name} ({evidence})"
            for j in record.judges
            if (evidence := _position_evidence(record, j)) is not None
        ]
        if locked:
            their = "their" if len(locked) > 1 else "its"
            sentences.append(
                f"{_listed(locked)} answered by position rather than by content, so {their} "
                "verdicts carry almost no information about the replies."
            )
    reasons: dict[str, list[str]] = {}
    for member in record.run.members if record.run else []:
        if member.evaluee_only is not None:
            reasons.setdefault(member.evaluee_only, []).append(member.name)
    for reason, names in reasons.items():
        were = "were evaluees" if len(names) > 1 else "was an evaluee"
        sentences.append(f"{_listed(names)} {were} only: {reason}.")
    return sentences


def _judged_signals(record: RankingRecord) -> list[str]:
    """The judges measured as uninformative, by reason, then those that could not be
    told from chance, each with its evidence."""
    groups = (
        (BLIND, ", so {their} verdicts carry no information about the replies"),
        ({"contrary"}, ", so {their} verdicts point the wrong way"),
        ({"slight"}, ", so {their} verdicts say little about the replies"),
        ({None}, ""),  # undetermined
    )
    sentences = []
    for reasons, ending in groups:
        said = [
            f"{j.name} {j.signal.why}"
            for j in record.judges
            if j.signal is not None
            and j.signal.verdict in ("uninformative", "undetermined")
            and j.signal.reason in reasons
        ]
        if said:
            their = "their" if len(said) > 1 else "its"
            sentences.append(_listed(said) + ending.format(their=their) + ".")
    return sentences


def meaning(record: RankingRecord) -> list[str]:
    """What the ranking means, in two or three plain sentences: what was ranked and by
    whom, what the intervals allow one to conclude, and which judges said nothing about
    the replies (position-locked, or not judging at all) and why; with style control,
    what its Elo assumes."""
    assumption = [STYLE_ASSUMPTION] if is_styled(record) else []
    return [
        *_means_nothing(record),
        _what_was_ranked(record),
        _what_intervals_allow(record),
        *_uninformative(record),
        *assumption,
    ]
