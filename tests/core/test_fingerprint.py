"""Stable stringify, JavaScript number formatting and call hashing (SPEC §3.1, §3.2, §8).

Expected canonical strings are written out by hand; expected hashes are computed here with
``hashlib`` from those hand-written strings, so a test never trusts the code under test to
produce its own expectation.
"""

from __future__ import annotations

import collections
import dataclasses
import datetime
import decimal
import enum
import fractions
import functools
import hashlib
import json
import math
import pathlib
import random
import types
import uuid
from collections.abc import Iterator, Mapping
from typing import Any, ClassVar, NamedTuple

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from example_values import decode_value
from loopwatch.core import fingerprint
from loopwatch.core._undefined import UNDEFINED
from loopwatch.core.fingerprint import (
    MAX_DEPTH,
    digest,
    hash_tool_call,
    sha256_hex,
    stable_stringify,
)
from loopwatch.core.jsnumber import format_js_number

EXAMPLES = pathlib.Path(__file__).resolve().parents[1] / "data" / "spec_examples"


def sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


# --- helper types for the §8.1 table ---------------------------------------------------------


class Point(NamedTuple):
    y: int
    x: int


LegacyPair = collections.namedtuple("LegacyPair", ["b", "a"])


@dataclasses.dataclass
class Box:
    width: int
    label: str = "box"
    area: int = dataclasses.field(init=False, default=0)
    KIND: ClassVar[str] = "not a field"


@dataclasses.dataclass
class Shelf:
    box: Box
    extras: list[object]


class Color(enum.Enum):
    RED = "red"
    ORIGIN = (0, 0)


class Level(enum.IntEnum):
    HIGH = 3


class Mode(str, enum.Enum):
    LINE = "a\nb"


class Plain:
    def __init__(self) -> None:
        self.b = 1
        self.a = [UNDEFINED, None]


class Slotted:
    __slots__ = ("x",)

    def __init__(self) -> None:
        self.x = 1


class CallableThing:
    def __call__(self) -> None:
        return None


class Empty(Exception):
    pass


class FrozenMapping(Mapping[str, object]):
    def __init__(self, data: dict[str, object]) -> None:
        self._data = data

    def __getitem__(self, key: str) -> object:
        return self._data[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)


class DuckModel:
    """Looks like a pydantic v2 model without pydantic: detection is by duck typing."""

    model_fields: ClassVar[dict[str, object]] = {"z": None, "a": None}

    def model_dump(self) -> dict[str, object]:
        return {"z": 1, "a": [datetime.date(2024, 1, 2)]}


def _function() -> None:
    return None


# --- §8.1: one row per Python type, first match wins ------------------------------------------

ROWS: list[tuple[str, object, str]] = [
    # 1-3
    ("undefined", UNDEFINED, "undefined"),
    ("none", None, "null"),
    ("true", True, "true"),
    ("false", False, "false"),
    # 4: Integral (IntEnum is Integral before it is an Enum)
    ("int", 42, "42"),
    ("negative int", -7, "-7"),
    ("zero", 0, "0"),
    ("2**53", 2**53, "9007199254740992"),
    ("big int keeps its digits", 10**30, "1000000000000000000000000000000"),
    ("int enum", Level.HIGH, "3"),
    # 5: Real → float
    ("float integral", 1.0, "1"),
    ("negative zero", -0.0, "0"),
    ("float", 0.1, "0.1"),
    ("nan", math.nan, '"NaN"'),
    ("infinity", math.inf, '"Infinity"'),
    ("minus infinity", -math.inf, '"-Infinity"'),
    ("fraction", fractions.Fraction(1, 4), "0.25"),
    ("integral fraction", fractions.Fraction(6, 2), "3"),
    # 6: str (a str Enum is a str first)
    ("str", "hello", '"hello"'),
    ("empty str", "", '""'),
    ("str enum", Mode.LINE, '"a\\nb"'),
    # 8: exceptions, without traceback
    ("exception", ValueError("boom"), '{"message":"boom","name":"ValueError"}'),
    ("key error", KeyError("k"), '{"message":"\'k\'","name":"KeyError"}'),
    ("empty exception", Empty(), '{"message":"","name":"Empty"}'),
    # 9: bytes-likes
    ("bytes", b"hi", '{"data":"aGk=","type":"Uint8Array"}'),
    ("empty bytes", b"", '{"data":"","type":"Uint8Array"}'),
    ("bytearray", bytearray(b"\x00\xff"), '{"data":"AP8=","type":"Uint8Array"}'),
    ("memoryview", memoryview(b"abc"), '{"data":"YWJj","type":"Uint8Array"}'),
    # 10: any Mapping
    ("dict", {"b": 1, "a": 2}, '{"a":2,"b":1}'),
    ("empty dict", {}, "{}"),
    ("mappingproxy", types.MappingProxyType({"b": 1, "a": 2}), '{"a":2,"b":1}'),
    ("ordered dict", collections.OrderedDict([("b", 1), ("a", 2)]), '{"a":2,"b":1}'),
    ("custom mapping", FrozenMapping({"y": [1], "x": None}), '{"x":null,"y":[1]}'),
    ("undefined value kept", {"a": UNDEFINED}, '{"a":undefined}'),
    # 11: NamedTuple
    ("namedtuple", Point(y=1, x=2), '{"x":2,"y":1}'),
    ("legacy namedtuple", LegacyPair(b="B", a="A"), '{"a":"A","b":"B"}'),
    # 12: list, tuple
    ("list", [1, "a", None, UNDEFINED], '[1,"a",null,undefined]'),
    ("tuple", (1, (2, 3)), "[1,[2,3]]"),
    ("empty list", [], "[]"),
    ("empty tuple", (), "[]"),
    # 13: sets, sorted by serialised form in UTF-16 order
    ("set of str", {"b", "c", "a"}, '["a","b","c"]'),
    ("mixed set", {1, "a", None}, '["a",1,null]'),
    ("set astral before private use", {"\ue000", "😀"}, '["😀","\ue000"]'),
    ("frozenset", frozenset({3, 1, 2}), "[1,2,3]"),
    ("set of frozensets", {frozenset({2}), frozenset({1})}, "[[1],[2]]"),
    ("empty set", set(), "[]"),
    # 14: dataclass, shallow, init=False fields included, ClassVar excluded
    ("dataclass", Box(width=3), '{"area":0,"label":"box","width":3}'),
    (
        "nested dataclass",
        Shelf(box=Box(1, "b"), extras=[Point(0, 1)]),
        '{"box":{"area":0,"label":"b","width":1},"extras":[{"x":1,"y":0}]}',
    ),
    # 15: pydantic-like, by duck typing
    ("duck-typed model", DuckModel(), '{"a":["2024-01-02"],"z":1}'),
    # 17: Enum → its value, by these same rules
    ("enum", Color.RED, '"red"'),
    ("enum with tuple value", Color.ORIGIN, "[0,0]"),
    # 18: dates and times
    ("datetime", datetime.datetime(2024, 5, 6, 7, 8, 9), '"2024-05-06T07:08:09"'),
    (
        "aware datetime",
        datetime.datetime(2024, 5, 6, 7, 8, 9, 123456, tzinfo=datetime.timezone.utc),
        '"2024-05-06T07:08:09.123456+00:00"',
    ),
    ("date", datetime.date(2024, 1, 2), '"2024-01-02"'),
    ("time", datetime.time(12, 30), '"12:30:00"'),
    # 19: str() of UUID, Decimal (not a numbers.Real), PurePath
    (
        "uuid",
        uuid.UUID("12345678-1234-5678-1234-567812345678"),
        '"12345678-1234-5678-1234-567812345678"',
    ),
    ("decimal", decimal.Decimal("1.50"), '"1.50"'),
    ("posix path", pathlib.PurePosixPath("/tmp/x"), '"/tmp/x"'),
    ("windows path", pathlib.PureWindowsPath("C:/a"), '"C:\\\\a"'),
    # 20: other callables
    ("function", _function, "null"),
    ("lambda", lambda: None, "null"),
    ("builtin", len, "null"),
    ("class", Box, "null"),
    ("bound method", Plain().__init__, "null"),
    ("partial", functools.partial(len, "x"), "null"),
    ("callable instance", CallableThing(), "null"),
    # 21: anything else
    ("object with __dict__", Plain(), '{"a":[undefined,null],"b":1}'),
    ("object with slots only", Slotted(), "{}"),
    ("bare object", object(), "{}"),
]


@pytest.mark.parametrize(("value", "expected"), [r[1:] for r in ROWS], ids=[r[0] for r in ROWS])
def test_python_value_mapping(value: object, expected: str) -> None:
    assert stable_stringify(value) == expected
    assert digest(value) == sha(expected)


def test_pydantic_model() -> None:
    pydantic = pytest.importorskip("pydantic")

    class Model(pydantic.BaseModel):  # type: ignore[name-defined,misc]
        b: int
        a: str
        when: datetime.date

    value = Model(b=1, a="x", when=datetime.date(2024, 1, 2))
    assert stable_stringify(value) == '{"a":"x","b":1,"when":"2024-01-02"}'
    assert stable_stringify(Model) == "null"  # the class is a callable, not a model


def test_attrs_instance() -> None:
    attrs = pytest.importorskip("attrs")

    @attrs.define  # slotted: vars() would give {}, so this proves the attrs path
    class Item:
        y: int
        x: list[object]

    assert stable_stringify(Item(1, [Item(2, [])])) == '{"x":[{"x":[],"y":2}],"y":1}'


def test_exception_message_is_str_of_the_exception() -> None:
    class Custom(Exception):
        def __str__(self) -> str:
            return "custom text"

    assert stable_stringify({"e": Custom("ignored")}) == (
        '{"e":{"message":"custom text","name":"Custom"}}'
    )


# --- §8.2: JavaScript number formatting -------------------------------------------------------

NUMBERS: list[tuple[float, str]] = [
    # the spec's examples
    (1.0, "1"),
    (-0.0, "0"),
    (0.0, "0"),
    (1e21, "1e+21"),
    (1e-7, "1e-7"),
    (0.000001, "0.000001"),
    (1.5e-7, "1.5e-7"),
    (123456789012345680000.0, "123456789012345680000"),
    (5e-324, "5e-324"),
    # fixed notation up to 1e21, exponent form below 1e-6
    (1e20, "100000000000000000000"),
    (1e16, "10000000000000000"),
    (9007199254740994.0, "9007199254740994"),
    (95895518247e9, "95895518247000000000"),
    (1.2e21, "1.2e+21"),
    (1.7976931348623157e308, "1.7976931348623157e+308"),
    (0.00001, "0.00001"),
    (0.0001234, "0.0001234"),
    (1.23e-18, "1.23e-18"),
    (-1e-7, "-1e-7"),
    (-4.90812e-07, "-4.90812e-7"),
    (0.1, "0.1"),
    (-1.5, "-1.5"),
    (100.0, "100"),
    (12.5, "12.5"),
    (123.456, "123.456"),
    (2.5e-5, "0.000025"),
    (5.626786590364837e-10, "5.626786590364837e-10"),
    (3.75652655694e21, "3.75652655694e+21"),
    (-132123250467072.0, "-132123250467072"),
]


@pytest.mark.parametrize(("value", "expected"), NUMBERS, ids=[t for _, t in NUMBERS])
def test_format_js_number(value: float, expected: str) -> None:
    assert format_js_number(value) == expected
    assert stable_stringify(value) == expected
    assert stable_stringify([value]) == f"[{expected}]"


def test_format_js_number_non_finite_is_unquoted() -> None:
    # Error texts use these bare; only stable_stringify quotes them.
    assert format_js_number(math.nan) == "NaN"
    assert format_js_number(math.inf) == "Infinity"
    assert format_js_number(-math.inf) == "-Infinity"


@given(st.floats(allow_nan=False, allow_infinity=False))
def test_format_js_number_round_trips_and_has_js_shape(x: float) -> None:
    text = format_js_number(x)
    assert float(text) == x
    mantissa, _, exponent = text.partition("e")
    if exponent:
        assert abs(x) >= 1e21 or abs(x) < 1e-6
        assert exponent[0] in "+-"
        assert not mantissa.endswith("0")
    else:
        assert x == 0 or 1e-6 <= abs(x) < 1e21
        assert not text.endswith(".0")
        if "." in text:
            assert not text.endswith("0")
    assert not text.startswith("-0") or text.startswith("-0.")


# --- §8.3: strings --------------------------------------------------------------------------

STRINGS: list[tuple[str, str, str]] = [
    ("lone high surrogate", "\ud800", '"\\ud800"'),
    ("lone low surrogate", "x\udc00y", '"x\\udc00y"'),
    ("lowercase hex", "\udbff", '"\\udbff"'),
    ("pair of code points", "\ud83d\ude00", '"😀"'),
    ("astral character", "😀", '"😀"'),
    ("reversed pair", "\ude00\ud83d", '"\\ude00\\ud83d"'),
    ("high, then pair", "\ud800\ud800\udc00", '"\\ud800𐀀"'),
    ("pair, then low", "\ud800\udc00\udc00", '"𐀀\\udc00"'),
    ("short escapes", "\b\f\n\r\t", '"\\b\\f\\n\\r\\t"'),
    ("quote and backslash", '"\\', '"\\"\\\\"'),
    ("nul", "\x00", '"\\u0000"'),
    ("control lowercase hex", "\x1a\x1f\x0b", '"\\u001a\\u001f\\u000b"'),
    ("delete is raw", "\x7f", '"\x7f"'),
    ("line separators are raw", "\u2028\u2029", '"\u2028\u2029"'),
    ("bom is raw", "\ufeff", '"\ufeff"'),
    ("slash is raw", "a/b", '"a/b"'),
    ("non-ascii raw", "é中ß", '"é中ß"'),
    ("next line is raw", "\x85", '"\x85"'),
]


@pytest.mark.parametrize(
    ("value", "expected"), [s[1:] for s in STRINGS], ids=[s[0] for s in STRINGS]
)
def test_strings(value: str, expected: str) -> None:
    assert stable_stringify(value) == expected
    assert stable_stringify([value]) == f"[{expected}]"
    assert stable_stringify({"k": value}) == f'{{"k":{expected}}}'
    assert digest({"k": value}) == sha(f'{{"k":{expected}}}')
    assert digest(value) == sha(expected)


def js_quote(s: str) -> str:
    """An independent oracle: ECMAScript QuoteJSONString over UTF-16 code units."""
    raw = s.encode("utf-16-le", "surrogatepass")
    units = [int.from_bytes(raw[i : i + 2], "little") for i in range(0, len(raw), 2)]
    short = {0x08: "\\b", 0x09: "\\t", 0x0A: "\\n", 0x0C: "\\f", 0x0D: "\\r"}
    short.update({0x22: '\\"', 0x5C: "\\\\"})
    out = ['"']
    i = 0
    while i < len(units):
        unit = units[i]
        if 0xD800 <= unit <= 0xDBFF and i + 1 < len(units) and 0xDC00 <= units[i + 1] <= 0xDFFF:
            out.append(chr(0x10000 + ((unit - 0xD800) << 10) + (units[i + 1] - 0xDC00)))
            i += 2
            continue
        if unit in short:
            out.append(short[unit])
        elif unit < 0x20 or 0xD800 <= unit <= 0xDFFF:
            out.append(f"\\u{unit:04x}")
        else:
            out.append(chr(unit))
        i += 1
    out.append('"')
    return "".join(out)


ANY_CHAR = st.one_of(
    st.characters(),
    st.integers(0xD800, 0xDFFF).map(chr),
    st.integers(0, 0x20).map(chr),
    st.sampled_from(["😀", "\ue000", '"', "\\", "\u2028", "\x7f"]),
)


@given(st.lists(ANY_CHAR, max_size=30).map("".join))
def test_strings_match_json_stringify_oracle(s: str) -> None:
    expected = js_quote(s)
    assert stable_stringify(s) == expected
    assert stable_stringify([s, {s: s}]) == f"[{expected},{{{expected}:{expected}}}]"
    assert digest([s]) == sha(f"[{expected}]")


# --- §8.4: mapping keys ---------------------------------------------------------------------

KEYS: list[tuple[str, dict[Any, Any], str]] = [
    ("int key", {1: "a"}, '{"1":"a"}'),
    ("true key", {True: 1}, '{"true":1}'),
    ("false key", {False: 1}, '{"false":1}'),
    ("none key", {None: 1}, '{"null":1}'),
    ("undefined key", {UNDEFINED: 1}, '{"undefined":1}'),
    ("integral float key", {2.0: 1}, '{"2":1}'),
    ("float key", {1.5: 1}, '{"1.5":1}'),
    ("tiny float key", {1e-7: 1}, '{"1e-7":1}'),
    ("nan key", {math.nan: 1}, '{"NaN":1}'),
    ("inf keys", {math.inf: 1, -math.inf: 2}, '{"-Infinity":2,"Infinity":1}'),
    ("tuple key", {(1, 2): 1}, '{"(1, 2)":1}'),
    ("mixed keys sorted as strings", {10: "a", 2: "b", "1": "c"}, '{"1":"c","10":"a","2":"b"}'),
    ("decimal key", {decimal.Decimal("1.0"): 1}, '{"1.0":1}'),
    (
        "UTF-16 order",
        {"\ue000": 1, "😀": 2, "a": 3, "\uffff": 4, "Z": 5},
        '{"Z":5,"a":3,"😀":2,"\ue000":1,"\uffff":4}',
    ),
    ("escaped keys", {"a\nb": 1, '"': 2}, '{"\\"":2,"a\\nb":1}'),
    ("lone surrogate key", {"\ud800": 1}, '{"\\ud800":1}'),
    ("numeric-looking keys sort as strings", {"10": 1, "9": 2, "aa": 3}, '{"10":1,"9":2,"aa":3}'),
]


@pytest.mark.parametrize(("value", "expected"), [k[1:] for k in KEYS], ids=[k[0] for k in KEYS])
def test_mapping_keys(value: dict[Any, Any], expected: str) -> None:
    assert stable_stringify(value) == expected
    assert digest(value) == sha(expected)


COLLISIONS: list[tuple[str, dict[Any, Any]]] = [
    ("int and str", {1: "a", "1": "b"}),
    ("true and str", {True: 1, "true": 2}),
    ("none and str", {None: 1, "null": 2}),
    ("undefined and str", {UNDEFINED: 1, "undefined": 2}),
    ("float and str", {2.5: 1, "2.5": 2}),
    ("nan and str", {math.nan: 1, "NaN": 2}),
    ("pair of code points and astral", {"\ud83d\ude00": 1, "😀": 2}),
]


@pytest.mark.parametrize("value", [c[1] for c in COLLISIONS], ids=[c[0] for c in COLLISIONS])
def test_colliding_keys_are_unserialisable(value: dict[Any, Any]) -> None:
    with pytest.raises(TypeError, match="both serialise as"):
        stable_stringify(value)
    with pytest.raises(TypeError):
        digest({"nested": [value]})
    with pytest.raises(TypeError):
        hash_tool_call("t", value)


# --- circular vs sibling --------------------------------------------------------------------


def test_self_containing_list() -> None:
    value: list[object] = [1]
    value.append(value)
    assert stable_stringify(value) == '[1,"[Circular]"]'


def test_self_containing_dict() -> None:
    value: dict[str, object] = {"a": 1}
    value["self"] = value
    assert stable_stringify(value) == '{"a":1,"self":"[Circular]"}'


def test_cycle_through_nested_containers() -> None:
    outer: dict[str, object] = {}
    outer["inner"] = {"list": [outer], "n": 1}
    assert stable_stringify(outer) == '{"inner":{"list":["[Circular]"],"n":1}}'


def test_object_cycle() -> None:
    node = Plain()
    node.b = node  # type: ignore[assignment]
    assert stable_stringify(node) == '{"a":[undefined,null],"b":"[Circular]"}'


class Holder:
    """Hashable by identity, with a ``__dict__``: a set member that can point back up."""

    def __init__(self, parent: object) -> None:
        self.parent = parent


def test_cycle_through_a_set_member() -> None:
    outer: list[object] = []
    outer.append({Holder(outer)})
    assert stable_stringify(outer) == '[[{"parent":"[Circular]"}]]'


def test_siblings_are_not_circular() -> None:
    shared = [1]
    assert stable_stringify([shared, shared]) == "[[1],[1]]"
    assert stable_stringify({"a": shared, "b": shared}) == '{"a":[1],"b":[1]}'
    # Leaving a container takes it off the path again.
    assert stable_stringify([[shared], shared, {"x": [shared]}]) == '[[[1]],[1],{"x":[[1]]}]'
    box = Box(2)
    assert stable_stringify((box, box)) == (
        '[{"area":0,"label":"box","width":2},{"area":0,"label":"box","width":2}]'
    )


# --- nesting --------------------------------------------------------------------------------


def nested_lists(depth: int) -> list[object]:
    value: list[object] = []
    for _ in range(depth - 1):
        value = [value]
    return value


def nested_dicts(depth: int) -> dict[str, object]:
    value: dict[str, object] = {}
    for _ in range(depth - 1):
        value = {"a": value}
    return value


def test_ten_thousand_nested_lists() -> None:
    expected = "[" * 10_000 + "]" * 10_000
    assert stable_stringify(nested_lists(10_000)) == expected
    assert hash_tool_call("t", nested_lists(10_000)) == "t:" + sha(expected)


def test_ten_thousand_nested_dicts() -> None:
    expected = '{"a":' * 9_999 + "{}" + "}" * 9_999
    assert stable_stringify(nested_dicts(10_000)) == expected
    assert digest(nested_dicts(10_000)) == sha(expected)


def test_deep_mixed_nesting() -> None:
    value: object = "x"
    for i in range(12_000):
        value = (value,) if i % 3 == 0 else {"k": value} if i % 3 == 1 else [value]
    text = stable_stringify(value)
    assert text.count('"x"') == 1
    assert len(text) == 3 + 12_000 * 2 + 4_000 * len('"k":')


def test_nesting_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    assert MAX_DEPTH >= 10_000  # SPEC §8.5: at least 10,000 levels must work
    # The boundary itself, on a small limit: the walk reads the module constant.
    monkeypatch.setattr(fingerprint, "MAX_DEPTH", 50)
    assert stable_stringify(nested_lists(50)) == "[" * 50 + "]" * 50
    assert stable_stringify({"a": nested_lists(49)}) == '{"a":' + "[" * 49 + "]" * 49 + "}"
    with pytest.raises(TypeError, match="nests deeper than 50 levels"):
        stable_stringify(nested_lists(51))
    with pytest.raises(TypeError, match="nests deeper"):
        digest(nested_dicts(51))
    with pytest.raises(TypeError, match="nests deeper"):
        hash_tool_call("t", [{1, 2}, nested_lists(50)])


# --- unserialisable values ------------------------------------------------------------------


class BadStr(Exception):
    def __str__(self) -> str:
        raise RuntimeError("no text")


class BadDate(datetime.date):
    def isoformat(self) -> str:
        raise ValueError("no iso")


class BadModel:
    model_fields: ClassVar[dict[str, object]] = {}

    def model_dump(self) -> dict[str, object]:
        raise RuntimeError("dump failed")


class BadMapping(FrozenMapping):
    def __getitem__(self, key: str) -> object:
        raise KeyError(key)


def _released_view() -> memoryview:
    view = memoryview(b"abc")
    view.release()
    return view


UNSERIALISABLE: list[tuple[str, object]] = [
    ("failing __str__", BadStr()),
    ("failing isoformat", BadDate(2024, 1, 1)),
    ("failing model_dump", BadModel()),
    ("failing __getitem__", BadMapping({"a": 1})),
    ("released memoryview", _released_view()),
]


@pytest.mark.parametrize(
    "value", [u[1] for u in UNSERIALISABLE], ids=[u[0] for u in UNSERIALISABLE]
)
def test_failing_conversions_raise_type_error(value: object) -> None:
    with pytest.raises(TypeError, match="cannot serialise"):
        stable_stringify(value)
    with pytest.raises(TypeError, match="cannot serialise"):
        stable_stringify({"deep": [[value]]})
    with pytest.raises(TypeError):
        hash_tool_call("t", [value])


def test_int_beyond_the_str_digit_limit_is_hashed_by_its_digits() -> None:
    # Python's 4,300-digit limit is worked around by a subquadratic formatter, up to
    # MAX_INT_DIGITS (tests/hostile/test_hostile_values.py covers the bound).
    assert stable_stringify([10**5000]) == "[1" + "0" * 5000 + "]"


# --- hashing --------------------------------------------------------------------------------


def test_sha256_hex() -> None:
    assert sha256_hex("") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
    assert sha256_hex("é😀") == hashlib.sha256("é😀".encode()).hexdigest()


HASHES: list[tuple[str, object, str]] = [
    ("read", {"path": "a.txt", "limit": 10}, '{"limit":10,"path":"a.txt"}'),
    ("t", "x", '"x"'),
    ("t", 123, "123"),
    ("t", None, "null"),
    ("t", UNDEFINED, "undefined"),
    ("t", [1.0, -0.0], "[1,0]"),
    (" Read ", {}, "{}"),  # the name is used verbatim
]


@pytest.mark.parametrize(("tool", "params", "canonical"), HASHES)
def test_hash_tool_call(tool: str, params: object, canonical: str) -> None:
    assert hash_tool_call(tool, params) == f"{tool}:{sha(canonical)}"
    assert digest(params) == sha(canonical)


def test_hash_tool_call_update_plan_normaliser() -> None:
    plan_a = {"plan": [{"step": "write tests", "status": "pending"}], "explanation": "go"}
    plan_b = {"explanation": "now", "plan": [{"status": "pending", "step": "add tests"}]}
    reduced = '{"hasExplanation":true,"planLength":1,"statuses":["pending"],"stepPresence":[true]}'
    on = {"update_plan"}
    assert hash_tool_call("update_plan", plan_a, normalizers=on) == f"update_plan:{sha(reduced)}"
    assert hash_tool_call("update_plan", plan_a, normalizers=on) == hash_tool_call(
        "update_plan", plan_b, normalizers=on
    )
    # Off by default, and only the exact tool name is affected.
    assert hash_tool_call("update_plan", plan_a) != hash_tool_call("update_plan", plan_b)
    assert hash_tool_call("Update_Plan", plan_a, normalizers=on) == hash_tool_call(
        "Update_Plan", plan_a
    )
    # A single name given as a plain string works too.
    assert hash_tool_call("update_plan", plan_a, normalizers="update_plan") == (
        f"update_plan:{sha(reduced)}"
    )


def test_hash_tool_call_rejects_unknown_normalisers() -> None:
    with pytest.raises(ValueError, match="plan_update"):
        hash_tool_call("read", {}, normalizers=["plan_update"])


# --- hypothesis properties ------------------------------------------------------------------

JSON_SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**53), max_value=2**53)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text()
)
JSON_VALUES = st.recursive(
    JSON_SCALARS,
    lambda children: st.lists(children) | st.dictionaries(st.text(), children),
    max_leaves=40,
)


def reorder(value: object, rng: random.Random) -> object:
    """The same value with the keys of every mapping inserted in a shuffled order."""
    if isinstance(value, dict):
        items = list(value.items())
        rng.shuffle(items)
        return {k: reorder(v, rng) for k, v in items}
    if isinstance(value, list):
        return [reorder(v, rng) for v in value]
    return value


def json_equal(a: object, b: object) -> bool:
    """Equality of JSON values where 1 == 1.0 and 0 == -0.0, as for JavaScript numbers."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return float(a) == float(b)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(json_equal(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(json_equal(a[k], b[k]) for k in a)
    return type(a) is type(b) and a == b


@given(JSON_VALUES, st.randoms(use_true_random=False))
def test_key_order_never_changes_the_string(value: object, rng: random.Random) -> None:
    shuffled = reorder(value, rng)
    assert stable_stringify(shuffled) == stable_stringify(value)
    assert hash_tool_call("t", shuffled) == hash_tool_call("t", value)


@given(JSON_VALUES)
def test_json_values_round_trip(value: object) -> None:
    text = stable_stringify(value)
    assert json_equal(json.loads(text), value)
    assert digest(value) == sha(text)


BMP_TEXT = st.text(st.characters(max_codepoint=0xD7FF))
PLAIN_JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53), 2**53) | BMP_TEXT,
    lambda children: st.lists(children) | st.dictionaries(BMP_TEXT, children),
    max_leaves=40,
)


@given(PLAIN_JSON)
def test_agrees_with_json_dumps_where_python_and_javascript_agree(value: object) -> None:
    # Without floats and without characters where code-point and UTF-16 order differ,
    # JavaScript's output is json.dumps with sorted keys and no whitespace.
    expected = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    assert stable_stringify(value) == expected


@settings(max_examples=50)
@given(JSON_VALUES)
def test_hash_tool_call_shape(value: object) -> None:
    result = hash_tool_call("my.tool", value)
    name, _, hex_digest = result.partition(":")
    assert name == "my.tool"
    assert len(hex_digest) == 64
    assert hex_digest == hex_digest.lower()
    int(hex_digest, 16)


@given(st.sets(st.text() | st.integers(-100, 100), max_size=10))
def test_set_order_is_the_utf16_order_of_serialised_items(value: set[object]) -> None:
    items = sorted((stable_stringify(v) for v in value), key=lambda s: s.encode("utf-16-be"))
    assert stable_stringify(value) == "[" + ",".join(items) + "]"
    assert stable_stringify(frozenset(value)) == stable_stringify(value)


# --- reference examples ---------------------------------------------------------------------


def _example_steps(category: str) -> list[Any]:
    params = []
    for trace_path in sorted(EXAMPLES.glob(f"rnd-{category}-*.json")):
        trace = json.loads(trace_path.read_text(encoding="utf-8"))
        expected_path = trace_path.with_name(trace_path.stem + ".expected.jsonl")
        # split("\n"), not splitlines(): the lines hold raw U+2028, U+0085 and friends.
        lines = expected_path.read_text(encoding="utf-8").split("\n")
        expected = [json.loads(line) for line in lines if line.strip()]
        for index, step in enumerate(trace["steps"]):
            if step.get("op") == category:
                params.append(pytest.param(step, expected[index], id=f"{trace_path.stem}#{index}"))
    return params


STRINGIFY_STEPS = _example_steps("stringify")
HASH_STEPS = _example_steps("hash")


def test_reference_examples_are_present() -> None:
    assert len(STRINGIFY_STEPS) >= 100
    assert len(HASH_STEPS) >= 50


@pytest.mark.parametrize(("step", "expected"), STRINGIFY_STEPS)
def test_reference_stringify_steps(step: dict[str, Any], expected: dict[str, Any]) -> None:
    assert expected["op"] == "stringify"
    text = stable_stringify(decode_value(step["value"]))
    assert text == expected["serialized"]
    assert sha(text) == expected["sha256"]
    assert digest(decode_value(step["value"])) == expected["sha256"]


@pytest.mark.parametrize(("step", "expected"), HASH_STEPS)
def test_reference_args_hashes(step: dict[str, Any], expected: dict[str, Any]) -> None:
    # Only argsHash: resultHash belongs to the outcome module's tests.
    assert expected["op"] == "hash"
    params = decode_value(step["args"]) if "args" in step else UNDEFINED
    assert hash_tool_call(step["tool"], params) == expected["argsHash"]
