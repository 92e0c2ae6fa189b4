"""The memory store's one-step outcome against the steps it stands for.

- ``SessionHistory.append_filled`` against ``add_filled`` then ``trim``: the same records
  (every slot), ``heads``, runs, shared lists and call index, over generated histories
  (several runs, pending records, hashes of every form, the index built early or not).
- ``MemoryStore.record_outcome_fields`` against the same store that applies the postponed
  append first (``_touch``, then ``SessionHistory.record_outcome``): the same answers, and
  the same sessions in the same LRU order with the same times, which the one-step lane
  leaves as ``begin_call`` left them but for the time.
"""

from __future__ import annotations

import hashlib
import threading
from dataclasses import dataclass
from typing import Any
from unittest import mock

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from loopwatch.core.outcomes import hash_tool_outcome
from loopwatch.core.records import ToolCallRecord
from loopwatch.detectors.compaction import GuardVerdict
from loopwatch.stores.base import GuardSpec
from loopwatch.stores.memory import _runs
from loopwatch.stores.memory._compact import call_key
from loopwatch.stores.memory._history import SessionHistory
from loopwatch.stores.memory.store import MemoryStore
from memory_index import index_from

DIGESTS = [hashlib.sha256(str(i).encode()).hexdigest() for i in range(3)]
GUARD = GuardSpec(window_size=2, enabled=True)


@dataclass(frozen=True)
class Step:
    tool: str
    args: int  # an index into DIGESTS, or -1: an args hash of another form
    run: str | None
    #: "fresh": the result hash hash_tool_outcome just made (its digest bytes are at
    #: hand), "digest" / "error": an equal string made otherwise, "other": no digest,
    #: None: a pending record (begin_call's append)
    result: str | None
    notes: tuple[str | None, str | None]  # (unknown_tool_name, facts)
    timestamp: int
    size: int  # the history size of the write


STEPS = st.lists(
    st.builds(
        Step,
        st.sampled_from(["read", "read", "exec", ""]),
        st.integers(-1, len(DIGESTS) - 1),
        st.sampled_from([None, None, "r1", "r2"]),
        st.sampled_from(["fresh", "fresh", "fresh", "digest", "error", "other", None]),
        st.sampled_from([(None, None)] * 3 + [("ghost", None), (None, "1000||")]),
        st.sampled_from([0, 5, -(2**63), 2**63 - 1, 2**63, -(2**63) - 1]),
        st.sampled_from([1, 2, 3, 5, 30]),
    ),
    max_size=40,
)


def _record(step: Step, call_id: str) -> ToolCallRecord:
    args_hash = f"{step.tool}:{DIGESTS[step.args]}" if step.args >= 0 else f"{step.tool}:x"
    result: str | None
    if step.result == "fresh":
        made = hash_tool_outcome(step.tool, None, result=call_id)  # (the newest made)
        result = made.result_hash
    elif step.result == "digest":
        result = "".join(list(DIGESTS[0]))
    elif step.result == "error":
        result = "error:" + DIGESTS[1]
    elif step.result == "other":
        result = "r1"
    else:
        result = None
    unknown, facts = step.notes
    run = None if step.run is None else "".join(list(step.run))  # (equal, a new object)
    return ToolCallRecord(
        step.tool, args_hash, call_id, run, result, unknown, step.timestamp, facts
    )


def _state(history: SessionHistory) -> object:
    """Everything the history holds, with records as their place in the session's list."""
    at = {id(record): index for index, record in enumerate(history.records)}

    def place(entry: Any) -> object:
        return [at[id(r)] for r in entry] if isinstance(entry, list) else at[id(entry)]

    runs = []
    for run_id, run in history.runs.items():
        calls = run.calls
        index = (
            None
            if calls is None
            else {t: {k: place(v) for k, v in by_key.items()} for t, by_key in calls.items()}
        )
        runs.append(
            (
                run_id,
                run.run_id,
                run.records is history.records,
                run.heads is history.heads,
                [at[id(r)] for r in run.records],
                bytes(run.heads),
                all(r.run_id is run.run_id for r in run.records),
                index,
            )
        )
    records = [(r.tool_name, r.call_id, r.run_id, r.packed, r.extra) for r in history.records]
    return records, bytes(history.heads), runs


@settings(max_examples=400, deadline=None)
@given(STEPS, st.sampled_from([2, 5, _runs.INDEX_FROM]))
def test_append_filled_leaves_what_add_filled_and_trim_leave(
    steps: list[Step], index_size: int
) -> None:
    one_step, plain = SessionHistory(), SessionHistory()
    with index_from(index_size):
        for number, step in enumerate(steps):
            record = _record(step, f"c{number}")
            key = call_key(record.tool_name, record.args_hash)
            if record.result_hash is None:
                for history in (one_step, plain):
                    history.append(record, step.size, key)
            else:
                one_step.append_filled(record, key, step.size)
                plain.add_filled(record, key)
                plain.trim(step.size)
            assert _state(one_step) == _state(plain)
            assert one_step.public() == plain.public()


class SettledStore(MemoryStore):
    """The memory store whose outcome always takes the plain path: the postponed append
    applied first, so the one-step lane never applies."""

    def record_outcome_fields(self, session_key: str, *fields: Any) -> Any:
        with self._lock:
            self._settle()
            return MemoryStore.record_outcome_fields(self, session_key, *fields)


def test_the_usual_outcome_takes_one_step() -> None:
    """What the tests above compare is the lane a usual outcome takes: no
    ``SessionHistory._add`` or ``trim`` (the record appended and the oldest trimmed in
    ``append_filled``), and in the store no ``SessionHistory.record_outcome`` (the
    postponed append filled at once)."""
    history = SessionHistory()
    records = []
    for number in range(3):
        record = _record(Step("read", number, None, "fresh", (None, None), 5, 2), f"c{number}")
        records.append(record)
        key = call_key("read", record.args_hash)
        if number == 0:  # (the run's first record makes the run: the plain steps)
            history.append_filled(record, key, 2)
            continue
        with (
            mock.patch.object(SessionHistory, "_add", side_effect=AssertionError),
            mock.patch.object(SessionHistory, "trim", side_effect=AssertionError),
        ):
            history.append_filled(record, key, 2)
    assert history.public() == tuple(records[1:])
    store = MemoryStore()
    store.begin_call("s", None, None, 30, 0.5)  # (the session exists)
    pending = ToolCallRecord("read", f"read:{DIGESTS[0]}", "c1", None, None, None, 5)
    store.begin_call("s", None, pending, 30, 1.0)
    result = hash_tool_outcome("read", None, result="x").result_hash
    assert result is not None
    with mock.patch.object(SessionHistory, "record_outcome", side_effect=AssertionError):
        record, _ = store.record_outcome_fields(
            "s", "read", pending.args_hash, "c1", None, result, None, 30, 9, None, GUARD, 2.0
        )
    assert store.history("s", 2.0) == (record,)
    assert store._sessions["s"].touched == 2.0


@dataclass(frozen=True)
class Op:
    kind: str
    session: str
    tool: str
    args: int
    run: str | None
    call_id: str | None
    size: int
    wait: float


OPS = st.lists(
    st.builds(
        Op,
        st.sampled_from(["pair", "pair", "begin", "outcome", "cancel", "bucket", "history"]),
        st.sampled_from(["s", "s", "t", "u"]),
        st.sampled_from(["read", "exec"]),
        st.integers(0, len(DIGESTS) - 1),
        st.sampled_from([None, None, "r1"]),
        st.sampled_from([None, "c1", "c2"]),
        st.sampled_from([1, 3, 30]),
        st.sampled_from([0.0, 0.0, 1.0, 6.0]),
    ),
    max_size=50,
)


def _play(store: MemoryStore, ops: list[Op]) -> list[object]:
    seen: list[object] = []
    now = 1_000.0
    pending: dict[str, ToolCallRecord] = {}
    for number, op in enumerate(ops):
        now += op.wait
        args_hash = f"{op.tool}:{DIGESTS[op.args]}"
        if op.kind in ("begin", "pair"):
            record = ToolCallRecord(op.tool, args_hash, op.call_id, op.run, None, None, number)
            pending[op.session] = record
            seen.append(list(store.begin_call(op.session, op.run, record, op.size, now)))
        if op.kind == "pair":
            now += 0.5  # (the tool ran)
        if op.kind in ("outcome", "pair"):
            result = hash_tool_outcome(op.tool, None, result=str(number)).result_hash
            answer: tuple[ToolCallRecord, GuardVerdict] = store.record_outcome_fields(
                op.session,
                op.tool,
                args_hash,
                op.call_id,
                op.run,
                result,  # type: ignore[arg-type]  # a text result has a hash
                None,
                op.size,
                number,
                None,
                GUARD,
                now,
            )
            seen.append(answer)
        elif op.kind == "cancel":
            if op.session in pending:
                store.cancel_call(op.session, pending.pop(op.session), now)
        elif op.kind == "bucket":
            seen.append(store.update_warning_bucket(op.session, "k", number, now))
        else:
            seen.append(store.history(op.session, now))
        # The sessions in LRU order and their times (read without applying a postponed
        # append: the next outcome may take the one-step lane).
        seen.append([(key, session.touched) for key, session in store._sessions.items()])
    seen.extend(store.history(session, now) for session in ("s", "t", "u"))
    return seen


@settings(max_examples=300, deadline=None)
@given(OPS)
def test_the_one_step_outcome_leaves_the_store_as_the_plain_path(ops: list[Op]) -> None:
    def store(cls: type[MemoryStore]) -> MemoryStore:
        return cls(max_sessions=2, idle_ttl_s=5.0)

    assert _play(store(MemoryStore), ops) == _play(store(SettledStore), ops)


def _taken_elsewhere(lock: Any) -> bool:
    """Whether another thread finds ``lock`` held (it takes and gives it back if free)."""
    held: list[bool] = []

    def probe() -> None:
        free = lock.acquire(blocking=False)
        if free:
            lock.release()
        held.append(not free)

    thread = threading.Thread(target=probe)
    thread.start()
    thread.join()
    return held[0]


@pytest.mark.parametrize("lane", ["append_filled", "record_outcome"])
def test_the_outcome_gives_the_lock_back_whatever_happens(lane: str) -> None:
    """``record_outcome_fields`` takes the session lock as ``acquire`` / ``release`` (the
    with statement they stand for, written out): a failure inside, in the one-step lane or
    the plain path, still releases it, and the lock stays re-entrant for its holder."""
    store = MemoryStore()
    args_hash = f"read:{DIGESTS[0]}"
    result = hash_tool_outcome("read", None, result="x").result_hash
    assert result is not None
    if lane == "append_filled":  # the postponed append of this very call: the one step
        store.begin_call(
            "s", None, ToolCallRecord("read", args_hash, "c1", None, None, None, 1), 30, 1.0
        )
    failing = mock.patch.object(SessionHistory, lane, side_effect=RuntimeError("boom"))
    with failing, pytest.raises(RuntimeError):
        store.record_outcome_fields(
            "s", "read", args_hash, "c1", None, result, None, 30, 1, None, GUARD, 1.0
        )
    assert not _taken_elsewhere(store._lock)
    with store.session_lock("s"):  # held by this thread: the outcome takes it again
        store.record_outcome_fields(
            "s", "read", args_hash, "c1", None, result, None, 30, 1, None, GUARD, 1.0
        )
        assert _taken_elsewhere(store._lock)
    assert not _taken_elsewhere(store._lock)
    assert len(store.history("s", 1.0)) == 1
