"""Bias-bounded evaluation (A-BB): neighbours, sensitivity through the engine, release.

The math lives in `eigenjury.stats.abb`; this package puts judges and neighbours
through the engine and applies the mechanism to score files. See docs/bounds.md.
"""

from eigenjury.bounds.judges import JudgeProtocol
from eigenjury.bounds.measure import MeasureSettings, Profile, measure, read_dataset
from eigenjury.bounds.neighbours import (
    GENERATOR_NAMES,
    LOCAL_GENERATORS,
    JudgedItem,
    NeighbourGenerator,
    Paraphraser,
    protected_spans,
)
from eigenjury.bounds.release import Release, ReleaseSettings, release, release_record
from eigenjury.bounds.scores import SCALES, Scale, ScoreSet, read_scores

__all__ = [
    "GENERATOR_NAMES",
    "LOCAL_GENERATORS",
    "SCALES",
    "JudgeProtocol",
    "JudgedItem",
    "MeasureSettings",
    "NeighbourGenerator",
    "Paraphraser",
    "Profile",
    "Release",
    "ReleaseSettings",
    "Scale",
    "ScoreSet",
    "measure",
    "protected_spans",
    "read_dataset",
    "read_scores",
    "release",
    "release_record",
]
