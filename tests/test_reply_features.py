"""The house style features of a reply: exact counts on hand-written markdown, the
length proxy against its regex definition, and the Kaggle form of multi-turn replies."""

from __future__ import annotations

import random

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from eigenjury.reply_features import DEFAULT_FEATURES, joined_turns, text_features

MARKDOWN = """# Title
Some text, with **bold** and __also bold__ and ** ** but not **open
   ### Indented header
    #### four spaces: code, not a header
#hashtag is no header
####### seven is no header

- item one
  - nested item
    * deeper *still*
+ plus item
1. first
12) twelfth
-not an item
-\t

```python
# a comment, not a header
- not an item
**not bold**
```
~~~
# neither
~~~
After the fence: **bold** again.
"""


def _features(
    texts: list[str | None], names: tuple[str, ...] = DEFAULT_FEATURES
) -> list[dict[str, float]]:
    features = text_features(texts, names)
    return [{n: features[n][i] for n in names} for i in range(len(texts))]


def test_markdown_counts_outside_code_fences() -> None:
    (counts,) = _features([MARKDOWN], ("headers", "lists", "bold"))
    assert counts == {"headers": 2, "lists": 6, "bold": 4}


def test_an_unclosed_fence_hides_the_rest() -> None:
    text = "# Header\n```\n# code\n- code\n**code**"
    assert _features([text], ("headers", "lists", "bold")) == [
        {"headers": 1, "lists": 0, "bold": 0}
    ]


@pytest.mark.parametrize(
    ("text", "length"),
    [
        ("", 0),
        ("   \n\t ", 0),
        ("Hello, world!", 4),  # Hello , world !
        ("don't stop_words 3.14", 7),  # don ' t stop_words 3 . 14
        ("naïve café", 2),
        ("日本語のテキスト", 8),  # each CJK character
        ("GPT日本", 3),  # a Latin run, then two CJK characters
        ("한국어 text", 4),
        ("😀😀 ok", 3),  # each emoji
        ("a\u00a0b\u3000c", 3),  # Unicode spaces separate
        ("**bold**", 5),
        ("```\n# code\n```", 8),  # length counts code too
    ],
)
def test_length_proxy(text: str, length: int) -> None:
    assert text_features([text], ("length",))["length"].tolist() == [length]


def test_missing_texts_have_no_features() -> None:
    features = text_features([None, "a", None])
    assert {name: features[name][1] for name in DEFAULT_FEATURES} == {
        "length": 1,
        "headers": 0,
        "lists": 0,
        "bold": 0,
    }
    for name in DEFAULT_FEATURES:
        assert np.isnan(features[name][[0, 2]]).all()
    empty = text_features([])
    assert all(len(v) == 0 for v in empty.values())


CJK = r"\p{Han}\p{Hiragana}\p{Katakana}\p{Hangul}"
# The length proxy as one regex: its tokens are the matches.
TOKENS = rf"[{CJK}]|(?:[^\P{{L}}{CJK}]|[^\P{{N}}{CJK}]|_)+|[^\s\v\p{{Z}}]"


def test_length_proxy_agrees_with_its_regex_on_random_unicode() -> None:
    rng = random.Random(7)
    alphabet = [*"ab_1Z \t\n\v\f\r.,#*-'", *"éïß日カひ한😀٣Ⅻ〇𝔘\U00020000\u0301"]
    alphabet += ["\u00a0", "\u3000", "\u2028", "\x00"]
    texts: list[str | None] = [
        "".join(rng.choices(alphabet, k=rng.randint(0, 30))) for _ in range(3000)
    ]
    texts[5] = None
    expected = pc.count_substring_regex(pa.array(texts), TOKENS).to_numpy(zero_copy_only=False)
    got = text_features(texts, ("length",))["length"]
    np.testing.assert_array_equal(got, expected)


def test_arrow_arrays_and_lists_agree() -> None:
    texts = [MARKDOWN, None, "", "日本 **x**", "- a\n- b"] * 3
    from_list = text_features(texts)
    for array in (
        pa.array(texts),
        pa.array(texts, pa.large_string()),
        pa.chunked_array([texts[:4], texts[4:]]),
        pa.array(["pad", *texts])[1:],  # a slice: offsets do not start at 0
    ):
        got = text_features(array)
        for name in DEFAULT_FEATURES:
            np.testing.assert_array_equal(got[name], from_list[name], err_msg=name)
    with pytest.raises(TypeError, match="texts must be strings"):
        text_features(pa.array([1, 2]))
    with pytest.raises(ValueError, match="no text feature named tone"):
        text_features(texts, ("length", "tone"))


def test_long_texts_are_counted_across_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    import eigenjury.reply_features as rf

    texts = ["word " * 50, "x", "", "日本" * 30, "y z"]
    whole = text_features(texts, ("length",))["length"]
    monkeypatch.setattr(rf, "_CHUNK_BYTES", 16)  # one text larger than a chunk, and many small
    np.testing.assert_array_equal(text_features(texts, ("length",))["length"], whole)
    assert whole.tolist() == [50, 1, 0, 60, 2]


def test_kaggle_turns_are_joined() -> None:
    texts = pa.array(
        ['["Hello **there**", "second turn"]', "[not json", '["a", 1]', '{"a": 1}', None, "plain"]
    )
    assert joined_turns(texts).to_pylist() == [
        "Hello **there**\n\nsecond turn",
        "[not json",
        '["a", 1]',  # not a list of strings: plain text
        '{"a": 1}',
        None,
        "plain",
    ]
    listed = pa.array([["one", "two"], None, []], pa.list_(pa.string()))
    assert joined_turns(listed).to_pylist() == ["one\n\ntwo", None, ""]
    assert joined_turns(pa.array(["plain"])).to_pylist() == ["plain"]
    features = text_features(joined_turns(texts), ("length", "bold"))
    assert features["length"][0] == 8 and features["bold"][0] == 1
