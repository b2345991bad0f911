"""`eigenjury view` in a real browser: Debian's chromium, headless, driven by Selenium
through Debian's chromedriver (nothing is downloaded at run time). It opens a ranking
run, filters its transcripts, opens a grading run, and checks that a <script> in model
text is shown as text and never runs."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from test_view import SCRIPT, make_runs

from contract_scripts import XSS
from eigenjury.reports.ranking.words import SLOT_BOUND
from peer_scripts import QUALITIES

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
HAVE_BROWSER = CHROMIUM.is_file() and CHROMEDRIVER.is_file()

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(
        not HAVE_BROWSER and not os.environ.get("EIGENJURY_REQUIRE_BROWSER"),
        reason="needs Debian's chromium and chromium-driver (apt-get install chromium "
        "chromium-driver)",
    ),
]

if HAVE_BROWSER or os.environ.get("EIGENJURY_REQUIRE_BROWSER"):
    from selenium import webdriver
    from selenium.common.exceptions import NoAlertPresentException, StaleElementReferenceException
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By
    from selenium.webdriver.remote.webdriver import WebDriver
    from selenium.webdriver.support import expected_conditions as ready
    from selenium.webdriver.support.ui import Select, WebDriverWait

WAIT_S = 20


def wait(driver: WebDriver) -> WebDriverWait[WebDriver]:
    """Waits that look again when the page redraws what they were reading."""
    return WebDriverWait(driver, WAIT_S, ignored_exceptions=(StaleElementReferenceException,))


def browser() -> WebDriver:
    """Headless chromium from Debian's packages (a missing one fails here, never
    downloads)."""
    assert HAVE_BROWSER, (
        f"{CHROMIUM} and {CHROMEDRIVER} are needed (apt-get install chromium chromium-driver)"
    )
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"):
        options.add_argument(flag)
    options.add_argument("--window-size=1400,1000")
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})  # the console, read back
    return webdriver.Chrome(options=options, service=Service(executable_path=str(CHROMEDRIVER)))


def edited(source: Path, target: Path, edit: Callable[[dict[str, Any]], None]) -> None:
    """A copy of the run folder `source` at `target`, its record changed by `edit`."""
    shutil.copytree(source.parent, target.parent)
    record = json.loads(source.read_text())
    edit(record)
    target.write_text(json.dumps(record))


def add_odd_runs(runs: Path) -> None:
    """Runs a user meets that the commands' own tests do not make: the latest ranking
    (`again`) with a run of another population (`other`) between it and the ones it
    shares models with; a grading run whose trace was cut short (`cut`); a certificate
    of a score file without models (no model-level utility); a ranking whose first
    judgment had no verdict and whose second call failed (`failed`); a ranking fitted
    from a verdict file, so with no calls nor transcripts, and one interval degenerate
    (`fitted`); a ranking whose transcripts hold a line that is no object and a line cut
    short after its first bytes (`torn`)."""
    after = runs / "after" / "results.json"
    edited(
        after,
        runs / "again" / "results.json",
        lambda r: r.update(created="2100-01-02T00:00:00+00:00"),
    )

    def renamed(record: dict[str, Any]) -> None:
        text = json.dumps(record)
        for name in QUALITIES:
            text = text.replace(f'"{name}"', f'"{name}-other"')
        record.clear()
        record.update(json.loads(text), created="2100-01-01T00:00:00+00:00")

    edited(after, runs / "other" / "results.json", renamed)
    grade = runs / "grade" / "results.json"
    edited(grade, runs / "cut" / "results.json", lambda r: None)
    with (runs / "cut" / "trace.jsonl").open("a") as trace:
        trace.write('{"task_id": "france", "candidate": "a", "crit\n')
    certificate = runs / "bound" / "certificate.json"
    edited(
        certificate,
        runs / "single" / "certificate.json",
        lambda r: r["utility"].update(models=None),
    )
    edited(runs / "before" / "results.json", runs / "failed" / "results.json", lambda r: None)

    def fitted(record: dict[str, Any]) -> None:  # as `eigenjury fit --out` writes it
        del record["run"]
        record.update(source="verdicts.csv", created="2000-01-01T00:00:00+00:00")
        record["models"][-1]["elo_ci"][0] = -118189.0  # trust 0 in some bootstrap draw

    edited(after, runs / "fitted" / "results.json", fitted)
    (runs / "fitted" / "transcripts.jsonl").unlink()
    edited(runs / "before" / "results.json", runs / "torn" / "results.json", lambda r: None)
    torn = runs / "torn" / "transcripts.jsonl"
    kept = torn.read_text().splitlines(keepends=True)
    cut = next(i for i, line in enumerate(kept) if line.startswith('{"role": "comparison"'))
    kept[cut] = kept[cut][:200] + "\n"  # its head still indexes
    torn.write_text("[1, 2]\n" + "".join(kept))
    transcripts = runs / "failed" / "transcripts.jsonl"
    lines = [json.loads(line) for line in transcripts.read_text().splitlines()]
    first, second = [line for line in lines if line["role"] == "comparison"][:2]
    first.update(verdicts=[None], failure="parse", reply="No opinion.")
    second.update(
        verdicts=None, failure="judge error", error="RateLimitError: slow down", reply=None
    )
    transcripts.write_text("".join(json.dumps(line) + "\n" for line in lines))


def serve(runs: Path) -> Iterator[str]:
    """`eigenjury view` over `runs` in a process of its own, for a fixture: its URL."""
    process = subprocess.Popen(
        [sys.executable, "-m", "eigenjury", "view", str(runs)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert process.stdout is not None
    url = process.stdout.readline().strip()
    try:
        yield url
    finally:
        process.terminate()
        process.wait(timeout=10)


@pytest.fixture(scope="module")
def viewer(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    runs = make_runs(tmp_path_factory.mktemp("browser"))
    add_odd_runs(runs)
    yield from serve(runs)


def session() -> Iterator[WebDriver]:
    """A browser for a fixture, closed after it."""
    chrome = browser()
    try:
        yield chrome
    finally:
        chrome.quit()


@pytest.fixture(scope="module")
def driver() -> Iterator[WebDriver]:
    yield from session()


def visible(driver: WebDriver, css: str) -> None:
    wait(driver).until(ready.visibility_of_element_located((By.CSS_SELECTOR, css)))


def no_script_ran(driver: WebDriver) -> None:
    """The page's only script is its own, and no alert was ever raised."""
    assert driver.execute_script("return document.scripts.length") == 1
    with pytest.raises(NoAlertPresentException):
        driver.switch_to.alert.text  # noqa: B018


def open_run(driver: WebDriver, url: str, where: str) -> None:
    """Open, from the list, the run whose record is at `where`."""
    driver.get(url)
    visible(driver, "#runs")
    rows = driver.find_elements(By.CSS_SELECTOR, "#runs tr")
    row = next(r for r in rows if r.text.endswith(f" {where}"))
    row.find_element(By.CSS_SELECTOR, "a.run").click()


def test_a_ranking_run_its_transcripts_filtered_and_model_text_as_text(
    viewer: str, driver: WebDriver
) -> None:
    open_run(driver, viewer, "before/results.json")
    visible(driver, "#leaderboard")
    rows = driver.find_elements(By.CSS_SELECTOR, "#leaderboard tr")
    assert len(rows) == 1 + 5
    assert driver.find_elements(By.CSS_SELECTOR, "#leaderboard svg circle")
    for table in ("trust", "judges", "lenses", "cost"):
        assert driver.find_element(By.ID, table).is_displayed()
    heat = driver.find_element(By.CSS_SELECTOR, "#trust tr + tr td + td")
    assert heat.value_of_css_property("background-color").startswith("rgba(36, 81, 179")

    visible(driver, "#f-judge")
    total = driver.find_element(By.ID, "t-total").text
    assert total.startswith("96 comparisons")
    Select(driver.find_element(By.ID, "f-evaluee")).select_by_value("ada")
    wait(driver).until(lambda d: "evaluee=ada" in d.current_url)
    wait(driver).until(lambda d: d.find_element(By.ID, "t-total").text != total)
    total = driver.find_element(By.ID, "t-total").text  # ada's, before the verdict filter
    Select(driver.find_element(By.ID, "f-verdict")).select_by_value("first")
    wait(driver).until(lambda d: "verdict=first" in d.current_url)
    # the new page is drawn once its total changes (until then the cards are the old ones)
    wait(driver).until(lambda d: d.find_element(By.ID, "t-total").text != total)
    visible(driver, "details.comparison")
    cards = driver.find_elements(By.CSS_SELECTOR, "details.comparison")
    assert cards and all("ada" in card.text for card in cards)
    cards[0].find_element(By.TAG_NAME, "summary").click()
    replies = [p.text for p in cards[0].find_elements(By.CSS_SELECTOR, ".pair pre")]
    assert any(SCRIPT in reply for reply in replies)  # shown, as text
    no_script_ran(driver)

    driver.get(viewer)
    visible(driver, "#compare")
    driver.find_element(By.ID, "compare").click()
    visible(driver, "#change")
    assert len(driver.find_elements(By.CSS_SELECTOR, "#change tr")) == 1 + 5


def test_a_grading_run_its_vote_grid_and_a_submission_as_text(
    viewer: str, driver: WebDriver
) -> None:
    open_run(driver, viewer, "grade/results.json")
    visible(driver, "#tasks")
    driver.find_element(By.CSS_SELECTOR, "#tasks .open-task").click()  # france, candidate a
    visible(driver, "#votes")
    split = driver.find_elements(By.CSS_SELECTOR, "#votes tr.split")
    assert len(split) == 1 and "lovely" in split[0].text
    jurors = driver.find_elements(By.CSS_SELECTOR, "#votes th span.juror")
    assert jurors and all(  # a spec's short label, its full name on hover
        j.get_attribute("title").startswith("scripted:")
        and j.text == j.get_attribute("title").removeprefix("scripted:")
        for j in jurors
    )
    assert XSS in driver.find_element(By.CSS_SELECTOR, "#task pre").text
    assert len(driver.find_elements(By.CSS_SELECTOR, "details.vote-reply")) == 4
    no_script_ran(driver)


def test_a_certificate_shows_its_profile_per_generator(viewer: str, driver: WebDriver) -> None:
    open_run(driver, viewer, "bound/certificate.json")
    visible(driver, "#generators")
    assert "formatting" in driver.find_element(By.ID, "generators").text
    assert "certified" in driver.find_element(By.ID, "guarantee").text
    # k and where it came from, the bound on the judge's scale; the range step decided
    k = driver.find_element(By.ID, "neighbour-size").text
    assert k.startswith("neighbour size k = 1 · rows per unit")
    assert "points on likert10 [1, 10]" in driver.find_element(By.ID, "raw-bound").text
    assert "worst-case range bound" in driver.find_element(By.TAG_NAME, "body").text
    assert not PLACEHOLDERS.search(driver.find_element(By.TAG_NAME, "body").text)


# What a page must never show: a value the page failed to fill in, or a list of nodes
# turned into text.
PLACEHOLDERS = re.compile(r"\b(undefined|NaN|null|Infinity)\b|\[object \w+\]")


def loaded(driver: WebDriver) -> None:
    """The page has left "Loading…", and a ranking run's transcripts have come."""
    wait(driver).until(
        lambda d: "Loading" not in d.find_element(By.ID, "main").text
        and not d.find_elements(By.ID, "indexing")
        and (not d.find_elements(By.ID, "transcripts") or d.find_elements(By.ID, "t-total")
             or d.find_elements(By.CSS_SELECTOR, "#transcripts .warn"))
    )  # fmt: skip


def test_every_page_renders_without_an_error_or_a_placeholder(
    viewer: str, driver: WebDriver
) -> None:
    """The list, every run (odd ones included) and the comparison of two rankings, with
    each card and vote opened: nothing on the console, nothing unfilled on screen."""
    with urllib.request.urlopen(f"{viewer}api/runs") as answer:
        runs = json.load(answer)["runs"]
    where = {run["where"]: run["id"] for run in runs}
    compare = f"#/compare/{where['before/results.json']}/{where['after/results.json']}"
    pages = ["", compare, *(f"#/run/{run['id']}" for run in runs)]
    driver.get(viewer)
    driver.get_log("browser")
    for page in pages:
        driver.get("about:blank")  # a fresh document each time, not a change of hash
        driver.get(f"{viewer}{page}")
        loaded(driver)
        for button in driver.find_elements(By.CSS_SELECTOR, ".open-task")[:1]:
            button.click()
            visible(driver, "#task *")
        for details in driver.find_elements(By.TAG_NAME, "details"):
            driver.execute_script("arguments[0].open = true", details)
        text = driver.find_element(By.TAG_NAME, "body").text
        near = [text[max(0, m.start() - 80) : m.end() + 40] for m in PLACEHOLDERS.finditer(text)]
        assert not near, (page, near)
        assert not driver.find_elements(By.ID, "error"), page
        problems = [entry["message"] for entry in driver.get_log("browser")]
        assert problems == [], (page, problems)


def test_a_comparison_shows_the_judges_prompt_and_its_verdict_in_words(
    viewer: str, driver: WebDriver
) -> None:
    open_run(driver, viewer, "before/results.json")
    visible(driver, "details.comparison")
    card = driver.find_element(By.CSS_SELECTOR, "details.comparison")
    for details in (card, *card.find_elements(By.TAG_NAME, "details")):
        driver.execute_script("arguments[0].open = true", details)
    prompt = card.find_element(By.CSS_SELECTOR, "details details")
    headings = [h.text for h in prompt.find_elements(By.TAG_NAME, "h4")]
    assert headings[:2] == ["system", "user"]  # each message: its role, then its text
    assert "[object" not in prompt.text and "Reply A" in prompt.text
    assert re.search(r"'s reply \(verdicts?: (first better|second better|tie|unread)", card.text)


def test_the_comparison_form_picks_runs_that_share_models_and_says_when_none_do(
    viewer: str, driver: WebDriver
) -> None:
    driver.get(viewer)
    visible(driver, "#compare")
    driver.find_element(By.ID, "compare").click()
    visible(driver, "#change")
    assert len(driver.find_elements(By.CSS_SELECTOR, "#change tr")) == 1 + 5
    with urllib.request.urlopen(f"{viewer}api/runs") as answer:
        runs = {run["where"]: run["id"] for run in json.load(answer)["runs"]}
    assert runs["again/results.json"] in driver.current_url  # the latest, against
    assert runs["other/results.json"] not in driver.current_url  # not the run before it
    other, before = runs["other/results.json"], runs["before/results.json"]
    driver.get(f"{viewer}#/compare/{other}/{before}")
    visible(driver, "#no-common")
    assert "No model is in both runs" in driver.find_element(By.ID, "no-common").text


def test_transcript_lines_that_cannot_be_read_are_named_and_the_rest_shown(
    viewer: str, driver: WebDriver
) -> None:
    open_run(driver, viewer, "torn/results.json")
    visible(driver, "#t-unreadable")
    note = driver.find_element(By.ID, "t-unreadable").text  # both are on the first page
    assert note.startswith("2 lines of transcripts.jsonl could not be read and are left out: ")
    assert "line 1: not a JSON object but a list; the line at byte " in note
    assert driver.find_element(By.ID, "t-total").text.startswith("96 comparisons")
    card = driver.find_element(By.CSS_SELECTOR, "details.comparison")
    driver.execute_script("arguments[0].open = true", card)
    cut = card.find_element(By.CSS_SELECTOR, ".unreadable").text
    assert cut.startswith("not shown, could not be read: the line at byte ")


def test_a_task_whose_trace_is_damaged_names_it(viewer: str, driver: WebDriver) -> None:
    """The line cut short is named, and the task's other votes are shown."""
    open_run(driver, viewer, "cut/results.json")
    visible(driver, "#tasks")
    driver.find_element(By.CSS_SELECTOR, "#tasks .open-task").click()  # france, candidate a
    visible(driver, "#votes-unreadable")
    assert driver.find_element(By.ID, "votes-unreadable").text.startswith(
        "1 line of trace.jsonl could not be read and is left out: the line at byte "
    )
    assert driver.find_elements(By.CSS_SELECTOR, "#votes td.vote .tag")
    assert driver.find_element(By.ID, "tasks").is_displayed()


def test_a_jury_comparison_shows_each_pools_cost_and_speed(viewer: str, driver: WebDriver) -> None:
    open_run(driver, viewer, "juries/comparison.json")
    visible(driver, "#figures")
    rows = [r.text for r in driver.find_elements(By.CSS_SELECTOR, "#figures tr")]
    assert rows[0] == "per jury-graded criterion pool a pool b a relative to b"
    assert [r.split(" [")[0] for r in rows[1:]] == ["cost (USD) 0.000000", "juror seconds 0.00",
                                                    "output tokens 18.0"]  # fmt: skip
    assert "output_tokens relative to b" in driver.find_element(By.ID, "cascade").text


def test_a_certificate_without_models_and_its_numbers_as_the_report_writes_them(
    viewer: str, driver: WebDriver
) -> None:
    open_run(driver, viewer, "single/certificate.json")
    visible(driver, "#utility")
    assert [r.text.split()[0] for r in driver.find_elements(By.CSS_SELECTOR, "#utility tr")] == [
        "level", "items",
    ]  # fmt: skip
    with urllib.request.urlopen(f"{viewer}api/runs") as answer:
        run = next(r for r in json.load(answer)["runs"] if r["where"] == "single/certificate.json")
    with urllib.request.urlopen(f"{viewer}api/runs/{run['id']}") as answer:
        record = json.load(answer)["record"]
    numbers = dict(
        row.text.rsplit(" ", 1) for row in driver.find_elements(By.CSS_SELECTOR, "#numbers tr")[1:]
    )
    assert numbers["sensitivity"] == f"{record['sensitivity']:.4g}"
    assert numbers["sigma"] == f"{record['sigma']:.4g}" and numbers["dim"] == str(record["dim"])
    assert "judge scripted:bounds-biased" in driver.find_element(By.ID, "main").text
    assert driver.find_element(By.ID, "stability").is_displayed()


def test_a_judgment_without_a_verdict_says_why(viewer: str, driver: WebDriver) -> None:
    open_run(driver, viewer, "failed/results.json")
    visible(driver, "#f-verdict")
    said = []
    for verdict in ("unread", "failed"):  # the terminal's "parse 1, judge error 1"
        Select(driver.find_element(By.ID, "f-verdict")).select_by_value(verdict)
        wait(driver).until(
            lambda d, verdict=verdict: (
                d.find_element(By.ID, "t-total").text.startswith("1 comparison ")
                and d.find_element(By.ID, "f-verdict").get_attribute("value") == verdict
            )
        )
        [card] = driver.find_elements(By.CSS_SELECTOR, "details.comparison")
        driver.execute_script("arguments[0].open = true", card)
        said.append(card.text)
    assert "no verdict counted: parse" in said[0] and "No opinion." in said[0]
    assert "the call failed: RateLimitError: slow down" in said[1]


def test_numbers_round_as_the_terminal_and_report_round_them(
    viewer: str, driver: WebDriver
) -> None:
    """One rule everywhere: the viewer rounds as Python's format does (an exact tie to
    the even digit), so an Elo of 1458.5 reads 1458 in the terminal and the viewer."""
    open_run(driver, viewer, "after/results.json")
    visible(driver, "#leaderboard")
    rng = np.random.default_rng(0)
    values = [(1458.5, 0), (1459.5, 0), (-0.5, 0), (0.125, 2), (2.675, 2), (-2.5, 0)]
    for _ in range(500):
        digits = int(rng.integers(0, 5))
        tie = (int(rng.integers(-(10**6), 10**6)) + 0.5) / 2 ** int(rng.integers(0, 8))
        values += [(tie, digits), (float(rng.uniform(-3000, 3000)), digits)]
    shown = driver.execute_script("return arguments[0].map(([v, d]) => num(v, d))", values)
    assert shown == [format(v, f".{d}f") for v, d in values]
    # and a judge at the slot bound is read as the report reads it (words.SLOT_BOUND)
    bounds = [{"position_bias": b} for b in (SLOT_BOUND, -SLOT_BOUND, 14.2, None)]
    by_slot = driver.execute_script("return arguments[0].map(bySlot)", bounds)
    assert by_slot == [True, True, False, False]


def test_a_ranking_fitted_from_a_verdict_file_has_no_calls_and_a_readable_leaderboard(
    viewer: str, driver: WebDriver
) -> None:
    open_run(driver, viewer, "fitted/results.json")
    visible(driver, "#leaderboard")
    assert (
        "no calls: fitted from the verdict file verdicts.csv"
        in driver.find_element(By.ID, "cost").text
    )
    assert driver.find_element(By.ID, "no-transcripts").is_displayed()
    assert not driver.find_elements(By.ID, "transcripts")  # and none asked for
    judge = driver.find_element(By.CSS_SELECTOR, "#judges tr + tr").text.split()
    # parse failures: unknown, not 0 (then the verdicts, and whether they carry information)
    assert judge[-3] == "-"
    assert judge[-1] in ("informative", "weak", "undetermined", "slight", "unmeasured")
    dots = [
        float(c.get_attribute("cx"))
        for c in driver.find_elements(By.CSS_SELECTOR, "#leaderboard circle")
    ]
    assert max(dots) - min(dots) > 60  # of 228 pixels, despite a bound at -118189
    assert len(driver.find_elements(By.CSS_SELECTOR, "#leaderboard .beyond")) == 1


def test_a_jury_comparison_shows_its_agreement_beside_chance(
    viewer: str, driver: WebDriver
) -> None:
    open_run(driver, viewer, "juries/comparison.json")
    visible(driver, "#agreement")
    text = driver.find_element(By.ID, "agreement").text
    assert "criterion majority agreement" in text
    assert "by chance, at the pools' pass rates" in text
    assert "Cohen's kappa" in text
    no_script_ran(driver)
