"""The in-process store (SPEC §1): the default for one worker process.

Sessions live in an LRU map with lazy idle expiry (no background thread). One re-entrant
lock serialises every operation, so parallel tool calls of a session, from threads or
asyncio tasks, lose no record; operations take microseconds, so one lock is enough.

A session's history is kept compact and indexed per run
(:mod:`~loopwatch.stores.memory._history`, :mod:`~loopwatch.stores.memory._runs`), so that
a call costs the same whatever the history size: ``begin_call`` hands the detectors a live
view of the run instead of a copy.
"""

from __future__ import annotations

import numbers
import threading
from collections import OrderedDict
from contextlib import AbstractContextManager
from typing import Any, Final

from loopwatch.core.fingerprint import signature_digest
from loopwatch.core.outcomes import OutcomeHash
from loopwatch.core.records import RecordDraft, ToolCallRecord
from loopwatch.detectors.compaction import (
    IDLE_VERDICT,
    GuardSnapshot,
    GuardVerdict,
    PostCompactionGuard,
)
from loopwatch.stores.base import MAX_RUN_GUARDS, GuardSpec, OutcomeWrite, Store
from loopwatch.stores.memory._compact import call_key
from loopwatch.stores.memory._history import SessionHistory
from loopwatch.stores.memory._runs import NO_RECORDS, RunView

#: A session keeps at most this many warning keys; the oldest is forgotten first.
MAX_WARNING_KEYS: Final = 256

_NO_GUARD: Final = GuardSnapshot(armed=False, remaining_attempts=0)
_new_object: Final = object.__new__
#: ``tuple.__new__``: what a named tuple's generated ``__new__`` calls.
_new_tuple: Final = tuple.__new__


class _RunGuard:
    """The post-compaction guard of one run (SPEC §6.2), built when first armed.

    Until then it is only the spec it will be built from (the guard's configuration is
    fixed by the first call that needed it): an unarmed guard answers every observation
    with :data:`IDLE_VERDICT` and has nothing else to remember.
    """

    __slots__ = ("guard", "verdict")

    def __init__(self, spec: GuardSpec) -> None:
        self.guard: PostCompactionGuard | GuardSpec = spec
        #: The verdict of the latest observation (``last_guard_verdict``).
        self.verdict: GuardVerdict | None = None

    def observe(self, tool_name: str, args_hash: str, result_hash: str) -> GuardVerdict:
        guard = self.guard
        if isinstance(guard, PostCompactionGuard):
            verdict = guard.observe_quietly(tool_name, args_hash, result_hash)
        else:
            verdict = IDLE_VERDICT
        self.verdict = verdict
        return verdict

    def arm(self) -> PostCompactionGuard:
        guard = self.guard
        if not isinstance(guard, PostCompactionGuard):
            guard = PostCompactionGuard(window_size=guard.window_size, enabled=guard.enabled)
            self.guard = guard
        guard.arm_quietly()
        return guard

    def snapshot(self) -> GuardSnapshot:
        guard = self.guard
        return guard.snapshot() if isinstance(guard, PostCompactionGuard) else _NO_GUARD


class _Session:
    __slots__ = ("buckets", "guards", "history", "touched")

    def __init__(self) -> None:
        self.history = SessionHistory()
        #: Warning buckets (SPEC §5.3), insertion ordered; ``None`` until the first one.
        self.buckets: dict[str, int] | None = None
        #: Post-compaction guards by run id; ``None`` until the first one.
        self.guards: dict[str | None, _RunGuard] | None = None
        self.touched = 0.0


#: The append of a ``begin_call``, applied by the store's next operation: the session's
#: key and object, the pending record, the history size and the pending record's call key
#: (computed once for the view and the append). A plain tuple, not a slotted class: one is
#: built on every guarded call, and a tuple display costs a quarter of a class's
#: ``__init__`` (90 against 320 ns).
_Postponed = tuple[str, _Session, ToolCallRecord, int, bytes | str]


class MemoryStore(Store):
    """Sessions in this process's memory, least recently touched dropped first.

    Args:
        max_sessions: how many sessions to keep; a new session beyond it evicts the least
            recently touched one.
        idle_ttl_s: forget a session untouched for longer than this (``None``: never).
    """

    def __init__(self, *, max_sessions: int = 2000, idle_ttl_s: float | None = 1800.0) -> None:
        if isinstance(max_sessions, bool) or not isinstance(max_sessions, int) or max_sessions < 1:
            raise ValueError("max_sessions must be an integer >= 1")
        if idle_ttl_s is not None and (
            isinstance(idle_ttl_s, bool)
            or not isinstance(idle_ttl_s, numbers.Real)
            or not idle_ttl_s > 0
        ):
            raise ValueError("idle_ttl_s must be a positive number of seconds or None")
        self.max_sessions = max_sessions
        self.idle_ttl_s = None if idle_ttl_s is None else float(idle_ttl_s)
        self._sessions: OrderedDict[str, _Session] = OrderedDict()
        self._lock = threading.RLock()
        self._postponed: _Postponed | None = None

    def __len__(self) -> int:
        return len(self._sessions)

    def session_lock(self, session_key: str) -> AbstractContextManager[object]:
        return self._lock

    # --- session lookup --------------------------------------------------------------

    def _expired(self, session: _Session, now: float) -> bool:
        return self.idle_ttl_s is not None and now - session.touched > self.idle_ttl_s

    def _peek(self, session_key: str, now: float) -> _Session | None:
        """The live session, without touching it (read-only accessors)."""
        if self._postponed is not None:
            self._settle()
        session = self._sessions.get(session_key)
        if session is None or self._expired(session, now):
            return None
        return session

    def _touch(self, session_key: str, now: float) -> _Session:
        """The live session, created if needed, marked most recently used."""
        if self._postponed is not None:
            self._settle()
        sessions = self._sessions
        session = sessions.get(session_key)
        ttl = self.idle_ttl_s
        if session is not None and ttl is not None and now - session.touched > ttl:
            del sessions[session_key]
            session = None
        if session is None:
            self._evict(now)
            session = _Session()
            sessions[session_key] = session
        else:
            sessions.move_to_end(session_key)
        session.touched = now
        return session

    def _evict(self, now: float) -> None:
        sessions = self._sessions
        # Oldest first: expired sessions sit at the front of the LRU order.
        while sessions:
            oldest = next(iter(sessions.values()))
            if not self._expired(oldest, now):
                break
            sessions.popitem(last=False)
        while len(sessions) >= self.max_sessions:
            sessions.popitem(last=False)

    def _settle(self) -> None:
        """Apply the append that the latest ``begin_call`` postponed, if any.

        Every operation starts here (through :meth:`_touch` or :meth:`_peek`), so nothing
        can observe the history without it.
        """
        postponed = self._postponed
        if postponed is not None:  # (callers check first: this runs on every operation)
            self._postponed = None
            _key, session, pending, history_size, key = postponed
            session.history.append(pending, history_size, key)

    # --- operations ------------------------------------------------------------------

    def begin_call(
        self,
        session_key: str,
        run_id: str | None,
        pending: ToolCallRecord | None,
        history_size: int,
        now: float,
    ) -> RunView:
        """The run's records as they were, then (see below) append ``pending`` and trim.

        Returns a live view instead of a copy, and postpones the append to the store's
        next operation, which applies it first: until then the view shows the run as it
        was, and a ``cancel_call`` of this very record only has to drop it, which leaves
        the history exactly as it was (no record trimmed to make room for it either).
        ``LoopGuard`` reads the view and cancels a blocked call at once, under
        :meth:`session_lock`, so nothing comes between.
        """
        with self._lock:
            # _touch, inlined for the usual call: nothing postponed (the previous call's
            # outcome completed it), a live session.
            session = None if self._postponed is not None else self._sessions.get(session_key)
            ttl = self.idle_ttl_s
            if session is None or (ttl is not None and now - session.touched > ttl):
                session = self._touch(session_key, now)
            else:
                self._sessions.move_to_end(session_key)
                session.touched = now
            if pending is None:
                return session.history.view(run_id)
            # The detectors ask about the pending record's call: its key serves both.
            tool_name = pending.tool_name
            args_hash = pending.args_hash
            # (call_key's first answer, inlined: the args hash the guard just made)
            raw = signature_digest(tool_name, args_hash) if type(tool_name) is str else None
            key = raw if raw is not None else call_key(tool_name, args_hash)
            self._postponed = (session_key, session, pending, history_size, key)
            # SessionHistory.view, inlined (once per guarded call), and RunView's __init__
            view = _new_object(RunView)
            view._run = session.history.runs.get(run_id, NO_RECORDS)
            view._query = (tool_name, args_hash, key)
            return view

    def cancel_call(self, session_key: str, pending: ToolCallRecord, now: float) -> None:
        with self._lock:
            postponed = self._postponed
            if postponed is not None and postponed[2] is pending and postponed[0] == session_key:
                # Never appended: the history is as it was, trimmed records included.
                self._postponed = None
                self._touch(session_key, now)
                return
            self._touch(session_key, now).history.cancel(pending)

    def update_warning_bucket(self, session_key: str, key: str, bucket: int, now: float) -> bool:
        with self._lock:
            session = self._touch(session_key, now)
            buckets = session.buckets
            if buckets is None:
                buckets = session.buckets = {}
            if bucket <= buckets.get(key, 0):
                return False
            buckets[key] = bucket
            if len(buckets) > MAX_WARNING_KEYS:
                del buckets[next(iter(buckets))]
            return True

    @staticmethod
    def _run_guard(session: _Session, run_id: str | None, spec: GuardSpec) -> _RunGuard:
        guards = session.guards
        if guards is None:
            guards = session.guards = {}
        run_guard = guards.get(run_id)
        if run_guard is None:
            run_guard = guards[run_id] = _RunGuard(spec)
            if len(guards) > MAX_RUN_GUARDS:  # the oldest-created run's guard goes
                del guards[next(iter(guards))]
        return run_guard

    def record_outcome(
        self, session_key: str, write: OutcomeWrite, guard: GuardSpec, now: float
    ) -> tuple[ToolCallRecord, GuardVerdict]:
        outcome = write.outcome
        # This class's own method, not self's: a subclass has the default one, which
        # comes back here through record_outcome.
        return MemoryStore.record_outcome_fields(
            self,
            session_key,
            write.tool_name,
            write.args_hash,
            write.tool_call_id,
            write.run_id,
            outcome.result_hash,  # type: ignore[arg-type]  # an outcome to record has one
            outcome.unknown_tool_name,
            write.history_size,
            write.timestamp,
            write.facts,
            guard,
            now,
        )

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
        """The write with these fields, in one step when it is for the call ``begin_call``
        just postponed the append of (the usual outcome).

        That step stands for what the plain path does: :meth:`_touch` (which applies the
        postponed append: the pending record packed, appended, the history trimmed), then
        :meth:`SessionHistory.record_outcome` (which finds that very record, the newest of
        its run, fills it, and trims again). When the outcome is provably for that record
        (same session, alive; same run, tool, args hash and, when given, id), the record
        is appended already filled instead, with the same two trims, and only the
        session's time moves (``begin_call`` left it in the map, the most recently used).
        The lock is this store's session lock (:meth:`session_lock`).
        """
        # ``with self._lock:``, written as the acquire and release it stands for (released
        # by the finally, whatever happens): the with statement's special-method lookups
        # and its __exit__ call cost as much again (about 140 against 70 ns), on every
        # guarded call.
        lock = self._lock
        lock.acquire()
        try:
            postponed = self._postponed
            if postponed is not None and result_hash is not None:
                postponed_key, session, pending, size, key = postponed
                ttl = self.idle_ttl_s
                if not (
                    postponed_key != session_key
                    or pending.run_id != run_id
                    or pending.args_hash != args_hash
                    or pending.tool_name != tool_name
                    or (tool_call_id and pending.tool_call_id != tool_call_id)
                    or size < 1
                    or (ttl is not None and now - session.touched > ttl)
                ):
                    self._postponed = None
                    # ToolCallRecord(pending's fields, with the outcome's), built as its
                    # slots (see RecordDraft).
                    filled: Any = _new_object(RecordDraft)
                    filled.tool_name = pending.tool_name
                    filled.args_hash = pending.args_hash
                    filled.tool_call_id = pending.tool_call_id
                    filled.run_id = pending.run_id
                    filled.result_hash = result_hash
                    filled.unknown_tool_name = unknown_tool_name
                    filled.timestamp = pending.timestamp
                    filled.facts = facts
                    filled.__class__ = ToolCallRecord
                    # Both trims (the append's, then the outcome's) at once: each keeps
                    # the newest.
                    # (min(size, history_size), without the builtin's call)
                    trim_to = size if size < history_size else history_size
                    session.history.append_filled(filled, key, trim_to)
                    # _touch's part that is left: the session is live, in the map and the
                    # most recently used already (a postponed append is set only by
                    # begin_call, which touched its session last, and every other
                    # operation applies it first), so only its time moves.
                    session.touched = now
                    guards = session.guards
                    run_guard = None if guards is None else guards.get(run_id)
                    if run_guard is None:
                        run_guard = self._run_guard(session, run_id, guard)
                    if type(run_guard.guard) is GuardSpec:  # never armed: observe, inlined
                        verdict = run_guard.verdict = IDLE_VERDICT
                    else:
                        verdict = run_guard.observe(filled.tool_name, filled.args_hash, result_hash)
                    return filled, verdict
            write = _new_tuple(
                OutcomeWrite,
                (
                    tool_name,
                    args_hash,
                    tool_call_id,
                    run_id,
                    OutcomeHash(result_hash, unknown_tool_name),
                    history_size,
                    timestamp,
                    facts,
                ),
            )
            session = self._touch(session_key, now)
            record = session.history.record_outcome(write)
            assert record.result_hash is not None
            verdict = self._run_guard(session, write.run_id, guard).observe(
                record.tool_name, record.args_hash, record.result_hash
            )
            return record, verdict
        finally:
            lock.release()

    def arm_guard(
        self, session_key: str, run_id: str | None, guard: GuardSpec, now: float
    ) -> GuardSpec:
        with self._lock:
            session = self._touch(session_key, now)
            armed = self._run_guard(session, run_id, guard).arm()
            return GuardSpec(window_size=armed.window_size, enabled=armed.enabled)

    def history(self, session_key: str, now: float) -> tuple[ToolCallRecord, ...]:
        with self._lock:
            session = self._peek(session_key, now)
            return () if session is None else session.history.public()

    def guard_snapshot(self, session_key: str, run_id: str | None, now: float) -> GuardSnapshot:
        with self._lock:
            session = self._peek(session_key, now)
            guards = None if session is None else session.guards
            run_guard = None if guards is None else guards.get(run_id)
            return _NO_GUARD if run_guard is None else run_guard.snapshot()

    def last_guard_verdict(
        self, session_key: str, run_id: str | None, now: float
    ) -> GuardVerdict | None:
        with self._lock:
            session = self._peek(session_key, now)
            guards = None if session is None else session.guards
            run_guard = None if guards is None else guards.get(run_id)
            return None if run_guard is None else run_guard.verdict

    def warning_buckets(self, session_key: str, now: float) -> dict[str, int]:
        """A copy of the session's warning buckets (for tests and diagnostics)."""
        with self._lock:
            session = self._peek(session_key, now)
            return {} if session is None or session.buckets is None else dict(session.buckets)


__all__ = ["MAX_WARNING_KEYS", "MemoryStore"]
