"""The in-process store (SPEC §1): the default for one worker process.

Sessions live in an LRU map with lazy idle expiry (no background thread). One re-entrant
lock serialises every operation, so parallel tool calls of a session, from threads or
asyncio tasks, lose no record; operations take microseconds, so one lock is enough.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Final

from loopwatch.compaction import GuardSnapshot, GuardVerdict, PostCompactionGuard
from loopwatch.history import SessionState, ToolCallRecord, append_call, apply_outcome
from loopwatch.stores.base import GuardSpec, OutcomeWrite, Store

#: A session keeps at most this many warning keys; the oldest is forgotten first.
MAX_WARNING_KEYS: Final = 256

_NO_GUARD: Final = GuardSnapshot(armed=False, remaining_attempts=0)


@dataclass
class _Session:
    state: SessionState = field(default_factory=SessionState)
    guards: dict[str | None, PostCompactionGuard] = field(default_factory=dict)
    last_verdicts: dict[str | None, GuardVerdict] = field(default_factory=dict)
    touched: float = 0.0


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
        if idle_ttl_s is not None and (isinstance(idle_ttl_s, bool) or not idle_ttl_s > 0):
            raise ValueError("idle_ttl_s must be a positive number of seconds or None")
        self.max_sessions = max_sessions
        self.idle_ttl_s = None if idle_ttl_s is None else float(idle_ttl_s)
        self._sessions: OrderedDict[str, _Session] = OrderedDict()
        self._lock = threading.RLock()

    def __len__(self) -> int:
        return len(self._sessions)

    def session_lock(self, session_key: str) -> AbstractContextManager[object]:
        return self._lock

    # --- session lookup --------------------------------------------------------------

    def _expired(self, session: _Session, now: float) -> bool:
        return self.idle_ttl_s is not None and now - session.touched > self.idle_ttl_s

    def _peek(self, session_key: str, now: float) -> _Session | None:
        """The live session, without touching it (read-only accessors)."""
        session = self._sessions.get(session_key)
        if session is None or self._expired(session, now):
            return None
        return session

    def _touch(self, session_key: str, now: float) -> _Session:
        """The live session, created if needed, marked most recently used."""
        sessions = self._sessions
        session = sessions.get(session_key)
        if session is not None and self._expired(session, now):
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

    # --- operations ------------------------------------------------------------------

    def begin_call(
        self,
        session_key: str,
        run_id: str | None,
        pending: ToolCallRecord | None,
        history_size: int,
        now: float,
    ) -> Sequence[ToolCallRecord]:
        with self._lock:
            history = self._touch(session_key, now).state.history
            scoped = [record for record in history if record.run_id == run_id]
            if pending is not None:
                append_call(history, pending, history_size)
            return scoped

    def cancel_call(self, session_key: str, pending: ToolCallRecord, now: float) -> None:
        with self._lock:
            history = self._touch(session_key, now).state.history
            for index in range(len(history) - 1, -1, -1):
                if history[index] is pending:
                    del history[index]
                    return

    def update_warning_bucket(self, session_key: str, key: str, bucket: int, now: float) -> bool:
        with self._lock:
            buckets = self._touch(session_key, now).state.warning_buckets
            if bucket <= buckets.get(key, 0):
                return False
            buckets[key] = bucket
            if len(buckets) > MAX_WARNING_KEYS:
                del buckets[next(iter(buckets))]
            return True

    def _guard(self, session: _Session, run_id: str | None, spec: GuardSpec) -> PostCompactionGuard:
        guard = session.guards.get(run_id)
        if guard is None:
            guard = PostCompactionGuard(window_size=spec.window_size, enabled=spec.enabled)
            session.guards[run_id] = guard
        return guard

    def record_outcome(
        self, session_key: str, write: OutcomeWrite, guard: GuardSpec, now: float
    ) -> tuple[ToolCallRecord, GuardVerdict]:
        with self._lock:
            session = self._touch(session_key, now)
            record = apply_outcome(
                session.state.history,
                tool_name=write.tool_name,
                args_hash=write.args_hash,
                tool_call_id=write.tool_call_id,
                run_id=write.run_id,
                outcome=write.outcome,
                history_size=write.history_size,
                timestamp=write.timestamp,
                adaptive_facts=write.adaptive_facts,
            )
            assert record is not None and record.result_hash is not None
            verdict = self._guard(session, write.run_id, guard).observe_quietly(
                record.tool_name, record.args_hash, record.result_hash
            )
            session.last_verdicts[write.run_id] = verdict
            return record, verdict

    def arm_guard(
        self, session_key: str, run_id: str | None, guard: GuardSpec, now: float
    ) -> GuardSpec:
        with self._lock:
            run_guard = self._guard(self._touch(session_key, now), run_id, guard)
            run_guard.arm_quietly()
            return GuardSpec(window_size=run_guard.window_size, enabled=run_guard.enabled)

    def history(self, session_key: str, now: float) -> tuple[ToolCallRecord, ...]:
        with self._lock:
            session = self._peek(session_key, now)
            return () if session is None else tuple(session.state.history)

    def guard_snapshot(self, session_key: str, run_id: str | None, now: float) -> GuardSnapshot:
        with self._lock:
            session = self._peek(session_key, now)
            guard = None if session is None else session.guards.get(run_id)
            return _NO_GUARD if guard is None else guard.snapshot()

    def last_guard_verdict(
        self, session_key: str, run_id: str | None, now: float
    ) -> GuardVerdict | None:
        with self._lock:
            session = self._peek(session_key, now)
            return None if session is None else session.last_verdicts.get(run_id)

    def warning_buckets(self, session_key: str, now: float) -> dict[str, int]:
        """A copy of the session's warning buckets (for tests and diagnostics)."""
        with self._lock:
            session = self._peek(session_key, now)
            return {} if session is None else dict(session.state.warning_buckets)


__all__ = ["MAX_WARNING_KEYS", "MemoryStore"]
