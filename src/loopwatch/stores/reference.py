"""The plain reference store: the simplest correct :class:`Store`, a template and an oracle.

One list per session, copies for detection, eager guards, no index and no packing. It is
slow on long histories and exists to be read: a backend author starts from it, and the
contract suite (``tests/stores``) and the property tests run the fast stores against it
(the memory store's per-run index and packed records must answer exactly as it does).
Importable as ``loopwatch.testing.ReferenceStore``.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import Any, Final

from loopwatch.core.records import ToolCallRecord, append_call, apply_outcome
from loopwatch.detectors.compaction import GuardSnapshot, GuardVerdict, PostCompactionGuard
from loopwatch.stores.base import MAX_RUN_GUARDS, GuardSpec, OutcomeWrite, Store

_NO_GUARD: Final = GuardSnapshot(armed=False, remaining_attempts=0)
#: How many warning keys a session keeps (SPEC §5.3), oldest dropped first.
_MAX_WARNING_KEYS: Final = 256


class ReferenceStore(Store):
    """The plain model: one list per session, copies for detection, eager guards.

    Args:
        max_sessions: the most sessions kept; the least recently touched goes first.
        idle_ttl_s: seconds after which an untouched session is forgotten (``None``: never).
    """

    def __init__(self, *, max_sessions: int = 2000, idle_ttl_s: float | None = 1800.0) -> None:
        self.max_sessions = max_sessions
        self.idle_ttl_s = idle_ttl_s
        self._sessions: OrderedDict[str, dict[str, Any]] = OrderedDict()
        self._lock = threading.RLock()
        #: The latest begin_call's record and the session's history before it, until the
        #: store's next operation: a cancel_call of that record restores that history.
        self._cancellable: tuple[str, ToolCallRecord, list[ToolCallRecord]] | None = None

    def session_lock(self, session_key: str) -> AbstractContextManager[object]:
        return self._lock

    def _expired(self, session: dict[str, Any], now: float) -> bool:
        return self.idle_ttl_s is not None and now - session["touched"] > self.idle_ttl_s

    def _peek(self, key: str, now: float) -> dict[str, Any] | None:
        self._cancellable = None
        session = self._sessions.get(key)
        return None if session is None or self._expired(session, now) else session

    def _touch(self, key: str, now: float) -> dict[str, Any]:
        self._cancellable = None
        session = self._sessions.get(key)
        if session is not None and self._expired(session, now):
            del self._sessions[key]
            session = None
        if session is None:
            while self._sessions and self._expired(next(iter(self._sessions.values())), now):
                self._sessions.popitem(last=False)
            while len(self._sessions) >= self.max_sessions:
                self._sessions.popitem(last=False)
            session = {"history": [], "buckets": {}, "guards": {}, "verdicts": {}}
            self._sessions[key] = session
        else:
            self._sessions.move_to_end(key)
        session["touched"] = now
        return session

    def begin_call(
        self,
        session_key: str,
        run_id: str | None,
        pending: ToolCallRecord | None,
        history_size: int,
        now: float,
    ) -> Sequence[ToolCallRecord]:
        history = self._touch(session_key, now)["history"]
        scoped = [r for r in history if r.run_id == run_id]
        if pending is not None:
            self._cancellable = (session_key, pending, list(history))
            append_call(history, pending, history_size)
        return scoped

    def cancel_call(self, session_key: str, pending: ToolCallRecord, now: float) -> None:
        cancellable = self._cancellable
        history = self._touch(session_key, now)["history"]
        if cancellable is not None and cancellable[0] == session_key and cancellable[1] is pending:
            history[:] = cancellable[2]  # as if the blocked call had never been seen
            return
        for index in range(len(history) - 1, -1, -1):
            if history[index] is pending:
                del history[index]
                return

    def update_warning_bucket(self, session_key: str, key: str, bucket: int, now: float) -> bool:
        buckets = self._touch(session_key, now)["buckets"]
        if bucket <= buckets.get(key, 0):
            return False
        buckets[key] = bucket
        if len(buckets) > _MAX_WARNING_KEYS:
            del buckets[next(iter(buckets))]
        return True

    @staticmethod
    def _guard(session: dict[str, Any], run_id: str | None, spec: GuardSpec) -> Any:
        guards = session["guards"]
        if run_id not in guards:
            guards[run_id] = PostCompactionGuard(window_size=spec.window_size, enabled=spec.enabled)
            if len(guards) > MAX_RUN_GUARDS:  # the oldest-created run's guard goes
                oldest = next(iter(guards))
                del guards[oldest]
                session["verdicts"].pop(oldest, None)
        return guards[run_id]

    def record_outcome(
        self, session_key: str, write: OutcomeWrite, guard: GuardSpec, now: float
    ) -> tuple[ToolCallRecord, GuardVerdict]:
        session = self._touch(session_key, now)
        record = apply_outcome(
            session["history"],
            tool_name=write.tool_name,
            args_hash=write.args_hash,
            tool_call_id=write.tool_call_id,
            run_id=write.run_id,
            outcome=write.outcome,
            history_size=write.history_size,
            timestamp=write.timestamp,
            facts=write.facts,
        )
        assert record is not None and record.result_hash is not None
        verdict = self._guard(session, write.run_id, guard).observe_quietly(
            record.tool_name, record.args_hash, record.result_hash
        )
        session["verdicts"][write.run_id] = verdict
        return record, verdict

    def arm_guard(
        self, session_key: str, run_id: str | None, guard: GuardSpec, now: float
    ) -> GuardSpec:
        run_guard = self._guard(self._touch(session_key, now), run_id, guard)
        run_guard.arm_quietly()
        return GuardSpec(run_guard.window_size, run_guard.enabled)

    def history(self, session_key: str, now: float) -> tuple[ToolCallRecord, ...]:
        session = self._peek(session_key, now)
        return () if session is None else tuple(session["history"])

    def guard_snapshot(self, session_key: str, run_id: str | None, now: float) -> GuardSnapshot:
        session = self._peek(session_key, now)
        guard = None if session is None else session["guards"].get(run_id)
        return _NO_GUARD if guard is None else guard.snapshot()

    def last_guard_verdict(
        self, session_key: str, run_id: str | None, now: float
    ) -> GuardVerdict | None:
        session = self._peek(session_key, now)
        return None if session is None else session["verdicts"].get(run_id)

    def warning_buckets(self, session_key: str, now: float) -> dict[str, int]:
        session = self._peek(session_key, now)
        return {} if session is None else dict(session["buckets"])


__all__ = ["ReferenceStore"]
