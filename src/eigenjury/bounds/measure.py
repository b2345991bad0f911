"""Sensitivity of a judge, measured through the engine (the profile is bounds.record's).

A neighbour edits one response, and so every item showing it: a reply judged against
several others (the same prompt and text in several pairwise items, as in a peer
design) is one unit. For m replies sampled (seeded) from a dataset, the judge scores
each item they feed once; then every generator edits each sampled reply once (the
same edit in every item showing it; the position swap, which edits no response,
swaps each of those items) and only the neighbours are re-judged. The profile keeps
one pair per item, with the reply named where it fed several; the bound averages a
unit's items into one sample (stats.abb.estimate_sensitivity's `units`), so Delta is
per item and `bound apply` scales it to its k. A dataset whose replies each appear
once is measured item by item, as before.

Neighbours are judged with another seed and sample number than the originals, so
the identity neighbour is a fresh draw (the store does not return the cached answer)
and every generator's change includes the same intrinsic jitter, which identity
measures on its own. Failed calls, unparseable replies and rejected paraphrases are
counted per generator and leave their item out; they are never scored. A served
judge's replies are also counted by how they gave their verdict (`verdicts`).

Replies feed different numbers of items where the design is unbalanced: the profile
records each sampled reply's size (`unit_sizes`), and each size is bounded on its own
(stats.abb: units of different sizes); Delta per item is then the worst size's."""

from __future__ import annotations

import math
import zlib
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
from pydantic import BaseModel, ConfigDict

from eigenjury.bounds.judges import JudgeProtocol
from eigenjury.bounds.neighbours import (
    LOCAL_GENERATORS,
    PARAPHRASE,
    JudgedItem,
    NeighbourGenerator,
    Paraphraser,
)
from eigenjury.bounds.record import (
    CALL_ERROR,
    CALL_FAILURES,
    PARAPHRASE_ERROR,
    GeneratorProfile,
    Method,
    Pair,
    ScalePart,
    SensitivityProfile,
    perturbed_scores,
    strata_part,
    unit_codes,
)
from eigenjury.engine.engine import Call, CallResult, Engine
from eigenjury.errors import InputError
from eigenjury.files import read_jsonl
from eigenjury.models.spec import ModelSpec
from eigenjury.models.verdict_format import VerdictFormat, VerdictMode, verdict_mode
from eigenjury.records import AccountingRecord, VerdictModes, now
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
    method: Method = "kl+bernstein"
    paraphraser: ModelSpec | None = None
    paraphrase: Paraphraser = field(default_factory=Paraphraser)
    verdict_format: VerdictFormat = "auto"  # how a served judge gives its verdict


@dataclass(frozen=True)
class Reply:
    """One response of the dataset, as a neighbour edits it: its text, and the items
    showing it (a reply judged against several others feeds several items)."""

    name: str  # the item id, and A or B on pairwise items, where it first appears
    text: str
    items: tuple[int, ...]


def replies(items: Sequence[JudgedItem]) -> list[Reply]:
    """The distinct responses (by prompt and text), in order of first appearance."""
    found: dict[tuple[str, str], tuple[str, list[int]]] = {}
    for i, item in enumerate(items):
        for side, text in enumerate(item.responses):
            name = f"{item.id}/{'AB'[side]}" if item.pairwise else item.id
            shown = found.setdefault((item.prompt, text), (name, []))[1]
            if i not in shown:
                shown.append(i)
    return [Reply(name, text, tuple(shown)) for (_, text), (name, shown) in found.items()]


def sample(pool: Sequence[Reply], m: int, seed: int) -> list[Reply]:
    """m replies (all if fewer), seeded, in dataset order."""
    rng = np.random.default_rng(seed)
    chosen = np.sort(rng.choice(len(pool), size=min(m, len(pool)), replace=False))
    return [pool[i] for i in chosen]


def _generator_rng(seed: int, name: str, index: int) -> np.random.Generator:
    """Each (generator, sampled reply) has its own stream: adding a generator changes no
    other."""
    return np.random.default_rng([seed, zlib.crc32(name.encode()), index])


@dataclass(frozen=True)
class MeasureInputs:
    """What a measurement runs on: the dataset's items (and its name) and the settings."""

    items: Sequence[JudgedItem]
    dataset: str
    settings: MeasureSettings


async def run(engine: Engine, inputs: MeasureInputs) -> SensitivityProfile:
    """Judge the items of m sampled replies and their neighbours; estimate each
    generator's Delta per item, one sample per reply."""
    items, settings = inputs.items, inputs.settings
    protocol = settings.protocol
    asked = settings.verdict_format if settings.judge.served else None
    sampled = sample(replies(items), settings.m, settings.seed)
    judged = sorted({i for reply in sampled for i in reply.items})
    originals = await engine.run(
        [
            Call(settings.judge, protocol.request(items[i], settings.seed, asked), 0, role="judge")
            for i in judged
        ]
    )
    original_failures: Counter[str] = Counter()
    scores: dict[int, float] = {}
    modes: list[tuple[VerdictMode, bool]] = []  # (verdict mode, read) per reply
    for i, result in zip(judged, originals, strict=True):
        score, failure = _score(protocol, items[i], result, modes)
        if failure:
            original_failures[failure] += 1
        else:
            assert score is not None
            scores[i] = score

    # per generator, (sampled reply, item) -> the item with that reply edited
    neighbours: dict[str, dict[tuple[int, int], JudgedItem]] = {}
    failures: dict[str, Counter[str]] = {g: Counter() for g in settings.generators}
    for name in settings.generators:
        if name == PARAPHRASE:
            rewritten = await _paraphrased(engine, sampled, settings, failures[name])
            neighbours[name] = {
                (r, i): _with_reply(items[i], sampled[r].text, text)
                for r, text in rewritten.items()
                for i in sampled[r].items
            }
        else:
            generator = LOCAL_GENERATORS[name]
            made = {
                (r, i): item
                for r, reply in enumerate(sampled)
                for i, item in _edited(
                    generator, reply, items, _generator_rng(settings.seed, name, r)
                ).items()
            }
            neighbours[name] = _once(made)
    jobs = [(name, key, item) for name, made in neighbours.items() for key, item in made.items()]
    results = await engine.run(
        [
            Call(settings.judge, protocol.request(item, settings.seed + 1, asked), 1, "neighbour")
            for _, _, item in jobs
        ]
    )
    pairs: dict[str, list[Pair]] = {g: [] for g in settings.generators}
    for (name, (r, i), item), result in zip(jobs, results, strict=True):
        score, failure = _score(protocol, item, result, modes)
        if failure:
            failures[name][failure] += 1
        # a judgment that failed under the edit is the largest change; a call that was
        # not made (an error, a budget stop) is no judgment at all: a rerun makes it
        if i in scores and failure not in CALL_FAILURES:
            reply = sampled[r]
            unit = reply.name if len(reply.items) > 1 else None
            pairs[name].append(
                Pair(item=items[i].id, original=scores[i], perturbed=score, unit=unit)
            )
    sizes = {reply.name: len(reply.items) for reply in sampled if len(reply.items) > 1}
    generators = {
        name: _generator_profile(pairs[name], failures[name], settings, sizes)
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
        verdict_format=None if asked == "auto" else asked,
        verdicts=None if asked is None else VerdictModes.tally(modes),
        accounting=AccountingRecord.model_validate(engine.accounting_record()),
        unit_sizes=sizes or None,
    )


def _edited(
    generator: NeighbourGenerator,
    reply: Reply,
    items: Sequence[JudgedItem],
    rng: np.random.Generator,
) -> dict[int, JudgedItem]:
    """Each item the reply feeds, with the reply edited once, the same edit everywhere
    (a neighbour edits a response, not a row); a generator of pairs (the position swap)
    perturbs each item itself."""
    if generator.pairwise_only:
        return {i: generator.perturb(items[i], rng) for i in reply.items}
    first = items[reply.items[0]]
    alone = JudgedItem(first.id, first.prompt, (reply.text,), (None,))
    text = generator.perturb(alone, rng).responses[0]
    return {i: _with_reply(items[i], reply.text, text) for i in reply.items}


def _once(made: dict[tuple[int, int], JudgedItem]) -> dict[tuple[int, int], JudgedItem]:
    """Each neighbour once: a neighbour that edits no reply (identity, a position swap)
    is the same for every sampled reply an item shows, and one judgment is one sample."""
    seen: set[JudgedItem] = set()
    out = {}
    for key, item in made.items():
        if item not in seen:
            seen.add(item)
            out[key] = item
    return out


def _with_reply(item: JudgedItem, text: str, edited: str) -> JudgedItem:
    """The item with every response `text` replaced by `edited`."""
    return replace(item, responses=tuple(edited if r == text else r for r in item.responses))


def _score(
    protocol: JudgeProtocol,
    item: JudgedItem,
    result: CallResult,
    modes: list[tuple[VerdictMode, bool]],
) -> tuple[float | None, str | None]:
    """The normalised score, or the failure: "error" (the call) or "unparsed". Each
    reply's verdict mode, and whether it was read, is added to `modes`."""
    if result.completion is None:
        return None, CALL_ERROR
    text = result.completion.text
    raw = protocol.parse(text, item)
    scored = result.completion.choice_logprobs is not None
    modes.append((verdict_mode(text, scored, protocol.choices), raw is not None))
    if raw is None:
        return None, "unparsed"
    return float(protocol.scale.normalise(raw)), None


async def _paraphrased(
    engine: Engine,
    sampled: Sequence[Reply],
    settings: MeasureSettings,
    failures: Counter[str],
) -> dict[int, str]:
    """The accepted paraphrase of each sampled reply, by its index."""
    if settings.paraphraser is None:
        raise InputError("the paraphrase neighbour needs --paraphraser MODEL")
    results = await engine.run(
        [
            Call(
                settings.paraphraser,
                settings.paraphrase.request(reply.text, settings.seed),
                role="paraphraser",
            )
            for reply in sampled
        ]
    )
    made: dict[int, str] = {}
    for r, (reply, result) in enumerate(zip(sampled, results, strict=True)):
        if result.completion is None:
            failures[PARAPHRASE_ERROR] += 1
            continue
        text = settings.paraphrase.accept(reply.text, result.completion.text)
        if engine.planner is not None:  # a plan's placeholder stands for an accepted one
            text = result.completion.text
        if text is None:
            failures["rejected"] += 1
            continue
        made[r] = text
    return made


def _generator_profile(
    pairs: list[Pair], failures: Counter[str], settings: MeasureSettings, sizes: dict[str, int]
) -> GeneratorProfile:
    """Delta per item and its bound, of the worst unit size when the replies feed
    different numbers of items (each size bounded on its own: stats.abb)."""
    estimate = upper = None
    strata = None
    if pairs:
        sensitivity = estimate_sensitivity(
            [p.original for p in pairs],
            perturbed_scores(pairs),
            settings.confidence,
            method=settings.method,
            units=unit_codes(pairs),
            unit_sizes=[1 if p.unit is None else sizes[p.unit] for p in pairs],
            rng=np.random.default_rng(settings.seed),
        )
        estimate = max(s.estimate for s in sensitivity.strata if s.estimate is not None)
        upper = max(s.per_item_bound for s in sensitivity.strata)
        strata = strata_part(sensitivity.strata)
    return GeneratorProfile(
        estimate=estimate,
        upper_bound=upper,
        confidence=settings.confidence,
        method=settings.method,
        m=len(set(unit_codes(pairs))),
        beyond_jitter=None,
        failures=dict(failures),
        pairs=pairs,
        strata=strata,
    )
