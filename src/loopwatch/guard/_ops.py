"""Typed store operations and the two drivers that run them (sans-I/O).

An operation of the engine (``before_call``'s detection, ``after_call``'s write, the arm of a
guard) is written once, as a generator that yields the store calls it needs and receives
their replies. A sync driver (:func:`drive`) and an async one (:func:`adrive`) perform the
calls, so ``before_call`` and ``abefore_call`` share every line of logic. Each store call is
a typed value with a ``run`` and an ``arun``: the type checker sees the calls and replies,
and a misspelt operation is an ``AttributeError`` at once, never a silent fail-open.

Named tuples, not dataclasses: one is built per store call, and a tuple is the cheapest
immutable object to build.
"""

from __future__ import annotations

from collections.abc import Generator, Sequence
from typing import Any, NamedTuple, TypeVar

from loopwatch.core.records import ToolCallRecord
from loopwatch.detectors.compaction import GuardVerdict
from loopwatch.stores.base import GuardSpec, OutcomeWrite, Store


class BeginCall(NamedTuple):
    """Read the run's records, then append the pending record (SPEC §5.2 steps 4–6)."""

    session_key: str
    run_id: str | None
    pending: ToolCallRecord | None
    history_size: int
    now: float

    def run(self, store: Store) -> Sequence[ToolCallRecord]:
        return store.begin_call(*self)

    async def arun(self, store: Store) -> Sequence[ToolCallRecord]:
        return await store.abegin_call(*self)


class CancelCall(NamedTuple):
    """Take back a blocked call's pending record (SPEC §5.2: it is never recorded)."""

    session_key: str
    pending: ToolCallRecord
    now: float

    def run(self, store: Store) -> None:
        store.cancel_call(*self)

    async def arun(self, store: Store) -> None:
        await store.acancel_call(*self)


class UpdateBucket(NamedTuple):
    """Apply the warning bucket rule (SPEC §5.3); the reply says whether to emit."""

    session_key: str
    key: str
    bucket: int
    now: float

    def run(self, store: Store) -> bool:
        return store.update_warning_bucket(*self)

    async def arun(self, store: Store) -> bool:
        return await store.aupdate_warning_bucket(*self)


class RecordOutcome(NamedTuple):
    """Attach an outcome and feed the run's post-compaction guard (SPEC §5.4, §6.2)."""

    session_key: str
    write: OutcomeWrite
    guard: GuardSpec
    now: float

    def run(self, store: Store) -> tuple[ToolCallRecord, GuardVerdict]:
        return store.record_outcome(*self)

    async def arun(self, store: Store) -> tuple[ToolCallRecord, GuardVerdict]:
        return await store.arecord_outcome(*self)


class ArmGuard(NamedTuple):
    """Arm the run's post-compaction guard (SPEC §6.2); the reply is its real spec."""

    session_key: str
    run_id: str | None
    guard: GuardSpec
    now: float

    def run(self, store: Store) -> GuardSpec:
        return store.arm_guard(*self)

    async def arun(self, store: Store) -> GuardSpec:
        return await store.aarm_guard(*self)


StoreOp = BeginCall | CancelCall | UpdateBucket | RecordOutcome | ArmGuard
_T = TypeVar("_T")
#: An operation: yields store calls, receives each reply, returns its result.
Steps = Generator[StoreOp, Any, _T]


def drive(store: Store, session_key: str, steps: Steps[_T]) -> _T:
    """Run an operation's store calls synchronously, atomically for the session."""
    with store.session_lock(session_key):
        try:
            op = next(steps)
            while True:
                op = steps.send(op.run(store))
        except StopIteration as done:
            result: _T = done.value
            return result


async def adrive(store: Store, session_key: str, steps: Steps[_T]) -> _T:
    """The async twin of :func:`drive`; in-process stores run synchronously.

    A store with real asynchronous I/O makes each call atomic on its side (a Lua script);
    its :meth:`~loopwatch.stores.base.Store.async_session_lock` (an asyncio lock, never a
    thread lock) keeps the tasks of one loop from landing between the calls of one step.
    """
    if not store.native_async:
        return drive(store, session_key, steps)
    async with store.async_session_lock(session_key):
        try:
            op = next(steps)
            while True:
                op = steps.send(await op.arun(store))
        except StopIteration as done:
            result: _T = done.value
            return result


def drive_one(store: Store, session_key: str, op: StoreOp) -> Any:
    """Perform an operation that is a single store call."""
    with store.session_lock(session_key):
        return op.run(store)


async def adrive_one(store: Store, session_key: str, op: StoreOp) -> Any:
    """The async twin of :func:`drive_one`."""
    if not store.native_async:
        return drive_one(store, session_key, op)
    async with store.async_session_lock(session_key):
        return await op.arun(store)


__all__ = [
    "ArmGuard",
    "BeginCall",
    "CancelCall",
    "RecordOutcome",
    "Steps",
    "StoreOp",
    "UpdateBucket",
    "adrive",
    "adrive_one",
    "drive",
    "drive_one",
]
