"""The adaptive detectors (issue #7): table-driven scenarios, false-positive shapes, properties.

Scenarios are written as calls (tool, params, result/error), turned into records by
``build_adaptive_record`` exactly as a host would, and the verdict for the next call is
checked in full: detector, level, count, indices and the exact message.
"""

from __future__ import annotations

import dataclasses
import json
import pathlib
from collections.abc import Sequence
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from loopwatch import ConfigError, ConfigIssue
from loopwatch.core._undefined import UNDEFINED
from loopwatch.core.fingerprint import hash_tool_call
from loopwatch.core.naming import normalize_tool_name
from loopwatch.detectors.adaptive import (
    CYCLE,
    DEFAULT_ADAPTIVE_CONFIG,
    IDENTICAL_STREAK,
    MSG_CYCLE_CRITICAL,
    MSG_CYCLE_WARNING,
    MSG_IDENTICAL_STREAK_CRITICAL,
    MSG_IDENTICAL_STREAK_WARNING,
    MSG_POLL_NO_PROGRESS_WARNING,
    MSG_REPEATED_FAILURE_CRITICAL,
    MSG_REPEATED_FAILURE_WARNING,
    MSG_SAME_ERROR_CRITICAL,
    MSG_SAME_ERROR_WARNING,
    POLL_NO_PROGRESS,
    REPEATED_FAILURE,
    SAME_ERROR,
    AdaptiveConfig,
    AdaptiveRecord,
    AdaptiveVerdict,
    CycleSettings,
    DetectorThresholds,
    build_adaptive_record,
    classify_error,
    evaluate_adaptive,
    is_mutating_call,
    normalize_error_text,
    result_failure_text,
    shell_command_is_read_only,
    shell_command_mutates,
)
from loopwatch.detectors.adaptive.detectors import RESETS_REPEATED_FAILURE

# --- helpers ---------------------------------------------------------------------------------

#: The detectors' mechanics are tested with a warning before the repeated_failure block (the
#: shipped default blocks the third attempt without one; see the ``default_`` tests).
CONFIG = AdaptiveConfig(
    repeated_failure=DetectorThresholds(warn=2, block=3),
    identical_streak=DetectorThresholds(warn=3, block=4),
)


@dataclasses.dataclass(frozen=True)
class Call:
    tool: str
    params: Any
    result: Any = UNDEFINED
    error: Any = UNDEFINED


def ok(tool: str, params: Any, result: Any = "ok") -> Call:
    return Call(tool, params, result=result)


def fail(tool: str, params: Any, error: Any = "boom", result: Any = UNDEFINED) -> Call:
    return Call(tool, params, result=result, error=error)


def think(text: str) -> Call:
    return Call("think", {"thought": text}, result="")


def records_of(calls: Sequence[Call], config: AdaptiveConfig = CONFIG) -> list[AdaptiveRecord]:
    return [
        build_adaptive_record(c.tool, c.params, result=c.result, error=c.error, config=config)
        for c in calls
    ]


def verdict_for(
    calls: Sequence[Call],
    tool: str,
    params: Any,
    config: AdaptiveConfig = CONFIG,
) -> AdaptiveVerdict | None:
    return evaluate_adaptive(records_of(calls, config), tool, hash_tool_call(tool, params), config)


def replay(
    calls: Sequence[Call], config: AdaptiveConfig = CONFIG
) -> list[tuple[int, AdaptiveVerdict]]:
    """Every verdict a host would get, calling before each call with the earlier records."""
    records: list[AdaptiveRecord] = []
    verdicts: list[tuple[int, AdaptiveVerdict]] = []
    for index, c in enumerate(calls):
        verdict = evaluate_adaptive(records, c.tool, hash_tool_call(c.tool, c.params), config)
        if verdict is not None:
            verdicts.append((index, verdict))
        records.append(
            build_adaptive_record(c.tool, c.params, result=c.result, error=c.error, config=config)
        )
    return verdicts


def first_block(calls: Sequence[Call], config: AdaptiveConfig = CONFIG) -> int | None:
    return next((i for i, v in replay(calls, config) if v.level == "critical"), None)


def key(tool: str, params: Any) -> str:
    return hash_tool_call(tool, params)


MISSING = {"path": "/Users/me/ROADMAP.md"}
FILE_NOT_FOUND = (
    '{"status": "error", "tool": "read", "error": "File not found: /Users/me/ROADMAP.md."}'
)

# --- repeated_failure ------------------------------------------------------------------------


def test_second_attempt_of_a_failed_call_is_a_warning() -> None:
    records = records_of([fail("read", MISSING, FILE_NOT_FOUND)])
    verdict = evaluate_adaptive(records, "read", key("read", MISSING), CONFIG)
    assert verdict == AdaptiveVerdict(
        detector=REPEATED_FAILURE,
        level="warning",
        count=2,
        indices=(0,),
        message=(
            "WARNING: This would be attempt 2 of the same read call, which has failed every "
            "time with the same error. Do not repeat it unchanged: read the error message, then "
            "change the arguments or try a different approach."
        ),
        tool_name="read",
        warning_key=f"adaptive:repeated_failure:read:{key('read', MISSING)}:"
        f"{records[0].failure_hash}",
        resets=RESETS_REPEATED_FAILURE,
    )
    assert verdict.message == MSG_REPEATED_FAILURE_WARNING.format(count=2, tool="read")


def test_third_attempt_is_blocked_across_thinking_calls_with_changing_text() -> None:
    calls = [
        fail("book", {"amount": 833}, "Error: payment amount does not add up"),
        think("I need to recalculate the total"),
        fail("book", {"amount": 833}, "Error: payment amount does not add up"),
        think("The error persists; verify the segments"),
    ]
    verdict = verdict_for(calls, "book", {"amount": 833})
    assert verdict is not None
    assert (verdict.detector, verdict.level, verdict.count, verdict.indices) == (
        REPEATED_FAILURE,
        "critical",
        3,
        (0, 2),
    )
    assert verdict.message == (
        "CRITICAL: Blocked attempt 3 of the same book call, which failed 2 times with the same "
        "error. Repeating it will not help: fix what the error reports, change the arguments "
        "or the approach, or report that the task cannot be completed."
    )
    assert verdict.message == MSG_REPEATED_FAILURE_CRITICAL.format(count=3, prior=2, tool="book")


@pytest.mark.parametrize(
    ("calls", "expected"),
    [
        pytest.param(
            [
                fail("read", MISSING, FILE_NOT_FOUND),
                ok("exec", {"command": "find . -name ROADMAP.md"}, "./docs/ROADMAP.md"),
                fail("read", MISSING, FILE_NOT_FOUND),
            ],
            ("critical", 3, (0, 2)),
            id="interleaved-calls-of-other-tools-do-not-break-the-count",
        ),
        pytest.param(
            [fail("read", MISSING, "E1"), fail("read", MISSING, "E2")],
            ("warning", 2, (1,)),
            id="only-failures-with-the-newest-error-count",
        ),
        pytest.param(
            [fail("read", MISSING), ok("read", MISSING), fail("read", MISSING)],
            ("warning", 2, (2,)),
            id="a-success-of-the-same-call-ends-the-count",
        ),
        pytest.param(
            [fail("read", MISSING), fail("read", MISSING), ok("edit", {"path": "a", "text": "x"})],
            None,
            id="a-mutating-success-resets",
        ),
        pytest.param(
            [fail("read", MISSING), ok("edit", {"path": "a", "text": "x"}), fail("read", MISSING)],
            ("warning", 2, (2,)),
            id="only-failures-after-the-last-progress-count",
        ),
        pytest.param(
            [
                ok("edit", {"path": "a", "text": "x"}),
                fail("read", MISSING),
                ok("edit", {"path": "a", "text": "x"}),
                fail("read", MISSING),
            ],
            ("critical", 3, (1, 3)),
            id="rewriting-identical-content-is-not-progress",
        ),
        pytest.param(
            [
                fail(
                    "exec",
                    {"command": "pytest"},
                    "returncode 1",
                    "<output>1 failed: test_a</output>",
                ),
                fail(
                    "exec",
                    {"command": "pytest"},
                    "returncode 1",
                    "<output>1 failed: test_b</output>",
                ),
            ],
            ("warning", 2, (1,)),
            id="same-exit-status-but-different-output-is-a-different-failure",
        ),
        pytest.param(
            [
                fail(
                    "str_replace_editor",
                    {"command": "str_replace", "path": "p"},
                    UNDEFINED,
                    "ERROR:\nParameter `old_str` is required for command: str_replace.",
                ),
                ok("str_replace_editor", {"command": "view", "path": "p"}, "1\tcode"),
                fail(
                    "str_replace_editor",
                    {"command": "str_replace", "path": "p"},
                    UNDEFINED,
                    "ERROR:\nParameter `old_str` is required for command: str_replace.",
                ),
            ],
            ("critical", 3, (0, 2)),
            id="failures-reported-in-the-result-count-and-a-view-is-not-progress",
        ),
    ],
)
def test_repeated_failure(
    calls: list[Call], expected: tuple[str, int, tuple[int, ...]] | None
) -> None:
    tool, params = calls[-1].tool, calls[-1].params
    if expected is None:
        tool, params = "read", MISSING
    verdict = verdict_for(calls, tool, params)
    if expected is None:
        assert verdict is None
    else:
        assert verdict is not None
        assert (verdict.level, verdict.count, verdict.indices) == expected
        assert verdict.detector == REPEATED_FAILURE


def test_a_deliberate_retry_after_a_transient_error_that_then_succeeds() -> None:
    calls = [
        fail("fetch", {"url": "u"}, "Error: connection reset"),
        ok("fetch", {"url": "u"}, "page"),
        ok("fetch", {"url": "v"}, "other page"),
        ok("fetch", {"url": "u"}, "page again"),
    ]
    verdicts = replay(calls)
    # The retry itself gets a warning (that is the point of one), nothing is ever blocked.
    assert [(i, v.detector, v.level) for i, v in verdicts] == [(1, REPEATED_FAILURE, "warning")]


# --- same_error ------------------------------------------------------------------------------


def gift(card: str) -> dict[str, Any]:
    return {"reservation_id": "OBUT9V", "cabin": "business", "payment_id": card}


def test_same_error_with_varying_arguments_warns_then_blocks() -> None:
    calls = [
        fail("update", gift(f"gift_card_{n}"), "Error: gift card balance is not enough")
        for n in range(5)
    ]
    warning = verdict_for(calls[:3], "update", gift("gift_card_9"))
    assert warning is not None
    assert (warning.detector, warning.level, warning.count, warning.indices) == (
        SAME_ERROR,
        "warning",
        4,
        (0, 1, 2),
    )
    assert warning.message == (
        "WARNING: update has returned the same error 3 times although its arguments changed. "
        "Varying the arguments is not fixing it: read the error, deal with its cause (a "
        "missing prerequisite, a wrong assumption about the environment), or try a different "
        "approach."
    )
    block = verdict_for(calls, "update", gift("gift_card_9"))
    assert block is not None
    assert (block.detector, block.level, block.count, block.indices) == (
        SAME_ERROR,
        "critical",
        6,
        (0, 1, 2, 3, 4),
    )
    assert block.message == MSG_SAME_ERROR_CRITICAL.format(tool="update", prior=5)
    assert warning.message == MSG_SAME_ERROR_WARNING.format(tool="update", prior=3)


def test_same_error_collides_across_numbers_paths_quotes_and_echoed_arguments() -> None:
    calls = [
        fail(
            "book",
            {"paid": 299},
            "Error: payment amount does not add up, total price is 375, but paid 299",
        ),
        fail(
            "book",
            {"paid": 833},
            "Error: payment amount does not add up, total price is 1203, but paid 833",
        ),
        fail("open", {"path": "/a/b.py"}, "File '/a/b.py' not found (0x7f3a2c)"),
    ]
    records = records_of(calls)
    assert records[0].error_class == records[1].error_class is not None
    assert records[0].error_class != records[2].error_class
    assert classify_error("File not found: /x/y.md", {}) == classify_error("File not found: /z.md")
    assert classify_error(
        '{"status": "error", "error": "File not found: /x/y.md"}'
    ) == classify_error("file not found: /q/r.md")
    assert classify_error("no such user alice", {"user": "alice"}) == classify_error(
        "no such user bob", {"user": "bob"}
    )


@pytest.mark.parametrize(
    ("text", "normalised"),
    [
        ("File not found: /Users/me/ROADMAP.md.", "file not found: <path>"),
        ("payment is 375, paid 299", "payment is <n>, paid <n>"),
        ("old_str `return x;` did not appear verbatim", "old_str <q> did not appear verbatim"),
        ("id 550e8400-e29b-41d4-a716-446655440000 gone", "id <id> gone"),
        ("object at 0x7f3a2c", "object at <hex>"),
        ('{"status": "error", "error": "Boom!"}', "boom!"),
    ],
)
def test_normalize_error_text(text: str, normalised: str) -> None:
    assert normalize_error_text(text) == normalised


@pytest.mark.parametrize(
    "text", ["returncode 1", "exit code 2", "Command exited with code 1", "timeout", "", "1"]
)
def test_a_bare_exit_status_has_no_error_class(text: str) -> None:
    assert classify_error(text) is None


def test_bare_exit_statuses_never_make_a_same_error_loop() -> None:
    calls = [fail("exec", {"command": f"grep -n x{n} f.py"}, "returncode 1", "") for n in range(8)]
    assert replay(calls) == []


def test_same_error_needs_two_argument_sets_and_a_success_of_the_tool_ends_it() -> None:
    same = [fail("update", gift("g1"), "Error: gift card balance is not enough")] * 2
    verdict = verdict_for(same, "update", gift("g2"))
    assert verdict is None  # one argument set: repeated_failure's business, and it is g1's
    varied = [
        fail("update", gift(f"g{n}"), "Error: gift card balance is not enough") for n in range(4)
    ]
    cleared = [*varied, ok("update", gift("credit_card"), "{}")]
    assert verdict_for(varied, "update", gift("g9")) is not None
    assert verdict_for(cleared, "update", gift("g9")) is None


# --- identical_streak ------------------------------------------------------------------------

SUBMIT = {"flag": "flag{People always make the best exploits.}"}


def test_identical_streak_warns_at_three_and_blocks_at_four() -> None:
    calls = [ok("submit", SUBMIT, "Wrong flag!")] * 3
    warning = verdict_for(calls[:2], "submit", SUBMIT)
    assert warning is not None
    assert (warning.detector, warning.level, warning.count, warning.indices) == (
        IDENTICAL_STREAK,
        "warning",
        3,
        (0, 1),
    )
    assert warning.message == (
        "WARNING: This would be call 3 in a row of submit with identical arguments, and the "
        "previous 2 returned identical results. Calling it again will return the same result: "
        "use the result you already have and move on to the next step."
    )
    block = verdict_for(calls, "submit", SUBMIT)
    assert block is not None
    assert (block.detector, block.level, block.count, block.indices) == (
        IDENTICAL_STREAK,
        "critical",
        4,
        (0, 1, 2),
    )
    assert block.message == MSG_IDENTICAL_STREAK_CRITICAL.format(tool="submit", count=4, prior=3)
    assert warning.message == MSG_IDENTICAL_STREAK_WARNING.format(tool="submit", count=3, prior=2)


@pytest.mark.parametrize(
    ("calls", "expected"),
    [
        pytest.param(
            [ok("a", 1, "r"), think("x"), ok("a", 1, "r"), think("y"), ok("a", 1, "r")],
            ("critical", 4, (0, 2, 4)),
            id="thinking-calls-never-break-a-streak",
        ),
        pytest.param(
            [ok("a", 1, "r1"), ok("a", 1, "r2"), ok("a", 1, "r2")],
            ("warning", 3, (1, 2)),
            id="a-different-outcome-breaks-it",
        ),
        pytest.param(
            [ok("a", 1, "r"), ok("a", 1, "r"), ok("b", 2, "s"), ok("a", 1, "r")],
            None,
            id="another-call-breaks-it",
        ),
        pytest.param(
            [ok("exec", {"command": "sed -i 's/x/x/' f.py"}, "")] * 3,
            ("critical", 4, (0, 1, 2)),
            id="the-same-no-op-edit-in-a-row-is-a-streak-not-progress",
        ),
    ],
)
def test_identical_streak(
    calls: list[Call], expected: tuple[str, int, tuple[int, ...]] | None
) -> None:
    last = next(c for c in reversed(calls) if c.tool != "think")
    verdict = verdict_for(calls, last.tool, last.params)
    if expected is None:
        assert verdict is None
    else:
        assert verdict is not None
        assert (verdict.detector, verdict.level, verdict.count, verdict.indices) == (
            IDENTICAL_STREAK,
            *expected,
        )


def test_known_polls_are_not_streaks_and_warn_only_after_eight_unchanged_polls() -> None:
    poll = {"action": "poll", "sessionId": "s1"}
    calls = [ok("process", poll, {"details": {"status": "running"}, "content": []})] * 7
    assert replay(calls) == []
    verdict = verdict_for(calls, "process", poll)
    assert verdict is not None
    assert (verdict.detector, verdict.level, verdict.count) == (POLL_NO_PROGRESS, "warning", 8)
    assert verdict.message == MSG_POLL_NO_PROGRESS_WARNING.format(tool="process", prior=7)


# --- cycle -----------------------------------------------------------------------------------

READ = {"path": "notes.md"}
LS = {"command": "ls"}


def test_a_two_call_cycle_warns_after_two_laps_and_blocks_after_three() -> None:
    lap = [ok("read", READ, "same text"), ok("exec", LS, "a b c")]
    assert verdict_for([*lap, lap[0]], "exec", LS) is None  # one lap and a half: no evidence
    warning = verdict_for([*lap, *lap], "read", READ)
    assert warning is not None
    assert (warning.detector, warning.level, warning.count, warning.indices) == (
        CYCLE,
        "warning",
        5,
        (0, 1, 2, 3),
    )
    assert warning.message == (
        "WARNING: The same sequence of 2 calls (read -> exec) has run 2 times in a row with "
        "identical results, and read would start it again. The cycle is making no progress: "
        "change an argument, try a different approach, or report that the task cannot be "
        "completed."
    )
    assert verdict_for([*lap, *lap, lap[0]], "exec", LS) is not None
    block = verdict_for([*lap, *lap, *lap], "read", READ)
    assert block is not None
    assert (block.detector, block.level, block.count, block.indices) == (
        CYCLE,
        "critical",
        7,
        (0, 1, 2, 3, 4, 5),
    )
    assert block.message == (
        "CRITICAL: Blocked read: the same sequence of 2 calls (read -> exec) has already run 3 "
        "times in a row with identical results. Stop cycling: change the approach or report "
        "that the task cannot be completed."
    )
    assert block.message == MSG_CYCLE_CRITICAL.format(
        tool="read", laps=3, period=2, tools="read -> exec"
    )
    assert warning.message == MSG_CYCLE_WARNING.format(
        tool="read", laps=2, period=2, tools="read -> exec"
    )


def test_a_three_call_cycle_with_thinking_between() -> None:
    lap = [ok("a", 1, "x"), think("hmm"), ok("b", 2, "y"), ok("c", 3, "z")]
    verdict = verdict_for([*lap, *lap, *lap], "a", 1)
    assert verdict is not None
    assert (verdict.detector, verdict.level, verdict.count) == (CYCLE, "critical", 10)
    assert verdict.indices == (0, 2, 3, 4, 6, 7, 8, 10, 11)
    assert "(a -> b -> c) has already run 3 times" in verdict.message
    # Mid-lap, the call that continues the cycle is judged on the laps already run.
    mid = verdict_for([*lap, *lap, *lap, lap[0]], "b", 2)
    assert mid is not None and (mid.level, mid.count) == ("critical", 11)


def test_a_cycle_whose_outcomes_change_is_not_a_loop() -> None:
    calls = []
    for n in range(6):
        calls += [ok("read", READ, f"version {n}"), ok("exec", LS, "a b c")]
    assert replay(calls) == []


def test_a_cycle_is_broken_by_a_pending_call() -> None:
    lap = [ok("read", READ, "same"), ok("exec", LS, "same")]
    records = records_of([*lap, *lap, *lap])
    pending = build_adaptive_record("exec", {"command": "sleep 1"})
    assert evaluate_adaptive([*records, pending], "read", key("read", READ)) is None


# --- the false-positive shapes of issue #7 -----------------------------------------------------


def test_edit_then_test_cycles_are_never_a_loop() -> None:
    calls: list[Call] = []
    for n in range(8):
        calls.append(ok("edit", {"path": "m.py", "old": f"v{n}", "new": f"v{n + 1}"}, "edited"))
        calls.append(fail("exec", {"command": "pytest -q"}, "returncode 1", "1 failed"))
    assert first_block(calls) is None
    assert replay(calls) == []


def test_edits_through_the_shell_then_the_same_test_are_never_a_loop() -> None:
    calls: list[Call] = []
    edits = [
        "sed -i 's/a/b/' m.py",
        "cat <<'EOF' > m.py\nprint(1)\nEOF",
        "python - <<'PY'\nopen('m.py', 'w').write('x')\nPY",
        "git checkout m.py",
        "echo 'x = 1' >> m.py",
        "git apply fix.patch",
    ]
    for command in edits:
        calls.append(ok("exec", {"command": command}, "<returncode>0</returncode>"))
        calls.append(fail("exec", {"command": "python repro.py"}, "returncode 1", "Traceback: E"))
    assert replay(calls) == []


def test_paged_reads_whose_results_change() -> None:
    calls = [ok("read", {"path": "big.py", "offset": n * 100}, f"lines {n}") for n in range(20)]
    assert replay(calls) == []


def test_polling_whose_output_changes() -> None:
    calls = [ok("exec", {"command": "tail -n 5 build.log"}, f"step {n}/30") for n in range(12)] + [
        ok(
            "process",
            {"action": "poll", "sessionId": "s"},
            {"details": {"status": "running", "aggregated": f"{n}%"}},
        )
        for n in range(12)
    ]
    assert replay(calls) == []


def test_a_long_methodical_run_reading_many_different_files() -> None:
    calls = [ok("read_file", {"path": f"src/mod{n}.py"}, f"source {n}") for n in range(60)]
    calls += [ok("exec", {"command": f"grep -n name{n} -r src"}, "") for n in range(30)]
    assert replay(calls) == []


def test_running_the_same_test_command_after_edits() -> None:
    calls: list[Call] = []
    for n in range(6):
        calls.append(
            ok(
                "str_replace_editor",
                {"command": "str_replace", "path": "x", "old_str": f"{n}", "new_str": f"{n + 1}"},
                "edited",
            )
        )
        calls.append(ok("str_replace_editor", {"command": "view", "path": "x"}, "same view"))
        calls.append(ok("exec", {"command": "make test"}, "FAILED 1"))
    assert replay(calls) == []


# --- whole scenarios ---------------------------------------------------------------------------


def test_the_openclaw_missing_file_loop_is_blocked_at_the_third_read() -> None:
    calls = [
        ok("create_goal", {"objective": "x"}, "created"),
        fail("read", MISSING, FILE_NOT_FOUND),
        fail("read", MISSING, FILE_NOT_FOUND),
        fail("read", MISSING, FILE_NOT_FOUND),
    ]
    verdicts = replay(calls)
    assert [(i, v.detector, v.level, v.count) for i, v in verdicts] == [
        (2, REPEATED_FAILURE, "warning", 2),
        (3, REPEATED_FAILURE, "critical", 3),
    ]


def test_a_thinking_tool_is_never_blocked() -> None:
    calls = [think("same")] * 10
    assert replay(calls) == []


def test_detectors_can_be_disabled() -> None:
    config = AdaptiveConfig(
        repeated_failure=DetectorThresholds(enabled=False, warn=2, block=3),
        identical_streak=DetectorThresholds(enabled=False, warn=3, block=4),
    )
    calls = [fail("read", MISSING)] * 5
    assert replay(calls, config) == []


def test_the_window_limits_what_is_seen() -> None:
    config = AdaptiveConfig(window=3)
    calls = [fail("read", MISSING), ok("a", 1), ok("b", 2), ok("c", 3)]
    assert verdict_for(calls, "read", MISSING, config) is None
    assert verdict_for(calls, "read", MISSING) is not None


def test_host_declared_tools() -> None:
    config = AdaptiveConfig(
        mutating_tools=("Book_Reservation",),
        thinking_tools=("scratch",),
        repeated_failure=CONFIG.repeated_failure,
    )
    assert config.mutating_tools == ("book_reservation",)
    assert "book_reservation" in config.all_mutating_tools
    assert "write" in config.all_mutating_tools
    calls = [
        fail("search", {"q": 1}),
        ok("book_reservation", {"id": 1}, "{}"),
        fail("search", {"q": 1}),
    ]
    verdict = verdict_for(calls, "search", {"q": 1}, config)
    assert verdict is not None and verdict.count == 2  # the booking reset the count
    assert verdict_for([ok("scratch", "a")] * 5, "scratch", "a", config) is None


# --- records -----------------------------------------------------------------------------------


def test_build_adaptive_record_fields() -> None:
    params = {"command": "str_replace", "path": "p", "old_str": "x", "new_str": "y"}
    record = build_adaptive_record(
        "str_replace_editor", params, result="The file p has been edited."
    )
    assert record == AdaptiveRecord(
        tool_name="str_replace_editor",
        args_hash=hash_tool_call("str_replace_editor", params),
        result_hash=record.result_hash,
        mutating=True,
    )
    assert record.result_hash is not None
    view = build_adaptive_record("str_replace_editor", {"command": "view", "path": "p"}, result="1")
    assert not view.mutating
    pending = build_adaptive_record("read", MISSING)
    assert (pending.result_hash, pending.failed, pending.failure_hash) == (None, False, None)
    failed = build_adaptive_record("read", MISSING, error=FILE_NOT_FOUND)
    assert (
        failed.failed and failed.result_hash is not None and failed.result_hash.startswith("error:")
    )
    assert failed.error_class == classify_error("File not found: /elsewhere.md")
    assert failed.failure_hash is not None and not failed.mutating
    assert build_adaptive_record("think", {"thought": "x"}, result="").thinking
    assert build_adaptive_record("process", {"action": "poll"}, result={}).polling


def test_a_blocked_result_is_never_an_outcome() -> None:
    blocked = {"details": {"status": "blocked", "deniedReason": "tool-loop"}, "content": []}
    assert build_adaptive_record("read", MISSING, result=blocked).result_hash is None


def test_a_failed_write_is_not_progress() -> None:
    record = build_adaptive_record("write", {"path": "a"}, error="EACCES: permission denied")
    assert record.failed and not record.mutating


@pytest.mark.parametrize(
    ("result", "expected"),
    [
        ("ERROR:\nNo replacement was performed", "ERROR:\nNo replacement was performed"),
        ("Error: nope", "Error: nope"),
        (
            "<returncode>1</returncode>\n<output>x</output>",
            "<returncode>1</returncode>\n<output>x</output>",
        ),
        (
            "ls: x: No such file\n\n(Command exited with code 2)",
            "ls: x: No such file\n\n(Command exited with code 2)",
        ),
        ({"isError": True, "content": [{"type": "text", "text": "bad"}]}, "bad"),
        ({"details": {"status": "failed", "exitCode": 1}, "content": []}, ""),
        ({"details": {"status": "completed", "exitCode": 2}, "content": "x"}, "x"),
        (
            "Your proposed edit has introduced new syntax error(s).",
            "Your proposed edit has introduced new syntax error(s).",
        ),
        ("<returncode>0</returncode>", None),
        ("all good; Error: is only mentioned", None),
        ({"details": {"status": "completed", "exitCode": 0}, "content": "x"}, None),
        (None, None),
        (42, None),
    ],
)
def test_result_failure_text(result: Any, expected: str | None) -> None:
    assert result_failure_text(result) == expected


@pytest.mark.parametrize(
    ("command", "mutates"),
    [
        ("sed -i 's/a/b/' f.py", True),
        ("sed -i.bak -e 's/a/b/' f.py", True),
        ("sed -e 's/a/b/' -i f.py", True),
        ("sed -n '1,20p' f.py", False),
        ("perl -pi -e 's/a/b/' f", True),
        ("cat <<'EOF' > f.py\nif a > b:\n    pass\nEOF", True),
        ("python - <<'PY'\nif a > b:\n    print(a)\nPY", False),
        ("python - <<'PY'\nopen('f', 'w').write('x')\nPY", True),
        ("python3 -c \"from pathlib import Path; Path('f').write_text('x')\"", True),
        ("python -c \"import sys; sys.stdout.write('x')\"", False),
        ("python -c \"print(open('f').read())\"", False),
        ("echo hi >> notes.txt", True),
        ("ls > listing.txt", True),
        ("ls 2>&1 | head", False),
        ("grep -r x . 2>/dev/null", False),
        ("echo 'a > b'", False),
        ("cmd | tee out.log", True),
        ("cmd | tee /dev/null", False),
        ("rm -rf build", True),
        ("cd src && mkdir -p pkg && touch pkg/__init__.py", True),
        ("mv a b", True),
        ("find . -name '*.pyc' -delete", True),
        ("find . -name '*.py'", False),
        ("git checkout f.py", True),
        ("git apply fix.diff", True),
        ("git stash", True),
        ("git status && git diff", False),
        ("git log -p", False),
        ("pip install requests", True),
        ("python -m pip install -e .", True),
        ("npm install", True),
        ("unzip archive.zip", True),
        ("unzip -l archive.zip", False),
        ("bash -lc \"cat > t.py <<'X'\\nprint(1)\\nX\"", True),
        ("pytest -q tests/ -k 'a or b'", False),
        ("python repro.py", False),
        ("x=1; [ $x -gt 0 ] && echo ok", False),
        ("nl -ba f.py | sed -n '10,20p'", False),
    ],
)
def test_shell_command_mutates(command: str, mutates: bool) -> None:
    assert shell_command_mutates(command) is mutates


def test_shell_mutation_is_read_from_the_command_of_shell_tools_only() -> None:
    config = DEFAULT_ADAPTIVE_CONFIG
    assert is_mutating_call("exec", {"command": "rm x"}, config)
    assert is_mutating_call("execute_bash", {"command": "rm x"}, config)
    assert is_mutating_call("exec", "rm x", config)
    assert not is_mutating_call("exec", {"command": "ls"}, config)
    assert not is_mutating_call("search", {"command": "rm x"}, config)
    assert is_mutating_call("write_to_file", {"path": "p", "content": "c"}, config)
    assert not is_mutating_call("str_replace_editor", {"command": "view"}, config)


@pytest.mark.parametrize(
    "command",
    [
        "sed " * 20_000 + "x" + " a=b" * 20_000,
        "-tee " * 20_000,
        "\n" * 60_000,
        "$(find . " * 8_000,
        '"\\' * 30_000,
        "open(" * 12_000,
        "-pip " * 12_000,
        "cat <<EOF\n" * 6_000,
    ],
    ids=["sed", "tee", "newlines", "find", "quotes", "open", "pip", "heredocs"],
)
def test_huge_adversarial_commands_are_judged_from_bounded_text(command: str) -> None:
    # No wall-clock limit (the machine may be loaded): the bounds are structural. Commands
    # are cut to 50,000 characters, error texts to 2,000, and a command over 10,000
    # characters is never read-only, so it is progress without being parsed.
    assert isinstance(shell_command_mutates(command), bool)
    assert shell_command_mutates(command + "\n" + command) == shell_command_mutates(
        (command + "\n" + command)[:50_000]
    )
    assert classify_error(command, {"command": command[:50]}) == classify_error(
        command[:2_000], {"command": command[:50]}
    )
    assert not shell_command_is_read_only(command)
    assert is_mutating_call("exec", {"command": command}, DEFAULT_ADAPTIVE_CONFIG)


# --- configuration -----------------------------------------------------------------------------


def test_defaults_and_mapping_round_trip() -> None:
    config = AdaptiveConfig()
    assert config == DEFAULT_ADAPTIVE_CONFIG
    assert config.to_mapping() == {
        "window": 30,
        "repeatedFailure": {"enabled": True, "warn": 3, "block": 3},
        "sameError": {"enabled": True, "warn": 4, "block": 6},
        "identicalStreak": {"enabled": True, "warn": 3, "block": 3},
        "argumentChurn": {"enabled": True, "warn": 6, "block": 9},
        "terminalFailure": {"enabled": True, "warn": 3, "block": 5},
        "typedError": {"enabled": True, "warn": 4, "block": 6},
        "unchangedWrite": {"enabled": True, "warn": 2, "block": 3},
        "pollNoProgress": {"enabled": True, "warn": 8, "block": 12},
        "cycle": {"enabled": True, "minPeriod": 2, "maxPeriod": 5, "warnLaps": 2, "blockLaps": 3},
        "mutatingTools": [],
        "thinkingTools": [],
        "shellTools": [],
        "pollTools": [],
        "readOnlyCommands": [],
    }
    assert AdaptiveConfig.from_mapping(config.to_mapping()) == config
    assert AdaptiveConfig.from_mapping(None) == config
    assert AdaptiveConfig.from_mapping({}) == config


def test_from_mapping_partial_blocks_keep_the_other_defaults() -> None:
    config = AdaptiveConfig.from_mapping(
        {
            "window": 50.0,
            "repeatedFailure": {"block": 4},
            "cycle": {"maxPeriod": 3},
            "mutatingTools": ["Bash", "book_reservation", "book_reservation"],
        }
    )
    assert config.window == 50 and isinstance(config.window, int)
    assert config.repeated_failure == DetectorThresholds(warn=3, block=4)
    assert config.cycle == CycleSettings(max_period=3)
    assert config.mutating_tools == ("exec", "book_reservation")


def test_every_issue_is_reported_at_once_with_its_path() -> None:
    with pytest.raises(ConfigError) as info:
        AdaptiveConfig.from_mapping(
            {
                "window": 0,
                "repeatedFailure": {"warn": 3, "block": 2},
                "sameError": {"block": True, "colour": 1},
                "identicalStreak": "often",
                "cycle": {"minPeriod": 4, "maxPeriod": 3, "warnLaps": 3, "blockLaps": 2},
                "thinkingTools": ["think", 7, "  "],
                "shellTools": "exec",
                "profile": "adaptive",
            }
        )
    assert info.value.issues == (
        ConfigIssue("loopwatch.adaptive.sameError.colour", "unknown key"),
        ConfigIssue("loopwatch.adaptive.identicalStreak", "expected an object"),
        ConfigIssue("loopwatch.adaptive.profile", "unknown key"),
        ConfigIssue("loopwatch.adaptive.window", "expected an integer > 0"),
        ConfigIssue("loopwatch.adaptive.repeatedFailure.block", "must not be lower than warn (3)"),
        ConfigIssue("loopwatch.adaptive.sameError.block", "expected an integer > 0"),
        ConfigIssue("loopwatch.adaptive.cycle.maxPeriod", "must not be lower than minPeriod (4)"),
        ConfigIssue("loopwatch.adaptive.cycle.blockLaps", "must be greater than warnLaps (3)"),
        ConfigIssue("loopwatch.adaptive.thinkingTools[1]", "expected a string"),
        ConfigIssue("loopwatch.adaptive.thinkingTools[2]", "expected a non-blank string"),
        ConfigIssue("loopwatch.adaptive.shellTools", "expected a list"),
    )


@pytest.mark.parametrize(
    ("kwargs", "issue"),
    [
        (
            {"window": 1},
            ConfigIssue("loopwatch.adaptive.window", "expected an integer >= 2"),
        ),
        (
            {"window": 10**6},
            ConfigIssue("loopwatch.adaptive.window", "expected an integer <= 10000"),
        ),
        (
            {"window": True},
            ConfigIssue("loopwatch.adaptive.window", "expected an integer > 0"),
        ),
        (
            {"repeated_failure": DetectorThresholds(warn=1, block=3)},
            ConfigIssue("loopwatch.adaptive.repeatedFailure.warn", "expected an integer >= 2"),
        ),
        (
            {"identical_streak": DetectorThresholds(enabled="yes", warn=3, block=4)},  # type: ignore[arg-type]
            ConfigIssue("loopwatch.adaptive.identicalStreak.enabled", "expected a boolean"),
        ),
        (
            {"cycle": CycleSettings(max_period=11)},
            ConfigIssue("loopwatch.adaptive.cycle.maxPeriod", "expected an integer <= 10"),
        ),
        (
            {"same_error": "strict"},
            ConfigIssue("loopwatch.adaptive.sameError", "expected an object"),
        ),
    ],
)
def test_constructor_validation(kwargs: dict[str, Any], issue: ConfigIssue) -> None:
    with pytest.raises(ConfigError) as info:
        AdaptiveConfig(**kwargs)
    assert info.value.issues == (issue,)


def test_from_mapping_paths_follow_the_given_path() -> None:
    with pytest.raises(ConfigError) as info:
        AdaptiveConfig.from_mapping({"window": -1}, path="agents.list[0].adaptive")
    assert info.value.issues == (
        ConfigIssue("agents.list[0].adaptive.window", "expected an integer > 0"),
    )
    with pytest.raises(ConfigError) as info:
        AdaptiveConfig.from_mapping([1, 2])
    assert info.value.issues == (ConfigIssue("loopwatch.adaptive", "expected an object"),)


def test_config_is_immutable_and_hashable() -> None:
    config = AdaptiveConfig()
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.window = 3  # type: ignore[misc]
    assert hash(config) == hash(AdaptiveConfig())
    assert dataclasses.replace(config, window=5).window == 5


# --- properties --------------------------------------------------------------------------------

TOOLS = st.sampled_from(["read", "exec", "edit", "think", "book", "process"])
HASHES = st.sampled_from(["h1", "h2", "h3"])


@st.composite
def records_strategy(draw: st.DrawFn, unique_outcomes: bool = False) -> list[AdaptiveRecord]:
    size = draw(st.integers(min_value=0, max_value=40))
    records = []
    for n in range(size):
        tool = draw(TOOLS)
        failed = draw(st.booleans())
        pending = draw(st.integers(0, 9)) == 0
        outcome = f"o{n}" if unique_outcomes else draw(HASHES)
        error_class = (
            (f"e{n}" if unique_outcomes else draw(st.sampled_from([None, "e1", "e2"])))
            if failed
            else None
        )
        records.append(
            AdaptiveRecord(
                tool_name=tool,
                args_hash=f"{tool}:{draw(HASHES)}",
                result_hash=None if pending else outcome,
                error_class=None if pending else error_class,
                failure_hash=None if pending or not failed else outcome,
                failed=failed and not pending,
                mutating=not failed and not pending and tool == "edit" and draw(st.booleans()),
                thinking=tool == "think",
                polling=tool == "process" and draw(st.booleans()),
            )
        )
    return records


CONFIGS = st.builds(
    lambda w, rf, se, ist, laps: AdaptiveConfig(
        window=w,
        repeated_failure=DetectorThresholds(warn=rf, block=rf + 1),
        same_error=DetectorThresholds(warn=se, block=se + 2),
        identical_streak=DetectorThresholds(warn=ist, block=ist + 1),
        cycle=CycleSettings(warn_laps=laps, block_laps=laps + 1),
    ),
    st.integers(2, 50),
    st.integers(2, 4),
    st.integers(2, 5),
    st.integers(2, 5),
    st.integers(2, 3),
)


@settings(max_examples=300, deadline=None)
@given(records_strategy(), TOOLS, HASHES, CONFIGS)
def test_evaluate_never_raises_and_verdicts_are_well_formed(
    records: list[AdaptiveRecord], tool: str, args: str, config: AdaptiveConfig
) -> None:
    verdict = evaluate_adaptive(records, tool, f"{tool}:{args}", config)
    if verdict is None:
        return
    assert verdict.level in ("warning", "critical")
    assert verdict.count >= 2
    assert list(verdict.indices) == sorted(set(verdict.indices))
    assert all(0 <= i < len(records) for i in verdict.indices)
    assert all(not records[i].thinking for i in verdict.indices)
    assert verdict.tool_name == tool and verdict.message


@settings(max_examples=300, deadline=None)
@given(records_strategy(unique_outcomes=True), TOOLS, HASHES)
def test_all_distinct_outcomes_are_never_blocked(
    records: list[AdaptiveRecord], tool: str, args: str
) -> None:
    verdict = evaluate_adaptive(records, tool, f"{tool}:{args}")
    assert verdict is None or verdict.level != "critical"


@settings(max_examples=300, deadline=None)
@given(records_strategy(), TOOLS, HASHES)
def test_a_mutating_success_resets(records: list[AdaptiveRecord], tool: str, args: str) -> None:
    progress = AdaptiveRecord("edit", "edit:fresh", "fresh-outcome", mutating=True)
    verdict = evaluate_adaptive([*records, progress], tool, f"{tool}:{args}")
    assert verdict is None


@settings(max_examples=200, deadline=None)
@given(records_strategy(), TOOLS, HASHES, st.lists(st.integers(0, 40), max_size=6))
def test_thinking_calls_are_transparent(
    records: list[AdaptiveRecord], tool: str, args: str, positions: list[int]
) -> None:
    config = AdaptiveConfig(window=200)
    padded = list(records)
    for position in sorted(positions, reverse=True):
        padded.insert(
            min(position, len(padded)),
            AdaptiveRecord("think", f"think:{position}", "t", thinking=True),
        )
    plain = evaluate_adaptive(records, tool, f"{tool}:{args}", config)
    with_thinking = evaluate_adaptive(padded, tool, f"{tool}:{args}", config)
    assert _summary(plain) == _summary(with_thinking)


def _summary(verdict: AdaptiveVerdict | None) -> tuple[str, str, int, str] | None:
    if verdict is None:
        return None
    return (verdict.detector, verdict.level, verdict.count, verdict.message)


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=10,
)


@settings(max_examples=200, deadline=None)
@given(TOOLS, JSON, JSON, st.none() | st.text(max_size=200))
def test_build_adaptive_record_never_raises_on_json(
    tool: str, params: Any, result: Any, error: str | None
) -> None:
    record = build_adaptive_record(
        tool, params, result=result, error=UNDEFINED if error is None else error
    )
    assert record.failed == (record.failure_hash is not None)
    assert not (record.failed and record.mutating)


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 10**9), st.integers(0, 10**9))
def test_error_class_ignores_numbers(a: int, b: int) -> None:
    assert classify_error(f"Error: total price is {a}, but paid {b}") == classify_error(
        "Error: total price is 1, but paid 2"
    )


# --- the corpus: the labelled loops are stopped, no healthy run is ---------------------------

CORPUS = pathlib.Path(__file__).resolve().parents[3] / "shared" / "corpus" / "traj"
LABELS = pathlib.Path(__file__).resolve().parents[2] / "docs" / "adaptive-labels.md"


def _labels() -> dict[str, tuple[bool, int | None]]:
    labels = {}
    for line in LABELS.read_text(encoding="utf-8").splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) >= 6 and cells[0].startswith("`") and cells[2] in ("loop", "healthy"):
            labels[cells[0].strip("`")] = (cells[2] == "loop", int(cells[3]) if cells[3] else None)
    return labels


@pytest.mark.corpus
def test_the_corpus_loops_are_stopped_early_and_no_healthy_run_is_blocked() -> None:
    assert CORPUS.is_dir(), f"the shared corpus is missing: expected {CORPUS}"
    labels = _labels()
    blocked_healthy = []
    into_loop = []
    for path in sorted(CORPUS.glob("*.jsonl")):
        calls = []
        for line in path.read_text(encoding="utf-8").splitlines():
            row = json.loads(line)
            error = UNDEFINED if row.get("error") is None else row["error"]
            tool = normalize_tool_name(row["tool"])
            calls.append(Call(tool, row.get("args", {}), result=row.get("result"), error=error))
        block = first_block(calls)
        loop, start = labels[path.stem]
        if loop:
            assert block is not None, path.stem
            assert start is not None
            into_loop.append(block - start)
        elif block is not None:
            blocked_healthy.append(path.stem)
    assert blocked_healthy == []
    assert len(into_loop) == sum(1 for loop, _ in labels.values() if loop)
    assert sorted(into_loop)[len(into_loop) // 2] <= 3
