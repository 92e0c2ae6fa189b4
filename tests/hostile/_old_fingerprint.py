"""The pure-Python stable stringify as it was before shared containers were memoised.

A frozen copy of ``loopwatch/core/fingerprint.py`` at commit 5f56b93 (the walk only; the fast
path and hashing helpers are left out), kept as the oracle of the byte-identity property
tests in ``test_hostile_values.py``: the memoised walk must write exactly what this one
writes, on values small enough for its exponential re-expansion.
"""

from __future__ import annotations

import base64
import dataclasses
import datetime
import decimal
import enum
import numbers
import re
import uuid
from collections.abc import Callable, Iterator, Mapping
from itertools import chain, repeat
from json.encoder import encode_basestring
from pathlib import PurePath
from typing import Any, Final

from loopwatch.core import _fastjson
from loopwatch.core._undefined import UNDEFINED
from loopwatch.core.jsstr import utf16_key

#: Deepest nesting :func:`stable_stringify` accepts; deeper values are unserialisable
#: (SPEC §8.5 asks for at least 10,000). The iterative walk could go deeper, but a fixed
#: bound makes "too deep" one defined, tested outcome (a ``TypeError``, so ``LoopGuard``
#: fails open) instead of whatever memory pressure does, and the reference itself runs
#: out of stack long before this.
MAX_DEPTH: Final = 100_000

_INF: Final = float("inf")
#: Integral floats up to 2**53 print as their integer digits in JavaScript; the exact
#: ``int`` conversion is much cheaper than the general digit algorithm.
_SAFE_INT: Final = float(2**53)

_SURROGATE: Final = re.compile("[\ud800-\udfff]")
_SURROGATE_PAIR: Final = re.compile("[\ud800-\udbff][\udc00-\udfff]")

_CIRCULAR: Final = '"[Circular]"'
#: Heads of array items: none for the first, a comma for every other. ``repeat`` is
#: stateless, so one shared instance serves every frame.
_FIRST: Final = ("",)
_COMMAS: Final = repeat(",")

# Kinds of container returned by _classify.
_ARRAY: Final = 1
_OBJECT: Final = 2
_SET: Final = 3
_VALUE: Final = 4  # serialise another value in place of this one (an Enum's value)


#: The orjson fast path (extra ``fast``), or ``None`` when orjson is missing or failed its
#: self-check. Module state on purpose: tests and benchmarks set it to ``None`` to compare
#: against the pure path in the same process. It is used only while :data:`MAX_DEPTH`
#: admits everything orjson writes, so both paths refuse the same values.
_fast_json: Callable[[object], bytes | None] | None = (
    _fastjson.plain_json if _fastjson.AVAILABLE else None
)


class _UnserializableError(TypeError):
    """Raised inside the walk; surfaced to callers as a plain ``TypeError``."""


# --- numbers -------------------------------------------------------------------------------


def format_js_number(x: float) -> str:
    """Format a float as ECMAScript ``Number::toString`` does (SPEC §8.2).

    Python's ``repr`` picks the same shortest round-trip digits as ECMAScript but places
    the decimal point and exponent differently (``1e+16`` vs ``10000000000000000``,
    ``1e-05`` vs ``0.00001``), so only the digits are taken from it.

    Args:
        x: Any float. Non-finite values give the unquoted words ``NaN``, ``Infinity``
            and ``-Infinity`` (error texts use them as they are; :func:`stable_stringify`
            quotes them).

    Returns:
        The JavaScript text of the number: ``1.0`` → ``1``, ``-0.0`` → ``0``,
        ``1e21`` → ``1e+21``, ``1e-7`` → ``1e-7``.
    """
    x = float(x)
    if x != x:
        return "NaN"
    if x == _INF:
        return "Infinity"
    if x == -_INF:
        return "-Infinity"
    if x.is_integer() and -_SAFE_INT <= x <= _SAFE_INT:
        return int.__repr__(int(x))  # also -0.0 → "0"
    return _format_finite(x)


def _format_finite(x: float) -> str:
    """Number::toString for a finite float that is not a small integer (SPEC §8.2)."""
    text = float.__repr__(x)
    if "e" not in text:
        # repr uses fixed notation for 1e-4 <= |x| < 1e16, where ECMAScript does too, with
        # the same shortest digits; only an integral value's ".0" differs.
        return text[:-2] if text.endswith(".0") else text
    text = text.lstrip("-")
    mantissa, _, exp_text = text.partition("e")
    int_part, _, frac_part = mantissa.partition(".")
    raw = int_part + frac_part
    digits = raw.lstrip("0")
    # The value is 0.<digits> × 10**n; each leading zero dropped moves the point left.
    n = len(int_part) + int(exp_text) - (len(raw) - len(digits))
    digits = digits.rstrip("0")
    k = len(digits)
    if k <= n <= 21:
        body = digits + "0" * (n - k)
    elif 0 < n <= 21:
        body = digits[:n] + "." + digits[n:]
    elif -6 < n <= 0:
        body = "0." + "0" * -n + digits
    else:
        mant = digits[0] + ("." + digits[1:] if k > 1 else "")
        body = f"{mant}e{'+' if n - 1 >= 0 else '-'}{abs(n - 1)}"
    return "-" + body if x < 0 else body


def _float_text(x: float) -> str:
    """A float as a stable-stringify token: JavaScript digits, non-finite values quoted."""
    if x != x:
        return '"NaN"'
    if x == _INF:
        return '"Infinity"'
    if x == -_INF:
        return '"-Infinity"'
    if x.is_integer() and -_SAFE_INT <= x <= _SAFE_INT:
        return int.__repr__(int(x))
    return _format_finite(x)


# --- strings -------------------------------------------------------------------------------


def _join_pair(match: re.Match[str]) -> str:
    pair = match.group()
    return chr(0x10000 + ((ord(pair[0]) - 0xD800) << 10) + (ord(pair[1]) - 0xDC00))


def _escape_lone(match: re.Match[str]) -> str:
    return f"\\u{ord(match.group()):04x}"


def _quote(s: str) -> str:
    """JSON-quote a string exactly as JavaScript's ``JSON.stringify`` does (SPEC §8.3).

    ``json``'s own encoder already matches JavaScript for every string without surrogate
    code points (same short escapes, lowercase ``\\u00xx``, everything else raw); only
    surrogates need work: a pair is the astral character JavaScript would see, a lone one
    is escaped (raw, it would also make the later UTF-8 encoding fail).
    """
    if s.isascii() or _SURROGATE.search(s) is None:
        return encode_basestring(s)
    return _SURROGATE.sub(_escape_lone, encode_basestring(_SURROGATE_PAIR.sub(_join_pair, s)))


def _key_text(key: object) -> str:
    """Convert a mapping key to the string JavaScript would use as property name (§8.4)."""
    if isinstance(key, str):
        return key
    if key is True:
        return "true"
    if key is False:
        return "false"
    if key is None:
        return "null"
    if key is UNDEFINED:
        return "undefined"
    if isinstance(key, float):
        return format_js_number(key)
    return str(key)


# --- containers ----------------------------------------------------------------------------


def _object_items(mapping: Mapping[Any, Any], exact: bool) -> Iterator[tuple[str, object]]:
    """The ``(head, value)`` pairs of an object in UTF-16 key order.

    ``head`` is the JSON key and colon, preceded by a comma for every entry after the
    first, so the walk emits ``head + value`` without tracking position. Outside ``exact``
    mode, keys with surrogate code points are quoted as they are (see :func:`_stringify`).
    """
    try:
        joined = "".join(mapping)  # raises TypeError unless every key is a str
    except TypeError:
        return _object_items_converted(mapping)
    if joined.isascii():
        # ASCII only: code-point order is UTF-16 order, and distinct keys stay distinct.
        # U+FFFF cannot occur in the keys and is left raw by the encoder, so one encoder
        # call quotes every key and a split yields the heads.
        keys: list[str] = sorted(mapping)
        quoted = encode_basestring("\uffff".join(keys))
        heads = (quoted.replace("\uffff", '":\uffff,"') + ":").split("\uffff")
        return zip(heads, map(mapping.__getitem__, keys), strict=False)
    if exact and _SURROGATE.search(joined) is not None:
        # "\ud83d\ude00" and "😀" are different Python keys but one JavaScript key.
        return _object_items_converted(mapping)
    keys = sorted(mapping, key=utf16_key)
    heads = [f",{e}:" for e in map(encode_basestring, keys)]
    if heads:
        heads[0] = heads[0][1:]
    return zip(heads, map(mapping.__getitem__, keys), strict=False)


def _object_items_converted(mapping: Mapping[Any, Any]) -> Iterator[tuple[str, object]]:
    """Slow path of :func:`_object_items`: convert keys (§8.4) and refuse collisions."""
    entries: dict[bytes, tuple[object, str, object]] = {}
    for key, value in mapping.items():
        text = _key_text(key)
        sort_key = utf16_key(text)
        clash = entries.get(sort_key)
        if clash is not None:
            raise _UnserializableError(
                f"mapping keys {clash[0]!r} and {key!r} both serialise as the key "
                f"{_quote(text)}; the result would depend on key order"
            )
        entries[sort_key] = (key, text, value)
    heads: list[str] = []
    values: list[object] = []
    for sort_key in sorted(entries):
        _key, text, value = entries[sort_key]
        heads.append(f",{_quote(text)}:")
        values.append(value)
    if heads:
        heads[0] = heads[0][1:]
    return zip(heads, values, strict=True)


def _attrs_fields(value: object) -> dict[str, object]:
    try:
        import attrs
    except ImportError:  # an attrs class without the attrs package: read the fields directly
        return {a.name: getattr(value, a.name) for a in type(value).__attrs_attrs__}  # type: ignore[attr-defined]
    return attrs.asdict(value, recurse=False)  # type: ignore[arg-type]


def _classify(value: object) -> str | tuple[int, Any]:
    """Apply the mapping of SPEC §8.1 (first match wins) to a value off the fast path.

    Returns:
        The finished text of a leaf, or ``(kind, payload)``: an array to walk, a mapping to
        walk as an object, a set, or another value to serialise in place of this one.
    """
    if value is UNDEFINED:
        return "undefined"
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, numbers.Integral):
        return int.__repr__(int(value))
    if isinstance(value, numbers.Real):
        return _float_text(float(value))
    if isinstance(value, str):
        return _quote(value)
    # Row 7 (circular) is checked by the walk before any container is entered.
    if isinstance(value, BaseException):
        # No traceback (the reference's `stack`): hashes must not depend on line numbers.
        return f'{{"message":{_quote(str(value))},"name":{_quote(type(value).__name__)}}}'
    if isinstance(value, (bytes, bytearray, memoryview)):
        data = base64.b64encode(bytes(value)).decode("ascii")
        return f'{{"data":"{data}","type":"Uint8Array"}}'
    if isinstance(value, Mapping):
        return (_OBJECT, value)
    if isinstance(value, tuple) and hasattr(value, "_asdict"):
        return (_OBJECT, value._asdict())
    if isinstance(value, (list, tuple)):
        return (_ARRAY, value)
    if isinstance(value, (set, frozenset)):
        return (_SET, value)
    cls = type(value)
    if hasattr(cls, "__dataclass_fields__"):
        # Shallow, unlike dataclasses.asdict: nested values go through these same rules.
        return (_OBJECT, {f.name: getattr(value, f.name) for f in dataclasses.fields(value)})  # type: ignore[arg-type]
    if callable(getattr(cls, "model_dump", None)) and hasattr(cls, "model_fields"):
        # pydantic v2, by duck typing: importing pydantic here would cost every user.
        return (_OBJECT, value.model_dump())  # type: ignore[attr-defined]
    if hasattr(cls, "__attrs_attrs__"):
        return (_OBJECT, _attrs_fields(value))
    if isinstance(value, enum.Enum):
        return (_VALUE, value.value)
    if isinstance(value, (datetime.date, datetime.time)):
        return _quote(value.isoformat())
    if isinstance(value, (uuid.UUID, decimal.Decimal, PurePath)):
        return _quote(str(value))
    if callable(value):
        return "null"
    try:
        attributes = vars(value)
    except TypeError:  # no __dict__
        return "{}"
    return (_OBJECT, attributes)


def _stringify(value: object, exact: bool) -> str:
    """The walk behind :func:`stable_stringify`; raises whatever a conversion raises.

    With ``exact`` false (the first, fast pass) plain strings and keys are quoted by
    ``json``'s C encoder without looking for surrogates: that is exact for every string
    without surrogate code points, and any surrogate it lets through stays raw in the
    result, where the caller's UTF-8 encoding finds it and asks for an exact pass. So the
    common case pays no per-string scan; the price is that a value holding surrogates is
    walked twice, and its conversions (``model_dump``, ``__str__``…) run twice.

    An explicit stack of frames replaces recursion. A frame is
    ``(items, closer, container)``: ``items`` yields ``(head, value)`` pairs, and
    ``container`` is kept alive (and its ``id`` in ``on_path``) while it is being walked.
    A set's frame is ``[items, None, container, mark, texts, started]``: set items must be
    serialised one by one (from ``out[mark:]``) before they can be sorted.
    """
    quote = _quote if exact else encode_basestring
    out: list[str] = []
    append = out.append
    stack: list[Any] = []
    on_path: set[int] = set()
    head = ""
    current: Any = value
    while True:
        # --- serialise `current`, preceded by `head` -------------------------------------
        cls = type(current)
        kind = 0
        payload: Any = None
        if cls is str:
            append(head + quote(current))
        elif cls is dict:
            kind, payload = _OBJECT, current
        elif cls is int:
            append(head + int.__repr__(current))
        elif cls is list or cls is tuple:
            kind, payload = _ARRAY, current
        elif cls is float:
            append(head + _float_text(current))
        elif cls is bool:
            append(head + ("true" if current else "false"))
        elif current is None:
            append(head + "null")
        else:
            classified = _classify(current)
            if isinstance(classified, str):
                append(head + classified)
            else:
                kind, payload = classified
                if kind == _VALUE:
                    current = payload
                    continue
        if kind:
            ident = id(current)
            if ident in on_path:
                append(head + _CIRCULAR)
            elif len(stack) >= MAX_DEPTH:
                raise _UnserializableError(
                    f"value nests deeper than {MAX_DEPTH} levels, the most loopwatch hashes"
                )
            elif kind == _OBJECT:
                append(head + "{")
                stack.append((_object_items(payload, exact), "}", current))
                on_path.add(ident)
            elif kind == _ARRAY:
                append(head + "[")
                stack.append((zip(chain(_FIRST, _COMMAS), payload, strict=False), "]", current))
                on_path.add(ident)
            else:  # _SET
                if head:
                    append(head)
                members = zip(repeat(""), list(payload), strict=False)
                stack.append([members, None, current, len(out), [], False])
                on_path.add(ident)
        # --- move on to the next value, closing finished containers ------------------------
        while stack:
            frame = stack[-1]
            closer = frame[1]
            if closer is None:  # a set
                mark = frame[3]
                if frame[5]:
                    frame[4].append("".join(out[mark:]))
                    del out[mark:]
                pair = next(frame[0], None)
                if pair is None:
                    stack.pop()
                    on_path.discard(id(frame[2]))
                    texts: list[str] = frame[4]
                    texts.sort(key=utf16_key)
                    append("[" + ",".join(texts) + "]")
                    continue
                frame[5] = True
                head, current = pair
                break
            # Scalars are emitted right here: most values are leaves, and this loop is the
            # cheapest place to handle them.
            for head, current in frame[0]:
                cls = type(current)
                if cls is str:
                    append(head + quote(current))
                elif cls is int:
                    append(head + int.__repr__(current))
                elif cls is float:
                    append(head + _float_text(current))
                elif cls is bool:
                    append(head + ("true" if current else "false"))
                elif current is None:
                    append(head + "null")
                else:
                    break
            else:
                stack.pop()
                append(closer)
                on_path.discard(id(frame[2]))
                continue
            break
        else:
            return "".join(out)


def _run(value: object, exact: bool) -> str:
    """Run the walk, turning every failure into the documented ``TypeError``."""
    try:
        return _stringify(value, exact)
    except _UnserializableError as exc:
        raise TypeError(str(exc)) from None
    except Exception as exc:
        raise TypeError(f"cannot serialise value for hashing: {_describe(exc)}") from exc


def _describe(exc: BaseException) -> str:
    try:
        return f"{type(exc).__name__}: {exc}"
    except Exception:
        return type(exc).__name__


def old_stable_stringify(value: object) -> str:
    """``stable_stringify_pure`` as it was."""
    if type(value) is str:
        return _quote(value)
    text = _run(value, exact=False)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return _run(value, exact=True)
    return text
