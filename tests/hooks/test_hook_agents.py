"""``loopwatch hook <agent>`` end to end, per agent, through the real hook process.

Each agent gets its documented payloads (``tests/data/hooks/<agent>``): a first call is
allowed, a loop warns the model in the post answer, and is blocked at the documented
count (reference profile: the warning comes with the 11th identical call, 10 before it,
the block with the 21st; the default adaptive profile stops an identical streak at the
4th call); a failed tool is recorded as an error; a compaction arms the post-compaction
guard, and a loop that survives it ends the run.

Long loops are built up in this process (``run_hook`` on the same SQLite file), and the
events the test is about go through the real process.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from _hookkit import ALLOW, EVENTS, RUN, HookRunner, context, denied, ended, payload

from loopwatch.hooks import AGENTS


@pytest.fixture
def hooks(tmp_path: Path) -> Iterator[HookRunner]:
    runner = HookRunner(tmp_path)
    yield runner
    runner.close()


def _pair(hooks: HookRunner, agent: str, index: int, profile: str | None = None) -> None:
    """One identical call, pre and post, in this process (building up a loop)."""
    call = f"call-{index}"
    assert (
        denied(
            agent, hooks.inprocess(agent, payload(agent, "pre", session="S", call=call), profile)
        )
        is None
    )
    hooks.inprocess(agent, payload(agent, "post", session="S", call=call), profile)


def test_every_agent_has_its_payloads() -> None:
    assert set(EVENTS) == set(AGENTS) == set(ALLOW)


@pytest.mark.parametrize("agent", AGENTS)
def test_a_first_call_is_allowed_and_recorded(hooks: HookRunner, agent: str) -> None:
    pre = hooks.process(agent, payload(agent, "pre", session="S", call="c1"))
    assert (pre.returncode, pre.stdout.strip(), pre.stderr) == (0, ALLOW[agent], "")
    post = hooks.process(agent, payload(agent, "post", session="S", call="c1"))
    assert (post.returncode, post.stdout.strip(), post.stderr) == (0, ALLOW[agent], "")
    store = hooks.store()
    history = store.history(f"{agent}:S", time.time())
    store.close()
    assert len(history) == 1
    assert history[0].result_hash is not None and not history[0].result_hash.startswith("error:")
    assert history[0].run_id == RUN[agent]
    assert hooks.db.stat().st_mode & 0o777 == 0o600


@pytest.mark.parametrize("agent", AGENTS)
def test_reference_profile_warns_at_ten_and_blocks_at_twenty(hooks: HookRunner, agent: str) -> None:
    for index in range(1, 11):
        _pair(hooks, agent, index, "reference")
    # The 11th identical call (10 before it): allowed, and the warning reaches the model
    # with that call's own result, in the post answer.
    pre = hooks.process(
        agent, payload(agent, "pre", session="S", call="call-11"), "--profile", "reference"
    )
    assert (pre.returncode, pre.stdout.strip()) == (0, ALLOW[agent])
    post = hooks.process(
        agent, payload(agent, "post", session="S", call="call-11"), "--profile", "reference"
    )
    assert post.returncode == 0
    warning = context(agent, post.stdout)
    assert warning is not None and warning.startswith("WARNING: You have called ")
    assert "10 times with identical arguments" in warning
    assert ended(agent, post.stdout) is None
    for index in range(12, 21):
        _pair(hooks, agent, index, "reference")
    blocked = hooks.process(
        agent, payload(agent, "pre", session="S", call="call-21"), "--profile", "reference"
    )
    assert blocked.returncode == 0 and blocked.stderr == ""
    reason = denied(agent, blocked.stdout)
    assert reason is not None
    assert reason.startswith("CRITICAL: Called ") and "identical outcomes 20 times" in reason
    # The block is sticky, and the blocked call was not recorded.
    again = hooks.process(
        agent, payload(agent, "pre", session="S", call="call-22"), "--profile", "reference"
    )
    assert denied(agent, again.stdout) == reason
    store = hooks.store()
    assert len(store.history(f"{agent}:S", time.time())) == 20
    store.close()


@pytest.mark.parametrize("agent", AGENTS)
def test_default_adaptive_profile_stops_an_identical_streak_early(
    hooks: HookRunner, agent: str
) -> None:
    # The third identical call with identical results is blocked, with no warning before
    # it: one re-check of a result is healthy (issue 15).
    for index in (1, 2):
        _pair(hooks, agent, index)
    third = hooks.process(agent, payload(agent, "pre", session="S", call="call-3"))
    reason = denied(agent, third.stdout)
    assert reason is not None and reason.startswith("CRITICAL: Blocked call 3 in a row")
    # Another command is another call: allowed.
    other = hooks.process(agent, payload(agent, "pre", session="S", call="x", command="ls"))
    assert other.stdout.strip() == ALLOW[agent]


@pytest.mark.parametrize("agent", [a for a in AGENTS if EVENTS[a]["fail"] is not None])
def test_a_failed_tool_is_recorded_as_an_error(hooks: HookRunner, agent: str) -> None:
    hooks.process(agent, payload(agent, "pre", session="S", call="f1"))
    done = hooks.process(agent, payload(agent, "fail", session="S", call="f1"))
    assert (done.returncode, done.stdout.strip()) == (0, ALLOW[agent])
    store = hooks.store()
    (record,) = store.history(f"{agent}:S", time.time())
    store.close()
    assert record.result_hash is not None and record.result_hash.startswith("error:")


@pytest.mark.parametrize("agent", [a for a in AGENTS if EVENTS[a]["fail"] is not None])
def test_repeated_identical_failures_are_blocked_by_the_adaptive_profile(
    hooks: HookRunner, agent: str
) -> None:
    reasons = []
    for index in range(1, 6):
        pre = hooks.inprocess(agent, payload(agent, "pre", session="S", call=f"f{index}"))
        reasons.append(denied(agent, pre))
        if reasons[-1] is None:
            hooks.inprocess(agent, payload(agent, "fail", session="S", call=f"f{index}"))
    assert reasons[0] is None
    blocked = [reason for reason in reasons if reason is not None]
    assert blocked and "failed" in blocked[0]


@pytest.mark.parametrize("agent", [a for a in AGENTS if EVENTS[a]["compact"] is not None])
def test_compaction_arms_the_guard_and_a_persisting_loop_ends_the_run(
    hooks: HookRunner, agent: str
) -> None:
    ref = ("--profile", "reference")
    hooks.inprocess(agent, payload(agent, "pre", session="S", call="a0", command="ls"), "reference")
    hooks.inprocess(
        agent, payload(agent, "post", session="S", call="a0", command="ls"), "reference"
    )
    done = hooks.process(agent, payload(agent, "compact", session="S", call=""), *ref)
    assert (done.returncode, done.stdout.strip()) == (0, ALLOW[agent])
    store = hooks.store()
    snapshot = store.guard_snapshot(f"{agent}:S", RUN[agent], time.time())
    store.close()
    assert snapshot.armed and snapshot.remaining_attempts == 3
    for index in (1, 2):
        _pair(hooks, agent, index, "reference")
    hooks.process(agent, payload(agent, "pre", session="S", call="call-3"), *ref)
    post = hooks.process(agent, payload(agent, "post", session="S", call="call-3"), *ref)
    assert post.returncode == 0
    told = context(agent, post.stdout)
    assert told is not None and "did not break the loop" in told
    if agent == "cursor":
        assert ended(agent, post.stdout) is None  # Cursor cannot end a run from a hook
    else:
        reason = ended(agent, post.stdout)
        assert reason is not None and reason.startswith("CRITICAL: tool ")


def test_claude_code_compaction_arms_the_run_of_the_latest_prompt(hooks: HookRunner) -> None:
    # prompt_id comes with tool events; PreCompact has none: the session's latest run is
    # armed, the one the next calls belong to.
    pre = json.loads(payload("claude-code", "pre", session="S", call="p1"))
    pre["prompt_id"] = "prompt-7"
    hooks.process("claude-code", json.dumps(pre))
    hooks.process("claude-code", payload("claude-code", "compact", session="S", call=""))
    store = hooks.store()
    now = time.time()
    assert store.guard_snapshot("claude-code:S", "prompt-7", now).armed
    assert not store.guard_snapshot("claude-code:S", None, now).armed
    assert store.history("claude-code:S", now)[0].run_id == "prompt-7"
    store.close()


def test_sessions_of_two_agents_never_mix(hooks: HookRunner) -> None:
    # Mixed, codex's call would be the third identical one in a row: blocked.
    for index in (1, 2):
        _pair(hooks, "claude-code", index)
    done = hooks.process("codex", payload("codex", "pre", session="S", call="call-3"))
    assert done.stdout.strip() == ""


def test_the_store_comes_from_loopwatch_store(hooks: HookRunner, tmp_path: Path) -> None:
    other = tmp_path / "elsewhere" / "team.db"
    other.parent.mkdir()
    done = hooks.process(
        "codex",
        payload("codex", "pre", session="S", call="c1"),
        LOOPWATCH_STORE=f"sqlite://{other}",
    )
    assert done.returncode == 0
    assert other.exists() and not hooks.db.exists()


def test_the_state_folder_is_created_for_the_default_store_only(
    hooks: HookRunner, tmp_path: Path
) -> None:
    done = hooks.process("codex", payload("codex", "pre", session="S", call="c1"))
    assert done.returncode == 0 and done.stdout.strip() == ""
    assert hooks.db.is_file()
    assert hooks.db.parent.stat().st_mode & 0o777 == 0o700
    # A store the user named in a folder that does not exist: not created, the call is
    # allowed (fail-open) and the hook's log says why.
    missing = tmp_path / "typo" / "team.db"
    done = hooks.process(
        "codex",
        payload("codex", "pre", session="S", call="c2"),
        LOOPWATCH_STORE=f"sqlite://{missing}",
    )
    assert done.returncode == 0 and done.stdout.strip() == ""
    assert not missing.parent.exists()
    log = (hooks.state / "loopwatch" / "hook.log").read_text()
    assert f"its folder '{missing.parent}' does not exist" in log
