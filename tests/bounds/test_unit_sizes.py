"""Certificates for units of different sizes: a neighbour edits one reply and moves
every item it feeds, whatever that reply's size. The judge and the check are
eigenjury.testing.unit_sizes (written apart from bounds.simulation): replies of 2 items
are calm, the rare replies of 12 items flip every verdict they feed."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from eigenjury.testing.unit_sizes import UnitSizeJudge, violations, write_score_file

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
