"""Certificates for units of different sizes: a neighbour edits one reply and moves
every item it feeds, whatever that reply's size. The judge and the check are
eigenjury.testing.unit_sizes (written apart from bounds.simulation): replies of 2 items
are calm, the rare replies of 12 items flip every verdict they feed."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from eigenjury.bounds.apply import ReleaseSettings, release
from eigenjury.bounds.scores import SCALES, read_scores
from eigenjury.testing.unit_sizes import (
    UnitSizeJudge,
    measured_profile,
    violations,
    write_score_file,
)

DELTA = 0.05


@pytest.mark.slow
def test_a_neighbour_editing_a_rare_large_reply_stays_within_delta(tmp_path: Path) -> None:
    """3,000 replies measured, 1 in 1,000 of 12 items: pooled over replies the change
    per item looks tiny, but one edit of a 12-item reply moves the scores by sqrt(12)."""
    judge = UnitSizeJudge(small=2, large=12, large_share=0.001)
    scores = write_score_file(tmp_path / "s.csv", judge, 100, 5, np.random.default_rng(1))
    found = violations(
        judge, scores, m=3000, tau=0.5, delta=DELTA, measurements=20, draws=100, seed=0
    )
    for kind in ("large reply", "small reply", "any reply"):
        low, _ = found.interval(kind)
        assert low <= DELTA, (kind, found)
    assert found.rate["large reply"] <= DELTA, found


def test_the_release_of_unequal_units_names_each_size_and_keeps_the_old_attribute(
    tmp_path: Path,
) -> None:
    """The certificate lists each unit size with its own bound, says that pooled
    certificates could promise too much, and rests on the worst size; a script reading
    the release's old attribute `debiased` still gets the released scores, warned."""
    judge = UnitSizeJudge(small=2, large=12, large_share=0.01)
    path = write_score_file(tmp_path / "s.csv", judge, 100, 5, np.random.default_rng(1))
    profile = measured_profile(judge, 600, np.random.default_rng(2))
    result = release(read_scores(path, scale=SCALES["unit"]), profile,
                     ReleaseSettings(tau=0.5, delta=DELTA))  # fmt: skip
    bound = result.certificate.generators["formatting"]
    assert bound.strata is not None and [s.size for s in bound.strata] == [2, 12]
    small, large = bound.strata
    assert small.estimate == 0.0 and large.estimate == 1.0 and large.m + small.m == 600
    assert bound.upper_bound == pytest.approx(math.sqrt(12))  # a 12-item edit: sqrt(12 x 1)
    assert any("pooled the sizes" in w for w in result.certificate.warnings)
    with pytest.warns(DeprecationWarning, match="Release.released"):
        old = result.debiased
    assert old is result.released
