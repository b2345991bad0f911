"""The reports of bias bounds: a profile's sensitivity table, a certificate's terminal
lines and its static HTML page, and the files `bound apply` writes.

Everything shown comes from the records (and, for the per-model table, the score file
released); names of models, judges and items are the user's or a model's, so they are
escaped in the terminal and in HTML alike.
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from eigenjury.bounds.apply import Release
from eigenjury.bounds.record import BoundCertificate, SensitivityProfile, StratumPart
from eigenjury.bounds.scores import ScoreSet
from eigenjury.reports.accounting import print_accounting
from eigenjury.reports.kit import e, fmt, page, table
from eigenjury.reports.output import Outputs

RELEASED = "released.csv"  # the released scores, beside the certificate
OLD_RELEASED = "debiased.csv"  # its old name
_CSS = ".guarantee{font-family:ui-monospace,monospace;background:#f5f7fa;padding:.5rem .8rem}"

FloatArray = NDArray[np.float64]


def _number(value: float | None) -> str:
    return fmt(value, ".4f")


def print_profile(console: Console, profile: SensitivityProfile) -> None:
    """The sensitivity per generator, then what the calls cost."""
    grid = Table(
        title=f"Sensitivity of {escape(profile.judge)} ({profile.protocol} judge, m = {profile.m})",
        title_justify="left",
    )
    for name in ("generator", "pairs", "Delta", "upper bound", "beyond jitter", "failures"):
        grid.add_column(name, justify="left" if name in ("generator", "failures") else "right")
    for name, generator in profile.generators.items():
        grid.add_row(
            escape(name),
            str(generator.m),
            _number(generator.estimate),
            f"{_number(generator.upper_bound)} ({generator.confidence:.0%})",
            _number(generator.beyond_jitter),
            escape(", ".join(f"{k} {v}" for k, v in sorted(generator.failures.items())) or "0"),
        )
    console.print(grid)
    for name, generator in profile.generators.items():
        if generator.strata is not None:
            console.print(
                f"{escape(name)}: replies of several sizes, each bounded on its own (Delta "
                f"per item is the worst): {escape(strata_text(generator.strata))}"
            )
    if profile.verdicts is not None:
        console.print(f"verdicts of the served judge's replies: {profile.verdicts.line()}")
    if profile.accounting:
        print_accounting(console, profile.accounting)


def failures_text(profile: SensitivityProfile) -> str:
    """What could not be judged: "unparsed 3 among the originals; error 2 among the
    neighbours" ("" when nothing failed)."""
    neighbours: dict[str, int] = {}
    for generator in profile.generators.values():
        for kind, n in generator.failures.items():
            neighbours[kind] = neighbours.get(kind, 0) + n
    return "; ".join(
        ", ".join(f"{k} {v}" for k, v in sorted(counts.items())) + f" among the {what}"
        for what, counts in (("originals", profile.original_failures), ("neighbours", neighbours))
        if counts
    )


def strata_text(strata: list[StratumPart]) -> str:
    """ "12 items: 3 units, Delta 1 (upper bound 1, 99.5%); 6 items: none measured (the
    range, 1)", per item."""
    parts = []
    for s in strata:
        if s.m == 0:
            parts.append(f"{s.size} items: none measured (the range, 1)")
            continue
        bound = "the range, 1" if s.confidence == 1.0 else f"upper bound {s.upper_bound:.4f}"
        confidence = "" if s.confidence == 1.0 else f", {100 * s.confidence:.4g}%"
        parts.append(
            f"{s.size} items: {s.m:,} units, Delta {_number(s.estimate)} ({bound}{confidence})"
        )
    return "; ".join(parts)


def _level(certificate: BoundCertificate) -> tuple[str, dict[str, float | None]]:
    """The utility a reader cares most about: between models when there are several."""
    utility = certificate.utility
    if utility.models is not None:
        return "model", utility.models.model_dump()
    return "item", utility.items.model_dump()


NO_NOISE = "no noise: deterministic shrinkage"
WHAT_THE_RELEASE_IS = (
    "The release is the scores shrunk toward the centre (alpha x score + (1 - alpha) x "
    "centre) plus noise: it bounds how far a neighbour can move them, and removes no bias "
    "(a judge's preference is shrunk by alpha like the signal beside it)."
)


def neighbour_text(certificate: BoundCertificate) -> str:
    """k and where it came from: "6 (rows per reply; largest: scenario s1, evaluee ada)",
    "8 (given; the scores give 6: ...)"; just k for certificates that do not say."""
    c = certificate
    if c.k_source is None:
        return str(c.neighbour_size)
    largest = "" if c.k_unit is None else f": {c.k_unit}"
    if c.k_source == "given":
        return f"{c.neighbour_size} (given; the scores give {c.k_derived}{largest})"
    return f"{c.neighbour_size} ({c.k_source}{largest})"


def _noise(certificate: BoundCertificate) -> str:
    c = certificate
    return NO_NOISE if c.deterministic else f"sigma {c.sigma:.4g} of sigma_max {c.sigma_max:.4g}"


def _raw_bound(certificate: BoundCertificate) -> str | None:
    """tau read back on the judge's scale: "11.25 points on likert10 [1, 10]"."""
    c = certificate
    if c.raw_bound is None:
        return None
    scale = c.scores.scale
    return f"{c.raw_bound:.4g} points on {scale.name} [{scale.low:g}, {scale.high:g}]"


def confidence_text(certificate: BoundCertificate) -> str | None:
    """Why the sensitivity's upper bound here differs from the one `bound measure`
    printed: the certificate takes it at the confidence its delta demands."""
    c = certificate
    levels = {g.confidence for g in c.generators.values() if g.upper_bound is not None}
    if len(levels) != 1:
        return None
    level = levels.pop()
    bounds = ", ".join(
        f"{name} {g.upper_bound:.4g}" for name, g in c.generators.items() if g.upper_bound
    )
    measured = c.profile.confidence
    compared = (
        ""
        if measured is None or measured == level
        else f"; `bound measure` printed the same profile's bounds at {100 * measured:.4g}%, "
        "so they are lower there"
    )
    return (
        f"sensitivity upper bounds ({bounds}) at {100 * level:.4g}% confidence, the share of "
        f"delta this certificate spends on them{compared}"
    )


def print_certificate(console: Console, certificate: BoundCertificate) -> None:
    """The bound in one line, what it assumes of a neighbour, the signal it kept, and
    the warnings."""
    c = certificate
    if c.plain is not None:
        console.print(escape(c.plain), highlight=False)
    console.print(
        f"certified: P[ ||M(D) - M(D')|| > {c.tau:g} ] <= {c.delta:g} for d = {c.dim} "
        f"items (alpha {c.alpha:.4f}, {_noise(c)}, {c.bias_bound} step)"
    )
    console.print(f"neighbour size k = {escape(neighbour_text(c))}")
    levels = confidence_text(c)
    if levels:
        console.print(escape(levels), highlight=False)
    for name, generator in c.generators.items():
        if generator.strata is not None:
            console.print(
                f"{escape(name)} per unit size (per item): {escape(strata_text(generator.strata))}"
            )
    raw = _raw_bound(c)
    if raw is not None:
        console.print(
            f"bound: tau {c.tau:g} in [0, 1] units; read back on the judge's scale "
            f"(tau / alpha x range) {escape(raw)}"
        )
    level, utility = _level(c)
    console.print(
        f"utility retained ({level} level): Pearson {_number(utility['pearson'])}, Spearman "
        f"{_number(utility['spearman'])}, Kendall {_number(utility['kendall'])}"
    )
    for warning in c.warnings:
        console.print(f"[yellow]warning:[/] {escape(warning)}")


@dataclass(frozen=True)
class ModelShift:
    """A model's mean score before and after the release, in [0, 1] units."""

    model: str
    items: int
    score: float
    released: float


def model_shifts(scores: ScoreSet, released: FloatArray) -> list[ModelShift]:
    """Each model's mean score in the score file and in the release."""
    counts = np.bincount(scores.owner, minlength=len(scores.models))
    before = scores.model_scores(scores.normalised)
    after = scores.model_scores(released)
    return [
        ModelShift(model, int(counts[i]), float(before[i]), float(after[i]))
        for i, model in enumerate(scores.models)
    ]


def released_csv(scores: ScoreSet, released: FloatArray) -> str:
    """Per item: the raw and normalised score, and the released one in both units."""
    models = scores.item_models()
    normalised = scores.normalised
    raw_out = scores.scale.raw(released)
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow(
        ["item", "model", "criterion", "score", "normalised", "released", "released_raw"]
    )
    for i, item in enumerate(scores.items):
        writer.writerow(
            [
                item,
                models[i] or "",
                scores.criteria[i] or "",
                f"{scores.raw[i]:g}",
                f"{normalised[i]:.6g}",
                f"{released[i]:.6g}",
                f"{raw_out[i]:.6g}",
            ]
        )
    return buffer.getvalue()


def render_certificate(certificate: BoundCertificate, models: list[ModelShift]) -> str:
    """The certificate as a self-contained page: the guarantee, what it rests on (the
    sensitivity profile per generator), the settings, and what it cost in signal."""
    c = certificate
    title = f"Bias bound on {c.scores.label}"
    centre = "the batch mean" if c.centre == "batch-mean" else f"{c.centre:g}"
    raw = _raw_bound(c)
    out = [
        f"<h1>{e(title)}</h1>",
        f"<p class=muted>eigenjury {e(c.eigenjury)} · created {e(c.created or 'unknown')} · "
        f"scores on the {e(c.scores.scale.name)} scale [{c.scores.scale.low:g}, "
        f"{c.scores.scale.high:g}], {c.scores.models} model(s) · seed {c.seed}</p>",
    ]
    out.extend(f'<p class="warn">{e(w)}</p>' for w in c.warnings)
    out += [
        "<h2>Guarantee</h2>",
        *([] if c.plain is None else [f'<p class="plain">{e(c.plain)}</p>']),
        f'<p class="guarantee">{e(c.guarantee)}</p>',
        *([] if (levels := confidence_text(c)) is None else [f"<p class=muted>{e(levels)}</p>"]),
        f"<p><b>Bounded:</b> {e(c.bounded)}.</p><p><b>Not bounded:</b> {e(c.not_bounded)}.</p>",
        f"<p>{e(WHAT_THE_RELEASE_IS)}</p>",
        "<h2>Certificate</h2>",
        table(
            ["quantity", "value"],
            [
                ["tau (bound on the L2 change)", f"{c.tau:g}"],
                ["delta (allowed probability of exceeding tau)", f"{c.delta:g}"],
                [
                    "delta spent on sensitivity / Markov step / noise tail",
                    f"{c.split.sensitivity:.4g} / {c.split.markov:.4g} / {c.split.noise:.4g}",
                ],
                ["items d / items a neighbour perturbs k", f"{c.dim} / {neighbour_text(c)}"],
                ["sensitivity Delta used (worst upper bound)", _number(c.sensitivity)],
                [f"bias term ({c.bias_bound} step)", _number(c.bias_term)],
                [f"alpha ({'given' if c.alpha_given else 'chosen'})", _number(c.alpha)],
                ["centre", centre],
                [
                    "threshold (Lipschitz x bias term)",
                    f"{c.threshold:.4g} = {c.lipschitz:.4g} x {c.bias_term:.4g}",
                ],
                [
                    "sigma / sigma_max",
                    f"{c.sigma:.4g} / {c.sigma_max:.4g}"
                    + (f" ({NO_NOISE})" if c.deterministic else ""),
                ],
                *([] if raw is None else [["tau on the judge's scale (tau / alpha x range)", raw]]),
                ["noise radius", f"{c.noise_radius:.4g}"],
                ["smallest feasible tau", f"{c.smallest_feasible_tau:.4g}"],
                ["noise share / min alpha", f"{c.noise_share:g} / {c.min_alpha:g}"],
                ["feasible", "yes" if c.feasible else "no"],
            ],
        ),
        "<h2>Sensitivity profile</h2>",
        f"<p class=muted>Judge {e(c.profile.judge)} ({e(c.profile.protocol)} judge) on "
        f"{c.profile.m} sampled items; jitter (identity neighbours, per item) "
        f"{e(_number(c.profile.jitter))}. Delta is that of one edit of a unit of the worst "
        "size r: sqrt(r) times the per-item RMS change measured on units of that size (each "
        "size is bounded on its own; a size no unit was measured of rests on the range, "
        "sqrt(r)).</p>",
        table(
            [
                "generator",
                "pairs",
                f"Delta (k = {c.neighbour_size})",
                "upper bound",
                "beyond jitter",
                "method",
            ],
            [
                [
                    name,
                    g.m,
                    _number(g.estimate),
                    f"{_number(g.upper_bound)} ({100 * g.confidence:.4g}%)",
                    _number(g.beyond_jitter),
                    g.method,
                ]
                for name, g in c.generators.items()
            ],
        ),
        *(
            f"<p class=muted>{e(name)} per unit size (per item): {e(strata_text(g.strata))}.</p>"
            for name, g in c.generators.items()
            if g.strata is not None
        ),
        "<h2>Utility retained</h2>",
        table(
            ["level", "Pearson", "Spearman", "Kendall"],
            [
                [level, _number(u.pearson), _number(u.spearman), _number(u.kendall)]
                for level, u in (("items", c.utility.items), ("models", c.utility.models))
                if u is not None
            ],
        ),
    ]
    if c.stability is not None:
        s = c.stability
        out += [
            f"<p class=muted>Ranking stability over {s.draws} fresh noise draws (not what "
            "is bounded).</p>",
            table(
                ["Kendall mean", "Kendall 5th percentile", "same top model"],
                [
                    [
                        _number(s.kendall_mean),
                        _number(s.kendall_p05),
                        "-" if s.same_top_model is None else f"{s.same_top_model:.0%}",
                    ]
                ],
                left=0,
            ),
        ]
    if models:
        out += [
            "<h2>Models</h2><p class=muted>Mean score in [0, 1] units.</p>",
            table(
                ["model", "scored items", "score", "released"],
                [[m.model, m.items, _number(m.score), _number(m.released)] for m in models],
            ),
        ]
    return page(title, "".join(out), css=_CSS)


def certificate_outputs(release: Release, scores: ScoreSet) -> Outputs:
    """What `bound apply` writes: certificate.json, released.csv and report.html."""
    return Outputs(
        record=release.certificate,
        files={RELEASED: released_csv(scores, release.released)},
        html=render_certificate(release.certificate, model_shifts(scores, release.released)),
    )
