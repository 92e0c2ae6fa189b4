"""The guard's cache of normalised tool names (``loopwatch.guard._memo.ToolNames``)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from loopwatch.core.naming import normalize_tool_name
from loopwatch.guard._keys import safe_tool_name
from loopwatch.guard._memo import TOOL_NAME_CACHE_SIZE, ToolNames


class Named(str):
    """A str subclass: looked up through the cache, never remembered by it."""


@given(st.lists(st.text(max_size=12), max_size=40))
def test_lookups_and_calls_give_the_normalised_name(names: list[str]) -> None:
    cache = ToolNames(safe_tool_name)
    for name in names:
        assert cache[name] == normalize_tool_name(name)
        assert cache(name) == normalize_tool_name(name)
    assert set(cache) <= set(names)


def test_only_plain_str_names_are_remembered() -> None:
    cache = ToolNames(safe_tool_name)
    assert cache(Named(" Read ")) == "read"
    assert cache(42) == safe_tool_name(42)
    assert len(cache) == 0
    assert cache[" Exec "] == "exec"
    assert dict(cache) == {" Exec ": "exec"}


def test_a_full_cache_starts_again() -> None:
    cache = ToolNames(safe_tool_name)
    for index in range(TOOL_NAME_CACHE_SIZE):
        cache[f"tool{index}"]
    assert len(cache) == TOOL_NAME_CACHE_SIZE
    cache["one more"]
    assert dict(cache) == {"one more": "one more"}
