"""What a ranking means, in plain sentences: drawn from real scripted runs and fits whose
truth is known, and from records changed in one part; the terminal summary ends with the
sentences and the static report carries them escaped under its title."""

from __future__ import annotations

import asyncio
import csv
import html
import io
import re
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer
from rich.console import Console

from eigenjury.cli import main
from eigenjury.jobs import run_rank
from eigenjury.models.providers.scripted import register_script
from eigenjury.models.types import ChatRequest
from eigenjury.peer.record import OrderConsistency, RankingRecord
from eigenjury.records import Found, read_record
from eigenjury.reports.ranking import meaning, print_summary, render
from eigenjury.stats import make_population, simulate_verdicts
from eigenjury.view.server import load_catalogue, make_app
from peer_scripts import QUALITIES, _rng, config, peer_truth

ODD = '<ada> & "co"'  # a member whose name is markup, with an ampersand and quotes
SPREAD = {ODD: 2.0, "bo": 1.0, "cy": 0.0, "di": -1.0, "ed": -2.0}  # far apart: separable


def first_always(request: ChatRequest) -> str:
    """peer-truth, except that as a judge it always answers A, whatever the replies."""
    if "Reply A:" in request.messages[-1].content:
        return "<verdict>A</verdict>"
    return peer_truth(request)


register_script("first-always", first_always)


def _judging(request: ChatRequest) -> bool:
    return "Reply A:" in request.messages[-1].content and "did not end with" not in (
        request.messages[-1].content
    )


def coin_flip(request: ChatRequest) -> str:
    """peer-truth, except that as a judge it draws A, B or tie whatever the replies."""
    if _judging(request):
        label = _rng(request).choice(["A", "B", "tie"])
        return f"<verdict>{label}</verdict>"
    return peer_truth(request)


def always_tie(request: ChatRequest) -> str:
    if _judging(request):
        return "<verdict>tie</verdict>"
    return peer_truth(request)


def contrary(request: ChatRequest) -> str:
    """peer-truth, except that as a judge it names the worse reply."""
    said = peer_truth(request)
    if not _judging(request):
        return said
    a, b = "<verdict>A</verdict>", "<verdict>B</verdict>"
    for before, after in ((a, b), (b, a)):
        if before in said:
            return said.replace(before, after)
    return said


register_script("coin-flip", coin_flip)
register_script("always-tie", always_tie)
register_script("contrary", contrary)


def _population(qualities: dict[str, float], **models: str) -> list[dict[str, object]]:
    return [
        {"name": n, "model": models.get(n, "scripted:peer-truth"), "persona": f"[quality {q}]"}
        for n, q in qualities.items()
    ]


def _terminal(record: RankingRecord) -> str:
    """The terminal summary as a reader sees it, lines joined back where rich wrapped."""
    out = io.StringIO()
    print_summary(Console(file=out, width=120, color_system=None), record)
    return " ".join(out.getvalue().split())


def _section(page: str) -> str:
    """The report's "What this means" section (its last)."""
    found = re.search(r"<h2>What this means</h2>(.*?)</body>", page, re.S)
    assert found is not None
    return found.group(1)


@pytest.fixture(scope="module")
def separated(tmp_path_factory: pytest.TempPathFactory) -> RankingRecord:
    """Five members whose qualities lie one apart: a 90% interval separates several pairs."""
    folder = tmp_path_factory.mktemp("separated")
    path = config(folder, population=_population(SPREAD), scenarios={"limit": 30})
    return run_rank(path, progress=False).record


def test_a_run_says_what_was_ranked_and_which_pairs_the_intervals_tell_apart(
    separated: RankingRecord,
) -> None:
    run = separated.run
    assert run is not None
    first, second, *judges = meaning(separated)
    # then only judges that did not read the replies, or might not have
    assert all("carry no information" in s or "cannot be told from chance" in s for s in judges)
    ranked = [m.name for m in separated.models]
    names = ", ".join(ranked[:-1]) + " and " + ranked[-1]
    assert first == (
        f'5 members ({names}) were ranked against the constitution "Universal kindness" on '
        f"30 scenarios, by all 5 of them as judges, giving {run.verdicts} verdicts."
    )
    told = [(m.name, b) for m in separated.models for b in m.above or []]
    assert 2 <= len(told) <= 6  # some pairs, not all, none cut short
    assert all(SPREAD[a] > SPREAD[b] for a, b in told)  # only true orders are claimed
    assert second.startswith("With 90% family-wise confidence, ")
    assert second.endswith("; no other pair can be told apart.")
    for name in {a for a, _ in told}:
        below = [b for a, b in told if a == name]
        joined = below[0] if len(below) == 1 else ", ".join(below[:-1]) + " and " + below[-1]
        assert f"{name} is above {joined}" in second or f"{name} above {joined}" in second


def test_the_terminal_ends_with_the_sentences_and_the_report_escapes_them(
    separated: RankingRecord,
) -> None:
    sentences = meaning(separated)
    printed = _terminal(separated)  # the name as written: no markup read, nothing escaped
    assert printed.endswith(" ".join(" ".join(sentences).split()))  # last, after the cost
    page = render(separated, [])
    assert page.index("<h2>What this means</h2>") > page.index("<h2>Calls, tokens and cost</h2>")
    section = _section(page)
    assert ODD not in section and html.escape(ODD, quote=True) in section
    assert [html.unescape(p) for p in re.findall(r"<p>(.*?)</p>", section)] == sentences


def test_every_pair_told_apart_is_said_and_long_lists_are_cut_short(
    separated: RankingRecord,
) -> None:
    names = [m.name for m in separated.models]
    everything = [
        m.model_copy(update={"above": names[i + 1 :] or None})
        for i, m in enumerate(separated.models)
    ]
    second = meaning(separated.model_copy(update={"models": everything}))[1]
    # 10 pairs: the first six in full, grouped by the member above, then a count
    top, runner = names[0], names[1]
    assert f"{top} is above {', '.join(names[1:4])} and {names[4]}, and {runner} above" in second
    assert second.endswith(", and 4 more pairs; every pair is told apart.")


@pytest.mark.slow
def test_members_of_equal_replies_are_a_ranking_that_means_nothing(tmp_path: Path) -> None:
    """Equal replies: every scripted judge's verdicts are draws that ignore the order, so
    none shows more than a slight signal and no pair is told apart; the text says the
    ranking says little and does not promise that more scenarios would settle it. With
    the same intervals and judges that read the replies, more scenarios are what would
    help."""
    equal = dict.fromkeys(QUALITIES, 0.0)
    path = config(
        tmp_path,
        population=_population(equal),
        scenarios={"limit": 30},
        sampling={"judges_per_group": 3},  # each judge in about 18 scenarios: measured
    )
    record = run_rank(path, progress=False).record
    assert not any(m.above for m in record.models)
    assert all(j.signal is not None for j in record.judges)
    verdicts = {j.signal.verdict for j in record.judges if j.signal}
    assert verdicts <= {"uninformative", "undetermined"}
    sentences = meaning(record)
    assert sentences[0] == (
        "No judge showed more than a slight signal about the replies (each is named below), "
        "and no pair is told apart, so this ranking says little: its order may be chance."
    )
    assert sentences[2] == (
        "At 90% confidence no member can be told apart from another: the differences may "
        "be chance; no judge was shown to read the replies clearly, so more scenarios help "
        "only as far as the judges do."
    )
    assert sentences[0] in _terminal(record)
    reading = record.model_copy(
        update={
            "judges": [
                j.model_copy(update={"signal": j.signal.model_copy(update={"verdict": "weak"})})
                for j in record.judges
                if j.signal is not None
            ]
        }
    )
    assert meaning(reading)[1] == (
        "At 90% confidence no member can be told apart from another: the differences may "
        "be chance; more scenarios would narrow the intervals."
    )


def test_a_ranking_without_bootstrap_supports_no_conclusion(tmp_path: Path) -> None:
    path = config(tmp_path, scenarios={"limit": 12}, fit={"bootstrap": 0})
    record = run_rank(path, progress=False).record
    assert meaning(record)[1] == (
        "The ranking carries no intervals (bootstrap: 0), so it supports no conclusion "
        "about which member is above another; bootstrap rounds would give them."
    )
    assert meaning(record)[1] in _terminal(record)


@pytest.mark.slow
def test_a_judge_that_always_answers_a_is_named_with_its_evidence(tmp_path: Path) -> None:
    population = _population(QUALITIES, cy="scripted:first-always")
    path = config(tmp_path, population=population, scenarios={"limit": 20})
    record = run_rank(path, progress=False).record
    assert record.run is not None
    order = record.run.order_consistency["cy"]
    assert order.same_slot == 1.0 and order.pairs >= 5
    sentences = meaning(record)
    cy = next(j for j in record.judges if j.name == "cy")
    assert cy.signal is not None and cy.signal.reason == "position"
    assert sentences[2] == (
        "cy picked reply A in 100% of its decisive verdicts, with no sign of reading the "
        "replies, so its verdicts carry no information about the replies."
    )
    assert sentences[2] in _terminal(record)
    # the others read the replies, or are too few verdicts from it: none is called
    # uninformative
    others = [j.signal.verdict for j in record.judges if j.signal and j.name != "cy"]
    assert "uninformative" not in others


@pytest.mark.slow
def test_constructed_judges_are_classified_as_built(tmp_path: Path) -> None:
    """One good judge (it reads the replies), a coin flip, one that always answers A,
    one that always ties and one that names the worse reply: each is measured as what
    it was built to be, the uninformative ones are named with why, and the sample size
    is not blamed while a judge reads the replies. With the good judge gone, no judge
    carries information and the ranking is said to mean nothing."""
    built = {"bo": "coin-flip", "cy": "first-always", "di": "always-tie", "ed": "contrary"}
    scripted = {n: f"scripted:{script}" for n, script in built.items()}
    qualities = {**SPREAD, "fa": 0.5}  # two good judges: a majority to disagree with
    population = _population(qualities, **scripted)
    path = config(
        tmp_path,
        population=population,
        scenarios={"limit": 30},
        sampling={"judges_per_group": 3},
    )
    record = run_rank(path, progress=False).record
    signal = {j.name: j.signal for j in record.judges}
    assert all(s is not None for s in signal.values())
    got = {n: (s.verdict, s.reason) for n, s in signal.items() if s is not None}
    assert got[ODD][0] == "informative" and got["fa"][0] in ("informative", "weak")
    assert got["bo"] in (("uninformative", "slight"), ("undetermined", None))
    assert got["cy"] == ("uninformative", "position")
    assert got["di"] == ("uninformative", "same label")
    assert got["ed"] == ("uninformative", "contrary")
    sentences = meaning(record)
    assert not sentences[0].startswith("None of the judges")
    named = next(s for s in sentences if "carry no information" in s)
    for name in ("cy", "di", "ed"):
        assert f"{name} " in named


def _judge(record: RankingRecord, name: str, **changes: object) -> RankingRecord:
    judges = [j.model_copy(update=changes) if j.name == name else j for j in record.judges]
    return record.model_copy(update={"judges": judges})


def test_a_fitted_position_bias_or_one_slot_winning_both_orders_locks_a_judge(
    separated: RankingRecord,
) -> None:
    """Records made before judges were measured (no `signal`) name position-locked
    judges by the fitted bias and the run's order consistency."""
    separated = separated.model_copy(
        update={"judges": [j.model_copy(update={"signal": None}) for j in separated.judges]}
    )
    run = separated.run
    assert run is not None
    locked = _judge(_judge(separated, "bo", position_bias=15.0), "cy", position_bias=-3.2)
    # ed: one slot won 95% of 20 pairs in both orders, but no fitted bias says which
    consistency = {
        **run.order_consistency,
        "ed": OrderConsistency(pairs=20, consistent=0.05, same_slot=0.95),
    }
    locked = locked.model_copy(
        update={"run": run.model_copy(update={"order_consistency": consistency})}
    )
    assert meaning(locked)[2] == (
        "bo (picks reply A over 1,000 times as often as B between replies it rates equal), "
        "cy (picks reply B 25 times as often as A between replies it rates equal) and ed "
        "(chose the same slot in both orders for 95% of the 20 pairs it saw both ways) "
        "answered by position rather than by content, so their verdicts carry almost no "
        "information about the replies."
    )
    # just short of either mark: a bias of 2.9, a same slot in 85% or in 4 pairs only
    short = _judge(separated, "bo", position_bias=2.9)
    consistency = {
        **run.order_consistency,
        "cy": OrderConsistency(pairs=20, consistent=0.1, same_slot=0.85),
        "di": OrderConsistency(pairs=4, consistent=0.0, same_slot=1.0),
    }
    short = short.model_copy(
        update={"run": run.model_copy(update={"order_consistency": consistency})}
    )
    assert len(meaning(short)) == 2


@pytest.mark.slow
def test_evaluee_only_members_are_named_with_why(tmp_path: Path) -> None:
    why = "the base Gemma model cannot judge: its label probabilities do not follow the replies"
    population = _population(QUALITIES)
    for member in population:
        if member["name"] in ("cy", "di"):
            member["evaluee_only"] = why
    population[0]["evaluee_only"] = True
    path = config(tmp_path, population=population, scenarios={"limit": 12})
    record = run_rank(path, progress=False).record
    sentences = meaning(record)
    assert "by 2 of them as judges (bo and ed)" in sentences[0]
    assert sentences[2:] == [
        "ada was an evaluee only: set in the config.",
        f"cy and di were evaluees only: {why}.",
    ]
    page = render(record, [])
    assert html.escape(f"cy and di were evaluees only: {why}.") in _section(page)
    assert _viewed(tmp_path / "run")["meaning"] == sentences


def _viewed(folder: Path) -> dict[str, Any]:
    """What `eigenjury view` answers for the one run under `folder`."""

    def unexpected(found: Found) -> None:
        raise AssertionError(found)

    catalogue = load_catalogue([folder], skipped=unexpected)
    [run] = catalogue.runs

    async def go() -> dict[str, Any]:
        async with (
            TestClient(TestServer(make_app(catalogue))) as client,
            client.get(f"/api/runs/{run}") as response,
        ):
            answer: dict[str, Any] = await response.json()
            return answer

    return asyncio.run(go())


def test_probabilities_in_place_of_verdicts_are_said(separated: RankingRecord) -> None:
    run = separated.run
    assert run is not None

    def said(mode: str, soft: bool | None, by_judge: dict[str, int] | None) -> str:
        judging = run.judging.model_copy(update={"mode": mode, "soft": soft})
        changed = run.model_copy(update={"judging": judging, "soft_verdicts_by_judge": by_judge})
        return meaning(separated.model_copy(update={"run": changed}))[0]

    verdicts = run.verdicts
    assert said("single", True, {"ada": verdicts}).endswith(
        f"giving {verdicts} verdicts as probabilities from the judges' confidence in A, B or tie."
    )
    assert said("single", True, {"bo": 100, "cy": 0}).endswith(
        f"giving {verdicts} verdicts, 100 of them as probabilities from the judges' "
        "confidence in A, B or tie."
    )
    assert said("likelihood", None, None).endswith(
        f"giving {verdicts} verdicts, each for the reply that the judge model finds likelier, "
        "per token, from a speaker who follows the constitution than from one who breaks "
        "it (a score, not a probability)."
    )
    # a likelihood run recorded before issue 26 gave probabilities, and says so still
    assert said("likelihood", None, {"ada": verdicts}).endswith(
        f"giving {verdicts} verdicts as probabilities from how much likelier each judge "
        "model finds each reply from a speaker who follows the constitution than from one "
        "who breaks it."
    )


CROWD, ALICE = 'crowd <b>&"all"', "human:alice"


@pytest.mark.slow
def test_a_fit_with_external_judges_says_who_judged(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    population = make_population(5, 2, external=2, seed=3)
    table = simulate_verdicts(population, n_scenarios=60, seed=4)
    names = [{"judge-0": CROWD, "judge-1": ALICE}.get(n, n) for n in table.models]
    with (tmp_path / "verdicts.csv").open("w", newline="") as f:
        rows = csv.writer(f)
        rows.writerow(["scenario", "judge", "first", "second", "verdict"])
        for s, j, a, b, v in zip(
            table.scenario, table.judge, table.first, table.second, table.verdict, strict=True
        ):
            rows.writerow([table.scenarios[s], names[j], names[a], names[b], v])
    result = tmp_path / "result.json"
    code = main(["fit", str(tmp_path / "verdicts.csv"), "--bootstrap", "40", "--out", str(result)])
    out = " ".join(capsys.readouterr().out.split())
    assert code == 0
    record = read_record(result, RankingRecord)
    first = meaning(record)[0]
    assert first == (
        f"5 models were ranked on 60 scenarios, by all 5 of them as judges and 2 external "
        f"judges ({CROWD} and {ALICE}), giving {record.fit.verdicts:,.0f} verdicts."
    )
    assert " ".join(" ".join(meaning(record)).split()) in out
    section = _section(render(record, []))
    assert html.escape(first) in section and CROWD not in section


def test_the_elo_rule_is_named_and_an_older_record_is_told_apart(
    separated: RankingRecord,
) -> None:
    """eigenjury 0.3 changed how Elo is made (docs/consensus.md): the terminal and the
    report say which rule made a record's numbers, so old and new are not compared."""
    assert separated.settings.trust is not None
    for shown in (_terminal(separated), html.unescape(render(separated, []))):
        assert "Elo since eigenjury 0.3" in shown and "before eigenjury 0.3" not in shown
    old = separated.model_copy(
        update={"settings": separated.settings.model_copy(update={"trust": None, "prior": None})}
    )
    for shown in (_terminal(old), html.unescape(render(old, []))):
        assert "Elo by the rule before eigenjury 0.3" in shown
