"""The peer-ranking leaderboard: a JSON record and a terminal table.

Names come from users (verdict files, configs): they are escaped wherever rich would
read them as markup, and printed without rich's highlighting (its patterns take minutes
over a name of a few hundred thousand characters).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from eigenjury import __version__
from eigenjury.reports.kit import with_ci
from eigenjury.stats.consensus import PeerRanking


def _interval(ci: np.ndarray | None, i: int, digits: int) -> list[float] | None:
    return None if ci is None else [round(float(ci[i, 0]), digits), round(float(ci[i, 1]), digits)]


def ranking_record(ranking: PeerRanking, *, source: str | None = None) -> dict[str, Any]:
    """Everything a fitted PeerRanking reports, as plain JSON-ready data (sorted by rank)."""
    btd = ranking.btd_
    boot = ranking.bootstrap > 0
    elo_ci = ranking.elo_ci_ if boot else None
    trust_ci = ranking.trust_ci_ if boot else None
    rank_ci = ranking.rank_ci_ if boot else None
    order = np.argsort(-ranking.elo_, kind="stable")  # tied ranks keep the input order
    names = ranking.models_
    evaluee_n = ranking.counts_.evaluee_totals()
    judge_n = ranking.counts_.judge_totals()
    models = [
        {
            "name": names[i],
            "elo": round(float(ranking.elo_[i]), 2),
            "elo_ci": _interval(elo_ci, i, 2),
            "trust": round(float(ranking.trust_[i]), 6),
            "trust_ci": _interval(trust_ci, i, 6),
            "rank": int(ranking.rank_[i]),
            "rank_ci": None if rank_ci is None else [int(rank_ci[i, 0]), int(rank_ci[i, 1])],
            "verdicts_as_evaluee": round(float(evaluee_n[i]), 3),
        }
        for i in order
    ]
    judges = [
        {
            "name": names[i],
            "tie_propensity": round(float(btd.tie_propensity_[i]), 4),
            "tie_propensity_ci": _interval(ranking.tie_propensity_ci_ if boot else None, i, 4),
            "position_bias": round(float(btd.position_bias_[i]), 4) if btd.position_bias else None,
            "position_bias_ci": _interval(ranking.position_bias_ci_, i, 4)
            if boot and btd.position_bias
            else None,
            "lens": [round(float(x), 5) for x in btd.lenses_[i]],
            "verdicts": round(float(judge_n[i]), 3),
        }
        for i in range(len(names))
        if btd.judge_mask_[i]
    ]
    return {
        "eigenjury": __version__,
        "method": "low-rank Bradley-Terry-Davidson -> EigenTrust -> Elo",
        "source": source,
        "settings": {
            "dim": ranking.dim,
            "l2": ranking.l2,
            "position_bias": ranking.position_bias,
            "restarts": ranking.restarts,
            "exclude_self": ranking.exclude_self,
            "damping": ranking.damping,
            "anchor": ranking.anchor,
            "anchor_value": ranking.anchor_value,
            "bootstrap": ranking.bootstrap,
            "bootstrap_unit": "scenario",
            "ci": ranking.ci,
            "seed": ranking.seed,
        },
        "models": models,
        "judges": judges,
        "dispositions": {
            n: [round(float(x), 5) for x in btd.dispositions_[i]] for i, n in enumerate(names)
        },
        "trust_matrix": {
            "judges": list(names),
            "evaluees": list(names),
            "rows": np.round(ranking.trust_matrix_, 6).tolist(),
        },
        "fit": {
            "loglik": round(float(btd.loglik_), 4),
            "loglik_per_verdict": round(float(btd.loglik_ / btd.n_verdicts_), 6),
            "objective": float(btd.objective_),
            "iterations": int(btd.n_iter_),
            "converged": bool(btd.converged_),
            "grad_norm": float(btd.grad_norm_),
            "restart_losses": [float(x) for x in btd.restart_losses_],
            "starts_at_best_optimum": btd.n_agreeing_starts_,
            "dim": ranking.dim,
            "verdicts": round(float(btd.n_verdicts_), 3),
            "cells": int(btd.n_cells_),
            "scenarios": int(ranking.n_scenarios_),
            "bootstrap_converged": ranking.bootstrap_converged_ if boot else None,
            "fit_seconds": round(ranking.fit_seconds_, 3),
            "bootstrap_seconds": round(ranking.bootstrap_seconds_, 3),
            "heldout_loglik_per_verdict": _heldout(ranking),
        },
        "warnings": list(ranking.warnings_),
    }


def _heldout(ranking: PeerRanking) -> dict[str, Any] | None:
    if not ranking.cv:
        return None
    score = ranking.heldout_
    return {
        "mean": round(score.mean, 6),
        "stderr": round(score.stderr, 6),
        "folds": ranking.cv,
        "fold_unit": "scenario",
    }


def print_leaderboard(console: Console, record: dict[str, Any]) -> None:
    """The leaderboard, judge diagnostics and fit summary from a ranking record."""
    ci_pct = f"{100 * record['settings']['ci']:g}%"
    table = Table(title="Peer ranking (low-rank BTD + EigenTrust)", title_justify="left")
    table.add_column("rank", justify="right")
    table.add_column(f"rank {ci_pct}", justify="center")
    table.add_column("model")
    table.add_column("Elo", justify="right")
    table.add_column(f"Elo {ci_pct}", justify="center")
    table.add_column("trust", justify="right")
    table.add_column("verdicts", justify="right")
    for m in record["models"]:
        rank_ci = "-" if m["rank_ci"] is None else f"{m['rank_ci'][0]}-{m['rank_ci'][1]}"
        elo_ci = "-" if m["elo_ci"] is None else f"[{m['elo_ci'][0]:.0f}, {m['elo_ci'][1]:.0f}]"
        table.add_row(
            str(m["rank"]),
            rank_ci,
            escape(m["name"]),
            f"{m['elo']:.0f}",
            elo_ci,
            f"{m['trust']:.4f}",
            f"{m['verdicts_as_evaluee']:g}",
        )
    console.print(table)

    judges = Table(title="Judges", title_justify="left")
    judges.add_column("judge")
    judges.add_column("tie propensity", justify="right")
    judges.add_column("position bias (first slot, log-odds)", justify="right")
    judges.add_column("verdicts", justify="right")
    for j in record["judges"]:
        bias = (
            "-"
            if j["position_bias"] is None
            else with_ci(j["position_bias"], j["position_bias_ci"], "+.2f")
        )
        judges.add_row(
            escape(j["name"]),
            with_ci(j["tie_propensity"], j["tie_propensity_ci"], ".2f"),
            bias,
            f"{j['verdicts']:g}",
        )
    console.print(judges)

    fit = record["fit"]
    status = "converged" if fit["converged"] else "[bold red]NOT converged[/]"
    boot = record["settings"]["bootstrap"]
    console.print(
        f"fit: {fit['verdicts']:g} verdicts in {fit['cells']} cells over {fit['scenarios']} "
        f"scenarios; d={fit['dim']}; log-lik/verdict {fit['loglik_per_verdict']:.4f}; "
        f"{fit['iterations']} iterations, {status}; "
        f"{fit['fit_seconds']:.2f}s fit"
        + (
            f", {boot} scenario-bootstrap rounds in {fit['bootstrap_seconds']:.2f}s" if boot else ""
        ),
        highlight=False,
    )
    heldout = fit["heldout_loglik_per_verdict"]
    if heldout:
        console.print(
            f"held-out log-lik/verdict ({heldout['folds']} scenario folds): "
            f"{heldout['mean']:.4f} ± {heldout['stderr']:.4f}",
            highlight=False,
        )
    for w in record["warnings"]:
        console.print(f"[yellow]warning:[/] {escape(w)}", highlight=False)
