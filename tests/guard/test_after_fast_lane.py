"""``after_call``'s fast lane (the memory store, the call ``before_call`` planned) against
the plain path it short-cuts: ``plan_after``, then ``record_outcome`` under the store's
session lock, which ``Store.record_outcome_fields`` does for any other store (here a
``MemoryStore`` subclass, which gets that default again)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from loopwatch import UNDEFINED, LoopGuard, PostCompactionLoopPersistedError
from loopwatch.core.records import RecordDraft, ToolCallRecord
from loopwatch.stores.memory.store import MemoryStore


class PlainStore(MemoryStore):
    """The memory store without its write of the fields as they are: a subclass gets
    ``Store.record_outcome_fields`` again, which builds the write and goes through
    ``record_outcome``."""


class Clock:
    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        self.now += 0.25
        return self.now


@dataclass(frozen=True)
class Call:
    tool: str
    args: int
    session: str
    run: str | None
    agent: str | None
    call_id: str | None
    outcome: int
    #: 0: after_call with the same objects, 1: with new equal objects, 2: none, 3: twice,
    #: 4: after the next call's before_call
    after: int
    retry: bool  # compaction_retry before the call (arms the run's guard)


ARGS: list[Any] = [{"path": "a"}, {"path": "b", "n": 1}, "text", 7, {"q": ["x"]}, None]
OUTCOMES: list[tuple[object, object]] = [
    ("same text", UNDEFINED),
    ("other text", UNDEFINED),
    ({"content": [{"type": "text", "text": "ok"}], "details": {"status": "done"}}, UNDEFINED),
    (UNDEFINED, "Unknown tool: ghost"),
    (UNDEFINED, UNDEFINED),  # no result: nothing recorded
    ({"details": {"status": "blocked", "deniedReason": "tool-loop"}}, UNDEFINED),
    (UNDEFINED, ValueError("boom")),
]
CALLS = st.lists(
    st.builds(
        Call,
        st.sampled_from(["read", "exec", "process", "message", "Read "]),
        st.integers(0, len(ARGS) - 1),
        st.sampled_from(["s", "s", "t"]),
        st.sampled_from([None, None, "r1", "r2"]),
        st.sampled_from([None, None, "main", "other"]),
        st.sampled_from([None, None, "c1", "c2", ""]),
        st.integers(0, len(OUTCOMES) - 1),
        st.sampled_from([0, 0, 0, 1, 2, 3, 4]),
        st.sampled_from([False] * 7 + [True]),
    ),
    max_size=50,
)
CONFIG: dict[str, Any] = {
    "enabled": True,
    "historySize": 6,
    "warningThreshold": 3,
    "criticalThreshold": 5,
    "postCompactionGuard": {"windowSize": 2},
}
OPENCLAW: dict[str, Any] = {
    "tools": {"loopDetection": CONFIG},
    "agents": {"list": [{"id": "other", "tools": {"loopDetection": {"historySize": 3}}}]},
}


def _copy(value: Any) -> Any:
    """An equal value, but a new object (the plan is then derived afresh)."""
    if isinstance(value, dict):
        return {key: _copy(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_copy(item) for item in value]
    if isinstance(value, str):
        return "".join(list(value))
    return value


def _play(store: MemoryStore, calls: list[Call], profile: str) -> list[object]:
    guard = LoopGuard(openclaw_config=OPENCLAW, store=store, clock=Clock(), profile=profile)
    seen: list[object] = []
    deferred: list[tuple[Call, Any, dict[str, Any], object, object]] = []

    def after(call: Call, params: Any, ids: dict[str, Any], result: object, error: object) -> None:
        for _ in range(2 if call.after == 3 else 1):
            try:
                record = guard.after_call(
                    call.tool, params, tool_call_id=call.call_id, result=result, error=error, **ids
                )
            except PostCompactionLoopPersistedError as exc:
                seen.append(("abort", exc.tool_name, exc.count))
            else:
                seen.append(record)
                if record is not None:
                    assert type(record) is ToolCallRecord
        seen.append(guard.last_guard_verdict(session_key=call.session, run_id=call.run))

    for call in calls:
        if call.retry:
            guard.compaction_retry(session_key=call.session, run_id=call.run, agent_id=call.agent)
        params = _copy(ARGS[call.args])
        ids = {"session_key": call.session, "run_id": call.run, "agent_id": call.agent}
        decision = guard.before_call(call.tool, params, tool_call_id=call.call_id, **ids)
        seen.append((decision.action, decision.tool_result))
        while deferred:  # the outcome of an earlier call, after this call's before_call
            after(*deferred.pop())
        if call.after == 2:
            continue
        result, error = OUTCOMES[call.outcome]
        if decision.tool_result is not None:
            result, error = decision.tool_result, UNDEFINED
        if call.after == 1:
            params, ids = _copy(params), {key: _copy(value) for key, value in ids.items()}
        if call.after == 4:
            deferred.append((call, params, ids, result, error))
        else:
            after(call, params, ids, result, error)
    for session in ("s", "t"):
        seen.append(guard.history(session_key=session))
        seen.append(store.warning_buckets(session, Clock().now))
    return seen


@settings(max_examples=300, deadline=None)
@given(CALLS, st.sampled_from(["reference", "adaptive"]))
def test_the_fast_lane_records_what_the_plain_path_records(calls: list[Call], profile: str) -> None:
    assert _play(MemoryStore(), calls, profile) == _play(PlainStore(), calls, profile)


def test_the_usual_after_call_takes_the_fast_lane() -> None:
    """The lane the property test compares is the one a usual call takes."""
    store = MemoryStore()
    taken: list[object] = []
    fast = store.record_outcome_fields

    def spy(*args: Any) -> Any:
        taken.append(args[1])
        return fast(*args)

    store.record_outcome_fields = spy  # type: ignore[method-assign]
    guard = LoopGuard({"enabled": True}, store=store)
    params = {"path": "a"}  # the very object before_call saw: the memo proves the plan
    guard.before_call("read", params, session_key="s", tool_call_id="c1")
    guard.after_call("read", params, session_key="s", tool_call_id="c1", result="x")
    assert taken == ["read"]
    # Equal params in another object: the plain path (plan_after, then record_outcome).
    guard.before_call("read", {"path": "b"}, session_key="s", tool_call_id="c2")
    guard.after_call("read", {"path": "b"}, session_key="s", tool_call_id="c2", result="x")
    assert taken == ["read"]


FIELDS = st.tuples(
    st.text(),
    st.text(),
    st.none() | st.text(),
    st.none() | st.text(),
    st.none() | st.text(),
    st.none() | st.text(),
    st.integers(),
    st.none() | st.text(),
)


@given(FIELDS)
def test_a_record_built_as_its_slots_is_the_record(fields: tuple[Any, ...]) -> None:
    built: Any = RecordDraft()
    for name, value in zip(ToolCallRecord.__slots__, fields, strict=True):
        setattr(built, name, value)
    built.__class__ = ToolCallRecord
    plain = ToolCallRecord(*fields)
    assert type(built) is ToolCallRecord
    assert built == plain and hash(built) == hash(plain) and repr(built) == repr(plain)
