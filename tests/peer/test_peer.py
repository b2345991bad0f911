"""Peer ranking end to end with scripted members whose judges follow a known truth."""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
import yaml
from scipy.stats import kendalltau

from eigenjury.cli import main
from eigenjury.engine import Store
from eigenjury.engine.runner import run_engine
from eigenjury.engine.settings import default_store
from eigenjury.errors import InputError
from eigenjury.jobs import run_rank
from eigenjury.peer.designs import Comparison
from eigenjury.peer.outcomes import Outcome, Outcomes
from eigenjury.peer.record import RankingRecord, TranscriptLine
from eigenjury.peer.run import prepare, run
from eigenjury.records import read_any_record, read_record
from eigenjury.view.index import Filters, TranscriptIndex
from peer_scripts import QUALITIES, config


def test_rank_recovers_the_scripted_truth_and_writes_every_output(tmp_path: Path) -> None:
    run = run_rank(config(tmp_path), progress=False)
    elo = dict(zip(run.ranking.models_, run.ranking.elo_, strict=True))
    names = list(QUALITIES)
    tau = kendalltau([QUALITIES[n] for n in names], [elo[n] for n in names]).statistic
    assert tau >= 0.8 - 1e-9  # at most one pair of the five swapped
    out = run.out
    for name in ("results.json", "verdicts.csv", "transcripts.jsonl", "report.html"):
        assert (out / name).is_file()
    record = json.loads((out / "results.json").read_text())
    assert {m["name"] for m in record["models"]} == set(QUALITIES)
    summary = record["run"]
    assert summary["comparisons"] == 40 * 12 and summary["verdicts"] == 480
    roles = {r["role"] for r in summary["accounting"]["by_model_and_role"]}
    assert roles == {"evaluee", "reflection", "comparison"}
    transcripts = [json.loads(x) for x in (out / "transcripts.jsonl").read_text().splitlines()]
    assert len([t for t in transcripts if t["role"] == "evaluee"]) == summary["accounting"][
        "total"
    ]["calls"] - 480 - len([t for t in transcripts if t["role"] == "reflection"])
    # the verdict table is a valid input of `eigenjury fit`
    assert main(["fit", str(out / "verdicts.csv"), "--bootstrap", "0"]) == 0
    # the record reads back through its model as it was made
    assert read_record(out / "results.json", RankingRecord) == run.record
    assert run.record.overview().name == "scripted truth"
    assert run.record.overview().models == tuple(m["name"] for m in record["models"])


def test_a_results_file_of_eigenjury_0_1_still_reads_and_a_damaged_one_is_located(
    tmp_path: Path,
) -> None:
    run = run_rank(
        config(tmp_path, scenarios={"limit": 4}, judging={"reflections": False}), progress=False
    )
    data = json.loads((run.out / "results.json").read_text())
    del data["kind"], data["schema_version"], data["created"]  # as 0.1 wrote it
    old = tmp_path / "old.json"
    old.write_text(json.dumps({**data, "eigenjury": "0.1.0"}))
    record = read_any_record(old)
    assert isinstance(record, RankingRecord) and record.eigenjury == "0.1.0"
    assert record.models == run.record.models and record.run == run.record.run
    damaged = tmp_path / "damaged.json"
    damaged.write_text(json.dumps({**data, "models": "ada, bo"}))
    with pytest.raises(InputError) as error:
        read_record(damaged, RankingRecord)
    assert "damaged.json" in str(error.value) and "models" in str(error.value)


def test_transcript_lines_carry_each_comparisons_verdicts_first(tmp_path: Path) -> None:
    """A comparison line says what was read from the judge's reply (or why nothing
    was) right after who compared what, where the viewer's index reads it."""
    population = [
        {
            "name": n,
            "model": "scripted:peer-truth",
            "persona": f"[quality {q}]" + (" [sloppy]" if n == "cy" else ""),
        }
        for n, q in QUALITIES.items()
    ]
    run = run_rank(
        config(
            tmp_path,
            population=population,
            scenarios={"limit": 2},
            sampling={"design": "all"},
            judging={"reflections": False},
            fit={"bootstrap": 0},
        ),
        progress=False,
    )
    lines = (run.out / "transcripts.jsonl").read_text().splitlines()
    rows = [json.loads(line) for line in lines]
    judged = [r for r in rows if r["role"] in ("comparison", "repair")]
    assert judged and all(
        list(r)[:8]
        == ["role", "member", "scenario", "first", "second", "verdicts", "failure", "messages"]
        for r in judged
    )
    for r in judged:
        if r["member"] == "cy" and r["role"] == "comparison":  # its tags are missing
            assert r["verdicts"] is None and r["failure"] == "parse"
        else:
            assert r["failure"] is None and r["verdicts"] in ([0], [1], [2])
    assert {r["role"] for r in judged} == {"comparison", "repair"}
    assert all("verdicts" not in r and "first" not in r for r in rows if r not in judged)
    # the report's samples are read judgments as written, judges in turn, each with the
    # replies it judged
    written = [TranscriptLine.model_validate(r) for r in judged]
    assert len(run.samples) == 6 and all(s.judgment in written for s in run.samples)
    assert all(s.judgment.verdicts is not None for s in run.samples)
    readers = {t.member for t in written if t.verdicts is not None}
    assert len({s.judgment.member for s in run.samples}) == min(6, len(readers))
    replies = {(r["member"], r["scenario"]): r["reply"] for r in rows if r["role"] == "evaluee"}
    for sample in run.samples:
        t = sample.judgment
        assert sample.first_reply == replies[t.first, t.scenario]
        assert sample.second_reply == replies[t.second, t.scenario]
        assert sample.question and sample.question in json.dumps(rows, ensure_ascii=False)


@pytest.mark.slow
def test_responses_and_reflections_are_made_once_and_reruns_are_free(tmp_path: Path) -> None:
    path = config(tmp_path, sampling={"design": "all"}, scenarios={"limit": 3})
    first = run_rank(path, progress=False)
    assert first.record.run is not None
    total = first.record.run.accounting.total
    # all design: 5 judges x 20 ordered pairs x 3 scenarios; 15 responses; 5 x 5 x 3 reflections
    assert total.calls == 300 + 15 + 75 and total.cached == 0
    again = run_rank(path, progress=False)
    assert again.record.run is not None and again.record.run.accounting.total.cached == 390
    assert [m.elo for m in again.record.models] == [m.elo for m in first.record.models]


@pytest.mark.slow
def test_a_grown_population_collects_only_new_work(tmp_path: Path) -> None:
    path = config(
        tmp_path, sampling={"design": "all"}, scenarios={"limit": 2}, judging={"reflections": False}
    )
    run_rank(path, progress=False)
    data = yaml.safe_load(path.read_text())
    data["population"].append(
        {"name": "fay", "model": "scripted:peer-truth", "persona": "[quality 2.0]"}
    )
    path.write_text(yaml.safe_dump(data))
    grown = run_rank(path, progress=False)
    assert grown.record.run is not None
    total = grown.record.run.accounting.total
    new = total.calls - total.cached
    # new: fay's 2 responses + every comparison that involves fay as judge or evaluee
    assert new == 2 + 2 * (6 * (6 * 5) - 5 * (5 * 4))  # judges x ordered pairs, 2 scenarios
    assert grown.record.models[0].name == "fay"


@pytest.mark.slow
def test_interrupted_collection_resumes(tmp_path: Path) -> None:
    """A run stopped by its token budget keeps what it collected and says so; the rerun
    makes only the rest."""
    path = config(
        tmp_path,
        scenarios={"limit": 10},
        judging={"reflections": False},
        engine={"budget_tokens": 1500},
    )
    with pytest.raises(InputError, match="by its plan"):  # refused before any call
        run_rank(path, progress=False)
    assert not default_store().exists()
    with pytest.raises(InputError, match="rerun to resume"):
        run_rank(path, progress=False, go=True)
    with Store(default_store()) as store:  # the per-user store
        kept = store.counts()["ok"]
    data = yaml.safe_load(path.read_text())
    del data["engine"]["budget_tokens"]
    path.write_text(yaml.safe_dump(data))
    full = run_rank(path, progress=False)
    assert full.record.run is not None
    assert full.record.run.accounting.total.cached == kept and not full.record.run.failures


@pytest.mark.slow
def test_parse_failures_are_repaired_or_counted_never_ties(tmp_path: Path) -> None:
    population = [
        {
            "name": n,
            "model": "scripted:peer-truth",
            "persona": f"[quality {q}]" + (" [sloppy]" if n == "cy" else ""),
        }
        for n, q in QUALITIES.items()
    ]
    first = run_rank(
        config(tmp_path, population=population, judging={"reflections": False}), progress=False
    )
    repaired = first.record.run
    assert repaired is not None
    assert repaired.repaired > 0 and not repaired.parse_failures_by_judge
    second = run_rank(
        config(
            tmp_path / "strict",
            population=population,
            judging={"reflections": False, "repair": False},
        ),
        progress=False,
    )
    strict = second.record.run
    assert strict is not None
    assert strict.parse_failures_by_judge == {"cy": strict.failures["parse"]}
    assert strict.verdicts == strict.comparisons - strict.failures["parse"]
    for done, summary in ((first, repaired), (second, strict)):  # the viewer counts as the run
        index = TranscriptIndex(done.out / "transcripts.jsonl")
        assert index.wait(30) and index.error is None
        every = index.matching(Filters())
        assert len(every) == summary.comparisons
        assert index.repaired(every) == summary.repaired
        unread = index.matching(Filters(verdict="unread"))
        assert len(unread) == summary.failures.get("parse", 0)


@pytest.mark.slow
def test_criteria_mode_weights_each_judgment_once(tmp_path: Path) -> None:
    run = run_rank(
        config(
            tmp_path, judging={"mode": "criteria", "reflections": False}, scenarios={"limit": 10}
        ),
        progress=False,
    )
    header = (run.out / "verdicts.csv").read_text().splitlines()[0]
    assert header.split(",")[5] == "criterion"  # then the replies' style features
    assert run.record.run is not None
    assert run.ranking.counts_.total == pytest.approx(run.record.run.verdicts)


@pytest.mark.slow
def test_greenbeards_gain_and_exclusion_limits_it(tmp_path: Path) -> None:
    run = run_rank(
        config(
            tmp_path,
            greenbeard={"members": ["di", "ed"]},
            sampling={"design": "all"},
            scenarios={"limit": 6},
            judging={"reflections": False},
        ),
        progress=False,
    )
    g = run.record.greenbeard
    assert g is not None
    with_self = g.with_self_judgments
    assert with_self.mean_shift_greenbeards is not None and with_self.mean_shift_others is not None
    assert with_self.mean_shift_greenbeards > with_self.mean_shift_others + 50
    assert set(g.without_self_judgments.elo_shift) == set(QUALITIES)


class _Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []

    def handle_starttag(self, tag: str, attrs: Any) -> None:
        self.tags.append(tag)


def test_the_report_parses_and_escapes_model_text(tmp_path: Path) -> None:
    population = [
        {
            "name": n,
            "model": "scripted:peer-truth",
            "persona": f"[quality {q}]" + (" [script]" if n == "ada" else ""),
        }
        for n, q in QUALITIES.items()
    ]
    run = run_rank(config(tmp_path, population=population, scenarios={"limit": 20}), progress=False)
    page = (run.out / "report.html").read_text()
    parser = _Tags()
    parser.feed(page)
    assert "script" not in parser.tags
    assert {"svg", "table", "details"} <= set(parser.tags)
    assert "&lt;script&gt;alert(&#x27;pwned&#x27;)&lt;/script&gt;" in page


def test_the_trust_matrix_has_room_for_its_last_slanted_label() -> None:
    """Column labels rise at 45 degrees from their column: the last one reaches as far
    right of its column as it rises above the grid, and the picture must hold it."""
    from eigenjury.reports.ranking import heatmap_svg

    names = ["blunt-gemma", "blunt-smol", "warm-gemma", "warm-smol"]
    svg = heatmap_svg(names, names, [[0.25] * 4] * 4)
    width = float(re.search(r'<svg width="([\d.]+)"', svg).group(1))  # type: ignore[union-attr]
    x, rise = (float(v) for v in re.findall(r"translate\(([\d.]+),([\d.]+)\)", svg)[-1])
    assert width >= x + rise - 20  # the rise, less the margin above the labels


def test_one_degenerate_interval_does_not_squash_the_leaderboard() -> None:
    """A trust of zero in some bootstrap draw puts an Elo bound near minus infinity: the
    axis stays near the points, and that interval ends in an arrowhead at the edge."""
    from eigenjury.peer.record import ModelRow
    from eigenjury.reports.ranking import leaderboard_svg

    def row(name: str, elo: float, low: float) -> ModelRow:
        return ModelRow(name=name, elo=elo, elo_ci=(low, elo + 50), trust=0.2, trust_ci=None,
                        rank=1, rank_ci=None, verdicts_as_evaluee=10)  # fmt: skip

    svg = leaderboard_svg([row("a", 1600, 1550), row("b", 1500, 1450), row("c", 1400, -118189)])
    dots = [float(x) for x in re.findall(r'<circle cx="([\d.]+)"', svg)]
    assert dots[0] - dots[2] > 100  # of 550 pixels: the three points stay apart
    assert svg.count('class="beyond"') == 1 and "[-118189, 1450]" in svg


def test_order_consistency_arithmetic() -> None:
    def o(judge: str, first: str, second: str, verdict: int, scenario: str = "s") -> Outcome:
        return Outcome(Comparison(scenario, judge, first, second), [verdict])

    outcomes = [
        o("j", "a", "b", 1),
        o("j", "b", "a", 2),  # a wins both: consistent
        o("j", "a", "c", 1),
        o("j", "c", "a", 1),  # first slot wins both: slot-driven
        o("j", "b", "c", 0),
        o("j", "c", "b", 0),  # tie both: consistent
        o("j", "a", "d", 2),  # one order only: not counted
        o("k", "a", "b", 2, "t"),
        o("k", "b", "a", 0, "t"),  # b then tie: neither
    ]
    assert Outcomes.of(outcomes).order_consistency() == {
        "j": {"pairs": 3, "consistent": round(2 / 3, 4), "same_slot": round(1 / 3, 4)},
        "k": {"pairs": 1, "consistent": 0.0, "same_slot": 0.0},
    }


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ({"constitution": "stoicism"}, ["unknown constitution 'stoicism'", "kindness"]),
        ({"scenarios": {"source": "reddit"}}, ["unknown scenarios set 'reddit'", "everyday"]),
        ({"population": []}, ["line", "field 'population'", "at least 3 members"]),
        (
            {
                "population": [
                    {"name": "a", "model": "scripted:echo"},
                    {"name": "b", "model": "scripted:echo"},
                ]
            },
            ["at least 3 members"],
        ),
        ({"population": [{"name": "a", "model": "gpt4"}] * 3}, ["has no provider"]),
        ({"sampling": {"design": "swiss"}}, ["field 'sampling.design'", "'all'"]),
        (
            {
                "population": [
                    {"name": n, "model": "openai-compatible:m@http://127.0.0.1:9/v1"} for n in "abc"
                ],
                "sampling": {"group_size": 3},
            },
            ["cannot reach", "is the server running"],
        ),
        (
            {
                "population": [
                    {"name": "a", "model": "openai-compatible:m@http://127.0.0.1:9/v1"},
                    *({"name": n, "model": "scripted:echo"} for n in "bc"),
                ],
                "judging": {"mode": "likelihood"},
            },
            ["field 'population.0.model'", "likelihood verdicts need", "'a' is openai-compatible"],
        ),
        (
            {
                "population": [
                    {"name": n, "model": "scripted:echo", "evaluee_only": True} for n in "abc"
                ]
            },
            ["nobody judges"],
        ),
        (
            {
                "population": [
                    *({"name": n, "model": "scripted:echo"} for n in "ab"),
                    {"name": "c", "model": "scripted:echo", "evaluee_only": "cannot judge"},
                ],
                "sampling": {"design": "adaptive"},
            },
            ["field 'population.2.evaluee_only'", "adaptive design"],
        ),
        (
            {
                "population": [
                    {
                        "name": "a",
                        "model": "openai-compatible:m@http://127.0.0.1:9/v1",
                        "opening": "Well,",
                    },
                    *({"name": n, "model": "scripted:echo"} for n in "bc"),
                ]
            },
            ["field 'population.0'", "an opening needs a model that continues"],
        ),
        (
            {"judging": {"mode": "criteria", "soft": True}},
            ["field 'judging.soft'", "soft verdicts need mode 'single'"],
        ),
        (
            {"judging": {"mode": "likelihood", "soft": True}},
            ["field 'judging.soft'", "soft verdicts need mode 'single'", "not a probability"],
        ),
    ],
)
def test_bad_configs_stop_before_spending(
    change: dict[str, Any],
    expected: list[str],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    path = config(tmp_path, **change)
    code = main(["rank", str(path), "--no-progress"])
    err = " ".join(capsys.readouterr().err.split())
    assert code == 2, err
    for fragment in expected:
        assert fragment in err, f"{fragment!r} not in {err!r}"
    assert "config.yaml" in err and "Traceback" not in err
    store = tmp_path / "run" / "store.sqlite"
    if store.exists():
        with Store(store) as kept:
            assert kept.counts() == {}


def test_yaml_errors_name_the_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "broken.yaml"
    path.write_text("population:\n  - name: a\n    model: [unclosed\n")
    assert main(["rank", str(path)]) == 2
    err = capsys.readouterr().err
    assert "broken.yaml, line" in err and "not valid YAML" in err


@pytest.mark.slow
def test_objective_mode_tracks_true_accuracy(tmp_path: Path) -> None:
    skills = {"sage": 0.95, "keen": 0.75, "fair": 0.55, "weak": 0.35, "lost": 0.15}
    path = config(
        tmp_path,
        population=[
            {"name": n, "model": "scripted:objective-truth", "persona": f"[skill {s}]"}
            for n, s in skills.items()
        ],
        objective={"questions": "general"},
        sampling={"design": "all"},
        judging={"reflections": False},
    )
    run = run_rank(path, progress=False)
    objective = run.record.objective
    assert objective is not None and objective.questions == 40
    accuracy = objective.accuracy
    assert accuracy["sage"] > accuracy["lost"]
    assert objective.kendall_tau_elo_vs_accuracy is not None
    assert objective.kendall_tau_elo_vs_accuracy >= 0.8
    assert run.record.run is not None and run.record.run.constitution.title == "Correctness"


def test_every_shipped_config_is_valid() -> None:
    from importlib import resources

    from eigenjury.config import load_config
    from eigenjury.peer.config import RankConfig
    from eigenjury.peer.data import load_constitution

    bundled = resources.files("eigenjury") / "data" / "configs"
    paths = [Path(str(p)) for p in bundled.iterdir() if p.name.endswith(".yaml")]
    paths += sorted(Path(__file__).parents[2].glob("examples/*.yaml"))
    assert len(paths) >= 6
    for path in paths:
        config = load_config(RankConfig, path)
        if config.objective is None:
            assert load_constitution(config.constitution, path.parent).criteria


@pytest.mark.slow
def test_adaptive_design_spends_its_budget_where_the_order_is_open(tmp_path: Path) -> None:
    budget = 400
    qualities = {"ada": 1.0, "bo": 0.9, "cy": 0.0, "di": -0.9, "ed": -1.0}  # two close pairs
    population = [
        {"name": n, "model": "scripted:peer-truth", "persona": f"[quality {q}]"}
        for n, q in qualities.items()
    ]
    run = run_rank(
        config(
            tmp_path,
            population=population,
            scenarios={"limit": 70},
            sampling={"design": "adaptive", "comparisons": budget, "rounds": 4},
            judging={"reflections": False},
        ),
        progress=False,
    )
    comparisons = [o.comparison for o in run.outcomes]
    assert budget - 12 <= len(comparisons) <= budget
    close = sum({c.first, c.second} in ({"ada", "bo"}, {"di", "ed"}) for c in comparisons)
    assert close / len(comparisons) > 2 * (2 / 10)  # twice their share under uniform pairs
    elo = dict(zip(run.ranking.models_, run.ranking.elo_, strict=True))
    assert elo["ada"] > elo["cy"] > elo["ed"]


def test_question_limits_pick_a_stable_subset(tmp_path: Path) -> None:
    from eigenjury.peer.data import load_questions

    five = load_questions("general", tmp_path, limit=5, seed=1)
    ten = load_questions("general", tmp_path, limit=10, seed=1)
    assert len(five) == 5 and {q.id for q in five} <= {q.id for q in ten}


@pytest.mark.parametrize(
    ("name", "text", "expected"),
    [
        ("s.jsonl", '{"id": "a", "text": "x"}\n[1, 2]\n',
         "s.jsonl, line 2: each line must be a JSON object"),
        ("s.csv", "id,text\na,fine\nb\n", "s.csv, line 3: 1 fields where the header has 2"),
        ("s.csv", "id,words\na,x\n", "missing column(s) text"),
        ("s.jsonl", '{"id": "a", "text": "x"}\n{"id": "a", "text": "y"}\n',
         "line 2: scenario id 'a' appears twice"),
    ],
)  # fmt: skip
def test_bad_scenario_files_are_located(
    tmp_path: Path, name: str, text: str, expected: str
) -> None:
    from eigenjury.peer.data import load_scenarios

    (tmp_path / name).write_text(text)
    with pytest.raises(InputError) as error:
        load_scenarios(name, tmp_path)
    assert expected in str(error.value)


def test_bad_question_and_constitution_files_are_located(tmp_path: Path) -> None:
    from eigenjury.peer.data import load_constitution, load_questions

    (tmp_path / "q.jsonl").write_text(
        json.dumps({"id": "q1", "question": "?", "options": ["A", "B"], "answer": "A"}) + "\n"
    )
    with pytest.raises(InputError, match=r"q.jsonl, line 1: a question needs .*options"):
        load_questions("q.jsonl", tmp_path)
    (tmp_path / "c.yaml").write_text("title: x\ncriteria: [unclosed\n")
    with pytest.raises(InputError, match=r"c.yaml, line \d+: not valid YAML"):
        load_constitution("c.yaml", tmp_path)
    with pytest.raises(InputError, match="a title and a list of criteria"):
        load_constitution({"title": "x", "criteria": 5}, tmp_path)
    (tmp_path / "c.yaml").write_text("title: x\ncriteria:\n- fine\n- [not, text]\n")
    with pytest.raises(InputError, match=r"c.yaml, line 4, field 'criteria.1': expected text"):
        load_constitution("c.yaml", tmp_path)


def test_local_evaluees_pick_among_the_questions_own_options() -> None:
    from eigenjury.peer.collect import Collector
    from eigenjury.peer.config import Judging, Member
    from eigenjury.peer.data import Constitution

    members = {
        "tiny": Member(name="tiny", model="local:smollm2-135m"),
        "api": Member(name="api", model="scripted:echo"),
    }
    collector = Collector(
        engine=None,  # type: ignore[arg-type]  (no call is made here)
        members=members,
        constitution=Constitution("t", ("c",)),
        scenarios={"q1": "Which? A. x B. y C. z"},
        judging=Judging(),
        persona=lambda member, role: None,
        answer_choices={"q1": ("A", "B", "C")},
    )
    assert collector._evaluee("tiny", "q1").choices == ("A", "B", "C")
    assert collector._evaluee("api", "q1").choices is None


def test_config_paths_are_relative_to_the_config_not_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A run started from another folder finds its store again and pays nothing twice;
    `--out` on the command line stays relative to where the command runs."""
    (tmp_path / "project").mkdir()
    path = config(
        tmp_path / "project",
        sampling={"design": "all"},
        scenarios={"limit": 2},
        judging={"reflections": False},
        fit={"bootstrap": 0},
        engine={"store": "cache/store.sqlite"},
        output="runs/first",
    )
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    first = run_rank(path, progress=False)
    assert first.out == tmp_path / "project" / "runs" / "first"
    assert (first.out / "results.json").is_file()
    assert (tmp_path / "project" / "cache" / "store.sqlite").is_file()
    assert list(elsewhere.iterdir()) == []
    assert main(["rank", str(path), "--out", "here", "--no-progress"]) == 0
    assert (elsewhere / "here" / "results.json").is_file()
    again = json.loads((elsewhere / "here" / "results.json").read_text())
    total = again["run"]["accounting"]["total"]
    assert total["cached"] == total["calls"] > 0


def test_three_members_with_markup_names_rank_with_the_default_group_size(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The default group of 4 shrinks to a population of 3; names that look like rich
    markup are printed as written (in the leaderboard and the accounting)."""
    names = {"[/]": 1.0, "[bold]x": 0.0, "c": -1.0}
    path = config(
        tmp_path,
        population=[
            {"name": n, "model": "scripted:peer-truth", "persona": f"[quality {q}]"}
            for n, q in names.items()
        ],
        scenarios={"limit": 4},
        judging={"reflections": False},
        fit={"bootstrap": 0},
    )
    data = yaml.safe_load(path.read_text())
    del data["sampling"]["group_size"]  # random groups of the default size
    path.write_text(yaml.safe_dump(data))
    code = main(["rank", str(path), "--no-progress"])
    out, err = capsys.readouterr()
    assert code == 0, err
    record = json.loads((tmp_path / "run" / "results.json").read_text())
    assert record["run"]["design"]["group_size"] == 3
    for name in names:
        assert f"│ {name} " in out  # leaderboard, judges and accounting tables
    assert out.count("[bold]x") >= 3


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ({"sampling": {"group_size": 6}}, ["field 'sampling.group_size'", "5 members"]),
        ({"fit": {"bootstrap": 10}}, ["field 'fit.bootstrap'", "90% interval", "at least 20"]),
        ({"fit": {"seed": -1}}, ["field 'fit.seed'", "at least 0", "got -1"]),
        ({"sampling": {"seed": -2}}, ["field 'sampling.seed'", "at least 0"]),
        ({"scenarios": {"seed": -3}}, ["field 'scenarios.seed'", "at least 0"]),
        ({"judging": {"judge": {"seed": -4}}}, ["field 'judging.judge.seed'", "at least 0"]),
        ({"fit": {"ci": float("nan")}}, ["field 'fit.ci'", "finite number"]),
        ({"engine": {"timeout_s": float("inf")}}, ["field 'engine.timeout_s'", "finite number"]),
        ({"greenbeard": {"members": ["nobody"]}}, ["field 'greenbeard.members'", "nobody"]),
        ({"sampling": 5}, ["field 'sampling'", "expected a mapping of settings", "got 5"]),
        ({"fit": {"dim": "two"}}, ["field 'fit.dim'", "expected a whole number, got 'two'"]),
        ({"fit": {"dims": 2}}, ["field 'fit.dims'", "not a known setting", "did you mean 'dim'?"]),
        ({"fit": {"dim": 6}}, ["field 'fit.dim'", "5 members", "use at most 5"]),
        ({"engine": {"budget_tokens": 0}}, ["field 'engine.budget_tokens'", "more than 0"]),
        (
            {"population": [{"name": n, "model": 5} for n in "abc"]},
            ["field 'population.0.model'", "expected text or a mapping"],
        ),
    ],
)
def test_config_errors_are_located_and_in_plain_words(
    change: dict[str, Any],
    expected: list[str],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    path = config(tmp_path, **change)
    assert main(["rank", str(path), "--no-progress"]) == 2
    err = " ".join(capsys.readouterr().err.split())
    for fragment in [*expected, "config.yaml"]:
        assert fragment in err, f"{fragment!r} not in {err!r}"
    for internal in ("Input should", "instance of", "Config", "Sampling", "Value error"):
        assert internal not in err
    line, key = re.search(r"line (\d+), field '(?:[\w.]+\.)?(\w+)'", err).groups()  # type: ignore[union-attr]
    assert f"{key}:" in path.read_text().splitlines()[int(line) - 1]  # the line to edit
    assert not (tmp_path / "run").exists()  # stopped before anything was spent


def test_every_config_problem_is_listed_with_the_closest_known_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Misspelt keys at several depths: the first is the error's place, the rest are
    each named with their line, and every one with the setting it was probably meant
    to be (issue 32)."""
    path = config(tmp_path, sampling={"desgin": "all"}, fit={"bootstrp": 40})
    text = path.read_text().replace("persona:", "persna:", 1)
    path.write_text(text)
    assert main(["rank", str(path), "--no-progress"]) == 2
    err = " ".join(capsys.readouterr().err.split())
    lines = text.splitlines()
    for key, meant in (("persna", "persona"), ("desgin", "design"), ("bootstrp", "bootstrap")):
        line = next(i for i, t in enumerate(lines, 1) if f"{key}:" in t)
        assert f"did you mean '{meant}'?" in err
        assert f"line {line}" in err
    assert "2 more problems: " in err
    assert not (tmp_path / "run").exists()


def test_a_config_that_is_not_a_mapping_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "config.yaml"
    path.write_text("- just\n- a list\n")
    assert main(["rank", str(path)]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "config.yaml, line 1: expected a mapping of settings" in err
    assert "RankConfig" not in err and "dictionary" not in err


def test_openings_begin_replies_and_evaluee_only_members_never_judge(tmp_path: Path) -> None:
    """A member's opening starts every reply it gives (the judges read it whole); an
    evaluee_only member is ranked but judges nothing, and the record says why."""
    members = [
        {"name": n, "model": "scripted:peer-truth", "persona": f"[quality {q}]"}
        for n, q in QUALITIES.items()
    ]
    members[0]["opening"] = "Dear friend,"
    members[-1]["evaluee_only"] = "its verdicts follow the slot"
    path = config(tmp_path, population=members, sampling={"design": "all"}, scenarios={"limit": 4})
    run = run_rank(path, progress=False)
    transcripts = [
        json.loads(line) for line in (run.out / "transcripts.jsonl").read_text().splitlines()
    ]
    opened = [
        t for t in transcripts if t["role"] == "evaluee" and t["member"] == members[0]["name"]
    ]
    assert opened and all(t["messages"][-1] == ["assistant", "Dear friend,"] for t in opened)
    assert all(t["reply"].startswith("Dear friend,My advice") for t in opened)
    shown = [
        t for t in transcripts if t["role"] == "comparison" and t["first"] == members[0]["name"]
    ]
    assert shown and all("Dear friend,My advice" in t["messages"][-1][1] for t in shown)
    silent = members[-1]["name"]
    assert not any(t["role"] == "comparison" and t["member"] == silent for t in transcripts)
    assert silent in {m.name for m in run.record.models}
    assert silent not in {j.name for j in run.record.judges}
    summary = run.record.run
    assert summary is not None
    parts = {m.name: m for m in summary.members}
    assert parts[silent].evaluee_only == "its verdicts follow the slot"
    assert parts[members[0]["name"]].opening == "Dear friend,"
    dumped = json.loads((run.out / "results.json").read_text())
    assert "evaluee_only" not in dumped["run"]["members"][0]  # left out when not set


def test_run_collects_and_fits_on_the_engine_it_is_given_and_writes_nothing(
    tmp_path: Path,
) -> None:
    path = config(
        tmp_path, scenarios={"limit": 4}, judging={"reflections": False}, fit={"bootstrap": 0}
    )
    inputs = prepare(path, None)
    specs = [m.spec for m in inputs.config.population]
    record = run_engine(
        inputs.config.engine,
        specs,
        lambda engine: run(engine, inputs),
        base=tmp_path,
        progress=False,
    ).value
    assert not inputs.out.exists()
    ranked = run_rank(path, progress=False).record
    assert [(m.name, m.elo) for m in record.models] == [(m.name, m.elo) for m in ranked.models]
    assert record.run is not None and ranked.run is not None
    assert (record.run.comparisons, record.run.verdicts) == (
        ranked.run.comparisons,
        ranked.run.verdicts,
    )


def test_a_rank_config_takes_every_fit_option_and_refuses_what_cannot_apply_at_once(
    tmp_path: Path,
) -> None:
    small = {"scenarios": {"limit": 4}, "judging": {"reflections": False}}
    fit = {"bootstrap": 0, "prior": [3, 1, 10], "self_preference": False, "restarts": 2}
    path = config(tmp_path, **small, fit={**fit, "anchor": "bo", "anchor_value": 1000})
    record = run_rank(path, progress=False).record
    assert record.settings.prior is not None and record.settings.prior.consensus_sd == 3
    assert not record.settings.self_preference and record.settings.restarts == 2
    assert next(m.elo for m in record.models if m.name == "bo") == 1000
    refusals = {
        "prior": "some",
        "anchor_value": 1e12,
        "anchor": "nobody",
        "external_weight": {"crowd": 2},
        "damping": 1,
        "cv": 1,
        "fold": 2,
    }
    for key, value in refusals.items():
        path = config(tmp_path, **small, fit={key: value})
        with pytest.raises(InputError) as refused:
            prepare(path, None)
        assert refused.value.field == f"fit.{key}" and refused.value.line is not None
    with pytest.raises(InputError, match="use at most 4") as refused:
        prepare(config(tmp_path, **small, fit={"cv": 5}), None)
    assert refused.value.field == "fit.cv"
