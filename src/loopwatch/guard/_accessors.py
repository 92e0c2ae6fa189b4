"""The read-only accessors of ``LoopGuard`` (SPEC §9.4): they never touch or create a session.

They are inspection APIs (tests, dashboards, ``loopwatch serve``), not part of a tool
call, so they do not fail open: an answer made up after a failure (an empty history, an
unarmed guard) would read as the truth. Instead every failure reaches the caller as one
typed :class:`~loopwatch.errors.StoreError`: the store's own ``StoreError`` as it is,
anything else (a clock that raises, a store of the host's that raises another exception or
answers something else than the contract's type) wrapped in one, the original exception as
its ``__cause__``. The adapters never call them on a tool call's path.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from typing import TYPE_CHECKING, TypeVar

from loopwatch import messages
from loopwatch.core.records import ToolCallRecord
from loopwatch.detectors.compaction import GuardSnapshot, GuardVerdict
from loopwatch.errors import StoreError
from loopwatch.guard._keys import plain_session_key, safe_run_id
from loopwatch.guard._policy import UnhashableValueError, error_text

if TYPE_CHECKING:
    from loopwatch.guard.loopguard import LoopGuard

T = TypeVar("T")

UNARMED = GuardSnapshot(armed=False, remaining_attempts=0)


def _wrapped(accessor: str, exc: Exception) -> StoreError:
    return StoreError(messages.ACCESSOR_FAILED.format(accessor=accessor, error=error_text(exc)))


def _cause(exc: Exception) -> Exception:
    """The host's own exception: a clock's, not the :class:`ClockError` that carried it."""
    cause = exc.__cause__ if isinstance(exc, UnhashableValueError) else None
    return cause if isinstance(cause, Exception) else exc


def _records(reply: object) -> tuple[ToolCallRecord, ...]:
    if type(reply) is tuple and all(type(record) is ToolCallRecord for record in reply):
        return reply  # what every built-in store answers
    if not isinstance(reply, Iterable):
        raise TypeError(f"the store's history returned {type(reply).__name__}")
    records: list[ToolCallRecord] = []
    for record in reply:
        if not isinstance(record, ToolCallRecord):
            raise TypeError(f"the store's history held a {type(record).__name__}")
        records.append(record)
    return tuple(records)


def _snapshot(reply: object) -> GuardSnapshot:
    if not isinstance(reply, GuardSnapshot):
        raise TypeError(f"the store's guard_snapshot returned {type(reply).__name__}")
    return reply


def _verdict(reply: object) -> GuardVerdict | None:
    if reply is not None and not isinstance(reply, GuardVerdict):
        raise TypeError(f"the store's last_guard_verdict returned {type(reply).__name__}")
    return reply


def _read(accessor: str, read: Callable[[], object], check: Callable[[object], T]) -> T:
    """``check(read())``: the one place an accessor's failures become a ``StoreError``."""
    try:
        return check(read())
    except StoreError:
        raise
    except Exception as exc:
        raise _wrapped(accessor, exc) from _cause(exc)


async def _aread(
    accessor: str, read: Callable[[], Awaitable[object]], check: Callable[[object], T]
) -> T:
    """Async twin of :func:`_read`."""
    try:
        return check(await read())
    except StoreError:
        raise
    except Exception as exc:
        raise _wrapped(accessor, exc) from _cause(exc)


def history(guard: LoopGuard, *, session_key: object) -> tuple[ToolCallRecord, ...]:
    """A copy of the session's history, all runs, oldest first.

    Raises:
        StoreError: the store or the clock failed.
    """
    key = plain_session_key(session_key)
    if key is None:
        return ()
    return _read("history", lambda: guard._store.history(key, guard._now()), _records)


def guard_snapshot(
    guard: LoopGuard, *, session_key: object, run_id: object = None, agent_id: object = None
) -> GuardSnapshot:
    """The run's guard state; unarmed with 0 attempts when it has no guard yet.

    Raises:
        StoreError: the store or the clock failed.
    """
    key = plain_session_key(session_key)
    if key is None:
        return UNARMED
    run = safe_run_id(run_id)
    return _read(
        "guard_snapshot", lambda: guard._store.guard_snapshot(key, run, guard._now()), _snapshot
    )


def last_guard_verdict(
    guard: LoopGuard, *, session_key: object, run_id: object = None
) -> GuardVerdict | None:
    """The verdict of the run guard's latest observation, or ``None``.

    Raises:
        StoreError: the store or the clock failed.
    """
    key = plain_session_key(session_key)
    if key is None:
        return None
    run = safe_run_id(run_id)
    return _read(
        "last_guard_verdict",
        lambda: guard._store.last_guard_verdict(key, run, guard._now()),
        _verdict,
    )


async def ahistory(guard: LoopGuard, *, session_key: object) -> tuple[ToolCallRecord, ...]:
    """Async twin of :meth:`history`."""
    key = plain_session_key(session_key)
    if key is None:
        return ()
    return await _aread("history", lambda: guard._store.ahistory(key, guard._now()), _records)


async def aguard_snapshot(
    guard: LoopGuard, *, session_key: object, run_id: object = None, agent_id: object = None
) -> GuardSnapshot:
    """Async twin of :meth:`guard_snapshot`."""
    key = plain_session_key(session_key)
    if key is None:
        return UNARMED
    run = safe_run_id(run_id)
    return await _aread(
        "guard_snapshot", lambda: guard._store.aguard_snapshot(key, run, guard._now()), _snapshot
    )


async def alast_guard_verdict(
    guard: LoopGuard, *, session_key: object, run_id: object = None
) -> GuardVerdict | None:
    """Async twin of :meth:`last_guard_verdict`."""
    key = plain_session_key(session_key)
    if key is None:
        return None
    run = safe_run_id(run_id)
    return await _aread(
        "last_guard_verdict",
        lambda: guard._store.alast_guard_verdict(key, run, guard._now()),
        _verdict,
    )


__all__ = [
    "aguard_snapshot",
    "ahistory",
    "alast_guard_verdict",
    "guard_snapshot",
    "history",
    "last_guard_verdict",
]
