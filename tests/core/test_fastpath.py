"""The orjson fast path gives the pure path's bytes, or steps aside (extra ``fast``).

Every test compares the fast path with the pure-Python path, which stays callable as
``stable_stringify_pure`` / ``digest_pure``: the pure path is the reference here (it is
tested against hand-written JavaScript output in ``test_fingerprint.py``). Property tests
generate values of every kind the fast path must refuse (floats, astral and surrogate keys,
lone surrogates, huge ints, subclasses, tuples, sets) mixed into plain ones, so agreement
is proven where orjson writes and where it must not.
"""

from __future__ import annotations

import collections
import contextlib
import enum
import hashlib
import importlib.util
import json
import sys
from collections.abc import Iterator
from json.encoder import encode_basestring
from typing import Any

import pytest
import test_fingerprint as tables  # the hand-written tables, beside this file
from hypothesis import currently_in_test_context, event, given, settings
from hypothesis import strategies as st

from loopwatch import UNDEFINED, LoopGuard
from loopwatch.core import _fastjson, fingerprint
from loopwatch.core.fingerprint import (
    TRIM_SCAN,
    digest,
    digest_details_and_text,
    digest_pure,
    hash_tool_call,
    stable_stringify,
    stable_stringify_pure,
)
from loopwatch.core.jsstr import WS_CHARS, js_trim
from loopwatch.core.outcomes import hash_tool_outcome

orjson = pytest.importorskip("orjson")

plain_json = _fastjson.plain_json


@contextlib.contextmanager
def pure_path() -> Iterator[None]:
    """Fingerprint on the pure path only, for the duration."""
    saved = fingerprint._fast_json
    fingerprint._fast_json = None
    try:
        yield
    finally:
        fingerprint._fast_json = saved


def outcome_of(fn: Any, *args: Any, **kwargs: Any) -> tuple[str, object]:
    """("ok", result) or ("TypeError", None): both paths must fail alike, too."""
    try:
        return "ok", fn(*args, **kwargs)
    except TypeError:
        return "TypeError", None


def assert_same(value: object) -> None:
    """Fast and pure agree on the text, the digest and the call hash, or both refuse."""
    expected = outcome_of(stable_stringify_pure, value)
    assert outcome_of(stable_stringify, value) == expected
    assert outcome_of(digest, value) == outcome_of(digest_pure, value)
    fast = outcome_of(plain_json, value)[1]
    if currently_in_test_context():
        event("served by orjson" if fast is not None else "pure path")
    if fast is not None:
        assert expected[0] == "ok"
        assert fast == str(expected[1]).encode("utf-8")


def test_fast_path_is_on_with_orjson() -> None:
    assert _fastjson.AVAILABLE
    assert fingerprint._fast_json is plain_json


# With orjson installed, test_fingerprint.py's tables of hand-written JavaScript output mostly
# run through the fast path; here they run through the pure path as well.
HANDWRITTEN = [(value, text) for _, value, text in tables.ROWS + tables.STRINGS + tables.KEYS]
HANDWRITTEN += tables.NUMBERS


@pytest.mark.parametrize(("value", "expected"), HANDWRITTEN)
def test_pure_path_matches_the_handwritten_tables(value: object, expected: str) -> None:
    assert stable_stringify_pure(value) == expected
    assert digest_pure(value) == hashlib.sha256(expected.encode("utf-8")).hexdigest()


# --- strings: the escaping rule over every code point ------------------------------------------

ALL_CODE_POINTS = "".join(chr(c) for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF)


def test_every_code_point_is_quoted_alike() -> None:
    expected = stable_stringify_pure(ALL_CODE_POINTS)
    assert expected == encode_basestring(ALL_CODE_POINTS)  # the pure path's own rule
    assert plain_json(ALL_CODE_POINTS) == expected.encode("utf-8")
    assert plain_json([ALL_CODE_POINTS]) == f"[{expected}]".encode()


def test_every_key_below_the_surrogates_sorts_and_quotes_alike() -> None:
    keys = {chr(c): c for c in range(0xD7FF, -1, -1)}  # inserted in reverse order
    assert plain_json(keys) == stable_stringify_pure(keys).encode("utf-8")


SPECIAL = ['"', "\\", "\x00", "\b", "\t", "\n", "\x0b", "\x1f", "\x7f", "\x80", "\u2028"]
SPECIAL += ["\u2029", "\ufeff", "\uffff", "é", "中", "😀", "/"]


@pytest.mark.parametrize("char", SPECIAL, ids=[f"U+{ord(c):04X}" for c in SPECIAL])
def test_escapes_do_not_depend_on_position(char: str) -> None:
    # orjson escapes in SIMD blocks: put each special character at every offset of two
    # 64-byte blocks, in ASCII and in non-ASCII surroundings.
    for filler in ("a", "ß"):
        for offset in range(130):
            s = filler * offset + char + filler * (offset % 7)
            assert plain_json(s) == stable_stringify_pure(s).encode("utf-8")


# --- what orjson must not be given ------------------------------------------------------------


class Text(str):
    pass


class Number(int):
    pass


class Level(enum.IntEnum):
    HIGH = 3


class Mode(str, enum.Enum):
    LINE = "a\nb"


def nested_lists(depth: int) -> list[object]:
    value: list[object] = []
    for _ in range(depth - 1):
        value = [value]
    return value


_shared_leafy = ["x"]
_shared_nested = [[1]]
_circular: list[object] = [1]
_circular.append(_circular)

REFUSED: list[tuple[str, object]] = [
    ("integral float", 1.0),
    ("float deep inside", {"a": [{"b": [0.5]}]}),
    ("nan", [float("nan")]),
    ("negative zero", {"x": -0.0}),
    ("tuple", (1, 2)),
    ("tuple inside", {"a": (1,)}),
    ("str subclass value", [Text("x")]),
    ("str subclass key", {Text("k"): 1}),
    ("int subclass", [Number(3)]),
    ("int enum", {"level": Level.HIGH}),
    ("str enum", [Mode.LINE]),
    ("ordered dict", collections.OrderedDict(b=1, a=2)),
    ("int key", {1: "a"}),
    ("astral key", {"😀": 1, "\ue000": 2}),
    ("private-use key", {"\ue000": 1}),
    ("lone surrogate key", {"\ud800": 1}),
    ("pair of code points key", {"\ud83d\ude00": 1, "😀": 2}),
    ("lone surrogate value", ["x\udc00"]),
    ("pair of code points value", "\ud83d\ude00"),
    ("beyond 64 bits", [2**64]),
    ("below -2**63", {"n": -(2**63) - 1}),
    ("huge int", 10**30),
    ("undefined", {"a": UNDEFINED}),
    ("bytes", [b"hi"]),
    ("set", {"s": {1, 2}}),
    ("shared nested container", [_shared_nested, _shared_nested]),
    ("circular", _circular),
    ("deeper than orjson writes", nested_lists(_fastjson.MAX_DEPTH + 1)),
]

SERVED: list[tuple[str, object]] = [
    ("flat args", {"command": "ls -la", "timeout": 30, "background": False}),
    ("nested result", {"content": [{"type": "text", "text": "é\n中"}], "details": {}}),
    ("bools are not ints", [True, False, 1, 0, None]),
    ("64-bit ints", [2**53 + 1, 2**63, 2**64 - 1, -(2**63)]),
    ("string", "plain text\twith\x7f\u2028"),
    ("astral in a value", {"emoji": "😀"}),
    ("non-ASCII BMP keys", {"é": 1, "中": 2, "z": 3, "\ud7ff": 4}),
    ("shared list of leaves", [_shared_leafy, {"again": _shared_leafy}]),
    ("as deep as orjson writes", nested_lists(_fastjson.MAX_DEPTH)),
    ("empty", [{}, [], ""]),
]


@pytest.mark.parametrize("value", [v for _, v in REFUSED], ids=[n for n, _ in REFUSED])
def test_refused_values_take_the_pure_path(value: object) -> None:
    assert plain_json(value) is None
    assert_same(value)


@pytest.mark.parametrize("value", [v for _, v in SERVED], ids=[n for n, _ in SERVED])
def test_plain_values_are_served_by_orjson(value: object) -> None:
    assert plain_json(value) is not None
    assert_same(value)


def test_why_floats_and_high_keys_are_refused() -> None:
    # orjson is not JavaScript: these are the differences the rules keep out.
    sort = orjson.OPT_SORT_KEYS
    floats = [1.0, 1e16, 1.2345678901234568e20, float("nan"), -0.0]
    assert orjson.dumps(floats) == b"[1.0,1e+16,1.2345678901234568e+20,null,-0.0]"
    assert stable_stringify_pure(floats) == '[1,10000000000000000,123456789012345680000,"NaN",0]'
    # Code-point order puts U+E000 before U+1F600; UTF-16 order (D83D DE00) the reverse.
    assert orjson.dumps({"😀": 1, "\ue000": 2}, option=sort) == '{"\ue000":2,"😀":1}'.encode()
    assert stable_stringify_pure({"😀": 1, "\ue000": 2}) == '{"😀":1,"\ue000":2}'


def test_orjson_nesting_limit_is_max_depth() -> None:
    # A canary for the constant: orjson itself writes exactly this many levels.
    orjson.dumps(nested_lists(_fastjson.MAX_DEPTH))
    with pytest.raises(orjson.JSONEncodeError):
        orjson.dumps(nested_lists(_fastjson.MAX_DEPTH + 1))


def test_a_lower_max_depth_turns_the_fast_path_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fingerprint, "MAX_DEPTH", 50)
    with pytest.raises(TypeError, match="nests deeper than 50 levels"):
        digest(nested_lists(51))
    assert stable_stringify(nested_lists(50)) == "[" * 50 + "]" * 50


def test_self_check_probe_is_the_pure_text() -> None:
    assert _fastjson._expected_probe() == stable_stringify_pure(_fastjson._PROBE).encode()
    assert plain_json(_fastjson._PROBE) == _fastjson._expected_probe()


def test_without_orjson_everything_is_pure(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "orjson", None)  # import orjson now raises ImportError
    spec = importlib.util.spec_from_file_location("_fastjson_without", _fastjson.__file__)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.AVAILABLE is False
    assert module.plain_json({"a": 1}) is None
    with pure_path():
        assert stable_stringify({"b": 1, "a": [1.0]}) == '{"a":[1],"b":1}'


# --- property tests ---------------------------------------------------------------------------

CHARS = st.one_of(
    st.characters(),  # any code point but surrogates, astral included
    st.integers(0xD800, 0xDFFF).map(chr),  # lone halves, and pairs when two meet
    st.integers(0, 0x20).map(chr),
    st.sampled_from(["\x7f", "\u2028", "\u2029", "\ufeff", "\ue000", "\uffff", "😀", '"', "\\"]),
)
TEXT = st.lists(CHARS, max_size=12).map("".join)
KEYS = st.one_of(
    TEXT,
    st.sampled_from(["a", "b", "Z", "", "é", "中", "\ue000", "\uffff", "😀", "\ud83d\ude00"]),
)
INTS = st.one_of(
    st.integers(),
    st.integers(-(2**70), 2**70),
    st.sampled_from([2**53, 2**53 + 1, -(2**53), 2**63 - 1, 2**63, -(2**63), -(2**63) - 1]),
    st.sampled_from([2**64 - 1, 2**64, 10**30]),
)
FLOATS = st.one_of(st.floats(), st.sampled_from([1.0, -0.0, 0.0, 1e21, 1e-7, 0.1, 2.0**53]))
ODD = st.sampled_from([Text("x"), Number(7), Level.HIGH, Mode.LINE, UNDEFINED, b"\x00", (1, "a")])
LEAVES = st.one_of(TEXT, INTS, FLOATS, st.booleans(), st.none(), ODD)


def containers(children: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.one_of(
        st.lists(children, max_size=5),
        st.dictionaries(KEYS, children, max_size=5),
        st.lists(children, max_size=3).map(tuple),
        st.dictionaries(st.sampled_from(["b", "a", "c"]), children, max_size=3).map(
            collections.OrderedDict
        ),
    )


# Plain values only: the fast path must serve every one of them.
PLAIN_TEXT = st.text(st.characters(exclude_categories=["Cs"]), max_size=12)
PLAIN_KEYS = st.text(st.characters(max_codepoint=0xD7FF), max_size=8)
PLAIN_LEAVES = st.one_of(
    PLAIN_TEXT,
    st.integers(-(2**63), 2**64 - 1),
    st.booleans(),
    st.none(),
)
PLAIN = st.recursive(
    PLAIN_LEAVES,
    lambda kids: st.one_of(st.lists(kids, max_size=5), st.dictionaries(PLAIN_KEYS, kids)),
    max_leaves=25,
)

# Mixed values: plain trees with odd leaves and containers among them (and plain ones, so
# that agreement is shown where orjson writes too).
VALUES = st.one_of(PLAIN, st.recursive(st.one_of(LEAVES, PLAIN), containers, max_leaves=30))


@settings(max_examples=600)
@given(VALUES)
def test_fast_and_pure_agree_on_any_value(value: object) -> None:
    assert_same(value)


@settings(max_examples=300)
@given(PLAIN)
def test_plain_values_always_take_the_fast_path(value: object) -> None:
    fast = plain_json(value)
    assert fast is not None
    assert fast == stable_stringify_pure(value).encode("utf-8")
    # ... and they round-trip as JSON, as the reference's output does.
    assert json.loads(fast) == value


@given(st.lists(PLAIN_LEAVES, min_size=1, max_size=5), FLOATS)
def test_one_float_anywhere_sends_the_value_to_the_pure_path(
    leaves: list[Any], number: float
) -> None:
    value = {"outer": [{"inner": [*leaves, number]}]}
    assert plain_json(value) is None
    assert_same(value)


# The root dicts of arguments: few items, keys of every kind (subclasses, other types,
# surrogates, astral and private-use code points), leaves and containers of every kind.
ODD_KEYS = st.sampled_from([Text("k"), 1, None, 2.5, (1,)])
SMALL_DICTS = st.one_of(
    st.dictionaries(PLAIN_KEYS, PLAIN_LEAVES, max_size=_fastjson.SMALL_DICT + 2),
    st.dictionaries(
        st.one_of(KEYS, PLAIN_KEYS, ODD_KEYS),
        st.one_of(PLAIN_LEAVES, LEAVES, PLAIN, VALUES),
        max_size=_fastjson.SMALL_DICT + 2,
    ),
)


@contextlib.contextmanager
def walk_only() -> Iterator[None]:
    """``is_plain`` without its item-by-item pass over small dicts, for the duration."""
    saved = _fastjson.SMALL_DICT
    _fastjson.SMALL_DICT = -1  # type: ignore[misc]  # (no dict is that small)
    try:
        yield
    finally:
        _fastjson.SMALL_DICT = saved  # type: ignore[misc]


@settings(max_examples=800)
@given(SMALL_DICTS)
def test_small_dicts_are_judged_as_the_walk_judges_them(value: dict[Any, Any]) -> None:
    judged = _fastjson.is_plain(value)
    with walk_only():
        assert judged is _fastjson.is_plain(value)
    if currently_in_test_context():
        event("plain" if judged else "not plain")


def test_the_small_dict_pass_covers_the_usual_arguments() -> None:
    # What the pass must accept and refuse by itself, each checked against the walk.
    cases = [
        ({"command": "ls -la"}, True),
        ({"path": "a", "recursive": True, "depth": 2, "note": None}, True),
        ({"é": 1, "中": 2, "\ud7ff": 3}, True),
        ({}, True),
        ({"": ""}, True),
        ({"\ue000": 1}, False),
        ({"😀": 1}, False),
        ({Text("k"): 1}, False),
        ({1: "a"}, False),
        ({"a": 1.0}, False),
        ({"a": Text("x")}, False),
        ({"a": ["x"], "\ue000": 1}, False),  # a key after a container member
        ({"a": ["x"], "b": {"c": 1}}, True),
        (dict.fromkeys("abcdefghijk", "x"), True),  # more than SMALL_DICT items
    ]
    for value, plain in cases:
        assert _fastjson.is_plain(value) is plain, value
        with walk_only():
            assert _fastjson.is_plain(value) is plain, value


# --- the default outcome, hashed in pieces ----------------------------------------------------

WHITESPACE = st.lists(st.sampled_from(WS_CHARS), max_size=TRIM_SCAN + 4).map("".join)
#: Text with whitespace at either end, sometimes more than the fast path looks at.
PADDED_TEXT = st.tuples(WHITESPACE, TEXT, WHITESPACE).map("".join)


def expected_outcome_digest(details: object, text: str) -> tuple[str, object]:
    return outcome_of(digest_pure, {"details": details, "text": js_trim(text)})


@settings(max_examples=500)
@given(st.one_of(PLAIN, VALUES), PADDED_TEXT)
def test_details_and_text_digest_is_the_digest_of_the_object(details: object, text: str) -> None:
    got = outcome_of(digest_details_and_text, details, text)
    assert got == expected_outcome_digest(details, text)
    event("served by orjson" if plain_json(details) is not None else "pure path")


@pytest.mark.parametrize("char", list(WS_CHARS))
def test_every_trimmed_character_is_cut_off_whole(char: str) -> None:
    details = {"status": "ok"}
    for text in (char, f"{char}x", f"x{char}", f"{char}{char}x\n{char}", char * TRIM_SCAN):
        assert digest_details_and_text(details, text) == expected_outcome_digest(details, text)[1]


def test_long_whitespace_runs_and_odd_texts_take_the_straight_way() -> None:
    details: dict[str, object] = {"n": 1}
    long_runs = (" " * (TRIM_SCAN + 1) + "x", "x" + "\t" * 40, " " * 100)
    for text in long_runs:
        assert fingerprint._trimmed_ends(text) is None  # beyond the scan: trimmed by copying
    for text in (*long_runs, "", "\ud800 ", "a\udc00"):
        assert digest_details_and_text(details, text) == expected_outcome_digest(details, text)[1]
    assert plain_json("\ud800 ") is None  # orjson refuses surrogates: the pure path serves
    with pure_path():
        assert digest_details_and_text(details, " x ") == expected_outcome_digest(details, "x")[1]


def test_the_outcome_of_a_long_text_is_hashed_without_trimming_a_copy(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The point of the piecewise hash: the tool's own string is what orjson writes."""
    written: list[object] = []
    real = fingerprint._fast_json
    assert real is not None

    def spy(value: object) -> bytes | None:
        written.append(value)
        return real(value)

    monkeypatch.setattr(fingerprint, "_fast_json", spy)
    text = "line\n" * 1000
    result = {"content": [{"type": "text", "text": text}], "details": {"status": "ok"}}
    outcome = hash_tool_outcome("read", {}, result=result)
    assert any(value is text for value in written)
    assert outcome.result_hash == expected_outcome_digest({"status": "ok"}, text)[1]


# --- end to end: same hashes and verdicts on generated call sequences ------------------------

TOOLS = st.sampled_from(["read", "exec", "process", "message", "update_plan", "Bash"])
CALL_ARGS = st.one_of(
    st.fixed_dictionaries({"path": st.sampled_from(["a.py", "b.py"])}),
    st.fixed_dictionaries({"action": st.sampled_from(["poll", "log", "send"])}),
    VALUES,
)
RESULTS = st.one_of(
    st.just(UNDEFINED),
    st.builds(
        lambda text, details: {"content": [{"type": "text", "text": text}], "details": details},
        st.one_of(st.sampled_from(["same", "other", "😀", " same\n", "\u3000"]), PADDED_TEXT),
        st.one_of(
            st.just({}),
            st.fixed_dictionaries(
                {"status": st.sampled_from(["completed", "running"]), "exitCode": INTS}
            ),
            VALUES,
        ),
    ),
    VALUES,
)
ERRORS = st.one_of(st.just(UNDEFINED), st.sampled_from(["boom", "Unknown tool: x"]), VALUES)
CALLS = st.lists(st.tuples(TOOLS, CALL_ARGS, RESULTS, ERRORS), max_size=40)


def play(guard: LoopGuard, calls: list[tuple[str, Any, Any, Any]]) -> list[object]:
    seen: list[object] = []
    for i, (tool, args, result, error) in enumerate(calls):
        decision = guard.before_call(tool, args, session_key="s", tool_call_id=f"c{i}")
        blocked = decision.tool_result is not None
        guard.after_call(
            tool,
            args,
            session_key="s",
            tool_call_id=f"c{i}",
            result=decision.tool_result if blocked else result,
            error=UNDEFINED if blocked else error,
        )
        seen.append((decision.action, decision.verdict, decision.emitted))
    seen.append([(r.tool_name, r.args_hash, r.result_hash) for r in guard.history(session_key="s")])
    return seen


@settings(max_examples=100)
@given(CALLS)
def test_same_verdicts_and_history_on_generated_call_sequences(
    calls: list[tuple[str, Any, Any, Any]],
) -> None:
    # Loops need repeats: play the sequence three times over.
    calls = calls * 3
    config = {"enabled": True, "warningThreshold": 2, "criticalThreshold": 4}
    fast = play(LoopGuard(config), calls)
    with pure_path():
        pure = play(LoopGuard(config), calls)
    assert fast == pure
    actions = {step[0] for step in fast[:-1] if isinstance(step, tuple)}
    event("a detector fired" if actions - {"allow"} else "all allowed")


@settings(max_examples=300)
@given(TOOLS, CALL_ARGS, RESULTS, ERRORS)
def test_same_call_and_outcome_hashes(tool: str, args: Any, result: Any, error: Any) -> None:
    fast = (
        outcome_of(hash_tool_call, tool, args),
        outcome_of(hash_tool_outcome, tool, args, result=result, error=error),
    )
    with pure_path():
        pure = (
            outcome_of(hash_tool_call, tool, args),
            outcome_of(hash_tool_outcome, tool, args, result=result, error=error),
        )
    assert fast == pure
