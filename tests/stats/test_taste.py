"""A judge's taste measured on same-content edits (stats.taste), style coefficients held
at a measured taste (PeerRanking style_fixed), and the edit that makes a reply longer
without changing its content (bounds.neighbours.Verbosity.lengthen)."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest

from eigenjury.bounds.neighbours import Verbosity
from eigenjury.reply_features import text_features
from eigenjury.stats import PeerRanking
from eigenjury.stats.consensus import SettingError
from eigenjury.stats.taste import EditVerdicts, difference_interval, measure_edit_effect
from eigenjury.stats.verdicts import certain
from eigenjury.testing.verdicts import Design, edit_verdicts, verdicts

MILD = (1.2, 0.8, 0.5, 0.2, -0.2, -0.5, -0.8, -1.2)
SCALE = 0.3  # the standard deviation of normalised length difference tastes are measured in


def _covers(ci: tuple[float | None, float | None] | None, value: float) -> bool:
    assert ci is not None
    low, high = ci
    return low is not None and high is not None and low <= value <= high


@pytest.mark.slow
def test_each_judges_planted_taste_is_recovered_in_the_fits_units() -> None:
    """Half the judges add 3 log-odds per unit of normalised length difference, half
    none; lengthened by one standard deviation, each is measured within its interval
    (at least 7 of 8: over 25 seeds, 92.5% of such intervals cover, the generator's tie
    zones being no Davidson ties), and the pooled taste is their mean."""
    tastes = (3.0, 0.0, 3.0, 0.0, 3.0, 0.0, 3.0, 0.0)
    design = Design(strengths=MILD, length_sd=0.3, length_taste=tastes, tie_zone=0.2)
    edits = edit_verdicts(design, 80, (1 + SCALE) / (1 - SCALE), SCALE, seed=2)
    effects = measure_edit_effect(edits, rounds=300, seed=0)
    assert [e.judge for e in effects] == [*design.judges, None]
    covered = 0
    for effect, taste in zip(effects, tastes, strict=False):
        assert effect.verdicts == 160 and effect.mean_x == pytest.approx(1.0, abs=0.01)
        covered += _covers(effect.effect_ci, taste * SCALE)
        assert effect.effect_ci is not None and effect.effect_ci[0] is not None
        assert (effect.effect_ci[0] > 0) == (taste > 0)  # a taste is told from none
    assert covered >= 7
    pooled = effects[-1]
    assert pooled.judge is None and pooled.verdicts == 160 * len(tastes)
    assert _covers(pooled.effect_ci, 1.5 * SCALE)
    assert pooled.effect_ci is not None and pooled.effect_ci[0] is not None
    assert pooled.effect_ci[0] > 0


def _edits(verdict: list[int], x: list[float]) -> EditVerdicts:
    n = len(verdict)
    return EditVerdicts(
        judge=np.zeros(n, dtype=np.int64),
        unit=np.arange(n) // 2,
        x=np.array(x),
        edited_first=np.array(x) > 0,
        n=certain(verdict),
        judges=("j",),
    )


def test_a_perfect_record_without_ties_is_unbounded_with_the_least_it_allows() -> None:
    """The longer reply wins all 20 verdicts in both orders: no finite estimate. The
    taste is reported above the least a record of 20 wins allows (Clopper-Pearson at
    97.5%, per unit of the edit's mean covariate), and the share's interval likewise."""
    x = [1.0, -1.0] * 10
    verdict = [1 if v > 0 else 2 for v in x]  # the longer one, whichever slot
    judge, pooled = measure_edit_effect(_edits(verdict, x), rounds=50)
    for effect in (judge, pooled):
        assert effect.unbounded == "above" and effect.effect is None
        p = 0.025 ** (1 / 20)
        assert effect.effect_ci == pytest.approx((math.log(p / (1 - p)), None))
        assert effect.share == 1.0 and effect.share_ci == pytest.approx((p, 1.0))
    # the same record toward the shorter reply: unbounded below
    shorter = [2 if v > 0 else 1 for v in x]
    (judge, _) = measure_edit_effect(_edits(shorter, x), rounds=50)
    assert judge.unbounded == "below" and judge.effect_ci is not None
    assert judge.effect_ci[0] is None and judge.effect_ci[1] == pytest.approx(
        -math.log(p / (1 - p))
    )


def test_ties_do_not_bound_a_perfect_decisive_record_and_all_ties_measure_nothing() -> None:
    """In Davidson's model ties keep their share as the taste grows (the tie propensity
    grows with it): 16 decisive verdicts for the longer reply and 4 ties are unbounded,
    the least allowed set by the 16; one decisive verdict the other way bounds it."""
    x = [1.0, -1.0] * 10
    some_ties = [1 if v > 0 else 2 for v in x[:16]] + [0, 0, 0, 0]
    judge, _ = measure_edit_effect(_edits(some_ties, x), rounds=50)
    p = 0.025 ** (1 / 16)
    assert judge.unbounded == "above" and judge.ties == 4 and judge.share == pytest.approx(0.9)
    assert judge.effect_ci == pytest.approx((math.log(p / (1 - p)), None))
    one_against = [*some_ties[:15], 1, *some_ties[16:]]  # row 15 shows the longer second
    judge, _ = measure_edit_effect(_edits(one_against, x), rounds=50)
    assert judge.unbounded is None and judge.effect is not None and judge.effect > 1
    judge, _ = measure_edit_effect(_edits([0] * 20, x), rounds=50)
    assert judge.effect is None and judge.effect_ci is None and judge.share == 0.5


def test_a_judge_that_answers_by_slot_measures_nothing_and_a_thin_one_stays_finite() -> None:
    """Always "A": the share is 0.5 by design and every bootstrap draw agrees, so the
    judge is reported as answering by position, with no taste and no interval. Always
    "A" in one order and 4 of 5 in the other (SmolLM2 on llama-cpp-python's server did
    this): the prior keeps the taste finite and its interval wide, not a confident
    taste from 10 verdicts."""
    x = [-1.0] * 5 + [1.0] * 5
    (locked, _) = measure_edit_effect(_edits([1] * 10, x), rounds=200)
    assert locked.position_locked and locked.effect is None and locked.effect_ci is None
    assert locked.share == 0.5 and locked.share_ci is None
    (thin, _) = measure_edit_effect(_edits([1] * 5 + [1, 1, 1, 1, 2], x), rounds=200)
    assert not thin.position_locked and thin.unbounded is None and thin.effect is not None
    assert thin.effect_ci is not None
    low, high = thin.effect_ci
    assert low is not None and high is not None and low > -4 and high >= -1e-9


def test_the_difference_interval_recovers_the_variances_of_each_side() -> None:
    """MOVER: a - b = 1.0 with ends 1 - sqrt(0.3^2 + 0.4^2) and 1 + sqrt(0.5^2 + 0.2^2);
    an end without a limit leaves that end of the difference without one."""
    diff, low, high = difference_interval(1.5, (1.2, 2.0), 0.5, (0.3, 0.9))
    assert diff == pytest.approx(1.0)
    assert low == pytest.approx(1.0 - math.hypot(0.3, 0.4))
    assert high == pytest.approx(1.0 + math.hypot(0.5, 0.2))
    assert difference_interval(1.5, (1.2, 2.0), 0.5, (0.3, None))[1] is None
    assert difference_interval(1.5, (1.2, 2.0), 0.5, (None, 0.9))[2] is None


@pytest.fixture(scope="module")
def substance() -> tuple[PeerRanking, PeerRanking]:
    """Longer replies really are better, judges have no taste: fitted and uncontrolled."""
    design = Design(strengths=MILD, scenarios=60, length_sd=0.3, length_substance=0.5)
    table = verdicts(design, 3)
    fitted = PeerRanking(style=["length"], bootstrap=0).fit(table)
    held = PeerRanking(style=["length"], style_fixed={"length": 0.0}, bootstrap=40, n_jobs=1)
    return fitted, held.fit(table)


def test_a_coefficient_held_at_zero_gives_the_uncontrolled_elo(
    substance: tuple[PeerRanking, PeerRanking],
) -> None:
    fitted, held = substance
    assert fitted.style_coef_[0] > 0.3  # the fit takes the substance for taste
    assert np.ptp(fitted.elo_) < 0.7 * np.ptp(fitted.elo_uncontrolled_)
    assert held.style_coef_.tolist() == [0.0]
    assert held.style_ci_.tolist() == [[0.0, 0.0]]  # held in every bootstrap round too
    np.testing.assert_allclose(held.elo_, fitted.elo_uncontrolled_, atol=0.05)


def test_held_coefficients_per_judge_and_what_is_refused() -> None:
    design = Design(strengths=MILD[:4], scenarios=40, length_sd=0.3, length_taste=2.0)
    table = verdicts(design, 0)
    per_judge = PeerRanking(
        style=["length"], style_per_judge=True, style_fixed={"length": {"m1": 0.25}}, bootstrap=0
    ).fit(table)
    assert per_judge.style_coef_[1, 0] == 0.25
    assert per_judge.style_coef_[0, 0] != 0.25  # the others fitted
    refused = [
        ({"lists": 0.1}, False, "'lists' is held fixed but not controlled for"),
        ({"length": {"m1": 0.1}}, False, "held per judge, but the coefficients are shared"),
        ({"length": {"nobody": 0.1}}, True, "'nobody' (style_fixed of 'length') is not a judge"),
        ({"length": math.inf}, False, "must be a finite number"),
    ]
    for fixed, by_judge, words in refused:
        ranking = PeerRanking(
            style=["length"], style_per_judge=by_judge, style_fixed=fixed, bootstrap=0
        )
        with pytest.raises(SettingError, match=re.escape(words)) as caught:
            ranking.fit(table)
        assert caught.value.setting == "style_fixed"


def test_lengthening_adds_filler_around_the_reply_left_as_it_was() -> None:
    text = "I am sorry to hear that. Call 555-0100 and try `reset --all` first.\n\nThen rest."
    verbosity = Verbosity()
    (base,) = text_features([text], ("length",))["length"]
    for tokens, seed in ((5, 0), (40, 1), (80, 2)):
        longer = verbosity.lengthen(text, tokens, np.random.default_rng(seed))
        assert text in longer or text.rstrip() in longer  # the reply, word for word
        added = longer.replace(text, "")
        assert not any(c.isdigit() for c in added) and "`" not in added
        (length,) = text_features([longer], ("length",))["length"]
        assert length - base >= tokens
    # asked for more than all the filler there is: every sentence once, none twice
    longest = verbosity.lengthen(text, 10_000, np.random.default_rng(3))
    sentences = [s for s in longest.replace(text, "").replace("\n", " ").split(".") if s.strip()]
    assert len(sentences) == len(set(sentences)) > 20
    assert verbosity.lengthen(text, 0, np.random.default_rng(4)) == text
