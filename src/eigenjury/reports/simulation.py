"""The terminal's table of a simulated population's truth (`eigenjury simulate`)."""

from __future__ import annotations

import numpy as np
from rich.console import Console
from rich.table import Table

from eigenjury.peer.record import TruthRecord


def print_truth(console: Console, truth: TruthRecord) -> None:
    """Every model by true Elo, best first, with its trust and judging dispositions."""
    population = truth.population
    clique = set(population.get("greenbeard", ()))
    shown = Table(title="Simulated population (truth)", title_justify="left")
    for col in ("model", "true Elo", "true trust", "tie propensity", "position bias"):
        shown.add_column(col, justify="left" if col == "model" else "right")
    for i in np.argsort(-np.asarray(truth.elo)):
        model = population["models"][i]
        shown.add_row(
            model + (" (greenbeard)" if model in clique else ""),
            f"{truth.elo[i]:.0f}",
            f"{truth.trust[i]:.4f}",
            f"{population['tie_propensity'][i]:.2f}",
            f"{population['position_bias'][i]:+.2f}",
        )
    console.print(shown)
