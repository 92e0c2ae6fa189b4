"""The wire format of the Redis store (hash scheme ``v1``): keys, record bodies, replies.

Everything here is pure: how a record is written into and read back from one Redis string,
how a session's four keys are named, and how the scripts' replies are decoded. The Lua
scripts (``lua/_common.lua``) read and write the same layout; bump :data:`HASH_SCHEME` when
either side changes, so old and new workers never read each other's data by mistake.
"""

from __future__ import annotations

import hashlib
import json
from functools import lru_cache
from typing import Any, Final

from loopwatch import messages
from loopwatch.core.records import ToolCallRecord
from loopwatch.detectors.compaction import COMPACTION_LOOP_PERSISTED, GuardVerdict

#: Version of the key and record layout; bump it when either changes, so old and new
#: workers never read each other's data by mistake.
HASH_SCHEME: Final = "v1"

_SEP: Final = "\x1f"
_RS: Final = "\x1e"


def _token(value: str | None) -> str:
    """A JSON token of a text field: ASCII only, so it is safe in any Redis string.

    Lone surrogates and control characters are escaped, so every Python ``str`` the
    guard may produce (tool names, run ids, warning keys) round-trips exactly.
    """
    if value is None:
        return "null"
    if value.isascii() and value.isprintable() and '"' not in value and "\\" not in value:
        return f'"{value}"'
    return json.dumps(value)


def _untoken(token: str) -> str | None:
    if token == "null":
        return None
    if "\\" not in token:
        return token[1:-1]
    value = json.loads(token)
    if not isinstance(value, str):
        raise ValueError(f"not a text token: {token!r}")
    return value


def _text(raw: object) -> str:
    """Replies are bytes, or str when the client decodes responses."""
    if isinstance(raw, bytes):
        return raw.decode("utf-8")
    if isinstance(raw, str):
        return raw
    raise ValueError(f"expected a string reply, got {type(raw).__name__}")


#: The stored unknown-tool name when it is the called tool's own (lower-cased).
_SAME_AS_TOOL: Final = "="


def _unknown_token(unknown: str | None, tool_name: str) -> str:
    """What Redis holds of an unknown-tool name: never the text itself.

    The name is cut from the error text (SPEC §3.5), so it is tool output, and Redis holds
    digests only. The detector compares names for equality, and its message quotes the
    name: so the usual case, the called tool's own name (``Unknown tool: X`` for a call of
    ``X``), is stored as ``=`` (the record has the tool name already) and reads back
    exactly; any other name is stored as ``"#"`` and 32 hex digits of its SHA-256, which is
    what the message then shows (equal names still have equal tokens).
    """
    if unknown is None:
        return "null"
    if unknown == tool_name.lower():
        return _SAME_AS_TOOL
    digest = hashlib.sha256(unknown.encode("utf-8", "surrogatepass")).hexdigest()[:32]
    return f'"#{digest}"'


def _body(record: ToolCallRecord) -> str:
    """A record's stored fields after the nonce (the nonce is assigned by the server)."""
    return _SEP.join(
        (
            _token(record.run_id),
            _token(record.tool_name),
            _token(record.args_hash),
            _token(record.tool_call_id),
            _token(record.result_hash),
            _unknown_token(record.unknown_tool_name, record.tool_name),
            str(int(record.timestamp)),
            _token(record.facts),
        )
    )


@lru_cache(maxsize=8192)
def _decode_record(raw: str) -> ToolCallRecord:
    """Decode one stored record; cached, since each call reads the same records again."""
    _nonce, run, tool, args, call, result, unknown, timestamp, facts = raw.split(_SEP)
    tool_name = _untoken(tool)
    args_hash = _untoken(args)
    if tool_name is None or args_hash is None:
        raise ValueError(f"malformed record: {raw!r}")
    return ToolCallRecord(
        tool_name=tool_name,
        args_hash=args_hash,
        tool_call_id=_untoken(call),
        run_id=_untoken(run),
        result_hash=_untoken(result),
        unknown_tool_name=tool_name.lower() if unknown == _SAME_AS_TOOL else _untoken(unknown),
        timestamp=int(timestamp),
        facts=_untoken(facts),
    )


def _records(raw: object) -> list[ToolCallRecord]:
    """Records joined by RS in one reply string (much cheaper to parse than an array)."""
    text = _text(raw)
    return [_decode_record(item) for item in text.split(_RS)] if text else []


def _int(raw: object) -> int:
    if isinstance(raw, int) and not isinstance(raw, bool):
        return raw
    return int(_text(raw))


def _seq(raw: object) -> list[Any]:
    if not isinstance(raw, list):
        raise ValueError(f"expected an array reply, got {type(raw).__name__}")
    return raw


def _session_keys(prefix: str, session_key: str) -> tuple[bytes, ...]:
    """The four keys of a session (``<prefix>:v1:{<session>}:h|s|b|o``), cached when short.

    The cache holds :data:`_KEY_CACHE_SIZE` sessions whose prefix and key are at most
    :data:`_CACHED_KEY_CHARS` characters each, so it is bounded in bytes too (about
    4 × 4 × 2 × 256 bytes per entry at worst, 32 MiB in all; typical keys take a few
    hundred bytes): 4,096 cached 100 KiB session keys once held 1.8 GiB. A longer key is
    built on every call, which costs about what its one use in the command costs anyway.
    """
    if len(session_key) > _CACHED_KEY_CHARS or len(prefix) > _CACHED_KEY_CHARS:
        return _build_session_keys(prefix, session_key)
    return _cached_session_keys(prefix, session_key)


#: Sessions whose keys :func:`_session_keys` remembers, and the longest key remembered.
_KEY_CACHE_SIZE: Final = 4096
_CACHED_KEY_CHARS: Final = 256


def _build_session_keys(prefix: str, session_key: str) -> tuple[bytes, ...]:
    """The keys themselves (see :func:`_session_keys`).

    The session key goes into the hash tag verbatim except ``%``, ``{`` and ``}``, which
    are percent-escaped: a brace in a session key would otherwise move the tag and split
    the session over cluster slots. Keys are bytes (``surrogatepass``), so any ``str``
    works.
    """
    tag = (
        session_key.encode("utf-8", "surrogatepass")
        .replace(b"%", b"%25")
        .replace(b"{", b"%7B")
        .replace(b"}", b"%7D")
    )
    base = f"{prefix}:{HASH_SCHEME}:".encode() + b"{" + tag + b"}:"
    return (base + b"h", base + b"s", base + b"b", base + b"o")


_cached_session_keys = lru_cache(maxsize=_KEY_CACHE_SIZE)(_build_session_keys)


def _verdict(
    abort: int, armed: int, remaining: int, count: int, tool: str | None, window_size: int
) -> GuardVerdict:
    """Rebuild a guard verdict; abort verdicts get their detector and message here."""
    if not abort:
        return GuardVerdict(should_abort=False, armed=bool(armed), remaining_attempts=remaining)
    tool_name = tool or ""
    return GuardVerdict(
        should_abort=True,
        armed=bool(armed),
        remaining_attempts=remaining,
        detector=COMPACTION_LOOP_PERSISTED,
        count=count,
        tool_name=tool_name,
        message=messages.COMPACTION_LOOP_PERSISTED.format(
            tool=tool_name, count=count, window_size=window_size
        ),
    )
