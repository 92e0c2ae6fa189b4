"""Stable stringify and call hashing, byte-identical to the reference (SPEC §3.1, §3.2, §8).

Loop detection compares hashes, and a hash is only as good as the string under it: one
different byte and two identical calls look different, so the loop is never seen, and a
Python and a TypeScript worker sharing a session would disagree. So this module reproduces
the reference's ``stableStringify`` to the byte for every JSON value (JavaScript number
formatting, ``JSON.stringify`` string escaping, UTF-16 key order) and maps the rest of
Python's types onto it in one documented way (SPEC §8.1).

It runs on every tool call, so the common values (``dict``, ``list``, ``str``, ``int``) take
short, exact-type paths, and the walk is iterative: deeply nested params must not hit
Python's recursion limit, and nothing here may depend on how deep the caller's stack is.

With the ``fast`` extra, orjson writes the values on which its output is provably the same
bytes (plain trees of dicts, lists, strings, ints, booleans and ``None``: see
:mod:`loopwatch.core._fastjson`); everything else, and everything without orjson, takes the
pure-Python path, which stays callable as :func:`stable_stringify_pure` and
:func:`digest_pure`.
"""

from __future__ import annotations

import base64
import dataclasses
import datetime
import decimal
import enum
import hashlib
import numbers
import re
import sys
from collections.abc import Callable, Collection, Iterator, Mapping
from itertools import chain, repeat
from json.encoder import encode_basestring
from pathlib import PurePath
from typing import Any, Final

from loopwatch.core import _fastjson
from loopwatch.core._undefined import UNDEFINED
from loopwatch.core.jsnumber import (
    UnserializableError,
    float_text,
    format_js_number,
    int_text,
)
from loopwatch.core.jsstr import WS_CHARS, js_trim, utf16_key
from loopwatch.core.normalizers import reduce_update_plan, validate_normalizers

#: Deepest nesting :func:`stable_stringify` accepts; deeper values are unserialisable
#: (SPEC §8.5 asks for at least 10,000). The iterative walk could go deeper, but a fixed
#: bound makes "too deep" one defined, tested outcome (a ``TypeError``, so ``LoopGuard``
#: fails open) instead of whatever memory pressure does, and the reference itself runs
#: out of stack long before this.
MAX_DEPTH: Final = 100_000
#: Most members (items of all containers, counted when each is entered; a shared
#: container met again counts one) :func:`stable_stringify` walks before it gives up: a
#: bound on the work of one call, so an argument that reaches a module (through ``vars()``)
#: or any huge object graph is unserialisable (SPEC §8.5: the guard fails open) instead
#: of a call that never returns. The fast path refuses the same values.
MAX_NODES: Final = _fastjson.MAX_NODES
#: Most values :func:`stable_stringify` converts by the rules of SPEC §8.1 beyond plain
#: JSON types (objects read through ``vars()``, dataclasses, models, exceptions…): each
#: costs far more than a dict member, and graphs of live objects (a module, a client with
#: its connection pool) are where the work explodes.
MAX_CONVERSIONS: Final = 10_000
#: Most characters a serialisation may copy from shared containers met again: ``[a, a]``
#: nested 30 deep is small in memory but its text is 2**30 copies of ``a``'s.
MAX_REUSED_CHARS: Final = 64 * 1024 * 1024
#: Longest text of a value quoted in an error message (a 10 MB dict key must not make a
#: 10 MB log line).
MAX_SHOWN_CHARS: Final = 200

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
_MEMO: Final = 5  # a container already written once (see _stringify)


#: The orjson fast path (extra ``fast``), or ``None`` when orjson is missing or failed its
#: self-check. Module state on purpose: tests and benchmarks set it to ``None`` to compare
#: against the pure path in the same process. It is used only while :data:`MAX_DEPTH`
#: admits everything orjson writes, so both paths refuse the same values.
_fast_json: Callable[[object], bytes | None] | None = (
    _fastjson.plain_json
    if _fastjson.AVAILABLE
    else _fastjson.stdlib_json
    if _fastjson.STDLIB_AVAILABLE
    else None
)


def _shown(value: object) -> str:
    """``repr(value)``, cut to :data:`MAX_SHOWN_CHARS`, never raising (for error texts)."""
    if isinstance(value, (str, bytes)) and len(value) > MAX_SHOWN_CHARS:
        return repr(value[:MAX_SHOWN_CHARS]) + f"… ({len(value)} long)"
    try:
        text = repr(value)
    except Exception:
        text = f"<{type(value).__name__}>"
    return text if len(text) <= MAX_SHOWN_CHARS else text[:MAX_SHOWN_CHARS] + "…"


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
            raise UnserializableError(
                f"mapping keys {_shown(clash[0])} and {_shown(key)} both serialise as the "
                f"key {_shown(text)}; the result would depend on key order"
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
        return int_text(int(value))
    if isinstance(value, numbers.Real):
        return float_text(float(value))
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
    if isinstance(value, (decimal.Decimal, PurePath)) or _is_uuid(value):
        return _quote(str(value))
    if callable(value):
        return "null"
    try:
        attributes = vars(value)
    except TypeError:  # no __dict__
        return "{}"
    return (_OBJECT, attributes)


def _is_uuid(value: object) -> bool:
    """Whether ``value`` is a :class:`uuid.UUID`, without importing :mod:`uuid`.

    ``uuid`` imports ``platform`` (about 15 ms in a fresh process, a third of a hook
    call's budget); a UUID can only exist once its module was imported, so the module
    is looked up, not loaded.
    """
    module = sys.modules.get("uuid")
    return module is not None and isinstance(value, module.UUID)


def _stringify(value: object, exact: bool, int_repr: Callable[[int], str] = int.__repr__) -> str:
    """The walk behind :func:`stable_stringify`; raises whatever a conversion raises.

    With ``exact`` false (the first, fast pass) plain strings and keys are quoted by
    ``json``'s C encoder without looking for surrogates: that is exact for every string
    without surrogate code points, and any surrogate it lets through stays raw in the
    result, where the caller's UTF-8 encoding finds it and asks for an exact pass. So the
    common case pays no per-string scan; the price is that a value holding surrogates is
    walked twice, and its conversions (``model_dump``, ``__str__``…) run twice.

    An explicit stack of frames replaces recursion. A frame is
    ``(items, closer, container, mark, head_width, circulars)``: ``items`` yields
    ``(head, value)`` pairs, and ``container`` is kept alive (and its ``id`` in
    ``on_path``) while it is being walked; its text starts at ``out[mark]`` after a head
    of ``head_width`` characters. A set's frame is
    ``[items, None, container, mark, texts, started]``: set items must be serialised one by
    one (from ``out[mark:]``) before they can be sorted.

    Shared containers are written once: a container whose text holds no ``"[Circular]"``
    has the same text wherever it is met (its reachable graph has no cycle through the
    path), so when it closes, where its text lies in ``out`` is remembered by ``id`` (the
    container kept alive, so the id stays its own), and meeting it again copies that text
    (joined once, on the first reuse) instead of walking it again. Without this, ``[a, a]``
    nested k deep was walked 2**k times. The text is the same to the byte; conversions of
    the shared object run once instead of at every occurrence. Inside a set (whose items'
    texts are cut out of ``out`` for sorting) nothing is remembered.
    """
    quote = _quote if exact else encode_basestring
    out: list[str] = []
    append = out.append
    stack: list[Any] = []
    on_path: set[int] = set()
    # id -> (container, start, stop, head width) until first reused, then (container, text)
    memo: dict[int, tuple[Any, ...]] = {}
    circulars = 0  # "[Circular]" markers written so far
    sets_open = 0
    nodes = 0
    reused = 0
    conversions = 0
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
            append(head + int_repr(current))
        elif cls is list or cls is tuple:
            kind, payload = _ARRAY, current
        elif cls is float:
            append(head + float_text(current))
        elif cls is bool:
            append(head + ("true" if current else "false"))
        elif current is None:
            append(head + "null")
        else:
            entry = memo.get(id(current))
            if entry is not None and entry[0] is current:
                kind = _MEMO  # a converted container met again: no second conversion
            else:
                conversions += 1
                if conversions > MAX_CONVERSIONS:
                    raise UnserializableError(
                        f"value holds more than {MAX_CONVERSIONS} objects to convert, "
                        "the most loopwatch hashes"
                    )
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
                circulars += 1
            elif ident in memo:
                entry = memo[ident]
                if len(entry) == 4:
                    start, stop, width = entry[1], entry[2], entry[3]
                    text = out[start][width:] + "".join(out[start + 1 : stop])
                    memo[ident] = (entry[0], text)
                else:
                    text = entry[1]
                reused += len(text)
                nodes += 1
                if reused > MAX_REUSED_CHARS:
                    raise UnserializableError(
                        f"value repeats shared containers into more than {MAX_REUSED_CHARS} "
                        "characters, the most loopwatch hashes"
                    )
                append(head + text)
            elif len(stack) >= MAX_DEPTH:
                raise UnserializableError(
                    f"value nests deeper than {MAX_DEPTH} levels, the most loopwatch hashes"
                )
            else:
                nodes += len(payload)
                if nodes > MAX_NODES:
                    raise UnserializableError(
                        f"value has more than {MAX_NODES} members, the most loopwatch hashes"
                    )
                if kind == _OBJECT:
                    pairs = _object_items(payload, exact)
                    stack.append((pairs, "}", current, len(out), len(head), circulars))
                    append(head + "{")
                    on_path.add(ident)
                elif kind == _ARRAY:
                    items = zip(chain(_FIRST, _COMMAS), payload, strict=False)
                    stack.append((items, "]", current, len(out), len(head), circulars))
                    append(head + "[")
                    on_path.add(ident)
                else:  # _SET
                    if head:
                        append(head)
                    members = zip(repeat(""), list(payload), strict=False)
                    stack.append([members, None, current, len(out), [], False])
                    on_path.add(ident)
                    sets_open += 1
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
                    sets_open -= 1
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
                    append(head + int_repr(current))
                elif cls is float:
                    append(head + float_text(current))
                elif cls is bool:
                    append(head + ("true" if current else "false"))
                elif current is None:
                    append(head + "null")
                else:
                    break
            else:
                stack.pop()
                append(closer)
                container = frame[2]
                on_path.discard(id(container))
                if circulars == frame[5] and not sets_open:
                    memo[id(container)] = (container, frame[3], len(out), frame[4])
                continue
            break
        else:
            return "".join(out)


def _run(value: object, exact: bool) -> str:
    """Run the walk, turning every failure into the documented ``TypeError``."""
    try:
        try:
            return _stringify(value, exact)
        except ValueError as exc:
            if "int_max_str_digits" not in str(exc):
                raise
            # An int beyond Python's text conversion limit: walk again with the slower
            # formatter (only such values pay for it).
            return _stringify(value, exact, int_text)
    except UnserializableError as exc:
        raise TypeError(str(exc)) from None
    except Exception as exc:
        raise TypeError(f"cannot serialise value for hashing: {_describe(exc)}") from exc


def _describe(exc: BaseException) -> str:
    """``"Type: message"`` of an exception, cut to a few hundred characters, never raising."""
    try:
        text = f"{type(exc).__name__}: {exc}"
    except Exception:
        return type(exc).__name__
    return text if len(text) <= 2 * MAX_SHOWN_CHARS else text[: 2 * MAX_SHOWN_CHARS] + "…"


# --- public API ------------------------------------------------------------------------------


def stable_stringify(value: object) -> str:
    """Serialise a value to the reference's canonical JSON-like text (SPEC §3.1, §8).

    Keys are sorted in UTF-16 order, there is no whitespace, ``UNDEFINED`` is the bare
    word ``undefined``, non-finite numbers are quoted strings and a container met again
    on its own path is ``"[Circular]"``. For every JSON value the text is exactly what
    OpenClaw produces, so hashes agree across languages.

    With the ``fast`` extra (orjson), plain JSON values (dicts, lists, strings, ints,
    booleans, ``None``; no floats) are written by orjson; the text is the same to the
    byte (:mod:`loopwatch.core._fastjson` says why), only faster.

    Args:
        value: Any Python value; SPEC §8.1 says how each type is read.

    Returns:
        The canonical text.

    Raises:
        TypeError: When the value cannot be serialised (SPEC §8.5): a conversion raised
            (a failing ``__str__``, ``isoformat``, ``model_dump``…), two keys of one
            mapping convert to the same string, or it nests deeper than
            :data:`MAX_DEPTH`.
    """
    fast = _fast_json
    if fast is not None and MAX_DEPTH >= _fastjson.MAX_DEPTH:
        data = fast(value)
        if data is not None:
            return data.decode("utf-8")
    return stable_stringify_pure(value)


def stable_stringify_pure(value: object) -> str:
    """:func:`stable_stringify` on the pure-Python path only, whatever is installed.

    The reference implementation the fast path is tested against; hashing never needs it
    directly.

    Raises:
        TypeError: As :func:`stable_stringify`.
    """
    if type(value) is str:
        return _quote(value)
    if type(value) is int:
        try:
            return int_text(value)
        except UnserializableError as exc:
            raise TypeError(str(exc)) from None
    text = _run(value, exact=False)
    if text.isascii():
        return text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # a raw surrogate: some string needs the exact pass
        return _run(value, exact=True)
    return text


def sha256_hex(text: str) -> str:
    """SHA-256 of the UTF-8 bytes of ``text``, as lowercase hex (the reference's digest)."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def raw_text_digest(text: str) -> str:
    """:func:`sha256_hex` of a raw text of the host's (a path, an error message), for
    loopwatch's own digests: a lone surrogate (``os.fsdecode`` of a file name that is not
    UTF-8) is encoded as it is rather than raising. Equal to :func:`sha256_hex` for every
    text without one."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def digest(value: object) -> str:
    """``sha256_hex(stable_stringify(value))``: the fixed-size fingerprint of any value.

    Raises:
        TypeError: When the value cannot be serialised (see :func:`stable_stringify`).
    """
    return digest_bytes(value).hex()


def digest_bytes(value: object) -> bytes:
    """The 32 bytes that :func:`digest`'s hex digits stand for: the one implementation of
    both, so that a caller that needs the bytes (:func:`hash_tool_call` for the memory
    store's packed records) does not parse the hex back.

    Raises:
        TypeError: As :func:`digest`.
    """
    fast = _fast_json
    if fast is not None and MAX_DEPTH >= _fastjson.MAX_DEPTH:
        data = fast(value)
        if data is not None:
            return hashlib.sha256(data).digest()
    return _digest_pure_bytes(value)


def digest_pure(value: object) -> str:
    """:func:`digest` on the pure-Python path only, whatever is installed.

    Raises:
        TypeError: As :func:`stable_stringify`.
    """
    return _digest_pure_bytes(value).hex()


def _digest_pure_bytes(value: object) -> bytes:
    """:func:`digest_pure`'s 32 bytes.

    The UTF-8 encoding the digest needs anyway doubles as the surrogate check of
    :func:`stable_stringify_pure`, so hashing costs one walk and one encoding.
    """
    text = _quote(value) if type(value) is str else _run(value, exact=False)
    try:
        data = text.encode("utf-8")
    except UnicodeEncodeError:  # a raw surrogate: some string needs the exact pass
        data = _run(value, exact=True).encode("utf-8")
    return hashlib.sha256(data).digest()


#: How far :func:`digest_details_and_text` looks for whitespace at each end of the text;
#: a longer run of it is trimmed by copying, as everywhere else.
TRIM_SCAN: Final = 16
_WHITESPACE: Final = frozenset(WS_CHARS)
_DETAILS_HEAD: Final = b'{"details":'
_TEXT_HEAD: Final = b',"text":"'
_TAIL: Final = b'"}'


def _trimmed_ends(text: str) -> tuple[int, int] | None:
    """How many characters ``js_trim`` drops from each end, or ``None`` past TRIM_SCAN."""
    end = len(text)
    if not end or (text[0] not in _WHITESPACE and text[-1] not in _WHITESPACE):
        return 0, 0  # the common case, two lookups
    lead = 0
    while lead < end and text[lead] in _WHITESPACE:
        lead += 1
        if lead > TRIM_SCAN:
            return None
    tail = 0
    while end - tail > lead and text[end - tail - 1] in _WHITESPACE:
        tail += 1
        if tail > TRIM_SCAN:
            return None
    return lead, tail


def digest_details_and_text(details: object, text: str) -> str:
    """``digest({"details": details, "text": js_trim(text)})``, without building either:
    the hex digits of :func:`details_and_text_bytes`.

    Raises:
        TypeError: As :func:`digest`.
    """
    return details_and_text_bytes(details, text).hex()


def details_and_text_bytes(details: object, text: str) -> bytes:
    """``digest_bytes({"details": details, "text": js_trim(text)})``, without building either.

    The default outcome of SPEC §3.3 hashes this object for nearly every tool call, and
    the text is often the bulk of a result. Trimming it copies it whenever it ends in
    whitespace (most tool output ends in a newline), and the copy must be encoded to UTF-8
    anew where a string hashed before keeps its cached encoding. So with the fast path,
    the object's JSON is hashed in pieces: ``{"details":``, orjson's bytes of
    ``details``, ``,"text":``, and orjson's bytes of the *untrimmed* text with the escapes
    of the trimmed characters cut off both ends. That is the same byte string: keys sort
    as ``details`` < ``text``, an object's JSON is its members' JSON in that frame, and a
    string's JSON is the concatenation of its characters' escapes, each a fixed byte
    string (whitespace is never a surrogate). Anything the fast path cannot write, and a
    text with more than :data:`TRIM_SCAN` whitespace characters at one end, goes the
    straightforward way.

    Raises:
        TypeError: As :func:`digest`.
    """
    fast = _fast_json
    body = ends = head = None
    if fast is not None and MAX_DEPTH >= _fastjson.MAX_DEPTH and type(text) is str:
        # The text first: encoding it brings a fresh result's bulk into the cache, where
        # the look at its two ends then finds it (the other order misses twice).
        body = fast(text)
        if body is not None:
            ends = _trimmed_ends(text)
            if ends is not None:
                head = fast(details)
    if head is None or ends is None or body is None:
        return digest_bytes({"details": details, "text": js_trim(text)})
    lead, tail = ends
    start = 1 + (_escaped_width(text[:lead]) if lead else 0)
    stop = len(body) - 1 - (_escaped_width(text[len(text) - tail :]) if tail else 0)
    sha = hashlib.sha256(_DETAILS_HEAD)
    sha.update(head)
    sha.update(_TEXT_HEAD)
    sha.update(memoryview(body)[start:stop])
    sha.update(_TAIL)
    return sha.digest()


def _escaped_width(whitespace: str) -> int:
    """Bytes of the JSON escapes of some whitespace characters, as the fast path writes them."""
    fast = _fast_json
    assert fast is not None
    data = fast(whitespace)
    assert data is not None  # whitespace is plain text
    return len(data) - 2


def hash_tool_call(tool_name: str, params: object, *, normalizers: Collection[str] = ()) -> str:
    """The call signature ``argsHash`` of SPEC §3.2: ``"<tool_name>:<sha256 hex>"``.

    The tool name is used verbatim (``LoopGuard`` normalises it before calling this), and
    key order in ``params`` never matters.

    Args:
        tool_name: The tool name, kept as given.
        params: The call's arguments, of any type.
        normalizers: Opt-in normaliser names (SPEC §3.7); with ``"update_plan"``, the params
            of tool ``update_plan`` are reduced to their shape first.

    Returns:
        The signature, for example ``"read:9f86d0…"``.

    Raises:
        TypeError: When ``params`` cannot be serialised.
        ValueError: When ``normalizers`` names an unknown normaliser.
    """
    if normalizers:
        enabled = validate_normalizers(normalizers)  # validated even when unused: typos fail
        if tool_name == "update_plan" and "update_plan" in enabled:
            try:
                params = reduce_update_plan(params)
            except Exception as exc:
                raise TypeError(f"cannot reduce update_plan params: {_describe(exc)}") from exc
    raw = digest_bytes(params)
    signature = f"{tool_name}:{raw.hex()}"
    if type(tool_name) is str:
        global _last_signature
        _last_signature = (signature, tool_name, raw)
    return signature


#: The newest signature :func:`hash_tool_call` returned for a plain ``str`` tool name, that
#: name and the 32 bytes its hex digits stand for (see :func:`signature_digest`). One
#: tuple, replaced whole, so a thread reads a consistent triple; it keeps the signature
#: alive, so no other string can have its identity.
#: Before the first call, a triple of the same kind (not ``("", "", b"")``: the empty
#: string is shared, so an args hash ``""`` of tool ``""`` would have been read as those
#: empty bytes).
_last_signature: tuple[str, str, bytes] = (":" + bytes(32).hex(), "", bytes(32))


def signature_digest(tool_name: str, args_hash: str) -> bytes | None:
    """The 32 digest bytes of ``args_hash`` when it is the very string :func:`hash_tool_call`
    returned last, for this tool name; else ``None``.

    The args hash a guarded call hashed is usually the next one the memory store parses
    back into bytes (its record's packed digest): this hands it the bytes instead. Proven
    equal by identity: that string is ``f"{tool_name}:{raw.hex()}"``, whose digits parse
    back to ``raw``.
    """
    last = _last_signature
    if last[0] is args_hash and last[1] == tool_name:
        return last[2]
    return None


__all__ = [
    "MAX_DEPTH",
    "details_and_text_bytes",
    "digest",
    "digest_bytes",
    "digest_details_and_text",
    "digest_pure",
    "hash_tool_call",
    "raw_text_digest",
    "sha256_hex",
    "signature_digest",
    "stable_stringify",
    "stable_stringify_pure",
]
