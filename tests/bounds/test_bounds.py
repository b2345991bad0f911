"""Bias bounds: neighbours, judges, measurement through the engine, commands, validation."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from bound_scripts import write_dataset, write_scores
from eigenjury.bounds import (
    LOCAL_GENERATORS,
    JudgedItem,
    JudgeProtocol,
    MeasureInputs,
    MeasureSettings,
    Paraphraser,
    measure_sensitivity,
    protected_spans,
    read_scores,
)
from eigenjury.bounds.neighbours import Markdown
from eigenjury.bounds.simulation import OURS, REFERENCE_CHOICES, SimulatedJudge, check
from eigenjury.cli import main
from eigenjury.engine import Engine, Store
from eigenjury.models import ModelSpec
from eigenjury.models.providers.scripted import ScriptedProvider, register_script
from eigenjury.models.types import ChatRequest

TEXTS = [
    "The answer is 42. It comes from 6 times 7, and the rest is detail.\n\nUse it with care.",
    "Install it with:\n```bash\npip install the-tool==1.2.3\n```\nThen run `tool --n 5` and "
    "wait for the result of the job.",
    "# Plan\n- first, call the API 3 times\n- then **check** the 2 results\n\n1. Done.",
    "A short reply without markdown, about the weather in 2024 and of the sea",
    "Call `__init__` first, then **read** `a**b**c` before you go on.\n\nThat is all.",
]


def one(text: str) -> JudgedItem:
    return JudgedItem("x", "q?", (text,), (None,))


@pytest.mark.parametrize("name", ["formatting", "markdown", "verbosity"])
def test_generators_protect_code_and_numbers_and_do_change_the_text(name: str) -> None:
    generator = LOCAL_GENERATORS[name]
    changed = 0
    for text in TEXTS:
        for seed in range(30):
            out = generator.perturb(one(text), np.random.default_rng(seed)).responses[0]
            assert protected_spans(out) == protected_spans(text), (name, seed, out)
            assert "```bash\npip install the-tool==1.2.3\n```" in out or "```" not in text
            changed += out != text
    assert changed >= 0.8 * len(TEXTS) * 30


def test_formatting_keeps_every_word_up_to_case() -> None:
    for seed in range(30):
        out = LOCAL_GENERATORS["formatting"].perturb(one(TEXTS[0]), np.random.default_rng(seed))
        words = re.findall(r"[A-Za-z]+", out.responses[0].lower())
        assert words == re.findall(r"[A-Za-z]+", TEXTS[0].lower())


def test_markdown_toggles_on_and_off() -> None:
    toggle = Markdown().toggle
    assert not Markdown.has_markdown(toggle(TEXTS[2]))
    assert "1. Done." in toggle(TEXTS[2])  # numbered lists stay
    on = toggle(TEXTS[0])
    assert Markdown.has_markdown(on) and on.startswith("- **The answer is")


def test_position_swap_and_identity() -> None:
    item = JudgedItem("p", "q", ("a", "b"), ("m1", "m2"))
    swapped = LOCAL_GENERATORS["position"].perturb(item, np.random.default_rng(0))
    assert swapped.responses == ("b", "a") and swapped.models == ("m2", "m1") and swapped.swapped
    assert LOCAL_GENERATORS["identity"].perturb(item, np.random.default_rng(0)) == item
    with pytest.raises(ValueError):
        LOCAL_GENERATORS["position"].perturb(one("a"), np.random.default_rng(0))


def test_paraphrases_are_checked() -> None:
    check_ = Paraphraser().accept
    original = "Use 3 eggs and `whisk()` them well before you bake the cake."
    assert check_(original, "Use 3 eggs and `whisk()` them thoroughly before baking the cake.")
    assert check_(original, "Use 4 eggs and `whisk()` them well before you bake the cake.") is None
    assert check_(original, "Use 3 eggs and `whisk()`.") is None  # under half the length
    assert check_(original, original * 3) is None
    assert check_(original, "") is None


def test_judges_bind_to_the_last_verdict_and_never_score_failures() -> None:
    single = JudgeProtocol("single")
    item = one("r")
    assert single.parse("Format: [[1]] ... so overall [[8]]", item) == 8.0
    assert single.parse("I would say 8 out of 10", item) is None
    assert single.parse("[[11]]", item) is None
    pairwise = JudgeProtocol("pairwise")
    pair = JudgedItem("p", "q", ("a", "b"), (None, None))
    assert pairwise.parse("maybe [[A=B]] but in fact [[A>>B]]", pair) == 1.0
    assert pairwise.parse("A is better", pair) is None  # a failure, never a tie (3)
    swapped = LOCAL_GENERATORS["position"].perturb(pair, np.random.default_rng(0))
    assert pairwise.parse("[[A>B]]", swapped) == 4.0  # B>A in the original order
    assert "[[A>>B]]" in pairwise.request(pair, 0).messages[0].content


def measured(tmp_path: Path, judge: str, generators: tuple[str, ...], *, m: int) -> Any:
    """The profile `bound measure` makes of the scripted `judge` on the test dataset."""
    from eigenjury.bounds import read_dataset

    items = read_dataset(write_dataset(tmp_path / "d.jsonl"))
    settings = MeasureSettings(
        judge=ModelSpec.parse(f"scripted:{judge}"),
        protocol=JudgeProtocol("single"),
        generators=generators,
        m=m,
        seed=1,
    )

    async def run() -> Any:
        async with Engine(Store(tmp_path / "s.sqlite"), progress=False) as engine:
            return await measure_sensitivity(engine, MeasureInputs(items, "d", settings))

    return asyncio.run(run())


def test_a_neighbour_the_judge_cannot_judge_counts_as_the_largest_change(tmp_path: Path) -> None:
    """A judge that breaks under an edit is the sensitive case: its failed judgments
    are kept as changes of 1, not dropped to leave the judgments that survived."""
    from eigenjury.bounds import SensitivityProfile
    from eigenjury.records import read_record, write_record

    profile = measured(tmp_path, "bounds-brittle", ("markdown", "identity"), m=20)
    markdown = profile.generators["markdown"]
    assert markdown.failures == {"unparsed": 20}  # every edited reply broke it
    # 19 pairs: the mumbling item has no original score to change from
    assert markdown.m == len(markdown.pairs) == 19
    assert all(p.perturbed is None for p in markdown.pairs) and markdown.estimate == 1.0
    assert profile.generators["identity"].estimate < 0.3  # type: ignore[operator]
    path = tmp_path / "profile.json"
    write_record(path, profile)
    assert '"perturbed": null' in path.read_text()
    assert read_record(path, SensitivityProfile) == profile


def test_measurement_through_the_engine_recovers_the_known_sensitivity(tmp_path: Path) -> None:
    profile = measured(tmp_path, "bounds-biased", ("formatting", "markdown", "identity"), m=40)
    assert profile.original_failures == {"unparsed": 1}  # the mumbling item, not a tie
    identity = profile.generators["identity"]
    markdown = profile.generators["markdown"]
    # identity re-judges with another seed: jitter, not the cached answer
    assert identity.estimate is not None and 0.03 < identity.estimate < 0.2
    assert profile.jitter == identity.estimate
    # markdown adds bold to every plain response: +3 of 9 points on each
    assert markdown.estimate is not None and markdown.estimate > 0.3
    assert markdown.beyond_jitter is not None and markdown.beyond_jitter > 0.3
    for record in profile.generators.values():
        assert record.upper_bound is not None and record.estimate is not None
        assert record.upper_bound >= record.estimate
        assert record.m == 39
    assert profile.generators["formatting"].estimate < markdown.estimate  # type: ignore[operator]
    assert profile.accounting is not None and profile.accounting.total.calls == 40 + 3 * 40


def run_cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(argv)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.fixture
def profile_path(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    out = tmp_path / "profile.json"
    code, text, _ = run_cli(
        [
            "bound",
            "measure",
            str(write_dataset(tmp_path / "d.jsonl")),
            "--judge",
            "scripted:bounds-biased",
            "--generators",
            "formatting,verbosity,identity",
            "--m",
            "30",
            "--out",
            str(out),
            "--store",
            str(tmp_path / "s.sqlite"),
            "--no-progress",
        ],
        capsys,
    )
    assert code == 0 and "Sensitivity of scripted:bounds-biased" in text
    return out


def test_measure_then_apply_writes_scores_and_a_consistent_certificate(
    tmp_path: Path, profile_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rng = np.random.default_rng(0)
    rows = [(f"t{i}", int(rng.integers(1 + i % 4, 7 + i % 4)), f"m{i % 4}") for i in range(400)]
    scores = write_scores(tmp_path / "scores.csv", rows)
    out = tmp_path / "out"
    code, text, err = run_cli(
        ["bound", "apply", str(scores), "--profile", str(profile_path), "--scale", "likert10",
         "--tau", "0.5", "--delta", "0.05", "--out", str(out)],
        capsys,
    )  # fmt: skip
    assert code == 0, err
    assert "certified" in text and "utility retained (model level)" in text
    cert = json.loads((out / "certificate.json").read_text())
    assert cert["feasible"] and cert["dim"] == 400 and cert["tau"] == 0.5
    assert cert["sigma"] == pytest.approx(cert["sigma_max"] / 2)
    assert cert["sensitivity"] == max(g["upper_bound"] for g in cert["generators"].values())
    assert set(cert["generators"]) == {"formatting", "verbosity", "identity"}
    assert cert["threshold"] + cert["sigma_max"] * cert["noise_radius"] == pytest.approx(0.5)
    assert sum(cert["split"].values()) == pytest.approx(0.05)
    assert cert["bounded"].startswith("the released per-item score vector")
    assert cert["utility"]["models"]["kendall"] > 0.5
    assert cert["stability"]["draws"] == 200
    assert "removes no bias" in (out / "report.html").read_text()
    assert "not the judge's bias" in cert["bounded"]
    # first, in one sentence on the judge's scale, what the certificate guarantees; the
    # read-back bound against what an edit of k items could do without any release
    plain = cert["plain"]
    anyway = 9 * cert["neighbour_size"] ** 0.5
    if cert["raw_bound"] >= anyway:
        assert plain.startswith("This certificate guarantees nothing here")
        assert "a judge whose scores move less" in plain
    else:
        assert plain.startswith("With probability at least 0.95, an edit of one unit")
    assert f"{cert['raw_bound']:.3g} points on the likert10 scale [1, 10]" in plain
    flat = " ".join(text.split())
    assert flat.startswith(plain)
    level = next(iter(cert["generators"].values()))["confidence"]
    assert f"at {100 * level:.4g}% confidence, the share of delta" in flat
    assert cert["profile"]["confidence"] == 0.95  # what `bound measure` printed them at
    lines = (out / "released.csv").read_text().splitlines()
    assert lines[0] == "item,model,criterion,score,normalised,released,released_raw"
    assert len(lines) == 401
    first = lines[1].split(",")
    assert float(first[4]) == pytest.approx((rows[0][1] - 1) / 9)
    # the same seed releases the same scores; another seed other noise
    assert (
        main(
            [
                "bound",
                "apply",
                str(scores),
                "--profile",
                str(profile_path),
                "--scale",
                "likert10",
                "--tau",
                "0.5",
                "--delta",
                "0.05",
                "--out",
                str(out / "again"),
            ]
        )
        == 0
    )
    assert (out / "again" / "released.csv").read_text() == (out / "released.csv").read_text()


@pytest.mark.fuzz
def test_model_means_equal_up_to_rounding_are_ties_not_a_ranking(
    tmp_path: Path, profile_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Three models whose mean scores are equal (17/36 of the scale each), which floating
    point sums to values 1e-16 apart: their order is rounding, so the model-level
    correlations and the ranking's stability are undefined, and the certificate says why."""
    items = {"m0": (1, 1, 5, 10), "m1": (1, 2, 6, 8), "m2": (1, 2, 7, 7)}
    rows = [(f"{m}-{i}", s, m) for m, scores in items.items() for i, s in enumerate(scores)]
    scores = write_scores(tmp_path / "scores.csv", rows)
    out = tmp_path / "out"
    code, text, err = run_cli(
        ["bound", "apply", str(scores), "--profile", str(profile_path), "--scale", "likert10",
         "--tau", "0.5", "--delta", "0.05", "--k", "12", "--out", str(out)],
        capsys,
    )  # fmt: skip
    assert code == 0, err
    cert = json.loads((out / "certificate.json").read_text())
    assert cert["utility"]["models"] == {"pearson": None, "spearman": None, "kendall": None}
    assert cert["utility"]["tie_tolerance"] > 0
    stability = cert["stability"]
    assert stability["kendall_mean"] is None and stability["kendall_p05"] is None
    assert stability["same_top_model"] is None
    assert any("equal to within" in w and "rounding" in w for w in cert["warnings"])
    assert "equal to within" in " ".join(text.split())
    # a fourth model well above them: a ranking with a tie, and a top model to keep
    rows += [(f"m3-{i}", 10, "m3") for i in range(4)]
    write_scores(tmp_path / "scores.csv", rows)
    code, _, err = run_cli(
        ["bound", "apply", str(scores), "--profile", str(profile_path), "--scale", "likert10",
         "--tau", "0.5", "--delta", "0.05", "--k", "16", "--out", str(out / "four")],
        capsys,
    )  # fmt: skip
    assert code == 0, err
    cert = json.loads((out / "four" / "certificate.json").read_text())
    assert cert["utility"]["models"]["kendall"] is not None
    assert cert["stability"]["same_top_model"] is not None
    assert any(w.startswith("3 of the 4 models have mean scores") for w in cert["warnings"])


def write_results(path: Path, tasks: list[tuple[str, str, float, bool]]) -> Path:
    """A contracts results.json as eigenjury 0.1 wrote it (no kind): per task its id,
    candidate, score and whether its one jury criterion passed."""
    record = {
        "eigenjury": "0.1.0",
        "contract": "c",
        "jury": {"jurors": ["j"]},
        "summary": [],
        "tasks": [
            {"task_id": task, "candidate": candidate, "score": score, "passed": True,
             "reward": score / 100, "threshold": 0.0, "complete": True,
             "criteria": [{"id": "k1", "grader": "llm_judge", "weight": 1.0, "passed": passed,
                           "awarded": float(passed), "votes": {"C": 2, "I": 1, "unparsed": 0,
                           "error": 0}, "split": True}],
             "jury_cost_usd": None, "jury_input_tokens": 0, "jury_output_tokens": 0,
             "jury_calls": 1, "candidate_cost_usd": None, "candidate_output_tokens": 0}
            for task, candidate, score, passed in tasks
        ],
        "warnings": [],
    }  # fmt: skip
    path.write_text(json.dumps(record))
    return path


def test_apply_reads_verdicts_and_contract_results(
    tmp_path: Path, profile_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    verdicts = tmp_path / "verdicts.csv"
    verdicts.write_text(
        "scenario,judge,first,second,verdict\n"
        + "".join(f"s{i},j,a,b,{1 if i % 3 else 0}\ns{i},j,b,a,{2 if i % 3 else 0}\n"
                  for i in range(30))
        + "".join(f"t{i},j,a,c,1\nt{i},j,c,b,{i % 3}\n" for i in range(30))
    )  # fmt: skip
    peer = read_scores(verdicts)
    assert peer.dim == 120 and peer.scale.name == "preference"
    models = dict(zip(peer.models, peer.model_scores(peer.normalised), strict=True))
    assert models["a"] > models["b"] and models["a"] > models["c"]
    results = write_results(
        tmp_path / "results.json",
        [(f"t{i}", f"c{i % 3}", 30.0 * (i % 3) + 5, i % 2 == 0) for i in range(30)],
    )
    task_level = read_scores(results)
    assert task_level.scale.name == "percent" and task_level.dim == 30
    criterion = read_scores(results, level="criterion")
    assert criterion.dim == 30 and set(criterion.raw) == {0.0, 1.0}
    assert criterion.criteria[0] == "k1"
    for path, extra in ((verdicts, []), (results, []), (results, ["--level", "criterion"])):
        code, _, err = run_cli(
            ["bound", "apply", str(path), "--profile", str(profile_path), "--tau", "0.5",
             "--delta", "0.05", "--out", str(tmp_path / f"o{len(extra)}"), *extra],
            capsys,
        )  # fmt: skip
        assert code == 0, err


def test_certify_prints_the_fields_and_explains_infeasible_targets(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, _ = run_cli(
        ["bound", "certify", "--tau", "0.5", "--delta", "0.01", "--sensitivity", "0.02",
         "--dim", "500", "--range-bound"],
        capsys,
    )  # fmt: skip
    record = json.loads(out)
    assert code == 0 and record["feasible"]
    assert {"alpha", "sigma_max", "threshold", "smallest_feasible_tau"} <= set(record)
    code, out, err = run_cli(
        ["bound", "certify", "--tau", "0.01", "--delta", "0.01", "--sensitivity", "0.3",
         "--dim", "500", "--no-range-bound"],
        capsys,
    )  # fmt: skip
    assert code == 2 and not json.loads(out)["feasible"]
    assert "smallest feasible tau for these settings is 0.4243" in err
    assert "Traceback" not in err


def bad_apply(tmp_path: Path, profile: Path, scores: Path, extra: list[str], capsys: Any) -> str:
    code, _, err = run_cli(
        ["bound", "apply", str(scores), "--profile", str(profile), "--tau", "0.5", "--delta",
         "0.05", "--out", str(tmp_path / "bad"), *extra],
        capsys,
    )  # fmt: skip
    assert code == 2 and "Traceback" not in err
    assert not (tmp_path / "bad" / "certificate.json").exists()
    return " ".join(err.split())


def test_apply_error_paths_are_located(
    tmp_path: Path, profile_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    good = write_scores(tmp_path / "g.csv", [(f"t{i}", 5, "m") for i in range(20)])
    likert = ["--scale", "likert10"]
    out_of_range = write_scores(tmp_path / "r.csv", [("a", 5, "m"), ("b", 11, "m")])
    err = bad_apply(tmp_path, profile_path, out_of_range, likert, capsys)
    assert "r.csv, line 3, column 'score'" in err and "[1, 10]" in err
    duplicate = write_scores(tmp_path / "dup.csv", [("a", 5, "m"), ("a", 6, "m")])
    err = bad_apply(tmp_path, profile_path, duplicate, likert, capsys)
    assert "line 3" in err and "already appeared on line 2" in err
    empty = tmp_path / "e.csv"
    empty.write_text("item,score\n")
    assert "no scores" in bad_apply(tmp_path, profile_path, empty, likert, capsys)
    assert "--scale" in bad_apply(tmp_path, profile_path, good, [], capsys)
    jsonl = tmp_path / "s.jsonl"
    jsonl.write_text('{"item": "a", "score": 0.5}\n{"item": "b"}\n')
    err = bad_apply(tmp_path, profile_path, jsonl, ["--scale", "unit"], capsys)
    assert "s.jsonl, line 2, column 'score'" in err
    err = bad_apply(tmp_path, profile_path, good, [*likert, "--tau", "0.001"], capsys)
    assert "infeasible" in err and "smallest feasible tau" in err
    err = bad_apply(tmp_path, profile_path, good, [*likert, "--sigma", "5"], capsys)
    assert "exceeds sigma_max" in err
    err = bad_apply(tmp_path, profile_path, good, [*likert, "--generators", "markdown"], capsys)
    assert "unknown generator 'markdown'" in err
    err = bad_apply(tmp_path, profile_path, good, [*likert, "--k", "21"], capsys)
    assert "exceeds the number of items (20)" in err
    results = write_results(tmp_path / "results.json", [("t", "c", 120.0, True)])
    err = bad_apply(tmp_path, profile_path, results, [], capsys)
    assert "results.json" in err and "field 'tasks.0.score'" in err
    not_profile = tmp_path / "p.json"
    not_profile.write_text("{}")
    err = bad_apply(tmp_path, not_profile, good, likert, capsys)
    assert "not a profile" in err


def test_measure_error_paths(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = write_dataset(tmp_path / "d.jsonl", 5)
    base = [
        "bound",
        "measure",
        str(data),
        "--judge",
        "scripted:bounds-biased",
        "--out",
        str(tmp_path / "p.json"),
        "--store",
        str(tmp_path / "s.sqlite"),
        "--no-progress",
    ]
    for extra, message in (
        (["--generators", "position"], "needs pairwise items"),
        (["--generators", "paraphrase"], "--paraphraser"),
        (["--generators", "shouting"], "unknown generator 'shouting'"),
    ):
        code, _, err = run_cli([*base, *extra], capsys)
        assert code == 2 and message in err
    broken = tmp_path / "b.jsonl"
    broken.write_text('{"id": 1, "prompt": "q", "response": "r"}\n{"id": 2, "prompt": "q"}\n')
    code, _, err = run_cli([*base[:2], str(broken), *base[3:]], capsys)
    assert code == 2 and "b.jsonl, line 2, field 'response'" in err
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n")
    code, _, err = run_cli([*base[:2], str(empty), *base[3:]], capsys)
    assert code == 2 and "empty" in err


def test_monte_carlo_violation_rate_stays_below_delta_on_a_small_grid() -> None:
    judges = [SimulatedJudge(rate=0.1, points=3, jitter=0.2), SimulatedJudge(0.03, 4, 0.0)]
    for judge in judges:
        for tau, delta in ((0.1, 0.05), (0.3, 0.01)):
            result = check(judge, tau=tau, delta=delta, dim=100, measurements=8, draws=250)
            assert result.feasible_share == 1.0
            assert result.violation_rate <= delta
    # the same check has power: the reference's mixed units break the promise
    mixed = next(c for c in REFERENCE_CHOICES if c.name.startswith("mixed"))
    broken = check(judges[0], tau=0.1, delta=0.05, dim=100, measurements=8, draws=250,
                   choices=mixed)  # fmt: skip
    assert broken.violation_rate > 0.05
    assert OURS.upper_bound and not OURS.mixed_units


def test_the_check_can_fail_where_the_bound_does_not_hold() -> None:
    """A certificate on the Markov path holds; one that assumes k = 1 while a neighbour
    moves 20 items, and one measured on a calm judge but deployed on a loud one, fail
    far above delta, with intervals clustered by measurement that say so."""
    calm = SimulatedJudge(rate=0.01, points=1, jitter=0.0)
    markov = check(calm, tau=0.1, delta=0.05, dim=200, m=3000, measurements=6, draws=200)
    assert markov.markov_share == 1.0 and markov.violation_rate <= 0.05
    top = SimulatedJudge(rate=1.0, points=9, jitter=0.0)
    wrong_k = check(top, tau=0.3, delta=0.05, dim=200, measurements=6, draws=200, true_k=20)
    assert wrong_k.violation_rate - 1.96 * wrong_k.violation_se > 0.05
    right_k = check(top, tau=1.5, delta=0.05, dim=200, measurements=6, draws=200,
                    assumed_k=20, true_k=20)  # fmt: skip
    assert right_k.feasible_share == 1.0 and right_k.violation_rate <= 0.05
    loud = SimulatedJudge(rate=0.6, points=6, jitter=0.0)
    louder = check(calm, tau=0.1, delta=0.05, dim=200, m=3000, measurements=6, draws=200,
                   deployed=loud)  # fmt: skip
    assert louder.markov_share == 1.0
    assert louder.violation_rate - 1.96 * louder.violation_se > 0.05


def scripted_paraphrase(request: ChatRequest) -> str:
    """A light rewrite; item 5 comes back far too long and item 7 loses a number, so
    both must be rejected before anything is judged."""
    text = request.messages[-1].content
    if text.startswith("Answer 5."):
        return text * 3
    if text.startswith("Answer 7."):
        return text.replace("Answer 7.", "Answer seven.")
    return text.replace("covers", "addresses")


register_script("bounds-paraphraser", scripted_paraphrase)


def test_paraphrase_neighbours_through_the_engine_are_checked_then_judged(
    tmp_path: Path,
) -> None:
    from eigenjury.bounds import read_dataset

    items = read_dataset(write_dataset(tmp_path / "d.jsonl", n=12))
    settings = MeasureSettings(
        judge=ModelSpec.parse("scripted:bounds-biased"),
        protocol=JudgeProtocol("single"),
        generators=("paraphrase",),
        m=12,
        seed=2,
        paraphraser=ModelSpec.parse("scripted:bounds-paraphraser"),
    )
    judge = ScriptedProvider("bounds-biased")

    async def run() -> Any:
        providers = {"scripted:bounds-biased": judge}
        async with Engine(Store(tmp_path / "s.sqlite"), progress=False, providers=providers) as e:
            return await measure_sensitivity(e, MeasureInputs(items, "d", settings))

    profile = asyncio.run(run())
    record = profile.generators["paraphrase"]
    # rejected: the long one and the one that lost a number; unparsed: the mumbling item
    assert record.failures == {"rejected": 2, "unparsed": 1}
    assert record.m == 12 - 1 - 2  # minus the mumbling item and the two rejected
    # the rewrite keeps the hidden quality, so only the judge's own jitter moves scores
    assert record.estimate is not None and record.estimate < 0.2
    judged = list(judge.successes)  # every request the judge answered
    assert not any("Answer seven" in k or k.count("Answer 5.") > 1 for k in judged)
    assert any("addresses the point" in k for k in judged)


def test_the_commands_name_every_generator_scale_and_method() -> None:
    from eigenjury.bounds.neighbours import GENERATOR_NAMES
    from eigenjury.bounds.scores import SCALES
    from eigenjury.cli import build_parser
    from eigenjury.commands.bounds import BOUND_GENERATORS, BOUND_SCALES
    from eigenjury.stats.abb import BOUND_METHODS

    assert set(BOUND_GENERATORS.split(",")) == set(GENERATOR_NAMES)
    assert set(BOUND_SCALES) == set(SCALES)
    base = ["bound", "apply", "s.csv", "--profile", "p.json", "--tau", "1", "--delta", "0.1",
            "--out", "o"]  # fmt: skip
    for method in BOUND_METHODS:
        assert build_parser().parse_args([*base, "--method", method]).method == method


def test_nan_and_infinite_arguments_are_refused(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stop:
        main(["bound", "certify", "--tau", "nan", "--delta", "0.01", "--sensitivity", "0.1",
              "--dim", "10"])  # fmt: skip
    assert stop.value.code == 2 and "'nan' is not a number" in capsys.readouterr().err


def test_measure_with_no_readable_judgment_fails_and_keeps_the_old_profile(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Every reply unparsed: exit 1 with a message pointing at the stored replies, and a
    profile from an earlier run is not replaced by an empty one."""
    data = tmp_path / "mute.jsonl"
    data.write_text(
        "".join(
            json.dumps({"id": f"i{i}", "prompt": "Q?", "response": f"mumble [quality {i}]"}) + "\n"
            for i in range(2, 8)
        )
    )
    out = tmp_path / "profile.json"
    out.write_text("an earlier profile")
    store = tmp_path / "s.sqlite"
    argv = ["bound", "measure", str(data), "--judge", "scripted:bounds-biased", "--out",
            str(out), "--store", str(store), "--no-progress"]  # fmt: skip
    code, text, err = run_cli(argv, capsys)
    flat = " ".join(err.split())
    assert code == 1, flat
    assert "no judgment could be read (unparsed 6 among the originals" in flat
    assert f"eigenjury export replies.jsonl --store {store}" in flat
    assert out.read_text() == "an earlier profile"
    assert "Traceback" not in err + text


def test_apply_refuses_an_out_folder_that_would_overwrite_its_input(
    tmp_path: Path, profile_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An earlier released.csv (item, score, model: a valid score file) released again
    into its own folder would be overwritten while it is read; and --out may not be a
    file. Both refused before anything is written. A release under its old name
    (debiased.csv) is not overwritten: it is read, and named as earlier."""
    (tmp_path / "released").mkdir()
    rows = [(f"t{i}", 1 + i % 10, f"m{i % 3}") for i in range(30)]
    scores = write_scores(tmp_path / "released" / "released.csv", rows)
    before = scores.read_text()
    for out in (tmp_path / "released", scores):
        argv = ["bound", "apply", str(scores), "--profile", str(profile_path), "--scale",
                "likert10", "--tau", "0.5", "--delta", "0.05", "--out", str(out)]  # fmt: skip
        code, text, err = run_cli(argv, capsys)
        assert code == 2, err
        assert str(scores) in err and "Traceback" not in err + text
        assert scores.read_text() == before
        assert not (tmp_path / "released" / "certificate.json").exists()
    (tmp_path / "old").mkdir()
    old = write_scores(tmp_path / "old" / "debiased.csv", rows)
    argv = ["bound", "apply", str(old), "--profile", str(profile_path), "--scale", "likert10",
            "--tau", "0.5", "--delta", "0.05", "--out", str(old.parent)]  # fmt: skip
    code, text, err = run_cli(argv, capsys)
    assert code == 0, err
    assert old.read_text() == before and (old.parent / "released.csv").exists()
    assert "debiased.csv is an earlier release (under its old name)" in text


def test_measure_stopped_by_its_budget_exits_1_and_a_rerun_finishes_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Calls the budget kept back leave their items out of the profile: exit 1 with a
    rerun hint (as batch and grade), and the rerun sends only what is missing."""
    data = write_dataset(tmp_path / "d.jsonl", n=10)
    out, store = tmp_path / "profile.json", tmp_path / "s.sqlite"
    argv = ["bound", "measure", str(data), "--judge", "scripted:bounds-biased", "--m", "10",
            "--generators", "identity", "--out", str(out), "--store", str(store),
            "--no-progress"]  # fmt: skip
    # --go: the plan sees the budget short; the run is started anyway, to be stopped by it
    code, text, err = run_cli([*argv, "--budget-tokens", "1200", "--go"], capsys)
    flat = " ".join((text + err).split())
    assert code == 1, flat
    assert "call(s) were not made or failed (a budget stop" in flat
    assert "rerun the same command: it sends only what is missing" in flat
    stopped = json.loads(out.read_text())
    # the originals' stream comes first: the budget (one for every stream) stops the
    # neighbours'
    assert stopped["generators"]["identity"]["failures"]["error"] > 0
    code, text, err = run_cli(argv, capsys)
    assert code == 0 and "not made" not in text + err
    profile = json.loads(out.read_text())
    assert "error" not in profile["original_failures"]  # (one item is unparsed by design)
    assert "error" not in profile["generators"]["identity"]["failures"]
    assert 0 < profile["accounting"]["total"]["cached"] < 20


def test_measure_warns_when_some_judgments_are_unparsed(
    profile_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # the fixture's dataset has one item the judge cannot score ("mumble")
    folder = profile_path.parent
    argv = ["bound", "measure", str(folder / "d.jsonl"), "--judge", "scripted:bounds-biased"]
    argv += ["--generators", "formatting,verbosity,identity", "--m", "30", "--no-progress"]
    argv += ["--out", str(profile_path), "--store", str(folder / "s.sqlite")]
    code, text, _ = run_cli(argv, capsys)
    flat = " ".join(text.split())
    assert code == 0
    assert "warning: some judgments are missing and left out (unparsed" in flat
    assert "rerun" not in flat  # unparsed replies are cached: a rerun changes nothing
    assert "eigenjury export" in flat and "wrote the profile" in flat


def apply_argv(scores: Path, profile: Path, out: Path) -> list[str]:
    return ["bound", "apply", str(scores), "--profile", str(profile), "--scale", "likert10",
            "--tau", "0.5", "--delta", "0.05", "--out", str(out)]  # fmt: skip


def test_a_profile_and_a_certificate_are_records_that_read_back_unchanged(
    tmp_path: Path, profile_path: Path
) -> None:
    from eigenjury.bounds import BoundCertificate, SensitivityProfile, read_profile
    from eigenjury.records import read_any_record, read_record, write_record

    rows = [(f"t{i}", 1 + i % 10, f"m{i % 3}") for i in range(30)]
    assert (
        main(apply_argv(write_scores(tmp_path / "s.csv", rows), profile_path, tmp_path / "o")) == 0
    )
    certificate_path = tmp_path / "o" / "certificate.json"
    for path, kind in ((profile_path, SensitivityProfile), (certificate_path, BoundCertificate)):
        data = json.loads(path.read_text())
        assert (
            list(data)[:4] == ["kind", "eigenjury", "schema_version", "created"]
            and data["kind"] == kind.KIND
        )
        record = read_record(path, kind)
        write_record(tmp_path / "again.json", record)
        assert read_any_record(tmp_path / "again.json") == record
        assert json.loads((tmp_path / "again.json").read_text()) == data
    profile = read_profile(profile_path)
    assert profile.overview().models == ("scripted:bounds-biased",)
    certificate = read_record(certificate_path, BoundCertificate)
    assert certificate.overview().name == "30 items (scores)"


def test_files_written_before_records_had_a_kind_still_read(
    tmp_path: Path, profile_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A profile as eigenjury 0.1 wrote it (its own kind name, no version) is still
    applied; a certificate without a kind is still read."""
    from eigenjury.bounds import BoundCertificate
    from eigenjury.records import read_any_record

    data = json.loads(profile_path.read_text())
    old = {"kind": "eigenjury-bound-profile"}
    old |= {k: v for k, v in data.items() if k not in ("kind", "eigenjury", "created")}
    old_profile = tmp_path / "old-profile.json"
    old_profile.write_text(json.dumps(old))
    scores = write_scores(tmp_path / "s.csv", [(f"t{i}", 1 + i % 10, "m") for i in range(30)])
    code, _, err = run_cli(apply_argv(scores, old_profile, tmp_path / "o"), capsys)
    assert code == 0, err
    certificate = json.loads((tmp_path / "o" / "certificate.json").read_text())
    old_certificate = tmp_path / "old-certificate.json"
    old_certificate.write_text(
        json.dumps(
            {k: v for k, v in certificate.items() if k not in ("kind", "eigenjury", "created")}
        )
    )
    record = read_any_record(old_certificate)
    assert isinstance(record, BoundCertificate) and record.created is None
    assert record.generators.keys() == {"formatting", "verbosity", "identity"}


def test_a_damaged_profile_or_certificate_is_refused_with_the_field_named(
    tmp_path: Path, profile_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from eigenjury.bounds import BoundCertificate
    from eigenjury.errors import InputError
    from eigenjury.records import read_record

    damaged = json.loads(profile_path.read_text())
    damaged["generators"]["identity"]["pairs"][0]["perturbed"] = 1.5
    profile = tmp_path / "damaged.json"
    profile.write_text(json.dumps(damaged))
    good = write_scores(tmp_path / "g.csv", [(f"t{i}", 5, "m") for i in range(20)])
    err = bad_apply(tmp_path, profile, good, ["--scale", "likert10"], capsys)
    assert f"{profile}: not a profile from `eigenjury bound measure`" in err
    assert "field 'generators.identity.pairs.0.perturbed'" in err
    assert main(apply_argv(good, profile_path, tmp_path / "o")) == 0
    certificate = json.loads((tmp_path / "o" / "certificate.json").read_text())
    del certificate["sigma"]
    certificate["alpha"] = float("nan")
    (tmp_path / "o" / "certificate.json").write_text(json.dumps(certificate))
    with pytest.raises(InputError) as caught:
        read_record(tmp_path / "o" / "certificate.json", BoundCertificate)
    message = str(caught.value)
    assert message.startswith(str(tmp_path / "o" / "certificate.json"))
    assert "not a valid bound-certificate record" in message and "field 'alpha'" in message
    err = bad_apply(tmp_path, tmp_path / "o" / "certificate.json", good, [], capsys)
    assert "this is a bound-certificate record, not a sensitivity-profile record" in err


def test_apply_writes_a_report_where_names_from_the_score_file_are_escaped(
    tmp_path: Path, profile_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    script = "<script>alert(1)</script>"
    rows = [(f"t{i}", 1 + i % 10, script if i % 2 else "plain") for i in range(30)]
    out = tmp_path / "o"
    scores = write_scores(tmp_path / "s.csv", rows)
    code, text, err = run_cli(apply_argv(scores, profile_path, out), capsys)
    assert code == 0, err
    assert "report.html" in text
    page = (out / "report.html").read_text()
    assert "<script" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    certificate = json.loads((out / "certificate.json").read_text())
    assert "Bias bound on 30 items (scores)" in page
    assert f"{certificate['sigma']:.4g} / {certificate['sigma_max']:.4g}" in page
    for name, generator in certificate["generators"].items():
        assert f'<td class="l">{name}</td><td class="">{generator["m"]}</td>' in page
    assert "scripted:bounds-biased" in page and "Utility retained" in page
