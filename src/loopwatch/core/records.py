"""The rolling call history of a session (SPEC §1, §3.6).

Records hold digests only, never raw arguments or results: this is what lets loopwatch
keep state in shared stores without leaking tool data.
"""

from __future__ import annotations

import time
from collections.abc import Collection
from dataclasses import dataclass, field

from loopwatch.config import resolve_config
from loopwatch.core._undefined import UNDEFINED
from loopwatch.core.fingerprint import hash_tool_call
from loopwatch.core.naming import normalize_run_id
from loopwatch.core.outcomes import OutcomeHash, hash_tool_outcome


@dataclass(frozen=True, slots=True, init=False)
class ToolCallRecord:
    """One tool call as the detectors see it.

    A record without ``result_hash`` is pending: its outcome is not known (yet).
    """

    tool_name: str
    args_hash: str
    tool_call_id: str | None = None
    run_id: str | None = None
    result_hash: str | None = None
    unknown_tool_name: str | None = None
    timestamp: int = 0
    #: What the detector profile knows of the call and its outcome (digests and flags,
    #: see :mod:`loopwatch.detectors.profiles`): opaque to the stores, which keep it as
    #: it is; ``None`` when the profile records none (the reference profile).
    facts: str | None = None

    def __init__(
        self,
        tool_name: str,
        args_hash: str,
        tool_call_id: str | None = None,
        run_id: str | None = None,
        result_hash: str | None = None,
        unknown_tool_name: str | None = None,
        timestamp: int = 0,
        facts: str | None = None,
    ) -> None:
        # What a frozen dataclass's generated __init__ does (one object.__setattr__ a
        # field), with each field's slot written through its own descriptor: two records
        # are built on every guarded call, and this is twice as fast.
        _set_tool_name(self, tool_name)
        _set_args_hash(self, args_hash)
        _set_tool_call_id(self, tool_call_id)
        _set_run_id(self, run_id)
        _set_result_hash(self, result_hash)
        _set_unknown_tool_name(self, unknown_tool_name)
        _set_timestamp(self, timestamp)
        _set_facts(self, facts)


#: The fields of :class:`ToolCallRecord`, in the order of its ``__init__``.
_RECORD_FIELDS = (
    "tool_name",
    "args_hash",
    "tool_call_id",
    "run_id",
    "result_hash",
    "unknown_tool_name",
    "timestamp",
    "facts",
)
# The slot descriptors' setters (the frozen class's __setattr__ refuses every write).
(
    _set_tool_name,
    _set_args_hash,
    _set_tool_call_id,
    _set_run_id,
    _set_result_hash,
    _set_unknown_tool_name,
    _set_timestamp,
    _set_facts,
) = (vars(ToolCallRecord)[name].__set__ for name in _RECORD_FIELDS)


class RecordDraft:
    """A :class:`ToolCallRecord` being built: the same slots, writable.

    Its fields are plain attribute writes, a fifth the cost of the descriptor writes of
    ``ToolCallRecord.__init__``; assigning ``__class__ = ToolCallRecord`` (allowed: the very
    same slots) then makes it the record it stands for, as frozen as any. How the guard builds
    its pending record and the memory store the filled one, once each on every guarded call;
    every field must be written.
    """

    __slots__ = _RECORD_FIELDS

    tool_name: str
    args_hash: str
    tool_call_id: str | None
    run_id: str | None
    result_hash: str | None
    unknown_tool_name: str | None
    timestamp: int
    facts: str | None


@dataclass
class SessionState:
    """The mutable state the reference keeps per session key.

    ``warning_buckets`` is insertion ordered (SPEC §5.3); the post-compaction guards of a
    session live beside it in the session engine.
    """

    history: list[ToolCallRecord] = field(default_factory=list)
    warning_buckets: dict[str, int] = field(default_factory=dict)


def now_ms() -> int:
    """Epoch milliseconds, the reference's record timestamp."""
    return int(time.time() * 1000)


def trim_history(history: list[ToolCallRecord], history_size: int) -> None:
    """Keep the newest ``history_size`` records, across all runs."""
    excess = len(history) - history_size
    if excess > 0:
        del history[:excess]


def append_call(history: list[ToolCallRecord], record: ToolCallRecord, history_size: int) -> None:
    """Append a pending call record and trim (SPEC §3.6 "record call")."""
    history.append(record)
    trim_history(history, history_size)


def apply_outcome(
    history: list[ToolCallRecord],
    *,
    tool_name: str,
    args_hash: str,
    tool_call_id: str | None,
    run_id: str | None,
    outcome: OutcomeHash,
    history_size: int,
    timestamp: int,
    facts: str | None = None,
) -> ToolCallRecord | None:
    """Fill the newest matching pending record, or append a complete one (SPEC §3.6).

    ``run_id`` must already be normalised. Returns the record now in the history, or
    ``None`` when the outcome has no hash (nothing changes).
    """
    if outcome.result_hash is None:
        return None
    match_id = bool(tool_call_id)
    for index in range(len(history) - 1, -1, -1):
        candidate = history[index]
        if (
            candidate.result_hash is None
            and candidate.args_hash == args_hash
            and candidate.tool_name == tool_name
            and candidate.run_id == run_id
            and (not match_id or candidate.tool_call_id == tool_call_id)
        ):
            # Built directly: dataclasses.replace costs three times as much.
            filled = ToolCallRecord(
                candidate.tool_name,
                candidate.args_hash,
                candidate.tool_call_id,
                candidate.run_id,
                outcome.result_hash,
                outcome.unknown_tool_name,
                candidate.timestamp,
                facts,
            )
            history[index] = filled
            trim_history(history, history_size)
            return filled
    record = ToolCallRecord(
        tool_name=tool_name,
        args_hash=args_hash,
        tool_call_id=tool_call_id,
        run_id=run_id,
        result_hash=outcome.result_hash,
        unknown_tool_name=outcome.unknown_tool_name,
        timestamp=timestamp,
        facts=facts,
    )
    history.append(record)
    trim_history(history, history_size)
    return record


def record_tool_call(
    state: SessionState,
    tool_name: str,
    params: object,
    tool_call_id: str | None = None,
    config: object = None,
    *,
    run_id: object = None,
    normalizers: Collection[str] = (),
) -> None:
    """Record that a call is about to run (a pending record), then trim the history.

    Raises:
        TypeError: the params cannot be serialised (SPEC §8.5).
    """
    resolved = resolve_config(config)
    record = ToolCallRecord(
        tool_name=tool_name,
        args_hash=hash_tool_call(tool_name, params, normalizers=normalizers),
        tool_call_id=tool_call_id,
        run_id=normalize_run_id(run_id),
        timestamp=now_ms(),
    )
    append_call(state.history, record, resolved.history_size)


def record_tool_call_outcome(
    state: SessionState,
    tool_name: str,
    params: object,
    *,
    tool_call_id: str | None = None,
    result: object = UNDEFINED,
    error: object = UNDEFINED,
    config: object = None,
    run_id: object = None,
    send_tools: Collection[str] = (),
    normalizers: Collection[str] = (),
) -> ToolCallRecord | None:
    """Attach a call's outcome to its pending record (or append a complete record).

    Returns:
        The record now in the history, or ``None`` when the outcome is not hashed
        (an ``UNDEFINED`` result or the loop veto).

    Raises:
        TypeError: the params, result or error cannot be serialised (SPEC §8.5).
    """
    outcome = hash_tool_outcome(
        tool_name,
        params,
        result=result,
        error=error,
        send_tools=send_tools,
        normalizers=normalizers,
    )
    if outcome.result_hash is None:
        return None
    resolved = resolve_config(config)
    return apply_outcome(
        state.history,
        tool_name=tool_name,
        args_hash=hash_tool_call(tool_name, params, normalizers=normalizers),
        tool_call_id=tool_call_id,
        run_id=normalize_run_id(run_id),
        outcome=outcome,
        history_size=resolved.history_size,
        timestamp=now_ms(),
    )


__all__ = [
    "SessionState",
    "ToolCallRecord",
    "append_call",
    "apply_outcome",
    "now_ms",
    "record_tool_call",
    "record_tool_call_outcome",
    "trim_history",
]
