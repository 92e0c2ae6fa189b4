"""Events a ``LoopGuard`` emits to its listeners (SPEC §5.5, §10.2).

Each event is a frozen object with a ``type`` and a camelCase ``to_dict()`` payload, the
shape the reference's event bus carries, so dashboards built for OpenClaw read them as is.
Parameter values never appear in an event: only a summary of their shape.
"""

from __future__ import annotations

import numbers
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Final

from loopwatch._event_base import LoopEvent
from loopwatch.core._undefined import UNDEFINED
from loopwatch.core.jsstr import utf16_len
from loopwatch.core.naming import plain_str


@dataclass(frozen=True)
class ToolLoopEvent(LoopEvent):
    """A block or an emitted warning (``tool.loop``)."""

    type: ClassVar[str] = "tool.loop"
    _KEYS: ClassVar[dict[str, str]] = {
        "session_key": "sessionKey",
        "tool_name": "toolName",
        "paired_tool_name": "pairedToolName",
    }

    session_key: str
    tool_name: str
    level: str
    action: str
    detector: str | None
    count: int
    message: str | None
    paired_tool_name: str | None = None
    #: The calls forming the loop (adaptive profile only).
    indices: tuple[int, ...] | None = None
    #: Why it fired and what would have reset it (adaptive profile only).
    explanation: str | None = None


@dataclass(frozen=True)
class ToolExecutionBlockedEvent(LoopEvent):
    """An enforced block: the tool was not run (``tool.execution.blocked``)."""

    type: ClassVar[str] = "tool.execution.blocked"
    _KEYS: ClassVar[dict[str, str]] = {
        "run_id": "runId",
        "session_key": "sessionKey",
        "tool_name": "toolName",
        "tool_call_id": "toolCallId",
        "params_summary": "paramsSummary",
        "denied_reason": "deniedReason",
    }

    session_key: str
    tool_name: str
    params_summary: dict[str, Any]
    reason: str
    run_id: str | None = None
    tool_call_id: str | None = None
    denied_reason: str = "tool-loop"


@dataclass(frozen=True)
class GuardArmedEvent(LoopEvent):
    """A compaction retry armed a run's post-compaction guard (``guard.armed``)."""

    type: ClassVar[str] = "guard.armed"
    _KEYS: ClassVar[dict[str, str]] = {
        "session_key": "sessionKey",
        "run_id": "runId",
        "window_size": "windowSize",
    }

    session_key: str
    window_size: int
    enabled: bool
    run_id: str | None = None


@dataclass(frozen=True)
class CompactionLoopPersistedEvent(LoopEvent):
    """The post-compaction guard aborted the run (``compaction_loop_persisted``)."""

    type: ClassVar[str] = "compaction_loop_persisted"
    _KEYS: ClassVar[dict[str, str]] = {
        "session_key": "sessionKey",
        "run_id": "runId",
        "tool_name": "toolName",
    }

    session_key: str
    tool_name: str
    count: int
    message: str
    run_id: str | None = None


@dataclass(frozen=True)
class StoreErrorEvent(LoopEvent):
    """The store failed and the failure policy decided the call (``store.error``)."""

    type: ClassVar[str] = "store.error"
    _KEYS: ClassVar[dict[str, str]] = {
        "session_key": "sessionKey",
        "tool_name": "toolName",
        "fail_open": "failOpen",
    }

    session_key: str
    operation: str
    error: str
    fail_open: bool
    tool_name: str | None = None


#: The built-in types a summary calls an array (SPEC §5.5).
_ARRAYS: Final[tuple[type[Any], ...]] = (list, tuple, set, frozenset)


def _is_named_tuple(value: tuple[Any, ...]) -> bool:
    try:
        return hasattr(value, "_asdict")
    except Exception:  # a __getattr__ of the host's that raises something else
        return False


def params_summary(params: object) -> dict[str, Any]:
    """The shape of the params without their values (SPEC §5.5 ``paramsSummary``).

    Lengths are read with the built-in types' own ``__len__``: a subclass's methods are the
    host's code, and a summary that raised would lose the block it belongs to.
    """
    if params is None:
        return {"kind": "null"}
    if params is UNDEFINED:
        return {"kind": "undefined"}
    if isinstance(params, bool):
        return {"kind": "boolean"}
    if isinstance(params, numbers.Real):
        return {"kind": "number"}
    if isinstance(params, str):
        return {"kind": "string", "length": utf16_len(plain_str(params))}
    if isinstance(params, tuple) and _is_named_tuple(params):
        return {"kind": "object"}
    for base in _ARRAYS:
        if isinstance(params, base):
            return {"kind": "array", "length": base.__len__(params)}
    if isinstance(params, Mapping):
        return {"kind": "object"}
    if callable(params):
        return {"kind": "other"}
    return {"kind": "object"}


__all__ = [
    "CompactionLoopPersistedEvent",
    "GuardArmedEvent",
    "LoopEvent",
    "StoreErrorEvent",
    "ToolExecutionBlockedEvent",
    "ToolLoopEvent",
    "params_summary",
]
