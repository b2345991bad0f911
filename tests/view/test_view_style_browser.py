"""Style control in `eigenjury view`, in headless chromium (as test_view_browser): a
style-controlled ranking shows the uncontrolled Elo, the rank change and the
coefficients; one without style control shows no style panel."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import test_view_browser as chromium
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from test_view_browser import PLACEHOLDERS, loaded, open_run, visible

from eigenjury.records import write_record
from style_records import fitted, style_check, with_rank_change

pytestmark = chromium.pytestmark


@pytest.fixture(scope="module")
def viewer(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The viewer over four fitted rankings: style-controlled with shared coefficients
    (one feature left out as constant, and a style check beside it), with one per judge
    and no bootstrap, with its only feature left out, and without style control."""
    runs = tmp_path_factory.mktemp("style") / "runs"
    styled = with_rank_change(fitted(style=("length",)))
    assert styled.style is not None
    styled.style.dropped = {"headers": "the same difference in every verdict"}
    records = {
        "styled": styled,
        "judged": fitted(bootstrap=0, style=("length",), style_per_judge=True),
        "constant": fitted(constant=True, style=("length",)),
        "plain": fitted(),
    }
    for name, record in records.items():
        (runs / name).mkdir(parents=True)
        write_record(runs / name / "results.json", record)
    write_record(runs / "styled" / "style-check.json", style_check(styled))
    yield from chromium.serve(runs)


@pytest.fixture(scope="module")
def driver() -> Iterator[WebDriver]:
    yield from chromium.session()


def rows(driver: WebDriver, table: str) -> list[list[str]]:
    """The table's rows, header first, as the text of their cells."""
    return [
        [cell.text for cell in row.find_elements(By.CSS_SELECTOR, "th, td")]
        for row in driver.find_elements(By.CSS_SELECTOR, f"#{table} tr")
    ]


def shown(driver: WebDriver, url: str, where: str) -> str:
    """Open the run at `where`; its page's text, checked for placeholders and for
    errors on the console."""
    open_run(driver, url, where)
    visible(driver, "#leaderboard")
    loaded(driver)
    text = driver.find_element(By.TAG_NAME, "body").text
    assert not PLACEHOLDERS.search(text), [m[0] for m in PLACEHOLDERS.finditer(text)]
    assert [entry["message"] for entry in driver.get_log("browser")] == []
    return text


def test_a_style_controlled_ranking_shows_both_elos_the_change_and_the_coefficients(
    viewer: str, driver: WebDriver
) -> None:
    text = shown(driver, viewer, "styled/results.json")
    board = rows(driver, "leaderboard")
    assert board[0] == ["rank", "model", "Elo", "", "Elo uncontrolled", "change", "trust",
                        "rank interval"]  # fmt: skip
    assert [row[5] for row in board[1:]] == ["0", "0", "-1", "+1"]
    assert all(row[4].isdigit() for row in board[1:])
    assert driver.find_element(By.CSS_SELECTOR, "#leaderboard .up").text == "+1"
    assert "Elo with style held equal (length)" in driver.find_element(By.ID, "held-equal").text
    assumption = driver.find_element(By.ID, "style-assumption").text
    assert "assumes that style reaches the verdicts only through the judges' taste" in assumption
    assert "eigenjury style-check RUN_DIR" in assumption
    assert "eigenjury style-check" in text.split("What this means")[1]  # and in the sentences
    style = rows(driver, "style")
    assert style[0] == ["feature", "coefficient 95%", "reading"]
    (feature, coefficient, reading) = style[1]
    assert feature == "length" and coefficient.startswith("+0.") and " [+0." in coefficient
    assert reading == "judges favour the longer reply"
    assert "Style control" in text and "Held equal" in text
    assert driver.find_element(By.ID, "style-dropped").text == (
        "left out: headers (the same difference in every verdict)"
    )


def test_per_judge_coefficients_without_intervals_are_a_row_per_judge(
    viewer: str, driver: WebDriver
) -> None:
    shown(driver, viewer, "judged/results.json")
    style = rows(driver, "style")
    assert style[0] == ["judge", "feature", "coefficient 95%", "reading"]
    assert [row[0] for row in style[1:]] == ["model-0", "model-1", "model-2", "model-3"]
    for _, feature, coefficient, reading in style[1:]:
        assert feature == "length" and "[" not in coefficient
        assert reading == "leans to the longer reply (no interval)"
    assert not driver.find_elements(By.ID, "style-dropped")


def test_with_every_feature_left_out_only_those_are_named(viewer: str, driver: WebDriver) -> None:
    shown(driver, viewer, "constant/results.json")
    assert "Elo uncontrolled" not in rows(driver, "leaderboard")[0]
    assert not driver.find_elements(By.ID, "style") and not driver.find_elements(
        By.ID, "held-equal"
    )
    assert driver.find_element(By.ID, "style-dropped").text == (
        "left out: length (the same difference in every verdict)"
    )


def test_a_ranking_without_style_control_has_no_style_panel(viewer: str, driver: WebDriver) -> None:
    text = shown(driver, viewer, "plain/results.json")
    assert rows(driver, "leaderboard")[0] == ["rank", "model", "Elo", "", "trust", "rank interval"]
    headings = [h.text for h in driver.find_elements(By.TAG_NAME, "h2")]
    assert "Style control" not in headings and "Leaderboard" in headings
    for absent in ("style", "held-equal", "style-dropped", "style-assumption"):
        assert not driver.find_elements(By.ID, absent)
    assert "held equal" not in text and "uncontrolled" not in text


def test_a_style_check_shows_each_judges_taste_beside_the_fitted_coefficient(
    viewer: str, driver: WebDriver
) -> None:
    open_run(driver, viewer, "styled/style-check.json")
    visible(driver, "#tastes")
    loaded(driver)
    text = driver.find_element(By.TAG_NAME, "body").text
    assert not PLACEHOLDERS.search(text), [m[0] for m in PLACEHOLDERS.finditer(text)]
    assert [entry["message"] for entry in driver.get_log("browser")] == []
    tastes = rows(driver, "tastes")
    assert tastes[0] == ["judge", "longer / shorter / tie", "share for the longer", "taste",
                         "fitted coefficient", "fitted minus taste", "reading"]  # fmt: skip
    assert tastes[1][:4] == ["model-0", "55 / 21 / 4", "71% [50%, 70%]", "+0.62 [+0.30, +0.95]"]
    pooled = tastes[3]
    assert pooled[0] == "all judges, pooled" and pooled[4] == "+1.10 [+0.80, +1.40]"
    assert pooled[5] == "+0.80 [+0.44, +1.16]" and "substance" in pooled[6]
    board = rows(driver, "at-taste")
    assert board[0] == ["rank", "model", "Elo at taste", "Elo controlled", "Elo uncontrolled"]
    assert len(board) == 5
    assert "Pooled over judges, the longer same-content reply got 60%" in text
