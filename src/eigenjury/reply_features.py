"""Style features of replies, computed from their texts: the house definition.

Style control compares two replies through the normalised difference (a - b) / (a + b)
of each feature, so the scale of a feature cancels; what matters is that it grows with
what it stands for. The four default features:

- length: a tokenizer-free proxy for the reply's length in tokens: each run of
  letters, digits and underscores counts 1, each CJK character (Han, Hiragana,
  Katakana, Hangul) counts 1, each other character that is not whitespace (punctuation,
  symbols, emoji) counts 1. As a regex, the tokens are the matches of
  `[CJK]|[\\p{L}\\p{N}_ but not CJK]+|[^whitespace]`; whitespace is ASCII whitespace and
  Unicode separators (\\p{Z}). It rises with the count of any subword tokenizer without
  its vocabulary; the whole text counts, code included.
- headers: markdown ATX headers, lines that start with up to 3 spaces, 1 to 6 '#' and
  a space or tab;
- lists: list items, lines that start with optional indentation, then '-', '*', '+' or
  a number followed by '.' or ')', then whitespace and text;
- bold: `**...**` and `__...__` spans, non-empty and within a line.

Headers, lists and bold are counted outside fenced code blocks (``` or ~~~; an unclosed
fence runs to the end), where a '# comment' is not a header. Everything runs on whole
columns: the markdown counts are RE2 regexes in pyarrow; the length proxy classifies
UTF-8 bytes with numpy, since a regex spends about 100 ns per match and a reply holds
hundreds of tokens (the character classes of non-ASCII text come from the same RE2
classes).
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

DEFAULT_FEATURES = ("length", "headers", "lists", "bold")

FloatArray = NDArray[np.float64]

_CJK = r"\p{Han}\p{Hiragana}\p{Katakana}\p{Hangul}"
_FENCE = r"(?ms)^ {0,3}```.*?(?:^ {0,3}```[^\n]*$|\z)|^ {0,3}~~~.*?(?:^ {0,3}~~~[^\n]*$|\z)"
_MARKDOWN = {
    "headers": r"(?m)^ {0,3}#{1,6}[ \t]",
    "lists": r"(?m)^[ \t]*(?:[-*+]|\d+[.)])[ \t]+\S",
    "bold": r"\*\*[^*\n]+\*\*|__[^_\n]+__",
}
_CHUNK_BYTES = 1 << 24  # text classified at a time: numpy's temporaries are a few times this
_SPACE, _WORD, _SINGLE = 0, 1, 2  # character classes of the length proxy
_JOIN = "\n\n"  # between the turns of a multi-turn reply


def text_features(texts: Any, names: Sequence[str] = DEFAULT_FEATURES) -> dict[str, FloatArray]:
    """Each named default feature (see the module docstring) of each text, as floats;
    NaN for a missing text (None or null). `texts`: a pyarrow string array (chunked or
    not) or a sequence of str or None."""
    import pyarrow as pa

    unknown = [n for n in names if n not in DEFAULT_FEATURES]
    if unknown:
        raise ValueError(f"no text feature named {', '.join(unknown)}")
    column = _string_column(texts)
    chunks = column.chunks if isinstance(column, pa.ChunkedArray) else [column]
    parts = [_features(chunk, names) for chunk in chunks]
    return {n: np.concatenate([p[n] for p in parts]) if parts else np.zeros(0) for n in names}


def joined_turns(texts: Any) -> Any:
    """Replies given turn by turn as one text each, the turns joined by a blank line:
    a list column of texts, or texts that are JSON lists of strings (Kaggle's
    arena-human-preference files write '["first turn", "second turn"]'). Any other text
    is kept as it is; only the texts that start with '[' are parsed, in Python."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if isinstance(texts, pa.ChunkedArray):
        texts = texts.combine_chunks()
    if pa.types.is_list(texts.type) or pa.types.is_large_list(texts.type):
        return pc.binary_join(texts, _JOIN)
    listed = pc.fill_null(pc.starts_with(texts, "["), False)
    if not pc.any(listed).as_py():
        return texts
    values = texts.filter(listed).to_pylist()
    return pc.replace_with_mask(texts, listed, pa.array([_turns(v) for v in values], texts.type))


def _turns(text: str) -> str:
    try:
        turns = json.loads(text)
    except (ValueError, RecursionError):  # not JSON, or nested past reading: plain text
        return text
    if isinstance(turns, list) and all(isinstance(t, str) for t in turns):
        return _JOIN.join(turns)
    return text


def _string_column(texts: Any) -> Any:
    """`texts` as a pyarrow array or chunked array of strings."""
    import pyarrow as pa

    if isinstance(texts, pa.Array | pa.ChunkedArray):
        if not (pa.types.is_string(texts.type) or pa.types.is_large_string(texts.type)):
            raise TypeError(f"texts must be strings, not {texts.type}")
        return texts
    return pa.array(list(texts), pa.string())


def _features(texts: Any, names: Sequence[str]) -> dict[str, FloatArray]:
    """The features `names` of one string array."""
    import pyarrow as pa
    import pyarrow.compute as pc

    features: dict[str, FloatArray] = {}
    if "length" in names:
        features["length"] = _lengths(texts)
    markdown = [n for n in names if n in _MARKDOWN]
    prose = _without_code(texts) if markdown else texts
    for name in markdown:
        counts = pc.cast(pc.count_substring_regex(prose, _MARKDOWN[name]), pa.float64())
        features[name] = np.asarray(
            pc.fill_null(counts, math.nan).to_numpy(zero_copy_only=False), dtype=np.float64
        )
    return features


def _without_code(texts: Any) -> Any:
    """The texts without their fenced code blocks (only those with a fence are searched)."""
    import pyarrow.compute as pc

    fenced = pc.or_(pc.match_substring(texts, "```"), pc.match_substring(texts, "~~~"))
    fenced = pc.fill_null(fenced, False)
    if not pc.any(fenced).as_py():
        return texts
    prose = pc.replace_substring_regex(texts.filter(fenced), _FENCE, "")
    return pc.replace_with_mask(texts, fenced, prose)


def _lengths(texts: Any) -> FloatArray:
    """The length proxy of each text (NaN where missing), a slice of rows at a time."""
    import pyarrow as pa

    if not len(texts):
        return np.zeros(0)
    wide = pa.types.is_large_string(texts.type)
    _, offsets_buffer, data_buffer = texts.buffers()
    offsets = np.frombuffer(offsets_buffer, np.int64 if wide else np.int32)
    offsets = offsets[texts.offset : texts.offset + len(texts) + 1].astype(np.int64)
    data = (
        np.frombuffer(data_buffer, np.uint8) if data_buffer is not None else np.zeros(0, np.uint8)
    )
    lengths = np.zeros(len(texts))
    row = 0
    while row < len(texts):
        end = int(np.searchsorted(offsets, offsets[row] + _CHUNK_BYTES, side="right")) - 1
        end = min(max(end, row + 1), len(texts))
        starts = offsets[row : end + 1]
        lengths[row:end] = _tokens(data[starts[0] : starts[-1]], starts[:-1] - starts[0])
        row = end
    if texts.null_count:
        lengths[np.asarray(texts.is_null().to_numpy(zero_copy_only=False), dtype=bool)] = math.nan
    return lengths


def _tokens(text: NDArray[np.uint8], starts: NDArray[np.int64]) -> NDArray[np.int64]:
    """The tokens of the texts that begin at `starts` in the UTF-8 bytes `text`: where a
    character counts alone (CJK, punctuation, symbols) or a word run begins."""
    tokens = np.zeros(len(starts), dtype=np.int64)
    if not len(text):
        return tokens
    low = text | 0x20
    word = ((low - 97) < 26) | ((text - 48) < 10) | (text == 95)  # uint8 wraps around
    space = (text == 32) | ((text - 9) < 5)
    single = (text < 128) & ~word & ~space
    lead = np.flatnonzero(text >= 0xC0)  # a non-ASCII character's first byte
    if len(lead):
        size, kind = _characters(text, lead)
        single[lead] = kind == _SINGLE
        for k in range(4):  # a letter's every byte is part of its word
            within = (size > k) & (lead + k < len(text))  # (bad UTF-8 may end early)
            word[lead[within] + k] = kind[within] == _WORD
    follows = np.empty_like(word)
    follows[0] = False
    follows[1:] = word[:-1]
    follows[starts[starts < len(text)]] = False  # a word never runs on into the next text
    begins = single | (word & ~follows)
    ends = np.append(starts[1:], len(text))
    filled = np.flatnonzero(ends > starts)
    if len(filled):
        tokens[filled] = np.add.reduceat(begins, starts[filled], dtype=np.int64)
    return tokens


def _characters(
    text: NDArray[np.uint8], lead: NDArray[np.int64]
) -> tuple[NDArray[np.int64], NDArray[np.uint8]]:
    """The byte size and the class of the non-ASCII characters that start at `lead`."""
    padded = np.concatenate([text, np.zeros(3, np.uint8)])
    b0 = padded[lead].astype(np.int64)
    b1, b2, b3 = (padded[lead + k].astype(np.int64) & 0x3F for k in (1, 2, 3))
    size = np.where(b0 < 0xE0, 2, np.where(b0 < 0xF0, 3, 4))
    codepoint = np.where(
        size == 2,
        ((b0 & 0x1F) << 6) | b1,
        np.where(
            size == 3,
            ((b0 & 0x0F) << 12) | (b1 << 6) | b2,
            ((b0 & 0x07) << 18) | (b1 << 12) | (b2 << 6) | b3,
        ),
    )
    distinct, which = np.unique(codepoint, return_inverse=True)
    kind = np.full(len(distinct), _SINGLE, dtype=np.uint8)  # not Unicode: bad UTF-8
    valid = (distinct < 0xD800) | ((distinct > 0xDFFF) & (distinct <= 0x10FFFF))
    kind[valid] = _classes(distinct[valid])
    return size, kind[which.ravel()]


def _classes(codepoints: NDArray[np.int64]) -> NDArray[np.uint8]:
    """Each character's class in the length proxy, by RE2's Unicode classes."""
    import pyarrow as pa
    import pyarrow.compute as pc

    chars = pa.array([chr(c) for c in codepoints.tolist()], pa.string())

    def matches(pattern: str) -> NDArray[np.bool_]:
        return np.asarray(
            pc.match_substring_regex(chars, pattern).to_numpy(zero_copy_only=False), dtype=bool
        )

    kind = np.full(len(chars), _SINGLE, dtype=np.uint8)
    kind[matches(r"^[\p{L}\p{N}_]$") & ~matches(f"^[{_CJK}]$")] = _WORD
    kind[matches(r"^[\s\v\p{Z}]$")] = _SPACE
    return kind
