"""Agreement of judges with a reference majority: constructed data with known answers."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from eigenjury.stats.judge_agreement import AgreementRow, judge_agreement
from eigenjury.stats.verdicts import DataError, ReplyFeatures, VerdictTable
from strength_verdicts import REFERENCES, Judge, Verdicts, draw, renamed_and_shuffled

Row = tuple[str, str, str, str, str | None]  # scenario, judge, shown first, shown second, winner


def _table(rows: list[Row], lengths: list[tuple[float, float]] | None = None) -> VerdictTable:
    """Verdicts from who won (None: a tie), whatever the order shown."""
    verdicts = [0 if w is None else 1 if w == first else 2 for _, _, first, _, w in rows]
    table = VerdictTable.from_columns(
        [r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows], [r[3] for r in rows],
        verdicts,
    )  # fmt: skip
    if lengths is None:
        return table
    pairs = np.array(lengths, dtype=float)
    return dataclasses.replace(
        table, features=ReplyFeatures(("length",), pairs[:, :1], pairs[:, 1:])
    )


def _row(result: object, judge: str) -> AgreementRow:
    rows = {r.judge: r for r in result.judges}  # type: ignore[attr-defined]
    return rows[judge]


def test_agreement_and_kappa_match_a_hand_count_with_ties_as_an_outcome() -> None:
    # outcomes per scenario: a, b won or tie (T); the judge is shown the pair in both orders
    reference = "aaaabbbbTT"
    judge = "aaabbbTaTb"
    rows: list[Row] = []
    for s, (ref, own) in enumerate(zip(reference, judge, strict=True)):
        shown = ("a", "b") if s % 2 else ("b", "a")
        rows.append((f"s{s}", "H", "a", "b", None if ref == "T" else ref))
        rows.append((f"s{s}", "J", *shown, None if own == "T" else own))
    result = judge_agreement(_table(rows), ["H"], bootstrap=0)
    row = _row(result, "J")
    # 6 of 10 equal (a tie against a win is a disagreement, not half an agreement)
    assert row.agreement.value == pytest.approx(0.6)
    # marginals: judge a .4 b .4 tie .2, reference the same: chance .36
    assert row.kappa.value == pytest.approx((0.6 - 0.36) / (1 - 0.36))
    # both decisive in scenarios 0-5 and 7; equal in 0, 1, 2, 4, 5
    assert row.agreement_decisive.value == pytest.approx(5 / 7)
    assert (row.comparisons, row.with_majority, row.verdicts) == (10, 10, 10.0)
    assert np.isnan(row.agreement.low)  # no bootstrap, no interval
    assert result.comparisons == 10 and result.without_majority == 0
    assert result.judges[0].judge == "J"  # the sole reference has no agreement: listed last
    sole = _row(result, "H")
    assert sole.reference and np.isnan(sole.agreement.value)
    assert sole.position_bias.value == 0.5  # shown a first: a four times, b four times


@pytest.mark.parametrize("winner_first", [True, False])
def test_kappa_chance_agreement_depends_on_tie_rates_not_on_which_side_won(
    winner_first: bool,
) -> None:
    # one evaluee wins most comparisons; whether it is coded first must not matter
    strong, weak = ("a", "b") if winner_first else ("b", "a")
    code = {"a": strong, "b": weak, "T": None}
    reference, judge = "aaaaaabbTT", "aaaabTaaTb"
    rows: list[Row] = []
    for s, (ref, own) in enumerate(zip(reference, judge, strict=True)):
        rows.append((f"s{s}", "H", "a", "b", code[ref]))
        rows.append((f"s{s}", "J", "b", "a", code[own]))
    row = _row(judge_agreement(_table(rows), ["H"], bootstrap=0), "J")
    assert row.agreement.value == pytest.approx(0.5)
    # tie rates .2 and .2: chance .2 * .2 + (.8 * .8) / 2 = .36, not the .44 that the
    # sides' marginals (.6, .2 each) would give
    assert row.kappa.value == pytest.approx((0.5 - 0.36) / (1 - 0.36))


def test_kappa_is_undefined_only_when_both_raters_always_tie() -> None:
    rows: list[Row] = [(f"s{s}", j, "a", "b", None) for s in range(4) for j in ("H", "J")]
    row = _row(judge_agreement(_table(rows), ["H"], bootstrap=0), "J")
    assert row.agreement.value == 1.0 and np.isnan(row.kappa.value)


def test_comparisons_without_a_majority_are_left_out_and_references_leave_one_out() -> None:
    rows: list[Row] = [
        # s0: the references split (a vs b): no majority
        ("s0", "H1", "a", "b", "a"), ("s0", "H2", "a", "b", "b"), ("s0", "J", "a", "b", "a"),
        # s1: both references say tie, the judge says b
        ("s1", "H1", "a", "b", None), ("s1", "H2", "b", "a", None), ("s1", "J", "b", "a", "b"),
        # s2: b by two, the judge agrees
        ("s2", "H1", "a", "b", "b"), ("s2", "H2", "b", "a", "b"), ("s2", "J", "a", "b", "b"),
    ]  # fmt: skip
    result = judge_agreement(_table(rows), ["H1", "H2"], bootstrap=0)
    assert result.references == ("H1", "H2")
    assert (result.comparisons, result.without_majority) == (3, 1)
    judge = _row(result, "J")
    assert (judge.comparisons, judge.with_majority) == (3, 2)
    assert judge.agreement.value == pytest.approx(0.5)
    assert judge.agreement_decisive.value == pytest.approx(1.0)  # s2 only
    # each reference against the other: they agree on s1 and s2, and split on s0
    for name in ("H1", "H2"):
        reference = _row(result, name)
        assert reference.reference
        assert reference.agreement.value == pytest.approx(2 / 3)


def test_a_first_slot_judge_flips_every_pair_and_a_consistent_one_none() -> None:
    rows: list[Row] = []
    for s in range(6):
        rows.append((f"s{s}", "H", "a", "b", "a"))
        for first, second in (("a", "b"), ("b", "a")):
            rows.append((f"s{s}", "slot", first, second, first))
            rows.append((f"s{s}", "steady", first, second, "a"))
    result = judge_agreement(_table(rows), ["H"], bootstrap=0)
    slot, steady = _row(result, "slot"), _row(result, "steady")
    assert slot.flip_share.value == 1.0 and slot.position_bias.value == 1.0
    assert slot.flip_pairs == 6.0
    assert slot.agreement.value == pytest.approx(0.5)
    assert steady.flip_share.value == 0.0 and steady.position_bias.value == 0.5
    # a always wins, and steady always says so: a coin would agree half the time
    assert steady.agreement.value == 1.0 and steady.kappa.value == 1.0
    assert result.judges[0].judge == "steady"  # best agreement first


def test_length_preference_counts_decisive_verdicts_with_known_different_lengths() -> None:
    rows: list[Row] = [
        ("s0", "H", "a", "b", "a"),
        ("s0", "J", "a", "b", "a"),  # a is longer: for the longer
        ("s0", "J", "b", "a", "a"),  # a is longer: for the longer
        ("s1", "H", "a", "b", "a"),
        ("s1", "J", "a", "b", "b"),  # b shorter: against
        ("s1", "J", "b", "a", None),  # a tie: not counted
        ("s2", "H", "a", "b", "a"),
        ("s2", "J", "a", "b", "b"),  # equal lengths: not counted
        ("s2", "J", "b", "a", "b"),  # a length unknown: not counted
    ]
    nan = float("nan")
    lengths = [(1, 1), (9, 3), (3, 9), (1, 1), (9, 3), (3, 9), (1, 1), (5, 5), (nan, 4)]
    result = judge_agreement(_table(rows, lengths), ["H"], bootstrap=0)
    assert _row(result, "J").longer_preference.value == pytest.approx(2 / 3)
    without = judge_agreement(_table(rows), ["H"], bootstrap=0)
    assert np.isnan(_row(without, "J").longer_preference.value)
    assert _row(without, "J").longer_preference.record()["value"] is None


def _random_rows(scenarios: int, seed: int) -> list[Row]:
    rng = np.random.default_rng(seed)
    rows: list[Row] = []
    for s in range(scenarios):
        truth = rng.choice(["a", "b", None])
        rows.append((f"s{s}", "H", "a", "b", truth))
        for judge, accuracy in (("good", 0.85), ("poor", 0.5)):
            for first, second in (("a", "b"), ("b", "a")):
                said = truth if rng.random() < accuracy else rng.choice(["a", "b", None])
                rows.append((f"s{s}", judge, first, second, said))
    return rows


def test_a_merged_row_of_weight_two_counts_as_two_rows() -> None:
    rows = _random_rows(30, seed=1)
    table = _table(rows)
    doubled = _table(rows + [r for r in rows if r[1] == "poor"])
    poor = table.judge == table.models.index("poor")
    merged = table.with_weight(np.where(poor, 2.0, 1.0))
    assert judge_agreement(doubled, ["H"], bootstrap=100, seed=4).record() == (
        judge_agreement(merged, ["H"], bootstrap=100, seed=4).record()
    )


def test_intervals_hold_the_estimate_and_narrow_with_more_scenarios() -> None:
    def widths(scenarios: int) -> dict[str, float]:
        result = judge_agreement(_table(_random_rows(scenarios, seed=2)), ["H"], bootstrap=200)
        row = _row(result, "good")
        out = {}
        for name in ("agreement", "kappa", "flip_share", "position_bias"):
            estimate = getattr(row, name)
            assert estimate.low <= estimate.value <= estimate.high, name
            out[name] = estimate.high - estimate.low
        return out

    small, large = widths(40), widths(640)
    assert all(large[k] < small[k] for k in small), (small, large)


def test_the_bootstrap_is_seeded_and_drawn_in_chunks_alike(monkeypatch: pytest.MonkeyPatch) -> None:
    table = _table(_random_rows(20, seed=3))
    one = judge_agreement(table, ["H"], bootstrap=60, seed=7).record()
    assert judge_agreement(table, ["H"], bootstrap=60, seed=7).record() == one
    monkeypatch.setattr("eigenjury.stats.judge_agreement.CHUNK_CELLS", 20 * 25)
    chunked = judge_agreement(table, ["H"], bootstrap=60, seed=7).record()
    row = chunked["judges"][0]
    assert row["agreement"]["ci"][0] <= row["agreement"]["value"] <= row["agreement"]["ci"][1]
    assert chunked["judges"][0]["agreement"]["value"] == one["judges"][0]["agreement"]["value"]


def test_references_the_data_cannot_support_are_refused_with_the_judges_named() -> None:
    table = _table([("s0", "H", "a", "b", "a"), ("s0", "J", "b", "a", "a"),
                    ("s1", "K", "a", "b", "b")])  # fmt: skip
    with pytest.raises(DataError, match=r"no judge named 'X'.*H, J, K"):
        judge_agreement(table, ["X"])
    with pytest.raises(DataError, match="no reference judge"):
        judge_agreement(table, [" ", ""])
    with pytest.raises(DataError, match="'K' shares no comparison"):
        judge_agreement(table, ["K"])
    with pytest.raises(DataError, match="no judge named 'a'"):
        judge_agreement(table, ["a"])  # an evaluee that never judged


ESTIMATES = ("agreement", "agreement_decisive", "kappa", "flip_share", "position_bias",
             "longer_preference")  # fmt: skip


def _numbers(row: AgreementRow) -> list[float]:
    """Every number of a row, intervals included, unrounded."""
    counts = [row.comparisons, row.with_majority, row.verdicts, row.flip_pairs]
    return counts + [x for name in ESTIMATES for x in dataclasses.astuple(getattr(row, name))]


def test_every_number_of_the_table_is_the_same_whatever_the_models_are_called() -> None:
    verdicts = draw(scenarios=40, seed=11)
    in_strength_order = verdicts.table()
    # the case that once changed kappa: coded in strength order, the lower-coded
    # evaluee wins most decisive verdicts (under other names, about half)
    first, second, said = (
        in_strength_order.first,
        in_strength_order.second,
        in_strength_order.verdict,
    )
    low_won = (said == 1) == (first < second)
    assert low_won[said != 0].mean() > 0.75
    names, order = renamed_and_shuffled(verdicts, seed=12)
    renamed = verdicts.table(names, order)
    assert sorted(renamed.models) != [names[m] for m in in_strength_order.models]  # coded anew

    result = judge_agreement(in_strength_order, REFERENCES, bootstrap=200, seed=3)
    again = judge_agreement(renamed, [names[r] for r in REFERENCES], bootstrap=200, seed=3)

    assert again.references == tuple(names[r] for r in REFERENCES)
    assert (again.comparisons, again.without_majority) == (
        result.comparisons,
        result.without_majority,
    )
    assert result.without_majority > 0  # the references split on some comparisons
    rows = {r.judge: r for r in again.judges}
    for row in result.judges:
        np.testing.assert_array_equal(_numbers(rows[names[row.judge]]), _numbers(row), row.judge)
        if not row.reference:
            assert all(np.isfinite(_numbers(row))), row.judge  # nothing equal by being NaN
    assert [names[r.judge] for r in result.judges] == [r.judge for r in again.judges]
    kappa = {r.judge: r.kappa.value for r in result.judges}
    assert kappa["sharp"] > kappa["model-0"] > kappa["dull"] > 0


def _copy_of(verdicts: Verdicts, reference: str, name: str, verdict: np.ndarray) -> Verdicts:
    """`verdicts` with a judge `name` that saw the reference's pairs in its order and
    said `verdict` (one per reference row)."""
    own = verdicts.judge == reference
    parts = {f.name: getattr(verdicts, f.name) for f in dataclasses.fields(Verdicts)}
    added = {k: v[own] for k, v in parts.items()} | {"judge": np.full(own.sum(), name),
                                                     "verdict": verdict}  # fmt: skip
    return Verdicts(**{k: np.concatenate([parts[k], added[k]]) for k in parts})


def test_kappa_is_one_for_a_copy_zero_for_a_coin_and_negative_for_a_contrarian() -> None:
    verdicts = draw(scenarios=60, seed=21, judges=(Judge("crowd-1", 1.0, 0.2, both_orders=False),))
    reference = verdicts.verdict[verdicts.judge == "crowd-1"]
    rng = np.random.default_rng(22)
    tie = reference == 0
    # the coin has the reference's marginals: its tie rate, and either evaluee alike
    coin = np.where(rng.random(len(reference)) < tie.mean(), 0, rng.integers(1, 3, len(reference)))
    for name, said in (
        ("copy", reference),
        ("coin", coin),
        ("contrarian", np.where(tie, 0, 3 - reference)),
    ):
        verdicts = _copy_of(verdicts, "crowd-1", name, said)
    result = judge_agreement(verdicts.table(), ["crowd-1"], bootstrap=400, seed=5)
    copy, coin_row, contrarian = (_row(result, n).kappa for n in ("copy", "coin", "contrarian"))
    assert (copy.value, copy.low, copy.high) == (1.0, 1.0, 1.0)
    assert coin_row.low < 0.0 < coin_row.high and abs(coin_row.value) < 0.05
    # the contrarian agrees on ties only: observed t against chance t^2 + (1 - t)^2 / 2
    assert contrarian.high < 0.0
    t = tie.mean()
    chance = t * t + (1 - t) ** 2 / 2
    assert contrarian.value == pytest.approx((t - chance) / (1 - chance))
