"""`eigenjury view` in a real browser: Debian's chromium, headless, driven by Selenium
through Debian's chromedriver (nothing is downloaded at run time). It opens a ranking
run, filters its transcripts, opens a grading run, and checks that a <script> in model
text is shown as text and never runs."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from test_view import SCRIPT, make_runs

from contract_scripts import XSS

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
    from selenium.common.exceptions import NoAlertPresentException
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By
    from selenium.webdriver.remote.webdriver import WebDriver
    from selenium.webdriver.support import expected_conditions as ready
    from selenium.webdriver.support.ui import Select, WebDriverWait

WAIT_S = 20


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
    return webdriver.Chrome(options=options, service=Service(executable_path=str(CHROMEDRIVER)))


@pytest.fixture(scope="module")
def viewer(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    runs = make_runs(tmp_path_factory.mktemp("browser"))
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
def driver() -> Iterator[WebDriver]:
    chrome = browser()
    try:
        yield chrome
    finally:
        chrome.quit()


def visible(driver: WebDriver, css: str) -> None:
    WebDriverWait(driver, WAIT_S).until(ready.visibility_of_element_located((By.CSS_SELECTOR, css)))


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
    WebDriverWait(driver, WAIT_S).until(lambda d: "evaluee=ada" in d.current_url)
    WebDriverWait(driver, WAIT_S).until(lambda d: d.find_element(By.ID, "t-total").text != total)
    Select(driver.find_element(By.ID, "f-verdict")).select_by_value("first")
    WebDriverWait(driver, WAIT_S).until(lambda d: "verdict=first" in d.current_url)
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
    assert XSS in driver.find_element(By.CSS_SELECTOR, "#task pre").text
    assert len(driver.find_elements(By.CSS_SELECTOR, "details.vote-reply")) == 4
    no_script_ran(driver)


def test_a_certificate_shows_its_profile_per_generator(viewer: str, driver: WebDriver) -> None:
    open_run(driver, viewer, "bound/certificate.json")
    visible(driver, "#generators")
    assert "formatting" in driver.find_element(By.ID, "generators").text
    assert "certified" in driver.find_element(By.ID, "guarantee").text
