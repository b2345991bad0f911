"""The static report's charts, inline SVG drawn here (the report carries no
scripts): the leaderboard with intervals, the trust matrix, the latent plane."""

from __future__ import annotations

import math

from eigenjury.peer.record import ModelRow
from eigenjury.reports.kit import e
from eigenjury.reports.ranking.words import elo_ci_cell


def leaderboard_svg(models: list[ModelRow]) -> str:
    """Elo with its interval, one row per model, best on top."""
    rows = len(models)
    if not rows:
        return ""
    lows = [_end(m, 0, -math.inf) for m in models]
    highs = [_end(m, 1, math.inf) for m in models]
    # every interval, but no wider than twice the spread of the points either side of them
    # (at least 100): one degenerate interval (a trust of zero in some bootstrap draw
    # puts Elo near minus infinity) must not squash the others; it ends in an arrowhead
    elos = [m.elo for m in models]
    spread = max(max(elos) - min(elos), 100.0)
    lo, hi = max(min(lows), min(elos) - 2 * spread), min(max(highs), max(elos) + 2 * spread)
    pad = max(10.0, (hi - lo) * 0.08)
    lo, hi = lo - pad, hi + pad
    width, left, row_h = 760, 190, 26
    plot = width - left - 20

    def x(v: float) -> float:
        return float(left + (min(max(v, lo), hi) - lo) / (hi - lo) * plot)

    parts = [
        f'<svg width="{width}" height="{rows * row_h + 30}" role="img" '
        'aria-label="Elo with intervals">'
    ]
    for i, (m, a, b) in enumerate(zip(models, lows, highs, strict=True)):
        y = 15 + i * row_h
        parts.append(f'<text x="{left - 8}" y="{y + 4}" text-anchor="end">{e(m.name)}</text>')
        parts.append(
            f'<line x1="{x(a):.1f}" x2="{x(b):.1f}" y1="{y}" y2="{y}" '
            'stroke="#7a8aa8" stroke-width="4" stroke-linecap="round"/>'
        )
        for end, tip, back in ((a, x(lo), 8), (b, x(hi), -8)):
            if not lo <= end <= hi:  # runs past the axis: an arrowhead at its edge
                parts.append(
                    f'<path class="beyond" d="M{tip:.1f} {y} l{back} -6 v12 z" fill="#7a8aa8"/>'
                )
        parts.append(
            f'<circle cx="{x(m.elo):.1f}" cy="{y}" r="5" fill="#2f5aa8">'
            f"<title>{e(m.name)}: {m.elo:.0f} {e(elo_ci_cell(m))}</title></circle>"
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


def _end(m: ModelRow, side: int, unlimited: float) -> float:
    """One end of a model's Elo interval for a chart: the point without an interval,
    `unlimited` where the interval has no limit on that side."""
    if not m.elo_ci:
        return m.elo
    end = m.elo_ci[side]
    return unlimited if end is None else end


def _ticks(lo: float, hi: float, n: int = 6) -> list[float]:
    step = 10 ** math.floor(math.log10(max((hi - lo) / n, 1e-9)))
    for mult in (1, 2, 5, 10):
        if (hi - lo) / (step * mult) <= n:
            step *= mult
            break
    start = math.ceil(lo / step) * step
    return [start + i * step for i in range(int((hi - start) / step) + 1)]


def heatmap_svg(judges: list[str], evaluees: list[str], rows: list[list[float]]) -> str:
    """The trust matrix: row = judge, column = evaluee; darker = more trust."""
    if not judges or not evaluees:
        return ""
    longest_row = max(len(n) for n in judges)
    longest_column = max(len(n) for n in evaluees)
    # room for the labels: row labels to the left, column labels slanted up and to the
    # right (the last one past the grid by as much as it rises)
    cell, left, top = 34, 20 + 7 * longest_row, 20 + 5 * longest_column
    right = max(10, top - cell // 2)
    top_value = max(max(r) for r in rows) or 1.0
    parts = [
        f'<svg width="{left + len(evaluees) * cell + right}" '
        f'height="{top + len(judges) * cell + 10}" role="img" aria-label="trust matrix">'
    ]
    for j, name in enumerate(evaluees):
        cx = left + j * cell + cell / 2
        parts.append(
            f'<text transform="translate({cx:.1f},{top - 6}) rotate(-45)">{e(name)}</text>'
        )
    for i, (name, row) in enumerate(zip(judges, rows, strict=True)):
        y = top + i * cell
        parts.append(
            f'<text x="{left - 6}" y="{y + cell / 2 + 4:.1f}" text-anchor="end">{e(name)}</text>'
        )
        for j, value in enumerate(row):
            shade = int(245 - 200 * (value / top_value))
            parts.append(
                f'<rect x="{left + j * cell}" y="{y}" width="{cell - 1}" height="{cell - 1}" '
                f'fill="rgb({shade},{shade + 5 if shade < 250 else 250},250)">'
                f"<title>{e(name)} trusts {e(evaluees[j])}: {value:.3f}</title></rect>"
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
