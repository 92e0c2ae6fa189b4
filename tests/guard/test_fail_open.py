"""The guard never breaks the agent (SPEC §5.6): bad input and store failures."""

from __future__ import annotations

import dataclasses
import datetime
import decimal
import enum
import logging
import math
import uuid
from collections.abc import Sequence
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from loopwatch import UNDEFINED, LoopEvent, LoopGuard, MemoryStore, StoreError
from loopwatch.stores.base import GuardSpec, OutcomeWrite

S = "session"
ENABLED = {
    "enabled": True,
    "warningThreshold": 2,
    "criticalThreshold": 3,
    "globalCircuitBreakerThreshold": 4,
}


class BrokenStr:
    def __str__(self) -> str:
        raise RuntimeError("no text for you")


class BrokenError(Exception):
    def __str__(self) -> str:
        raise RuntimeError("broken error text")


class Colour(enum.Enum):
    RED = "red"


@dataclasses.dataclass
class Point:
    x: float
    y: float


class Slotted:
    __slots__ = ("a",)


def _cyclic() -> Any:
    a: list[Any] = [1]
    a.append(a)
    d: dict[str, Any] = {"self": None}
    d["self"] = d
    return {"list": a, "dict": d}


def _deep(depth: int) -> Any:
    value: Any = "leaf"
    for _ in range(depth):
        value = [value]
    return value


WEIRD = [
    _cyclic(),
    _deep(20_000),
    {1: "a", "1": "b"},  # colliding keys: unserialisable
    {"x": BrokenStr()},
    {BrokenStr(): 1},
    float("nan"),
    float("inf"),
    b"\x00\xff" * 10,
    bytearray(b"abc"),
    memoryview(b"xyz"),
    "\ud800 lone surrogate",
    "x" * 5_000_000,
    Colour.RED,
    Point(1.0, math.nan),
    Slotted(),
    datetime.datetime(2026, 1, 1),
    decimal.Decimal("1.10"),
    uuid.UUID(int=5),
    {"set": {3, 1, 2}, "frozen": frozenset({"a"})},
    lambda: None,
    object(),
    UNDEFINED,
    None,
    2**200,
]


@pytest.mark.parametrize("value", WEIRD, ids=[f"weird{i}" for i in range(len(WEIRD))])
def test_weird_values_never_raise(value: Any) -> None:
    guard = LoopGuard(ENABLED)
    for _ in range(5):
        decision = guard.before_call(
            "read", value, session_key=S, run_id=value, tool_call_id=value, agent_id=value
        )
        assert decision.action in ("allow", "warn", "block")
        guard.after_call(
            "read", value, session_key=S, run_id=value, tool_call_id=value, result=value
        )
        guard.after_call("read", value, session_key=S, error=value)
        guard.after_call(value, value, session_key=S, error=BrokenError())


def test_unserialisable_params_fail_open_and_log_once_per_tool(
    caplog: pytest.LogCaptureFixture,
) -> None:
    guard = LoopGuard(ENABLED)
    caplog.set_level(logging.WARNING, logger="loopwatch")
    for _ in range(3):
        decision = guard.before_call("Read", {BrokenStr(): 1}, session_key=S)
        assert decision.action == "allow" and not decision.emitted and decision.tool_result is None
        assert not decision.verdict.stuck
    guard.before_call("write", {1: 1, "1": 2}, session_key=S)
    assert guard.history(session_key=S) == ()
    lines = [r.getMessage() for r in caplog.records if r.name == "loopwatch.tools"]
    assert lines == [
        "tool loop detection failed: tool=read error=TypeError: "
        + lines[0].split("TypeError: ", 1)[1],
        "tool loop detection failed: tool=write error=TypeError: "
        + lines[1].split("TypeError: ", 1)[1],
    ]


def test_failed_outcome_tracking_leaves_the_pending_record(
    caplog: pytest.LogCaptureFixture,
) -> None:
    guard = LoopGuard(ENABLED)
    caplog.set_level(logging.WARNING, logger="loopwatch")
    guard.before_call("read", {"a": 1}, session_key=S)
    assert guard.after_call("read", {"a": 1}, session_key=S, result=[{BrokenStr(): 1}]) is None
    (record,) = guard.history(session_key=S)
    assert record.result_hash is None
    assert any(
        r.getMessage().startswith("tool loop outcome tracking failed: tool=read error=TypeError")
        for r in caplog.records
    )


def test_failure_log_memory_is_bounded(caplog: pytest.LogCaptureFixture) -> None:
    guard = LoopGuard(ENABLED)
    caplog.set_level(logging.WARNING, logger="loopwatch.tools")
    for i in range(1001):
        guard.before_call(f"t{i}", {BrokenStr(): 1}, session_key=S)
    caplog.clear()
    guard.before_call("t0", {BrokenStr(): 1}, session_key=S)  # forgotten: logs again
    guard.before_call("t1000", {BrokenStr(): 1}, session_key=S)  # remembered: silent
    assert [r.getMessage().split(" error=")[0] for r in caplog.records] == [
        "tool loop detection failed: tool=t0"
    ]


json_leaf = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(),
    st.binary(max_size=20),
    st.just(UNDEFINED),
)
anything = st.recursive(
    json_leaf,
    lambda children: st.one_of(
        st.lists(children, max_size=4),
        st.tuples(children, children),
        st.dictionaries(
            st.one_of(st.text(max_size=5), st.integers(), st.booleans(), st.none()),
            children,
            max_size=4,
        ),
        st.frozensets(st.one_of(st.integers(), st.text(max_size=3)), max_size=3),
    ),
    max_leaves=12,
)


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(
    tool=st.one_of(st.text(max_size=8), st.none(), st.integers()),
    params=anything,
    result=anything,
    error=st.one_of(st.just(UNDEFINED), anything, st.builds(RuntimeError, st.text(max_size=10))),
    run_id=st.one_of(st.none(), st.text(max_size=4), st.integers()),
    call_id=st.one_of(st.none(), st.text(max_size=4), st.integers()),
)
def test_no_input_makes_the_guard_raise(
    tool: Any, params: Any, result: Any, error: Any, run_id: Any, call_id: Any
) -> None:
    guard = LoopGuard(ENABLED)
    for _ in range(4):
        decision = guard.before_call(
            tool, params, session_key=S, run_id=run_id, tool_call_id=call_id
        )
        if decision.tool_result is not None:
            assert (
                guard.after_call(
                    tool, params, session_key=S, run_id=run_id, result=decision.tool_result
                )
                is None
            )
            continue
        guard.after_call(
            tool,
            params,
            session_key=S,
            run_id=run_id,
            tool_call_id=call_id,
            result=result,
            error=error,
        )


# --- store failures ------------------------------------------------------------------


class FlakyStore(MemoryStore):
    """A memory store that raises StoreError while ``down`` is set."""

    def __init__(self, *, fail_open: bool = True) -> None:
        super().__init__()
        self.down = False
        self.fail_open = fail_open

    def _check(self) -> None:
        if self.down:
            raise StoreError("connection refused")

    def begin_call(
        self, session_key: str, run_id: str | None, pending: Any, history_size: int, now: float
    ) -> Sequence[Any]:
        self._check()
        return super().begin_call(session_key, run_id, pending, history_size, now)

    def record_outcome(
        self, session_key: str, write: OutcomeWrite, guard: GuardSpec, now: float
    ) -> Any:
        self._check()
        return super().record_outcome(session_key, write, guard, now)

    def arm_guard(
        self, session_key: str, run_id: str | None, guard: GuardSpec, now: float
    ) -> GuardSpec:
        self._check()
        return super().arm_guard(session_key, run_id, guard, now)


def _loop(guard: LoopGuard, n: int) -> list[str]:
    actions = []
    for _ in range(n):
        decision = guard.before_call("read", {"p": 1}, session_key=S)
        actions.append(decision.action)
        result = decision.tool_result if decision.tool_result is not None else "same"
        guard.after_call("read", {"p": 1}, session_key=S, result=result)
    return actions


def test_store_down_fails_open_with_events_and_a_rate_limited_log(
    caplog: pytest.LogCaptureFixture,
) -> None:
    store = FlakyStore()
    events: list[LoopEvent] = []
    guard = LoopGuard(ENABLED, store=store, listeners=[events.append])
    caplog.set_level(logging.WARNING, logger="loopwatch")
    store.down = True
    assert _loop(guard, 6) == ["allow"] * 6
    guard.compaction_retry(session_key=S)
    store_events = [e.to_dict() for e in events if e.type == "store.error"]
    assert len(store_events) == 13
    assert store_events[0] == {
        "type": "store.error",
        "sessionKey": S,
        "operation": "before_call",
        "error": "StoreError: connection refused",
        "failOpen": True,
        "toolName": "read",
    }
    logged = [r for r in caplog.records if r.name == "loopwatch.store"]
    assert len(logged) == 1
    assert logged[0].getMessage() == (
        "loop detection store failed: operation=before_call "
        "error=StoreError: connection refused policy=fail-open"
    )
    store.down = False  # recovers by itself
    assert _loop(guard, 4) == ["allow", "allow", "warn", "block"]


def test_store_down_fails_closed_when_asked() -> None:
    store = FlakyStore(fail_open=False)
    guard = LoopGuard(ENABLED, store=store)
    store.down = True
    decision = guard.before_call("read", {}, session_key=S)
    assert decision.action == "block" and decision.tool_result is not None
    assert decision.verdict.detector == "store_unavailable"
    assert "read was not run" in (decision.verdict.message or "")
    shadow = LoopGuard(ENABLED, store=store, enforce=False)
    assert shadow.before_call("read", {}, session_key=S).action == "allow"
