"""The shared kit of every HTML report and of the viewer: styles, escaping, tables,
and the page around them.

Every piece of text that came from a model, a contract, a config or a data file is
untrusted input: it goes through `e` (or `table`, which escapes every cell) and never
becomes markup. Static reports carry no scripts and load nothing from elsewhere.
"""

from __future__ import annotations

import html
from typing import Any

CSS = """
body{font:15px/1.45 system-ui,-apple-system,Segoe UI,sans-serif;margin:2rem auto;max-width:1080px;
color:#1d2330;padding:0 1rem}
h1{font-size:1.6rem;margin-bottom:.2rem}h2{font-size:1.2rem;margin-top:2.2rem;
border-bottom:1px solid #dde2ea;padding-bottom:.3rem}
table{border-collapse:collapse;margin:.6rem 0;font-size:.9rem}th,td{padding:.25rem .6rem;
border-bottom:1px solid #eef1f5;text-align:right}th{background:#f5f7fa}td.l,th.l{text-align:left}
.muted{color:#667085}.warn{background:#fff7e6;border-left:4px solid #f5a623;padding:.4rem .8rem}
details{margin:.4rem 0;border:1px solid #e4e8ee;border-radius:6px;padding:.4rem .8rem}
summary{cursor:pointer;font-weight:600}pre{white-space:pre-wrap;background:#f7f8fa;
padding:.5rem;border-radius:4px;font-size:.85rem;max-height:22rem;overflow:auto}
svg text{font:12px system-ui,sans-serif;fill:#1d2330}
"""


def e(value: Any) -> str:
    """Escape anything for HTML text or attribute context."""
    return html.escape("" if value is None else str(value), quote=True)


def fmt(value: Any, spec: str = ".0f") -> str:
    return "-" if value is None else format(value, spec)


def table(headers: list[str], rows: list[list[Any]], left: int = 1) -> str:
    head = "".join(
        f'<th class="{"l" if i < left else ""}">{e(h)}</th>' for i, h in enumerate(headers)
    )
    body = "".join(
        "<tr>"
        + "".join(f'<td class="{"l" if i < left else ""}">{e(c)}</td>' for i, c in enumerate(row))
        + "</tr>"
        for row in rows
    )
    return f"<table><tr>{head}</tr>{body}</table>"


def page(title: str, body: str, *, css: str = "") -> str:
    """A whole self-contained page: `title` is escaped here, `body` is markup already
    built with `e` and `table`."""
    head, tail = page_ends(title, css=css)
    return head + body + tail


def page_ends(title: str, *, css: str = "") -> tuple[str, str]:
    """What goes before and after a page's body, for a page written in pieces."""
    return (
        f"<!doctype html><html lang=en><head><meta charset=utf-8><title>{e(title)}</title>"
        f"<style>{CSS}{css}</style></head><body>",
        "</body></html>",
    )


def with_ci(value: float | None, ci: list[float] | None, fmt: str) -> str:
    """ "value [low, high]"; "-" when there is no value."""
    if value is None:
        return "-"
    if not ci:
        return format(value, fmt)
    return f"{format(value, fmt)} [{format(ci[0], fmt)}, {format(ci[1], fmt)}]"


def estimate_text(estimate: dict[str, Any] | None, spec: str = ".3f") -> str:
    """An `Estimate.record()` as "value [low, high]" ("-" when undefined)."""
    if not estimate or estimate["value"] is None:
        return "-"
    lo, hi = estimate["ci"]
    value = estimate["value"]
    if lo is None or hi is None:
        return format(value, spec)
    return f"{format(value, spec)} [{format(lo, spec)}, {format(hi, spec)}]"


def money(value: float | None) -> str:
    return "unknown" if value is None else f"${value:.4f}"
