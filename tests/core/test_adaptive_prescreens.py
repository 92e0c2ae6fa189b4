"""The adaptive profile's cheap screens and memos against the plain searches they stand for.

Each screen may only say "cannot match" when the plain regular expression finds nothing, and
each memo only returns what the plain function returns: checked on generated text, and, for
the character classes, on every Unicode character (case-insensitive matching folds a few
non-ASCII characters onto ASCII letters).
"""

from __future__ import annotations

import re
import sys

from hypothesis import given, settings
from hypothesis import strategies as st

from loopwatch.detectors.adaptive.failures import _VOLATILE, mask_volatile
from loopwatch.detectors.adaptive.progress import (
    _UNCHANGED_SCAN_CHARS,
    _UNCHANGED_TEXT,
    _UNCHANGED_WORDS,
    _may_match,
    reports_unchanged,
)

#: Every Unicode character but the surrogates, in one string.
_ALL_CHARS = "".join(chr(code) for code in range(sys.maxunicode + 1) if not 0xD800 <= code < 0xE000)

# --- mask_volatile: the leading lookahead ---------------------------------------------------

_LOOKAHEAD = r"(?=[\dartp])(?:"
_PLAIN_VOLATILE = re.compile(
    _VOLATILE.pattern.removeprefix(_LOOKAHEAD).removesuffix(")"), _VOLATILE.flags
)

_VOLATILE_FRAGMENTS = (
    "2024-05-01T10:00:00Z",
    "2024-05-01 10:00:00.123+02:00",
    "10:22",
    "1:02:03,5",
    "attempt 3 of 5",
    "Retry #2",
    "TRIES 4",
    "try 1/3",
    "120ms",
    "3 seconds",
    "1.5 h",
    "pid=4242",
    "PPID: 7",
    "12",
    " ",
    "\n",
    "x",
    "é",
    "ſ",
    "K",
    "İ",
    "٣",
    "-",
    ":",
    "/",
    "of",
    "apart",
    "trap",
)


def test_the_lookahead_is_a_prefix_of_the_plain_pattern() -> None:
    assert _VOLATILE.pattern.startswith(_LOOKAHEAD)
    assert _PLAIN_VOLATILE.pattern.startswith(r"\d{4}")


def test_every_character_that_can_start_a_volatile_span_passes_the_lookahead() -> None:
    # The first character of a match is a digit or the first letter of a keyword,
    # matched case-insensitively as the pattern matches it.
    flags = _VOLATILE.flags
    lookahead = re.compile(r"[\dartp]", flags)
    starts = set(re.findall(r"\d", _ALL_CHARS, flags))
    for letter in "artp":
        starts |= set(re.findall(letter, _ALL_CHARS, flags))
    assert {char for char in starts if not lookahead.fullmatch(char)} == set()


@settings(max_examples=800)
@given(st.lists(st.sampled_from(_VOLATILE_FRAGMENTS), max_size=12).map("".join))
def test_masking_with_the_lookahead_equals_the_plain_pattern(text: str) -> None:
    assert _VOLATILE.sub("#", text) == _PLAIN_VOLATILE.sub("#", text)


@settings(max_examples=300)
@given(st.text(max_size=60))
def test_masking_with_the_lookahead_equals_the_plain_pattern_on_any_text(text: str) -> None:
    assert _VOLATILE.sub("#", text) == _PLAIN_VOLATILE.sub("#", text)


def test_mask_volatile_examples() -> None:
    assert mask_volatile("at 10:22:33 retry #2 after 3 seconds, pid=42") == ("at # # after #, #")


# --- reports_unchanged: the word screen -----------------------------------------------------

_UNCHANGED_FRAGMENTS = (
    "No changes made",
    "no changes were applied",
    "NO CHANGES WAS NEEDED",
    "file is unchanged",
    "File Unchanged",
    "content already up to date",
    "file is already identical",
    "nothing to change",
    "Nothing To Change",
    "chang",
    "already",
    "alreadY",
    "ſ",
    "İ",
    "K",
    " ",
    "\n",
    ".",
    "x",
)


def test_the_unchanged_words_fold_only_onto_their_own_upper_case() -> None:
    flags = _UNCHANGED_TEXT.flags
    for letter in set("".join(_UNCHANGED_WORDS)):
        assert set(re.findall(letter, _ALL_CHARS, flags)) == {letter, letter.upper()}


def _top_level_alternatives(pattern: str) -> list[str]:
    """The alternatives of a pattern's outermost level (``|`` outside any group)."""
    parts, depth, start = [], 0, 0
    for index, char in enumerate(pattern):
        if char == "(" and pattern[index - 1 : index] != "\\":
            depth += 1
        elif char == ")" and pattern[index - 1 : index] != "\\":
            depth -= 1
        elif char == "|" and depth == 0:
            parts.append(pattern[start:index])
            start = index + 1
    return [*parts, pattern[start:]]


def test_every_unchanged_alternative_spells_a_screen_word() -> None:
    # Each alternative, as written, holds one of the words as literal text (no group or
    # class inside the word), so each of its matches holds the word, in some case.
    body = _UNCHANGED_TEXT.pattern.removeprefix(r"\b(?:").removesuffix(r")\b")
    alternatives = _top_level_alternatives(body)
    assert len(alternatives) == 4
    for alternative in alternatives:
        assert any(word in alternative for word in _UNCHANGED_WORDS), alternative


@settings(max_examples=800)
@given(st.lists(st.sampled_from(_UNCHANGED_FRAGMENTS), max_size=10).map("".join))
def test_no_unchanged_word_no_match(text: str) -> None:
    if _UNCHANGED_TEXT.search(text) is not None:
        assert _may_match(text.lower(), _UNCHANGED_WORDS)


@settings(max_examples=300)
@given(st.text(max_size=80), st.sampled_from(_UNCHANGED_FRAGMENTS[:9]))
def test_reports_unchanged_equals_the_plain_search(prefix: str, phrase: str) -> None:
    for text in (prefix, prefix + phrase, phrase + prefix, prefix[:40] + phrase.upper()):
        plain = _UNCHANGED_TEXT.search(text[:_UNCHANGED_SCAN_CHARS]) is not None
        assert reports_unchanged(text, text) is plain
