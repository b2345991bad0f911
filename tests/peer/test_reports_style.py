"""Style control in the ranking's terminal summary and static report: the controlled
leaderboard with the uncontrolled Elo and the rank change beside it, the coefficients
with a reading, the features left out; a ranking without style prints as before."""

from __future__ import annotations

import io
from html.parser import HTMLParser

import pytest
from rich.console import Console

from eigenjury.peer.record import RankingRecord, StyleCoefficient
from eigenjury.reports.ranking import (
    STYLE_ASSUMPTION,
    meaning,
    print_summary,
    render,
    style_reading,
)
from style_records import fitted, with_rank_change

SCRIPT = "<script>alert(1)</script>"


@pytest.fixture(scope="module")
def styled() -> RankingRecord:
    return with_rank_change(fitted(style=("length",)))


@pytest.fixture(scope="module")
def per_judge() -> RankingRecord:
    return fitted(style=("length",), style_per_judge=True)


@pytest.fixture(scope="module")
def plain() -> RankingRecord:
    return fitted()


def printed(record: RankingRecord) -> str:
    out = io.StringIO()
    print_summary(Console(file=out, width=200, color_system=None), record)
    return out.getvalue()


def cells(text: str, first: str) -> list[str]:
    """The cells of the table row (or header, ┃) that starts with `first`."""
    line = next(line for line in text.splitlines() if line[2:].startswith(f"{first} "))
    return [cell.strip() for cell in line.replace("┃", "│").strip().strip("│").split("│")]


def test_a_style_controlled_leaderboard_shows_both_elos_the_change_and_the_coefficients(
    styled: RankingRecord,
) -> None:
    text = printed(styled)
    assert "Peer ranking (low-rank BTD + EigenTrust), Elo with style held equal (length)" in text
    header = cells(text, "rank")
    assert header == ["rank", "rank 95%", "model", "Elo", "Elo 95%", "Elo uncontrolled",
                      "change", "trust", "verdicts"]  # fmt: skip
    for m in styled.models:
        row = cells(text, f"{m.rank:>4}")
        assert row[2] == m.name and row[5] == f"{m.elo_uncontrolled:.0f}"
        assert row[6] == {-1: "-1", 0: "0", 1: "+1"}[m.rank_change or 0]
    assert "change: places a model gains once style is held equal" in text

    (coefficient,) = styled.style.coefficients  # type: ignore[union-attr]
    assert coefficient.ci is not None and coefficient.ci[0] > 0  # the planted taste, found
    low, high = coefficient.ci
    assert cells(text, "length") == [
        "length",
        f"{coefficient.coefficient:+.2f} [{low:+.2f}, {high:+.2f}]",
        "judges favour the longer reply",
    ]
    assert "coefficient: a judge's log-odds of preferring a reply" in text
    assert "left out" not in text  # nothing was dropped


def test_per_judge_coefficients_are_a_row_per_judge_and_feature(per_judge: RankingRecord) -> None:
    text = printed(per_judge)
    assert cells(text, "judge")[:4] == ["judge", "feature", "coefficient 95%", "reading"]
    coefficients = per_judge.style.coefficients  # type: ignore[union-attr]
    assert len(coefficients) == 4
    for c in coefficients:
        row = cells(text, c.judge or "")  # its coefficient (the judges' table comes later)
        assert row[1] == "length" and row[3] in ("favours the longer reply", "no clear effect")


def test_features_left_out_are_named_in_one_line(styled: RankingRecord) -> None:
    dropped = {"headers": "the same difference in every verdict", "bold": "one value per evaluee"}
    style = styled.style.model_copy(update={"dropped": dropped})  # type: ignore[union-attr]
    shown = "left out: headers (the same difference in every verdict); bold (one value per evaluee)"
    text = printed(styled.model_copy(update={"style": style}))
    assert shown in " ".join(text.split())
    page = render(styled.model_copy(update={"style": style}), [])
    assert shown in page


def test_with_every_feature_left_out_only_those_are_named() -> None:
    """Nothing held equal: the leaderboard is the plain one, the style part names the
    features left out and explains no coefficients."""
    record = fitted(constant=True, style=("length",))
    text = printed(record)
    assert text.splitlines()[0].rstrip() == "Peer ranking (low-rank BTD + EigenTrust)"
    assert "uncontrolled" not in text and "Style coefficients" not in text
    assert "left out: length (the same difference in every verdict)" in text
    page = render(record, [])
    section = page[page.index("<h2>Style control</h2>") : page.index("<h2>Trust matrix</h2>")]
    assert "left out: length (the same difference in every verdict)" in section
    assert "Held equal" not in section and "<table>" not in section
    assert "uncontrolled" not in page


@pytest.mark.parametrize(
    ("feature", "judge", "coefficient", "ci", "reading"),
    [
        ("length", None, 0.4, [0.1, 0.7], "judges favour the longer reply"),
        ("length", None, -0.4, [-0.7, -0.1], "judges favour the shorter reply"),
        ("headers", None, 0.2, [-0.1, 0.5], "no clear effect"),
        ("lists", "ada", -0.3, [-0.5, -0.1], "favours the reply with fewer list items"),
        ("bold", None, 0.3, None, "judges lean to the reply with more bold spans (no interval)"),
        ("emoji", None, 0.3, [0.1, 0.5], "judges favour the reply with the higher emoji"),
        # shown as -0.00 [-0.00, -0.00]: no direction is read into it (issue 32)
        ("length", None, -0.00053, [-0.00053, -0.00053], "no effect measured"),
        ("length", None, -0.0041, [-0.0049, -0.0033], "no effect measured"),
        ("length", None, 0.3, [0.3, 0.3], "no effect measured"),  # draws never moved it
        ("bold", None, 0.0, None, "no effect measured"),
    ],
)
def test_each_coefficient_reads_in_words(
    feature: str, judge: str | None, coefficient: float, ci: list[float] | None, reading: str
) -> None:
    c = StyleCoefficient(feature=feature, judge=judge, coefficient=coefficient, ci=ci)
    assert style_reading(c) == reading


def test_a_ranking_without_style_prints_and_renders_as_before(plain: RankingRecord) -> None:
    text = printed(plain)
    assert text.splitlines()[0].rstrip() == "Peer ranking (low-rank BTD + EigenTrust)"
    assert cells(text, "rank") == ["rank", "rank 95%", "model", "Elo", "Elo 95%", "trust",
                                   "verdicts"]  # fmt: skip
    for word in ("uncontrolled", "change", "Style", "style", "left out"):
        assert word not in text
    page = render(plain, [])
    for word in ("uncontrolled", "Style control", "held equal"):
        assert word not in page


class _Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)


def test_the_report_shows_style_control_and_escapes_names(per_judge: RankingRecord) -> None:
    """A model (so a judge) and a feature named as markup stay text in the new parts."""
    data = per_judge.model_dump_json().replace('"model-0"', f'"{SCRIPT}"')
    record = RankingRecord.model_validate_json(data.replace('"length"', '"<i>length"'))
    page = render(record, [])
    parser = _Tags()
    parser.feed(page)
    assert "script" not in parser.tags and "i" not in parser.tags
    section = page[page.index("<h2>Style control</h2>") : page.index("<h2>Trust matrix</h2>")]
    assert "Held equal" in section and "(a - b) / (|a| + |b|)" in section
    assert '<th class="l">judge</th><th class="l">feature</th>' in section
    assert section.count("&lt;script&gt;alert(1)&lt;/script&gt;") == 1  # its coefficient row
    assert section.count('<td class="l">&lt;i&gt;length</td>') == 4  # a row per judge
    assert "Elo with style held equal (&lt;i&gt;length)" in page
    leaderboard = page[page.index("<h2>Leaderboard</h2>") : page.index("<h2>Style control</h2>")]
    assert '<th class="">Elo uncontrolled</th><th class="">change</th>' in leaderboard
    assert '<td class="l">&lt;script&gt;alert(1)&lt;/script&gt;</td>' in leaderboard


def test_markup_in_names_prints_as_written(per_judge: RankingRecord) -> None:
    data = per_judge.model_dump_json().replace('"model-0"', '"[bold]x"')
    text = printed(RankingRecord.model_validate_json(data.replace('"length"', '"[/]"')))
    assert "Elo with style held equal ([/])" in text
    assert cells(text, "[bold]x")[1] == "[/]"  # its coefficient row (the first per judge)


def test_what_held_equal_elo_assumes_is_said_wherever_it_is_shown(
    styled: RankingRecord, plain: RankingRecord
) -> None:
    """The terminal's caption, the meaning sentences and the report say that control
    assumes style moves verdicts only through taste, and name the check; a ranking
    without style control says nothing of it."""
    text = " ".join(printed(styled).split())
    assert (
        "Elo with style held equal assumes style moves verdicts only through the judges' "
        "taste: where longer replies really are better, control removes that substance too "
        "(check: eigenjury style-check)" in text
    )
    assert meaning(styled)[-1] == STYLE_ASSUMPTION and STYLE_ASSUMPTION in text
    page = render(styled, [])
    assert '<p class="muted" id="style-assumption">Elo with style held equal assumes' in page
    assert "eigenjury style-check RUN_DIR" in page
    assert STYLE_ASSUMPTION not in meaning(plain)
    assert "style-check" not in printed(plain) and "style-assumption" not in render(plain, [])
