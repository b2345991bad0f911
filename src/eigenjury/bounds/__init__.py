"""Bias-bounded evaluation (A-BB): neighbours, sensitivity through the engine, release.

The math lives in `eigenjury.stats.abb`; this package puts judges and neighbours
through the engine (`measure_sensitivity`, which is `bounds.measure.run`, returning a
`SensitivityProfile`) and applies the mechanism to score files (`release`, returning a
`BoundCertificate` and the released scores). See docs/bounds.md.

The names below are imported on first use, so reading a bounds record
(`eigenjury.bounds.record`, which the viewer does) loads no engine, numpy or scipy.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from eigenjury.lazy import exports

# name: (module, its name there)
_EXPORTS = {
    "JudgeProtocol": ("eigenjury.bounds.judges", "JudgeProtocol"),
    "MeasureInputs": ("eigenjury.bounds.measure", "MeasureInputs"),
    "MeasureSettings": ("eigenjury.bounds.measure", "MeasureSettings"),
    "measure_sensitivity": ("eigenjury.bounds.measure", "run"),
    "read_dataset": ("eigenjury.bounds.measure", "read_dataset"),
    "GENERATOR_NAMES": ("eigenjury.bounds.neighbours", "GENERATOR_NAMES"),
    "LOCAL_GENERATORS": ("eigenjury.bounds.neighbours", "LOCAL_GENERATORS"),
    "JudgedItem": ("eigenjury.bounds.neighbours", "JudgedItem"),
    "NeighbourGenerator": ("eigenjury.bounds.neighbours", "NeighbourGenerator"),
    "Paraphraser": ("eigenjury.bounds.neighbours", "Paraphraser"),
    "protected_spans": ("eigenjury.bounds.neighbours", "protected_spans"),
    "BoundCertificate": ("eigenjury.bounds.record", "BoundCertificate"),
    "SensitivityProfile": ("eigenjury.bounds.record", "SensitivityProfile"),
    "read_profile": ("eigenjury.bounds.record", "read_profile"),
    "Release": ("eigenjury.bounds.apply", "Release"),
    "ReleaseSettings": ("eigenjury.bounds.apply", "ReleaseSettings"),
    "release": ("eigenjury.bounds.apply", "release"),
    "SCALES": ("eigenjury.bounds.scores", "SCALES"),
    "Scale": ("eigenjury.bounds.scores", "Scale"),
    "ScoreSet": ("eigenjury.bounds.scores", "ScoreSet"),
    "read_scores": ("eigenjury.bounds.scores", "read_scores"),
}
__all__ = [
    "GENERATOR_NAMES",
    "LOCAL_GENERATORS",
    "SCALES",
    "BoundCertificate",
    "JudgeProtocol",
    "JudgedItem",
    "MeasureInputs",
    "MeasureSettings",
    "NeighbourGenerator",
    "Paraphraser",
    "Release",
    "ReleaseSettings",
    "Scale",
    "ScoreSet",
    "SensitivityProfile",
    "measure_sensitivity",
    "protected_spans",
    "read_dataset",
    "read_profile",
    "read_scores",
    "release",
]

if TYPE_CHECKING:
    from eigenjury.bounds.apply import Release, ReleaseSettings, release
    from eigenjury.bounds.judges import JudgeProtocol
    from eigenjury.bounds.measure import MeasureInputs, MeasureSettings, read_dataset
    from eigenjury.bounds.measure import run as measure_sensitivity
    from eigenjury.bounds.neighbours import (
        GENERATOR_NAMES,
        LOCAL_GENERATORS,
        JudgedItem,
        NeighbourGenerator,
        Paraphraser,
        protected_spans,
    )
    from eigenjury.bounds.record import BoundCertificate, SensitivityProfile, read_profile
    from eigenjury.bounds.scores import SCALES, Scale, ScoreSet, read_scores


__getattr__ = exports(__name__, _EXPORTS)
