"""A run's lifecycle beyond single calls: critical strikes, compaction retries, the abort.

``LoopGuard.critical_strike`` (the recovery policy of adapters and hooks: the first
critical of a run is answered, a later one ends it) and ``LoopGuard.compaction_retry``
(arming the run's post-compaction guard, SPEC §6.2) are these functions, with their async
twins. Both keep their state in the store, so processes sharing a store share it.
:func:`abort_after` raises the post-compaction abort an outcome's guard verdict calls for.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Final, NoReturn

from loopwatch import messages
from loopwatch.core.records import ToolCallRecord
from loopwatch.detectors.compaction import GuardVerdict, log_abort, log_armed
from loopwatch.errors import PostCompactionLoopPersistedError, StoreError
from loopwatch.guard import _policy
from loopwatch.guard._keys import safe_run_id
from loopwatch.guard._ops import ArmGuard, UpdateBucket, adrive_one, drive_one
from loopwatch.guard._policy import UnhashableValueError, error_text
from loopwatch.stores.base import GuardSpec

if TYPE_CHECKING:
    from loopwatch.guard.loopguard import LoopGuard

tools_logger = logging.getLogger("loopwatch.tools")

#: The warning-bucket key under which a run's critical strikes are counted.
STRIKE_KEY: Final = "loopwatch:critical-strike"


def strike_op(guard: LoopGuard, key: str, run_id: object) -> UpdateBucket:
    run = safe_run_id(run_id)
    return UpdateBucket(key, f"{run}:{STRIKE_KEY}", 1, guard._now())


def critical_strike(guard: LoopGuard, *, session_key: object, run_id: object = None) -> int:
    """Count one critical block of a run; returns 1 for its first, 2 for any later.

    The count lives in the store (a warning-bucket key per run), so processes that
    share a store (hooks) share it. On a store failure it answers 1: a broken store
    never ends a run by accident.
    """
    key = guard._accepts(session_key)
    if key is None:
        return 1
    try:
        first = drive_one(guard._store, key, strike_op(guard, key, run_id))
    except Exception as exc:
        strike_failed(guard, key, exc)
        return 1
    return 1 if first else 2


async def acritical_strike(guard: LoopGuard, *, session_key: object, run_id: object = None) -> int:
    """Async twin of :meth:`critical_strike`."""
    key = guard._accepts(session_key)
    if key is None:
        return 1
    try:
        first = await adrive_one(guard._store, key, strike_op(guard, key, run_id))
    except Exception as exc:
        strike_failed(guard, key, exc)
        return 1
    return 1 if first else 2


def strike_failed(guard: LoopGuard, session_key: str, exc: Exception) -> None:
    if isinstance(exc, StoreError):
        _policy.store_failed(guard, session_key, "", "critical_strike", exc)
    else:
        _policy.internal_error(guard, guard._detection_failed, "", exc)


def checked_spec(actual: object) -> GuardSpec:
    """The spec a store's ``arm_guard`` returned, checked inside the failure policy."""
    if isinstance(actual, GuardSpec):
        return actual
    raise TypeError(f"the store's arm_guard returned {type(actual).__name__}")


def arm_op(guard: LoopGuard, session_key: str, run: str | None, agent_id: object) -> ArmGuard:
    _block, resolved = guard.block_for(agent_id)
    return ArmGuard(session_key, run, guard._guard_spec(resolved), guard._now())


def armed(guard: LoopGuard, session_key: str, run: str | None, actual: GuardSpec | None) -> None:
    if actual is None:
        return
    # Imported where it is built: a process that never arms a guard never loads the events.
    from loopwatch.events import GuardArmedEvent

    if actual.enabled:
        log_armed(actual.window_size)
    guard._emit(
        GuardArmedEvent(
            session_key=session_key,
            window_size=actual.window_size,
            enabled=actual.enabled,
            run_id=run,
        )
    )


def arm_failed(guard: LoopGuard, session_key: str, exc: Exception) -> None:
    if isinstance(exc, StoreError):
        _policy.store_failed(guard, session_key, "", "compaction_retry", exc)
    elif guard.strict and not isinstance(exc, UnhashableValueError):
        raise exc
    else:
        tools_logger.warning(messages.LOG_COMPACTION_RETRY_FAILED.format(error=error_text(exc)))


def compaction_retry(
    guard: LoopGuard, *, session_key: object, run_id: object = None, agent_id: object = None
) -> None:
    """Arm the run's post-compaction guard: call it on every retry after a compaction."""
    key = guard._accepts(session_key)
    if key is None:
        return
    run = safe_run_id(run_id)
    actual: GuardSpec | None = None
    try:
        actual = checked_spec(drive_one(guard._store, key, arm_op(guard, key, run, agent_id)))
    except Exception as exc:
        arm_failed(guard, key, exc)
    armed(guard, key, run, actual)


async def acompaction_retry(
    guard: LoopGuard, *, session_key: object, run_id: object = None, agent_id: object = None
) -> None:
    """Async twin of :meth:`compaction_retry`."""
    key = guard._accepts(session_key)
    if key is None:
        return
    run = safe_run_id(run_id)
    actual: GuardSpec | None = None
    try:
        actual = checked_spec(
            await adrive_one(guard._store, key, arm_op(guard, key, run, agent_id))
        )
    except Exception as exc:
        arm_failed(guard, key, exc)
    armed(guard, key, run, actual)


def abort_after(
    guard: LoopGuard, session_key: str, record: ToolCallRecord, verdict: GuardVerdict
) -> NoReturn:
    """Raise the post-compaction abort an outcome's guard verdict calls for (SPEC §6.2),
    after its log line and its event: ``after_call``'s one deliberate exception."""
    from loopwatch.events import CompactionLoopPersistedEvent

    log_abort(verdict)
    error = PostCompactionLoopPersistedError.from_verdict(verdict, record)
    guard._emit(
        CompactionLoopPersistedEvent(
            session_key=session_key,
            tool_name=error.tool_name,
            count=error.count,
            message=error.message,
            run_id=record.run_id,
        )
    )
    raise error


__all__ = [
    "STRIKE_KEY",
    "abort_after",
    "acompaction_retry",
    "acritical_strike",
    "compaction_retry",
    "critical_strike",
]
