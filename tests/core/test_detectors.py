"""Detection (SPEC §4, with §1 run scope and §2 resolution as seen by the detectors).

Scenarios are built through the record functions (as a host would: record the call, then
its outcome) with small thresholds: warning 3, critical 5, global 7, unknown 4. Every
message, warning key and log line is written out in full here; hashes are computed with
``hashlib`` from hand-written canonical strings.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from loopwatch import (
    UNDEFINED,
    LoopDetectionConfig,
    LoopVerdict,
    SessionState,
    ToolCallRecord,
    detect_tool_call_loop,
    record_tool_call,
    record_tool_call_outcome,
    resolve_config,
)
from loopwatch.detectors.reference import evaluate

LOGGER = "loopwatch.detection"
CFG: dict[str, Any] = {
    "enabled": True,
    "historySize": 100,
    "warningThreshold": 3,
    "criticalThreshold": 5,
    "globalCircuitBreakerThreshold": 7,
    "unknownToolThreshold": 4,
}
ALL_OFF = {
    **CFG,
    "detectors": {"genericRepeat": False, "knownPollNoProgress": False, "pingPong": False},
}
NOT_STUCK = LoopVerdict(stuck=False)


def sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def res(text: str) -> dict[str, object]:
    return {"content": [{"type": "text", "text": text}]}


def res_hash(text: str) -> str:
    return sha('{"details":{},"text":"' + text + '"}')


# Call signatures used throughout, with their hand-computed hashes.
READ = ("read", {"path": "a"})
H_READ = "read:" + sha('{"path":"a"}')
WRITE = ("write", {"path": "b"})
H_WRITE = "write:" + sha('{"path":"b"}')
CS = ("command_status", {"id": "c1"})
H_CS = "command_status:" + sha('{"id":"c1"}')
POLL = ("process", {"action": "poll", "sessionId": "s1"})
H_POLL = "process:" + sha('{"action":"poll","sessionId":"s1"}')
LOG = ("process", {"action": "log", "sessionId": "s1"})
H_LOG = "process:" + sha('{"action":"log","sessionId":"s1"}')
PROCESS_RUNNING = {"details": {"status": "running"}}
H_POLL_RUNNING = sha(
    '{"action":"poll","aggregated":null,"exitCode":null,"exitSignal":null,'
    '"status":"running","text":""}'
)
H_LOG_RUNNING = sha(
    '{"action":"log","exitCode":null,"exitSignal":null,"status":"running","text":"",'
    '"totalChars":null,"totalLines":null,"truncated":null}'
)


def call(
    state: SessionState,
    sig: tuple[str, object],
    result: object = UNDEFINED,
    *,
    error: object = UNDEFINED,
    run_id: object = None,
    config: object = CFG,
) -> None:
    """One tool call as a host records it; no result and no error leaves it pending."""
    tool, params = sig
    record_tool_call(state, tool, params, None, config, run_id=run_id)
    if result is not UNDEFINED or error is not UNDEFINED:
        record_tool_call_outcome(
            state, tool, params, result=result, error=error, config=config, run_id=run_id
        )


def calls(state: SessionState, sig: tuple[str, object], n: int, result: object = UNDEFINED) -> None:
    for _ in range(n):
        call(state, sig, result)


def detect(
    state: SessionState, sig: tuple[str, object], config: object = CFG, **kwargs: Any
) -> LoopVerdict:
    return detect_tool_call_loop(state, sig[0], sig[1], config, **kwargs)


# --- exact texts (SPEC §4) ---------------------------------------------------------------------


def msg_unknown(name: str, n: int) -> str:
    return (
        f"CRITICAL: attempted unavailable tool {name} {n} times. "
        "Stop retrying that missing tool and answer without it."
    )


def msg_global(tool: str, n: int) -> str:
    return (
        f"CRITICAL: {tool} has repeated identical no-progress outcomes {n} times. "
        "Session execution blocked by global circuit breaker to prevent runaway loops."
    )


def msg_poll_critical(tool: str, n: int) -> str:
    return (
        f"CRITICAL: Called {tool} with identical arguments and no progress {n} times. "
        "This appears to be a stuck polling loop. Session execution blocked to prevent "
        "resource waste."
    )


def msg_poll_warning(tool: str, n: int) -> str:
    return (
        f"WARNING: You have called {tool} {n} times with identical arguments and no progress. "
        "Stop polling and either (1) increase wait time between checks, or (2) report the "
        "task as failed if the process is stuck."
    )


def msg_pp_critical(n: int) -> str:
    return (
        f"CRITICAL: You are alternating between repeated tool-call patterns ({n} consecutive "
        "calls) with no progress. This appears to be a stuck ping-pong loop. Session "
        "execution blocked to prevent resource waste."
    )


def msg_pp_warning(n: int) -> str:
    return (
        f"WARNING: You are alternating between repeated tool-call patterns ({n} consecutive "
        "calls). This looks like a ping-pong loop; stop retrying and report the task as failed."
    )


def msg_generic_critical(tool: str, n: int) -> str:
    return (
        f"CRITICAL: Called {tool} with identical arguments and identical outcomes {n} times. "
        "Session execution blocked to prevent runaway loops."
    )


def msg_generic_warning(tool: str, n: int) -> str:
    return (
        f"WARNING: You have called {tool} {n} times with identical arguments. If this is not "
        "making progress, stop retrying and report the task as failed."
    )


def stuck(
    level: str, detector: str, count: int, message: str, key: str, paired: str | None = None
) -> LoopVerdict:
    return LoopVerdict(
        stuck=True,
        level=level,  # type: ignore[arg-type]
        detector=detector,
        count=count,
        message=message,
        warning_key=key,
        paired_tool_name=paired,
    )


def pp_key(a: str, b: str) -> str:
    # The two hashes here are plain ASCII, where UTF-16 order is code-point order.
    return "pingpong:" + "|".join(sorted((a, b)))


# =============================================================================================
# The decision table, row by row, with exact verdicts and log lines
# =============================================================================================


@dataclass(frozen=True)
class Case:
    build: Callable[[SessionState], None]
    sig: tuple[str, object]
    expected: LoopVerdict
    log: tuple[int, str] | None
    config: Any = None


def _unknown(state: SessionState) -> None:
    for i in range(4):
        call(state, ("foo", {"i": i}), error="Unknown tool: foo")


def _unknown_other_name(state: SessionState) -> None:
    for i in range(4):
        call(state, ("call_tool", {"i": i}), error=ValueError("Tool Weird.Name not found"))


def _six_different_outcomes(state: SessionState) -> None:
    for i in range(6):
        call(state, READ, res(str(i)))


def _alternate(
    n: int, a: object = UNDEFINED, b: object = UNDEFINED
) -> Callable[[SessionState], None]:
    def build(state: SessionState) -> None:
        for i in range(n):
            if i % 2 == 0:
                call(state, READ, a)
            else:
                call(state, WRITE, b)

    return build


CASES = {
    "1-unknown-tool-critical": Case(
        _unknown,
        ("foo", {"i": 99}),
        stuck("critical", "unknown_tool_repeat", 4, msg_unknown("foo", 4), "unknown-tool:foo:foo"),
        None,
    ),
    "1-unknown-tool-critical-extracted-name": Case(
        _unknown_other_name,
        ("call_tool", {}),
        stuck(
            "critical",
            "unknown_tool_repeat",
            4,
            msg_unknown("weird.name", 4),
            "unknown-tool:call_tool:weird.name",
        ),
        None,
    ),
    "1-unknown-tool-not-gated-by-detectors": Case(
        _unknown,
        ("foo", {}),
        stuck("critical", "unknown_tool_repeat", 4, msg_unknown("foo", 4), "unknown-tool:foo:foo"),
        None,
        ALL_OFF,
    ),
    "2-global-critical": Case(
        lambda s: calls(s, READ, 7, res("same")),
        READ,
        stuck(
            "critical",
            "global_circuit_breaker",
            7,
            msg_global("read", 7),
            f"global:read:{H_READ}:{res_hash('same')}",
        ),
        (logging.ERROR, "Global circuit breaker triggered: read repeated 7 times with no progress"),
    ),
    "2-global-not-gated-by-detectors": Case(
        lambda s: calls(s, READ, 7, res("same")),
        READ,
        stuck(
            "critical",
            "global_circuit_breaker",
            7,
            msg_global("read", 7),
            f"global:read:{H_READ}:{res_hash('same')}",
        ),
        (logging.ERROR, "Global circuit breaker triggered: read repeated 7 times with no progress"),
        ALL_OFF,
    ),
    "2-global-beats-known-poll": Case(
        lambda s: calls(s, CS, 8, res("running")),
        CS,
        stuck(
            "critical",
            "global_circuit_breaker",
            8,
            msg_global("command_status", 8),
            f"global:command_status:{H_CS}:{res_hash('running')}",
        ),
        (
            logging.ERROR,
            "Global circuit breaker triggered: command_status repeated 8 times with no progress",
        ),
    ),
    "3-poll-critical-command_status": Case(
        lambda s: calls(s, CS, 5, res("running")),
        CS,
        stuck(
            "critical",
            "known_poll_no_progress",
            5,
            msg_poll_critical("command_status", 5),
            f"poll:command_status:{H_CS}:{res_hash('running')}",
        ),
        (logging.ERROR, "Critical polling loop detected: command_status repeated 5 times"),
    ),
    "3-poll-critical-process-poll": Case(
        lambda s: calls(s, POLL, 6, PROCESS_RUNNING),
        POLL,
        stuck(
            "critical",
            "known_poll_no_progress",
            6,
            msg_poll_critical("process", 6),
            f"poll:process:{H_POLL}:{H_POLL_RUNNING}",
        ),
        (logging.ERROR, "Critical polling loop detected: process repeated 6 times"),
    ),
    "4-poll-warning-command_status": Case(
        lambda s: calls(s, CS, 3, res("running")),
        CS,
        stuck(
            "warning",
            "known_poll_no_progress",
            3,
            msg_poll_warning("command_status", 3),
            f"poll:command_status:{H_CS}:{res_hash('running')}",
        ),
        (logging.WARNING, "Polling loop warning: command_status repeated 3 times"),
    ),
    "4-poll-warning-process-log": Case(
        lambda s: calls(s, LOG, 4, PROCESS_RUNNING),
        LOG,
        stuck(
            "warning",
            "known_poll_no_progress",
            4,
            msg_poll_warning("process", 4),
            f"poll:process:{H_LOG}:{H_LOG_RUNNING}",
        ),
        (logging.WARNING, "Polling loop warning: process repeated 4 times"),
    ),
    "5-ping-pong-critical": Case(
        _alternate(4, res("x"), res("y")),
        READ,
        stuck("critical", "ping_pong", 5, msg_pp_critical(5), pp_key(H_READ, H_WRITE), "write"),
        (
            logging.ERROR,
            "Critical ping-pong loop detected: alternating calls count=5 currentTool=read",
        ),
    ),
    "6-ping-pong-warning-pending": Case(
        _alternate(2),
        READ,
        stuck("warning", "ping_pong", 3, msg_pp_warning(3), pp_key(H_READ, H_WRITE), "write"),
        (logging.WARNING, "Ping-pong loop warning: alternating calls count=3 currentTool=read"),
    ),
    "6-ping-pong-warning-long-pending": Case(
        _alternate(9),
        WRITE,
        stuck("warning", "ping_pong", 10, msg_pp_warning(10), pp_key(H_READ, H_WRITE), "read"),
        (logging.WARNING, "Ping-pong loop warning: alternating calls count=10 currentTool=write"),
    ),
    "7-generic-critical": Case(
        lambda s: calls(s, READ, 5, res("same")),
        READ,
        stuck(
            "critical",
            "generic_repeat",
            5,
            msg_generic_critical("read", 5),
            f"generic:read:{H_READ}:{res_hash('same')}",
        ),
        (logging.ERROR, "Critical generic loop detected: read repeated 5 times"),
    ),
    "8-generic-warning-pending": Case(
        lambda s: calls(s, READ, 3),
        READ,
        stuck(
            "warning", "generic_repeat", 3, msg_generic_warning("read", 3), f"generic:read:{H_READ}"
        ),
        (logging.WARNING, "Loop warning: read called 3 times with identical arguments"),
    ),
    "8-generic-warning-counts-all-outcomes": Case(
        _six_different_outcomes,
        READ,
        stuck(
            "warning", "generic_repeat", 6, msg_generic_warning("read", 6), f"generic:read:{H_READ}"
        ),
        (logging.WARNING, "Loop warning: read called 6 times with identical arguments"),
    ),
    "not-stuck": Case(lambda s: calls(s, READ, 2, res("same")), READ, NOT_STUCK, None),
    "not-stuck-empty-history": Case(lambda s: None, READ, NOT_STUCK, None),
}


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_decision_table(case: Case, caplog: pytest.LogCaptureFixture) -> None:
    state = SessionState()
    case.build(state)
    caplog.set_level(logging.DEBUG, logger=LOGGER)
    caplog.clear()
    verdict = detect(state, case.sig, case.config or CFG)
    assert verdict == case.expected
    logged = [(r.levelno, r.getMessage()) for r in caplog.records if r.name == LOGGER]
    assert logged == ([case.log] if case.log else [])


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_evaluate_is_pure_and_agrees(case: Case, caplog: pytest.LogCaptureFixture) -> None:
    state = SessionState()
    case.build(state)
    tool, params = case.sig
    expected = detect(state, case.sig, case.config or CFG)
    before = list(state.history)
    known_poll = tool == "command_status" or (
        tool == "process" and isinstance(params, dict) and params.get("action") in ("poll", "log")
    )
    caplog.set_level(logging.DEBUG)
    caplog.clear()
    verdict = evaluate(
        state.history,
        tool,
        oracle_args_hash(case.sig),
        known_poll,
        resolve_config(case.config or CFG),
    )
    assert verdict == expected
    assert caplog.records == []
    assert state.history == before


def test_log_line_is_written_on_every_detection(caplog: pytest.LogCaptureFixture) -> None:
    state = SessionState()
    calls(state, READ, 3)
    caplog.set_level(logging.DEBUG, logger=LOGGER)
    for _ in range(3):
        detect(state, READ)
    assert [r.getMessage() for r in caplog.records if r.name == LOGGER] == [
        "Loop warning: read called 3 times with identical arguments"
    ] * 3


def test_not_stuck_verdict_shape() -> None:
    verdict = detect(SessionState(), READ)
    assert verdict.stuck is False
    assert verdict.count == 0
    assert (
        verdict.level,
        verdict.detector,
        verdict.message,
        verdict.warning_key,
        verdict.paired_tool_name,
    ) == (None, None, None, None, None)


# =============================================================================================
# Unknown-tool streak
# =============================================================================================


def test_unknown_streak_below_threshold_is_not_stuck() -> None:
    state = SessionState()
    for i in range(3):
        call(state, ("foo", {"i": i}), error="Unknown tool: foo")
    assert detect(state, ("foo", {})) == NOT_STUCK


def test_unknown_streak_is_broken_by_a_pending_record(caplog: pytest.LogCaptureFixture) -> None:
    state = SessionState()
    _unknown(state)
    call(state, ("foo", {"i": 9}))  # recorded by before_call, outcome not known yet
    caplog.set_level(logging.DEBUG, logger=LOGGER)
    assert detect(state, ("foo", {})) == NOT_STUCK
    assert caplog.records == []


def test_unknown_streak_is_broken_by_another_tool() -> None:
    state = SessionState()
    _unknown(state)
    call(state, ("bar", {}), error="Unknown tool: foo")
    assert detect(state, ("foo", {})) == NOT_STUCK
    assert detect(state, ("bar", {})) == NOT_STUCK  # the streak is for the upcoming tool


def test_unknown_streak_needs_the_upcoming_tool_name() -> None:
    state = SessionState()
    _unknown(state)
    assert detect(state, ("baz", {})) == NOT_STUCK
    assert detect(state, ("Foo", {})) == NOT_STUCK  # tool names are used verbatim


def test_unknown_streak_is_broken_by_an_error_without_unknown_name() -> None:
    state = SessionState()
    _unknown(state)
    call(state, ("foo", {"i": 9}), error="boom")
    assert detect(state, ("foo", {})) == NOT_STUCK


def test_unknown_streak_stops_at_a_different_name() -> None:
    state = SessionState()
    for name in ["a", "a", "b", "b"]:
        call(state, ("foo", {"n": name}), error=f"Unknown tool: {name}")
    config = {**CFG, "unknownToolThreshold": 2}
    assert detect(state, ("foo", {}), config) == stuck(
        "critical", "unknown_tool_repeat", 2, msg_unknown("b", 2), "unknown-tool:foo:b"
    )
    assert detect(state, ("foo", {}), {**CFG, "unknownToolThreshold": 3}) == NOT_STUCK


def test_unknown_threshold_is_not_clamped() -> None:
    state = SessionState()
    call(state, ("foo", {}), error="Unknown tool: foo")
    config = {**CFG, "unknownToolThreshold": 1}
    assert detect(state, ("foo", {}), config) == stuck(
        "critical", "unknown_tool_repeat", 1, msg_unknown("foo", 1), "unknown-tool:foo:foo"
    )


def test_unknown_tool_row_comes_before_generic() -> None:
    state = SessionState()
    for _ in range(5):
        call(state, ("foo", {}), error="Unknown tool: foo")
    assert detect(state, ("foo", {})).detector == "unknown_tool_repeat"
    # With a higher unknown threshold the identical error outcomes make a generic critical.
    verdict = detect(state, ("foo", {}), {**CFG, "unknownToolThreshold": 10})
    assert verdict == stuck(
        "critical",
        "generic_repeat",
        5,
        msg_generic_critical("foo", 5),
        f"generic:foo:foo:{sha('{}')}:error:{sha(chr(34) + 'Unknown tool: foo' + chr(34))}",
    )


# =============================================================================================
# No-progress streak, recent count and the consequences of §4
# =============================================================================================


def test_warnings_need_no_outcomes_but_criticals_do() -> None:
    state = SessionState()
    calls(state, READ, 30)
    verdict = detect(state, READ)
    assert (verdict.level, verdict.detector, verdict.count) == ("warning", "generic_repeat", 30)
    polls = SessionState()
    calls(polls, CS, 30)
    assert detect(polls, CS) == NOT_STUCK  # known polls need a no-progress streak


def test_known_poll_tools_never_get_generic_repeat() -> None:
    off = {**CFG, "detectors": {"knownPollNoProgress": False}}
    for sig, result in [(CS, res("running")), (POLL, PROCESS_RUNNING), (LOG, PROCESS_RUNNING)]:
        state = SessionState()
        calls(state, sig, 6, result)
        assert detect(state, sig, off) == NOT_STUCK
        pending_only = SessionState()
        calls(pending_only, sig, 6)
        assert detect(pending_only, sig) == NOT_STUCK


@pytest.mark.parametrize(
    "params", [{"action": "Poll"}, {"action": "list"}, {"action": None}, {}, None, "poll"]
)
def test_process_without_poll_or_log_action_is_generic(params: object) -> None:
    state = SessionState()
    calls(state, ("process", params), 3)
    assert detect(state, ("process", params)).detector == "generic_repeat"


def test_command_status_is_a_known_poll_whatever_its_params() -> None:
    state = SessionState()
    calls(state, ("command_status", None), 3, res("r"))
    assert detect(state, ("command_status", None)).detector == "known_poll_no_progress"


def test_streak_is_not_reset_by_unrelated_calls_in_between() -> None:
    state = SessionState()
    for other in ["c", "d", "e", "f", None]:
        call(state, READ, res("same"))
        if other:
            call(state, (other, {}), res(other))
    assert detect(state, READ) == stuck(
        "critical",
        "generic_repeat",
        5,
        msg_generic_critical("read", 5),
        f"generic:read:{H_READ}:{res_hash('same')}",
    )


def test_streak_is_reset_only_by_a_different_outcome_of_the_same_call() -> None:
    state = SessionState()
    calls(state, READ, 4, res("x"))
    call(state, READ, res("y"))
    assert detect(state, READ) == stuck(
        "warning", "generic_repeat", 5, msg_generic_warning("read", 5), f"generic:read:{H_READ}"
    )
    calls(state, READ, 4, res("y"))
    assert detect(state, READ) == stuck(
        "critical",
        "generic_repeat",
        5,
        msg_generic_critical("read", 5),
        f"generic:read:{H_READ}:{res_hash('y')}",
    )


def test_streak_stops_at_the_first_different_hash() -> None:
    state = SessionState()
    calls(state, READ, 3, res("x"))
    call(state, READ, res("y"))
    calls(state, READ, 4, res("x"))
    # Newest run of "x" is 4 (< critical 5) although "x" occurs 7 times in all.
    assert detect(state, READ).level == "warning"
    assert detect(state, READ).count == 8


def test_pending_records_are_skipped_by_the_streak() -> None:
    state = SessionState()
    calls(state, READ, 5, res("same"))
    calls(state, READ, 1)
    assert detect(state, READ) == stuck(
        "critical",
        "generic_repeat",
        5,
        msg_generic_critical("read", 5),
        f"generic:read:{H_READ}:{res_hash('same')}",
    )


def test_known_poll_latest_hash_is_the_newest_outcome() -> None:
    state = SessionState()
    calls(state, CS, 2, res("a"))
    calls(state, CS, 3, res("b"))
    assert detect(state, CS) == stuck(
        "warning",
        "known_poll_no_progress",
        3,
        msg_poll_warning("command_status", 3),
        f"poll:command_status:{H_CS}:{res_hash('b')}",
    )


def test_other_args_of_the_same_tool_do_not_count() -> None:
    state = SessionState()
    for i in range(10):
        call(state, ("read", {"path": str(i)}), res("same"))
    assert detect(state, READ) == NOT_STUCK


def test_tool_names_are_used_verbatim() -> None:
    state = SessionState()
    calls(state, READ, 5, res("same"))
    assert detect(state, (" read", READ[1])) == NOT_STUCK
    assert detect(state, ("Read", READ[1])) == NOT_STUCK


# =============================================================================================
# Ping-pong
# =============================================================================================


def test_ping_pong_with_changing_outcomes_tops_out_at_warning() -> None:
    state = SessionState()
    for i in range(4):
        call(state, READ, res(f"x{i}"))
        call(state, WRITE, res("y"))
    assert detect(state, READ) == stuck(
        "warning", "ping_pong", 9, msg_pp_warning(9), pp_key(H_READ, H_WRITE), "write"
    )


@pytest.mark.parametrize(
    ("results", "level"),
    [
        pytest.param([res("x"), res("y"), res("x"), res("y")], "critical", id="evidence"),
        pytest.param([res("x"), res("y"), res("x"), UNDEFINED], "warning", id="last-pending"),
        pytest.param([UNDEFINED, res("y"), res("x"), res("y")], "warning", id="first-pending"),
        pytest.param([res("x"), res("y1"), res("x"), res("y2")], "warning", id="last-side-differs"),
        pytest.param(
            [res("x1"), res("y"), res("x2"), res("y")], "warning", id="other-side-differs"
        ),
        pytest.param([res("x"), res("x"), res("x"), res("x")], "critical", id="sides-may-be-equal"),
    ],
)
def test_ping_pong_no_progress_evidence(results: list[object], level: str) -> None:
    state = SessionState()
    for i, result in enumerate(results):
        call(state, READ if i % 2 == 0 else WRITE, result)
    verdict = detect(state, READ)
    assert (verdict.detector, verdict.level, verdict.count) == ("ping_pong", level, 5)


def test_ping_pong_evidence_only_looks_at_the_tail() -> None:
    state = SessionState()
    call(state, READ, res("old"))
    call(state, ("other", {}), res("o"))
    for _ in range(2):
        call(state, READ, res("x"))
        call(state, WRITE, res("y"))
    assert detect(state, READ) == stuck(
        "critical", "ping_pong", 5, msg_pp_critical(5), pp_key(H_READ, H_WRITE), "write"
    )


def test_ping_pong_critical_needs_count_at_critical() -> None:
    state = SessionState()
    call(state, WRITE, res("y"))
    call(state, READ, res("x"))
    call(state, WRITE, res("y"))
    verdict = detect(state, READ)
    assert (verdict.detector, verdict.level, verdict.count) == ("ping_pong", "warning", 4)


@pytest.mark.parametrize(
    ("history", "upcoming"),
    [
        pytest.param([], READ, id="empty"),
        pytest.param([READ], WRITE, id="one-record"),
        pytest.param([READ, READ], READ, id="no-other-record"),
        pytest.param([READ, WRITE, WRITE], READ, id="tail-below-2"),
        pytest.param([READ, WRITE], ("third", {}), id="upcoming-is-neither"),
        pytest.param([READ, WRITE], WRITE, id="upcoming-repeats-last"),
        pytest.param([("", {}), ("x", {})], ("", {}), id="other-tool-name-empty"),
    ],
)
def test_ping_pong_count_zero(
    history: list[tuple[str, object]], upcoming: tuple[str, object]
) -> None:
    state = SessionState()
    for sig in history:
        call(state, sig)
    assert detect(state, upcoming) == NOT_STUCK


def test_ping_pong_with_a_named_other_tool_is_detected() -> None:
    # The contrast to the "other-tool-name-empty" case above.
    state = SessionState()
    call(state, ("y", {}))
    call(state, ("x", {}))
    verdict = detect(state, ("y", {}))
    assert (verdict.detector, verdict.count, verdict.paired_tool_name) == ("ping_pong", 3, "x")


def test_ping_pong_tail_stops_at_a_break() -> None:
    state = SessionState()
    for sig in [READ, WRITE, ("c", {}), READ, WRITE, READ, WRITE]:
        call(state, sig)
    assert detect(state, READ).count == 5


def test_ping_pong_between_args_of_one_tool() -> None:
    state = SessionState()
    a, b = ("read", {"path": "a"}), ("read", {"path": "b"})
    h_b = "read:" + sha('{"path":"b"}')
    for sig in [a, b, a, b]:
        call(state, sig, res("same"))
    assert detect(state, a) == stuck(
        "critical", "ping_pong", 5, msg_pp_critical(5), pp_key(H_READ, h_b), "read"
    )


def test_ping_pong_key_is_sorted_in_utf16_order() -> None:
    # U+FF21 sorts before U+1F600 by code point, but after it in UTF-16 (0xD83D < 0xFF21).
    bmp, astral = ("\uff21", {}), ("\U0001f600", {})
    h_bmp, h_astral = "\uff21:" + sha("{}"), "\U0001f600:" + sha("{}")
    assert sorted((h_bmp, h_astral)) == [h_bmp, h_astral]
    expected_key = f"pingpong:{h_astral}|{h_bmp}"
    state = SessionState()
    call(state, bmp)
    call(state, astral)
    assert detect(state, bmp) == stuck(
        "warning", "ping_pong", 3, msg_pp_warning(3), expected_key, "\U0001f600"
    )
    state = SessionState()
    call(state, astral)
    call(state, bmp)
    assert detect(state, astral) == stuck(
        "warning", "ping_pong", 3, msg_pp_warning(3), expected_key, "\uff21"
    )


def test_ping_pong_warning_outranks_generic_critical() -> None:
    state = SessionState()
    for i in range(5):
        call(state, READ, res("same"))
        call(state, WRITE, res(f"y{i}"))
    # READ has 5 identical outcomes (generic critical), but row 6 comes first.
    assert detect(state, READ) == stuck(
        "warning", "ping_pong", 11, msg_pp_warning(11), pp_key(H_READ, H_WRITE), "write"
    )
    no_pp = {**CFG, "detectors": {"pingPong": False}}
    assert detect(state, READ, no_pp).detector == "generic_repeat"
    assert detect(state, READ, no_pp).level == "critical"


def test_known_poll_warning_outranks_ping_pong_critical() -> None:
    state = SessionState()
    cs2 = ("command_status", {"id": "c2"})
    for _ in range(3):
        call(state, CS, res("r"))
        call(state, cs2, res("r"))
    assert detect(state, CS) == stuck(
        "warning",
        "known_poll_no_progress",
        3,
        msg_poll_warning("command_status", 3),
        f"poll:command_status:{H_CS}:{res_hash('r')}",
    )
    no_poll = {**CFG, "detectors": {"knownPollNoProgress": False}}
    assert detect(state, CS, no_poll).detector == "ping_pong"
    assert detect(state, CS, no_poll).level == "critical"


def test_ping_pong_detector_off() -> None:
    state = SessionState()
    _alternate(4, res("x"), res("y"))(state)
    assert detect(state, READ).detector == "ping_pong"
    assert detect(state, READ, {**CFG, "detectors": {"pingPong": False}}) == NOT_STUCK


# =============================================================================================
# Detector flags, `enabled`, config resolution effects (§2)
# =============================================================================================


@pytest.mark.parametrize(
    ("flag", "sig", "result"),
    [
        ("genericRepeat", READ, res("same")),
        ("knownPollNoProgress", CS, res("same")),
    ],
)
@pytest.mark.parametrize(
    ("value", "on"),
    [
        (True, True),
        (None, True),
        (UNDEFINED, True),
        ("no", True),
        ([], True),
        (False, False),
        (0, False),
        ("", False),
        (math.nan, False),
    ],
)
def test_detector_flags(
    flag: str, sig: tuple[str, Any], result: object, value: object, on: bool
) -> None:
    state = SessionState()
    calls(state, sig, 5, result)
    verdict = detect(state, sig, {**CFG, "detectors": {flag: value}})
    assert verdict.stuck is on


@pytest.mark.parametrize("detectors", [None, "x", [], [False], 0, False])
def test_non_mapping_detectors_keep_every_flag_on(detectors: object) -> None:
    state = SessionState()
    calls(state, READ, 5, res("same"))
    assert detect(state, READ, {**CFG, "detectors": detectors}).detector == "generic_repeat"


@pytest.mark.parametrize(
    "config",
    [
        pytest.param({k: v for k, v in CFG.items() if k != "enabled"}, id="missing"),
        *(
            pytest.param({**CFG, "enabled": v}, id=repr(v))
            for v in [False, None, UNDEFINED, 0, 0.0, -0.0, "", math.nan]
        ),
        pytest.param(None, id="None-block"),
        pytest.param("enabled", id="str-block"),
        pytest.param(5, id="int-block"),
        pytest.param([("enabled", True)], id="list-block"),
    ],
)
def test_detection_off(config: object, caplog: pytest.LogCaptureFixture) -> None:
    state = SessionState()
    calls(state, READ, 40, res("same"))
    for i in range(12):
        call(state, ("foo", {"i": i}), error="Unknown tool: foo")
    caplog.set_level(logging.DEBUG, logger=LOGGER)
    assert detect(state, READ, config) == NOT_STUCK
    assert detect(state, ("foo", {}), config) == NOT_STUCK
    assert caplog.records == []


@pytest.mark.parametrize("value", [True, 1, 0.5, "false", "0", [], {}, -1])
def test_enabled_is_read_with_js_truthiness(value: object) -> None:
    state = SessionState()
    calls(state, READ, 3)
    assert detect(state, READ, {**CFG, "enabled": value}).detector == "generic_repeat"


def test_config_objects_are_accepted() -> None:
    state = SessionState()
    calls(state, READ, 5, res("same"))
    cfg = LoopDetectionConfig(
        enabled=True, warning_threshold=3, critical_threshold=5, global_circuit_breaker_threshold=7
    )
    assert detect(state, READ, cfg).level == "critical"
    assert detect(state, READ, resolve_config(CFG)).level == "critical"
    assert detect(state, READ, resolve_config(cfg)).level == "critical"


def test_critical_is_clamped_above_warning() -> None:
    config = {"enabled": True, "warningThreshold": 5, "criticalThreshold": 3}
    state = SessionState()
    calls(state, READ, 5, res("same"))
    assert detect(state, READ, config) == stuck(
        "warning", "generic_repeat", 5, msg_generic_warning("read", 5), f"generic:read:{H_READ}"
    )
    call(state, READ, res("same"))
    assert detect(state, READ, config).level == "critical"
    assert detect(state, READ, config).count == 6


def test_global_is_clamped_above_the_clamped_critical() -> None:
    config = {
        "enabled": True,
        "warningThreshold": 5,
        "criticalThreshold": 3,
        "globalCircuitBreakerThreshold": 4,
    }
    state = SessionState()
    calls(state, READ, 6, res("same"))
    assert detect(state, READ, config).detector == "generic_repeat"
    call(state, READ, res("same"))
    assert detect(state, READ, config).detector == "global_circuit_breaker"
    assert detect(state, READ, config).count == 7


@pytest.mark.parametrize("bad", ["3", 0, -3, 2.5, True, math.nan, math.inf, None])
def test_invalid_thresholds_fall_back_to_defaults(bad: object) -> None:
    config = {"enabled": True, "warningThreshold": bad}
    state = SessionState()
    calls(state, READ, 9)
    assert detect(state, READ, config) == NOT_STUCK
    call(state, READ)
    assert detect(state, READ, config).count == 10


def test_integral_float_thresholds_are_used() -> None:
    state = SessionState()
    calls(state, READ, 2)
    assert detect(state, READ, {"enabled": True, "warningThreshold": 2.0}).count == 2


def test_defaults_warning_10_critical_20_global_30() -> None:
    on = {"enabled": True}
    state = SessionState()
    calls(state, READ, 9, res("same"))
    assert detect(state, READ, on) == NOT_STUCK
    call(state, READ, res("same"))
    assert detect(state, READ, on).level == "warning"
    calls(state, READ, 10, res("same"))
    assert (detect(state, READ, on).level, detect(state, READ, on).count) == ("critical", 20)
    calls(state, READ, 9, res("same"))
    assert detect(state, READ, on).detector == "generic_repeat"
    # The default history size of 30 is also the default global threshold.
    call(state, READ, res("same"))
    assert (detect(state, READ, on).detector, detect(state, READ, on).count) == (
        "global_circuit_breaker",
        30,
    )


def test_small_history_size_caps_every_count() -> None:
    config = {**CFG, "historySize": 2}
    state = SessionState()
    for _ in range(10):
        call(state, READ, res("same"), config=config)
    assert len(state.history) == 2
    assert detect(state, READ, config) == NOT_STUCK


def test_update_plan_normaliser_makes_rewording_a_repeat() -> None:
    on = {"update_plan"}
    state = SessionState()
    for i in range(3):
        record_tool_call(
            state, "update_plan", {"plan": [{"step": f"s{i}"}]}, None, CFG, normalizers=on
        )
    upcoming = {"plan": [{"step": "new wording"}]}
    assert detect_tool_call_loop(state, "update_plan", upcoming, CFG, normalizers=on).count == 3
    assert detect_tool_call_loop(state, "update_plan", upcoming, CFG) == NOT_STUCK


def test_unserialisable_params_raise_type_error() -> None:
    with pytest.raises(TypeError):
        detect_tool_call_loop(SessionState(), "t", {1: "a", "1": "b"}, CFG)


def test_unknown_normaliser_raises_even_with_detection_off() -> None:
    with pytest.raises(ValueError):
        detect_tool_call_loop(SessionState(), "t", {}, None, normalizers={"update_plna"})


def test_unknown_normaliser_raises_with_detection_on() -> None:
    with pytest.raises(ValueError):
        detect_tool_call_loop(SessionState(), "t", {}, CFG, normalizers={"update_plna"})


# =============================================================================================
# Run scope (§1)
# =============================================================================================


@pytest.mark.parametrize(
    ("recorded", "detected", "visible"),
    [
        ("r1", "r1", True),
        ("r1", " r1 ", True),
        (" r1\u3000", "r1", True),
        ("r1", "r2", False),
        ("r1", None, False),
        (None, "r1", False),
        (None, None, True),
        (None, "   ", True),
        (None, "", True),
        (None, 5, True),
        ("", None, True),
    ],
)
def test_detection_is_run_scoped(recorded: object, detected: object, visible: bool) -> None:
    state = SessionState()
    for _ in range(5):
        call(state, READ, res("same"), run_id=recorded)
    verdict = detect(state, READ, run_id=detected)
    assert verdict.stuck is visible


def test_other_runs_neither_count_nor_break_a_streak_or_a_ping_pong() -> None:
    state = SessionState()
    for i in range(5):
        call(state, READ, res("same"), run_id="r1")
        call(state, WRITE, res(f"w{i}"), run_id="r2")
    assert detect(state, READ, run_id="r1").detector == "generic_repeat"
    assert detect(state, READ, run_id="r1").level == "critical"
    # In r2 only WRITE calls exist; READ is no ping-pong there.
    assert detect(state, READ, run_id="r2") == NOT_STUCK


def test_unknown_streak_is_run_scoped() -> None:
    state = SessionState()
    for i in range(4):
        call(state, ("foo", {"i": i}), error="Unknown tool: foo", run_id="a")
        call(state, ("bar", {}), res("ok"), run_id="b")
    assert detect(state, ("foo", {}), run_id="a").detector == "unknown_tool_repeat"
    assert detect(state, ("foo", {}), run_id="b") == NOT_STUCK


# =============================================================================================
# Properties
# =============================================================================================

PROP_SIGS: list[tuple[str, object]] = [
    ("read", {"p": 1}),
    ("read", {"p": 2}),
    ("write", {}),
    ("command_status", {"id": 1}),
    ("process", {"action": "poll"}),
]
OUTCOMES: list[dict[str, object]] = [
    {},
    {"result": res("x")},
    {"result": res("y")},
    {"error": "Unknown tool: ghost"},
]
# Bursts of one repeated call make long streaks and ping-pongs likely enough to reach the
# critical rows in most examples.
# Bursts of one repeated call, or of two alternating calls, make long streaks and ping-pongs
# likely enough to reach every critical row in most examples.
Burst = tuple[int, int | None, int, str | None, int]


def _expand(bursts: list[Burst]) -> list[tuple[int, int, str | None]]:
    ops: list[tuple[int, int, str | None]] = []
    for first, second, outcome_index, run, n in bursts:
        for i in range(n):
            sig = first if second is None or i % 2 == 0 else second
            ops.append((sig, outcome_index, run))
    return ops


ops_strategy = st.lists(
    st.tuples(
        st.sampled_from(range(len(PROP_SIGS))),
        st.none() | st.sampled_from(range(len(PROP_SIGS))),
        st.sampled_from(range(len(OUTCOMES))),
        st.sampled_from([None, "r"]),
        st.integers(1, 8),
    ),
    max_size=10,
).map(_expand)
thresholds = st.integers(1, 4).flatmap(
    lambda w: st.integers(w + 1, w + 3).flatmap(
        lambda c: st.tuples(st.just(w), st.just(c), st.integers(c + 1, c + 3), st.integers(1, 5))
    )
)


def prop_config(t: tuple[int, int, int, int]) -> dict[str, Any]:
    w, c, g, u = t
    return {
        "enabled": True,
        "historySize": 50,
        "warningThreshold": w,
        "criticalThreshold": c,
        "globalCircuitBreakerThreshold": g,
        "unknownToolThreshold": u,
    }


def oracle_args_hash(sig: tuple[str, object]) -> str:
    return sig[0] + ":" + sha(json.dumps(sig[1], sort_keys=True, separators=(",", ":")))


@settings(max_examples=80, deadline=None)
@given(
    n=st.integers(1, 12),
    t=thresholds,
    alternate=st.booleans(),
    ops=st.lists(st.sampled_from(range(len(PROP_SIGS))), max_size=25),
)
def test_property_warnings_need_no_outcomes(
    n: int, t: tuple[int, int, int, int], alternate: bool, ops: list[int]
) -> None:
    config = prop_config(t)
    warning = t[0]
    # (1) A pending-only history gives at most a generic or ping-pong warning.
    state = SessionState()
    for i in ops:
        verdict = detect(state, PROP_SIGS[i], config)
        assert not verdict.stuck or (
            verdict.level == "warning" and verdict.detector in ("generic_repeat", "ping_pong")
        )
        call(state, PROP_SIGS[i], config=config)
    # (2) Enough pending calls always warn, with the exact count.
    state = SessionState()
    if alternate:
        for i in range(n):
            call(state, READ if i % 2 == 0 else WRITE, config=config)
        verdict = detect(state, WRITE if n % 2 == 1 else READ, config)
        expected = ("ping_pong", n + 1) if n >= 2 and n + 1 >= warning else None
    else:
        for _ in range(n):
            call(state, READ, config=config)
        verdict = detect(state, READ, config)
        expected = ("generic_repeat", n) if n >= warning else None
    if expected is None:
        assert verdict == NOT_STUCK
    else:
        assert (verdict.level, verdict.detector, verdict.count) == ("warning", *expected)


@settings(max_examples=80, deadline=None)
@given(ops=ops_strategy, t=thresholds)
def test_property_criticals_need_identical_outcomes(
    ops: list[tuple[int, int, str | None]], t: tuple[int, int, int, int]
) -> None:
    config = prop_config(t)
    critical, global_ = t[1], t[2]
    state = SessionState()
    for sig_index, outcome_index, run in ops:
        sig = PROP_SIGS[sig_index]
        verdict = detect(state, sig, config, run_id=run)
        if verdict.level == "critical" and verdict.detector != "unknown_tool_repeat":
            assert verdict.count >= critical
            scoped = [r for r in state.history if r.run_id == run]
            if verdict.detector == "ping_pong":
                tail = scoped[len(scoped) - (verdict.count - 1) :]
                assert all(r.result_hash is not None for r in tail)
                assert len({(r.args_hash, r.result_hash) for r in tail[::2]}) == 1
                assert len({(r.args_hash, r.result_hash) for r in tail[1::2]}) == 1
            else:
                same = [
                    r.result_hash
                    for r in scoped
                    if r.tool_name == sig[0]
                    and r.args_hash == oracle_args_hash(sig)
                    and r.result_hash is not None
                ]
                assert len(same) >= verdict.count
                assert len(set(same[-verdict.count :])) == 1
                if verdict.detector == "global_circuit_breaker":
                    assert verdict.count >= global_
        record_tool_call(state, sig[0], sig[1], None, config, run_id=run)
        if OUTCOMES[outcome_index]:
            record_tool_call_outcome(
                state, sig[0], sig[1], config=config, run_id=run, **OUTCOMES[outcome_index]
            )


@settings(max_examples=40, deadline=None)
@given(
    ops=ops_strategy,
    enabled=st.sampled_from([False, None, UNDEFINED, 0, 0.0, -0.0, "", math.nan, "missing"]),
    t=thresholds,
)
def test_property_detection_off_is_never_stuck(
    ops: list[tuple[int, int, str | None]], enabled: object, t: tuple[int, int, int, int]
) -> None:
    config = prop_config(t)
    if enabled == "missing":
        del config["enabled"]
    else:
        config["enabled"] = enabled
    state = SessionState()
    for sig_index, outcome_index, run in ops:
        sig = PROP_SIGS[sig_index]
        assert detect(state, sig, config, run_id=run) == NOT_STUCK
        record_tool_call(state, sig[0], sig[1], None, config, run_id=run)
        if OUTCOMES[outcome_index]:
            record_tool_call_outcome(
                state, sig[0], sig[1], config=config, run_id=run, **OUTCOMES[outcome_index]
            )


names = st.sampled_from(["", "a", "b", "process", "command_status", "\U0001f600", "\uff21"])
hashes = st.sampled_from(["h1", "h2", "a:x", "\U0001f600:1"])
record_strategy = st.builds(
    ToolCallRecord,
    tool_name=names,
    args_hash=hashes,
    tool_call_id=st.none() | st.text(max_size=3),
    run_id=st.none() | st.just("r"),
    result_hash=st.none() | st.sampled_from(["x", "y", "error:z"]),
    unknown_tool_name=st.none() | st.sampled_from(["", "ghost", "other"]),
    timestamp=st.integers(0, 10),
)
config_values = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-3, 12),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=3),
    st.just(UNDEFINED),
    st.lists(st.integers(), max_size=2),
)
config_strategy = st.one_of(
    st.dictionaries(
        st.sampled_from(
            [
                "enabled",
                "historySize",
                "warningThreshold",
                "criticalThreshold",
                "globalCircuitBreakerThreshold",
                "unknownToolThreshold",
                "detectors",
                "other",
            ]
        ),
        config_values,
    ),
    st.fixed_dictionaries(
        {
            "enabled": st.just(True),
            "detectors": st.dictionaries(st.text(max_size=12), config_values),
        }
    ),
    config_values,
)


@settings(max_examples=60, deadline=None)
@given(
    records=st.lists(record_strategy, max_size=30),
    tool=names,
    current=hashes,
    known_poll=st.booleans(),
    block=config_strategy,
)
def test_property_evaluate_never_raises(
    records: list[ToolCallRecord], tool: str, current: str, known_poll: bool, block: object
) -> None:
    verdict = evaluate(records, tool, current, known_poll, resolve_config(block))
    assert isinstance(verdict, LoopVerdict)
    if verdict.stuck:
        assert verdict.level in ("warning", "critical")
        assert verdict.count >= 1
        assert isinstance(verdict.message, str) and verdict.message
        assert isinstance(verdict.warning_key, str) and verdict.warning_key
        assert (verdict.paired_tool_name is not None) == (verdict.detector == "ping_pong")
    else:
        assert verdict == NOT_STUCK
    state = SessionState(history=list(records))
    assert isinstance(detect_tool_call_loop(state, tool, {"x": current}, block), LoopVerdict)
