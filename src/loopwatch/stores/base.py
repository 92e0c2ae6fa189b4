"""The storage interface behind ``LoopGuard`` (one interface, many backends).

A store keeps, per session key, the history, the warning buckets and the post-compaction
guards of each run. Its operations are shaped so that a networked backend can do each in
one atomic round trip: ``begin_call`` returns the run's history *and* appends the pending
record; ``record_outcome`` fills the record *and* feeds the run's guard. Detection itself
stays in the caller, in pure code shared by every backend.
"""

from __future__ import annotations

import contextlib
from abc import ABC, abstractmethod
from collections.abc import Sequence
from contextlib import AbstractAsyncContextManager, AbstractContextManager
from dataclasses import dataclass
from typing import Final, NamedTuple

from loopwatch.core.outcomes import OutcomeHash
from loopwatch.core.records import ToolCallRecord
from loopwatch.detectors.compaction import GuardSnapshot, GuardVerdict
from loopwatch.errors import StoreError

#: How many runs of one session keep a post-compaction guard: the oldest-created run's guard
#: is dropped beyond (a long-lived session sees many runs; only recent ones are compacted).
#: Every store applies it (the Lua scripts' ``MAX_RUN_GUARDS``).
MAX_RUN_GUARDS: Final = 256


@dataclass(frozen=True, slots=True)
class GuardSpec:
    """How a run's post-compaction guard is built when it does not exist yet (SPEC §6.2)."""

    window_size: int
    enabled: bool


class OutcomeWrite(NamedTuple):
    """One outcome to attach to the history (SPEC §3.6); ``run_id`` is already trimmed.

    A named tuple rather than a frozen dataclass: it is built on every ``after_call``, and
    a named tuple, as immutable, is built four times faster.
    """

    tool_name: str
    args_hash: str
    tool_call_id: str | None
    run_id: str | None
    outcome: OutcomeHash
    history_size: int
    timestamp: int
    #: The detector profile's facts about the outcome: opaque to the store, which keeps
    #: them on the record as they are (``None`` when the profile records none).
    facts: str | None = None


class Store(ABC):
    """Session state for ``LoopGuard``.

    ``now`` is the ``LoopGuard`` clock in epoch seconds; stores use it for idle expiry.
    The async twins default to the sync methods, which is right for in-process stores;
    networked stores override them with real asynchronous I/O.
    """

    #: True when the async twins do real asynchronous I/O (the guard then awaits them).
    native_async: bool = False

    #: What ``LoopGuard`` does when this store raises :class:`StoreError` in
    #: ``before_call``: allow the call (fail-open, the default) or block it (fail-closed).
    fail_open: bool = True

    def session_lock(self, session_key: str) -> AbstractContextManager[object]:
        """A lock that makes one guard operation atomic within this process.

        In-process stores return a real lock, so detection and the writes it decides
        happen as one step; stores whose operations are atomic server-side return a
        no-op context.
        """
        return contextlib.nullcontext()

    def async_session_lock(self, session_key: str) -> AbstractAsyncContextManager[object]:
        """The lock of one guard step on the asyncio path of a store with real asynchronous
        I/O (:attr:`native_async`), for the tasks of the running loop; a no-op by default."""
        return contextlib.nullcontext()

    @abstractmethod
    def begin_call(
        self,
        session_key: str,
        run_id: str | None,
        pending: ToolCallRecord | None,
        history_size: int,
        now: float,
    ) -> Sequence[ToolCallRecord]:
        """Return the run's records as they were, then append ``pending`` (if any) and trim.

        The caller reads the returned records before its next call on the store (``LoopGuard``
        does, under :meth:`session_lock`): a store may return a live view rather than a
        copy. A store may also return a :class:`~loopwatch.detectors.RunHistory` (that is
        also the sequence of records), which ``evaluate`` then asks directly instead of
        scanning the records: the memory store does, from its per-run index.
        """

    @abstractmethod
    def cancel_call(self, session_key: str, pending: ToolCallRecord, now: float) -> None:
        """Take back the pending record of a blocked call (SPEC §5.2: it is not recorded).

        Right after the ``begin_call`` that appended ``pending``, with no other write to
        the session in between (``LoopGuard`` cancels at once), the history becomes exactly
        what it was before that ``begin_call``: the records its append trimmed come back.
        Later, only ``pending`` is removed, if it is still there.
        """

    @abstractmethod
    def update_warning_bucket(self, session_key: str, key: str, bucket: int, now: float) -> bool:
        """Apply the bucket rule of SPEC §5.3; True when the warning is to be emitted."""

    @abstractmethod
    def record_outcome(
        self, session_key: str, write: OutcomeWrite, guard: GuardSpec, now: float
    ) -> tuple[ToolCallRecord, GuardVerdict]:
        """Attach an outcome (it has a hash) and feed the triple to the run's guard."""

    def record_outcome_fields(
        self,
        session_key: str,
        tool_name: str,
        args_hash: str,
        tool_call_id: str | None,
        run_id: str | None,
        result_hash: str,
        unknown_tool_name: str | None,
        history_size: int,
        timestamp: int,
        facts: str | None,
        guard: GuardSpec,
        now: float,
    ) -> tuple[ToolCallRecord, GuardVerdict]:
        """:meth:`record_outcome` of the write these fields make, under :meth:`session_lock`.

        ``LoopGuard.after_call`` records a planned call's outcome through this: the fields
        as it has them, so that a store able to write them as they are (the memory store)
        builds neither the :class:`OutcomeWrite` nor its :class:`OutcomeHash`. An override
        must answer what this default answers; the store contract tests check it for
        every backend.

        An override is never inherited: a subclass that does not define this method
        itself gets this default again (see :meth:`__init_subclass__`), so that a
        shortcut written against its class's own ``record_outcome`` never bypasses a
        subclass's.
        """
        write = OutcomeWrite(
            tool_name,
            args_hash,
            tool_call_id,
            run_id,
            OutcomeHash(result_hash, unknown_tool_name),
            history_size,
            timestamp,
            facts,
        )
        with self.session_lock(session_key):
            return self.record_outcome(session_key, write, guard, now)

    def __init_subclass__(cls, **kwargs: object) -> None:
        """Give every subclass that does not define :meth:`record_outcome_fields` itself
        the default one (which goes through its ``record_outcome``)."""
        super().__init_subclass__(**kwargs)
        if "record_outcome_fields" not in cls.__dict__:
            cls.record_outcome_fields = Store.record_outcome_fields  # type: ignore[method-assign]

    @abstractmethod
    def arm_guard(
        self, session_key: str, run_id: str | None, guard: GuardSpec, now: float
    ) -> GuardSpec:
        """Arm the run's guard, creating it from ``guard`` if needed; returns its real spec."""

    @abstractmethod
    def history(self, session_key: str, now: float) -> tuple[ToolCallRecord, ...]:
        """The session's history, oldest first, without touching the session."""

    @abstractmethod
    def guard_snapshot(self, session_key: str, run_id: str | None, now: float) -> GuardSnapshot:
        """The run's guard state without touching or creating anything."""

    @abstractmethod
    def last_guard_verdict(
        self, session_key: str, run_id: str | None, now: float
    ) -> GuardVerdict | None:
        """The verdict of the run guard's latest observation, if any."""

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release resources (connections); the default has none."""

    # --- async twins -------------------------------------------------------------------

    async def abegin_call(
        self,
        session_key: str,
        run_id: str | None,
        pending: ToolCallRecord | None,
        history_size: int,
        now: float,
    ) -> Sequence[ToolCallRecord]:
        return self.begin_call(session_key, run_id, pending, history_size, now)

    async def acancel_call(self, session_key: str, pending: ToolCallRecord, now: float) -> None:
        self.cancel_call(session_key, pending, now)

    async def aupdate_warning_bucket(
        self, session_key: str, key: str, bucket: int, now: float
    ) -> bool:
        return self.update_warning_bucket(session_key, key, bucket, now)

    async def arecord_outcome(
        self, session_key: str, write: OutcomeWrite, guard: GuardSpec, now: float
    ) -> tuple[ToolCallRecord, GuardVerdict]:
        return self.record_outcome(session_key, write, guard, now)

    async def aarm_guard(
        self, session_key: str, run_id: str | None, guard: GuardSpec, now: float
    ) -> GuardSpec:
        return self.arm_guard(session_key, run_id, guard, now)

    async def ahistory(self, session_key: str, now: float) -> tuple[ToolCallRecord, ...]:
        return self.history(session_key, now)

    async def aguard_snapshot(
        self, session_key: str, run_id: str | None, now: float
    ) -> GuardSnapshot:
        return self.guard_snapshot(session_key, run_id, now)

    async def alast_guard_verdict(
        self, session_key: str, run_id: str | None, now: float
    ) -> GuardVerdict | None:
        return self.last_guard_verdict(session_key, run_id, now)

    async def aclose(self) -> None:
        self.close()


__all__ = ["GuardSpec", "OutcomeWrite", "Store", "StoreError"]
