"""LoopGuard behaviour around each tool call (SPEC §5, §6.2, §9.3, §10, §11.3)."""

from __future__ import annotations

import logging
import time
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from loopwatch import (
    UNDEFINED,
    ConfigError,
    GuardSnapshot,
    LoopDetectionConfig,
    LoopEvent,
    LoopGuard,
    MemoryStore,
    PostCompactionLoopPersistedError,
    ResolvedConfig,
    resolve_config,
)
from loopwatch.guard import blocked_result

S = "agent:main:test"
LOW = {
    "enabled": True,
    "warningThreshold": 3,
    "criticalThreshold": 5,
    "globalCircuitBreakerThreshold": 7,
}


class FakeClock:
    def __init__(self, start: float = 1_700_000_000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now


def make(config: Any = None, **kw: Any) -> tuple[LoopGuard, list[LoopEvent]]:
    events: list[LoopEvent] = []
    guard = LoopGuard(config, listeners=[events.append], **kw)
    return guard, events


_DEFAULT_ARGS = object()


def loop_once(
    guard: LoopGuard, tool: str = "read", args: Any = _DEFAULT_ARGS, result: Any = "same", **kw: Any
) -> Any:
    args = {"path": "a.txt"} if args is _DEFAULT_ARGS else args
    decision = guard.before_call(tool, args, session_key=S, **kw)
    if decision.tool_result is not None:
        assert (
            guard.after_call(tool, args, session_key=S, result=decision.tool_result, **kw) is None
        )
    else:
        guard.after_call(tool, args, session_key=S, result=result, **kw)
    return decision


# --- construction --------------------------------------------------------------------


def test_both_configs_is_a_type_error() -> None:
    with pytest.raises(TypeError):
        LoopGuard({"enabled": True}, openclaw_config={"tools": {}})


def test_resolved_config_is_rejected() -> None:
    with pytest.raises(TypeError, match="ResolvedConfig"):
        LoopGuard(resolve_config({"enabled": True}))  # type: ignore[arg-type]
    assert isinstance(resolve_config(None), ResolvedConfig)


@pytest.mark.parametrize("config", [42, "enabled", ["enabled"]])
def test_config_of_another_type_is_a_type_error(config: Any) -> None:
    with pytest.raises(TypeError):
        LoopGuard(config)


def test_invalid_block_raises_config_error_at_construction() -> None:
    with pytest.raises(ConfigError) as info:
        LoopGuard({"enabled": "yes", "historySize": 0, "bogus": 1})
    paths = [issue.path for issue in info.value.issues]
    assert paths == ["enabled", "historySize", "bogus"]


def test_invalid_openclaw_config_raises_with_full_paths() -> None:
    bad = {"agents": {"list": [{"id": "a", "tools": {"loopDetection": {"warningThreshold": -1}}}]}}
    with pytest.raises(ConfigError) as info:
        LoopGuard(openclaw_config=bad)
    assert info.value.issues[0].path == "agents.list[0].tools.loopDetection.warningThreshold"


def test_coroutine_listener_is_rejected() -> None:
    async def listener(event: LoopEvent) -> None:  # pragma: no cover - never called
        return None

    with pytest.raises(TypeError):
        LoopGuard(listeners=[listener])


def test_unknown_normalizer_is_rejected() -> None:
    with pytest.raises(ValueError, match="nope"):
        LoopGuard(normalizers={"nope"})


def test_loop_detection_config_object_is_accepted() -> None:
    guard, _ = make(LoopDetectionConfig(enabled=True, warning_threshold=3, critical_threshold=5))
    decisions = [loop_once(guard).action for _ in range(6)]
    assert decisions == ["allow", "allow", "allow", "warn", "warn", "block"]


# --- sessions and inputs -------------------------------------------------------------


@pytest.mark.parametrize("key", [None, "", "   ", "\u3000", 42, b"s"])
def test_no_session_key_allows_and_records_nothing(
    key: Any, caplog: pytest.LogCaptureFixture
) -> None:
    guard, events = make(LOW)
    caplog.set_level(logging.WARNING, logger="loopwatch")
    for _ in range(10):
        decision = guard.before_call("read", {}, session_key=key)
        assert decision.action == "allow" and decision.tool_result is None
        assert guard.after_call("read", {}, session_key=key, result="x") is None
    assert events == []
    skipped = [
        r for r in caplog.records if r.getMessage() == "tool loop detection skipped: no session key"
    ]
    assert len(skipped) == 1 and skipped[0].name == "loopwatch.tools"


@pytest.mark.parametrize(
    ("raw", "normalised"),
    [
        ("Bash", "exec"),
        (" BASH ", "exec"),
        ("apply-patch", "apply_patch"),
        (None, "tool"),
        ("", "tool"),
        ("  ", ""),
        ("PROCESS", "process"),
        ("memory_search\t", "memory_search"),
        (7, "7"),
        ("constructor", "constructor"),
    ],
)
def test_tool_names_are_normalised(raw: Any, normalised: str) -> None:
    guard, _ = make()
    guard.before_call(raw, {"a": 1}, session_key=S)
    (record,) = guard.history(session_key=S)
    assert record.tool_name == normalised
    assert record.args_hash.startswith(normalised + ":")


def test_run_ids_are_trimmed_for_scope_but_not_for_bucket_prefix() -> None:
    guard, _events = make(
        {
            "enabled": True,
            "warningThreshold": 10,
            "criticalThreshold": 50,
            "globalCircuitBreakerThreshold": 60,
        }
    )
    store = guard.store
    assert isinstance(store, MemoryStore)
    for _ in range(11):
        loop_once(guard, run_id=" r ")
    assert {r.run_id for r in guard.history(session_key=S)} == {"r"}
    (key,) = store.warning_buckets(S, time.time()).keys()
    assert key.startswith(" r :generic:read:")


def test_tool_call_id_that_is_not_a_string_is_stored_as_string() -> None:
    guard, _ = make()
    guard.before_call("read", {}, session_key=S, tool_call_id=17)
    assert guard.history(session_key=S)[0].tool_call_id == "17"


def test_history_is_trimmed_across_runs() -> None:
    guard, _ = make({"historySize": 4})
    for i in range(6):
        guard.before_call("read", {"i": i}, session_key=S, run_id=f"r{i % 2}")
    history = guard.history(session_key=S)
    assert len(history) == 4
    assert [r.run_id for r in history] == ["r0", "r1", "r0", "r1"]


def test_runs_do_not_share_loop_counts() -> None:
    guard, _ = make(LOW)
    for _ in range(4):
        loop_once(guard, run_id="run-1")
    assert loop_once(guard, run_id="run-2").action == "allow"
    assert loop_once(guard, run_id="run-1").action == "warn"


# --- blocks ----------------------------------------------------------------------------


def test_block_is_sticky_with_the_same_count_and_never_escalates() -> None:
    guard, _ = make(LOW)
    decisions = [loop_once(guard) for _ in range(12)]
    blocks = [d for d in decisions if d.action == "block"]
    assert decisions[5].action == "block"
    assert {d.verdict.count for d in blocks} == {5}
    assert {d.verdict.detector for d in blocks} == {"generic_repeat"}
    assert len(guard.history(session_key=S)) == 5  # blocked calls are never recorded


def test_blocked_result_is_a_fresh_dict_with_the_veto_shape() -> None:
    guard, _ = make(LOW)
    for _ in range(5):
        loop_once(guard)
    first = guard.before_call("read", {"path": "a.txt"}, session_key=S)
    second = guard.before_call("read", {"path": "a.txt"}, session_key=S)
    assert first.tool_result == second.tool_result == blocked_result(first.verdict.message or "")
    assert first.tool_result is not second.tool_result
    assert first.tool_result is not None
    assert first.tool_result["details"] == {
        "status": "blocked",
        "deniedReason": "tool-loop",
        "reason": first.verdict.message,
    }
    assert first.enforced and first.emitted


def test_block_emits_events_and_logs_in_order(caplog: pytest.LogCaptureFixture) -> None:
    guard, events = make(LOW)
    for _ in range(5):
        loop_once(guard, run_id="R")
    events.clear()
    order: list[str] = []

    class Recorder(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            order.append(f"log:{record.name}")

    handler = Recorder(level=logging.DEBUG)
    root = logging.getLogger("loopwatch")
    root.addHandler(handler)
    old = root.level
    root.setLevel(logging.DEBUG)
    guard._listeners = (lambda e: order.append(f"event:{e.type}"), events.append)
    try:
        decision = guard.before_call(
            "read", {"path": "a.txt"}, session_key=S, run_id="R", tool_call_id="c9"
        )
    finally:
        root.removeHandler(handler)
        root.setLevel(old)
    assert order == [
        "log:loopwatch.detection",
        "log:loopwatch.tools",
        "log:loopwatch.diagnostics",
        "event:tool.loop",
        "event:tool.execution.blocked",
    ]
    loop, blocked = (e.to_dict() for e in events)
    assert loop == {
        "type": "tool.loop",
        "sessionKey": S,
        "toolName": "read",
        "level": "critical",
        "action": "block",
        "detector": "generic_repeat",
        "count": 5,
        "message": decision.verdict.message,
    }
    assert blocked == {
        "type": "tool.execution.blocked",
        "runId": "R",
        "sessionKey": S,
        "toolName": "read",
        "toolCallId": "c9",
        "paramsSummary": {"kind": "object"},
        "reason": decision.verdict.message,
        "deniedReason": "tool-loop",
    }


def test_diagnostic_line_text(caplog: pytest.LogCaptureFixture) -> None:
    guard, _ = make(LOW)
    for _ in range(5):
        loop_once(guard)
    caplog.set_level(logging.DEBUG, logger="loopwatch")
    decision = guard.before_call("read", {"path": "a.txt"}, session_key=S)
    (line,) = [r.getMessage() for r in caplog.records if r.name == "loopwatch.diagnostics"]
    assert line == (
        f"tool loop: sessionId=unknown sessionKey={S} tool=read level=critical action=block "
        f'detector=generic_repeat count=5 message="{decision.verdict.message}"'
    )


def test_ping_pong_diagnostic_names_the_paired_tool(caplog: pytest.LogCaptureFixture) -> None:
    guard, events = make(LOW)
    caplog.set_level(logging.DEBUG, logger="loopwatch")
    for i in range(8):
        tool = "read" if i % 2 == 0 else "list"
        loop_once(guard, tool=tool, args={"t": tool}, result=tool)
    loops = [e.to_dict() for e in events if e.type == "tool.loop"]
    assert (
        loops
        and loops[-1]["detector"] == "ping_pong"
        and loops[-1]["pairedToolName"] in ("read", "list")
    )
    diag = [r.getMessage() for r in caplog.records if r.name == "loopwatch.diagnostics"]
    assert f"pairedTool={loops[-1]['pairedToolName']} message=" in diag[-1]


@pytest.mark.parametrize(
    ("params", "summary"),
    [
        (None, {"kind": "null"}),
        (UNDEFINED, {"kind": "undefined"}),
        (True, {"kind": "boolean"}),
        (2.5, {"kind": "number"}),
        ("a😀", {"kind": "string", "length": 3}),
        ([1, 2], {"kind": "array", "length": 2}),
        ({1, 2, 3}, {"kind": "array", "length": 3}),
        ({"a": 1}, {"kind": "object"}),
        (len, {"kind": "other"}),
        (object(), {"kind": "object"}),
    ],
)
def test_params_summary_never_carries_values(params: Any, summary: dict[str, Any]) -> None:
    guard, events = make(LOW)
    for _ in range(6):
        loop_once(guard, args=params)
    blocked = [e.to_dict() for e in events if e.type == "tool.execution.blocked"]
    assert blocked and blocked[0]["paramsSummary"] == summary


# --- warnings and buckets ------------------------------------------------------------


def test_warning_buckets_emit_once_per_ten() -> None:
    guard, events = make(
        {
            "enabled": True,
            "warningThreshold": 5,
            "criticalThreshold": 60,
            "globalCircuitBreakerThreshold": 70,
        }
    )
    decisions = [loop_once(guard, result=str(i)) for i in range(35)]
    warn = [(i, d.emitted) for i, d in enumerate(decisions) if d.action == "warn"]
    assert [i for i, _ in warn] == list(range(5, 35))
    assert [i for i, emitted in warn if emitted] == [10, 20, 30]
    assert [e.to_dict()["count"] for e in events] == [10, 20, 30]
    assert all(d.tool_result is None for d in decisions)


def test_warning_bucket_map_keeps_at_most_256_keys() -> None:
    guard, _ = make(
        {
            "enabled": True,
            "warningThreshold": 10,
            "criticalThreshold": 50,
            "globalCircuitBreakerThreshold": 60,
            "historySize": 50,
        }
    )
    store = guard.store
    assert isinstance(store, MemoryStore)
    for key in range(260):
        for _ in range(11):
            loop_once(guard, run_id=f"run{key}", result=None)
    buckets = store.warning_buckets(S, time.time())
    assert len(buckets) == 256
    assert next(iter(buckets)).startswith("run4:")


def test_warnings_are_never_injected_into_the_result() -> None:
    guard, _ = make(LOW)
    decisions = [loop_once(guard, result=str(i)) for i in range(8)]
    assert {d.action for d in decisions[3:]} == {"warn"}
    assert all(d.tool_result is None for d in decisions)


# --- recording rules -----------------------------------------------------------------


def test_enabled_false_records_no_calls_but_still_records_outcomes() -> None:
    guard, events = make({"enabled": False})
    guard.before_call("read", {}, session_key=S)
    assert guard.history(session_key=S) == ()
    record = guard.after_call("read", {}, session_key=S, result="x")
    assert record is not None and record.result_hash is not None
    assert len(guard.history(session_key=S)) == 1
    guard.compaction_retry(session_key=S)
    assert [e.to_dict() for e in events] == [
        {"type": "guard.armed", "sessionKey": S, "windowSize": 3, "enabled": False}
    ]


def test_unset_enabled_records_calls_without_detecting() -> None:
    guard, _ = make(None)
    decisions = [loop_once(guard) for _ in range(40)]
    assert {d.action for d in decisions} == {"allow"}
    assert len(guard.history(session_key=S)) == 30


def test_error_none_is_a_real_error_and_undefined_is_none() -> None:
    guard, _ = make()
    guard.before_call("read", {}, session_key=S)
    assert guard.after_call("read", {}, session_key=S) is None  # no result, no error
    record = guard.after_call("read", {}, session_key=S, error=None)
    assert record is not None and record.result_hash is not None
    assert record.result_hash.startswith("error:")


def test_unknown_tool_errors_trip_the_unknown_tool_detector() -> None:
    guard, _ = make({"enabled": True, "unknownToolThreshold": 3})
    decisions = []
    for _ in range(4):
        decision = guard.before_call("web_fetch", {"u": 1}, session_key=S)
        decisions.append(decision)
        if decision.tool_result is None:
            guard.after_call(
                "web_fetch", {"u": 1}, session_key=S, error=RuntimeError("Unknown tool: Web_Fetch")
            )
    assert [d.action for d in decisions] == ["allow", "allow", "allow", "block"]
    assert decisions[-1].verdict.detector == "unknown_tool_repeat"
    assert decisions[-1].verdict.message == (
        "CRITICAL: attempted unavailable tool web_fetch 3 times. "
        "Stop retrying that missing tool and answer without it."
    )


def test_send_tools_are_normalised_and_ignore_message_ids() -> None:
    guard, _ = make(LOW, send_tools=[" Telegram "])
    for i in range(6):
        result = {
            "content": [{"type": "text", "text": f"sent {i}"}],
            "details": {"ok": True, "messageId": i},
        }
        decision = loop_once(guard, tool="telegram", args={"to": "x", "text": "hi"}, result=result)
    assert decision.action == "block"


# --- shadow mode ---------------------------------------------------------------------


def test_shadow_mode_decides_but_never_blocks() -> None:
    guard, events = make(LOW, enforce=False)
    decisions = [loop_once(guard) for _ in range(10)]
    blocks = [d for d in decisions if d.action == "block"]
    assert blocks and all(d.tool_result is None and not d.enforced and d.emitted for d in blocks)
    assert all(not d.enforced for d in decisions)
    assert {e.type for e in events} == {"tool.loop"}
    assert len(guard.history(session_key=S)) == 10  # shadow blocks are recorded
    assert blocks[-1].verdict.detector == "global_circuit_breaker"


# --- post-compaction guard -----------------------------------------------------------


def test_compaction_retry_arms_and_an_identical_window_aborts() -> None:
    guard, events = make({"postCompactionGuard": {"windowSize": 2}})
    guard.compaction_retry(session_key=S, run_id="r1")
    assert guard.guard_snapshot(session_key=S, run_id=" r1 ") == GuardSnapshot(
        armed=True, remaining_attempts=2
    )
    loop_once(guard, run_id="r1")
    with pytest.raises(PostCompactionLoopPersistedError) as info:
        loop_once(guard, run_id="r1")
    err = info.value
    assert (
        err.detector == "compaction_loop_persisted" and err.count == 2 and err.tool_name == "read"
    )
    assert (
        str(err)
        == err.message
        == (
            "CRITICAL: tool read repeated 2 times with identical arguments and identical results "
            "within 2 attempts after auto-compaction. The compaction did not break the loop. "
            "Aborting to prevent runaway resource use."
        )
    )
    assert err.record is not None and err.record == guard.history(session_key=S)[-1]
    assert err.verdict == guard.last_guard_verdict(session_key=S, run_id="r1")
    assert [e.type for e in events] == ["guard.armed", "compaction_loop_persisted"]
    assert events[-1].to_dict() == {
        "type": "compaction_loop_persisted",
        "sessionKey": S,
        "runId": "r1",
        "toolName": "read",
        "count": 2,
        "message": err.message,
    }


def test_changing_results_never_abort_and_window_closes() -> None:
    guard, _ = make()
    guard.compaction_retry(session_key=S)
    for i in range(5):
        loop_once(guard, result=str(i))
    verdict = guard.last_guard_verdict(session_key=S)
    assert verdict is not None and not verdict.should_abort and not verdict.armed


def test_accessors_never_create_sessions_or_guards() -> None:
    store = MemoryStore()
    guard = LoopGuard(store=store)
    assert guard.history(session_key=S) == ()
    assert guard.guard_snapshot(session_key=S) == GuardSnapshot(False, 0)
    assert guard.last_guard_verdict(session_key=S) is None
    assert len(store) == 0


def test_guard_is_built_from_the_first_calls_block_and_never_reconfigured() -> None:
    config = {
        "tools": {"loopDetection": {"postCompactionGuard": {"windowSize": 4}}},
        "agents": {
            "list": [
                {
                    "id": "fast",
                    "tools": {"loopDetection": {"postCompactionGuard": {"windowSize": 1}}},
                }
            ]
        },
    }
    events: list[LoopEvent] = []
    guard = LoopGuard(openclaw_config=config, listeners=[events.append])
    guard.compaction_retry(session_key=S, agent_id="fast")
    guard.compaction_retry(session_key=S, agent_id="other")
    assert [e.to_dict()["windowSize"] for e in events] == [1, 1]


# --- memory store --------------------------------------------------------------------


def test_idle_sessions_expire_on_the_guard_clock() -> None:
    clock = FakeClock()
    guard = LoopGuard(store=MemoryStore(idle_ttl_s=60), clock=clock)
    guard.before_call("read", {}, session_key=S)
    clock.now += 59
    assert len(guard.history(session_key=S)) == 1
    clock.now += 2
    assert guard.history(session_key=S) == ()
    guard.before_call("read", {}, session_key=S)
    assert len(guard.history(session_key=S)) == 1


def test_least_recently_touched_session_is_dropped_first() -> None:
    store = MemoryStore(max_sessions=2)
    guard = LoopGuard(store=store)
    guard.before_call("read", {}, session_key="a")
    guard.before_call("read", {}, session_key="b")
    guard.after_call("read", {}, session_key="a", result="x")  # touches a
    guard.before_call("read", {}, session_key="c")
    assert guard.history(session_key="b") == ()
    assert len(guard.history(session_key="a")) == 1 and len(store) == 2


def test_records_use_the_guard_clock_in_milliseconds() -> None:
    clock = FakeClock(1234.5678)
    guard = LoopGuard(clock=clock)
    guard.before_call("read", {}, session_key=S)
    assert guard.history(session_key=S)[0].timestamp == 1234567


@pytest.mark.parametrize(
    ("kwargs"),
    [{"max_sessions": 0}, {"max_sessions": True}, {"idle_ttl_s": 0}, {"idle_ttl_s": -1.0}],
)
def test_memory_store_rejects_bad_limits(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        MemoryStore(**kwargs)


# --- listeners -----------------------------------------------------------------------


def test_a_failing_listener_is_logged_and_later_listeners_still_run(
    caplog: pytest.LogCaptureFixture,
) -> None:
    seen: list[str] = []

    def broken(event: LoopEvent) -> None:
        raise ValueError("boom")

    guard = LoopGuard(LOW, listeners=[broken, lambda e: seen.append(e.type)])
    caplog.set_level(logging.WARNING, logger="loopwatch")
    for _ in range(6):
        loop_once(guard)
    assert seen == ["tool.loop", "tool.execution.blocked"]
    failed = [
        r
        for r in caplog.records
        if r.name == "loopwatch" and r.getMessage().startswith("event listener failed")
    ]
    assert failed[0].getMessage() == "event listener failed: type=tool.loop error=ValueError: boom"


# --- SPEC §5.2: a blocked call is not recorded ------------------------------------------

_CALLS = [
    ("exec", {"command": "ls"}),
    ("read", {"path": "/a"}),
    ("process", {"action": "poll", "sessionId": "s1"}),
]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.integers(2, 6),
    st.lists(st.tuples(st.integers(0, 2), st.sampled_from(["same", "other"])), max_size=40),
)
def test_a_blocked_call_leaves_the_history_exactly_as_it_was(
    history_size: int, steps: list[tuple[int, str]]
) -> None:
    config = {
        "enabled": True,
        "historySize": history_size,
        "warningThreshold": 1,
        "criticalThreshold": 2,
        "globalCircuitBreakerThreshold": 3,
    }
    guard = LoopGuard(config)
    blocks = 0
    for i, (which, result) in enumerate(steps):
        tool, args = _CALLS[which]
        before = guard.history(session_key=S)
        decision = guard.before_call(tool, args, session_key=S, tool_call_id=str(i))
        if decision.action == "block":
            blocks += 1
            assert (
                guard.after_call(
                    tool, args, session_key=S, tool_call_id=str(i), result=decision.tool_result
                )
                is None
            )
            assert guard.history(session_key=S) == before
            # Sticky: the same call is blocked again, with the same count.
            again = guard.before_call(tool, args, session_key=S, tool_call_id=f"{i}-again")
            assert (again.action, again.verdict.count) == ("block", decision.verdict.count)
            assert guard.history(session_key=S) == before
        else:
            guard.after_call(tool, args, session_key=S, tool_call_id=str(i), result=result)
            assert len(guard.history(session_key=S)) == min(len(before) + 1, history_size)
