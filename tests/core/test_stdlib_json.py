"""The standard library's C encoder as the fast path of installs without orjson.

``loopwatch.core._fastjson.stdlib_json`` writes plain values with :mod:`json`'s C encoder
when the ``fast`` extra (orjson) is not installed. Its bytes must be the pure path's UTF-8
on every value it accepts, and it must refuse (``None``) every value it cannot write so.
These tests need no orjson: they are what a plain ``pip install loopwatch`` runs.
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import loopwatch.core
from loopwatch import UNDEFINED, LoopGuard
from loopwatch.core import _fastjson, fingerprint
from loopwatch.core.fingerprint import digest, digest_details_and_text, stable_stringify_pure
from loopwatch.core.jsstr import WS_CHARS, js_trim

stdlib_json = _fastjson.stdlib_json
ALL_CODE_POINTS = "".join(chr(c) for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF)


@contextmanager
def fast_json(backend: Any) -> Iterator[None]:
    """Fingerprint through ``backend`` (``None``: the pure path) for the duration."""
    saved = fingerprint._fast_json
    fingerprint._fast_json = backend
    try:
        yield
    finally:
        fingerprint._fast_json = saved


def pure_bytes(value: object) -> bytes | None:
    try:
        return stable_stringify_pure(value).encode("utf-8")
    except (TypeError, UnicodeEncodeError):
        return None


def test_the_encoder_passes_its_self_check() -> None:
    assert _fastjson.STDLIB_AVAILABLE
    assert stdlib_json(_fastjson._PROBE) == _fastjson._expected_probe()


def test_every_code_point_is_quoted_alike() -> None:
    expected = stable_stringify_pure(ALL_CODE_POINTS).encode("utf-8")
    assert stdlib_json(ALL_CODE_POINTS) == expected
    assert stdlib_json([ALL_CODE_POINTS]) == b"[" + expected + b"]"


def test_every_key_below_the_surrogates_sorts_and_quotes_alike() -> None:
    keys = {chr(c): c for c in range(0xD7FF, -1, -1)}  # inserted in reverse order
    assert stdlib_json(keys) == stable_stringify_pure(keys).encode("utf-8")


@pytest.mark.parametrize(
    "value",
    [
        1.0,  # JavaScript writes 1: floats are the pure path's
        {"a": [0.5]},
        (1, 2),
        {"\ud83d": 1},  # a key past the surrogates: UTF-16 order is not code-point order
        "\ud800",  # a lone surrogate
        ["\ud83d\ude00"],  # a pair the pure path joins
        10**5000,  # past int.__repr__'s limit: the pure path writes it in pieces
        {"a": 10**5000},
        UNDEFINED,
        b"\x00",
    ],
    ids=lambda value: type(value).__name__,
)
def test_what_it_cannot_write_alike_is_refused(value: object) -> None:
    assert stdlib_json(value) is None


def test_big_ints_within_reprs_limit_are_written_as_their_digits() -> None:
    for n in (2**53 + 1, 2**64, -(2**100), 10**4299):
        assert stdlib_json([n]) == stable_stringify_pure([n]).encode()


def test_a_shared_branch_is_left_to_the_pure_path_and_a_cycle_never_loops() -> None:
    leaf: list[object] = ["x"]
    assert stdlib_json({"a": leaf, "b": leaf}) == b'{"a":["x"],"b":["x"]}'  # leaves: alike
    branch: list[object] = [leaf]
    assert stdlib_json([branch, branch]) is None
    cycle: list[object] = []
    cycle.append([cycle])
    assert stdlib_json(cycle) is None


def test_without_orjson_the_fingerprint_uses_the_standard_library(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "orjson", None)  # import orjson now raises ImportError
    loaded = {}
    for name, path in (("_fastjson", _fastjson.__file__), ("fingerprint", fingerprint.__file__)):
        spec = importlib.util.spec_from_file_location(f"loopwatch.core.{name}", path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        monkeypatch.setitem(sys.modules, f"loopwatch.core.{name}", module)
        monkeypatch.setattr(loopwatch.core, name, module)  # what `from loopwatch.core import` reads
        spec.loader.exec_module(module)
        loaded[name] = module
    assert loaded["_fastjson"].AVAILABLE is False
    assert loaded["_fastjson"].STDLIB_AVAILABLE is True
    assert loaded["fingerprint"]._fast_json is loaded["_fastjson"].stdlib_json


# --- property tests ---------------------------------------------------------------------------

CHARS = st.one_of(
    st.characters(),
    st.integers(0xD800, 0xDFFF).map(chr),
    st.integers(0, 0x20).map(chr),
    st.sampled_from(["\x7f", "\u2028", "\u2029", "\ufeff", "\uffff", "😀", '"', "\\", "/"]),
)
TEXT = st.lists(CHARS, max_size=12).map("".join)
PLAIN_TEXT = st.text(st.characters(exclude_categories=["Cs"]), max_size=12)
PLAIN_KEYS = st.text(st.characters(max_codepoint=0xD7FF), max_size=8)
PLAIN_LEAVES = st.one_of(
    PLAIN_TEXT, st.integers(), st.integers(-(2**200), 2**200), st.booleans(), st.none()
)
PLAIN = st.recursive(
    PLAIN_LEAVES,
    lambda kids: st.one_of(st.lists(kids, max_size=5), st.dictionaries(PLAIN_KEYS, kids)),
    max_leaves=25,
)
ODD_LEAVES = st.one_of(
    TEXT,
    st.floats(),
    st.sampled_from([UNDEFINED, b"x", (1, "a")]),
    st.builds(pow, st.just(10), st.just(5000)),  # past int.__repr__'s limit
)
MIXED = st.recursive(
    st.one_of(PLAIN_LEAVES, ODD_LEAVES),
    lambda kids: st.one_of(
        st.lists(kids, max_size=5), st.dictionaries(st.one_of(PLAIN_KEYS, TEXT), kids)
    ),
    max_leaves=25,
)


@given(PLAIN)
def test_plain_values_are_written_as_the_pure_path_writes_them(value: object) -> None:
    assert stdlib_json(value) == stable_stringify_pure(value).encode("utf-8")


@given(MIXED)
def test_any_value_is_written_alike_or_refused(value: object) -> None:
    written = stdlib_json(value)
    if written is not None:
        assert written == pure_bytes(value)


WHITESPACE = st.lists(st.sampled_from(WS_CHARS), max_size=20).map("".join)
PADDED_TEXT = st.tuples(WHITESPACE, TEXT, WHITESPACE).map("".join)


@given(st.one_of(PLAIN, MIXED), PADDED_TEXT)
def test_details_and_text_digest_is_the_digest_of_the_object(details: object, text: str) -> None:
    """The piecewise outcome digest, fed by this encoder, is the pure digest."""
    with fast_json(None):
        try:
            expected: object = digest({"details": details, "text": js_trim(text)})
        except TypeError:
            expected = TypeError
    with fast_json(stdlib_json):
        try:
            got: object = digest_details_and_text(details, text)
        except TypeError:
            got = TypeError
    assert got == expected


CALL_ARGS = st.one_of(
    st.fixed_dictionaries({"command": st.sampled_from(["ls", "ls -la", "cat a"])}),
    st.fixed_dictionaries({"path": st.sampled_from(["/a", "/b"]), "n": st.integers(0, 2)}),
    MIXED,
)
RESULTS = st.one_of(
    st.sampled_from(["ok", "ok\n", "changed", UNDEFINED]),
    st.fixed_dictionaries(
        {"content": st.just([{"type": "text", "text": "hi\n"}]), "details": PLAIN}
    ),
    MIXED,
)
CALLS = st.lists(
    st.tuples(st.sampled_from(["read", "exec", "process"]), CALL_ARGS, RESULTS), max_size=30
)


def play(calls: list[tuple[str, Any, Any]]) -> list[object]:
    config = {"enabled": True, "warningThreshold": 2, "criticalThreshold": 4}
    guard = LoopGuard(config, clock=lambda: 1.0)
    seen: list[object] = []
    for index, (tool, args, result) in enumerate(calls):
        call_id = f"c{index}"
        decision = guard.before_call(tool, args, session_key="s", tool_call_id=call_id)
        if decision.tool_result is not None:
            result = decision.tool_result
        guard.after_call(tool, args, session_key="s", tool_call_id=call_id, result=result)
        seen.append((decision.action, decision.verdict))
    seen.append(guard.history(session_key="s"))
    return seen


@settings(max_examples=60, deadline=None)
@given(CALLS)
def test_same_verdicts_and_history_as_the_pure_path(calls: list[tuple[str, Any, Any]]) -> None:
    calls = calls * 3  # loops need repeats
    with fast_json(stdlib_json):
        through_encoder = play(calls)
    with fast_json(None):
        pure = play(calls)
    assert through_encoder == pure
