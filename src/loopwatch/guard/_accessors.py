"""The read-only accessors of ``LoopGuard`` (SPEC §9.4): they never touch or create a session."""

from __future__ import annotations

from typing import TYPE_CHECKING

from loopwatch.core.records import ToolCallRecord
from loopwatch.detectors.compaction import GuardSnapshot, GuardVerdict
from loopwatch.guard._keys import plain_session_key, safe_run_id

if TYPE_CHECKING:
    from loopwatch.guard.loopguard import LoopGuard


def history(guard: LoopGuard, *, session_key: object) -> tuple[ToolCallRecord, ...]:
    """A copy of the session's history, all runs, oldest first."""
    key = plain_session_key(session_key)
    if key is None:
        return ()
    return guard._store.history(key, guard._now())


def guard_snapshot(
    guard: LoopGuard, *, session_key: object, run_id: object = None, agent_id: object = None
) -> GuardSnapshot:
    """The run's guard state; unarmed with 0 attempts when it has no guard yet."""
    key = plain_session_key(session_key)
    if key is None:
        return GuardSnapshot(armed=False, remaining_attempts=0)
    return guard._store.guard_snapshot(key, safe_run_id(run_id), guard._now())


def last_guard_verdict(
    guard: LoopGuard, *, session_key: object, run_id: object = None
) -> GuardVerdict | None:
    """The verdict of the run guard's latest observation, or ``None``."""
    key = plain_session_key(session_key)
    if key is None:
        return None
    return guard._store.last_guard_verdict(key, safe_run_id(run_id), guard._now())


async def ahistory(guard: LoopGuard, *, session_key: object) -> tuple[ToolCallRecord, ...]:
    """Async twin of :meth:`history`."""
    key = plain_session_key(session_key)
    if key is None:
        return ()
    return await guard._store.ahistory(key, guard._now())


async def aguard_snapshot(
    guard: LoopGuard, *, session_key: object, run_id: object = None, agent_id: object = None
) -> GuardSnapshot:
    """Async twin of :meth:`guard_snapshot`."""
    key = plain_session_key(session_key)
    if key is None:
        return GuardSnapshot(armed=False, remaining_attempts=0)
    return await guard._store.aguard_snapshot(key, safe_run_id(run_id), guard._now())


async def alast_guard_verdict(
    guard: LoopGuard, *, session_key: object, run_id: object = None
) -> GuardVerdict | None:
    """Async twin of :meth:`last_guard_verdict`."""
    key = plain_session_key(session_key)
    if key is None:
        return None
    return await guard._store.alast_guard_verdict(key, safe_run_id(run_id), guard._now())


__all__ = [
    "aguard_snapshot",
    "ahistory",
    "alast_guard_verdict",
    "guard_snapshot",
    "history",
    "last_guard_verdict",
]
