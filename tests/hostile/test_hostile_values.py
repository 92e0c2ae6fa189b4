"""Hostile call-time values against hashing (issue 17 items 2 and 10).

Promises (SECURITY.md): hashing does bounded work per call (shared containers are written
once; graphs too big to walk are unserialisable, so the guard fails open), it hashes every
int Python holds up to a documented size, and its error texts are bounded. The memoised walk
writes the same bytes as the walk before it (``_old_fingerprint``), cycles included.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import sys
from typing import Any

import pytest
from _old_fingerprint import old_stable_stringify
from hypothesis import given, settings
from hypothesis import strategies as st

from loopwatch import LoopGuard
from loopwatch.core import fingerprint as fp
from loopwatch.core import jsnumber
from loopwatch.core.fingerprint import (
    digest,
    hash_tool_call,
    stable_stringify,
    stable_stringify_pure,
)
from loopwatch.core.outcomes import hash_tool_outcome, strip_send_ids

LEAVES = (
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(st.characters(min_codepoint=0, max_codepoint=0x10FFFF), max_size=6)
)


def trees(max_leaves: int = 12) -> st.SearchStrategy[Any]:
    return st.recursive(
        LEAVES,
        lambda inner: (
            st.lists(inner, max_size=4)
            | st.dictionaries(st.text(max_size=4), inner, max_size=4)
            | st.lists(inner, max_size=3).map(tuple)
            | st.frozensets(st.integers(-5, 5) | st.text(max_size=2), max_size=3)
        ),
        max_leaves=max_leaves,
    )


def containers(value: Any) -> list[Any]:
    """Every list and dict in ``value`` (each once)."""
    found: list[Any] = []
    seen: set[int] = set()
    stack = [value]
    while stack:
        node = stack.pop()
        if isinstance(node, (list, dict, tuple)) and id(node) not in seen:
            seen.add(id(node))
            if not isinstance(node, tuple):
                found.append(node)
            stack.extend(node.values() if isinstance(node, dict) else node)
    return found


@st.composite
def shared_graphs(draw: st.DrawFn, cycles: bool) -> Any:
    """A tree, then a few references from one of its containers to another (a DAG, or with
    ``cycles`` any graph: a reference to an ancestor closes a cycle)."""
    root = draw(st.lists(trees(), min_size=1, max_size=3))
    for n in range(draw(st.integers(0, 4))):
        nodes = containers(root)
        source = draw(st.sampled_from(nodes))
        target = draw(st.sampled_from(nodes))
        closes_cycle = source is target or any(source is c for c in containers(target))
        if closes_cycle and not cycles:
            continue  # target reaches source: the reference would make a cycle
        if isinstance(source, list):
            source.append(target)
        else:
            source[f"ref{n}"] = target
    return root


def expand(value: Any) -> Any:
    """The same value with every shared container copied (no two occurrences alike)."""
    if isinstance(value, dict):
        return {k: expand(v) for k, v in value.items()}
    if isinstance(value, list):
        return [expand(v) for v in value]
    if isinstance(value, tuple):
        return tuple(expand(v) for v in value)
    return value


@settings(max_examples=120, deadline=None)
@given(shared_graphs(cycles=True))
def test_the_memoised_walk_writes_what_the_old_walk_wrote(value: Any) -> None:
    expected = old_stable_stringify(value)
    assert stable_stringify_pure(value) == expected
    assert stable_stringify(value) == expected


@settings(max_examples=120, deadline=None)
@given(shared_graphs(cycles=False))
def test_shared_subobjects_hash_like_their_expansion(value: Any) -> None:
    copy = expand(value)
    assert stable_stringify(value) == stable_stringify(copy)
    assert digest(value) == digest(copy)
    assert hash_tool_call("t", value) == hash_tool_call("t", copy)
    assert strip_send_ids(value) == strip_send_ids(copy)


def test_cycles_through_shared_containers_keep_their_path_dependent_text() -> None:
    a: dict[str, Any] = {}
    b: dict[str, Any] = {"a": a}
    a["b"] = b
    value = [a, b, [a, b]]
    assert stable_stringify(value) == old_stable_stringify(value)
    assert '"[Circular]"' in stable_stringify(value)


def doubling(k: int) -> list[Any]:
    a: list[Any] = []
    for _ in range(k):
        a = [a, a]
    return a


def test_a_doubling_nest_is_written_from_its_shared_parts() -> None:
    text = stable_stringify(doubling(18))
    assert len(text) == 5 * 2**18 - 3 and text.startswith("[[[[") and text.endswith("]]]]")


def test_a_doubling_nest_too_big_to_write_is_unserialisable() -> None:
    with pytest.raises(TypeError, match="shared containers"):
        digest(doubling(60))  # 2**60 copies: the old walk never returned


@dataclasses.dataclass
class Counted:
    """A value whose conversion counts how often it ran."""

    name: str
    runs: list[int] = dataclasses.field(default_factory=list)

    def __getattribute__(self, attr: str) -> Any:
        if attr == "name":
            object.__getattribute__(self, "runs").append(1)
        return object.__getattribute__(self, attr)


def test_a_shared_object_is_converted_once() -> None:
    leaf = Counted("x")
    value: Any = [leaf]
    for _ in range(12):
        value = [value, value]
    stable_stringify(value)
    assert len(leaf.runs) == 1  # the old walk converted it 4,096 times


class Holder:
    def __init__(self, thing: object) -> None:
        self.thing = thing


@pytest.mark.parametrize("module", [os, sys, logging], ids=lambda m: m.__name__)
def test_a_module_reached_through_vars_is_unserialisable(module: object) -> None:
    with pytest.raises(TypeError, match="the most loopwatch hashes"):
        hash_tool_call("t", Holder(module))


def test_the_guard_fails_open_on_a_module_graph(caplog: pytest.LogCaptureFixture) -> None:
    guard = LoopGuard({"enabled": True})
    with caplog.at_level(logging.DEBUG, logger="loopwatch"):
        for _ in range(3):
            decision = guard.before_call("t", {"client": Holder(os)}, session_key="s")
            assert decision.action == "allow"
            guard.after_call("t", {"client": Holder(os)}, session_key="s", result=Holder(sys))
    assert all(len(r.getMessage()) < 2_000 for r in caplog.records)


def test_a_big_member_count_is_refused_alike_on_both_paths() -> None:
    value = [[0] * 1000 for _ in range(fp.MAX_NODES // 1000 + 1)]
    with pytest.raises(TypeError, match="members"):
        stable_stringify(value)
    with pytest.raises(TypeError, match="members"):
        stable_stringify_pure(value)
    assert stable_stringify([[0] * 1000 for _ in range(10)]).count("0") == 10_000


@pytest.mark.parametrize("digits", [4_301, 5_000, 50_000, jsnumber.MAX_INT_DIGITS])
def test_ints_beyond_pythons_str_limit_are_hashed_by_their_digits(digits: int) -> None:
    n = 10**digits - 7
    expected = "9" * (digits - 1) + "3"
    assert stable_stringify(n) == expected
    assert stable_stringify([{"n": -n}]) == f'[{{"n":-{expected}}}]'
    assert hash_tool_call("t", {"n": n}) == hash_tool_call("t", {"n": n})
    assert hash_tool_call("t", {"n": n}) != hash_tool_call("t", {"n": n + 1})


def test_ints_longer_than_the_documented_bound_are_unserialisable() -> None:
    with pytest.raises(TypeError, match="digits"):
        stable_stringify([10 ** (jsnumber.MAX_INT_DIGITS + 10)])


def test_colliding_keys_give_a_bounded_message() -> None:
    key = "k" * 10_000_000
    with pytest.raises(TypeError) as caught:
        stable_stringify({key: 1, Key(key): 2})
    assert len(str(caught.value)) < 1_000


class Key:
    """A non-str key whose text is a huge string (collides with it)."""

    def __init__(self, text: str) -> None:
        self.text = text

    def __str__(self) -> str:
        return self.text

    def __repr__(self) -> str:
        return f"Key({self.text!r})"


class Loud:
    """A value whose conversion fails with a huge message."""

    def isoformat(self) -> str:  # pragma: no cover - not a date
        return ""

    @property
    def __dict__(self) -> dict[str, Any]:  # type: ignore[override]
        raise ValueError("x" * 10_000_000)


def test_failing_conversions_give_a_bounded_message() -> None:
    with pytest.raises(TypeError) as caught:
        digest([Loud()])
    assert len(str(caught.value)) < 1_000
    with pytest.raises(TypeError) as caught:
        hash_tool_outcome("t", None, error=LoudError("y" * 10_000_000 + "x"))
    assert len(str(caught.value)) < 1_000


class LoudError(Exception):
    def __str__(self) -> str:
        raise RuntimeError(self.args[0])


def test_an_unknown_tool_name_is_bounded_and_still_distinct() -> None:
    huge = "a1b2c3" * 700_000
    first = hash_tool_outcome("shell", None, error=f"Unknown tool: {huge}").unknown_tool_name
    other = hash_tool_outcome("shell", None, error=f"Unknown tool: {huge}x").unknown_tool_name
    assert first is not None and other is not None
    assert len(first) <= 128 and first.startswith(huge[:64]) and first != other
    short = hash_tool_outcome("shell", None, error="tool 'jq' not found").unknown_tool_name
    assert short == "jq"  # ordinary names are kept as the reference extracts them


def test_thirty_huge_unknown_names_keep_the_history_small() -> None:
    guard = LoopGuard({"enabled": True})
    huge = "z" * 4_000_000
    actions = []
    for i in range(30):
        actions.append(guard.before_call("shell", {"n": i}, session_key="s").action)
        guard.after_call("shell", {"n": i}, session_key="s", error=f"Unknown tool: {huge}")
    assert actions[10:] == ["block"] * 20
    names = {r.unknown_tool_name for r in guard.history(session_key="s")}
    assert len(names) == 1 and all(n is not None and len(n) <= 128 for n in names)
