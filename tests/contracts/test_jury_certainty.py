"""Contracts: how sure the jury is (contracts.certainty), checked against oracles built
here and never by the code under test: population values from planted juror error
rates, binomial sums in exact fractions, brute force over a task's criterion outcomes."""

from __future__ import annotations

import itertools
import math
from collections import Counter
from collections.abc import Sequence
from fractions import Fraction

import numpy as np
import pytest

from eigenjury.contracts import certainty
from eigenjury.contracts.certainty import (
    is_undecided,
    jury_agreement,
    jury_pass_probability,
    task_pass_probability,
    task_undecided,
)
from eigenjury.contracts.grading import CriterionResult, Submission, TaskResult
from eigenjury.contracts.jury import Jury, Vote
from eigenjury.contracts.rules import task_passes
from eigenjury.contracts.schema import Criterion, Scoring
from eigenjury.contracts.trace import grading_record

# --- building results by hand ---------------------------------------------------------


def juror_names(size: int) -> tuple[str, ...]:
    return tuple(f"scripted:j{k}" for k in range(size))


def cast(grades: str, names: Sequence[str] | None = None) -> tuple[Vote, ...]:
    """One vote per letter: C, I, "-" an unreadable reply, "x" a failed call."""
    names = juror_names(len(grades)) if names is None else names
    out = []
    for name, g in zip(names, grades, strict=True):
        if g == "x":
            out.append(Vote(juror=name, grade=None, text=None, error="timeout"))
        else:
            out.append(Vote(juror=name, grade=None if g == "-" else g, text=f"GRADE: {g}"))
    return tuple(out)


def judged(cid: str, weight: float, grades: str) -> CriterionResult:
    """A jury-graded criterion; it passes by strict majority of the whole jury (the
    grading rule, written out here: a tie and an unread vote are not C)."""
    criterion = Criterion(id=cid, weight=weight, grader="llm_judge", prompt=f"{cid} holds")
    return CriterionResult(criterion, 2 * grades.count("C") > len(grades), cast(grades))


def matched(cid: str, weight: float, passed: bool) -> CriterionResult:
    """A criterion graded without a model: certain."""
    criterion = Criterion(id=cid, weight=weight, grader="exact_match", prompt="Paris")
    return CriterionResult(criterion, passed, explanation="compared")


def task(
    criteria: Sequence[CriterionResult],
    threshold: float = 50.0,
    scoring: Scoring = "weighted",
    *,
    task_id: str = "t",
    text: str | None = "a reply",
) -> TaskResult:
    submission = Submission(task_id, "cand", text, error=None if text else "auth: no key")
    return TaskResult(task_id, "cand", threshold, tuple(criteria), submission, scoring)


def majority_chance(c_votes: int, size: int) -> Fraction:
    """P(Binomial(size, c_votes / size) > size / 2), exactly."""
    p = Fraction(c_votes, size)
    return sum(
        (
            math.comb(size, k) * p**k * (1 - p) ** (size - k)
            for k in range(size + 1)
            if 2 * k > size
        ),
        Fraction(0),
    )


# --- 1. calibration against planted juror error rates ---------------------------------

ERRORS = (0.05, 0.10, 0.15, 0.25)  # each juror flips the true label this often, on average
DIFFICULTY = (0.0, 2.0)  # half the tasks easy (nobody errs), half hard (twice the rate)
PREVALENCES = (0.3, 0.9)  # a task's chance that a criterion truly holds: half each
CALIBRATION_JURY = Jury.from_specs(list(juror_names(len(ERRORS))))
PAIRS = list(itertools.combinations(range(len(ERRORS)), 2))


def population_values(
    errors: Sequence[float], difficulty: Sequence[float], prevalences: Sequence[float]
) -> tuple[list[float], dict[tuple[int, int], float], float]:
    """Exact population values from the planted rates: over the (equally likely) task
    difficulties and prevalences, the true label and all 2^J patterns of flips, each
    juror's agreement with the strict majority (a tie fails), each pair's Cohen's kappa
    and the jury's Fleiss' kappa. Each is a ratio of expectations over one criterion's
    votes, which is what the estimates over many criteria converge to."""
    size = len(errors)
    agree = [0.0] * size
    c_rate = [0.0] * size
    same = dict.fromkeys(itertools.combinations(range(size), 2), 0.0)
    pairwise = 0.0  # Fleiss' P_o: E[sum_c n_c (n_c - 1) / (n (n - 1))]
    for factor, prevalence, truth in itertools.product(difficulty, prevalences, (True, False)):
        p_kind = (prevalence if truth else 1 - prevalence) / len(difficulty) / len(prevalences)
        for flips in itertools.product((False, True), repeat=size):
            p = p_kind * math.prod(
                factor * e if f else 1 - factor * e for e, f in zip(errors, flips, strict=True)
            )
            votes = [truth != f for f in flips]
            n_c = sum(votes)
            outcome = 2 * n_c > size
            for j in range(size):
                agree[j] += p * (votes[j] == outcome)
                c_rate[j] += p * votes[j]
            for a, b in same:
                same[a, b] += p * (votes[a] == votes[b])
            n_i = size - n_c
            pairwise += p * (n_c * (n_c - 1) + n_i * (n_i - 1)) / (size * (size - 1))
    cohen = {}
    for (a, b), observed in same.items():
        chance = c_rate[a] * c_rate[b] + (1 - c_rate[a]) * (1 - c_rate[b])
        cohen[a, b] = (observed - chance) / (1 - chance)
    pooled = sum(c_rate) / size
    chance = pooled**2 + (1 - pooled) ** 2
    return agree, cohen, (pairwise - chance) / (1 - chance)


# The juror's votes as shared objects: a study builds tens of thousands of criteria.
_VOTES = {
    (name, g): Vote(juror=name, grade=g, text=f"GRADE: {g}")
    for name in CALIBRATION_JURY.names
    for g in "CI"
}
_CRITERIA = [Criterion(id=f"c{k}", weight=10, grader="llm_judge", prompt="p") for k in range(4)]


def simulate_study(rng: np.random.Generator, tasks: int) -> list[TaskResult]:
    """One study: per task a difficulty and a prevalence (so a task's criteria are
    correlated: the task is the cluster to resample), per criterion a true label, per
    juror an independent flip at its rate times the task's difficulty."""
    factor = rng.choice(DIFFICULTY, size=tasks)
    prevalence = rng.choice(PREVALENCES, size=tasks)
    truth = rng.random((tasks, len(_CRITERIA))) < prevalence[:, None]
    rates = factor[:, None, None] * np.asarray(ERRORS)
    flips = rng.random((tasks, len(_CRITERIA), len(ERRORS))) < rates
    is_c = truth[:, :, None] != flips
    names = CALIBRATION_JURY.names
    out = []
    for t in range(tasks):
        criteria = []
        for k, criterion in enumerate(_CRITERIA):
            row = is_c[t, k].tolist()
            votes = tuple(
                _VOTES[name, "C" if c else "I"] for name, c in zip(names, row, strict=True)
            )
            criteria.append(CriterionResult(criterion, 2 * sum(row) > len(row), votes))
        out.append(task(criteria, task_id=f"task{t}"))
    return out


@pytest.mark.slow
def test_jury_agreement_intervals_cover_the_planted_population_values() -> None:
    agree, cohen, fleiss = population_values(ERRORS, DIFFICULTY, PREVALENCES)
    truth = {
        **{f"agreement {j}": agree[j] for j in range(len(ERRORS))},
        **{f"cohen {a}-{b}": cohen[a, b] for a, b in PAIRS},
        "fleiss": fleiss,
    }
    # the oracle on a case worked by hand: two jurors erring 10%, prevalence 1/2; a
    # juror agrees with the outcome (C iff both say C) unless it says C and the other I
    # (.5 x .9 x .1 + .5 x .1 x .9 = .09); they agree .9^2 + .1^2 = .82 against .5 by chance
    hand_agree, hand_cohen, hand_fleiss = population_values((0.1, 0.1), (1.0,), (0.5,))
    assert hand_agree == pytest.approx([0.91, 0.91])
    assert hand_cohen == {(0, 1): pytest.approx(0.64)} and hand_fleiss == pytest.approx(0.64)
    # a tie failing matters: were ties to pass, jurors 0 and 3 would agree ~0.015 more
    # and less, beyond the tolerance below
    studies, tasks = 200, 100
    values: dict[str, list[float]] = {key: [] for key in truth}
    inside: dict[str, list[bool]] = {key: [] for key in truth}
    for study in range(studies):
        results = simulate_study(np.random.default_rng(10_000 + study), tasks)
        record = jury_agreement(results, CALIBRATION_JURY, rounds=300, seed=study)
        assert record is not None
        assert record["criteria"] == record["criteria_all_read"] == tasks * len(_CRITERIA)
        got = {
            f"agreement {j}": juror["agreement_with_outcome"]
            for j, juror in enumerate(record["jurors"])
        }
        names = CALIBRATION_JURY.names
        for pair, (a, b) in zip(record["pairs"], PAIRS, strict=True):
            assert (pair["a"], pair["b"]) == (names[a], names[b])
            got[f"cohen {a}-{b}"] = pair["cohen_kappa"]
        got["fleiss"] = record["fleiss_kappa"]
        for key, estimate in got.items():
            low, high = estimate["ci"]
            values[key].append(estimate["value"])
            inside[key].append(low <= truth[key] <= high)
    for key, population in truth.items():
        coverage = float(np.mean(inside[key]))
        mean = float(np.mean(values[key]))
        print(f"{key}: population {population:.4f}, mean {mean:.4f}, coverage {coverage:.3f}")
        # 95% intervals: binomial noise over 200 studies has sd ~0.015; a percentile
        # bootstrap over 100 clusters runs a little narrow
        assert 0.85 <= coverage <= 0.995, key
        # unbiased (Fleiss' kappa only to O(1/criteria)); the mean's sd is ~0.0015 for an
        # agreement and ~0.0035 for a kappa
        assert mean == pytest.approx(population, abs=0.006 if key.startswith("agree") else 0.015)
    # pooled over the 11 statistics (2200 intervals), close to 95%; resampling criteria
    # rather than tasks ignores the tasks' shared difficulty and falls to ~0.85
    pooled = float(np.mean([np.mean(x) for x in inside.values()]))
    assert 0.91 <= pooled <= 0.98


# --- 2. a juror who always disagrees --------------------------------------------------


def test_a_juror_who_flips_every_vote_stands_out() -> None:
    names = juror_names(4)  # the last juror votes against the truth every time
    jury = Jury.from_specs(list(names))
    # criteria present on different numbers of tasks, so the counts against differ and
    # their order (by count) is not the order of their ids
    present = {"z-often": 40, "m-sometimes": 25, "a-rarely": 10, "b-once": 1}
    rng = np.random.default_rng(7)
    results, against, asked = [], Counter[str](), Counter[str]()
    agreed = np.zeros(4)
    for t in range(40):
        criteria = []
        for cid, n in present.items():
            if t >= n:
                continue
            truth = bool(rng.random() < 0.6)
            grades = [truth != bool(rng.random() < 0.1) for _ in range(3)] + [not truth]
            outcome = 2 * sum(grades) > len(grades)
            agreed += np.asarray(grades) == outcome
            against[cid] += grades[3] != outcome
            asked[cid] += 1
            criteria.append(judged(cid, 10, "".join("C" if g else "I" for g in grades)))
        results.append(task(criteria, task_id=f"task{t}"))
    record = jury_agreement(results, jury, rounds=300)
    assert record is not None
    total = sum(present.values())
    jurors = record["jurors"]
    share = [j["agreement_with_outcome"] for j in jurors]
    for k in range(4):
        assert jurors[k]["votes"] == total and jurors[k]["unread"] == 0
        assert share[k]["value"] == pytest.approx(agreed[k] / total, abs=1e-4)
    # far below the others: its interval lies wholly under theirs
    assert share[3]["value"] < 0.3
    assert all(share[3]["ci"][1] < share[k]["ci"][0] for k in range(3))
    for pair in record["pairs"]:
        kappa = pair["cohen_kappa"]
        if pair["b"] == names[3]:
            assert kappa["value"] < 0 and kappa["ci"][1] < 0  # worse than chance
        else:
            assert kappa["value"] > 0.5
    # the criteria it voted against most, by count (ties by id), three at most
    expected = sorted(against.items(), key=lambda kv: (-kv[1], kv[0]))[:3]
    assert [e[0] for e in expected] == ["z-often", "m-sometimes", "a-rarely"]
    assert jurors[3]["most_disagreed"] == [
        {"criterion_id": cid, "task_id": None, "against": n, "of": asked[cid]}
        for cid, n in expected
    ]


def test_agreement_is_the_first_jurys_over_its_readable_votes() -> None:
    """Worked by hand: a cascade's first jury counts (the larger jury's votes do not),
    an unread vote leaves its juror out of that criterion and Fleiss' kappa too."""
    jury = Jury.from_specs(list(juror_names(3)))
    escalated = judged("k2", 10, "CCCCC")  # the larger jury (other names): passed
    escalated = CriterionResult(
        escalated.criterion,
        True,
        cast("CCCCC", [f"scripted:big{k}" for k in range(5)]),
        escalated_from=cast("C-I"),  # the first jury: 1 C of 3, its outcome fails
    )
    results = [
        task([judged("k1", 10, "CCI"), escalated], task_id="t1"),
        task(
            [judged("k1", 10, "III"), judged("k2", 10, "CCC"), matched("m", 5, True)], task_id="t2"
        ),
    ]
    record = jury_agreement(results, jury, rounds=50)
    assert record is not None
    assert (record["criteria"], record["criteria_all_read"]) == (4, 3)
    # over the three read by all, counts (2, 1), (0, 3), (3, 0): P_o = 7/9, C share 5/9,
    # P_e = 41/81, kappa = 22/40
    assert record["fleiss_kappa"]["value"] == pytest.approx(0.55, abs=1e-4)
    a, b, c = record["jurors"]
    assert (a["votes"], a["unread"], b["votes"], b["unread"]) == (4, 0, 3, 1)
    assert a["agreement_with_outcome"]["value"] == 0.75  # against the first jury on t1/k2
    assert b["agreement_with_outcome"]["value"] == 1.0
    assert c["agreement_with_outcome"]["value"] == 0.75  # against the 2-1 on t1/k1
    # the same id and text in two tasks count together, with no one task to name
    assert a["most_disagreed"] == [{"criterion_id": "k2", "task_id": None, "against": 1, "of": 2}]
    assert b["most_disagreed"] == []
    assert c["most_disagreed"] == [{"criterion_id": "k1", "task_id": None, "against": 1, "of": 2}]
    # a-b on 3 criteria agree throughout; a-c: .5 observed, .375 by chance; b-c: 2/3, 4/9
    kappas = {
        (p["a"][-2:], p["b"][-2:]): (p["criteria"], p["cohen_kappa"]["value"])
        for p in record["pairs"]
    }
    assert kappas == {
        ("j0", "j1"): (3, pytest.approx(1.0)),
        ("j0", "j2"): (4, pytest.approx(0.2, abs=1e-4)),
        ("j1", "j2"): (3, pytest.approx(0.4, abs=1e-4)),
    }
    # nothing to compare: a jury of one, or no jury
    assert jury_agreement(results, Jury.from_specs(["scripted:j0"])) is None
    assert jury_agreement(results, None) is None


def test_a_figure_resting_on_one_task_has_no_interval_among_many() -> None:
    """j1's calls failed on t2 and t3: its figures, its pair's and Fleiss' kappa rest
    on t1 alone, and a bootstrap over three tasks would give them a zero-width interval
    (every round that draws t1 gives the same value); j0's rest on all three."""
    jury = Jury.from_specs(list(juror_names(2)))
    results = [
        task(
            [judged("k1", 10, "CC"), judged("k2", 10, "CI"), judged("k3", 10, "IC")], task_id="t1"
        ),
        task([judged("k1", 10, "Cx"), judged("k2", 10, "Ix")], task_id="t2"),
        task([judged("k1", 10, "Cx"), judged("k2", 10, "Ix")], task_id="t3"),
    ]
    record = jury_agreement(results, jury, rounds=200)
    assert record is not None
    j0, j1 = record["jurors"]
    low, high = j0["agreement_with_outcome"]["ci"]
    assert low is not None and high is not None and low < high
    assert j1["votes"] == 3
    assert j1["agreement_with_outcome"]["value"] == pytest.approx(2 / 3, abs=1e-4)
    [pair] = record["pairs"]
    figures = [j1["agreement_with_outcome"], pair["agreement"], pair["cohen_kappa"]]
    figures.append(record["fleiss_kappa"])
    assert all(f["value"] is not None and f["ci"] == [None, None] for f in figures)


# --- 3. undecided marks ---------------------------------------------------------------


def test_is_undecided_at_the_boundary() -> None:
    assert is_undecided(0.5, 0.0)  # an exact tie is undecided even without a margin
    assert is_undecided(0.6, 0.1)  # 0.6 - 0.5 is 0.0999... in floats: still within
    assert is_undecided(0.4, 0.1)
    assert not is_undecided(0.6, 0.0999)
    assert not is_undecided(0.6, 0.0)
    assert not is_undecided(1.0, 0.49) and is_undecided(1.0, 0.5)


@pytest.mark.parametrize(
    ("grades", "share", "margin", "undecided"),
    [
        ("CCCII", 0.6, 0.0, False),
        ("CCCII", 0.6, 0.1, True),  # 3-2: within 0.1 of 1/2
        ("CCCII", 0.6, 0.2, True),
        ("IICCC", 0.6, 0.05, False),
        ("CCIII", 0.4, 0.1, True),  # 2-3, the other side
        ("CCIII", 0.4, 0.0, False),
        ("CCII", 0.5, 0.0, True),  # 2-2 in a jury of four: a tie
        ("CCII", 0.5, 0.1, True),
        ("CCII", 0.5, 0.2, True),
        ("CCCI", 0.75, 0.2, False),
        ("CCCI", 0.75, 0.25, True),
        ("CCCCC", 1.0, 0.0, False),
        ("CCCCC", 1.0, 0.1, False),
        ("CCCCC", 1.0, 0.2, False),
        ("IIIII", 0.0, 0.2, False),
        # an unread reply or a failed call is a vote that is not C
        ("CCC-I", 0.6, 0.1, True),
        ("CCC-I", 0.6, 0.0, False),
        ("CCCC-", 0.8, 0.2, False),
        ("CC-x", 0.5, 0.0, True),
        ("CCC--", 0.6, 0.0, False),
    ],
)
def test_undecided_marks_follow_the_margin(
    grades: str, share: float, margin: float, undecided: bool
) -> None:
    c = judged("c1", 10, grades)
    assert c.c_share == pytest.approx(share)
    r = task([c, matched("m", 5, True)], threshold=0)
    jury = Jury.from_specs(list(juror_names(len(grades))))
    record = grading_record([r], contract="x", jury=jury, undecided_margin=margin)
    [outcome, certain] = record.tasks[0].criteria
    assert outcome.c_share == pytest.approx(share)
    assert outcome.undecided is undecided
    assert certain.undecided is None  # no jury: nothing to be undecided about
    assert record.summary[0].undecided_criteria == int(undecided)
    assert outcome.pass_probability == pytest.approx(
        float(majority_chance(grades.count("C"), len(grades))), abs=1e-4
    )


# --- 4. pass probabilities against hand computation and brute force -------------------


@pytest.mark.parametrize(
    ("c_votes", "size", "expected"),
    [
        (3, 5, 0.68256),  # 10 .6^3 .4^2 + 5 .6^4 .4 + .6^5
        (2, 3, 20 / 27),
        (2, 4, 5 / 16),  # p = 1/2, a tie fails: only 3 or 4 of 4
        (5, 5, 1.0),
        (0, 5, 0.0),
        (1, 2, 1 / 4),
        (0, 0, 0.0),
    ],
)
def test_jury_pass_probability_by_hand(c_votes: int, size: int, expected: float) -> None:
    assert jury_pass_probability(c_votes, size) == pytest.approx(expected, abs=1e-12)


def test_jury_pass_probability_matches_exact_binomial_sums() -> None:
    for size in range(1, 10):
        for c_votes in range(size + 1):
            exact = float(majority_chance(c_votes, size))
            assert jury_pass_probability(c_votes, size) == pytest.approx(exact, abs=1e-12)


def mixed_task(threshold: float, scoring: Scoring) -> TaskResult:
    """Five uncertain jury criteria (positive and negative weights, odd and even juries),
    certain jury criteria and criteria graded without a model."""
    return task(
        [
            judged("a", 30, "CCCII"),  # share .6, q = .68256
            judged("b", 25, "CCII"),  # share .5, q = 5/16; fails as voted
            judged("c", -20, "CCI"),  # negative, share .667, q = 20/27
            judged("d", 15, "CCCI"),  # share .75
            judged("e", -10, "CIIII"),  # negative, share .2
            judged("f", 40, "IIIII"),  # certain: not met
            judged("g", -5, "CCCCC"),  # certain: met (so scores can fall below 0)
            matched("h", 10, True),
            matched("i", -15, True),
        ],
        threshold,
        scoring,
    )


def outcomes(r: TaskResult, free: Sequence[str]) -> list[tuple[dict[str, bool], TaskResult]]:
    """The task under every assignment of met / not met to the `free` criteria (the
    others as graded), scored by TaskResult itself (the grading rule)."""
    out = []
    for assignment in itertools.product((False, True), repeat=len(free)):
        met = dict(zip(free, assignment, strict=True))
        criteria = [
            CriterionResult(c.criterion, met.get(c.criterion.id, c.passed), c.votes)
            for c in r.criteria
        ]
        out.append((met, task(criteria, r.threshold, r.scoring)))
    return out


def uncertain(r: TaskResult) -> dict[str, Fraction]:
    return {
        c.criterion.id: q
        for c in r.criteria
        if c.by_jury
        and 0 < (q := majority_chance(sum(v.grade == "C" for v in c.votes), len(c.votes))) < 1
    }


def brute_pass_probability(r: TaskResult) -> float:
    chances = uncertain(r)
    total = Fraction(0)
    for met, outcome in outcomes(r, list(chances)):
        if outcome.passed:
            total += math.prod(
                (chances[cid] if ok else 1 - chances[cid] for cid, ok in met.items()),
                start=Fraction(1),
            )
    return float(total)


def thresholds(scoring: Scoring) -> list[float]:
    """Every score an outcome can reach, just above each, and beyond both ends."""
    scores = sorted({o.score for _, o in outcomes(mixed_task(0, scoring), list("abcde"))})
    return [scores[0] - 1, *scores, *(s + 0.5 for s in scores), scores[-1] + 1]


@pytest.mark.parametrize("scoring", ["weighted", "healthbench"])
def test_task_pass_probability_matches_brute_force(scoring: Scoring) -> None:
    partial = 0
    for threshold in [*thresholds(scoring), 0.0]:
        r = mixed_task(threshold, scoring)
        expected = brute_pass_probability(r)
        assert task_pass_probability(r) == pytest.approx(expected, abs=1e-9), threshold
        partial += 0 < expected < 1
    assert partial >= 10  # the sweep holds thresholds only some outcomes reach


def test_task_pass_probability_simulates_many_outcomes_closely(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Thirteen uncertain criteria of distinct weights: 8192 point sums, past the exact
    tracking, so a seeded simulation; it stays within its noise (sd < .004)."""
    rng = np.random.default_rng(3)
    weights = np.round(rng.uniform(-20, 40, size=13), 3)
    splits = ["CCCII", "CCII", "CCI", "CCCI", "CIIII", "CCIII", "CI"]
    base = [judged(f"k{n}", float(w), splits[n % len(splits)]) for n, w in enumerate(weights)]
    for scoring in ("weighted", "healthbench"):
        r0 = task([*base, matched("m", 12, True)], 0, scoring)
        chances = {cid: float(q) for cid, q in uncertain(r0).items()}
        assert len(chances) == 13
        scores, probs = [], []
        for met, outcome in outcomes(r0, list(chances)):
            scores.append(outcome.score)
            probs.append(math.prod(q if met[cid] else 1 - q for cid, q in chances.items()))
        for threshold in np.quantile(scores, [0.2, 0.5, 0.8]).tolist():
            r = task(r0.criteria, threshold, scoring)
            expected = math.fsum(
                p for s, p in zip(scores, probs, strict=True) if task_passes(s, threshold)
            )
            assert 0.05 < expected < 0.95
            simulated = task_pass_probability(r)
            assert simulated == pytest.approx(expected, abs=0.015)
            assert simulated != pytest.approx(expected, abs=1e-9)  # it did simulate
            with monkeypatch.context() as patch:  # tracked exactly, it is exact
                patch.setattr(certainty, "_MAX_STATES", 10_000)
                assert task_pass_probability(r) == pytest.approx(expected, abs=1e-9)


def brute_undecided(r: TaskResult, margin: float) -> bool:
    m = Fraction(str(margin))
    free = [
        c.criterion.id
        for c in r.criteria
        if c.by_jury and c.votes and abs(Fraction(c.c_votes, len(c.votes)) - Fraction(1, 2)) <= m
    ]
    return len({o.passed for _, o in outcomes(r, free)}) == 2


@pytest.mark.parametrize("scoring", ["weighted", "healthbench"])
def test_task_undecided_matches_brute_force(scoring: Scoring) -> None:
    seen = Counter[bool]()
    for margin in (0.0, 0.1, 0.2, 0.25, 0.3):  # undecided: b; +a; +c; +d; +e
        for threshold in thresholds(scoring):
            r = mixed_task(threshold, scoring)
            expected = brute_undecided(r, margin)
            assert task_undecided(r, margin) is expected, (margin, threshold)
            seen[expected] += 1
    assert seen[True] >= 5 and seen[False] >= 5  # both answers are exercised


# --- 5. a failed candidate call -------------------------------------------------------


def test_a_task_without_a_submission_cannot_pass_and_is_not_undecided() -> None:
    # as grading assembles it: nothing met, no votes
    plain = task(
        [
            CriterionResult(
                Criterion(id="c", weight=10, grader="llm_judge", prompt="p"),
                False,
                explanation="no submission",
            )
        ],
        threshold=0,
        text=None,
    )
    assert plain.passed  # the score 0 reaches a threshold of 0 ...
    assert task_pass_probability(plain) == 0.0  # ... but without a reply nothing passes
    assert not task_undecided(plain, 0.5)
    # even where its criteria carry split votes
    split = task([judged("a", 30, "CCII"), judged("b", 20, "CCCII")], threshold=30, text=None)
    assert task_pass_probability(split) == 0.0
    assert not task_undecided(split, 0.5)
    # the same task with a reply is open on both counts
    answered = task(split.criteria, threshold=30)
    assert 0 < task_pass_probability(answered) < 1
    assert task_undecided(answered, 0.1)


def test_the_records_task_marks_match_brute_force() -> None:
    # the record's task fields carry the same numbers, at the record's margin
    r = mixed_task(40, "healthbench")
    record = grading_record([r], contract="x", jury=None, undecided_margin=0.2)
    outcome = record.tasks[0]
    assert outcome.pass_probability == pytest.approx(brute_pass_probability(r), abs=1e-4)
    assert outcome.undecided is brute_undecided(r, 0.2)
