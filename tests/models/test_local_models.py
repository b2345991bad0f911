"""The real bundled local models through llama.cpp: generation, constrained verdicts,
option scoring, one load per process, and a free event loop while they think."""

from __future__ import annotations

import asyncio
import itertools
import os
import time
from pathlib import Path

import pytest

from eigenjury.engine import Call, Engine, Store
from eigenjury.models import ChatRequest, ModelSpec, SpecError
from eigenjury.models.factory import make_provider

if not os.environ.get("EIGENJURY_REQUIRE_LOCAL"):
    pytest.importorskip("llama_cpp", reason="the local extra is not installed")

pytestmark = pytest.mark.local
MODELS = ["smollm2-135m", "gemma3-270m"]
VERDICT = ChatRequest.chat(
    (
        "system",
        "You compare two answers. Reply 1 if the first is better, 2 if the second is "
        "better, 0 for a tie.",
    ),
    (
        "user",
        "Question: what is the boiling point of water at sea level?\n"
        "First answer: 100 degrees Celsius.\nSecond answer: 50 degrees Celsius.",
    ),
    choices=("0", "1", "2"),
    logprobs=True,
)


@pytest.mark.parametrize("name", MODELS)
def test_a_short_generation(name: str) -> None:
    provider = make_provider(ModelSpec.parse(f"local:{name}"))
    request = ChatRequest.chat(("user", "Name a colour."), max_tokens=8, temperature=0.0)
    completion = asyncio.run(provider.generate(request))
    assert completion.text.strip()
    assert completion.usage.input_tokens > 3 and 0 < completion.usage.output_tokens <= 8
    assert completion.finish_reason in ("stop", "length") and completion.latency_s > 0
    again = asyncio.run(provider.generate(request))
    assert again.text == completion.text  # temperature 0 is deterministic


@pytest.mark.parametrize("name", MODELS)
def test_a_constrained_verdict_by_option_scoring(name: str) -> None:
    provider = make_provider(ModelSpec.parse(f"local:{name}"))
    completion = asyncio.run(provider.generate(VERDICT))
    scores = completion.choice_logprobs
    assert scores is not None and set(scores) == {"0", "1", "2"}
    assert all(s < 0 for s in scores.values())
    assert completion.text == max(scores, key=lambda c: scores[c])
    sampled = {
        asyncio.run(
            provider.generate(
                ChatRequest(VERDICT.messages, temperature=5.0, seed=seed, choices=VERDICT.choices)
            )
        ).text
        for seed in range(12)
    }
    assert sampled <= {"0", "1", "2"} and len(sampled) > 1  # a hot, seeded draw varies


@pytest.mark.parametrize("name", MODELS)
def test_grammar_constrains_free_generation(name: str) -> None:
    provider = make_provider(ModelSpec.parse(f"local:{name}"))
    request = ChatRequest.chat(
        ("user", "Is the sky blue? Answer yes or no."),
        grammar='root ::= "yes" | "no"',
        max_tokens=4,
    )
    assert asyncio.run(provider.generate(request)).text in ("yes", "no")


def test_multi_token_choices_score_whole_strings() -> None:
    provider = make_provider(ModelSpec.parse("local:smollm2-135m"))
    request = ChatRequest.chat(
        ("user", "Which is a fruit?"), choices=("banana", "hammer"), logprobs=True
    )
    completion = asyncio.run(provider.generate(request))
    assert completion.choice_logprobs is not None
    assert set(completion.choice_logprobs) == {"banana", "hammer"}
    assert completion.usage.output_tokens >= 1


@pytest.mark.parametrize("name", MODELS)
def test_a_long_choice_is_scored_as_token_by_token_evaluation_scores_it(name: str) -> None:
    """Batched scoring (several batches: a reply of some 200 tokens) gives the
    log-probability a token-at-a-time evaluation gives, up to llama.cpp's rounding."""
    from eigenjury.models.providers import local

    provider = make_provider(ModelSpec.parse(f"local:{name}"))
    reply = " ".join(["I am so sorry to hear that, and I understand how hard it is."] * 14)
    request = ChatRequest.chat(("user", "My cat died."), choices=(reply,), logprobs=True)
    completion = asyncio.run(provider.generate(request))
    assert completion.choice_logprobs is not None
    batched = completion.choice_logprobs[reply]
    model = local._load(local.model_path(name))
    llm = model.llm
    with local._inference:
        prompt = model.formatter(messages=local._messages(request)).prompt
        llm.reset()
        llm.eval(llm.tokenize(prompt.encode(), add_bos=False, special=True))
        tokens = llm.tokenize(reply.encode(), add_bos=False, special=False)
        assert len(tokens) > 2 * local.SCORING_BATCH
        one_by_one = float(local._last_log_softmax(llm)[tokens[0]])
        for token, following in itertools.pairwise(tokens):
            llm.eval([token])
            one_by_one += float(local._last_log_softmax(llm)[following])
    assert batched < -1.0
    assert batched == pytest.approx(one_by_one, abs=0.005 * len(tokens))


def test_each_model_loads_once_and_inference_leaves_the_loop_free() -> None:
    from eigenjury.models.providers import local

    spec = ModelSpec.parse("local:smollm2-135m")

    async def go() -> int:
        ticks = 0

        async def ticker() -> None:
            nonlocal ticks
            while True:
                await asyncio.sleep(0.01)
                ticks += 1

        task = asyncio.create_task(ticker())
        first, second = make_provider(spec), make_provider(spec)
        request = ChatRequest.chat(
            ("user", "Write a sentence about rivers."), max_tokens=48, temperature=0.0
        )
        start = time.monotonic()
        await asyncio.gather(first.generate(request), second.generate(request))
        elapsed = time.monotonic() - start
        task.cancel()
        return int(ticks / max(elapsed / 0.01, 1) * 100)

    share = asyncio.run(go())
    assert share > 30  # the loop kept ticking through the generations (% of ideal ticks)
    paths = [p for p in local._models if p.name.startswith("SmolLM2")]
    assert len(paths) == 1


def test_local_models_run_through_the_engine_and_cache(tmp_path: Path) -> None:
    spec = ModelSpec.parse("local:smollm2-135m")
    calls = [Call(spec, VERDICT), Call(spec, ChatRequest.chat(("user", "Hi"), max_tokens=4))]
    engine = Engine(Store(tmp_path / "s.sqlite"), progress=False)
    first = engine.run_sync(calls)
    second = Engine(Store(tmp_path / "s.sqlite"), progress=False).run_sync(calls)
    assert all(r.ok for r in first) and all(r.cached for r in second)
    assert second[0].completion.choice_logprobs == first[0].completion.choice_logprobs  # type: ignore[union-attr]
    assert first[0].completion.cost_usd == 0.0  # type: ignore[union-attr]


def test_unknown_local_model() -> None:
    with pytest.raises(SpecError, match="unknown local model 'gpt-5'"):
        make_provider(ModelSpec.parse("local:gpt-5"))


def test_prefix_reuse_gives_the_scores_of_a_fresh_evaluation() -> None:
    from eigenjury.models.providers import local

    model = local._load(local.model_path("smollm2-135m"))
    other = ChatRequest.chat(
        ("system", "You compare two answers."),
        ("user", "Pick A or B."),
        choices=("A", "B"),
        logprobs=True,
    )
    with local._inference:
        first = local._choose(model, VERDICT).choice_logprobs
        local._choose(model, other)  # shares the system prompt's first tokens only
        reused = local._choose(model, VERDICT).choice_logprobs
        model.llm.reset()
        fresh = local._choose(model, VERDICT).choice_logprobs
    assert first is not None and reused is not None and fresh is not None
    for key in fresh:
        assert reused[key] == pytest.approx(fresh[key], abs=1e-3)
        assert first[key] == pytest.approx(fresh[key], abs=1e-3)


def test_a_real_peer_ranking_run_on_the_local_models(tmp_path: Path) -> None:
    """Three members on the two bundled models, two scenarios, every comparison, soft
    verdicts."""
    import yaml

    from eigenjury.jobs import run_rank

    config = {
        "population": [
            {
                "name": "warm-smol",
                "model": "local:smollm2-135m",
                "persona": "You are warm and caring.",
            },
            {
                "name": "curt-smol",
                "model": "local:smollm2-135m",
                "persona": "You are curt and dismissive.",
            },
            {"name": "gemma", "model": "local:gemma3-270m"},
        ],
        "scenarios": {"limit": 2},
        "sampling": {"design": "all"},
        "judging": {
            "reflections": False,
            "evaluee": {"max_tokens": 40},
            "judge": {"temperature": 1.0},
            "soft": True,
        },
        "fit": {"bootstrap": 20, "ci": 0.9},
        "output": str(tmp_path / "run"),
    }
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    run = run_rank(path, progress=False)
    summary = run.record.run
    assert summary is not None
    assert summary.comparisons == 3 * 6 * 2 and summary.verdicts == 36  # always valid
    # soft: every local judge's verdict came with its label probabilities
    assert summary.soft_verdicts_by_judge == {"curt-smol": 12, "gemma": 12, "warm-smol": 12}
    header = (run.out / "verdicts.csv").read_text().splitlines()[0]
    assert header.split(",")[5:8] == ["p_first", "p_second", "p_tie"]
    assert (run.out / "report.html").is_file()
    assert {m.name for m in run.record.models} == {"warm-smol", "curt-smol", "gemma"}


def test_the_bundled_contract_graded_by_local_models(tmp_path: Path) -> None:
    """A local candidate answers two starter tasks; two local jurors vote by option
    scoring (one criterion a call) and under a grammar (criteria batched): every vote
    is readable, and grading twice asks nothing again."""
    import json

    from eigenjury.cli import main

    subset = tmp_path / "starter.yaml"
    assert main(["contracts", "convert", "starter", str(subset)]) == 0
    text = subset.read_text()
    subset.write_text(text[: text.index("- task_id: example-email")])  # the first three tasks
    for batch in ([], ["--batch-criteria"]):
        args = [
            "grade",
            str(subset),
            "--candidate",
            "local:smollm2-135m",
            "--jury",
            "local:smollm2-135m",
            "--jury",
            "local:gemma3-270m",
            "--candidate-max-tokens",
            "40",
            "--out",
            str(tmp_path / f"out{len(batch)}"),
            "--store",
            str(tmp_path / "store.sqlite"),
            "--no-progress",
            *batch,
        ]
        assert main(args) == 0
        record = json.loads((tmp_path / f"out{len(batch)}" / "results.json").read_text())
        assert [t["task_id"] for t in record["tasks"]] == [
            "times-table",
            "capital-japan",
            "comfort-friend",
        ]
        votes = [c["votes"] for t in record["tasks"] for c in t["criteria"] if "votes" in c]
        assert len(votes) == 3
        assert all(v["C"] + v["I"] == 2 and v["unparsed"] == v["error"] == 0 for v in votes)
    assert main(args) == 0
    assert (
        json.loads((tmp_path / "out1" / "results.json").read_text())["accounting"]["total"][
            "cached"
        ]
        == json.loads((tmp_path / "out1" / "results.json").read_text())["accounting"]["total"][
            "calls"
        ]
    )


@pytest.mark.parametrize("name", MODELS)
def test_a_begun_reply_is_continued(name: str) -> None:
    """A last assistant message is a reply begun for the model: the completion is its
    continuation only, and differs from an answer to the same turns without it."""
    provider = make_provider(ModelSpec.parse(f"local:{name}"))
    turns = (("user", "My cat died this morning."),)
    begun = ChatRequest.chat(
        *turns, ("assistant", "I'm so sorry. Losing a cat"), max_tokens=12, temperature=0.0
    )
    completion = asyncio.run(provider.generate(begun))
    assert completion.text.strip() and not completion.text.startswith("I'm so sorry")
    assert completion.usage.output_tokens <= 12
    plain = asyncio.run(provider.generate(ChatRequest.chat(*turns, max_tokens=12, temperature=0)))
    assert plain.text != completion.text
    assert asyncio.run(provider.generate(begun)).text == completion.text  # deterministic
    with pytest.raises(Exception, match="begun reply"):
        asyncio.run(provider.generate(ChatRequest(begun.messages, choices=("A", "B"))))


def test_label_probabilities_are_the_distribution_verdicts_are_drawn_from() -> None:
    """Soft verdicts: the judge's label probabilities sum to 1, do not depend on the
    sampling temperature, and at temperature 1 the drawn verdicts follow them."""
    from eigenjury.peer.parsing import soft_verdict

    provider = make_provider(ModelSpec.parse("local:smollm2-135m"))
    labels = ("tie", "A", "B")

    def at(temperature: float, seed: int = 0) -> tuple[str, dict[str, float]]:
        request = ChatRequest(
            VERDICT.messages, temperature=temperature, seed=seed, choices=labels, logprobs=True
        )
        completion = asyncio.run(provider.generate(request))
        assert completion.choice_logprobs is not None
        return completion.text, dict(completion.choice_logprobs)

    _, cold = at(0.0)
    _, hot = at(1.7)
    # the model's own, whatever the temperature (up to the rounding of llama.cpp's kernels:
    # a prompt held from the call before is finished one token at a time, not as a batch)
    assert cold == pytest.approx(hot, abs=0.1)
    probs = soft_verdict(cold)
    assert probs is not None and sum(probs) == pytest.approx(1.0, abs=1e-12)
    assert soft_verdict(cold, ties=False) == pytest.approx(
        (0.0, probs[1] / (probs[1] + probs[2]), probs[2] / (probs[1] + probs[2]))
    )
    draws = 600
    drawn = [at(1.0, seed)[0] for seed in range(draws)]
    for label, p in zip(labels, probs, strict=True):
        share = drawn.count(label) / draws
        assert abs(share - p) <= 4 * (p * (1 - p) / draws) ** 0.5 + 1e-9, (label, share, p)
