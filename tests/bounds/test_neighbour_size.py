"""Certificates that know their k (read from the scores' structure) and that do not
pass empty (a floor that eats the noise share, no noise at all, a bound spanning the
whole range): constructed inputs with known answers."""

from __future__ import annotations

import asyncio
import json
import math
import re
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from bound_scripts import write_scores
from eigenjury.bounds import (
    BoundCertificate,
    JudgeProtocol,
    MeasureInputs,
    MeasureSettings,
    SensitivityProfile,
    measure_sensitivity,
    read_dataset,
    read_scores,
)
from eigenjury.bounds.record import GeneratorProfile, Pair, ScalePart
from eigenjury.bounds.scores import SCALES
from eigenjury.bounds.simulation import SimulatedJudge, check
from eigenjury.cli import main
from eigenjury.engine import Engine, Store
from eigenjury.models import ModelSpec
from eigenjury.models.providers.scripted import ScriptedProvider, register_script
from eigenjury.models.types import ChatRequest
from eigenjury.peer.designs import Comparison, design_random_groups
from eigenjury.records import read_record, write_record
from eigenjury.stats.abb import certify, mean_upper_bound

MEMBERS = ["ada", "bob", "cy", "dee", "eve", "fay", "gus", "hal"]
NEW_FIELDS = ("k_source", "k_derived", "k_unit", "raw_bound", "deterministic")


def write_profile(path: Path, changes: list[float]) -> Path:
    """A profile whose one generator saw these per-item changes (in [0, 1] units)."""
    pairs = [
        Pair(item=f"i{i}", original=0.5, perturbed=0.5 + change) for i, change in enumerate(changes)
    ]
    profile = SensitivityProfile(
        judge="constructed",
        protocol="single",
        scale=ScalePart(name="likert10", low=1.0, high=10.0),
        dataset="d.jsonl",
        items=len(pairs),
        m=len(pairs),
        seed=0,
        confidence=0.95,
        method="kl",
        paraphraser=None,
        original_failures={},
        jitter=None,
        generators={
            "formatting": GeneratorProfile(
                estimate=None,
                upper_bound=None,
                confidence=0.95,
                method="kl",
                m=len(pairs),
                beyond_jitter=None,
                failures={},
                pairs=pairs,
            )
        },
        accounting=None,
    )
    write_record(path, profile)
    return path


def write_group_verdicts(path: Path, judges_per_group: int) -> Path:
    """A peer verdict file from the groups-of-4 design: per scenario 4 evaluees, every
    ordered pair, judged by `judges_per_group` judges."""
    design = design_random_groups(
        MEMBERS, [f"s{i}" for i in range(12)], group_size=4, judges_per_group=judges_per_group
    )
    rng = np.random.default_rng(0)
    path.write_text(
        "scenario,judge,first,second,verdict\n"
        + "".join(
            f"{c.scenario},{c.judge},{c.first},{c.second},{rng.integers(3)}\n" for c in design
        )
    )
    return path


def apply(
    scores: Path, profile: Path, out: Path, extra: list[str], capsys: Any
) -> tuple[int, str, str]:
    code = main(
        ["bound", "apply", str(scores), "--profile", str(profile), "--delta", "0.05",
         "--out", str(out), *extra]
    )  # fmt: skip
    captured = capsys.readouterr()
    return code, " ".join(captured.out.split()), " ".join(captured.err.split())


@pytest.mark.parametrize("judges", [1, 2, 3])
def test_k_of_a_groups_of_4_verdict_file_is_2_g_minus_1_rows_per_judge(
    tmp_path: Path, judges: int
) -> None:
    """One reply meets 3 others in both orders: 6 rows per judge of its group."""
    path = write_group_verdicts(tmp_path / "v.csv", judges)
    neighbourhood = read_scores(path).neighbourhood
    assert neighbourhood.k == 6 * judges and neighbourhood.source == "rows per reply"
    # the named reply does feed k rows
    assert neighbourhood.unit is not None
    scenario, evaluee = (part.split(" ")[1] for part in neighbourhood.unit.split(", "))
    rows = [line.split(",") for line in path.read_text().splitlines()[1:]]
    fed = [r for r in rows if r[0] == scenario and evaluee in (r[2], r[3])]
    assert len(fed) == neighbourhood.k
    assert neighbourhood.reason == f"one reply feeds {6 * judges} rows ({neighbourhood.unit})"


def test_apply_takes_k_from_the_verdicts_and_refuses_a_smaller_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    verdicts = write_group_verdicts(tmp_path / "v.csv", 1)
    profile = write_profile(tmp_path / "p.json", [0.0] * 40 + [0.1] * 10)
    code, text, err = apply(verdicts, profile, tmp_path / "o", ["--tau", "1"], capsys)
    assert code == 0, err
    cert = json.loads((tmp_path / "o" / "certificate.json").read_text())
    unit = cert["k_unit"]
    assert unit.startswith("scenario s") and ", evaluee " in unit
    assert (cert["neighbour_size"], cert["k_source"], cert["k_derived"]) == (6, "rows per reply", 6)
    assert f"neighbour size k = 6 (rows per reply: {unit})" in text
    # the profile measured single items, no reply feeding 6 rows: a 6-row neighbour
    # rests on the range, with no estimate, and the certificate says why
    formatting = cert["generators"]["formatting"]
    assert formatting["estimate"] is None and formatting["upper_bound"] == pytest.approx(
        math.sqrt(6)
    )
    assert formatting["strata"] == [
        {"size": 6, "m": 0, "estimate": None, "upper_bound": 1.0, "confidence": 1.0}
    ]
    assert any(w.startswith("the profile has no unit of 6 items") for w in cert["warnings"])
    assert "formatting per unit size (per item): 6 items: none measured (the range, 1)" in text
    assert cert["bias_bound"] == "range" and cert["bias_term"] == pytest.approx(math.sqrt(6))

    code, _, err = apply(verdicts, profile, tmp_path / "bad", ["--tau", "1", "--k", "1"], capsys)
    assert code == 2 and "Traceback" not in err
    assert f"--k 1 is below the k of these scores, 6: one reply feeds 6 rows ({unit})" in err
    assert "field '--k'" in err and not (tmp_path / "bad" / "certificate.json").exists()

    code, text, err = apply(verdicts, profile, tmp_path / "o8", ["--tau", "1", "--k", "8"], capsys)
    assert code == 0, err
    cert = json.loads((tmp_path / "o8" / "certificate.json").read_text())
    assert (cert["neighbour_size"], cert["k_source"], cert["k_derived"]) == (8, "given", 6)
    assert f"k = 8 (given; the scores give 6: {unit})" in text


def write_results(path: Path, criteria_per_task: dict[tuple[str, str], int]) -> Path:
    """A contracts results.json: per (task, candidate) that many criteria."""
    tasks = [
        {"task_id": task, "candidate": candidate, "score": 50.0, "passed": True,
         "reward": 0.5, "threshold": 0.0, "complete": True,
         "criteria": [{"id": f"k{j}", "grader": "llm_judge", "weight": 1.0, "passed": j % 2 == 0,
                       "awarded": float(j % 2 == 0)} for j in range(n)],
         "jury_cost_usd": None, "jury_input_tokens": 0, "jury_output_tokens": 0,
         "jury_calls": 1, "candidate_cost_usd": None, "candidate_output_tokens": 0}
        for (task, candidate), n in criteria_per_task.items()
    ]  # fmt: skip
    record = {"eigenjury": "0.1.0", "contract": "c", "jury": {"jurors": ["j"]}, "summary": [],
              "tasks": tasks, "warnings": []}  # fmt: skip
    path.write_text(json.dumps(record))
    return path


def test_k_of_contract_results_is_the_items_of_one_submission(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    results = write_results(
        tmp_path / "results.json", {("t1", "c0"): 3, ("t1", "c1"): 5, ("t2", "c0"): 5}
    )
    criterion = read_scores(results, level="criterion").neighbourhood
    assert (criterion.k, criterion.source) == (5, "items per submission")
    assert criterion.reason == "one submission feeds 5 items (task t1, candidate c1)"
    assert read_scores(results).neighbourhood.k == 1  # one item per submission
    profile = write_profile(tmp_path / "p.json", [0.0] * 50)
    code, _, err = apply(
        results, profile, tmp_path / "o", ["--tau", "1", "--level", "criterion", "--k", "4"],
        capsys,
    )  # fmt: skip
    assert code == 2 and "one submission feeds 5 items (task t1, candidate c1)" in err


def test_k_of_a_score_file_is_the_rows_of_its_largest_unit(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rows = [("a", 5, "m", "u1"), ("b", 6, "m", "u1"), ("c", 7, "n", "u2"), ("d", 2, "n", "u1"),
            ("e", 3, "n", ""), ("f", 9, "m", "u2")]  # fmt: skip
    path = tmp_path / "s.csv"
    path.write_text("item,score,model,unit\n" + "".join(f"{','.join(map(str, r))}\n" for r in rows))
    neighbourhood = read_scores(path, scale=SCALES["likert10"]).neighbourhood
    assert (neighbourhood.k, neighbourhood.unit) == (3, "unit u1")
    assert neighbourhood.reason == "one unit feeds 3 rows (unit u1)"
    plain = write_scores(tmp_path / "plain.csv", [(r[0], r[1], r[2]) for r in rows])
    default = read_scores(plain, scale=SCALES["likert10"]).neighbourhood
    assert (default.k, default.unit) == (1, None)
    profile = write_profile(tmp_path / "p.json", [0.0] * 50)
    code, _, err = apply(path, profile, tmp_path / "o", ["--scale", "likert10", "--tau", "1"],
                         capsys)  # fmt: skip
    assert code == 0, err
    cert = json.loads((tmp_path / "o" / "certificate.json").read_text())
    assert (cert["neighbour_size"], cert["k_source"], cert["k_unit"]) == (
        3,
        "rows per unit",
        "unit u1",
    )
    code, _, err = apply(plain, profile, tmp_path / "p", ["--scale", "likert10", "--tau", "1"],
                         capsys)  # fmt: skip
    assert code == 0, err
    cert = json.loads((tmp_path / "p" / "certificate.json").read_text())
    assert (cert["neighbour_size"], cert["k_source"]) == (1, "rows per unit")
    assert "k_unit" not in cert  # each row its own unit: nothing to name


def test_the_alpha_floor_and_no_noise_are_flagged_not_passed_as_successes() -> None:
    """Range step (Delta's bound is large): bias term 1 at k = 1. At tau 0.3 the noise
    share is kept; at 0.15 the floor alpha 0.1 eats part of it; at 0.1 all of it."""
    kept, eaten, empty = (
        certify(tau, 0.05, 0.5, 100, delta_sensitivity=0.01) for tau in (0.3, 0.15, 0.1)
    )
    assert not kept.floored and not kept.deterministic and kept.sigma_max > 0
    assert eaten.floored and not eaten.deterministic and eaten.alpha == 0.1
    assert 0 < eaten.sigma_max * eaten.noise_radius < 0.5 * 0.15
    assert empty.floored and empty.deterministic and empty.sigma_max == 0.0
    # the reference rule (no noise share) never floors at a reachable alpha, but is empty
    reference = certify(0.3, 0.05, 0.5, 100, delta_sensitivity=0.01, noise_share=0.0)
    assert not reference.floored and reference.deterministic
    assert [w[:20] for w in empty.weaknesses()] == ["the alpha floor took", "no noise: determinis"]
    assert eaten.weaknesses()[0].startswith("the alpha floor") and kept.weaknesses() == []


def test_certify_warns_on_stderr_and_keeps_its_json(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["bound", "certify", "--tau", "0.1", "--delta", "0.05", "--sensitivity", "0.5",
            "--dim", "100", "--delta-sensitivity", "0.01"]  # fmt: skip
    assert main(argv) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["sigma_max"] == 0.0
    err = " ".join(captured.err.split())
    assert "warning: the alpha floor took" in err and "warning: no noise: deterministic" in err


def test_an_empty_certificate_warns_and_says_so_in_record_terminal_and_report(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rows = [(f"t{i}", 1 + 3 * (i % 3) + i % 4, f"m{i % 3}") for i in range(60)]
    scores = write_scores(tmp_path / "s.csv", rows)
    profile = write_profile(tmp_path / "p.json", [0.0] * 20 + [0.4] * 20)  # range step wins
    base = ["--scale", "likert10"]
    code, text, err = apply(scores, profile, tmp_path / "empty", [*base, "--tau", "0.1"], capsys)
    assert code == 0, err
    cert = json.loads((tmp_path / "empty" / "certificate.json").read_text())
    assert cert["deterministic"] is True and cert["sigma_max"] == 0.0 and cert["alpha"] == 0.1
    assert cert["raw_bound"] == pytest.approx(0.1 / 0.1 * 9)  # the whole likert10 range
    warnings = " ".join(cert["warnings"])
    assert "the alpha floor took the share of tau meant for noise" in warnings
    assert "no noise: deterministic shrinkage" in warnings
    assert cert["utility"]["items"]["pearson"] == pytest.approx(1.0)  # automatic, and said so
    assert "no noise: deterministic shrinkage, range step" in text
    assert "warning: the alpha floor took" in text and "9 points on likert10 [1, 10]" in text
    page = (tmp_path / "empty" / "report.html").read_text()
    assert "(no noise: deterministic shrinkage)" in page and "9 points on likert10" in page

    code, text, err = apply(scores, profile, tmp_path / "floor", [*base, "--tau", "0.15"], capsys)
    cert = json.loads((tmp_path / "floor" / "certificate.json").read_text())
    assert code == 0 and "deterministic" not in cert and cert["sigma_max"] > 0
    assert [w for w in cert["warnings"] if w.startswith("the alpha floor")]
    assert cert["raw_bound"] == pytest.approx(0.15 / 0.1 * 9)

    code, text, err = apply(scores, profile, tmp_path / "fine", [*base, "--tau", "0.5"], capsys)
    cert = json.loads((tmp_path / "fine" / "certificate.json").read_text())
    (free,) = cert["warnings"]  # the range step decided: said, with what would change it
    assert free.startswith("worst-case range bound: the measurement did not change this")
    assert "no number of units would" in free and "units_to_decide" not in cert
    assert code == 0 and "deterministic" not in cert
    assert cert["alpha"] == 0.25 and cert["raw_bound"] == pytest.approx(0.5 / 0.25 * 9)


def test_certificates_round_trip_and_old_ones_stay_byte_identical(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    scores = write_scores(
        tmp_path / "s.csv", [(f"t{i}", 1 + i % 10, f"m{i % 3}") for i in range(30)]
    )
    profile = write_profile(tmp_path / "p.json", [0.0] * 30)
    code, _, err = apply(scores, profile, tmp_path / "o", ["--scale", "likert10", "--tau", "0.1"],
                         capsys)  # fmt: skip
    assert code == 0, err
    path = tmp_path / "o" / "certificate.json"
    new = json.loads(path.read_text())
    assert set(NEW_FIELDS) - {"k_unit"} <= set(new)
    old = {k: v for k, v in new.items() if k not in NEW_FIELDS}
    for data, name in ((new, "new.json"), (old, "old.json")):
        (tmp_path / name).write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n")
        record = read_record(tmp_path / name, BoundCertificate)
        write_record(tmp_path / f"again-{name}", record)
        assert (tmp_path / f"again-{name}").read_bytes() == (tmp_path / name).read_bytes()
    old_record = read_record(tmp_path / "old.json", BoundCertificate)
    assert old_record.k_source is None and old_record.deterministic is None
    from eigenjury.reports.bounds import neighbour_text, render_certificate

    assert neighbour_text(old_record) == "1"
    assert "tau on the judge's scale" not in render_certificate(old_record, [])


def test_simulation_reports_utility_against_the_truth() -> None:
    """Without noise the release keeps correlation 1 with the scores by construction;
    against the true qualities the judge's own jitter still shows."""
    jittery = SimulatedJudge(rate=0.1, points=3, jitter=0.5)
    result = check(jittery, tau=0.1, delta=0.05, dim=100, measurements=4, draws=50)
    assert result.sigma_max == 0.0
    assert result.pearson_items == pytest.approx(1.0)
    assert result.pearson_items_truth < 0.97


VERDICT_OF_DIFFERENCE = {2: "A>>B", 1: "A>B", 0: "A=B", -1: "B>A", -2: "B>>A"}
QUALITY = re.compile(r"\[quality (\d+)\]")


def pairwise_judge(request: ChatRequest) -> str:
    """Compares the hidden qualities of A and B, with +2 for bold text; no jitter."""
    user = request.messages[-1].content
    a, b = (
        int(QUALITY.search(part).group(1)) + (2 if "**" in part else 0)  # type: ignore[union-attr]
        for part in user.split("[Answer B begins]")
    )
    return f"[[{VERDICT_OF_DIFFERENCE[max(-2, min(2, a - b))]}]]"


register_script("bounds-pairwise", pairwise_judge)
QUALITIES = dict(zip(MEMBERS, (3, 5, 7, 9, 4, 6, 8, 2), strict=True))


def write_pairwise_dataset(path: Path, design: list[Comparison] | None = None) -> list[Any]:
    """A design (default: groups of 4, each reply shown in 6 items) as a pairwise
    dataset."""
    if design is None:
        design = design_random_groups(MEMBERS, [f"s{i}" for i in range(6)], group_size=4)

    def reply(scenario: str, evaluee: str) -> str:
        return f"Reply of {evaluee} to {scenario}. [quality {QUALITIES[evaluee]}]"

    path.write_text(
        "".join(
            json.dumps({"id": f"{c.scenario}:{c.first}-{c.second}", "prompt": f"Q {c.scenario}?",
                        "response_a": reply(c.scenario, c.first),
                        "response_b": reply(c.scenario, c.second)}) + "\n"
            for c in design
        )
    )  # fmt: skip
    return design


def test_measure_edits_a_reply_in_every_item_it_feeds_and_apply_scales_it_to_k(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    design = write_pairwise_dataset(tmp_path / "d.jsonl")
    items = read_dataset(tmp_path / "d.jsonl")
    settings = MeasureSettings(
        judge=ModelSpec.parse("scripted:bounds-pairwise"),
        protocol=JudgeProtocol("pairwise"),
        generators=("markdown", "position", "identity"),
        m=5,
        seed=0,
    )
    judge = ScriptedProvider("bounds-pairwise")

    async def run() -> SensitivityProfile:
        providers = {"scripted:bounds-pairwise": judge}
        async with Engine(Store(tmp_path / "s.sqlite"), progress=False, providers=providers) as e:
            return await measure_sensitivity(e, MeasureInputs(items, "d", settings))

    profile = asyncio.run(run())
    assert profile.m == 5
    markdown = profile.generators["markdown"]
    units = Counter(p.unit for p in markdown.pairs)
    assert markdown.m == 5 and len(units) == 5 and set(units.values()) == {6}
    # one edit per reply: its bold version is shown in each of the 6 items it feeds
    bold = Counter(
        m for key in judge.successes for m in re.findall(r"\*\*Reply of \w+ to s\*\*\d", key)
    )
    assert len(bold) == 5 and set(bold.values()) == {6}
    # Delta per item, one sample per reply: the mean of each reply's 6 squared changes
    by_unit: dict[str | None, list[float]] = {}
    for p in markdown.pairs:
        by_unit.setdefault(p.unit, []).append((p.original - p.perturbed) ** 2)
    per_item = math.sqrt(np.mean([np.mean(v) for v in by_unit.values()]))
    assert markdown.estimate == pytest.approx(per_item) and per_item > 0.2
    # a fair, deterministic judge: no jitter, no position effect; a neighbour editing no
    # reply is judged once per item, however many sampled replies the item shows
    assert profile.jitter == 0.0 and profile.generators["position"].estimate == 0.0
    shown = sorted({p.item for p in markdown.pairs})
    assert len(shown) < 30  # two sampled replies of one scenario meet in two items
    for name in ("identity", "position"):
        assert sorted(p.item for p in profile.generators[name].pairs) == shown
    path = tmp_path / "profile.json"
    write_record(path, profile)
    assert read_record(path, SensitivityProfile) == profile

    verdicts = tmp_path / "v.csv"
    verdicts.write_text(
        "scenario,judge,first,second,verdict\n"
        + "".join(f"{c.scenario},{c.judge},{c.first},{c.second},0\n" for c in design)
    )
    code, _, err = apply(verdicts, path, tmp_path / "o", ["--tau", "2", "--generators",
                         "markdown"], capsys)  # fmt: skip
    assert code == 0, err
    cert = json.loads((tmp_path / "o" / "certificate.json").read_text())
    assert cert["neighbour_size"] == 6 and cert["generators"]["markdown"]["m"] == 5
    assert cert["generators"]["markdown"]["estimate"] == pytest.approx(math.sqrt(6) * per_item)


def test_replies_of_different_sizes_are_measured_and_bounded_each_on_its_own(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An unbalanced design: in s0 four evaluees meet (a reply feeds 6 items), in s1-s4
    two (a reply feeds 2). The profile records each reply's size; apply bounds the
    2-item and the 6-item replies apart and certifies the worse."""
    four = ["ada", "bob", "cy", "dee"]
    design = [Comparison("s0", "eve", a, b) for a in four for b in four if a != b] + [
        Comparison(f"s{i}", "eve", a, b) for i in range(1, 5) for a, b in (("ada", "bob"),
                                                                            ("bob", "ada"))
    ]  # fmt: skip
    write_pairwise_dataset(tmp_path / "d.jsonl", design)
    settings = MeasureSettings(
        judge=ModelSpec.parse("scripted:bounds-pairwise"),
        protocol=JudgeProtocol("pairwise"),
        generators=("markdown", "identity"),
        m=12,
        seed=0,
    )

    async def run() -> SensitivityProfile:
        providers = {"scripted:bounds-pairwise": ScriptedProvider("bounds-pairwise")}
        async with Engine(Store(tmp_path / "s.sqlite"), progress=False, providers=providers) as e:
            items = read_dataset(tmp_path / "d.jsonl")
            return await measure_sensitivity(e, MeasureInputs(items, "d", settings))

    profile = asyncio.run(run())
    assert profile.unit_sizes is not None
    assert Counter(profile.unit_sizes.values()) == {6: 4, 2: 8}
    markdown = profile.generators["markdown"]
    assert markdown.strata is not None
    assert [(s.size, s.m) for s in markdown.strata] == [(2, 8), (6, 4)]
    # per unit: the mean of its items' squared changes; per size: its own bound
    changes: dict[str, list[float]] = {}
    for pair in markdown.pairs:
        assert pair.unit is not None and pair.perturbed is not None
        changes.setdefault(pair.unit, []).append((pair.original - pair.perturbed) ** 2)
    by_size = {
        size: np.array([np.mean(v) for u, v in changes.items() if profile.unit_sizes[u] == size])
        for size in (2, 6)
    }
    assert markdown.estimate == pytest.approx(math.sqrt(max(by_size[2].mean(), by_size[6].mean())))
    path = tmp_path / "profile.json"
    write_record(path, profile)
    assert read_record(path, SensitivityProfile) == profile
    capsys.readouterr()

    verdicts = tmp_path / "v.csv"
    verdicts.write_text(
        "scenario,judge,first,second,verdict\n"
        + "".join(f"{c.scenario},{c.judge},{c.first},{c.second},0\n" for c in design)
    )
    code, text, err = apply(verdicts, path, tmp_path / "o", ["--tau", "3", "--generators",
                            "markdown", "--min-alpha", "0.01"], capsys)  # fmt: skip
    assert code == 0, err
    cert = json.loads((tmp_path / "o" / "certificate.json").read_text())
    bound = cert["generators"]["markdown"]
    assert cert["neighbour_size"] == 6 and [s["size"] for s in bound["strata"]] == [2, 6]
    confidence = 1 - 0.2 * 0.05 / 2  # the sensitivity's share of delta, split in two
    upper = {r: mean_upper_bound(by_size[r], confidence) for r in (2, 6)}
    assert bound["upper_bound"] == pytest.approx(math.sqrt(max(2 * upper[2], 6 * upper[6])))
    assert [s["confidence"] for s in bound["strata"]] == pytest.approx([confidence] * 2)
    assert any(w.startswith("the profile's units feed 2 and 6 items") for w in cert["warnings"])
    assert "size (2 or 6 items)" in cert["guarantee"]
    assert "markdown per unit size (per item): 2 items: 8 units" in text
    # a profile written before `unit_sizes` (and `strata`): each reply's size is the most
    # pairs it has in a generator, and the certificate is the same
    old = json.loads(path.read_text())
    del old["unit_sizes"]
    for generator in old["generators"].values():
        generator.pop("strata", None)
    (tmp_path / "old.json").write_text(json.dumps(old))
    code, _, err = apply(verdicts, tmp_path / "old.json", tmp_path / "o2", ["--tau", "3",
                         "--generators", "markdown", "--min-alpha", "0.01"], capsys)  # fmt: skip
    assert code == 0, err
    again = json.loads((tmp_path / "o2" / "certificate.json").read_text())
    assert again["generators"] == cert["generators"] and again["alpha"] == cert["alpha"]
