"""The memory store's records: one history record packed into one ``bytes`` object.

A record costs about 250 bytes kept this way instead of 430 as a public
:class:`~loopwatch.core.records.ToolCallRecord`, which is built on demand when a record
leaves the store. The keys defined here (:func:`call_key`, :func:`result_key`) are how
:mod:`loopwatch.stores.memory._runs` indexes and compares records: two records have
equal keys exactly when their hash strings are equal.
"""

from __future__ import annotations

import struct
import sys
from binascii import unhexlify
from collections.abc import Callable
from operator import attrgetter
from typing import Final

from loopwatch.core.fingerprint import signature_digest
from loopwatch.core.outcomes import result_digest
from loopwatch.core.records import ToolCallRecord

#: A record's packed form: the args digest (32 bytes), the result key (the result digest
#: and one byte for its kind, see :func:`result_key`), the timestamp (signed, 8 bytes).
_PACKED: Final = struct.Struct("<32s33sq")
#: The same bytes with the result key in its two parts (digest, kind): packed without
#: joining them first.
_PACKED_PARTS: Final = struct.Struct("<32s32sBq")
RESULT_KEY: Final = slice(32, 65)
KIND_AT: Final = 64
#: Result kinds, the last byte of a result key: no outcome yet, a digest (SPEC §3.3), or
#: ``"error:"`` and a digest.
PENDING: Final = 0
_DIGEST: Final = 1
_ERROR: Final = 2
_KIND_BYTES: Final = (b"\x00", b"\x01", b"\x02")
_ERROR_PREFIX: Final = "error:"
_NO_RESULT: Final = bytes(32) + _KIND_BYTES[PENDING]
_MIN_TS: Final = -(2**63)
_MAX_TS: Final = 2**63 - 1


def _digest(text: str) -> bytes | None:
    """The 32 bytes that 64 lower-case hex digits stand for; ``None`` for any other text."""
    try:
        # Half the cost of bytes.fromhex. Non-hex, odd-length or non-ASCII text raises
        # binascii.Error, a ValueError.
        raw = unhexlify(text)
    except ValueError:
        return None
    # unhexlify also reads upper case: only a round trip is exact.
    return raw if len(raw) == 32 and raw.hex() == text else None


def call_key(tool_name: str, args_hash: str) -> bytes | str:
    """How the index tells the calls of one tool apart.

    The args digest for the usual ``"<tool_name>:<sha256 hex>"`` (SPEC §3.2), else the
    args hash itself: for one tool name, equal keys mean equal args hashes.
    """
    if type(tool_name) is not str or type(args_hash) is not str:
        return args_hash  # not from the guard: kept and compared as it is
    raw = signature_digest(tool_name, args_hash)
    if raw is not None:  # the args hash the guard just made: its bytes, not parsed back
        return raw
    colon = len(tool_name)
    if len(args_hash) == colon + 65 and args_hash[colon] == ":" and args_hash.startswith(tool_name):
        text = args_hash[colon + 1 :]
        try:  # _digest(text), inlined: once per guarded call
            raw = unhexlify(text)
        except ValueError:
            return args_hash
        if raw.hex() == text:  # (32 bytes: the length was checked)
            return raw
    return args_hash


def result_key(result_hash: str) -> bytes | str:
    """A result hash in 33 bytes (its digest and kind), or itself when it has another form.

    Equal keys mean equal result hashes.
    """
    if type(result_hash) is not str:
        return result_hash
    raw = result_digest(result_hash)
    if raw is not None:  # the result hash the guard just made: its bytes, not parsed back
        # (64 hex digits never start with "error:")
        kind = _ERROR if result_hash.startswith(_ERROR_PREFIX) else _DIGEST
        return raw + _KIND_BYTES[kind]
    if result_hash.startswith(_ERROR_PREFIX):
        digest = _digest(result_hash[len(_ERROR_PREFIX) :])
        kind = _ERROR
    else:
        digest = _digest(result_hash)
        kind = _DIGEST
    return result_hash if digest is None else digest + _KIND_BYTES[kind]


def result_hash_of(key: bytes | str) -> str:
    """The result hash a :func:`result_key` stands for."""
    if isinstance(key, str):
        return key
    digest = key[:32].hex()
    return _ERROR_PREFIX + digest if key[32] == _ERROR else digest


def _pack(record: ToolCallRecord, args: bytes | str) -> bytes | None:
    """The packed form of a record (whose :func:`call_key` is ``args``), or ``None`` when
    its fields do not fit one."""
    result_hash = record.result_hash
    result = _NO_RESULT if result_hash is None else result_key(result_hash)
    timestamp = record.timestamp
    if (
        not isinstance(args, bytes)
        or not isinstance(result, bytes)
        or type(timestamp) is not int
        or not _MIN_TS <= timestamp <= _MAX_TS
    ):
        return None
    return _PACKED.pack(args, result, timestamp)


class CompactRecord:
    """One history record as the memory store keeps it.

    ``packed`` holds the digests and the timestamp (:data:`_PACKED`); ``extra`` is
    ``None``, or ``(unknown_tool_name, facts)`` when either is set, or the public
    record itself: when the record came from ``begin_call`` and is not filled yet
    (``cancel_call`` finds it by identity, and it is usually filled within the same tool
    call), or when it does not fit the packed form (hashes of another shape: then
    ``packed`` is ``None``).
    """

    __slots__ = ("call_id", "extra", "packed", "run_id", "tool_name")

    def __init__(
        self, record: ToolCallRecord, key: bytes | str | None = None, *, keep: bool = False
    ) -> None:
        """Store ``record`` (kept whole with ``keep``); ``key``: its :func:`call_key`, if known."""
        tool_name = record.tool_name
        self.tool_name = sys.intern(tool_name) if type(tool_name) is str else tool_name
        self.call_id = record.tool_call_id
        self.run_id = record.run_id
        self.packed: bytes | None
        self.extra: ToolCallRecord | tuple[str | None, str | None] | None
        if key is None:
            key = call_key(record.tool_name, record.args_hash)
        self._absorb(record, key, keep)

    @classmethod
    def filled(cls, record: ToolCallRecord, key: bytes | str) -> CompactRecord:
        """``CompactRecord(record, key)`` for a record with an outcome: the usual record,
        packed with fewer steps when its fields have the usual forms."""
        result_hash = record.result_hash
        timestamp = record.timestamp
        # The digest bytes of the result hash the guard just made, when it is that one.
        raw = None if result_hash is None else result_digest(result_hash)
        if (
            raw is not None
            and result_hash is not None
            and type(key) is bytes
            and type(timestamp) is int
            and _MIN_TS <= timestamp <= _MAX_TS
        ):
            # result_key(result_hash) is these digest bytes and their kind, packed apart.
            kind = _ERROR if result_hash.startswith(_ERROR_PREFIX) else _DIGEST
            packed = _PACKED_PARTS.pack(key, raw, kind, timestamp)
        else:
            result = result_key(result_hash) if result_hash is not None else None
            if (
                type(key) is not bytes
                or type(result) is not bytes
                or type(timestamp) is not int
                or not _MIN_TS <= timestamp <= _MAX_TS
            ):
                return cls(record, key)
            packed = _PACKED.pack(key, result, timestamp)
        self = cls.__new__(cls)
        tool_name = record.tool_name
        self.tool_name = sys.intern(tool_name) if type(tool_name) is str else tool_name
        self.call_id = record.tool_call_id
        self.run_id = record.run_id
        self.packed = packed
        unknown, facts = record.unknown_tool_name, record.facts
        self.extra = None if unknown is None and facts is None else (unknown, facts)
        return self

    def _absorb(self, record: ToolCallRecord, key: bytes | str, keep: bool) -> None:
        packed = _pack(record, key)
        self.packed = packed
        if packed is None or keep:
            self.extra = record
        elif record.unknown_tool_name is None and record.facts is None:
            self.extra = None
        else:
            self.extra = (record.unknown_tool_name, record.facts)

    def fill(
        self, result_hash: str, unknown_tool_name: str | None, facts: str | None
    ) -> ToolCallRecord:
        """Attach an outcome to this pending record (SPEC §3.6); returns the public record."""
        origin = self.extra  # a pending record always came from begin_call
        assert isinstance(origin, ToolCallRecord) and origin.result_hash is None
        filled = ToolCallRecord(
            origin.tool_name,
            origin.args_hash,
            origin.tool_call_id,
            origin.run_id,
            result_hash,
            unknown_tool_name,
            origin.timestamp,
            facts,
        )
        packed = self.packed
        result = result_key(result_hash)
        if packed is None or not isinstance(result, bytes):
            self._absorb(filled, call_key(filled.tool_name, filled.args_hash), keep=False)
        else:  # the args digest and the timestamp are packed already
            self.packed = packed[:32] + result + packed[65:]
            no_notes = unknown_tool_name is None and facts is None
            self.extra = None if no_notes else (unknown_tool_name, facts)
        return filled

    # --- reading -------------------------------------------------------------------------

    @property
    def pending(self) -> bool:
        """True while the record has no outcome."""
        packed = self.packed
        if packed is not None:
            return packed[KIND_AT] == PENDING
        assert isinstance(self.extra, ToolCallRecord)
        return self.extra.result_hash is None

    @property
    def key(self) -> bytes | str:
        """The record's :func:`call_key`."""
        packed = self.packed
        if packed is not None:
            return packed[:32]
        return call_key(self.tool_name, self.args_hash)

    @property
    def result(self) -> bytes | str | None:
        """The record's :func:`result_key`; ``None`` while pending."""
        packed = self.packed
        if packed is not None:
            return None if packed[KIND_AT] == PENDING else packed[RESULT_KEY]
        result_hash = self.result_hash
        return None if result_hash is None else result_key(result_hash)

    def matches(self, tool_name: str, key: bytes | str) -> bool:
        """Same tool name and args hash as a call whose :func:`call_key` is ``key``."""
        if self.tool_name != tool_name:
            return False
        packed = self.packed
        if packed is not None:  # the key of a packed record is its args digest
            return isinstance(key, bytes) and packed.startswith(key)
        return self.key == key

    @property
    def args_hash(self) -> str:
        extra = self.extra
        if isinstance(extra, ToolCallRecord):
            return extra.args_hash
        assert self.packed is not None
        return f"{self.tool_name}:{self.packed[:32].hex()}"

    @property
    def result_hash(self) -> str | None:
        extra = self.extra
        if isinstance(extra, ToolCallRecord):
            return extra.result_hash
        assert self.packed is not None
        return result_hash_of(self.packed[RESULT_KEY])

    @property
    def unknown_tool_name(self) -> str | None:
        extra = self.extra
        if extra is None:
            return None
        return extra[0] if isinstance(extra, tuple) else extra.unknown_tool_name

    @property
    def facts(self) -> str | None:
        extra = self.extra
        if extra is None:
            return None
        return extra[1] if isinstance(extra, tuple) else extra.facts

    def public(self) -> ToolCallRecord:
        """The record as the store's users see it (a new object unless kept as ``extra``)."""
        extra = self.extra
        if isinstance(extra, ToolCallRecord):
            return extra
        assert self.packed is not None
        args, result, timestamp = _PACKED.unpack(self.packed)
        unknown, facts = (None, None) if extra is None else extra
        return ToolCallRecord(
            self.tool_name,
            f"{self.tool_name}:{args.hex()}",
            self.call_id,
            self.run_id,
            result_hash_of(result),
            unknown,
            timestamp,
            facts,
        )


def same_args_as(record: CompactRecord) -> Callable[[CompactRecord], bool]:
    """A test for "has the same args hash as ``record``", whatever the tool (ping-pong)."""
    packed = record.packed
    if packed is None:
        args_hash = record.args_hash
        return lambda other: other.args_hash == args_hash
    digest, tool_name = packed[:32], record.tool_name

    def same(other: CompactRecord) -> bool:
        other_packed = other.packed
        if other_packed is None:
            return other.args_hash == record.args_hash
        # Both hashes are "<tool>:<hex digest>": equal exactly when both parts are.
        return other_packed.startswith(digest) and other.tool_name == tool_name

    return same


#: A record's content key (see :meth:`RunView.content_keys`).
CONTENT_KEY: Final = attrgetter("tool_name", "packed", "extra")


__all__ = [
    "CONTENT_KEY",
    "KIND_AT",
    "PENDING",
    "RESULT_KEY",
    "CompactRecord",
    "call_key",
    "result_hash_of",
    "result_key",
    "same_args_as",
]
