"""The reports of a peer ranking (`fit`, `rank`, `demo`): the terminal summary (text),
the static HTML report (html) with its inline SVG charts (charts), and the files a run
writes; both renderers say the same things in the same words (words, sentences).
"""

from __future__ import annotations

from eigenjury.reports.ranking.charts import heatmap_svg, leaderboard_svg, plane_svg
from eigenjury.reports.ranking.html import outputs, render
from eigenjury.reports.ranking.sentences import meaning
from eigenjury.reports.ranking.text import print_summary
from eigenjury.reports.ranking.words import (
    STYLE_ASSUMPTION,
    elo_rule,
    intervals_note,
    style_reading,
)

__all__ = [
    "STYLE_ASSUMPTION",
    "elo_rule",
    "heatmap_svg",
    "intervals_note",
    "leaderboard_svg",
    "meaning",
    "outputs",
    "plane_svg",
    "print_summary",
    "render",
    "style_reading",
]
