"""Verdicts from a small served model: free text against structured output, on
llama-cpp-python's own OpenAI-compatible server.

The server runs a bundled model (`python -m llama_cpp.server`, 2 threads). Each
request is the peer protocol's comparison, as an HTTP judge is asked it
(`comparison_request`, unconstrained: reason, then a <verdict> tag; ties allowed), with
the bundled kindness constitution, `--scenarios` everyday scenarios (the seeded pick of
seed 0), and a warm and a curt reply in both orders. Two ways, at the provider level:

- text: `verdict_format: text`, today's request; a reply without a readable tag gets the
  protocol's one repair call (`repair_request`);
- structured: the same request with its labels as `choices` (verdict_format auto: the
  provider finds the server's form of structured output, and asks for label scores).

The table gives, per way: verdicts usable from the first call, repair calls, verdicts
usable in the end, soft verdicts (every label scored), calls, and wall time. (Finding
the server's form costs the structured way one more HTTP request, refused at once.)

    python benchmarks/http_verdicts.py [--model smollm2-135m] [--scenarios 12] [--max-tokens 400]
"""

from __future__ import annotations

import argparse
import asyncio
import time
from dataclasses import dataclass, replace

from _common import ROOT, environment, table
from eigenjury.models.providers.local import model_path
from eigenjury.models.providers.openai_compat import OpenAICompatibleProvider
from eigenjury.models.spec import ModelSpec
from eigenjury.models.types import ChatRequest
from eigenjury.models.verdict_format import read_structured
from eigenjury.peer.config import Generation
from eigenjury.peer.data import load_constitution, load_scenarios
from eigenjury.peer.parsing import parse_verdict, soft_verdict
from eigenjury.peer.prompts import LABELS, comparison_request, repair_request
from eigenjury.testing.llama_server import llama_server

WARM = "I'm so sorry you're going through this. That sounds hard; I'm here if you want to talk."
CURT = "Deal with it. Everyone has problems, and yours are not special."


def comparison_requests(n_scenarios: int, max_tokens: int) -> list[ChatRequest]:
    """The peer protocol's free-text comparisons: a warm and a curt reply, both orders."""
    constitution = load_constitution("kindness", ROOT)
    scenarios = load_scenarios("everyday", ROOT, limit=n_scenarios, seed=0)
    settings = Generation(temperature=0.0, max_tokens=max_tokens)
    return [
        comparison_request(
            None,
            constitution,
            scenario.text,
            replies,
            None,
            settings,
            ties=True,
            per_criterion=False,
            constrained=False,
        )
        for scenario in scenarios
        for replies in ((WARM, CURT), (CURT, WARM))
    ]


@dataclass
class Tally:
    first: int = 0  # usable verdicts from the first call
    repairs: int = 0
    usable: int = 0
    soft: int = 0
    calls: int = 0
    seconds: float = 0.0


async def run_text(provider: OpenAICompatibleProvider, requests: list[ChatRequest]) -> Tally:
    tally = Tally()
    start = time.perf_counter()
    for request in requests:
        forced = replace(request, choices=LABELS, verdict_format="text")
        reply = await provider.generate(forced)
        tally.calls += 1
        if parse_verdict(reply.text) is not None:
            tally.first += 1
            tally.usable += 1
            continue
        tally.repairs += 1
        repair = repair_request(request, reply.text, ties=True, per_criterion=False, n_criteria=1)
        again = await provider.generate(repair)
        tally.calls += 1
        tally.usable += parse_verdict(again.text) is not None
    tally.seconds = time.perf_counter() - start
    return tally


async def run_structured(provider: OpenAICompatibleProvider, requests: list[ChatRequest]) -> Tally:
    tally = Tally()
    start = time.perf_counter()
    for request in requests:
        reply = await provider.generate(replace(request, choices=LABELS, logprobs=True))
        tally.calls += 1
        if read_structured(reply.text, LABELS) is not None:
            tally.first += 1
            tally.usable += 1
        scores = reply.choice_logprobs
        tally.soft += scores is not None and soft_verdict(scores) is not None
    tally.seconds = time.perf_counter() - start
    return tally


async def measure(
    base: str, model: str, requests: list[ChatRequest]
) -> tuple[Tally, Tally, dict[str, str]]:
    spec = ModelSpec.parse(f"openai-compatible:{model}@{base}")
    text_judge, structured_judge = OpenAICompatibleProvider(spec), OpenAICompatibleProvider(spec)
    try:
        text = await run_text(text_judge, requests)
        structured = await run_structured(structured_judge, requests)
    finally:
        await text_judge.aclose()
        await structured_judge.aclose()
    return text, structured, structured_judge.features


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2-135m", choices=("smollm2-135m", "gemma3-270m"))
    parser.add_argument("--scenarios", type=int, default=12)
    parser.add_argument("--max-tokens", type=int, default=400)
    args = parser.parse_args()
    requests = comparison_requests(args.scenarios, args.max_tokens)
    with llama_server(model_path(args.model)) as base:
        text, structured, features = asyncio.run(measure(base, args.model, requests))
    n = len(requests)
    rows = [
        [
            way,
            f"{t.first}/{n}",
            t.repairs,
            f"{t.usable}/{n}",
            f"{t.soft}/{n}" if way == "structured" else "-",
            t.calls,
            round(t.seconds, 1),
        ]
        for way, t in (("text", text), ("structured", structured))
    ]
    headers = ["way", "usable, 1st call", "repairs", "usable", "soft", "calls", "wall s"]
    print(table(headers, rows))
    print(f"\nwhat the server was found to support: {features}")
    print(environment("llama-cpp-python"))


if __name__ == "__main__":
    main()
