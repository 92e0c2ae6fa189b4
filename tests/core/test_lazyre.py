"""Lazily compiled patterns behave as ``re.compile``'s, and every one of them compiles."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from hypothesis import given
from hypothesis import strategies as st

from loopwatch.core.lazyre import LazyPattern, lazy_compile
from loopwatch.detectors.adaptive import failures, progress, shell_text


def _lazy_patterns(value: object) -> Iterator[LazyPattern]:
    if isinstance(value, LazyPattern):
        yield value
    elif isinstance(value, (tuple, list, frozenset, set)):
        for item in value:
            yield from _lazy_patterns(item)
    elif isinstance(value, dict):
        for item in value.values():
            yield from _lazy_patterns(item)


def test_every_lazy_pattern_of_the_adaptive_profile_compiles() -> None:
    found = [
        p
        for m in (failures, progress, shell_text)
        for v in vars(m).values()
        for p in _lazy_patterns(v)
    ]
    assert len(found) >= 40  # the module-level patterns, tuples and dicts included
    for pattern in found:
        assert pattern.compiled() == re.compile(pattern.pattern, pattern.flags)


def test_after_the_first_use_the_methods_are_the_compiled_patterns() -> None:
    lazy = lazy_compile(r"a+(b)", re.IGNORECASE)
    assert "search" not in vars(lazy)
    assert lazy.search("xAAb").group(1) == "b"  # type: ignore[union-attr]
    compiled = re.compile(r"a+(b)", re.IGNORECASE)
    assert vars(lazy)["search"] == compiled.search
    assert vars(lazy)["sub"] == compiled.sub
    assert lazy.sub == compiled.sub


def test_a_bad_pattern_fails_at_its_first_use() -> None:
    lazy = lazy_compile(r"(")
    with pytest.raises(re.error):
        lazy.search("x")


@given(text=st.text(alphabet="ab \n-x0", max_size=20))
def test_every_method_answers_as_re_does(text: str) -> None:
    source, flags = r"(a|b)\d?", re.MULTILINE
    lazy, compiled = lazy_compile(source, flags), re.compile(source, flags)

    def spans(match: re.Match[str] | None) -> object:
        return None if match is None else match.span()

    assert spans(lazy.search(text)) == spans(compiled.search(text))
    assert spans(lazy.match(text)) == spans(compiled.match(text))
    assert spans(lazy.fullmatch(text)) == spans(compiled.fullmatch(text))
    assert lazy.sub("<>", text) == compiled.sub("<>", text)
    assert lazy.subn("<>", text) == compiled.subn("<>", text)
    assert [m.span() for m in lazy.finditer(text)] == [m.span() for m in compiled.finditer(text)]
    assert lazy.findall(text) == compiled.findall(text)
    assert lazy.split(text) == compiled.split(text)
