"""Claude Agent SDK: the hook callbacks, driven with payloads of the documented shape.

The SDK runs the ``claude`` CLI, which runs the tools and calls the hooks; there is no
offline CLI, so ``ScriptedSession`` plays its part: it sends ``PreToolUse``,
``PostToolUse`` and ``PostToolUseFailure`` inputs (``session_id``, ``tool_name``,
``tool_input``, ``tool_use_id``, ``tool_response`` / ``error``) through the ``HookMatcher``
lists that ``LoopGuardHooks.matchers()`` builds for ``ClaudeAgentOptions(hooks=...)``.
"""

from __future__ import annotations

from typing import Any

import pytest
from claude_agent_sdk import ClaudeAgentOptions, HookMatcher
from framework_matrix import (
    BY_NAME,
    FAILURE,
    SEQUENTIAL_PARALLEL,
    SINGLE,
    Scenario,
    Tools,
    blocks,
    check_answers,
    make_guard,
)

from loopwatch import LoopGuard
from loopwatch import messages as texts
from loopwatch.integrations.claude_agent_sdk import NO_SUCH_TOOL, LoopGuardHooks, ScriptedSession
from loopwatch.testing import LoopScript


def session(script: LoopScript, tools: Tools, *, concurrent: bool = False) -> ScriptedSession:
    return ScriptedSession(
        script,
        {"read_file": tools.read_file, "list_dir": tools.list_dir, "flaky_read": tools.flaky_read},
        session_id="sess-1",
        concurrent=concurrent,
    )


async def test_the_matrix_recover() -> None:
    scenario = BY_NAME["recover"]
    guard, events = make_guard()
    tools = Tools()
    play = session(scenario.script, tools)
    final = await play.run(LoopGuardHooks(guard, on_critical="recover").matchers())
    # The second critical is denied and stops the session (a hook cannot raise into the
    # CLI): the model never reads that denial.
    assert play.stopped == final == BY_NAME["repeat"].blocked_message
    check_answers(scenario, play.read[: scenario.reads], tools, events, None, stopped=True)
    assert play.read[scenario.reads :] == [final]


# The parallel row. The hooks see one call at a time and nothing in their input names the
# other calls of the message, so the adapter cannot admit a message as one batch. Played
# one after another the three calls of each message give the repeat row's figures; played
# as the CLI runs read-only tools (every PreToolUse of the message first), the 21st call,
# decided while the 19th and 20th have no outcome yet, still runs (one extra run), and the
# next message is blocked whole.
@pytest.mark.parametrize(
    ("concurrent", "expected"),
    [(False, SEQUENTIAL_PARALLEL), (True, (21, 39))],
    ids=["in_order", "concurrent"],
)
async def test_the_matrix_parallel(concurrent: bool, expected: tuple[int, int]) -> None:
    scenario = BY_NAME["parallel"]
    guard, events = make_guard()
    tools = Tools()
    play = session(scenario.script, tools, concurrent=concurrent)
    await play.run(LoopGuardHooks(guard).matchers())
    assert (tools.total, blocks(events)) == expected
    assert len(play.read) == scenario.reads
    first = expected[0]
    assert "CRITICAL" not in " ".join(play.read[:first])
    critical = texts.GENERIC_CRITICAL.format(tool="read_file", count=first)
    assert play.read[first:] == [critical] * (60 - first)


@pytest.mark.parametrize("scenario", SINGLE, ids=lambda s: s.name)
async def test_the_matrix(scenario: Scenario) -> None:
    guard, events = make_guard()
    tools = Tools()
    play = session(scenario.script, tools)
    await play.run(LoopGuardHooks(guard).matchers())

    assert len(play.read) == 60
    assert tools.total == scenario.executions
    if scenario.name == "unknown":
        # The CLI answers a missing tool before any hook: nothing to see, nothing blocked.
        assert play.read == [NO_SUCH_TOOL.format(name="open_file")] * 60
        assert len(guard.history(session_key="sess-1")) == 0
        return
    assert blocks(events) == scenario.blocks
    if scenario.warned_at is not None:
        assert play.read[scenario.warned_at].endswith(f"\n\n{scenario.warning}")
        assert "WARNING" not in play.read[scenario.warned_at - 1]
    if scenario.blocked_message is not None:
        assert play.read[20] == scenario.blocked_message
    if scenario.name == "failing":
        assert play.read[0] == FAILURE
        assert guard.history(session_key="sess-1")[0].tool_name == "flaky_read"


async def test_end_run_denies_and_stops_the_session() -> None:
    guard, _ = make_guard()
    tools = Tools()
    play = session(BY_NAME["repeat"].script, tools)
    final = await play.run(LoopGuardHooks(guard, on_critical="end_run").matchers())
    assert final == BY_NAME["repeat"].blocked_message
    assert play.stopped == final
    assert tools.total == 20
    assert len(play.read) == 21


async def test_the_answers_have_the_documented_shape() -> None:
    guard, _ = make_guard()
    hooks = LoopGuardHooks(guard, warn_model=False, run_id="r-1")
    base = {"session_id": "s", "transcript_path": "t", "cwd": "."}
    ctx: Any = {"signal": None}
    for i in range(21):
        call = {**base, "tool_name": "Read", "tool_input": {"file": "a"}, "tool_use_id": f"t{i}"}
        pre = await hooks.pre_tool_use({**call, "hook_event_name": "PreToolUse"}, f"t{i}", ctx)
        if i < 20:
            assert pre == {}
            post = {**call, "hook_event_name": "PostToolUse", "tool_response": {"content": "x"}}
            assert await hooks.post_tool_use(post, f"t{i}", ctx) == {}  # warn_model=False
    assert pre["hookSpecificOutput"]["hookEventName"] == "PreToolUse"
    assert pre["hookSpecificOutput"]["permissionDecision"] == "deny"
    assert "continue_" not in pre
    assert {r.run_id for r in guard.history(session_key="s")} == {"r-1"}
    # A PostToolUse without a PreToolUse seen here records nothing.
    stray = {**base, "tool_name": "Read", "tool_input": {}, "tool_use_id": "zz"}
    assert await hooks.post_tool_use(stray, "zz", ctx) == {}
    assert len(guard.history(session_key="s")) == 20


def test_matchers_plug_into_claude_agent_options() -> None:
    hooks = LoopGuardHooks(LoopGuard({"enabled": True}))
    matchers = hooks.matchers(compaction=True)
    options = ClaudeAgentOptions(hooks=matchers)
    assert options.hooks is matchers
    assert set(matchers) == {"PreToolUse", "PostToolUse", "PostToolUseFailure", "PreCompact"}
    assert all(isinstance(m, HookMatcher) for ms in matchers.values() for m in ms)
    with pytest.raises(ValueError, match="on_critical"):
        LoopGuardHooks(LoopGuard(), on_critical="stop")  # type: ignore[arg-type]


async def test_pre_compact_arms_the_post_compaction_guard() -> None:
    guard, events = make_guard()
    hooks = LoopGuardHooks(guard)
    data = {"session_id": "s", "transcript_path": "", "cwd": ".", "hook_event_name": "PreCompact"}
    assert await hooks.pre_compact(data, None, {"signal": None}) == {}
    assert [e.type for e in events] == ["guard.armed"]


async def test_a_command_whose_output_changes_is_never_blocked() -> None:
    # The CLI's tool_response is the tool's own structure (Bash: {stdout, stderr,
    # interrupted, isImage}), not an OpenClaw result: it must be compared whole, else
    # re-running the tests while fixing the code counts as a loop.
    guard, _ = make_guard()
    hooks = LoopGuardHooks(guard, warn_model=False)
    base = {"session_id": "s", "transcript_path": "t", "cwd": "."}
    ctx: Any = {"signal": None}
    for i in range(25):
        call = {**base, "tool_name": "Bash", "tool_input": {"command": "make test"}}
        call["tool_use_id"] = f"t{i}"
        pre = await hooks.pre_tool_use({**call, "hook_event_name": "PreToolUse"}, f"t{i}", ctx)
        assert pre == {}, i
        response = {"stdout": f"{25 - i} failed", "stderr": "", "interrupted": False}
        post = {**call, "hook_event_name": "PostToolUse", "tool_response": response}
        await hooks.post_tool_use(post, f"t{i}", ctx)
