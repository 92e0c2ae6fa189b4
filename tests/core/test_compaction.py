"""The post-compaction guard (SPEC §6.1) and its error (§9.1).

Log lines and the abort message are written out in full here.
"""

from __future__ import annotations

import logging
import math
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from loopwatch import (
    UNDEFINED,
    GuardSnapshot,
    GuardVerdict,
    PostCompactionGuard,
    PostCompactionLoopPersistedError,
    ToolCallRecord,
)

LOGGER = "loopwatch.guard"
IDLE = GuardVerdict(should_abort=False, armed=False, remaining_attempts=0)
X = ("exec", "exec:aaa", "r1")
Y = ("exec", "exec:aaa", "r2")


def abort_message(tool: str, n: int, window: int) -> str:
    return (
        f"CRITICAL: tool {tool} repeated {n} times with identical arguments and identical "
        f"results within {window} attempts after auto-compaction. The compaction did not "
        "break the loop. Aborting to prevent runaway resource use."
    )


def abort(tool: str, n: int, window: int) -> GuardVerdict:
    return GuardVerdict(
        should_abort=True,
        armed=False,
        remaining_attempts=0,
        detector="compaction_loop_persisted",
        count=n,
        tool_name=tool,
        message=abort_message(tool, n, window),
    )


def going(remaining: int) -> GuardVerdict:
    return GuardVerdict(should_abort=False, armed=remaining > 0, remaining_attempts=remaining)


def guard_lines(caplog: pytest.LogCaptureFixture) -> list[tuple[int, str]]:
    return [(r.levelno, r.getMessage()) for r in caplog.records if r.name == LOGGER]


@pytest.fixture()
def logs(caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    caplog.set_level(logging.DEBUG, logger=LOGGER)
    return caplog


# =============================================================================================
# Construction: window size and enabled
# =============================================================================================


@pytest.mark.parametrize(
    ("window_size", "resolved"),
    [
        (3, 3),
        (1, 1),
        (7, 7),
        (2.0, 2),
        (10**6, 10**6),
        (0, 3),
        (-2, 3),
        (2.5, 3),
        (0.5, 3),
        (True, 3),
        (False, 3),
        ("3", 3),
        (None, 3),
        (math.nan, 3),
        (math.inf, 3),
        ([4], 3),
    ],
)
def test_window_size_resolution(
    window_size: object, resolved: int, logs: pytest.LogCaptureFixture
) -> None:
    guard = PostCompactionGuard(window_size)
    guard.arm()
    assert guard.snapshot() == GuardSnapshot(armed=True, remaining_attempts=resolved)
    assert type(guard.snapshot().remaining_attempts) is int
    assert guard_lines(logs) == [
        (logging.INFO, f"post-compaction guard armed for {resolved} attempts")
    ]


def test_default_window_is_three() -> None:
    guard = PostCompactionGuard()
    guard.arm()
    assert guard.snapshot() == GuardSnapshot(armed=True, remaining_attempts=3)


def test_integral_float_window_prints_as_int(logs: pytest.LogCaptureFixture) -> None:
    guard = PostCompactionGuard(window_size=2.0)
    guard.arm()
    guard.observe(*X)
    assert guard.observe(*X) == abort("exec", 2, 2)
    assert guard_lines(logs)[0] == (logging.INFO, "post-compaction guard armed for 2 attempts")


@pytest.mark.parametrize(
    ("enabled", "on"),
    [
        (None, True),
        (UNDEFINED, True),
        (True, True),
        (1, True),
        (0.5, True),
        ("x", True),
        ("false", True),
        ("0", True),
        ([], True),
        ({}, True),
        (False, False),
        (0, False),
        (0.0, False),
        (-0.0, False),
        ("", False),
        (math.nan, False),
        (Fraction(0), False),
    ],
)
def test_enabled_resolution(enabled: object, on: bool, logs: pytest.LogCaptureFixture) -> None:
    guard = PostCompactionGuard(window_size=1, enabled=enabled)
    guard.arm()
    verdict = guard.observe(*X)
    assert verdict.should_abort is on
    expected_lines = [
        (logging.INFO, "post-compaction guard armed for 1 attempts"),
        (
            logging.ERROR,
            "post-compaction loop persisted: tool=exec repeated 1 times with identical "
            "args+result post-compaction",
        ),
    ]
    assert guard_lines(logs) == (expected_lines if on else [])


def test_a_new_guard_is_not_armed() -> None:
    guard = PostCompactionGuard()
    assert guard.snapshot() == GuardSnapshot(armed=False, remaining_attempts=0)
    assert guard.observe(*X) == IDLE
    assert guard.snapshot() == GuardSnapshot(armed=False, remaining_attempts=0)


# =============================================================================================
# Arm / observe
# =============================================================================================


def test_observe_counts_down_and_then_ignores() -> None:
    guard = PostCompactionGuard(window_size=3)
    guard.arm()
    assert guard.observe("a", "a:1", "r") == going(2)
    assert guard.snapshot() == GuardSnapshot(armed=True, remaining_attempts=2)
    assert guard.observe("b", "b:1", "r") == going(1)
    assert guard.observe("a", "a:1", "r") == going(0)
    assert guard.snapshot() == GuardSnapshot(armed=False, remaining_attempts=0)
    # The window is used up: nothing is observed until the next arm, not even a loop.
    for _ in range(5):
        assert guard.observe(*X) == IDLE
    assert guard.snapshot() == GuardSnapshot(armed=False, remaining_attempts=0)


def test_abort_when_the_whole_window_is_the_same_triple(logs: pytest.LogCaptureFixture) -> None:
    guard = PostCompactionGuard()
    guard.arm()
    assert guard.observe(*X) == going(2)
    assert guard.observe(*X) == going(1)
    assert guard.observe(*X) == abort("exec", 3, 3)
    assert guard_lines(logs) == [
        (logging.INFO, "post-compaction guard armed for 3 attempts"),
        (
            logging.ERROR,
            "post-compaction loop persisted: tool=exec repeated 3 times with identical "
            "args+result post-compaction",
        ),
    ]
    assert guard.observe(*X) == IDLE  # nothing after the window


@pytest.mark.parametrize(
    "sequence",
    [
        pytest.param([X, X, Y], id="result-changes-last"),
        pytest.param([Y, X, X], id="result-changes-first"),
        pytest.param([X, Y, X], id="result-changes-middle"),
        pytest.param([X, X, ("bash", "exec:aaa", "r1")], id="tool-changes"),
        pytest.param([X, X, ("exec", "exec:bbb", "r1")], id="args-change"),
    ],
)
def test_any_change_in_the_window_never_aborts(
    sequence: list[tuple[str, str, str]], logs: pytest.LogCaptureFixture
) -> None:
    guard = PostCompactionGuard()
    guard.arm()
    verdicts = [guard.observe(*triple) for triple in sequence]
    assert verdicts == [going(2), going(1), going(0)]
    assert [line for line in guard_lines(logs) if line[0] == logging.ERROR] == []


def test_window_of_one_aborts_on_the_first_observation() -> None:
    guard = PostCompactionGuard(window_size=1)
    guard.arm()
    assert guard.observe("read", "read:x", "h") == abort("read", 1, 1)


def test_large_window_aborts_only_on_its_last_observation() -> None:
    guard = PostCompactionGuard(window_size=5)
    guard.arm()
    assert [guard.observe(*X) for _ in range(4)] == [going(4), going(3), going(2), going(1)]
    assert guard.observe(*X) == abort("exec", 5, 5)


def test_rearm_mid_window_starts_a_fresh_window(logs: pytest.LogCaptureFixture) -> None:
    guard = PostCompactionGuard()
    guard.arm()
    guard.observe(*X)
    guard.observe(*X)
    guard.arm()
    assert guard.snapshot() == GuardSnapshot(armed=True, remaining_attempts=3)
    assert guard.observe(*X) == going(2)  # the two earlier X are forgotten
    assert guard.observe(*X) == going(1)
    assert guard.observe(*X) == abort("exec", 3, 3)
    armed_lines = [line for line in guard_lines(logs) if line[0] == logging.INFO]
    assert armed_lines == [(logging.INFO, "post-compaction guard armed for 3 attempts")] * 2


def test_rearm_after_an_abort_and_after_a_used_window() -> None:
    guard = PostCompactionGuard(window_size=2)
    guard.arm()
    guard.observe(*X)
    assert guard.observe(*X).should_abort
    guard.arm()
    assert guard.observe(*X) == going(1)
    assert guard.observe(*X) == abort("exec", 2, 2)
    guard.arm()
    guard.observe(*X)
    guard.observe(*Y)
    guard.arm()
    assert guard.observe(*Y) == going(1)


def test_abort_verdict_is_never_armed() -> None:
    # The window holds exactly window_size observations, so an abort is always the last one.
    for size in range(1, 6):
        guard = PostCompactionGuard(window_size=size)
        guard.arm()
        verdicts = [guard.observe(*X) for _ in range(size)]
        assert [v.should_abort for v in verdicts] == [False] * (size - 1) + [True]
        assert verdicts[-1].armed is False
        assert verdicts[-1].remaining_attempts == 0


def test_disabled_guard_sets_remaining_but_ignores_observations(
    logs: pytest.LogCaptureFixture,
) -> None:
    guard = PostCompactionGuard(window_size=2, enabled=False)
    guard.arm()
    assert guard.snapshot() == GuardSnapshot(armed=True, remaining_attempts=2)
    for _ in range(4):
        assert guard.observe(*X) == IDLE
    assert guard.snapshot() == GuardSnapshot(armed=True, remaining_attempts=2)
    assert guard_lines(logs) == []


def test_snapshot_does_not_change_state() -> None:
    guard = PostCompactionGuard()
    guard.arm()
    guard.observe(*X)
    for _ in range(3):
        assert guard.snapshot() == GuardSnapshot(armed=True, remaining_attempts=2)
    guard.observe(*X)
    assert guard.observe(*X).should_abort


def test_non_abort_observations_log_nothing(logs: pytest.LogCaptureFixture) -> None:
    guard = PostCompactionGuard()
    guard.observe(*X)
    guard.arm()
    logs.clear()
    guard.observe(*X)
    guard.observe(*Y)
    guard.observe(*X)
    assert guard_lines(logs) == []


@pytest.mark.parametrize("triple", [(None, None, None), (5, [1], {"a": 1}), ("", "", "")])
def test_observe_never_raises(triple: tuple[object, object, object]) -> None:
    guard = PostCompactionGuard(window_size=1)
    guard.arm()
    verdict = guard.observe(*triple)  # type: ignore[arg-type]
    assert verdict.should_abort is True


def test_abort_message_and_log_use_the_tool_name(logs: pytest.LogCaptureFixture) -> None:
    guard = PostCompactionGuard(window_size=2)
    guard.arm()
    guard.observe("web_search", "web_search:q", "r")
    verdict = guard.observe("web_search", "web_search:q", "r")
    assert verdict.message == (
        "CRITICAL: tool web_search repeated 2 times with identical arguments and identical "
        "results within 2 attempts after auto-compaction. The compaction did not break the "
        "loop. Aborting to prevent runaway resource use."
    )
    assert guard_lines(logs)[-1] == (
        logging.ERROR,
        "post-compaction loop persisted: tool=web_search repeated 2 times with identical "
        "args+result post-compaction",
    )


# =============================================================================================
# PostCompactionLoopPersistedError
# =============================================================================================


def test_error_from_verdict() -> None:
    verdict = abort("exec", 3, 3)
    record = ToolCallRecord(tool_name="exec", args_hash="exec:aaa", result_hash="r1", timestamp=1)
    err = PostCompactionLoopPersistedError.from_verdict(verdict, record)
    assert isinstance(err, Exception)
    assert str(err) == abort_message("exec", 3, 3)
    assert err.message == abort_message("exec", 3, 3)
    assert (err.detector, err.count, err.tool_name) == ("compaction_loop_persisted", 3, "exec")
    assert err.record is record
    assert err.verdict is verdict
    with pytest.raises(PostCompactionLoopPersistedError, match=r"^CRITICAL: tool exec"):
        raise err


def test_error_from_verdict_without_record() -> None:
    err = PostCompactionLoopPersistedError.from_verdict(abort("read", 1, 1))
    assert err.record is None
    assert err.verdict == abort("read", 1, 1)


def test_error_constructor() -> None:
    err = PostCompactionLoopPersistedError("boom", count=2, tool_name="t")
    assert str(err) == "boom"
    assert (err.message, err.count, err.tool_name) == ("boom", 2, "t")
    assert err.detector == "compaction_loop_persisted"
    assert err.record is None and err.verdict is None
    with pytest.raises(TypeError):
        PostCompactionLoopPersistedError("boom", 2, "t")  # type: ignore[misc]


# =============================================================================================
# Property: a model of the window
# =============================================================================================

triples = st.sampled_from([X, Y, ("read", "read:1", "r1")])
steps = st.lists(st.none() | triples, max_size=25)  # None = arm


@settings(max_examples=80, deadline=None)
@given(window=st.integers(1, 4), enabled=st.booleans(), steps=steps)
def test_guard_matches_a_model(
    window: int, enabled: bool, steps: list[tuple[str, str, str] | None]
) -> None:
    guard = PostCompactionGuard(window_size=window, enabled=enabled)
    remaining, seen = 0, []
    for step in steps:
        if step is None:
            guard.arm()
            remaining, seen = window, []
            assert guard.snapshot() == GuardSnapshot(armed=True, remaining_attempts=window)
            continue
        verdict = guard.observe(*step)
        if not enabled or remaining <= 0:
            assert verdict == IDLE
            continue
        remaining -= 1
        seen.append(step)
        if len(seen) == window and len(set(seen)) == 1:
            assert verdict == abort(step[0], window, window)
        else:
            assert verdict == going(remaining)
        assert guard.snapshot() == GuardSnapshot(armed=remaining > 0, remaining_attempts=remaining)
