"""A self-contained HTML report of a peer-ranking run: no scripts, no external files.

Charts are inline SVG drawn here. Every piece of text that came from a model or a
config (replies, reflections, names, personas) is escaped: model output is untrusted
input and must never become markup.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from eigenjury.files import write_text
from eigenjury.reports.accounting import accounting_rows
from eigenjury.reports.kit import CSS, e, fmt, table, with_ci


def leaderboard_svg(models: list[dict[str, Any]]) -> str:
    """Elo with its interval, one row per model, best on top."""
    rows = len(models)
    if not rows:
        return ""
    lows = [m["elo_ci"][0] if m["elo_ci"] else m["elo"] for m in models]
    highs = [m["elo_ci"][1] if m["elo_ci"] else m["elo"] for m in models]
    lo, hi = min(lows), max(highs)
    pad = max(10.0, (hi - lo) * 0.08)
    lo, hi = lo - pad, hi + pad
    width, left, row_h = 760, 190, 26
    plot = width - left - 20

    def x(v: float) -> float:
        return float(left + (v - lo) / (hi - lo) * plot)

    parts = [
        f'<svg width="{width}" height="{rows * row_h + 30}" role="img" '
        'aria-label="Elo with intervals">'
    ]
    for i, (m, a, b) in enumerate(zip(models, lows, highs, strict=True)):
        y = 15 + i * row_h
        parts.append(f'<text x="{left - 8}" y="{y + 4}" text-anchor="end">{e(m["name"])}</text>')
        parts.append(
            f'<line x1="{x(a):.1f}" x2="{x(b):.1f}" y1="{y}" y2="{y}" '
            'stroke="#7a8aa8" stroke-width="4" stroke-linecap="round"/>'
        )
        parts.append(
            f'<circle cx="{x(m["elo"]):.1f}" cy="{y}" r="5" fill="#2f5aa8">'
            f"<title>{e(m['name'])}: {m['elo']:.0f} [{a:.0f}, {b:.0f}]</title></circle>"
        )
    base = rows * row_h + 12
    for tick in _ticks(lo, hi):
        parts.append(
            f'<line x1="{x(tick):.1f}" x2="{x(tick):.1f}" y1="5" y2="{base}" stroke="#eef1f5"/>'
        )
        parts.append(
            f'<text x="{x(tick):.1f}" y="{base + 14}" text-anchor="middle">{tick:.0f}</text>'
        )
    parts.append("</svg>")
    return "".join(parts)


def _ticks(lo: float, hi: float, n: int = 6) -> list[float]:
    step = 10 ** math.floor(math.log10(max((hi - lo) / n, 1e-9)))
    for mult in (1, 2, 5, 10):
        if (hi - lo) / (step * mult) <= n:
            step *= mult
            break
    start = math.ceil(lo / step) * step
    return [start + i * step for i in range(int((hi - start) / step) + 1)]


def heatmap_svg(names: list[str], rows: list[list[float]]) -> str:
    """The trust matrix: row = judge, column = evaluee; darker = more trust."""
    n = len(names)
    if not n:
        return ""
    longest = max(len(str(n)) for n in names)
    cell, left, top = 34, 20 + 7 * longest, 20 + 5 * longest  # room for the labels
    top_value = max(max(r) for r in rows) or 1.0
    parts = [
        f'<svg width="{left + n * cell + 10}" height="{top + n * cell + 10}" role="img" '
        'aria-label="trust matrix">'
    ]
    for j, name in enumerate(names):
        cx = left + j * cell + cell / 2
        parts.append(
            f'<text transform="translate({cx:.1f},{top - 6}) rotate(-45)">{e(name)}</text>'
        )
    for i, (name, row) in enumerate(zip(names, rows, strict=True)):
        y = top + i * cell
        parts.append(
            f'<text x="{left - 6}" y="{y + cell / 2 + 4:.1f}" text-anchor="end">{e(name)}</text>'
        )
        for j, value in enumerate(row):
            shade = int(245 - 200 * (value / top_value))
            parts.append(
                f'<rect x="{left + j * cell}" y="{y}" width="{cell - 1}" height="{cell - 1}" '
                f'fill="rgb({shade},{shade + 5 if shade < 250 else 250},250)">'
                f"<title>{e(name)} trusts {e(names[j])}: {value:.3f}</title></rect>"
            )
    parts.append("</svg>")
    return "".join(parts)


def plane_svg(dispositions: dict[str, list[float]], lenses: dict[str, list[float]]) -> str:
    """Dispositions (dots) and judge lenses (arrows) on the first two latent axes."""
    points = [(n, v[0], v[1] if len(v) > 1 else 0.0, "d") for n, v in dispositions.items()]
    points += [(n, v[0], v[1] if len(v) > 1 else 0.0, "l") for n, v in lenses.items()]
    if not points:
        return ""
    reach = max(max(abs(p[1]), abs(p[2])) for p in points) or 1.0
    size, mid = 460, 230
    scale = (mid - 40) / reach

    def at(a: float, b: float) -> tuple[float, float]:
        return mid + a * scale, mid - b * scale

    parts = [
        f'<svg width="{size}" height="{size}" role="img" aria-label="latent plane">',
        f'<line x1="20" x2="{size - 20}" y1="{mid}" y2="{mid}" stroke="#dde2ea"/>',
        f'<line y1="20" y2="{size - 20}" x1="{mid}" x2="{mid}" stroke="#dde2ea"/>',
        '<defs><marker id="arrow" markerWidth="8" markerHeight="8" refX="6" refY="3" '
        'orient="auto"><path d="M0,0 L6,3 L0,6 z" fill="#c2571a"/></marker></defs>',
    ]
    for name, a, b, kind in points:
        x, y = at(a, b)
        if kind == "l":
            parts.append(
                f'<line x1="{mid}" y1="{mid}" x2="{x:.1f}" y2="{y:.1f}" '
                'stroke="#c2571a" marker-end="url(#arrow)">'
                f"<title>lens of {e(name)}</title></line>"
            )
        else:
            parts.append(
                f'<circle cx="{x:.1f}" cy="{y:.1f}" r="5" fill="#2f5aa8"/>'
                f'<text x="{x + 7:.1f}" y="{y - 6:.1f}">{e(name)}</text>'
            )
    parts.append("</svg>")
    return "".join(parts)


def render(record: dict[str, Any], transcripts: list[dict[str, Any]], *, samples: int = 6) -> str:
    run = record.get("run", {})
    models = record["models"]
    ci = f"{100 * record['settings']['ci']:g}%"
    title = run.get("name") or "Peer ranking"
    out = [
        f"<!doctype html><html lang=en><head><meta charset=utf-8><title>{e(title)}</title>"
        f"<style>{CSS}</style></head><body>",
        f"<h1>{e(title)}</h1>",
    ]
    constitution = run.get("constitution", {})
    out.append(
        f'<p class="muted">Constitution: {e(constitution.get("title"))} · '
        f"{len(models)} models · {run.get('scenarios', '?')} scenarios · "
        f"{e(run.get('design', {}).get('design', ''))} design · "
        f"{run.get('verdicts', record['fit']['verdicts'])} verdicts · eigenjury "
        f"{e(record['eigenjury'])}</p>"
    )
    out.extend(f'<p class="warn">{e(w)}</p>' for w in record.get("warnings", []))
    out.append(
        f"<h2>Leaderboard</h2><p class=muted>Elo from EigenTrust over the low-rank "
        f"BTD fit; bars are {ci} scenario-bootstrap intervals.</p>"
    )
    out.append(leaderboard_svg(models))
    out.append(
        table(
            ["model", "rank", f"rank {ci}", "Elo", f"Elo {ci}", "trust"],
            [
                [
                    m["name"],
                    m["rank"],
                    "-" if not m["rank_ci"] else f"{m['rank_ci'][0]}-{m['rank_ci'][1]}",
                    fmt(m["elo"]),
                    "-" if not m["elo_ci"] else f"[{m['elo_ci'][0]:.0f}, {m['elo_ci'][1]:.0f}]",
                    f"{m['trust']:.4f}",
                ]
                for m in models
            ],
        )
    )
    tm = record["trust_matrix"]
    out.append(
        "<h2>Trust matrix</h2><p class=muted>Row: judge; column: evaluee; darker = "
        "more trust.</p>" + heatmap_svg(tm["judges"], tm["rows"])
    )
    lenses = {j["name"]: j["lens"] for j in record["judges"]}
    out.append(
        "<h2>Dispositions and lenses</h2><p class=muted>Dots: evaluees' dispositions; "
        "arrows: judges' lenses (first two latent axes; axis 1 is the consensus).</p>"
        + plane_svg(record["dispositions"], lenses)
    )
    consistency = run.get("order_consistency", {})
    parse = run.get("parse_failures_by_judge", {})
    out.append("<h2>Judges</h2>")
    out.append(
        table(
            [
                "judge",
                "tie propensity",
                "position bias",
                "pairs in both orders",
                "consistent",
                "same slot won both",
                "parse failures",
            ],
            [
                [
                    j["name"],
                    with_ci(j["tie_propensity"], j["tie_propensity_ci"], ".2f"),
                    with_ci(j["position_bias"], j["position_bias_ci"], "+.2f"),
                    consistency.get(j["name"], {}).get("pairs", 0),
                    fmt(consistency.get(j["name"], {}).get("consistent"), ".0%"),
                    fmt(consistency.get(j["name"], {}).get("same_slot"), ".0%"),
                    parse.get(j["name"], 0),
                ]
                for j in record["judges"]
            ],
        )
    )
    if "greenbeard" in record:
        out.append(_greenbeard(record["greenbeard"]))
    if "objective" in record:
        obj = record["objective"]
        elo = {m["name"]: m["elo"] for m in models}
        out.append(
            f"<h2>Objective check</h2><p class=muted>{obj['questions']} questions with a hidden "
            f"key; Kendall tau between Elo and true accuracy: "
            f"{fmt(obj['kendall_tau_elo_vs_accuracy'], '.3f')}.</p>"
            + table(
                ["model", "Elo", "accuracy"],
                [[n, fmt(elo.get(n)), f"{a:.0%}"] for n, a in obj["accuracy"].items()],
            )
        )
    accounting = run.get("accounting")
    if accounting:
        out.append("<h2>Calls, tokens and cost</h2>")
        rows = accounting_rows(accounting)
        out.append(
            table(
                [
                    "member",
                    "role",
                    "calls",
                    "cached",
                    "errors",
                    "tokens in",
                    "tokens out",
                    "cost USD",
                    "latency p50 s",
                ],
                [
                    [
                        r["model"],
                        r["role"],
                        r["calls"],
                        r["cached"],
                        sum(r["errors"].values()),
                        r["input_tokens"],
                        r["output_tokens"],
                        "unknown" if r["cost_usd"] is None else f"{r['cost_usd']:.4f}",
                        "-" if not r["latency_s"] else f"{r['latency_s']['p50']:.2f}",
                    ]
                    for r in rows
                ],
                left=2,
            )
        )
    out.append(_transcript_samples(transcripts, samples))
    fit = record["fit"]
    out.append(
        f'<p class="muted">Fit: {fit["verdicts"]:g} verdicts, {fit["cells"]} cells, '
        f"d = {fit['dim']}, log-likelihood per verdict {fit['loglik_per_verdict']:.4f}, "
        f"{'converged' if fit['converged'] else 'NOT converged'}.</p></body></html>"
    )
    return "\n".join(out)


def _greenbeard(data: dict[str, Any]) -> str:
    rows = []
    for label in ("with_self_judgments", "without_self_judgments"):
        part = data[label]
        rows.append(
            [
                label.replace("_", " "),
                fmt(part["mean_shift_greenbeards"], "+.1f"),
                fmt(part["mean_shift_others"], "+.1f"),
            ]
        )
    return (
        "<h2>Greenbeard experiment</h2><p class=muted>Members "
        + e(", ".join(data["members"]))
        + " share a marker and were told to favour it; Elo shift against the same run "
        "without those instructions.</p>"
        + table(["fit", "mean shift, greenbeards", "mean shift, others"], rows)
    )


def _transcript_samples(transcripts: list[dict[str, Any]], n: int) -> str:
    comparisons = [t for t in transcripts if t["role"] == "comparison" and t.get("reply")]
    if not comparisons:
        return ""
    out = ["<h2>Sample judgments</h2><p class=muted>Model text is shown as text, escaped.</p>"]
    for t in comparisons[:n]:
        prompt = t["messages"][-1][1] if t["messages"] else ""
        out.append(
            f"<details><summary>{e(t['member'])} judges {e(t.get('first'))} (A) vs "
            f"{e(t.get('second'))} (B) on {e(t.get('scenario'))}</summary>"
            f"<pre>{e(prompt)}</pre><p><b>Judge reply</b></p><pre>{e(t['reply'])}</pre>"
            "</details>"
        )
    return "".join(out)


def write_report(path: Path, record: dict[str, Any], transcripts: list[dict[str, Any]]) -> None:
    write_text(path, render(record, transcripts))
