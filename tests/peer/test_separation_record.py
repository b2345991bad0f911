"""The record of where Ford's condition fails says what its interval's bound counted."""

from __future__ import annotations

from eigenjury.peer.record import SeparationGroup


def test_a_pooled_group_records_its_scenarios_and_a_judges_group_leaves_them_out() -> None:
    pooled = SeparationGroup(judge=None, above=["m3"], below=["m0"], verdicts=302.0, scenarios=22)
    assert pooled.model_dump()["scenarios"] == 22
    own = SeparationGroup(judge="m1", above=["m3"], below=["m0"], verdicts=12.0)
    assert "scenarios" not in own.model_dump()
    # records written before scenarios were counted still read
    old = {"judge": None, "above": ["m3"], "below": ["m0"], "verdicts": 248.0}
    assert SeparationGroup.model_validate(old).scenarios is None
