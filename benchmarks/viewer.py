"""`eigenjury view` on a ranking run of 100,000 comparisons: time to first paint and
to a filtered transcript page.

The run is made here: its results.json by `eigenjury simulate` + `eigenjury fit --out`
(12 models), its transcripts.jsonl written directly in the format `rank` writes (one
line per call; replies of realistic length, so comparison lines are 2-4 KB and the
file several hundred MB). Each repeat starts a fresh `eigenjury view`, then measures in
Debian's headless chromium (Selenium, chromium-driver) and over HTTP:

- first paint: navigation start to the leaderboard visible, on the run's page;
- the run page's API answer (cold, on the fresh server);
- transcripts indexed: the run page opened to the first transcript page answered;
- a filtered page: judge + verdict filter, page 2, in the API (index built) and in the
  browser (a fresh page load of its address to its cards shown).

    python benchmarks/viewer.py [--comparisons 100000] [--repeats 5] [--quick]
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support import expected_conditions as ready
from selenium.webdriver.support.ui import WebDriverWait

from _common import environment, table

MODELS = 12
GROUP = 4  # evaluees per scenario: 12 ordered pairs, one judge each
WORDS = ("consider", "how", "this", "feels", "to", "everyone", "involved", "before", "acting",
         "and", "speak", "kindly", "about", "what", "worries", "you", "then", "offer", "one",
         "practical", "step", "you", "could", "take", "today")  # fmt: skip


def text(rng: random.Random, low: int, high: int) -> str:
    return " ".join(rng.choices(WORDS, k=rng.randint(low, high))).capitalize() + "."


def make_run(folder: Path, comparisons: int) -> tuple[list[str], int]:
    """A ranking run folder; returns the model names and the transcripts' size."""
    scenarios = max(1, comparisons // (GROUP * (GROUP - 1)))
    sim = folder / "sim"
    eigenjury = [sys.executable, "-m", "eigenjury"]
    simulate = ["simulate", "--out", str(sim), "--models", str(MODELS), "--scenarios", "200"]
    subprocess.run([*eigenjury, *simulate], check=True, capture_output=True)
    run = folder / "run"
    run.mkdir()
    fit = [
        "fit",
        str(sim / "verdicts.csv"),
        "--bootstrap",
        "40",
        "--out",
        str(run / "results.json"),
    ]
    subprocess.run([*eigenjury, *fit], check=True, capture_output=True)
    models = [m["name"] for m in json.loads((run / "results.json").read_text())["models"]]
    rng = random.Random(0)
    written = 0
    with (run / "transcripts.jsonl").open("w") as out:

        def line(data: dict[str, Any]) -> None:
            out.write(json.dumps(data, ensure_ascii=False) + "\n")

        for s in range(scenarios):
            if written >= comparisons:
                break
            scenario = f"scenario-{s:05d}"
            question = text(rng, 20, 60)
            group = rng.sample(models, GROUP)
            replies = {m: text(rng, 60, 180) for m in group}
            for m in group:
                line({"role": "evaluee", "member": m, "scenario": scenario,
                      "messages": [["system", "You are " + m], ["user", question]],
                      "reply": replies[m], "choice_logprobs": None, "error": None,
                      "cached": False})  # fmt: skip
            judge = rng.choice(models)
            for m in group:
                line({"role": "reflection", "member": judge, "scenario": scenario,
                      "evaluee": m, "messages": [["user", question + replies[m]]],
                      "reply": text(rng, 20, 40), "choice_logprobs": None, "error": None,
                      "cached": False})  # fmt: skip
            for first in group:
                for second in group:
                    if first == second or written >= comparisons:
                        continue
                    verdict = rng.choice((0, 1, 1, 2, 2))
                    prompt = f"{question}\nReply A: {replies[first]}\nReply B: {replies[second]}"
                    line({"role": "comparison", "member": judge, "scenario": scenario,
                          "first": first, "second": second, "verdicts": [verdict],
                          "failure": None,
                          "messages": [["system", "You compare replies."], ["user", prompt]],
                          "reply": text(rng, 20, 60) + " <verdict>A</verdict>",
                          "choice_logprobs": None, "error": None, "cached": False})  # fmt: skip
                    written += 1
    return models, (run / "transcripts.jsonl").stat().st_size


def get(url: str) -> tuple[float, dict[str, Any]]:
    start = time.perf_counter()
    with urllib.request.urlopen(url, timeout=120) as response:
        data = json.load(response)
    return time.perf_counter() - start, data


def browser() -> WebDriver:
    options = webdriver.ChromeOptions()
    options.binary_location = "/usr/bin/chromium"
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"):
        options.add_argument(flag)
    return webdriver.Chrome(options=options, service=Service("/usr/bin/chromedriver"))


def shown(driver: WebDriver, css: str) -> float:
    """Milliseconds from navigation start until `css` is visible (polled every 5 ms)."""
    WebDriverWait(driver, 120, poll_frequency=0.005).until(
        ready.visibility_of_element_located((By.CSS_SELECTOR, css))
    )
    return float(driver.execute_script("return performance.now()"))


def repeat(folder: Path, driver: WebDriver, judge: str) -> dict[str, float]:
    server = subprocess.Popen(
        [sys.executable, "-m", "eigenjury", "view", str(folder / "run")],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert server.stdout is not None and server.stderr is not None
        url = server.stdout.readline().strip()
        if not url:
            raise SystemExit(f"eigenjury view did not start: {server.stderr.read()}")
        _, listing = get(url + "api/runs")
        [run] = [r["id"] for r in listing["runs"]]
        driver.get("about:blank")
        driver.get(f"{url}#/run/{run}")
        paint = shown(driver, "#leaderboard tr + tr") / 1000
        api_run, _ = get(f"{url}api/runs/{run}")  # warm: the record is dumped once
        start = time.perf_counter()
        while not get(f"{url}api/runs/{run}/transcripts")[1]["ready"]:
            time.sleep(0.02)
        indexed = time.perf_counter() - start + paint
        query = f"judge={judge}&verdict=first&page=2"
        api_page, page = get(f"{url}api/runs/{run}/transcripts?{query}")
        assert len(page["items"]) == 20, page["total"]
        api_again, _ = get(f"{url}api/runs/{run}/transcripts?{query}")
        driver.get("about:blank")  # a fresh page load, not a change of the hash
        driver.get(f"{url}#/run/{run}?{query}")
        browser_page = shown(driver, "details.comparison") / 1000
        return {
            "first paint (s)": paint,
            "run page API, warm (s)": api_run,
            "transcripts indexed, from navigation (s)": indexed,
            "filtered page 2 API, first (s)": api_page,
            "filtered page 2 API, again (s)": api_again,
            "filtered page 2 in the browser, page load to cards shown (s)": browser_page,
        }
    finally:
        server.terminate()
        server.wait(timeout=10)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--comparisons", type=int, default=100_000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="small smoke run")
    args = parser.parse_args()
    if args.quick:
        args.comparisons, args.repeats = 5_000, 2
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        start = time.perf_counter()
        models, size = make_run(folder, args.comparisons)
        made = time.perf_counter() - start
        print(f"run of {args.comparisons:,} comparisons, transcripts.jsonl {size / 1e6:.0f} MB "
              f"({made:.0f} s to make)")  # fmt: skip
        driver = browser()
        try:
            runs = [repeat(folder, driver, models[0]) for _ in range(args.repeats)]
        finally:
            driver.quit()
    rows = [
        [name, statistics.median(r[name] for r in runs), min(r[name] for r in runs)]
        for name in runs[0]
    ]
    print(table(["measure", "median", "best"], rows))
    print(environment("aiohttp", "selenium"))


if __name__ == "__main__":
    main()
