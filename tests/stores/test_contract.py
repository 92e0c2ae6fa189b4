"""The store contract (SPEC §1, §3.6, §5.3, §6.2, §9.4), run against every backend.

Each test runs with ``MemoryStore``, with ``SqliteStore`` on a temporary file and with
``RedisStore`` on a real ``redis-server``; the memory store is the reference, so any
difference is a bug of the other backend.
Times are passed explicitly (``now``), the way ``LoopGuard`` passes its clock.
"""

from __future__ import annotations

from typing import Any

import pytest
from _redis_helpers import StoreFactory

from loopwatch import LoopGuard, MemoryStore
from loopwatch.core.outcomes import OutcomeHash
from loopwatch.core.records import ToolCallRecord
from loopwatch.detectors.compaction import GuardSnapshot, GuardVerdict, PostCompactionGuard
from loopwatch.stores.base import GuardSpec, OutcomeWrite, Store
from loopwatch.stores.memory.store import MAX_WARNING_KEYS
from loopwatch.testing import ReferenceStore

T0 = 1_700_000_000.0
S = "agent:main:contract"
GUARD = GuardSpec(window_size=3, enabled=True)
NO_GUARD = GuardSnapshot(armed=False, remaining_attempts=0)


def rec(
    tool: str = "read",
    args: str = "a",
    *,
    call: str | None = None,
    run: str | None = None,
    ts: int = 1,
) -> ToolCallRecord:
    return ToolCallRecord(
        tool_name=tool, args_hash=f"{tool}:{args}", tool_call_id=call, run_id=run, timestamp=ts
    )


def outcome(
    tool: str = "read",
    args: str = "a",
    result: str = "r1",
    *,
    call: str | None = None,
    run: str | None = None,
    size: int = 30,
    ts: int = 99,
    unknown: str | None = None,
) -> OutcomeWrite:
    return OutcomeWrite(
        tool_name=tool,
        args_hash=f"{tool}:{args}",
        tool_call_id=call,
        run_id=run,
        outcome=OutcomeHash(result_hash=result, unknown_tool_name=unknown),
        history_size=size,
        timestamp=ts,
    )


def begin(
    store: Store, record: ToolCallRecord | None, *, size: int = 30, now: float = T0, s: str = S
) -> list[ToolCallRecord]:
    run = record.run_id if record is not None else None
    return list(store.begin_call(s, run, record, size, now))


def warning_buckets(store: Store, session: str, now: float) -> dict[str, int]:
    reader: Any = store
    return dict(reader.warning_buckets(session, now))


# --- history: begin_call ---------------------------------------------------------------


def test_begin_returns_history_before_its_own_record(make_store: StoreFactory) -> None:
    store = make_store()
    first, second = rec(call="1"), rec(call="2")
    assert begin(store, first) == []
    assert begin(store, second) == [first]
    assert store.history(S, T0) == (first, second)


def test_begin_returns_only_the_runs_records(make_store: StoreFactory) -> None:
    store = make_store()
    a1, b1, none1, a2 = rec(run="a"), rec(run="b"), rec(), rec(run="a", args="x")
    for record in (a1, b1, none1):
        begin(store, record)
    assert begin(store, a2) == [a1]
    assert list(store.begin_call(S, "b", None, 30, T0)) == [b1]
    # "no run id" matches only "no run id".
    assert list(store.begin_call(S, None, None, 30, T0)) == [none1]
    assert store.history(S, T0) == (a1, b1, none1, a2)


def test_begin_without_pending_records_nothing(make_store: StoreFactory) -> None:
    store = make_store()
    assert begin(store, None) == []
    assert store.history(S, T0) == ()


def test_trim_keeps_the_newest_records_of_all_runs(make_store: StoreFactory) -> None:
    store = make_store()
    records = [rec(args=str(i), run="a" if i % 2 else "b", ts=i) for i in range(7)]
    for record in records:
        begin(store, record, size=4)
    assert store.history(S, T0) == tuple(records[-4:])
    # A later, smaller size trims further; a larger one keeps what is there.
    extra = rec(args="x", run="a")
    assert begin(store, extra, size=2) == [records[3], records[5]]
    assert store.history(S, T0) == (records[6], extra)


def test_records_round_trip_every_field(make_store: StoreFactory) -> None:
    store = make_store()
    odd = ToolCallRecord(
        tool_name='we"ird\\to\x1fol\n\u2028',
        args_hash="x:\x1e\x1d,\u00e9\U0001f600",
        tool_call_id="",
        run_id="r,\x00\ud800",
        timestamp=1_799_999_999_999,
    )
    begin(store, odd)
    assert store.history(S, T0) == (odd,)
    assert list(store.begin_call(S, odd.run_id, None, 30, T0)) == [odd]


@pytest.mark.parametrize(
    "session",
    ["{", "}", "{}", "a}b{c", "%7B", "é-\U0001f600", "lone-\udc00", " spaced key ", "x" * 300],
)
def test_any_session_key_is_its_own_session(make_store: StoreFactory, session: str) -> None:
    store = make_store()
    begin(store, rec(call=session), s=session)
    assert store.history(session, T0) == (rec(call=session),)
    assert store.history(S, T0) == ()


# --- cancel_call ---------------------------------------------------------------------


def test_cancel_removes_exactly_the_record_begin_appended(make_store: StoreFactory) -> None:
    store = make_store()
    # Two records with identical fields: only the one that was cancelled goes.
    twin_a, other, twin_b = rec(call="c"), rec(args="o"), rec(call="c")
    for record in (twin_a, other, twin_b):
        begin(store, record)
    store.cancel_call(S, twin_a, T0)
    assert store.history(S, T0) == (other, twin_b)
    store.cancel_call(S, twin_b, T0)
    assert store.history(S, T0) == (other,)


def test_cancel_of_a_trimmed_record_changes_nothing(make_store: StoreFactory) -> None:
    store = make_store()
    old, new1, new2 = rec(args="0"), rec(args="1"), rec(args="2")
    for record in (old, new1, new2):
        begin(store, record, size=2)
    store.cancel_call(S, old, T0)
    assert store.history(S, T0) == (new1, new2)


def test_cancel_right_after_begin_leaves_a_full_history_as_it_was(
    make_store: StoreFactory,
) -> None:
    # SPEC §5.2: a blocked call is not recorded, so no record is trimmed to make room for
    # it either; trimming is global, whatever the runs.
    store = make_store()
    a, b, c = rec(args="a", run="r1"), rec(args="b", run="r2"), rec(args="c", run="r1")
    begin(store, a, size=2)
    begin(store, b, size=2)
    for _ in range(3):  # block after block, the history never shrinks
        assert begin(store, c, size=2) == [a]
        store.cancel_call(S, c, T0)
        assert store.history(S, T0) == (a, b)


def test_cancel_puts_back_every_record_a_smaller_size_trimmed(make_store: StoreFactory) -> None:
    store = make_store()
    records = [rec(args=str(i), call=str(i)) for i in range(4)]
    for record in records[:3]:
        begin(store, record, size=3)
    begin(store, records[3], size=1)
    store.cancel_call(S, records[3], T0)
    assert store.history(S, T0) == tuple(records[:3])


def test_cancel_after_another_write_only_removes_the_record(make_store: StoreFactory) -> None:
    store = make_store()
    a, b, c = rec(args="a"), rec(args="b"), rec(args="c")
    for record in (a, b, c):
        begin(store, record, size=2)
    store.update_warning_bucket(S, "k", 1, T0)
    store.cancel_call(S, c, T0)
    assert store.history(S, T0) == (b,)


def test_a_block_in_a_full_history_stays_sticky(make_store: StoreFactory) -> None:
    # The reference's sticky block (SPEC §5.2) with historySize 3: once the count reaches
    # the critical threshold, every identical call is blocked with the same count, and the
    # history keeps the calls that led there.
    guard = LoopGuard(
        {"enabled": True, "historySize": 3, "warningThreshold": 1, "criticalThreshold": 3},
        store=make_store(),
    )
    decisions = []
    for i in range(8):
        decision = guard.before_call("exec", {"command": "ls"}, session_key=S, tool_call_id=str(i))
        result = decision.tool_result if decision.tool_result is not None else "same"
        guard.after_call(
            "exec", {"command": "ls"}, session_key=S, tool_call_id=str(i), result=result
        )
        decisions.append((decision.action, decision.verdict.count))
    assert decisions[:3] == [("allow", 0), ("warn", 1), ("warn", 2)]
    assert decisions[3:] == [("block", 3)] * 5
    assert [r.tool_call_id for r in guard.history(session_key=S)] == ["0", "1", "2"]


def test_a_block_keeps_the_oldest_record_of_a_full_history(make_store: StoreFactory) -> None:
    # historySize 3: the blocked fourth call must not push the first call out, so
    # repeating the first call afterwards is still seen as a repeat.
    guard = LoopGuard(
        {"enabled": True, "historySize": 3, "warningThreshold": 1, "criticalThreshold": 2},
        store=make_store(),
    )
    steps = [("read", {"path": "/b"}, "B")] + [("exec", {"command": "ls"}, "same")] * 3
    steps.append(("read", {"path": "/b"}, "B"))
    decisions = []
    for i, (tool, args, result) in enumerate(steps):
        decision = guard.before_call(tool, args, session_key=S, tool_call_id=str(i))
        outcome = decision.tool_result if decision.tool_result is not None else result
        guard.after_call(tool, args, session_key=S, tool_call_id=str(i), result=outcome)
        decisions.append((decision.action, decision.verdict.detector, decision.verdict.count))
    assert decisions[3] == ("block", "generic_repeat", 2)
    assert decisions[4] == ("warn", "generic_repeat", 1)
    assert [r.tool_call_id for r in guard.history(session_key=S)] == ["1", "2", "4"]


# --- record_outcome ------------------------------------------------------------------


def test_outcome_fills_the_newest_matching_pending_record(make_store: StoreFactory) -> None:
    store = make_store()
    older, newer = rec(ts=1), rec(ts=2)
    begin(store, older)
    begin(store, newer)
    record, _ = store.record_outcome(S, outcome(result="r1"), GUARD, T0)
    assert record == ToolCallRecord("read", "read:a", timestamp=2, result_hash="r1")
    record, _ = store.record_outcome(S, outcome(result="r2"), GUARD, T0)
    assert record.timestamp == 1 and record.result_hash == "r2"
    assert [r.result_hash for r in store.history(S, T0)] == ["r2", "r1"]


def test_outcome_matches_tool_call_id_only_when_truthy(make_store: StoreFactory) -> None:
    store = make_store()
    first, second = rec(call="id-1", ts=1), rec(call="id-2", ts=2)
    begin(store, first)
    begin(store, second)
    record, _ = store.record_outcome(S, outcome(call="id-1"), GUARD, T0)
    assert record.tool_call_id == "id-1" and record.timestamp == 1
    # "" matches any id: the newest pending record (id-2) is filled.
    record, _ = store.record_outcome(S, outcome(call="", result="r2"), GUARD, T0)
    assert record.tool_call_id == "id-2" and record.result_hash == "r2"


def test_outcome_respects_run_tool_and_args(make_store: StoreFactory) -> None:
    store = make_store()
    begin(store, rec(run="a"))
    begin(store, rec(tool="exec"))
    begin(store, rec(args="b"))
    record, _ = store.record_outcome(S, outcome(ts=7), GUARD, T0)
    # No pending record of this run, tool and args: a complete record is appended.
    assert record == ToolCallRecord("read", "read:a", None, None, "r1", None, 7)
    assert len(store.history(S, T0)) == 4
    assert [r.result_hash for r in store.history(S, T0)] == [None, None, None, "r1"]


def test_outcome_appends_with_the_given_id_and_trims(make_store: StoreFactory) -> None:
    store = make_store()
    for i in range(3):
        begin(store, rec(args=str(i)), size=3)
    record, _ = store.record_outcome(
        S, outcome(args="new", call="x", size=3, unknown="read"), GUARD, T0
    )
    # The unknown name is the tool's own: every store gives it back as it is (RedisStore
    # keeps other names as digests only: tests/stores/test_redis_store.py).
    assert record == ToolCallRecord("read", "read:new", "x", None, "r1", "read", 99)
    assert store.history(S, T0) == (rec(args="1"), rec(args="2"), record)


def test_filled_record_keeps_its_place_and_fields(make_store: StoreFactory) -> None:
    store = make_store()
    pending = rec(call="k", run="r", ts=5)
    begin(store, pending)
    begin(store, rec(args="z", run="r"))
    record, _ = store.record_outcome(
        S, outcome(call="k", run="r", unknown="read", ts=1000), GUARD, T0
    )
    assert record == ToolCallRecord("read", "read:a", "k", "r", "r1", "read", 5)
    assert store.history(S, T0)[0] == record


# --- post-compaction guards -------------------------------------------------------------


def _write_fields(write: OutcomeWrite) -> tuple[Any, ...]:
    outcome = write.outcome
    return (
        write.tool_name,
        write.args_hash,
        write.tool_call_id,
        write.run_id,
        outcome.result_hash,
        outcome.unknown_tool_name,
        write.history_size,
        write.timestamp,
        write.facts,
    )


#: A session's writes: (pending record to begin, or None; outcome to record, or None).
FIELD_SCRIPT: tuple[tuple[ToolCallRecord | None, OutcomeWrite | None], ...] = (
    (rec(call="c1", ts=1), outcome(call="c1", result="r1")),  # the call just begun
    (rec(args="b", ts=2), outcome(args="b", result="r2", unknown="read")),  # no id
    (rec(call="c3", run="x", ts=3), None),
    (rec(call="c4", ts=4), outcome(call="c3", run="x", result="r3")),  # an older pending one
    (None, outcome(call="c4", result="r4")),
    (None, outcome(args="never", call="c9", result="r5")),  # nothing pending: appended
    (rec(args="z", ts=6), outcome(args="z", result="r6", size=3)),  # a smaller size trims
    (rec(call="c7", ts=7), outcome(call="c7", result="r7")),
)


def _play_fields(store: Store, session: str, *, as_fields: bool) -> list[object]:
    seen: list[object] = []
    store.arm_guard(session, None, GUARD, T0)
    for pending, write in FIELD_SCRIPT:
        if pending is not None:
            seen.append(list(store.begin_call(session, pending.run_id, pending, 30, T0)))
        if write is not None:
            if as_fields:
                seen.append(store.record_outcome_fields(session, *_write_fields(write), GUARD, T0))
            else:
                with store.session_lock(session):
                    seen.append(store.record_outcome(session, write, GUARD, T0))
    seen.append(store.history(session, T0))
    seen.append(store.guard_snapshot(session, None, T0))
    return seen


def test_record_outcome_fields_answers_what_record_outcome_answers(
    make_store: StoreFactory,
) -> None:
    """``LoopGuard`` records a planned call's outcome through ``record_outcome_fields``
    (the memory store's own shortcut; every other store's default): the same records,
    verdicts and state as ``record_outcome`` of the write the fields make."""
    store = make_store()
    by_fields = _play_fields(store, S + ":fields", as_fields=True)
    assert by_fields == _play_fields(store, S + ":write", as_fields=False)
    # And what the template store answers to the writes (the memory store's shortcut
    # and its record_outcome are one code path: this is what checks it).
    assert by_fields == _play_fields(ReferenceStore(), S + ":fields", as_fields=False)


class _CountingStore(MemoryStore):
    """A host's memory store that counts outcomes in its own ``record_outcome``."""

    def __init__(self) -> None:
        super().__init__()
        self.outcomes = 0

    def record_outcome(
        self, session_key: str, write: OutcomeWrite, guard: GuardSpec, now: float
    ) -> tuple[ToolCallRecord, GuardVerdict]:
        self.outcomes += 1
        return super().record_outcome(session_key, write, guard, now)


def test_a_subclass_record_outcome_sees_every_outcome() -> None:
    """The memory store's shortcut is not inherited, so a subclass that changes
    ``record_outcome`` sees the outcomes ``after_call`` records through the fields."""
    assert _CountingStore.record_outcome_fields is Store.record_outcome_fields
    assert MemoryStore.record_outcome_fields is not Store.record_outcome_fields
    store = _CountingStore()
    guard = LoopGuard({"enabled": True}, store=store, strict=True)
    params = {"path": "a"}  # one object for both halves: the planned, usual call
    for call_id in ("c1", "c2", "c3"):
        guard.before_call("read", params, session_key="s", tool_call_id=call_id)
        guard.after_call("read", params, session_key="s", tool_call_id=call_id, result="x")
    assert store.outcomes == 3
    assert [r.result_hash is not None for r in guard.history(session_key="s")] == [True] * 3


def _reference_verdicts(
    spec: GuardSpec, steps: list[tuple[str, tuple[str, str, str]]]
) -> list[Any]:
    """The same steps on a ``PostCompactionGuard``: what the store must answer."""
    guard = PostCompactionGuard(window_size=spec.window_size, enabled=spec.enabled)
    out: list[Any] = []
    for step, triple in steps:
        if step == "arm":
            guard.arm_quietly()
            out.append(guard.snapshot())
        else:
            out.append(guard.observe_quietly(*triple))
    return out


def _store_verdicts(
    store: Store, spec: GuardSpec, steps: list[tuple[str, tuple[str, str, str]]], run: str | None
) -> list[Any]:
    out: list[Any] = []
    for step, (tool, args, result) in steps:
        if step == "arm":
            store.arm_guard(S, run, spec, T0)
            out.append(store.guard_snapshot(S, run, T0))
        else:
            write = outcome(tool, args.removeprefix(f"{tool}:"), result, run=run)
            _record, verdict = store.record_outcome(S, write, spec, T0)
            assert store.last_guard_verdict(S, run, T0) == verdict
            out.append(verdict)
    return out


SAME = ("read", "read:a", "r1")
GUARD_SCRIPTS = {
    "abort-on-third": [("arm", SAME), ("obs", SAME), ("obs", SAME), ("obs", SAME)],
    "changed-result": [("arm", SAME), ("obs", SAME), ("obs", ("read", "read:a", "r2"))]
    + [("obs", SAME)] * 3,
    "unarmed": [("obs", SAME)] * 4,
    "rearm-mid-window": [("arm", SAME), ("obs", SAME), ("obs", SAME), ("arm", SAME)]
    + [("obs", SAME)] * 4,
    "window-used-up": [("arm", SAME), ("obs", SAME), ("obs", ("x", "x:b", "r"))]
    + [("obs", SAME)] * 3
    + [("arm", SAME)]
    + [("obs", SAME)] * 3,
}


@pytest.mark.parametrize("script", sorted(GUARD_SCRIPTS))
@pytest.mark.parametrize("spec", [GUARD, GuardSpec(2, True), GuardSpec(3, False)])
@pytest.mark.parametrize("run", [None, "run,1"])
def test_guard_behaves_like_post_compaction_guard(
    make_store: StoreFactory, script: str, spec: GuardSpec, run: str | None
) -> None:
    store = make_store()
    steps = GUARD_SCRIPTS[script]
    assert _store_verdicts(store, spec, steps, run) == _reference_verdicts(spec, steps)


def test_abort_verdict_carries_the_reference_message(make_store: StoreFactory) -> None:
    store = make_store()
    store.arm_guard(S, "r", GuardSpec(2, True), T0)
    verdicts = [store.record_outcome(S, outcome('t"q', run="r"), GUARD, T0)[1] for _ in range(2)]
    reference = PostCompactionGuard(window_size=2)
    reference.arm_quietly()
    expected = [reference.observe_quietly('t"q', 't"q:a', "r1") for _ in range(2)]
    assert verdicts == expected
    assert verdicts[-1].should_abort and verdicts[-1].message is not None
    assert store.last_guard_verdict(S, "r", T0) == expected[-1]


def test_guard_is_never_reconfigured(make_store: StoreFactory) -> None:
    store = make_store()
    store.record_outcome(S, outcome(), GuardSpec(2, False), T0)
    assert store.arm_guard(S, None, GuardSpec(5, True), T0) == GuardSpec(2, False)
    # A disabled guard still counts its attempts when armed; it only never observes.
    assert store.guard_snapshot(S, None, T0) == GuardSnapshot(armed=True, remaining_attempts=2)
    assert store.arm_guard(S, "other", GuardSpec(4, True), T0) == GuardSpec(4, True)


def test_guards_are_per_run_and_arming_keeps_the_last_verdict(make_store: StoreFactory) -> None:
    store = make_store()
    store.arm_guard(S, "a", GUARD, T0)
    _, verdict = store.record_outcome(S, outcome(run="a"), GUARD, T0)
    assert verdict == GuardVerdict(should_abort=False, armed=True, remaining_attempts=2)
    assert store.guard_snapshot(S, "b", T0) == NO_GUARD
    assert store.last_guard_verdict(S, "b", T0) is None
    store.arm_guard(S, "a", GUARD, T0)
    assert store.last_guard_verdict(S, "a", T0) == verdict
    assert store.guard_snapshot(S, "a", T0) == GuardSnapshot(armed=True, remaining_attempts=3)


# --- warning buckets (SPEC §5.3) ------------------------------------------------------


def test_bucket_rule(make_store: StoreFactory) -> None:
    store = make_store()
    assert store.update_warning_bucket(S, "k", 0, T0) is False
    assert store.update_warning_bucket(S, "k", 1, T0) is True
    assert store.update_warning_bucket(S, "k", 1, T0) is False
    assert store.update_warning_bucket(S, "k", 3, T0) is True
    assert store.update_warning_bucket(S, "k", 2, T0) is False
    assert warning_buckets(store, S, T0) == {"k": 3}


def test_existing_key_keeps_its_position_and_cap_drops_the_oldest(
    make_store: StoreFactory,
) -> None:
    store = make_store()
    keys = [f"run:{i}:generic:x\u00e9\ud800" for i in range(MAX_WARNING_KEYS)]
    for key in keys:
        assert store.update_warning_bucket(S, key, 1, T0)
    # Raising the first key's bucket keeps it first in insertion order...
    assert store.update_warning_bucket(S, keys[0], 2, T0)
    assert list(warning_buckets(store, S, T0)) == keys
    # ...so the 257th key evicts it, not the second key.
    assert store.update_warning_bucket(S, "new", 1, T0)
    buckets = warning_buckets(store, S, T0)
    assert len(buckets) == MAX_WARNING_KEYS
    assert list(buckets) == [*keys[1:], "new"]
    # A dropped key starts again from zero.
    assert store.update_warning_bucket(S, keys[0], 1, T0)
    assert keys[1] not in warning_buckets(store, S, T0)


# --- expiry and accessors (SPEC §1, §9.4) ---------------------------------------------
# On the LoopGuard clock, as MemoryStore keeps it. RedisStore expires sessions on Redis's
# own clock (so skewed workers agree): its expiry is tested in real time in
# test_redis_store.py and against skewed clocks in tests/hostile/test_faults_redis.py.


@pytest.fixture
def memory_store() -> StoreFactory:
    return lambda **options: MemoryStore(**options)


def test_idle_session_is_forgotten_whole(memory_store: StoreFactory) -> None:
    store = memory_store(idle_ttl_s=100.0)
    begin(store, rec(), now=T0)
    store.update_warning_bucket(S, "k", 1, T0)
    store.arm_guard(S, None, GUARD, T0)
    store.record_outcome(S, outcome(), GUARD, T0)
    # Exactly the TTL is not "more than" the TTL.
    assert len(store.history(S, T0 + 100)) == 1
    assert store.history(S, T0 + 100.5) == ()
    assert store.guard_snapshot(S, None, T0 + 100.5) == NO_GUARD
    assert store.last_guard_verdict(S, None, T0 + 100.5) is None
    assert warning_buckets(store, S, T0 + 100.5) == {}
    # A touching operation starts a fresh session: nothing of the old one comes back.
    assert begin(store, rec(args="new"), now=T0 + 101) == []
    assert store.update_warning_bucket(S, "k", 1, T0 + 101) is True
    assert store.guard_snapshot(S, None, T0 + 101) == NO_GUARD
    assert store.history(S, T0 + 101) == (rec(args="new"),)


@pytest.mark.parametrize(
    "touch",
    [
        lambda st, now: st.begin_call(S, None, None, 30, now),
        lambda st, now: st.update_warning_bucket(S, "k", 0, now),
        lambda st, now: st.arm_guard(S, "r", GUARD, now),
        lambda st, now: st.record_outcome(S, outcome(args="t"), GUARD, now),
        lambda st, now: st.cancel_call(S, rec(args="never"), now),
    ],
    ids=["begin", "bucket", "arm", "outcome", "cancel"],
)
def test_touching_operations_restart_the_idle_timer(memory_store: StoreFactory, touch: Any) -> None:
    store = memory_store(idle_ttl_s=100.0)
    begin(store, rec(), now=T0)
    touch(store, T0 + 90)
    assert rec() in store.history(S, T0 + 180)


def test_accessors_neither_touch_nor_create(memory_store: StoreFactory) -> None:
    store = memory_store(idle_ttl_s=100.0)
    assert store.history("unknown", T0) == ()
    assert store.guard_snapshot("unknown", None, T0) == NO_GUARD
    assert store.last_guard_verdict("unknown", None, T0) is None
    begin(store, rec(), now=T0)
    for now in (T0 + 50, T0 + 99):
        store.history(S, now)
        store.guard_snapshot(S, None, now)
        store.last_guard_verdict(S, None, now)
        warning_buckets(store, S, now)
    assert store.history(S, T0 + 101) == ()
    if isinstance(store, MemoryStore):
        assert len(store) == 1  # expired but not touched: still there, never returned


def test_no_ttl_never_expires(make_store: StoreFactory) -> None:
    store = make_store(idle_ttl_s=None)
    begin(store, rec(), now=T0)
    assert store.history(S, T0 + 10**9) == (rec(),)


def test_sessions_are_independent(make_store: StoreFactory) -> None:
    store = make_store()
    begin(store, rec(call="1"), s="one")
    store.update_warning_bucket("one", "k", 1, T0)
    store.arm_guard("one", None, GUARD, T0)
    assert store.history("two", T0) == ()
    assert warning_buckets(store, "two", T0) == {}
    assert store.guard_snapshot("two", None, T0) == NO_GUARD
    assert store.update_warning_bucket("two", "k", 1, T0) is True


# --- async twins -------------------------------------------------------------------------


@pytest.mark.parametrize("use_asyncio", [False, True], ids=["sync-client", "asyncio-client"])
async def test_async_twins_match_the_sync_methods(
    make_store: StoreFactory, use_asyncio: bool
) -> None:
    store = make_store(use_asyncio=use_asyncio)
    first, second = rec(call="1", run="r"), rec(call="2", run="r")
    assert list(await store.abegin_call(S, "r", first, 30, T0)) == []
    assert list(await store.abegin_call(S, "r", second, 30, T0)) == [first]
    await store.acancel_call(S, second, T0)
    assert await store.aupdate_warning_bucket(S, "k", 1, T0) is True
    assert await store.aarm_guard(S, "r", GUARD, T0) == GUARD
    record, verdict = await store.arecord_outcome(S, outcome(call="1", run="r"), GUARD, T0)
    assert record.timestamp == first.timestamp and record.result_hash == "r1"
    assert verdict == GuardVerdict(should_abort=False, armed=True, remaining_attempts=2)
    assert await store.ahistory(S, T0) == (record,)
    assert await store.aguard_snapshot(S, "r", T0) == GuardSnapshot(True, 2)
    assert await store.alast_guard_verdict(S, "r", T0) == verdict
    await store.aclose()
