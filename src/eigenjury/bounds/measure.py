"""Sensitivity of a judge, measured through the engine (the profile is bounds.record's).

For m items sampled (seeded) from a dataset, the judge scores each original once;
then every generator makes one neighbour per item, and only the neighbours are
re-judged. Neighbours are judged with another seed and sample number than the
originals, so the identity neighbour is a fresh draw (the store does not return the
cached answer) and every generator's change includes the same intrinsic jitter,
which identity measures on its own. Failed calls, unparseable replies and rejected
paraphrases are counted per generator and leave their item out; they are never
scored.
"""

from __future__ import annotations

import math
import zlib
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from pydantic import BaseModel, ConfigDict

from eigenjury.bounds.judges import JudgeProtocol
from eigenjury.bounds.neighbours import (
    LOCAL_GENERATORS,
    PARAPHRASE,
    JudgedItem,
    Paraphraser,
)
from eigenjury.bounds.record import (
    CALL_ERROR,
    PARAPHRASE_ERROR,
    GeneratorProfile,
    Method,
    Pair,
    ScalePart,
    SensitivityProfile,
)
from eigenjury.engine.engine import Call, CallResult, Engine
from eigenjury.errors import InputError
from eigenjury.files import read_jsonl
from eigenjury.models.spec import ModelSpec
from eigenjury.records import AccountingRecord, now
from eigenjury.stats.abb import estimate_sensitivity


class _DatasetLine(BaseModel):
    model_config = ConfigDict(extra="ignore")
    id: str | int
    prompt: str
    response: str | None = None
    response_a: str | None = None
    response_b: str | None = None
    model: str | None = None
    model_a: str | None = None
    model_b: str | None = None


def read_dataset(path: Path) -> list[JudgedItem]:
    """A JSONL dataset: `id`, `prompt` and either `response` or `response_a` and
    `response_b` (every line the same kind); optional `model` / `model_a`, `model_b`."""
    items: list[JudgedItem] = []
    seen: dict[str, int] = {}
    for number, line in read_jsonl(path, _DatasetLine):
        item = _item(line, path, number)
        if items and item.pairwise != items[0].pairwise:
            raise InputError(
                "mixes single responses and pairs; use one kind per dataset",
                path=path,
                line=number,
            )
        if item.id in seen:
            raise InputError(
                f"id '{item.id}' was already used on line {seen[item.id]}",
                path=path,
                line=number,
                field="id",
            )
        seen[item.id] = number
        items.append(item)
    if not items:
        raise InputError("the dataset is empty; expected one JSON object a line", path=path)
    return items


def _item(line: _DatasetLine, path: Path, number: int) -> JudgedItem:
    pair = (line.response_a, line.response_b)
    if line.response is not None and any(p is not None for p in pair):
        raise InputError(
            "give either response or response_a and response_b", path=path, line=number
        )
    if line.response is not None:
        return JudgedItem(str(line.id), line.prompt, (line.response,), (line.model,))
    if pair[0] is None or pair[1] is None:
        missing = "response_b" if pair[0] is not None else "response_a"
        field = missing if any(p is not None for p in pair) else "response"
        raise InputError("missing", path=path, line=number, field=field)
    return JudgedItem(str(line.id), line.prompt, (pair[0], pair[1]), (line.model_a, line.model_b))


@dataclass(frozen=True)
class MeasureSettings:
    judge: ModelSpec
    protocol: JudgeProtocol
    generators: tuple[str, ...]
    m: int
    seed: int = 0
    confidence: float = 0.95
    method: Method = "kl"
    paraphraser: ModelSpec | None = None
    paraphrase: Paraphraser = field(default_factory=Paraphraser)


def sample_items(items: Sequence[JudgedItem], m: int, seed: int) -> list[JudgedItem]:
    """m items (all if fewer), seeded, in dataset order."""
    rng = np.random.default_rng(seed)
    chosen = np.sort(rng.choice(len(items), size=min(m, len(items)), replace=False))
    return [items[i] for i in chosen]


def _generator_rng(seed: int, name: str, index: int) -> np.random.Generator:
    """Each (generator, item) has its own stream: adding a generator changes no other."""
    return np.random.default_rng([seed, zlib.crc32(name.encode()), index])


@dataclass(frozen=True)
class MeasureInputs:
    """What a measurement runs on: the dataset's items (and its name) and the settings."""

    items: Sequence[JudgedItem]
    dataset: str
    settings: MeasureSettings


async def run(engine: Engine, inputs: MeasureInputs) -> SensitivityProfile:
    """Judge m sampled items and their neighbours; estimate each generator's Delta."""
    items, settings = inputs.items, inputs.settings
    protocol = settings.protocol
    sampled = sample_items(items, settings.m, settings.seed)
    originals = await engine.run(
        [
            Call(settings.judge, protocol.request(item, settings.seed), 0, role="judge")
            for item in sampled
        ]
    )
    original_failures: Counter[str] = Counter()
    scores: dict[int, float] = {}
    for i, (item, result) in enumerate(zip(sampled, originals, strict=True)):
        score, failure = _score(protocol, item, result)
        if failure:
            original_failures[failure] += 1
        else:
            assert score is not None
            scores[i] = score

    neighbours: dict[str, dict[int, JudgedItem]] = {}
    failures: dict[str, Counter[str]] = {g: Counter() for g in settings.generators}
    for name in settings.generators:
        if name == PARAPHRASE:
            neighbours[name] = await _paraphrased(engine, sampled, settings, failures[name])
        else:
            generator = LOCAL_GENERATORS[name]
            neighbours[name] = {
                i: generator.perturb(item, _generator_rng(settings.seed, name, i))
                for i, item in enumerate(sampled)
            }
    jobs = [(name, i, item) for name, made in neighbours.items() for i, item in made.items()]
    results = await engine.run(
        [
            Call(settings.judge, protocol.request(item, settings.seed + 1), 1, role="neighbour")
            for _, _, item in jobs
        ]
    )
    pairs: dict[str, list[Pair]] = {g: [] for g in settings.generators}
    for (name, i, item), result in zip(jobs, results, strict=True):
        score, failure = _score(protocol, item, result)
        if failure:
            failures[name][failure] += 1
        elif i in scores:
            assert score is not None
            pairs[name].append(Pair(item=sampled[i].id, original=scores[i], perturbed=score))
    generators = {
        name: _generator_profile(pairs[name], failures[name], settings)
        for name in settings.generators
    }
    jitter = generators["identity"].estimate if "identity" in generators else None
    if jitter is not None:
        for record in generators.values():
            if record.estimate is not None:
                record.beyond_jitter = math.sqrt(max(record.estimate**2 - jitter**2, 0.0))
    return SensitivityProfile(
        created=now(),
        judge=str(settings.judge),
        protocol=protocol.kind,
        scale=ScalePart(**protocol.scale.to_dict()),
        dataset=inputs.dataset,
        items=len(items),
        m=len(sampled),
        seed=settings.seed,
        confidence=settings.confidence,
        method=settings.method,
        paraphraser=None if settings.paraphraser is None else str(settings.paraphraser),
        original_failures=dict(original_failures),
        jitter=jitter,
        generators=generators,
        accounting=AccountingRecord.model_validate(engine.session_accounting.record()),
    )


def _score(
    protocol: JudgeProtocol, item: JudgedItem, result: CallResult
) -> tuple[float | None, str | None]:
    """The normalised score, or the failure: "error" (the call) or "unparsed"."""
    if result.completion is None:
        return None, CALL_ERROR
    raw = protocol.parse(result.completion.text, item)
    if raw is None:
        return None, "unparsed"
    return float(protocol.scale.normalise(raw)), None


async def _paraphrased(
    engine: Engine,
    sampled: Sequence[JudgedItem],
    settings: MeasureSettings,
    failures: Counter[str],
) -> dict[int, JudgedItem]:
    if settings.paraphraser is None:
        raise InputError("the paraphrase neighbour needs --paraphraser MODEL")
    which = [
        int(_generator_rng(settings.seed, PARAPHRASE, i).integers(len(item.responses)))
        for i, item in enumerate(sampled)
    ]
    results = await engine.run(
        [
            Call(
                settings.paraphraser,
                settings.paraphrase.request(item.responses[w], settings.seed),
                role="paraphraser",
            )
            for item, w in zip(sampled, which, strict=True)
        ]
    )
    made: dict[int, JudgedItem] = {}
    for i, (item, w, result) in enumerate(zip(sampled, which, results, strict=True)):
        if result.completion is None:
            failures[PARAPHRASE_ERROR] += 1
            continue
        text = settings.paraphrase.accept(item.responses[w], result.completion.text)
        if text is None:
            failures["rejected"] += 1
            continue
        responses = list(item.responses)
        responses[w] = text
        made[i] = JudgedItem(item.id, item.prompt, tuple(responses), item.models, item.swapped)
    return made


def _generator_profile(
    pairs: list[Pair], failures: Counter[str], settings: MeasureSettings
) -> GeneratorProfile:
    if not pairs:
        estimate = upper = None
    else:
        sensitivity = estimate_sensitivity(
            [p.original for p in pairs],
            [p.perturbed for p in pairs],
            settings.confidence,
            method=settings.method,
            rng=np.random.default_rng(settings.seed),
        )
        estimate, upper = sensitivity.estimate, sensitivity.upper_bound
    return GeneratorProfile(
        estimate=estimate,
        upper_bound=upper,
        confidence=settings.confidence,
        method=settings.method,
        m=len(pairs),
        beyond_jitter=None,
        failures=dict(failures),
        pairs=pairs,
    )
