"""Answers people already hold: read in the formats their tools write, and ranked by
judges that are not ranked, against a baseline or each other."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import yaml

import peer_scripts  # noqa: F401  (registers the scripted judges)
from answer_files import alpaca_eval, alpaca_ids, arena_hard, fastchat, table
from eigenjury.cli import main
from eigenjury.errors import InputError
from eigenjury.jobs import run_rank
from eigenjury.peer.answers import read_answers
from eigenjury.peer.designs import design_baseline

QUESTIONS = {f"q{i:02d}": f"Question {i}: how do I do thing {i}?" for i in range(12)}
TWO = {"m1": {"q00": "first", "q01": "second"}, "m2": {"q00": "third", "q01": ""}}


def held(sets: list[Any]) -> dict[str, dict[str, str]]:
    return {s.model: {q: a.text for q, a in s.answers.items()} for s in sets}


@pytest.mark.parametrize("suffix", [".csv", ".jsonl", ".parquet"])
def test_a_plain_table_round_trips(tmp_path: Path, suffix: str) -> None:
    sets = read_answers(table(tmp_path / f"answers{suffix}", TWO, QUESTIONS, judge_score=1))
    assert held(sets) == TWO
    assert sets[0].questions == {q: QUESTIONS[q] for q in ("q00", "q01")}
    assert [a.kind for a in sets[1].answers.values()] == ["answer", "empty"]
    assert sets[0].ignored == ("judge_score",)  # named, never read
    assert sets[0].format == "table"


def test_arena_hard_folders_and_files_round_trip_with_content_objects_and_turns(
    tmp_path: Path,
) -> None:
    conversation = [
        ("assistant", "Use a loop."),
        ("user", "And faster?"),
        ("assistant", "Vectorise."),
    ]
    answers = {
        "gpt-4-0314": {"q00": "Baseline says so.", "q01": "$ERROR$", "q02": conversation},
        "模型-α": {"q00": "Mine.", "q02": "Also mine."},
    }
    folder = arena_hard(tmp_path / "arena-hard-v2.0", answers, QUESTIONS)
    sets = read_answers(folder)
    assert [s.model for s in sets] == ["gpt-4-0314", "模型-α"]
    base = sets[0].answers
    assert base["q00"].text == "Baseline says so."  # an object holding `answer`, or text
    assert base["q01"].kind == "error"
    # the conversation shown in full: every turn from the first answer on, by speaker
    assert base["q02"].text == (
        "Assistant:\nUse a loop.\n\nUser:\nAnd faster?\n\nAssistant:\nVectorise."
    )
    assert sets[0].questions["q02"] == QUESTIONS["q02"]
    assert sets[0].ignored == ()  # ans_id, tstamp and metadata are Arena-Hard's own
    # one answer file alone finds its questions one folder up
    alone = read_answers(folder / "model_answer" / "模型-α.jsonl")
    assert held(alone) == {"模型-α": answers["模型-α"]}


def test_alpaca_eval_outputs_pair_by_instruction(tmp_path: Path) -> None:
    instructions = ["Write a haiku.", "Explain tides."]
    one = read_answers(
        alpaca_eval(tmp_path / "a.json", "llama", dict(zip(instructions, ["x", "y"], strict=True)))
    )
    two = read_answers(
        alpaca_eval(
            tmp_path / "b.json", "gpt", dict(zip(instructions[::-1], ["z", "w"], strict=True))
        )
    )
    ids = alpaca_ids(instructions)
    assert held(one) == {"llama": dict(zip(ids, ["x", "y"], strict=True))}
    assert held(two) == {
        "gpt": dict(zip(ids[::-1], ["z", "w"], strict=True))
    }  # the same ids, in any order
    assert one[0].questions[ids[1]] == "Explain tides."
    assert one[0].format == "alpaca-eval"


def test_fastchat_answers_interleave_the_question_turns(tmp_path: Path) -> None:
    folder = fastchat(
        tmp_path / "mt_bench",
        {"vicuna": {"81": ["Draft.", "Shorter draft."]}},
        {"81": ["Write a blog post.", "Now shorten it."]},
    )
    (answers,) = read_answers(folder)
    assert answers.questions == {"81": "Write a blog post."}
    assert answers.answers["81"].text == (
        "Assistant:\nDraft.\n\nUser:\nNow shorten it.\n\nAssistant:\nShorter draft."
    )


def test_arena_hard_0_1_answers_hold_their_turns_as_objects(tmp_path: Path) -> None:
    """Arena-Hard 0.1 (FastChat's layout) writes each turn as {"content": ...}."""
    folder = tmp_path / "arena-hard-v0.1"
    (folder / "model_answer").mkdir(parents=True)
    question = {
        "question_id": "328c149ed45a41c0b9d6f14659e63599",
        "category": "arena-hard-v0.1",
        "cluster": "ABC Sequence",
        "turns": [{"content": "Write a tune in ABC notation."}],
    }
    answer = {"question_id": question["question_id"], "answer_id": "x", "model_id": "gpt-4-0314",
              "choices": [{"index": 0, "turns": [{"content": "X:1\nT:Tune", "token_len": 9}]}],
              "tstamp": 1.7e9}  # fmt: skip
    (folder / "question.jsonl").write_text(json.dumps(question) + "\n")
    (folder / "model_answer" / "gpt-4-0314.jsonl").write_text(json.dumps(answer) + "\n")
    (answers,) = read_answers(folder)
    assert answers.format == "fastchat"
    assert answers.questions == {question["question_id"]: "Write a tune in ABC notation."}
    assert answers.answers[question["question_id"]].text == "X:1\nT:Tune"


@pytest.mark.parametrize(
    ("lines", "message", "where"),
    [
        (
            [{"question_id": "q1", "model": "m", "answer": "a"}] * 2,
            "model 'm' answers question 'q1' twice (first at line 1); keep one",
            "line 2",
        ),
        ([{"question_id": "q1", "answer": "a"}], "missing model", "line 1"),
        (
            [{"question_id": "q1", "model": "m", "messages": [{"role": "critic", "content": "x"}]}],
            "unknown role 'critic'",
            "field 'messages[0].role'",
        ),
        (
            [{"question_id": "q1", "model": "m", "messages": [{"role": "user", "content": "x"}]}],
            "the conversation has no assistant turn",
            "field 'messages'",
        ),
        (
            [{"question_id": ["q"], "model": "m", "answer": "a"}],
            "expected text, got a list",
            "field 'question_id'",
        ),
        (
            [{"question_id": "q1", "model": "NaN", "answer": "a"}],
            "read back from a verdict file as a missing value",
            "field 'model'",
        ),
    ],
)
def test_bad_answer_files_are_located(
    tmp_path: Path, lines: list[dict[str, Any]], message: str, where: str
) -> None:
    path = tmp_path / "answers.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    with pytest.raises(InputError) as caught:
        read_answers(path)
    assert message in caught.value.message
    assert where in caught.value.where and str(path) in caught.value.where


def test_the_baseline_design_judges_every_member_against_the_baseline_in_both_orders() -> None:
    members = ["base", "a", "b"]
    missing = {("b", "s1")}
    design = design_baseline(
        members, ["s0", "s1"], "base", judges=["j1", "j2"], judges_per_group=1,
        answered=lambda m, s: (m, s) not in missing,
    )  # fmt: skip
    pairs = Counter((c.scenario, frozenset((c.first, c.second))) for c in design)
    assert set(pairs) == {("s0", frozenset({"a", "base"})), ("s0", frozenset({"b", "base"})),
                          ("s1", frozenset({"a", "base"}))}  # fmt: skip
    assert set(pairs.values()) == {2}  # both orders, by one judge
    for c in design:
        assert "base" in (c.first, c.second)
        assert (c.second, c.first) in {(d.first, d.second) for d in design if d.judge == c.judge
                                       and d.scenario == c.scenario}  # fmt: skip


QUALITY = {"base": 0.0, "strong": 2.0, "good": 1.0, "weak": -1.0}
MANY = {f"q{i:02d}": f"Question {i}: what about {i}?" for i in range(40)}


def given_config(tmp_path: Path, files: dict[str, Any], **overrides: Any) -> Path:
    data: dict[str, Any] = {
        "name": "given answers",
        "population": [{"name": n, "answers": f} for n, f in files.items()],
        "judges": ["scripted:peer-truth"],
        "sampling": {"design": "baseline", "baseline": "base"},
        "judging": {"reflections": False},
        "fit": {"bootstrap": 50, "style": "none"},
        "output": str(tmp_path / "run"),
        **overrides,
    }
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False, allow_unicode=True))
    return path


def test_a_scripted_judge_over_given_answers_recovers_its_preference(tmp_path: Path) -> None:
    """Arena-Hard's case: answers in its layout, one external judge, the baseline
    design; a missing answer is left out and counted, an empty one (by the rule asked
    for) loses with no call: in the win rates, never in the fit."""
    answers = {
        m: {q: f"My answer to {q} [quality {quality}]." for q in MANY}
        for m, quality in QUALITY.items()
    }
    del answers["weak"]["q03"]
    answers["good"]["q04"] = ""
    folder = arena_hard(tmp_path / "data", answers, MANY)
    files = {m: f"data/model_answer/{m}.jsonl" for m in QUALITY}
    config = given_config(tmp_path, files, answers={"empty": "loss"})
    ran = run_rank(config, progress=False)
    elo = dict(zip(ran.ranking.models_, ran.ranking.elo_, strict=True))
    assert sorted(elo, key=elo.get) == sorted(QUALITY, key=QUALITY.get)  # type: ignore[arg-type]
    assert folder.is_dir()
    record = json.loads((ran.out / "results.json").read_text())
    run = record["run"]
    # 40 questions x 3 members against the baseline x 2 orders, less weak's missing one
    assert run["comparisons"] == (40 * 3 - 1) * 2
    assert run["by_rule"] == 2  # good's empty answer, in both orders, with no call
    assert run["failures"] == {"answers rule": 2} and run["verdicts"] == run["comparisons"] - 2
    assert record["fit"]["verdicts"] == run["comparisons"] - 2  # a rule is no judge
    good = next(r for r in record["baseline"]["models"] if r["model"] == "good")
    assert good["verdicts"] == 80  # the win rate counts the rule's two losses
    members = {m["name"]: m for m in run["members"]}
    assert members["weak"]["answers"]["missing"] == 1
    assert members["good"]["answers"]["empty"] == 1
    assert members["base"]["model"] is None
    assert members["base"]["evaluee_only"] == "given answers, no model"
    assert run["judges"] == [
        {"name": "peer-truth", "model": "scripted:peer-truth", "persona": None}
    ]
    assert run["constitution"]["title"] == "Helpful answers"
    calls = run["accounting"]["total"]["calls"]
    assert calls == (40 * 3 - 1) * 2 - 2  # judges only: no answer is generated
    lines = [json.loads(x) for x in (ran.out / "transcripts.jsonl").read_text().splitlines()]
    ruled = [x for x in lines if "rule" in x]
    assert {(x["first"], x["second"], tuple(x["verdicts"])) for x in ruled} == {
        ("base", "good", (1,)), ("good", "base", (2,))}  # fmt: skip
    # both orders of every pair were asked of the judge
    compared = [x for x in lines if x["role"] == "comparison"]
    asked = Counter((x["scenario"], frozenset((x["first"], x["second"]))) for x in compared)
    assert set(asked.values()) == {2}
    # every answer judged is in the transcript once, with the file it was read from
    read = {(x["member"], x["scenario"]): x for x in lines if x["role"] == "evaluee"}
    assert len(read) == 4 * 40 - 1
    assert read["good", "q04"]["reply"] == "" and read["good", "q04"]["source"].endswith(
        "good.jsonl"
    )
    assert read["strong", "q00"]["messages"] == [["user", MANY["q00"]]]
    # by default judges read an empty answer as it is, as Arena-Hard's and AlpacaEval's do
    (tmp_path / "default").mkdir()
    default = given_config(tmp_path / "default", {m: f"../{f}" for m, f in files.items()})
    ran = run_rank(default, progress=False)
    run = json.loads((ran.out / "results.json").read_text())["run"]
    assert "by_rule" not in run and run["accounting"]["total"]["calls"] == run["comparisons"]


def test_a_table_of_several_models_gives_members_by_name_and_models_that_generate_join(
    tmp_path: Path,
) -> None:
    answers = {
        m: {q: f"Answer [quality {QUALITY[m]}]" for q in QUESTIONS} for m in ("base", "good")
    }
    table(tmp_path / "answers.csv", answers, QUESTIONS)
    config = given_config(
        tmp_path,
        {"base": "answers.csv", "good": "answers.csv"},
        sampling={"design": "all"},
    )
    data = yaml.safe_load(config.read_text())
    # a member that replies through its model, and judges too
    data["population"].append(
        {"name": "live", "model": "scripted:peer-truth", "persona": "[quality 0.3]"}
    )
    config.write_text(yaml.safe_dump(data))
    ran = run_rank(config, progress=False)
    run = json.loads((ran.out / "results.json").read_text())["run"]
    roles = {r["role"]: r["calls"] for r in run["accounting"]["by_model_and_role"]}
    assert roles["evaluee"] == 12  # only the live member answers
    assert set(ran.ranking.models_) >= {"base", "good", "live"}


@pytest.mark.parametrize(
    ("change", "message", "field"),
    [
        (
            {"sampling": {"design": "baseline"}},
            "needs the member every other is compared",
            "sampling.baseline",
        ),
        (
            {"sampling": {"design": "baseline", "baseline": "nobody"}},
            "'nobody' is not a member",
            "sampling.baseline",
        ),
        (
            {"sampling": {"design": "all", "baseline": "base"}},
            "a baseline is for design baseline",
            "sampling.baseline",
        ),
        ({"judges": []}, "nobody judges", "population"),
        (
            {"judges": ["scripted:peer-truth", "scripted:peer-truth"]},
            "two judges have one name",
            "judges",
        ),
        (
            {"judges": [{"name": "base", "model": "scripted:peer-truth"}]},
            "'base' is a member and a judge",
            "judges",
        ),
        ({"answers": {"empty": "ignore"}}, "'loss', 'exclude' or 'judge'", "answers.empty"),
    ],
)
def test_given_answer_configs_are_checked_before_anything_is_spent(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    change: dict[str, Any],
    message: str,
    field: str,
) -> None:
    table(tmp_path / "answers.csv", {"base": {"q00": "x"}, "good": {"q00": "y"}}, QUESTIONS)
    config = given_config(tmp_path, {"base": "answers.csv", "good": "answers.csv"}, **change)
    assert main(["rank", str(config), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert message in err and field in err and "Traceback" not in err


def test_a_member_needs_a_model_or_answers_and_answers_that_exist(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    table(tmp_path / "answers.csv", {"base": {"q00": "x"}, "good": {"q00": "y"}}, QUESTIONS)
    config = given_config(tmp_path, {"base": "answers.csv", "good": "answers.csv"})
    data = yaml.safe_load(config.read_text())
    data["population"].append({"name": "empty-handed"})
    config.write_text(yaml.safe_dump(data))
    assert main(["rank", str(config)]) == 2
    assert "a member needs a model, or answers it already gave" in capsys.readouterr().err
    data["population"][-1] = {"name": "lost", "answers": "nowhere.jsonl"}
    config.write_text(yaml.safe_dump(data))
    assert main(["rank", str(config)]) == 2
    err = capsys.readouterr().err
    assert "member 'lost': no such answer file or folder" in err and "nowhere.jsonl" in err
    data["population"][-1] = {"name": "odd", "answers": {"path": "answers.csv", "model": "gpt-9"}}
    config.write_text(yaml.safe_dump(data))
    assert main(["rank", str(config)]) == 2
    assert "holds no answers of model 'gpt-9' (it holds base, good)" in capsys.readouterr().err


def test_eigenjury_judge_ranks_answer_files_and_writes_a_config_that_reruns_free(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    answers = {m: {q: f"Answer to {q} [quality {x}]." for q in MANY} for m, x in QUALITY.items()}
    arena_hard(tmp_path / "data", answers, MANY)
    out = tmp_path / "judged"
    args = ["judge", str(tmp_path / "data"), "--judge", "critic=scripted:peer-truth"]
    assert main([*args, "--baseline", "base", "--out", str(out), "--no-progress"]) == 0
    shown = capsys.readouterr().out
    assert "Against the baseline base (Arena-Hard's score)" in shown
    record = json.loads((out / "results.json").read_text())
    rates = {r["model"]: r for r in record["baseline"]["models"]}
    assert list(rates) == ["strong", "good", "weak"]  # highest first
    for r in rates.values():  # the fit's prediction follows the decisive verdicts' share
        decisive = r["wins"] / (r["wins"] + r["losses"])
        assert abs(r["elo_win_rate"] - decisive) < 0.05
        low, high = r["elo_win_rate_ci"]
        assert low < r["elo_win_rate"] < high
    assert all(r["verdicts"] == 80 for r in rates.values())  # 40 questions, both orders
    low, high = rates["good"]["win_rate_ci"]
    assert low < rates["good"]["win_rate"] < high
    board = tmp_path / "board.md"
    assert main(["export-leaderboard", str(out), "--out", str(board)]) == 0
    assert "| model | win rate | interval | from Elo |" in board.read_text()
    config = yaml.safe_load((out / "config.yaml").read_text())
    assert config["judges"] == [{"name": "critic", "model": "scripted:peer-truth"}]
    assert config["sampling"] == {"design": "baseline", "baseline": "base"}
    # the written config runs as it is, every call from the store
    assert main(["rank", str(out / "config.yaml"), "--no-progress"]) == 0
    again = json.loads((out / "results.json").read_text())["run"]["accounting"]["total"]
    assert again["calls"] == again["cached"] == 240


def test_eigenjury_judge_refuses_an_unknown_baseline_and_a_model_given_twice(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    table(tmp_path / "a.csv", {"base": {"q00": "x"}, "good": {"q00": "y"}}, QUESTIONS)
    table(tmp_path / "b.jsonl", {"good": {"q00": "z"}}, QUESTIONS)
    judge = ["--judge", "scripted:peer-truth", "--out", str(tmp_path / "out")]
    assert main(["judge", str(tmp_path / "a.csv"), *judge, "--baseline", "gpt-4"]) == 2
    assert "'gpt-4' is not a model of the answers; they hold base, good" in capsys.readouterr().err
    assert main(["judge", str(tmp_path / "a.csv"), str(tmp_path / "b.jsonl"), *judge]) == 2
    err = capsys.readouterr().err
    assert "model 'good' has answers in" in err and "b.jsonl" in err
    assert not (tmp_path / "out").exists()  # nothing written before the input is checked


def test_eigenjury_judge_says_what_answers_cannot_be_compared(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    one = table(tmp_path / "one.csv", {"mine": {"q00": "x", "q01": "y"}}, QUESTIONS)
    judge = ["--judge", "scripted:peer-truth", "--no-progress"]
    assert main(["judge", str(one), *judge, "--out", str(tmp_path / "a")]) == 2
    assert "at least 2 models; the answers hold mine" in capsys.readouterr().err
    assert not (tmp_path / "a").exists()
    # AlpacaEval's ids are its instructions' hashes: a table of q00, q01 shares none
    alpaca = alpaca_eval(tmp_path / "gpt.json", "gpt", {"Write a haiku.": "Leaves fall."})
    out = tmp_path / "b"
    assert (
        main(["judge", str(one), str(alpaca), *judge, "--baseline", "gpt", "--out", str(out)]) == 2
    )
    err = capsys.readouterr().err
    assert "no question has answers from two members the design compares" in err
    assert not (out / "results.json").exists()


def test_a_table_may_hold_conversations_as_json_and_a_broken_one_is_located(
    tmp_path: Path,
) -> None:
    import csv

    path = tmp_path / "chats.csv"
    turns = [{"role": "user", "content": "Hi?"}, {"role": "assistant", "content": "Hello."}]
    with path.open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["question_id", "model", "messages"])
        writer.writerow(["q1", "m", json.dumps(turns)])
    (answers,) = read_answers(path)
    assert answers.answers["q1"].text == "Hello." and answers.questions["q1"] == "Hi?"
    with path.open("a", newline="") as f:
        csv.writer(f).writerow(["q2", "m", "[not json"])
    with pytest.raises(InputError) as caught:
        read_answers(path)
    assert "line 3" in caught.value.where and "not valid JSON" in caught.value.message


def test_eigenjury_judge_takes_the_questions_from_a_file_beside_the_answers(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A table without question texts and the questions in a file of their own, both
    named relative to where the user is; the terminal says what became of each answer."""
    monkeypatch.chdir(tmp_path)
    rows = [{"question_id": q, "model": m, "answer": f"{m} on {q} [quality {x}]", "score": 1}
            for m, x in (("base", 0), ("mine", 1)) for q in ("q1", "q2", "q3")]  # fmt: skip
    rows[-1]["answer"] = ""  # mine on q3: empty, judged as it is
    Path("answers.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    Path("questions.jsonl").write_text(
        "".join(
            json.dumps({"id": q, "text": f"What about {q}?"}) + "\n" for q in ("q1", "q2", "q3")
        )
    )
    args = ["judge", "answers.jsonl", "--questions", "questions.jsonl", "--baseline", "base"]
    assert main([*args, "--judge", "scripted:peer-truth", "--no-progress", "--out", "run"]) == 0
    out = capsys.readouterr().out
    assert "given answers: mine (table, answers.jsonl): 2 answered, 1 empty (judge)" in out
    assert "fields not read: score" in out
    assert yaml.safe_load(Path("run/config.yaml").read_text())["scenarios"] == {
        "source": "../questions.jsonl"
    }
