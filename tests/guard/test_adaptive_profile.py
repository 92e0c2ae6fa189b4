"""The adaptive profile end to end through ``LoopGuard`` (issue 06)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from loopwatch import UNDEFINED, ConfigError, LoopDetectionConfig, LoopEvent, LoopGuard
from loopwatch.detectors.adaptive import AdaptiveConfig
from loopwatch.messages import MSG_REPEATED_FAILURE_CRITICAL, MSG_REPEATED_FAILURE_WARNING
from loopwatch.replay import ReplaySettings, replay_run
from loopwatch.transcripts import read_transcript

S = "session"
CORPUS = Path(__file__).resolve().parents[3] / "shared" / "corpus" / "traj"
LABELS = Path(__file__).resolve().parents[2] / "docs" / "adaptive-labels.md"


def call(
    guard: LoopGuard, tool: str, args: Any, *, result: Any = UNDEFINED, error: Any = UNDEFINED
) -> Any:
    decision = guard.before_call(tool, args, session_key=S, tool_call_id=None)
    if decision.tool_result is not None:
        guard.after_call(tool, args, session_key=S, result=decision.tool_result)
    else:
        guard.after_call(tool, args, session_key=S, result=result, error=error)
    return decision


def test_the_profile_is_its_own_opt_in() -> None:
    guard = LoopGuard(profile="adaptive")  # no config: enabled unset
    actions = [
        call(guard, "read", {"path": "x"}, error="File not found: x").action for _ in range(3)
    ]
    assert actions == ["allow", "allow", "block"]  # one retry is healthy: no warning
    off = LoopGuard({"enabled": False}, profile="adaptive")
    assert [call(off, "read", {"path": "x"}, error="nope").action for _ in range(5)] == [
        "allow"
    ] * 5


def test_repeated_failure_warns_at_once_then_blocks_and_stays_blocked() -> None:
    events: list[LoopEvent] = []
    adaptive = {"repeatedFailure": {"warn": 2, "block": 3}}
    guard = LoopGuard(
        LoopDetectionConfig(enabled=True, profile="adaptive"),
        listeners=[events.append],
        adaptive=adaptive,
    )
    assert guard.profile == "adaptive"
    assert guard.adaptive == AdaptiveConfig.from_mapping(adaptive)
    first = call(guard, "read", {"path": "x"}, error="File not found: x")
    call(guard, "think", {"thought": "hmm 1"}, result="ok")
    second = call(guard, "read", {"path": "x"}, error="File not found: x")
    call(guard, "think", {"thought": "hmm 2"}, result="ok")
    third = call(guard, "read", {"path": "x"}, error="File not found: x")
    fourth = call(guard, "read", {"path": "x"}, error="File not found: x")
    assert first.action == "allow"
    assert second.action == "warn" and second.emitted
    assert second.verdict.detector == "repeated_failure"
    assert second.verdict.message == MSG_REPEATED_FAILURE_WARNING.format(
        tool="read", count=2, prior=1
    )
    assert third.action == "block" and third.tool_result is not None
    assert third.verdict.message == MSG_REPEATED_FAILURE_CRITICAL.format(
        tool="read", count=3, prior=2
    )
    assert third.verdict.indices is not None and len(third.verdict.indices) == 2
    assert fourth.action == "block" and fourth.verdict.count == third.verdict.count
    loops = [e.to_dict() for e in events if e.type == "tool.loop"]
    assert loops[0]["action"] == "warn" and loops[0]["indices"] == second.verdict.indices
    assert len(guard.history(session_key=S)) == 4  # blocked calls are not recorded


def test_edit_then_test_cycles_are_never_blocked() -> None:
    guard = LoopGuard(profile="adaptive")
    for i in range(8):
        edit = call(guard, "edit", {"path": "a.py", "new": f"v{i}"}, result="edited")
        test = call(guard, "exec", {"command": "pytest -q"}, error="1 failed: AssertionError")
        assert edit.action == "allow" and test.action != "block", i


def test_adaptive_settings_come_from_the_config_file_block() -> None:
    config = {
        "tools": {"loopDetection": {"enabled": True}},
        "loopwatch": {
            "profile": "adaptive",
            "adaptive": {
                "repeatedFailure": {"warn": 3, "block": 4},
                "identicalStreak": {"enabled": False},
            },
        },
    }
    guard = LoopGuard(openclaw_config=config)
    actions = [call(guard, "read", {"path": "x"}, error="missing").action for _ in range(4)]
    assert actions == ["allow", "allow", "warn", "block"]
    assert LoopGuard(openclaw_config=config, profile="reference").adaptive is None


def test_adaptive_config_errors_name_the_path() -> None:
    bad = {
        "loopwatch": {
            "profile": "adaptive",
            "adaptive": {"repeatedFailure": {"block": 0}, "nope": 1},
        }
    }
    with pytest.raises(ConfigError) as info:
        LoopGuard(openclaw_config=bad)
    paths = {issue.path for issue in info.value.issues}
    assert "loopwatch.adaptive.repeatedFailure.block" in paths
    assert "loopwatch.adaptive.nope" in paths


def test_reference_profile_ignores_short_loops() -> None:
    guard = LoopGuard({"enabled": True})
    actions = [call(guard, "read", {"path": "x"}, error="File not found").action for _ in range(6)]
    assert actions == ["allow"] * 6


def _labelled_loops() -> dict[str, int]:
    loops = {}
    for line in LABELS.read_text(encoding="utf-8").splitlines():
        cells = [c.strip() for c in line.split("|")]
        if len(cells) > 5 and cells[3] == "loop":
            loops[cells[1].strip("`")] = int(cells[4])
    return loops


@pytest.mark.corpus
def test_corpus_loops_are_stopped_early_and_healthy_runs_never() -> None:
    """Replays every real run through LoopGuard under the adaptive profile (scan's replay)."""
    assert CORPUS.is_dir(), f"the shared corpus is missing: expected {CORPUS}"
    loops = _labelled_loops()
    assert len(loops) >= 9
    settings = ReplaySettings(profile="adaptive")
    into_loop = []
    for path in sorted(CORPUS.glob("*.jsonl")):
        (run,) = read_transcript(path).runs
        replay = replay_run(run, settings, session_key=path.stem)
        blocks = [d.index - 1 for d in replay.decisions if d.action in ("block", "abort")]
        if path.stem in loops:
            assert blocks, f"{path.stem}: loop never stopped"
            into_loop.append(blocks[0] - loops[path.stem])
        else:
            assert not blocks, f"{path.stem}: healthy run stopped at {blocks[0]}"
    into_loop.sort()
    assert into_loop[len(into_loop) // 2] <= 3, into_loop


@pytest.mark.corpus
def test_corpus_file_format_assumption() -> None:
    first = json.loads(next(iter(sorted(CORPUS.glob("*.jsonl")))).read_text().splitlines()[0])
    assert {"tool", "args", "result", "error"} <= set(first)


# --- issue 15: recoveries and dismissals through the guard -------------------------------------

READ_FIRST = (
    "<tool_use_error>File has not been read yet. Read it first before writing to it."
    "</tool_use_error>"
)
REJECTED = (
    "The user doesn't want to proceed with this tool use. The tool use was rejected (eg. if it "
    "was a file edit, the new_string was NOT written to the file). STOP what you are doing and "
    "wait for the user to tell you how to proceed."
)


def test_claude_code_read_it_first_recovery_is_allowed_and_a_blind_retry_is_blocked() -> None:
    guard = LoopGuard(profile="adaptive")
    edit = {"file_path": "/repo/a.py", "old_string": "x = 1", "new_string": "x = 2"}
    actions = [call(guard, "Edit", edit, error=READ_FIRST).action for _ in range(2)]
    actions.append(call(guard, "Read", {"file_path": "/repo/a.py"}, result="x = 1\n").action)
    actions.append(call(guard, "Edit", edit, result="The file has been updated.").action)
    assert actions == ["allow"] * 4
    blind = LoopGuard(profile="adaptive")
    for _ in range(2):
        call(blind, "Edit", edit, error=READ_FIRST)
        call(blind, "Read", {"file_path": "/repo/b.py"}, result="y = 1\n")
    assert call(blind, "Edit", edit, error=READ_FIRST).action == "block"


def test_rejected_plans_cancelled_siblings_and_interrupts_never_warn() -> None:
    guard = LoopGuard(profile="adaptive")
    plan = {"plan": "1. fix\n2. test"}
    actions = [call(guard, "ExitPlanMode", plan, error=REJECTED).action for _ in range(3)]
    for name in "abcdef":
        cancelled = "Cancelled: parallel tool call Bash(npm run build) errored"
        actions.append(call(guard, "Read", {"file_path": f"/r/{name}"}, error=cancelled).action)
    interrupted = call(guard, "Bash", {"command": "make"}, error="[Request interrupted by user]")
    actions.append(interrupted.action)
    actions.append(call(guard, "ExitPlanMode", plan, result="User has approved your plan.").action)
    assert actions == ["allow"] * len(actions)


def test_git_commit_after_git_config_through_the_guard() -> None:
    guard = LoopGuard(profile="adaptive")
    commit = {"command": 'git commit -m "fix"'}
    unknown = "Author identity unknown\n*** Please tell me who you are."
    assert call(guard, "Bash", commit, error=unknown).action == "allow"
    assert call(guard, "Bash", commit, error=unknown).action == "allow"
    call(guard, "Bash", {"command": "git config user.email me@example.com"}, result="")
    assert call(guard, "Bash", commit, result="[main 1a2b3c] fix").action == "allow"
