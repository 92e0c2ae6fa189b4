"""Outcome hashing (SPEC §3.3–§3.5, §3.7): what "the same result" means.

A no-progress loop is only provable from outcomes, so this module decides which parts of
a tool result count. Volatile data (durations, pids, message ids) is dropped for the
tools the reference knows; everything else is compared byte for byte.
"""

from __future__ import annotations

import hashlib
import math
import numbers
import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any, Final

from loopwatch.core._undefined import UNDEFINED
from loopwatch.core.fingerprint import (
    _describe,
    details_and_text_bytes,
    digest_bytes,
    stable_stringify,
)
from loopwatch.core.jsnumber import format_js_number, int_text
from loopwatch.core.jsstr import js_trim
from loopwatch.core.normalizers import reduce_update_plan, validate_normalizers
from loopwatch.messages import DENIED_REASON_TOOL_LOOP

_WS_BODY: Final = (
    "\\t\\n\\x0b\\x0c\\r \\u00a0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000\\ufeff"
)
# IGNORECASE | ASCII: only ASCII letters fold (no ſ / K), while \s is spelled out as the
# JavaScript whitespace set because re.ASCII would shrink it.
_UNKNOWN_TOOL_PATTERNS: Final = (
    re.compile(
        "unknown tool[:" + _WS_BODY + "]+[\"']?([a-z0-9_.-]+)[\"']?", re.IGNORECASE | re.ASCII
    ),
    re.compile(
        "tool[" + _WS_BODY + "]+[\"']?([a-z0-9_.-]+)[\"']?[" + _WS_BODY + "]+"
        "(?:not found|is not available)",
        re.IGNORECASE | re.ASCII,
    ),
)

#: ``message`` actions whose results carry fresh ids on every send (SPEC §3.3 step 7).
SEND_ACTIONS: Final = frozenset(
    {
        "send",
        "broadcast",
        "reply",
        "thread-reply",
        "sendWithEffect",
        "sendAttachment",
        "upload-file",
        "sticker",
        "poll",
    }
)

#: Keys dropped at any depth from a send result's details.
VOLATILE_SEND_KEYS: Final = frozenset(
    {
        "messageId",
        "message_id",
        "messageIds",
        "platformMessageId",
        "platformMessageIds",
        "fileId",
        "file_id",
        "fileKey",
        "pollId",
        "poll_id",
        "receipt",
        "runId",
        "idempotencyKey",
        "ts",
        "timestamp",
        "sentAt",
        "deliveredAt",
        "createdAt",
    }
)

_ERROR_PREFIX: Final = "error:"


@dataclass(frozen=True, slots=True, init=False)
class OutcomeHash:
    """The digest of one outcome; ``result_hash`` is ``None`` when nothing is recorded."""

    result_hash: str | None
    unknown_tool_name: str | None = None

    def __init__(self, result_hash: str | None, unknown_tool_name: str | None = None) -> None:
        # The generated __init__ of a frozen dataclass, each slot written through its
        # descriptor (a third of the cost: one is built on every after_call).
        _set_result_hash(self, result_hash)
        _set_unknown_tool_name(self, unknown_tool_name)


# The slot descriptors' setters (the frozen class's __setattr__ refuses every write).
_set_result_hash = vars(OutcomeHash)["result_hash"].__set__
_set_unknown_tool_name = vars(OutcomeHash)["unknown_tool_name"].__set__


_NO_HASH: Final = OutcomeHash(None, None)
#: The details of a result without a mapping there; never mutated.
_NO_DETAILS: Final[Mapping[Any, Any]] = {}


def error_text(error: object) -> str:
    """The text of an error as the reference sees it (SPEC §3.3 step 1)."""
    if isinstance(error, BaseException):
        try:
            text = str(error)
        except Exception as exc:  # a broken __str__ makes the value unserialisable
            raise TypeError(f"cannot read the error's text: {_describe(exc)}") from exc
        return text or type(error).__name__
    if isinstance(error, str):
        return error
    if isinstance(error, bool):
        return "true" if error else "false"
    if isinstance(error, numbers.Integral):
        try:
            return int_text(int(error))
        except TypeError:  # longer than jsnumber.MAX_INT_DIGITS
            raise
        except Exception as exc:
            raise TypeError(f"cannot read the error's text: {_describe(exc)}") from exc
    if isinstance(error, numbers.Real):
        value = float(error)
        if math.isnan(value):
            return "NaN"
        if math.isinf(value):
            return "Infinity" if value > 0 else "-Infinity"
        return format_js_number(value)
    return stable_stringify(error)


#: Longest unknown-tool name kept as extracted (SPEC §3.5 sets no bound; real tool names
#: are far shorter). A longer one is kept as its first :data:`UNKNOWN_NAME_HEAD` characters,
#: ``…`` and 16 hex digits of its SHA-256: bounded, still distinct for distinct names
#: (the detector compares names for equality only), still readable in the message.
MAX_UNKNOWN_TOOL_NAME: Final = 128
UNKNOWN_NAME_HEAD: Final = 64


def extract_unknown_tool_name(text: str) -> str | None:
    """The missing tool's name in an error text, lower-cased, or ``None`` (SPEC §3.5).

    Bounded by :data:`MAX_UNKNOWN_TOOL_NAME`: a 4 MB "name" once made every record of
    its session 4 MB.
    """
    trimmed = js_trim(text)
    if not trimmed:
        return None
    for pattern in _UNKNOWN_TOOL_PATTERNS:
        match = pattern.search(trimmed)
        if match is not None:
            return bounded_tool_name(match.group(1).lower())
    return None


def bounded_tool_name(name: str) -> str:
    """``name``, or its bounded form when longer than :data:`MAX_UNKNOWN_TOOL_NAME`."""
    if len(name) <= MAX_UNKNOWN_TOOL_NAME:
        return name
    tail = hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()[:16]
    return f"{name[:UNKNOWN_NAME_HEAD]}…{tail}"


def _content_raw(result: Mapping[Any, Any]) -> str:
    """The result's text parts joined by newlines, before ``js_trim`` (SPEC §3.3 step 8)."""
    content = result.get("content")
    if not isinstance(content, (list, tuple)):
        return ""
    parts = [
        part["text"]
        for part in content
        if (type(part) is dict or isinstance(part, Mapping))
        and isinstance(part.get("type"), str)
        and isinstance(part.get("text"), str)
    ]
    return "\n".join(parts)


def _str_or(value: object, default: str | None) -> str | None:
    return value if isinstance(value, str) else default


def _exec_outcome(details: Mapping[Any, Any], text: str) -> dict[str, object] | None:
    status = details.get("status")
    if not isinstance(status, str):
        return None
    if status == "running":
        return {"status": status, "tail": _str_or(details.get("tail"), "")}
    if status in ("completed", "failed"):
        exit_code = details.get("exitCode")
        aggregated = details.get("aggregated")
        output = js_trim(aggregated) if isinstance(aggregated, str) else ""
        return {
            "status": status,
            "exitCode": exit_code
            if isinstance(exit_code, (int, float)) and not isinstance(exit_code, bool)
            else None,
            "timedOut": details.get("timedOut") is True,
            "output": output or text,
        }
    if status in ("approval-pending", "approval-unavailable"):
        return {
            "status": status,
            "reason": _str_or(details.get("reason"), None),
            "host": _str_or(details.get("host"), None),
            "command": _str_or(details.get("command"), ""),
            "warningText": _str_or(details.get("warningText"), ""),
        }
    return None


def _nullish(value: object) -> object:
    """JavaScript ``value ?? null``."""
    return None if value is None or value is UNDEFINED else value


_POLL_FIELDS: Final[tuple[str, ...]] = ("exitCode", "exitSignal", "aggregated")
_LOG_FIELDS: Final[tuple[str, ...]] = (
    "totalLines",
    "totalChars",
    "truncated",
    "exitCode",
    "exitSignal",
)


def _process_outcome(
    params: object, details: Mapping[Any, Any], text: str
) -> dict[str, object] | None:
    if not isinstance(params, Mapping):
        return None
    action = params.get("action")
    if action == "poll" and isinstance(action, str):
        fields = _POLL_FIELDS
    elif action == "log" and isinstance(action, str):
        fields = _LOG_FIELDS
    else:
        return None
    # ``status`` is always present; a missing one serialises as ``undefined``.
    outcome: dict[str, object] = {"action": action, "status": details.get("status", UNDEFINED)}
    for field in fields:
        outcome[field] = _nullish(details.get(field))
    outcome["text"] = text
    return outcome


def _is_send(tool_name: str, params: object, send_tools: Collection[str]) -> bool:
    if tool_name == "sessions_send":
        return True
    if tool_name == "message":
        if not isinstance(params, Mapping):
            return False
        action = params.get("action")
        return isinstance(action, str) and action in SEND_ACTIONS
    return tool_name in send_tools


def _is_message_object(value: Mapping[Any, Any]) -> bool:
    if not (isinstance(value.get("id"), str) and isinstance(value.get("text"), str)):
        return False
    return (
        isinstance(value.get("direction"), str)
        or isinstance(value.get("senderId"), str)
        or isinstance(value.get("accountId"), str)
        or isinstance(value.get("conversation"), Mapping)
    )


def strip_send_ids(value: object) -> object:
    """Drop per-send ids at any depth, so two identical sends hash alike.

    A container met again (shared, not on a cycle) is stripped once: its stripped copy is
    reused, so ``[a, a]`` nested k deep costs k steps, not 2**k, and the copy shares its
    parts the same way (which :func:`~loopwatch.core.fingerprint.stable_stringify` writes once).
    """
    try:
        return _Stripper().strip(value)
    except RecursionError as exc:
        raise TypeError("send result nests too deeply to normalise") from exc


class _Stripper:
    """One :func:`strip_send_ids` walk: the path (for cycles) and the stripped copies."""

    def __init__(self) -> None:
        self.on_path: set[int] = set()
        # id -> (original, copy): the original is kept, so its id stays its own.
        self.done: dict[int, tuple[object, object]] = {}
        self.cycles = 0  # containers met on their own path so far

    def strip(self, value: object) -> object:
        if not isinstance(value, (Mapping, list, tuple)):
            return value
        ident = id(value)
        if ident in self.on_path:
            self.cycles += 1
            return value
        known = self.done.get(ident)
        if known is not None:
            return known[1]
        cycles = self.cycles
        self.on_path.add(ident)
        stripped: object
        if isinstance(value, Mapping):
            drop_id = _is_message_object(value)
            stripped = {
                key: self.strip(item)
                for key, item in value.items()
                if key not in VOLATILE_SEND_KEYS and not (drop_id and key == "id")
            }
        else:
            stripped = [self.strip(item) for item in value]
        self.on_path.discard(ident)
        if self.cycles == cycles:  # no cycle below: the copy is the same wherever it is met
            self.done[ident] = (value, stripped)
        return stripped


#: The newest result hash :func:`hash_tool_outcome` made and the 32 bytes its hex digits
#: stand for (see :func:`result_digest`). One tuple, replaced whole, so a thread reads a
#: consistent pair; it keeps the hash alive, so no other string can have its identity.
#: Before the first outcome, a pair of the same kind (not ``("", b"")``: the empty string
#: is shared, so a result hash ``""`` would have been read as those empty bytes).
_last_result: tuple[str, bytes] = (bytes(32).hex(), bytes(32))


#: The fields of an outcome with nothing to record: ``(result_hash, unknown_tool_name)``.
_NO_FIELDS: Final = (None, None)


def _hashed(
    raw: bytes, prefix: str = "", unknown_tool_name: str | None = None
) -> tuple[str, str | None]:
    """The outcome whose result hash is ``prefix`` and the hex digits of ``raw``."""
    global _last_result
    result_hash = prefix + raw.hex()
    _last_result = (result_hash, raw)
    return result_hash, unknown_tool_name


def result_digest(result_hash: str) -> bytes | None:
    """The 32 digest bytes of ``result_hash`` when it is the very string
    :func:`hash_tool_outcome` made last; else ``None``.

    The result hash a guarded call made is usually the next one the memory store parses
    back into bytes (its record's packed digest): this hands it the bytes instead. Proven
    equal by identity: that string is ``"error:"`` or nothing, then ``raw.hex()``.
    """
    last = _last_result
    return last[1] if last[0] is result_hash else None


def hash_tool_outcome(
    tool_name: str,
    params: object,
    *,
    result: object = UNDEFINED,
    error: object = UNDEFINED,
    send_tools: Collection[str] = (),
    normalizers: Collection[str] = (),
) -> OutcomeHash:
    """Hash what a tool call produced; the first matching rule of SPEC §3.3 wins.

    Raises:
        TypeError: the result or error cannot be serialised (SPEC §8.5).
        ValueError: an unknown normaliser name.
    """
    result_hash, unknown = outcome_fields(tool_name, params, result, error, send_tools, normalizers)
    return _NO_HASH if result_hash is None else OutcomeHash(result_hash, unknown)


def outcome_fields(
    tool_name: str,
    params: object,
    result: object,
    error: object,
    send_tools: Collection[str],
    normalizers: Collection[str],
) -> tuple[str | None, str | None]:
    """:func:`hash_tool_outcome`'s two fields, ``(result_hash, unknown_tool_name)``, for
    the guard, which hands them to the store as they are (building the frozen
    :class:`OutcomeHash` costs a fifth of a microsecond).

    Raises:
        As :func:`hash_tool_outcome`.
    """
    # An empty collection (the usual case) needs no validation.
    normalizers = validate_normalizers(normalizers) if normalizers else ()
    if error is not UNDEFINED:
        text = error_text(error)
        return _hashed(digest_bytes(text), _ERROR_PREFIX, extract_unknown_tool_name(text))
    if type(result) is str:  # the usual result of a shell tool: a text (checked first, cheap)
        return _hashed(digest_bytes(result))
    if type(result) is not dict and not isinstance(result, Mapping):
        if result is UNDEFINED:
            return _NO_FIELDS
        return _hashed(digest_bytes(result))

    raw_details = result.get("details")
    details: Mapping[Any, Any] = (
        raw_details
        if type(raw_details) is dict or isinstance(raw_details, Mapping)
        else _NO_DETAILS
    )
    raw_text = _content_raw(result)

    status = details.get("status")
    denied = details.get("deniedReason")
    if (
        isinstance(status, str)
        and status == "blocked"
        and isinstance(denied, str)
        and denied == DENIED_REASON_TOOL_LOOP
    ):
        return _NO_FIELDS  # the loop veto: a block is never an outcome (#89090)

    special: object | None = None
    if tool_name == "exec":
        special = _exec_outcome(details, js_trim(raw_text))
    elif tool_name == "process":
        special = _process_outcome(params, details, js_trim(raw_text))
        if special is None and _is_send(tool_name, params, send_tools):
            special = strip_send_ids(details)
    elif _is_send(tool_name, params, send_tools):
        special = strip_send_ids(details)
    if special is not None:
        return _hashed(digest_bytes(special))

    if tool_name == "update_plan" and "update_plan" in normalizers:
        return _hashed(digest_bytes({"details": reduce_update_plan(details), "text": ""}))
    return _hashed(details_and_text_bytes(details, raw_text))


__all__ = [
    "SEND_ACTIONS",
    "VOLATILE_SEND_KEYS",
    "OutcomeHash",
    "error_text",
    "extract_unknown_tool_name",
    "hash_tool_outcome",
    "outcome_fields",
    "result_digest",
    "strip_send_ids",
]
