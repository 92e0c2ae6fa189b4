"""Adaptive detection in the wild (issue 15): recoveries, dismissals, earlier stops, stalls.

Every shape is tested in both directions: the recovery (or dismissal) is allowed, and the
same retry without a fix still warns and blocks. Calls go through ``build_adaptive_record``
exactly as a host records them, with the shipped defaults unless a test says otherwise.
"""

from __future__ import annotations

import base64
import dataclasses
import importlib.util
import pathlib
import sys
from collections.abc import Sequence
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from loopwatch import ConfigError
from loopwatch.core._undefined import UNDEFINED
from loopwatch.core.fingerprint import hash_tool_call
from loopwatch.core.outcomes import hash_tool_outcome
from loopwatch.detectors.adaptive import (
    ADAPTIVE_DETECTORS,
    ARGUMENT_CHURN,
    DEFAULT_ADAPTIVE_CONFIG,
    DETECTOR_TABLE,
    IDENTICAL_STREAK,
    MSG_ARGUMENT_CHURN_WARNING,
    MSG_POLL_NO_PROGRESS_CRITICAL,
    MSG_TERMINAL_FAILURE_CRITICAL,
    MSG_TERMINAL_FAILURE_WARNING,
    MSG_TYPED_ERROR_CRITICAL,
    MSG_TYPED_ERROR_WARNING,
    MSG_UNCHANGED_WRITE_CRITICAL,
    MSG_UNCHANGED_WRITE_WARNING,
    POLL_NO_PROGRESS,
    REPEATED_FAILURE,
    SAME_ERROR,
    TERMINAL_FAILURE,
    TYPED_ERROR,
    UNCHANGED_WRITE,
    AdaptiveConfig,
    AdaptiveRecord,
    AdaptiveVerdict,
    DetectorThresholds,
    build_adaptive_record,
    encode_facts,
    error_code,
    evaluate_adaptive,
    is_dismissal,
    mask_volatile,
    normalize_error_text,
    record_from_history,
    shell_command_is_read_only,
)

# --- helpers ---------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Call:
    tool: str
    params: Any
    result: Any = UNDEFINED
    error: Any = UNDEFINED


def ok(tool: str, params: Any, result: Any = "ok") -> Call:
    return Call(tool, params, result=result)


def fail(tool: str, params: Any, error: Any = "boom") -> Call:
    return Call(tool, params, error=error)


def think(text: str) -> Call:
    return Call("think", {"thought": text}, result="")


def records_of(
    calls: Sequence[Call], config: AdaptiveConfig = DEFAULT_ADAPTIVE_CONFIG
) -> list[AdaptiveRecord]:
    return [
        build_adaptive_record(c.tool, c.params, result=c.result, error=c.error, config=config)
        for c in calls
    ]


def verdict_for(
    calls: Sequence[Call],
    upcoming: Call,
    config: AdaptiveConfig = DEFAULT_ADAPTIVE_CONFIG,
) -> AdaptiveVerdict | None:
    records = records_of(calls, config)
    return evaluate_adaptive(
        records, upcoming.tool, hash_tool_call(upcoming.tool, upcoming.params), config
    )


def replay(
    calls: Sequence[Call], config: AdaptiveConfig = DEFAULT_ADAPTIVE_CONFIG
) -> list[tuple[int, str, str]]:
    """(index, detector, level) of every verdict a host would get before each call."""
    records: list[AdaptiveRecord] = []
    found: list[tuple[int, str, str]] = []
    for index, c in enumerate(calls):
        verdict = evaluate_adaptive(records, c.tool, hash_tool_call(c.tool, c.params), config)
        if verdict is not None:
            found.append((index, verdict.detector, verdict.level))
        records.append(
            build_adaptive_record(c.tool, c.params, result=c.result, error=c.error, config=config)
        )
    return found


def sh(command: str) -> dict[str, str]:
    return {"command": command}


COMMIT = sh('git commit -m "fix"')
NO_IDENTITY = (
    "Author identity unknown\n\n*** Please tell me who you are.\n\nfatal: unable to auto-detect "
    "email address (got 'me@box.(none)')"
)


# --- recoveries are progress -----------------------------------------------------------------


def test_git_commit_after_git_config_is_a_recovery() -> None:
    calls = [
        fail("exec", COMMIT, NO_IDENTITY),
        ok("exec", sh('git config user.name "Me"'), ""),
        ok("exec", sh('git config user.email "me@example.com"'), ""),
        fail("exec", COMMIT, NO_IDENTITY),  # the agent's config was not enough yet
        ok("exec", sh("git config --global user.email me@example.com"), ""),
    ]
    assert replay(calls) == []
    assert verdict_for(calls, Call("exec", COMMIT)) is None


def test_git_commit_retried_after_only_git_status_and_log_is_still_blocked() -> None:
    calls = [
        fail("exec", COMMIT, NO_IDENTITY),
        ok("exec", sh("git status"), "On branch main"),
        fail("exec", COMMIT, NO_IDENTITY),
        ok("exec", sh("git log --oneline -3 && git diff --stat"), "abc fix"),
    ]
    verdict = verdict_for(calls, Call("exec", COMMIT))
    assert verdict is not None
    assert (verdict.detector, verdict.level, verdict.count) == (REPEATED_FAILURE, "critical", 3)
    assert verdict.indices == (0, 2)


def test_git_push_after_remote_set_url_is_a_recovery() -> None:
    push = sh("git push origin main")
    denied = "remote: Permission to old/repo.git denied.\nfatal: unable to access"
    calls = [
        fail("exec", push, denied),
        fail("exec", push, denied),
        ok("exec", sh("git remote set-url origin git@github.com:me/repo.git"), ""),
    ]
    assert verdict_for(calls, Call("exec", push)) is None
    without_fix = [*calls[:2], ok("exec", sh("git remote -v"), "origin old")]
    verdict = verdict_for(without_fix, Call("exec", push))
    assert verdict is not None and verdict.level == "critical"


def test_move_after_remove_item_of_the_target_is_a_recovery() -> None:
    move = sh("Move-Item build.new build")
    exists = "Move-Item: Cannot create a file when that file already exists."
    calls = [
        fail("powershell", move, exists),
        fail("powershell", move, exists),
        ok("powershell", sh("Remove-Item -Recurse build"), ""),
    ]
    assert verdict_for(calls, Call("powershell", move)) is None
    looked = [*calls[:2], ok("powershell", sh("Get-ChildItem build"), "a.txt")]
    verdict = verdict_for(looked, Call("powershell", move))
    assert verdict is not None and verdict.level == "critical"


READ_FIRST = "File has not been read yet. Read it first before writing to it."
EDIT = {"file_path": "/repo/app.py", "old_string": "a = 1", "new_string": "a = 2"}


def test_edit_after_the_read_a_read_it_first_error_asks_for_is_a_recovery() -> None:
    calls = [
        fail("edit", EDIT, READ_FIRST),
        think("I have to read it first"),
        fail("edit", EDIT, READ_FIRST),
        ok("read", {"file_path": "/repo/app.py"}, "a = 1\n"),
    ]
    assert verdict_for(calls, Call("edit", EDIT)) is None


def test_edit_retried_after_reading_another_file_is_still_blocked() -> None:
    calls = [
        fail("edit", EDIT, READ_FIRST),
        ok("read", {"file_path": "/repo/other.py"}, "b = 1\n"),
        fail("edit", EDIT, READ_FIRST),
        ok("read", {"file_path": "/repo/other.py"}, "b = 1\n"),
    ]
    verdict = verdict_for(calls, Call("edit", EDIT))
    assert verdict is not None
    assert (verdict.detector, verdict.level) == (REPEATED_FAILURE, "critical")


def test_a_plain_retry_with_only_reads_and_thinking_between_is_blocked_at_the_third() -> None:
    missing = {"path": "/x/ROADMAP.md"}
    calls = [
        fail("read", missing, "File not found: /x/ROADMAP.md"),
        ok("exec", sh('find /x -name "ROADMAP.md"'), "/x/docs/ROADMAP.md"),
        think("maybe it is there after all"),
        fail("read", missing, "File not found: /x/ROADMAP.md"),
        ok("exec", sh("ls -la /x | grep -i road"), "docs"),
        ok("exec", sh("cat /x/docs/ROADMAP.md | head -5"), "# Roadmap"),
    ]
    assert replay(calls) == []  # one retry is healthy: no warning
    verdict = verdict_for(calls, Call("read", missing))
    assert verdict is not None
    assert (verdict.detector, verdict.level, verdict.count, verdict.indices) == (
        REPEATED_FAILURE,
        "critical",
        3,
        (0, 3),
    )


@pytest.mark.parametrize(
    "command",
    [
        "ls -la",
        "cat a.txt | grep foo | wc -l",
        "git status && git log -3 && git diff HEAD~1",
        "git remote -v; git branch; git config --get user.name",
        "git remote && git tag -l",
        "rg -n TODO src 2>&1 | head -20",
        'find . -name "*.py" -type f',
        "FOO=1 timeout 5 tail -n 50 log.txt",
        "for f in *.py; do wc -l $f; done",
        "if [ -f x ]; then cat x; fi",
        "pwd && echo done",
        "Get-ChildItem -Recurse | Select-String TODO",
    ],
)
def test_documented_read_only_commands_are_no_progress(command: str) -> None:
    assert shell_command_is_read_only(command)


@pytest.mark.parametrize(
    "command",
    [
        "git config user.name me",
        "git remote set-url origin x",
        "git add -A",
        "git branch feature",
        "git stash",
        "git -C repo checkout main",
        "pip install requests",
        "python fix.py",
        "make",
        "echo x > out.txt",
        'find . -name "*.pyc" -delete',
        "sed -i s/a/b/ f.py",
        "npm test",
        "Remove-Item build",
        "cd repo && ./configure",
    ],
)
def test_every_other_command_counts_as_state_changing(command: str) -> None:
    assert not shell_command_is_read_only(command)


def test_host_declared_read_only_commands() -> None:
    config = AdaptiveConfig.from_mapping({"readOnlyCommands": ["kubectl"]})
    assert shell_command_is_read_only("kubectl get pods", config.all_read_only_commands)
    assert not shell_command_is_read_only("kubectl get pods")
    with pytest.raises(ConfigError, match=r"readOnlyCommands\[0\]: expected a command name"):
        AdaptiveConfig.from_mapping({"readOnlyCommands": ["kubectl get"]})


# --- not failures: rejections, cancellations, interrupts -------------------------------------

PLAN = {"plan": "1. edit\n2. test"}
PLAN_REJECTED = (
    "The user doesn't want to proceed with this tool use. The tool use was rejected (eg. if it "
    "was a file edit, the new_string was NOT written to the file). STOP what you are doing and "
    "wait for the user to tell you how to proceed."
)


def test_a_rejected_plan_then_approved_is_not_a_failure() -> None:
    calls = [fail("exitplanmode", PLAN, PLAN_REJECTED), fail("exitplanmode", PLAN, PLAN_REJECTED)]
    records = records_of(calls)
    assert all(r.dismissed and not r.failed for r in records)
    assert replay([*calls, ok("exitplanmode", PLAN, "User has approved your plan.")]) == []


def test_a_real_failure_of_the_same_call_is_still_counted() -> None:
    calls = [fail("exitplanmode", PLAN, "Error: plan too long")] * 2
    verdict = verdict_for(calls, Call("exitplanmode", PLAN))
    assert verdict is not None and verdict.level == "critical"


def test_sibling_cancellations_of_a_parallel_batch_are_not_failures() -> None:
    calls = [
        fail("read", {"file_path": f"/r/{name}"}, "<tool_use_error>Cancelled: parallel tool call "
             "Bash(npm run build) errored</tool_use_error>")
        for name in "abcdefg"
    ]  # fmt: skip
    assert replay(calls) == []
    assert verdict_for(calls, Call("read", {"file_path": "/r/h"})) is None


def test_the_same_error_from_real_failures_of_varied_reads_still_warns() -> None:
    calls = [fail("read", {"file_path": f"/r/{n}"}, "EISDIR: illegal operation") for n in "abc"]
    verdict = verdict_for(calls, Call("read", {"file_path": "/r/d"}))
    assert verdict is not None and verdict.detector == SAME_ERROR


@pytest.mark.parametrize(
    "text",
    [
        PLAN_REJECTED,
        "The user doesn't want to take this action right now. STOP what you are doing.",
        "[Request interrupted by user]",
        "[Request interrupted by user for tool use]",
        "Cancelled: parallel tool call Read(/x) errored",
        "exec command rejected by user",  # Codex
        "patch rejected by user",  # Codex
        "The user denied this operation.",  # Cline
        "Tool [read_file] was not executed because a tool has already been used in this "
        "message. Only one tool may be used per message.",  # Cline
        "Action has been rejected by the user! Waiting for further user input.",  # OpenHands
        "OBSERVATION:\n[Last action has been rejected by the user]",  # OpenHands
        "User rejected the tool call",
        "Tool call cancelled by the user",
    ],
)
def test_rejection_cancellation_and_interrupt_texts_are_dismissals(text: str) -> None:
    assert is_dismissal(text)
    record = build_adaptive_record("exec", sh("rm -rf build"), error=text)
    assert record.dismissed and not record.failed and not record.mutating


@pytest.mark.parametrize(
    "text",
    [
        "bash: ./run.sh: Permission denied",
        "Permission for this tool use was denied.",  # a standing rule: retrying fails again
        "Error: user not found",
        "EACCES: permission denied, open '/etc/shadow'",
    ],
)
def test_system_denials_and_user_named_errors_are_still_failures(text: str) -> None:
    assert not is_dismissal(text)
    assert build_adaptive_record("exec", sh("x"), error=text).failed


def test_a_dismissed_call_is_transparent_between_real_failures() -> None:
    read = {"path": "/x"}
    calls = [
        fail("read", read, "File not found: /x"),
        fail("read", read, "[Request interrupted by user for tool use]"),
        fail("read", read, "File not found: /x"),
    ]
    verdict = verdict_for(calls, Call("read", read))
    assert verdict is not None and verdict.level == "critical" and verdict.indices == (0, 2)


# --- earlier stops -----------------------------------------------------------------------------


def test_identical_failures_block_at_the_third_attempt_across_unrelated_reads() -> None:
    book = {"flight": "HAT030", "date": "2024-05-13"}
    calls = [
        fail("update_reservation_flights", book, "Error: flight HAT030 not available"),
        fail("update_reservation_flights", book, "Error: flight HAT030 not available"),
        ok("search_direct_flight", {"origin": "LAX", "date": "2024-05-13"}, "[]"),
        ok("search_onestop_flight", {"origin": "LAX", "date": "2024-05-13"}, "[]"),
        think("let me try again"),
    ]
    verdict = verdict_for(calls, Call("update_reservation_flights", book))
    assert verdict is not None
    assert (verdict.detector, verdict.level, verdict.count) == (REPEATED_FAILURE, "critical", 3)


def test_one_retry_of_a_failed_call_gets_no_warning_by_default() -> None:
    read = {"path": "/x"}
    assert verdict_for([fail("read", read, "File not found: /x")], Call("read", read)) is None
    warns = AdaptiveConfig(repeated_failure=DetectorThresholds(warn=2, block=3))
    verdict = verdict_for([fail("read", read, "File not found: /x")], Call("read", read), warns)
    assert verdict is not None and verdict.level == "warning"


def test_a_third_identical_call_with_the_same_outcome_is_blocked_and_a_recheck_is_not() -> None:
    status = Call("exec", sh("git status"), result="nothing to commit")
    assert replay([status, status]) == []  # one re-check of a result is healthy
    verdict = verdict_for([status, status], Call("exec", sh("git status")))
    assert verdict is not None
    assert (verdict.detector, verdict.level, verdict.count) == (IDENTICAL_STREAK, "critical", 3)
    changed = [status, Call("exec", sh("git status"), result="modified: a.py")]
    assert verdict_for(changed, Call("exec", sh("git status"))) is None


def test_failures_equal_once_timestamps_durations_and_pids_are_masked_are_one_failure() -> None:
    run = sh("./deploy.sh")
    calls = [
        fail("exec", run, "2026-12-01T10:00:01Z deploy failed after 3.2s (pid 4411, attempt 1)"),
        fail("exec", run, "2026-12-01T10:00:09Z deploy failed after 2.9s (pid 4502, attempt 2)"),
    ]
    verdict = verdict_for(calls, Call("exec", run))
    assert verdict is not None and verdict.detector == REPEATED_FAILURE
    assert verdict.level == "critical"
    different = [calls[0], fail("exec", run, "2026-12-01T10:00:09Z disk full (pid 4502)")]
    assert verdict_for(different, Call("exec", run)) is None


@pytest.mark.parametrize(
    ("text", "masked"),
    [
        ("at 2026-12-01T10:00:01.123+02:00 it broke", "at # it broke"),
        ("12:01:02 retry 3/5 took 120ms", "# # took #"),
        ("pid 77 ppid: 1 after 2 seconds", "# # after #"),
        ("attempt #4 of 9", "#"),
    ],
)
def test_mask_volatile(text: str, masked: str) -> None:
    assert mask_volatile(text) == masked


# --- terminal_failure ---------------------------------------------------------------------------

TRACE = "Traceback (most recent call last):\nModuleNotFoundError: No module named 'yaml'"


def test_varied_commands_with_one_failure_output_warn_at_the_third_and_block_at_the_fifth() -> None:
    commands = ["python a.py", "python -m app", "python3 a.py", "./a.py", "python a.py --x"]
    calls = [fail("exec", sh(c), f"{TRACE}\n(took {i}.5s)") for i, c in enumerate(commands)]
    found = replay(calls)
    assert found[0] == (2, TERMINAL_FAILURE, "warning")
    assert (4, TERMINAL_FAILURE, "critical") in found
    verdict = verdict_for(calls[:4], Call("exec", sh("python b.py")))
    assert verdict is not None and verdict.level == "critical"
    assert verdict.message == MSG_TERMINAL_FAILURE_CRITICAL.format(tool="exec", prior=4)
    warning = verdict_for(calls[:2], Call("exec", sh("python b.py")))
    assert warning is not None
    assert warning.message == MSG_TERMINAL_FAILURE_WARNING.format(tool="exec", prior=2)


def test_a_successful_command_between_ends_the_terminal_failure_streak() -> None:
    calls = [
        fail("exec", sh("python a.py"), TRACE),
        fail("exec", sh("python -m app"), TRACE),
        ok("exec", sh("ls"), "a.py"),
        fail("exec", sh("python3 a.py"), TRACE),
    ]
    assert verdict_for(calls, Call("exec", sh("./a.py"))) is None


# --- typed_error ----------------------------------------------------------------------------


def test_one_error_code_across_varied_arguments_warns_at_four_and_blocks_at_six() -> None:
    texts = [
        "request to /v1/a failed: code=RATE_LIMITED (slow down)",
        "upstream said code=RATE_LIMITED, retry later please",
        "quota: code=RATE_LIMITED for project x",
        "code=RATE_LIMITED; the bucket is empty",
        "we got code=RATE_LIMITED again from the gateway",
    ]
    calls = [fail("fetch", {"url": f"https://api/{i}"}, t) for i, t in enumerate(texts)]
    assert verdict_for(calls[:2], Call("fetch", {"url": "https://api/9"})) is None
    warning = verdict_for(calls[:3], Call("fetch", {"url": "https://api/9"}))
    assert warning is not None and (warning.detector, warning.level) == (TYPED_ERROR, "warning")
    assert warning.message == MSG_TYPED_ERROR_WARNING.format(tool="fetch", prior=3)
    block = verdict_for(calls, Call("fetch", {"url": "https://api/9"}))
    assert block is not None and (block.detector, block.level) == (TYPED_ERROR, "critical")
    assert block.message == MSG_TYPED_ERROR_CRITICAL.format(tool="fetch", prior=5)


def test_a_success_of_the_tool_ends_the_typed_error_run() -> None:
    calls = [fail("fetch", {"url": f"u{i}"}, f"HTTP 503 from shard {i}x") for i in range(3)]
    calls.append(ok("fetch", {"url": "u9"}, "<html>"))
    assert verdict_for(calls, Call("fetch", {"url": "u10"})) is None


@pytest.mark.parametrize(
    ("text", "code"),
    [
        ("[Errno 2] No such file or directory: 'x'", "errno:2"),
        ("Error: ENOENT: no such file or directory", "errno:ENOENT"),
        ("HTTP/1.1 404 Not Found", "http:404"),
        ('{"status_code": 429, "detail": "slow"}', "http:429"),
        ("502 Bad Gateway", "http:502"),
        ('{"error": {"code": "invalid_api_key"}}', "code:invalid_api_key"),
        ("exit code: 1", None),
        ("something broke", None),
    ],
)
def test_error_code(text: str, code: str | None) -> None:
    assert error_code(text) == code


# --- unchanged_write -------------------------------------------------------------------------

WRITE = {"path": "a.txt", "content": "x"}
UNCHANGED = {"details": {"changed": False}, "content": [{"type": "text", "text": "unchanged"}]}


def test_a_write_that_changed_nothing_is_no_progress_and_is_blocked_the_third_time() -> None:
    record = records_of([ok("write", WRITE, UNCHANGED)])[0]
    assert record.unchanged and not record.mutating
    warning = verdict_for([ok("write", WRITE, UNCHANGED)], Call("write", WRITE))
    assert warning is not None and (warning.detector, warning.level) == (UNCHANGED_WRITE, "warning")
    assert warning.message == MSG_UNCHANGED_WRITE_WARNING.format(tool="write", prior=1)
    block = verdict_for([ok("write", WRITE, UNCHANGED)] * 2, Call("write", WRITE))
    assert block is not None and block.level == "critical"
    assert block.message == MSG_UNCHANGED_WRITE_CRITICAL.format(tool="write", prior=2)


def test_a_write_that_changes_something_resets_the_unchanged_count() -> None:
    calls = [
        ok("write", WRITE, UNCHANGED),
        ok("write", {"path": "a.txt", "content": "y"}, "Wrote 1 line to a.txt"),
    ]
    assert verdict_for(calls, Call("write", WRITE)) is None


@pytest.mark.parametrize(
    "result",
    [
        {"status": "unchanged"},
        "No changes made to a.txt",
        "File unchanged: the content is identical",
    ],
)
def test_results_that_report_no_change(result: object) -> None:
    assert records_of([ok("edit", WRITE, result)])[0].unchanged


# --- poll_no_progress ------------------------------------------------------------------------

POLL = sh("sleep 30 && tail -n 5 build.log")


def test_sleep_polls_with_unchanged_output_are_polls_not_streaks() -> None:
    calls = [ok("exec", POLL, "building...")] * 7
    assert records_of(calls)[0].polling
    assert replay(calls) == []  # an identical non-poll would be blocked at the fourth
    assert verdict_for(
        [ok("exec", sh("tail build.log"), "x")] * 3, Call("exec", sh("tail build.log"))
    )
    found = replay([ok("exec", POLL, "building...")] * 12)
    assert (7, POLL_NO_PROGRESS, "warning") in found and found[-1] == (
        11,
        POLL_NO_PROGRESS,
        "critical",
    )
    verdict = verdict_for([ok("exec", POLL, "building...")] * 11, Call("exec", POLL))
    assert verdict is not None
    assert verdict.message == MSG_POLL_NO_PROGRESS_CRITICAL.format(tool="exec", prior=11)


def test_a_poll_whose_output_changes_is_progress() -> None:
    calls = [ok("wait", {"job": 1}, f"{i}% done") for i in range(20)]
    assert replay(calls) == []


# --- argument_churn --------------------------------------------------------------------------


def test_alternating_argument_variants_with_one_outcome_churn() -> None:
    variants = [{"q": "hotel"}, {"q": "hotels"}, {"q": "hotel"}, {"q": "hotel"}, {"q": "hotels"}]
    calls = [ok("search", v, "[]") for v in variants]
    verdict = verdict_for(calls, Call("search", {"q": "hotels"}))
    assert verdict is not None
    assert (verdict.detector, verdict.level, verdict.count) == (ARGUMENT_CHURN, "warning", 6)
    assert verdict.message == MSG_ARGUMENT_CHURN_WARNING.format(tool="search", variants=2, prior=5)
    nine = [*calls, *calls[:3]]
    block = verdict_for(nine, Call("search", {"q": "hotels"}))
    assert block is not None and (block.detector, block.level) == (ARGUMENT_CHURN, "critical")


def test_variants_with_different_outcomes_or_new_variants_do_not_churn() -> None:
    differing = [ok("search", {"q": v}, f"[{v}{i}]") for i, v in enumerate("ababab")]
    assert verdict_for(differing, Call("search", {"q": "a"})) is None
    exploring = [ok("search", {"q": v}, "[]") for v in "abcdef"]
    assert verdict_for(exploring, Call("search", {"q": "g"})) is None


# --- verdicts explain themselves -----------------------------------------------------------


def test_every_verdict_names_the_calls_it_counted_and_what_would_have_reset_it() -> None:
    calls = [fail("read", {"path": "/x"}, "File not found: /x"), think("hm")] * 2
    verdict = verdict_for(calls, Call("read", {"path": "/x"}))
    assert verdict is not None and verdict.indices == (0, 2)
    assert "state-changing" in verdict.resets and "read it first" in verdict.resets
    assert verdict.explanation == (
        f"repeated_failure counted calls #0, #2 and this read call (3); reset by {verdict.resets}"
    )


def test_one_table_lists_every_detector_in_tie_order() -> None:
    assert tuple(name for name, _ in DETECTOR_TABLE) == ADAPTIVE_DETECTORS
    assert ADAPTIVE_DETECTORS[0] == REPEATED_FAILURE
    assert {
        UNCHANGED_WRITE,
        POLL_NO_PROGRESS,
        TERMINAL_FAILURE,
        TYPED_ERROR,
        ARGUMENT_CHURN,
    } <= set(ADAPTIVE_DETECTORS)


@pytest.mark.parametrize(
    "key",
    ["argumentChurn", "terminalFailure", "typedError", "unchangedWrite", "pollNoProgress"],
)
def test_each_stall_detector_has_a_validated_toggle(key: str) -> None:
    config = AdaptiveConfig.from_mapping({key: {"enabled": False}})
    assert config.to_mapping()[key] == {
        **AdaptiveConfig().to_mapping()[key],
        "enabled": False,
    }
    with pytest.raises(ConfigError, match=rf"loopwatch\.adaptive\.{key}\.warn"):
        AdaptiveConfig.from_mapping({key: {"warn": 1}})
    with pytest.raises(ConfigError, match=rf"{key}\.block: must not be lower than warn"):
        AdaptiveConfig.from_mapping({key: {"warn": 5, "block": 4}})


def test_a_disabled_stall_detector_stays_quiet() -> None:
    config = AdaptiveConfig.from_mapping({"unchangedWrite": {"enabled": False}})
    assert verdict_for([ok("write", WRITE, UNCHANGED)], Call("write", WRITE), config) is None
    assert verdict_for([ok("write", WRITE, UNCHANGED)], Call("write", WRITE)) is not None


# --- facts: stored form, precomputed hashes ---------------------------------------------------


def test_new_facts_round_trip_and_old_facts_still_read() -> None:
    calls = [
        fail("edit", EDIT, READ_FIRST),
        ok("read", {"file_path": "/repo/app.py"}, "a = 1"),
        fail("fetch", {"url": "u"}, "HTTP 404 Not Found"),
        fail("exec", sh("rm x"), "[Request interrupted by user]"),
        ok("write", WRITE, UNCHANGED),
    ]
    for record in records_of(calls):
        facts = encode_facts(record)
        again = record_from_history(record.tool_name, record.args_hash, record.result_hash, facts)
        assert again == record
    old = record_from_history("read", "read:h", "error:x", "1000|errclass:ab|cd")
    assert old == AdaptiveRecord(
        "read", "read:h", "error:x", error_class="errclass:ab", failure_hash="cd", failed=True
    )


def test_precomputed_args_hash_and_outcome_give_the_same_record() -> None:
    params = {"path": "/x"}
    args_hash = hash_tool_call("read", params)
    outcome = hash_tool_outcome("read", params, error="File not found: /x")
    given_ = build_adaptive_record(
        "read", params, error="File not found: /x", args_hash=args_hash, outcome=outcome
    )
    assert given_ == build_adaptive_record("read", params, error="File not found: /x")


def test_records_keep_no_raw_text() -> None:
    secret = "sk-live-0123456789abcdef"
    record = build_adaptive_record(
        "fetch", {"token": secret}, error=f"code=BAD_TOKEN for {secret} in /home/me/{secret}"
    )
    facts = encode_facts(record)
    assert secret not in facts and "BAD_TOKEN" not in facts and "/home" not in facts


# --- bounded scanning (issue 17 item 10) -----------------------------------------------------


def test_a_huge_base64_error_is_normalised_from_a_bounded_prefix() -> None:
    blob = base64.b64encode(bytes(range(256)) * 600).decode()  # ~200 KB, no whitespace
    text = f"Error: invalid payload {blob}"
    normalised = normalize_error_text(text)
    assert normalised == "error: invalid payload <blob>"
    assert normalize_error_text(text[:4_000]) == normalised  # only the prefix is read
    record = build_adaptive_record("upload", {"data": blob}, error=text)
    assert record.failed and record.error_class is not None


@settings(max_examples=60, deadline=None)
@given(
    st.text(alphabet=st.sampled_from("aA0/+=-_.:\\ \n'\"`{}[]()ERROR"), min_size=0, max_size=6000)
)
def test_any_failure_text_gives_a_bounded_record(text: str) -> None:
    assert len(normalize_error_text(text)) <= 400
    record = build_adaptive_record("exec", sh("x"), result=f"ERROR: {text}")
    assert record.failed or record.dismissed
    assert len(encode_facts(record)) < 200


@settings(max_examples=60, deadline=None)
@given(st.text(max_size=3000))
def test_read_only_judgement_never_raises(command: str) -> None:
    assert isinstance(shell_command_is_read_only(command), bool)


@settings(max_examples=80, deadline=None)
@given(
    st.text(alphabet=st.sampled_from("0123456789:-T.Z ms pid retry/ofHTTP code=E"), max_size=400)
)
def test_failure_text_readers_are_total_and_mask_idempotently(text: str) -> None:
    masked = mask_volatile(text)
    assert mask_volatile(masked) == masked
    assert len(masked) <= len(text) + 1
    code = error_code(text)
    assert code is None or code.split(":", 1)[0] in ("errno", "http", "code")
    assert isinstance(is_dismissal(text), bool)


def test_settings_is_a_leaf_config_can_import_without_a_cycle() -> None:
    import ast
    import subprocess

    path = (
        pathlib.Path(__file__).resolve().parents[2] / "src/loopwatch/detectors/adaptive/settings.py"
    )
    imported = {
        node.module
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("loopwatch")
    }
    allowed = {
        "loopwatch.errors",
        "loopwatch.messages",
        "loopwatch.core.naming",
        "loopwatch.core.jsstr",
        "loopwatch.core._undefined",
        "loopwatch.detectors.adaptive.progress",  # constants and stdlib only at run time
        "loopwatch.detectors.adaptive.shell_text",  # the same
    }
    assert imported <= allowed
    for module in (
        "loopwatch.config",
        "loopwatch.detectors.adaptive.settings",
        "loopwatch.detectors.adaptive",
    ):
        done = subprocess.run([sys.executable, "-c", f"import {module}"], check=False)
        assert done.returncode == 0, module


# --- the evaluation tool -------------------------------------------------------------------------


def test_adaptive_eval_exits_non_zero_with_a_clear_message_without_a_corpus(
    tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = pathlib.Path(__file__).resolve().parents[2] / "tools" / "adaptive_eval.py"
    spec = importlib.util.spec_from_file_location("adaptive_eval", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["adaptive_eval"] = module
    try:
        spec.loader.exec_module(module)
        assert module.main(["--corpus", str(tmp_path / "missing")]) == 2
    finally:
        del sys.modules["adaptive_eval"]
    err = capsys.readouterr().err
    assert "no corpus at" in err and "--corpus" in err
