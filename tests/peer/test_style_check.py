"""`eigenjury style-check` against judges served by the in-repo test server: a judge
with a planted taste for length is measured so, one without gets an interval holding 0;
where longer replies really are better (and no judge has a taste), the check says the
fitted coefficient took substance; every bad input stops with a located message."""

from __future__ import annotations

import contextlib
import io
import json
import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml
from rich.console import Console

from eigenjury.cli import main
from eigenjury.jobs import run_rank
from eigenjury.peer.fitting import fit_config
from eigenjury.peer.record import SUBSTANCE, TASTE, RankingRecord, StyleCheckRecord, TasteRow
from eigenjury.peer.run import prepare
from eigenjury.peer.style_check import CheckSettings, prepare_check
from eigenjury.records import read_record
from eigenjury.reports.ranking import STYLE_ASSUMPTION, meaning, print_summary
from eigenjury.testing.server import Judging, LengthTaste, ServerThread
from eigenjury.verdict_files import read_verdicts

LOVE = 4.0  # the length lover's log-odds per unit of normalised length difference
JUDGES = ("lover", "plain", "steady")


def rank_config(folder: Path, base: str) -> Path:
    config = {
        "name": "taste check",
        "population": [
            {
                "name": name,
                "model": f"openai-compatible:{name}@{base}",
                "persona": f"You are {name}.",
            }
            for name in JUDGES
        ],
        "constitution": "kindness",
        "scenarios": {"source": "everyday", "limit": 20, "seed": 0},
        "sampling": {"design": "all"},
        "judging": {"reflections": False},
        "fit": {"bootstrap": 40},
        "engine": {"store": "store.sqlite", "concurrency": 8},
        "output": "run",
    }
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "rank.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


@dataclass(frozen=True)
class Checked:
    record: StyleCheckRecord
    printed: str
    run: Path  # the rank run's folder
    ranking: RankingRecord
    again: StyleCheckRecord  # the same check run a second time, into another folder


def check(folder: Path, taste: LengthTaste) -> Checked:
    """A rank run on the test server with these judges and evaluees, then the check,
    twice."""
    out = io.StringIO()
    with ServerThread(judging=Judging("enforce", length=taste)) as server:
        run = run_rank(rank_config(folder, server.base_url), progress=False)
        argv = ["style-check", str(run.out), "--replies", "40", "--bootstrap", "300"]
        with contextlib.redirect_stdout(out):
            assert main([*argv, "--no-progress"]) == 0
        printed = out.getvalue()
        with contextlib.redirect_stdout(out):
            assert main([*argv, "--no-progress", "--out", str(folder / "again")]) == 0
    record = read_record(run.out / StyleCheckRecord.FILE, StyleCheckRecord)
    again = read_record(folder / "again" / StyleCheckRecord.FILE, StyleCheckRecord)
    return Checked(record, printed, run.out, run.record, again)


@pytest.fixture(scope="module")
def tasteful(tmp_path_factory: pytest.TempPathFactory) -> Checked:
    """One judge loves length; replies vary in length only (padding), not in merit."""
    return check(tmp_path_factory.mktemp("taste"), LengthTaste({"lover": LOVE}, words=60))


@pytest.fixture(scope="module")
def substantial(tmp_path_factory: pytest.TempPathFactory) -> Checked:
    """No judge has a taste; replies that make more points are longer and better."""
    return check(tmp_path_factory.mktemp("substance"), LengthTaste({}, merit=1.0, points=6))


def row(record: StyleCheckRecord, judge: str) -> TasteRow:
    return next(r for r in record.judges if r.judge == judge)


def covers(row: TasteRow, value: float) -> bool:
    assert row.taste_ci is not None
    low, high = row.taste_ci
    return low is not None and high is not None and low <= value <= high


@pytest.mark.slow
def test_a_planted_taste_is_measured_and_no_taste_is_measured_as_none(tasteful: Checked) -> None:
    record = tasteful.record
    scale = record.edits.scale
    assert record.edits.scale_source == "the run's style control"
    assert scale == pytest.approx(tasteful.ranking.style.scale["length"])  # type: ignore[union-attr]
    lover = row(record, "lover")
    assert lover.taste is not None and lover.taste_ci is not None
    assert lover.taste_ci[0] is not None and lover.taste_ci[0] > 0  # moved by length alone
    assert covers(lover, LOVE * scale)  # in the fit's units: per standard deviation
    assert lover.share > 0.6
    for judge in ("plain", "steady"):
        assert covers(row(record, judge), 0.0)
    # every judge compared each of the 40 replies with its longer self, in both orders
    assert record.comparisons == 40 * 2 * len(JUDGES) and not record.failures
    assert all(r.verdicts == 80 for r in record.judges)
    assert record.edits.replies == 40 and record.edits.achieved > 0.5 * record.edits.target
    # the run's shared coefficient is the judges' average taste: taste explains it
    assert record.pooled.fitted is not None and record.pooled.reading == TASTE
    assert covers(record.pooled, LOVE * scale / len(JUDGES))


@pytest.mark.slow
def test_where_longer_replies_are_better_the_check_says_the_fit_took_substance(
    substantial: Checked,
) -> None:
    record = substantial.record
    pooled = record.pooled
    assert pooled.fitted is not None and pooled.fitted_ci is not None
    assert pooled.fitted_ci[0] > 0  # the fit finds a length effect...
    assert covers(pooled, 0.0)  # ...that no judge's taste holds
    assert pooled.reading == SUBSTANCE
    assert pooled.difference_ci is not None and pooled.difference_ci[0] is not None
    assert pooled.difference_ci[0] > 0
    # held at the (near zero) taste, the leaderboard spreads as the uncontrolled one does
    board = record.leaderboard
    assert board is not None and set(board.held) == {"length"}
    assert board.held["length"] == pytest.approx(pooled.taste, abs=1e-4)
    spread = {
        key: max(getattr(m, key) for m in board.models) - min(getattr(m, key) for m in board.models)
        for key in ("elo", "elo_controlled", "elo_uncontrolled")
    }
    assert spread["elo"] > spread["elo_controlled"]
    printed = " ".join(substantial.printed.split())
    assert "part of what style control removes is substance" in printed
    assert "Elo with the length coefficient held at the measured taste" in printed


@pytest.mark.slow
def test_the_check_goes_through_the_store_and_writes_its_transcripts(tasteful: Checked) -> None:
    """Its comparisons are transcribed as rank's are; a rerun asks nothing new (every
    call comes from the store) and measures the same tastes."""
    lines = (tasteful.run / "style-check-transcripts.jsonl").read_text().splitlines()
    comparisons = [json.loads(line) for line in lines]
    assert len(comparisons) == tasteful.record.comparisons
    assert {c["role"] for c in comparisons} == {"comparison"}
    longer = [c for c in comparisons if c["second"].endswith(" (longer)")]
    assert len(longer) == len(comparisons) // 2
    prompt = longer[0]["messages"][-1][1]
    assert "Reply A:" in prompt and "Which reply better follows the constitution" in prompt
    calls = tasteful.record.accounting.total
    assert calls.calls == tasteful.record.comparisons and calls.cached == 0
    again = tasteful.again.accounting.total
    assert again.calls == calls.calls and again.cached == again.calls
    assert [r.taste for r in tasteful.again.judges] == [r.taste for r in tasteful.record.judges]


@pytest.mark.slow
def test_the_label_is_on_every_output_of_a_controlled_ranking(tasteful: Checked) -> None:
    page = (tasteful.run / "report.html").read_text()
    assert 'id="style-assumption"' in page
    assert "assumes that style reaches the verdicts only through the judges" in page
    record = tasteful.ranking
    assert meaning(record)[-1] == STYLE_ASSUMPTION
    out = io.StringIO()
    print_summary(Console(file=out, width=250, color_system=None), record)
    text = " ".join(out.getvalue().split())
    assert "assumes style moves verdicts only through the judges' taste" in text
    assert "eigenjury style-check" in text


def _exit(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = main(argv)
    return code, " ".join(capsys.readouterr().err.split())


def test_a_folder_that_is_not_a_rank_run_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, err = _exit(["style-check", str(tmp_path)], capsys)
    assert code == 2 and str(tmp_path) in err and "has no results.json" in err
    code, err = _exit(["style-check", str(tmp_path / "nowhere")], capsys)
    assert code == 2 and "no such folder" in err
    (tmp_path / "results.json").write_text('{"kind": "ranking", "eigenjury": "0.3"}')
    code, err = _exit(["style-check", str(tmp_path)], capsys)
    assert code == 2 and "results.json" in err and "not a valid ranking record" in err


def test_a_ranking_fitted_from_a_file_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["simulate", "--out", str(tmp_path), "--models", "3", "--scenarios", "20"]) == 0
    fitted = tmp_path / "fitted"
    fitted.mkdir()
    argv = ["fit", str(tmp_path / "verdicts.csv"), "--bootstrap", "0"]
    assert main([*argv, "--out", str(fitted / "results.json")]) == 0
    capsys.readouterr()
    code, err = _exit(["style-check", str(fitted)], capsys)
    assert code == 2 and "fitted from a verdict file" in err


@pytest.mark.slow
def test_a_run_without_replies_or_its_config_is_refused(
    tasteful: Checked, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    broken = tmp_path / "run"
    shutil.copytree(tasteful.run, broken)
    code, err = _exit(["style-check", str(broken), "--bootstrap", "10"], capsys)
    assert code == 2 and "--bootstrap" in err and "at least 40" in err
    transcripts = broken / "transcripts.jsonl"
    kept = [x for x in transcripts.read_text().splitlines() if '"role": "evaluee"' not in x]
    transcripts.write_text("\n".join(kept) + "\n")
    code, err = _exit(["style-check", str(broken)], capsys)
    assert code == 2 and "transcripts.jsonl" in err and "no reply" in err
    transcripts.unlink()
    code, err = _exit(["style-check", str(broken)], capsys)
    assert code == 2 and "has no transcripts.jsonl" in err
    # the config the record names, moved away: say so and ask for --config
    record = json.loads((broken / "results.json").read_text())
    record["source"] = str(tmp_path / "moved.yaml")
    (broken / "results.json").write_text(json.dumps(record))
    code, err = _exit(["style-check", str(broken)], capsys)
    assert code == 2 and "moved.yaml" in err and "--config" in err
    # a config of another population
    other = yaml.safe_load(Path(tasteful.ranking.source or "").read_text())
    other["population"] = [*other["population"][:2], dict(other["population"][0], name="zed")]
    (tmp_path / "other.yaml").write_text(yaml.safe_dump(other))
    code, err = _exit(
        ["style-check", str(broken), "--config", str(tmp_path / "other.yaml")], capsys
    )
    assert code == 2 and "other.yaml" in err and "does not describe the run" in err


@pytest.mark.slow
def test_a_run_without_length_control_is_measured_in_its_verdicts_units(
    tasteful: Checked, tmp_path: Path
) -> None:
    """Without a fitted length coefficient the taste's unit is still the standard
    deviation of the run's normalised length differences, read from its verdicts.csv:
    the same number the fit would have used."""
    run = tmp_path / "run"
    shutil.copytree(tasteful.run, run)
    record = json.loads((run / "results.json").read_text())
    del record["style"]
    for model in record["models"]:
        del model["elo_uncontrolled"], model["rank_change"]
    (run / "results.json").write_text(json.dumps(record))
    inputs = prepare_check(run, None, CheckSettings())
    assert inputs.scale_source == "the run's verdicts (it did not control for length)"
    assert inputs.scale == pytest.approx(tasteful.record.edits.scale, abs=1e-6)
    assert len(inputs.replies) == 20 * len(JUDGES)  # every member's reply on every scenario


@pytest.mark.slow
def test_the_runs_verdicts_refit_as_the_run_fitted_them(tasteful: Checked) -> None:
    """The leaderboard at the taste refits verdicts.csv with the run's config: without a
    coefficient held, that refit is the run's own leaderboard."""
    config = prepare(tasteful.ranking.source or "", tasteful.run).config
    table = read_verdicts(tasteful.run / "verdicts.csv")
    ranking = fit_config(config, table, bootstrap=0)
    elo = dict(zip(ranking.models_, ranking.elo_, strict=True))
    for model in tasteful.ranking.models:
        assert elo[model.name] == pytest.approx(model.elo, abs=0.01)
