"""A table read from a file keeps its codes and features compactly (names in 2 bytes a
row, the verdict in 1, counts in single precision, no weights where every row weighs
1), so that 1e8 styled verdicts fit in memory: every analysis must give what it gives
on the same table held in 64 bits, also where the codes' products overflow 16 bits."""

from __future__ import annotations

from dataclasses import asdict, replace
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from eigenjury.peer.agreement import agreement_table
from eigenjury.peer.config import FitSettings
from eigenjury.peer.fitting import baseline_part, peer_ranking, ranking_record
from eigenjury.stats.informative import judge_signals
from eigenjury.stats.verdicts import ReplyFeatures, VerdictTable
from eigenjury.verdict_files import read_verdicts

MODELS = 200  # a code times the model count passes 2^15


def _battles(path: Path) -> Path:
    """Three judges each judge a scenario's two replies in both orders."""
    rng = np.random.default_rng(3)
    scenarios = 900
    strength = rng.normal(0.0, 1.0, MODELS)
    a = rng.integers(MODELS, size=scenarios)
    b = (a + 1 + rng.integers(MODELS - 1, size=scenarios)) % MODELS
    length = np.rint(np.exp(rng.normal(6.0, 0.5, (scenarios, 2))))
    scenario = np.repeat(np.arange(scenarios), 6)
    swap = np.tile([0, 1], 3 * scenarios).astype(bool)
    first = np.where(swap, b[scenario], a[scenario])
    second = np.where(swap, a[scenario], b[scenario])
    first_length = np.where(swap, length[scenario, 1], length[scenario, 0])
    second_length = np.where(swap, length[scenario, 0], length[scenario, 1])
    half = 0.5 * (strength[first] - strength[second])
    logits = np.column_stack([np.full(len(first), -1.0), half, -half])
    p = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
    verdict = (rng.random(len(first))[:, None] > p.cumsum(axis=1)).sum(axis=1)
    names = np.array([f"model-{i:03d}" for i in range(MODELS)])
    table = pa.table(
        {
            "scenario": [f"q{i}" for i in scenario],
            "judge": np.tile(np.repeat(["judge-a", "judge-b", "judge-c"], 2), scenarios),
            "first": names[first],
            "second": names[second],
            "verdict": verdict,
            "first_length": first_length,
            "second_length": second_length,
        }
    )
    pq.write_table(table, path)
    return path


def _wide(table: VerdictTable) -> VerdictTable:
    """The same table in 64 bits."""
    assert table.features is not None
    features = ReplyFeatures(
        table.features.names,
        table.features.first.astype(np.float64),
        table.features.second.astype(np.float64),
    )
    wide = {
        k: getattr(table, k).astype(np.int64)
        for k in ("scenario", "judge", "first", "second", "verdict")
    }
    return replace(table, **wide, weight=np.array(table.weight), features=features)


def _close(a: object, b: object, where: str = "") -> None:
    """Equal records, numbers to their rounding (a value on a rounding boundary may go
    either way where the last bits of a sum differ)."""
    if isinstance(a, dict):
        assert isinstance(b, dict) and a.keys() == b.keys(), where
        for key in a:
            if key not in ("created", "fit_seconds", "bootstrap_seconds", "grad_norm"):
                _close(a[key], b[key], f"{where}.{key}")
    elif isinstance(a, list):
        assert isinstance(b, list) and len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            _close(x, y, f"{where}[{i}]")
    elif isinstance(a, float):
        assert b == pytest.approx(a, rel=1e-9, abs=0.011, nan_ok=True), where
    else:
        assert a == b, where


def test_a_compact_table_gives_what_a_wide_one_does(tmp_path: Path) -> None:
    table = read_verdicts(_battles(tmp_path / "battles.parquet"))
    assert table.judge.dtype == np.int16 and table.verdict.dtype == np.int8
    assert table.scenario.dtype == np.int16 and table.weight.strides == (0,)
    assert table.features is not None and table.features.first.dtype == np.int16
    wide = _wide(table)
    settings = FitSettings(bootstrap=0, dim=1)
    rankings = [peer_ranking(settings, t).fit(t) for t in (table, wide)]
    _close(*(ranking_record(r, source="x").model_dump() for r in rankings))
    np.testing.assert_allclose(rankings[0].elo_, rankings[1].elo_, atol=1e-6)
    np.testing.assert_allclose(rankings[0].style_coef_, rankings[1].style_coef_, atol=1e-7)
    signals = [[asdict(s) for s in judge_signals(t, ci=0.95, seed=3)] for t in (table, wide)]
    assert signals[0][0]["verdict"] != "unmeasured"
    _close(*signals)
    baselines = [
        baseline_part(t, "model-007", r) for t, r in zip((table, wide), rankings, strict=True)
    ]
    _close(*(b.model_dump() for b in baselines))
    agreements = [
        agreement_table(t, ["judge-a"], bootstrap=40, ci=0.95, seed=1) for t in (table, wide)
    ]
    _close(*(a.model_dump() for a in agreements))


@pytest.mark.parametrize(
    ("values", "kept"),
    [
        ([0.0, 12.0, 32767.0], np.int16),  # counts
        ([0.0, 40000.0], np.float32),  # a count past 2^15
        ([-1.0, 3.0], np.float32),  # a difference could overflow 2 bytes
        ([0.5, 1.25, np.nan], np.float32),  # halves and a missing value
        ([0.1, 2.0], np.float64),  # 0.1 has no single-precision double
        ([1e300, 2.0], np.float64),
    ],
)
def test_features_are_kept_in_the_narrowest_exact_type(values: list[float], kept: type) -> None:
    from eigenjury.verdict_files.reading import _compact

    array = np.array(values)[:, None]
    compact = _compact(array)
    assert compact.dtype == kept
    np.testing.assert_array_equal(compact.astype(np.float64), array)
