"""The optional orjson fast path of stable stringify (extra ``fast``).

orjson writes sorted-key compact JSON in C, many times faster than the pure-Python walk, but
it is not JavaScript: it prints the float ``1.0`` as ``1.0`` (JavaScript: ``1``) and NaN as
``null``, sorts keys by code point where the reference sorts by UTF-16 code unit, and gives
Enums, dataclasses, datetimes and subclasses of ``str``, ``int`` or ``dict`` meanings of its
own. So it only serialises values on which its bytes are provably those of the pure path,
the UTF-8 encoding of ``stable_stringify_pure(value)``:

- every container is an exact ``dict`` or ``list``, none occurs twice (a tree: shared and
  circular containers are the pure path's business), and they nest at most
  :data:`MAX_DEPTH` levels;
- every dict key is an exact ``str`` whose code points are all below U+D800: for such keys
  code-point order *is* UTF-16 order, and distinct keys stay distinct;
- every other value is an exact ``str``, ``int``, ``bool`` or ``None``. No floats at all.

Why each leaf comes out the same: both quote strings as ``JSON.stringify`` does for every
code point that is not a surrogate (``\\"``, ``\\\\``, ``\\b \\f \\n \\r \\t``, other C0
controls as lowercase ``\\u00xx``, everything else raw, DEL and U+2028/U+2029 included);
both write an int's decimal digits; ``true``, ``false``, ``null``.
``tests/core/test_fastpath.py`` checks the string rule over every code point and the whole
rule with property tests.

Two cases are left for orjson to refuse, and it does, with ``orjson.JSONEncodeError`` (a
``TypeError``); the pure path then serves the value: an int outside 64 bits, and a string
with a surrogate code point (a lone one, or a pair the pure path joins).

Tuples are left to the pure path although orjson writes them as arrays too: orjson 3.13
does not bound their nesting as it does for lists (5,000 nested tuples corrupted the heap
in our tests), and JSON-decoded arguments hold none.

As a guard against a future orjson that quotes or sorts differently, the fast path checks
itself on a probe when first loaded and stays off if the probe differs.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, Final

_NONE_TYPE: Final = type(None)
_LEAVES: Final = frozenset({str, int, bool, _NONE_TYPE})
_ALLOWED: Final = _LEAVES | {dict, list}
_STR: Final = frozenset({str})
#: The deepest nesting orjson writes (it refuses deeper values).
MAX_DEPTH: Final = 254
#: Most members of all containers together (``loopwatch.core.fingerprint.MAX_NODES``, defined
#: here so both paths refuse the same values: a bigger tree is left to the pure path,
#: which refuses it).
MAX_NODES: Final = 1_000_000
#: Dicts of at most this many items are checked item by item (see :func:`is_plain`).
SMALL_DICT: Final = 8
#: Keys made of code points below the surrogates sort alike by code point and by UTF-16.
_FIRST_SURROGATE: Final = "\ud800"


def is_plain(value: object) -> bool:
    """Whether ``value`` is a tree of the types on which orjson matches the pure path.

    The walk goes level by level, so it knows the depth without tracking it per node, and
    only containers are visited one by one: the members of each are checked at C speed by
    ``issuperset`` over their exact types, so a list of ten thousand strings is one call.
    Only containers holding containers are remembered: a cycle or a shared branch runs
    through them, while a shared list of strings is written alike by both paths.
    """
    # The root, on its own: most arguments are one flat dict, done in one pass when small,
    # else in three C calls.
    root: Any = value
    cls = type(root)
    members: Iterable[object]
    if cls is dict:
        if len(root) <= SMALL_DICT:
            # A small dict, in one pass over its items: each key as _plain_keys checks
            # it, each member a leaf (then plain, as below: a few members are within
            # MAX_NODES). For a few items this costs a third of the C calls, which pay a
            # fixed price each; a member that is not a leaf leaves the check to them.
            try:
                for key, member in root.items():
                    if type(key) is not str or not (key.isascii() or max(key) < _FIRST_SURROGATE):
                        return False
                    if type(member) not in _LEAVES:
                        break
                else:
                    return True
            except RuntimeError:  # changed by another thread meanwhile: the C calls decide
                pass
        if not _plain_keys(root):
            return False
        members = root.values()
    elif cls is list:
        members = root
    else:
        return cls in _LEAVES
    nodes = len(root)
    if nodes > MAX_NODES:
        return False
    if _LEAVES.issuperset(map(type, members)):
        return True
    if not _ALLOWED.issuperset(map(type, members)):
        return False
    level: list[Any] = list(members)
    parents: set[int] = {id(root)}
    depth = 2
    while level:
        below: list[Any] = []
        for node in level:
            cls = type(node)
            if cls is dict:
                if not _plain_keys(node):
                    return False
                members = node.values()
            elif cls is list:
                members = node
            else:
                continue  # a leaf: the level above checked its type
            nodes += len(node)
            if nodes > MAX_NODES:
                return False
            if _LEAVES.issuperset(map(type, members)):
                continue
            if (
                depth == MAX_DEPTH
                or id(node) in parents
                or not _ALLOWED.issuperset(map(type, members))
            ):
                return False
            parents.add(id(node))
            below += members
        level = below
        depth += 1
    return True


def _plain_keys(node: dict[Any, Any]) -> bool:
    """Every key an exact ``str`` below the surrogates (code-point order = UTF-16 order)."""
    if not _STR.issuperset(map(type, node)):
        return False
    keys = "".join(node)
    return keys.isascii() or max(keys) < _FIRST_SURROGATE


def _load_orjson() -> tuple[Callable[..., bytes] | None, int]:
    try:
        import orjson
    except ImportError:
        return None, 0
    return orjson.dumps, orjson.OPT_SORT_KEYS


_dumps, _SORT_KEYS = _load_orjson()


def plain_json(value: object) -> bytes | None:
    """orjson's sorted-key JSON of ``value`` when it is exactly the pure path's UTF-8.

    Returns:
        ``stable_stringify_pure(value).encode("utf-8")``, computed by orjson, or ``None``
        when the value is not plain (see the module docstring) or orjson refuses it: the
        caller then takes the pure path.
    """
    if _dumps is None or (type(value) is not str and not is_plain(value)):
        return None
    try:
        return _dumps(value, None, _SORT_KEYS)
    except TypeError:  # orjson.JSONEncodeError: an int beyond 64 bits, or a surrogate
        return None


# --- the standard library's encoder, without orjson ------------------------------------------


def _load_stdlib_encoder() -> Callable[[object, int], Iterable[str]] | None:
    """The C encoder of :mod:`json` for compact sorted-key text, or ``None`` without it.

    Built once, as :meth:`json.JSONEncoder.iterencode` builds it on every call: no circular
    check (:func:`is_plain` admits trees only), ``ensure_ascii`` off (text raw, as
    ``JSON.stringify`` writes it), keys sorted by code point.
    """
    from json import encoder

    make: Any = getattr(encoder, "c_make_encoder", None)  # (not in the type stubs)
    if make is None:  # an interpreter without the _json accelerator: the pure path
        return None

    def refuse(value: object) -> object:
        raise TypeError(f"not plain JSON: {type(value).__name__}")

    # (markers, default, encoder, indent, key and item separators, sort_keys, skipkeys,
    # allow_nan), as JSONEncoder.iterencode passes them
    built: Callable[[object, int], Iterable[str]] = make(
        None, refuse, encoder.encode_basestring, None, ":", ",", True, False, True
    )
    return built


_stdlib_encode = _load_stdlib_encoder()


def stdlib_json(value: object) -> bytes | None:
    """:func:`plain_json` written by the standard library's C encoder, for installs
    without orjson (the ``fast`` extra).

    On a plain value it writes what orjson writes, and so the pure path's UTF-8: strings
    escaped as ``JSON.stringify`` escapes them (``\\"``, ``\\\\``, the five short escapes,
    other C0 controls as lowercase ``\\u00xx``, everything else raw), an int's decimal
    digits (``int.__repr__``), ``true``, ``false``, ``null``, keys in code-point order.
    Two cases it cannot write as the pure path does fail here and go the pure way: an int
    of more than 4,300 digits (``ValueError``) and a surrogate code point, which the UTF-8
    encoding refuses (``UnicodeEncodeError``).
    """
    encode = _stdlib_encode
    if encode is None or (type(value) is not str and not is_plain(value)):
        return None
    try:
        return "".join(encode(value, 0)).encode("utf-8")
    except (TypeError, ValueError):
        return None


# --- the self-check ---------------------------------------------------------------------------

#: Every ASCII character, Latin-1, the separators JavaScript leaves raw, BMP and astral text.
_PROBE_TEXT: Final = "".join(map(chr, range(0x100))) + "\u2028\u2029\ufeff\uffff中😀/"
_PROBE: Final = {
    "b": [_PROBE_TEXT, 2**64 - 1, -(2**63), 0, True, False, None, []],
    "a": {"é": 1, "z": 2, "中": 3, "Z": 4, "": 5, "\x7f": 6, "a\nb": [[], {}]},
}


def _expected_probe() -> bytes:
    """The probe as the pure path writes it, by hand: ``json`` quotes as JavaScript does here."""
    from json.encoder import encode_basestring as q

    text = q(_PROBE_TEXT)
    inner = '{"":5,"Z":4,"a\\nb":[[],{}],"z":2,"\x7f":6,"é":1,"中":3}'  # code point order
    array = f"[{text},18446744073709551615,-9223372036854775808,0,true,false,null,[]]"
    return f'{{"a":{inner},"b":{array}}}'.encode()


def _self_check(write: Callable[[object], bytes | None], ready: bool) -> bool:
    if not ready:
        return False
    try:
        return write(_PROBE) == _expected_probe()
    except Exception:  # a broken install: stay on the pure path
        return False


#: ``True`` when orjson is installed and writes the probe exactly as the pure path does.
AVAILABLE: Final = _self_check(plain_json, _dumps is not None)
#: ``True`` when the standard library's C encoder writes the probe as the pure path does.
STDLIB_AVAILABLE: Final = _self_check(stdlib_json, _stdlib_encode is not None)

__all__ = ["AVAILABLE", "MAX_DEPTH", "STDLIB_AVAILABLE", "is_plain", "plain_json", "stdlib_json"]
