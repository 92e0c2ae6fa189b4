"""The hosts' real payload shapes, as their sources write them (see ``tests/data/hooks``).

Each test here pins a shape the hand-built per-agent fixtures did not cover: what a host
really sends in a field loopwatch reads, and what loopwatch must make of it.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _hookkit import DATA, HookRunner, denied

from loopwatch import UNDEFINED
from loopwatch.host_outcome import as_outcome


@pytest.fixture
def hooks(tmp_path: Path) -> Iterator[HookRunner]:
    runner = HookRunner(tmp_path)
    yield runner
    runner.close()


def _claude(event: str, call: str, **fields: Any) -> str:
    payload: dict[str, Any] = {
        "session_id": "S",
        "transcript_path": "/home/user/.claude/projects/-home-user-app/S.jsonl",
        "cwd": "/home/user/app",
        "permission_mode": "default",
        "hook_event_name": event,
        "tool_name": "Bash",
        "tool_input": {"command": "make test", "description": "Run the tests"},
        "tool_use_id": call,
    }
    payload.update(fields)
    return json.dumps(payload)


def _bash_response(stdout: str) -> dict[str, object]:
    """Claude Code's Bash ``tool_response`` (sdk-tools ``BashOutput``)."""
    return {"stdout": stdout, "stderr": "", "interrupted": False, "isImage": False}


def _run_bash(hooks: HookRunner, outputs: list[str]) -> list[str | None]:
    """Run ``make test`` once per output; the block reason of each pre event."""
    reasons = []
    for index, stdout in enumerate(outputs):
        call = f"toolu_{index}"
        reasons.append(
            denied("claude-code", hooks.inprocess("claude-code", _claude("PreToolUse", call)))
        )
        hooks.inprocess(
            "claude-code",
            _claude("PostToolUse", call, tool_response=_bash_response(stdout)),
        )
    return reasons


def test_claude_code_reruns_whose_output_changes_are_not_blocked(hooks: HookRunner) -> None:
    # The tests of code being fixed: same command, a different output each time.
    outputs = [f"{5 - index} failed, {index} passed" for index in range(6)]
    assert _run_bash(hooks, outputs) == [None] * 6


def test_claude_code_reruns_with_one_output_are_still_blocked(hooks: HookRunner) -> None:
    reasons = _run_bash(hooks, ["1 failed"] * 6)
    assert reasons[0] is None
    assert any(reason is not None for reason in reasons)


def test_a_structured_result_is_hashed_whole_without_its_timings() -> None:
    glob = json.loads((DATA / "claude-code" / "PostToolUse-Glob.json").read_text("utf-8"))
    response = glob["tool_response"]
    later = {**response, "durationMs": response["durationMs"] + 40}
    other = {**response, "filenames": ["/home/user/app/src/other.py"]}
    assert as_outcome(later) == as_outcome(response)
    assert as_outcome(other) != as_outcome(response)
    assert isinstance(as_outcome(response), str)


@pytest.mark.parametrize(
    "result",
    [
        "plain text",
        [{"type": "text", "text": "an MCP content list"}],
        {"content": [{"type": "text", "text": "an MCP CallToolResult"}], "isError": False},
        {"content": [], "details": {"status": "completed", "exitCode": 0}},
        None,
    ],
)
def test_texts_lists_and_openclaw_results_are_hashed_as_they_are(result: object) -> None:
    assert as_outcome(result) is result


def _gemini(event: str, **fields: Any) -> str:
    payload: dict[str, Any] = {
        "session_id": "S",
        "transcript_path": "/home/user/.gemini/tmp/app/chats/session-S.json",
        "cwd": "/home/user/app",
        "hook_event_name": event,
        "timestamp": "2026-12-01T22:00:00.000Z",
        "tool_name": "run_shell_command",
        "tool_input": {"command": "make test", "description": "Run the tests"},
    }
    payload.update(fields)
    return json.dumps(payload)


@pytest.mark.parametrize("wrapper", ["{}", "<untrusted_context>\n{}\n</untrusted_context>"])
def test_gemini_shell_reruns_with_one_output_are_blocked_whatever_their_pgid(
    hooks: HookRunner, wrapper: str
) -> None:
    # Gemini CLI's shell tool names the run's process group in every result
    # (packages/core/src/tools/shell.ts): a new number each run of the same command.
    # Since gemini-cli #27772 the text comes inside an untrusted-context wrapper.
    reasons = []
    for index in range(6):
        reasons.append(denied("gemini", hooks.inprocess("gemini", _gemini("BeforeTool"))))
        fields = f"Output: 1 failed\nExit Code: 1\nProcess Group PGID: {48213 + index}"
        content = wrapper.format(fields)
        response = {"llmContent": content, "returnDisplay": "1 failed"}
        hooks.inprocess("gemini", _gemini("AfterTool", tool_response=response))
    assert reasons[0] is None
    assert any(reason is not None for reason in reasons)


def test_gemini_shell_output_is_kept_apart_from_its_pgid() -> None:
    from loopwatch.hooks import gemini

    def result(content: str) -> object:
        event = gemini.parse(
            json.loads(_gemini("AfterTool", tool_response={"llmContent": content}))
        )
        return event.result

    assert result("Output: a\nProcess Group PGID: 1") == result("Output: a\nProcess Group PGID: 2")
    assert result("Output: a\nProcess Group PGID: 1") != result("Output: b\nProcess Group PGID: 1")
    assert result("Output: Process Group PGID: 7") == "Output: Process Group PGID: 7"


def test_a_failed_gemini_shell_command_is_recorded_as_its_error() -> None:
    # Gemini CLI reports a failed command as a success whose text ends with its exit code
    # (packages/core/src/tools/shell.ts); the transcript reader reads it the same way.
    from loopwatch.hooks import gemini

    def outcome(content: str) -> tuple[object, object]:
        event = gemini.parse(
            json.loads(_gemini("AfterTool", tool_response={"llmContent": content}))
        )
        return event.result, event.error

    failed = "Output: 1 failed\nExit Code: 1\nProcess Group PGID: 48213"
    assert outcome(failed) == (UNDEFINED, "Output: 1 failed\nExit Code: 1")
    signalled = "Output: (empty)\nSignal: 9\nProcess Group PGID: 2"
    assert outcome(signalled) == (UNDEFINED, "Output: (empty)\nSignal: 9")
    passed = "Output: ok\nExit Code: 0\nProcess Group PGID: 3"
    assert outcome(passed) == ("Output: ok\nExit Code: 0", UNDEFINED)
    # A text that merely mentions the fields is the command's own output.
    assert outcome("Output: Exit Code: 1") == ("Output: Exit Code: 1", UNDEFINED)


def test_gemini_shell_text_inside_the_untrusted_context_wrapper() -> None:
    # Gemini CLI since #27772 (packages/core/src/tools/shell.ts, textUtils.wrapUntrusted)
    # sends "<untrusted_context>\n<text>\n</untrusted_context>" as the shell's llmContent.
    from loopwatch.hooks import gemini

    def outcome(content: str) -> tuple[object, object]:
        event = gemini.parse(
            json.loads(_gemini("AfterTool", tool_response={"llmContent": content}))
        )
        return event.result, event.error

    def wrapped(text: str) -> str:
        return f"<untrusted_context>\n{text}\n</untrusted_context>"

    one = outcome(wrapped("Output: a\nProcess Group PGID: 1"))
    assert one == outcome(wrapped("Output: a\nProcess Group PGID: 2"))
    assert one != outcome(wrapped("Output: b\nProcess Group PGID: 1"))
    assert one == (wrapped("Output: a"), UNDEFINED)
    failed = outcome(wrapped("Output: 1 failed\nExit Code: 1\nProcess Group PGID: 48213"))
    assert failed == (UNDEFINED, wrapped("Output: 1 failed\nExit Code: 1"))
    # Without its closing tag the text is read as before the wrapper: the fields last.
    unclosed = "<untrusted_context>\nOutput: a\nProcess Group PGID: 1"
    assert outcome(unclosed) == ("<untrusted_context>\nOutput: a", UNDEFINED)
    assert outcome("plain output") == ("plain output", UNDEFINED)


@pytest.mark.parametrize("agent", ["claude-code", "codex"])
def test_parallel_sub_agents_keep_histories_of_their_own(hooks: HookRunner, agent: str) -> None:
    # Parallel sub-agents share the parent's session_id and interleave their tool
    # events; agent_id tells them apart (Claude Code's hook input types; Codex's
    # SubagentCommandInputFields).
    base = json.loads(_claude("PreToolUse", "x"))
    if agent == "codex":
        base.update(turn_id="turn-1", model="gpt-5.5-codex", transcript_path=None)
    # Two identical runs each: allowed; one history would have seen three in a row by
    # the third event, and blocked it.
    reasons = []
    for index in range(2):
        for sub in ("agent-a", "agent-b"):
            call = f"{sub}-{index}"
            pre = {**base, "tool_use_id": call, "agent_id": sub, "agent_type": "general-purpose"}
            reasons.append(denied(agent, hooks.inprocess(agent, json.dumps(pre))))
            response: object = _bash_response("1 failed") if agent == "claude-code" else "1 failed"
            post = {**pre, "hook_event_name": "PostToolUse", "tool_response": response}
            hooks.inprocess(agent, json.dumps(post))
    assert reasons == [None] * 4
    store = hooks.store()
    try:
        keys = {key for key, _ in store.session_keys(0)}
    finally:
        store.close()
    assert keys == {f"{agent}:S/agent-a", f"{agent}:S/agent-b"}


# Cursor drops an ``additional_context`` over 10,000 characters (after trim) whole rather
# than truncating it: the CLI bundle reading (build 2026.09.18, HookAdditionalContextTooLarge
# Error) behind cursor.com/docs/hooks, as quoted in the REFERENCE notes' Cursor section.
@pytest.mark.parametrize("unit", ["w", "\U0001f501", "\udc80"])  # (a lone surrogate too)
def test_a_cursor_context_over_cursors_limit_is_cut_to_fit(unit: str) -> None:
    from loopwatch.hooks import cursor
    from loopwatch.hooks._core import HookEvent, Outcome

    event = HookEvent(kind="after", name="postToolUse", session="S", tool="MCP:" + unit * 12_000)
    answer = cursor.render(event, Outcome(warning="loop on " + unit * 12_000))
    context = json.loads(answer.stdout)["additional_context"]
    assert answer.exit_code == 0
    assert len(context.encode("utf-16-le", "surrogatepass")) // 2 <= cursor.MAX_CONTEXT
    assert context.startswith("loop on ")
    assert context.endswith("\u2026")


def test_a_short_cursor_context_is_left_whole() -> None:
    from loopwatch.hooks import cursor
    from loopwatch.hooks._core import HookEvent, Outcome

    event = HookEvent(kind="after", name="postToolUse", session="S", tool="Shell")
    answer = cursor.render(event, Outcome(warning="w", end_run="e"))
    assert json.loads(answer.stdout) == {"additional_context": "w\n\ne"}


def _codex(kind: str, call: str, *, turn: str | None) -> str:
    data = json.loads(
        (DATA / "codex" / f"{kind}.json")
        .read_text(encoding="utf-8")
        .replace("@SESSION@", "S")
        .replace("@CALL@", call)
        .replace("@COMMAND@", "make test")
    )
    if turn is None:
        del data["turn_id"]
    else:
        data["turn_id"] = turn
    return json.dumps(data)


@pytest.mark.parametrize("pre_turn", [None, "turn-1"])
def test_codex_calls_are_one_record_each_whether_or_not_pre_carries_the_turn(
    hooks: HookRunner, pre_turn: str | None
) -> None:
    # Codex releases whose PreToolUse input had no turn_id yet (openai/codex
    # codex-rs/hooks/schema/generated/pre-tool-use.command.input.schema.json @ 3be4afd3)
    # still sent it with PostToolUse: the pre recorded the call under no run, the post
    # added a second record under the turn, and the loop was never seen.
    reasons = []
    for index in range(5):
        call = f"call_{index}"
        reasons.append(
            denied("codex", hooks.inprocess("codex", _codex("PreToolUse", call, turn=pre_turn)))
        )
        hooks.inprocess("codex", _codex("PostToolUse", call, turn="turn-1"))
    store = hooks.store()
    try:
        history = store.history("codex:S", 0)
    finally:
        store.close()
    assert len(history) == sum(reason is None for reason in reasons)
    assert {record.run_id for record in history} == {pre_turn}
    assert any(reasons)


@pytest.mark.parametrize("pre_prompt", [None, "prompt-1"])
def test_claude_code_calls_are_one_record_each_whatever_event_carries_prompt_id(
    hooks: HookRunner, pre_prompt: str | None
) -> None:
    # The same rule for Claude Code's prompt_id: a call's post follows its pre.
    reasons = []
    for index in range(5):
        call = f"toolu_{index}"
        pre = json.loads(_claude("PreToolUse", call))
        if pre_prompt:
            pre["prompt_id"] = pre_prompt
        reasons.append(denied("claude-code", hooks.inprocess("claude-code", json.dumps(pre))))
        post = _claude(
            "PostToolUse", call, prompt_id="prompt-1", tool_response=_bash_response("1 failed")
        )
        hooks.inprocess("claude-code", post)
    store = hooks.store()
    try:
        history = store.history("claude-code:S", 0)
    finally:
        store.close()
    assert len(history) == sum(reason is None for reason in reasons)
    assert {record.run_id for record in history} == {pre_prompt}
    assert any(reasons)


def test_a_codex_mcp_result_flagged_is_error_is_recorded_as_an_error() -> None:
    # Codex has no failure event; an MCP tool's tool_response is its CallToolResult as
    # JSON (McpToolOutput::post_tool_use_response), isError set when the tool failed.
    from loopwatch.hooks import codex

    def outcome(response: object) -> tuple[object, object]:
        event = codex.parse(
            {
                "hook_event_name": "PostToolUse",
                "session_id": "S",
                "tool_name": "mcp__db__query",
                "tool_input": {"sql": "select 1"},
                "tool_use_id": "c1",
                "tool_response": response,
            }
        )
        return event.result, event.error

    failed = {"content": [{"type": "text", "text": "relation does not exist"}], "isError": True}
    assert outcome(failed) == (UNDEFINED, "relation does not exist")
    assert outcome({"content": [], "is_error": True}) == (UNDEFINED, "tool failed")
    passed = {"content": [{"type": "text", "text": "1"}], "isError": False}
    assert outcome(passed) == (passed, UNDEFINED)
    assert outcome("plain output") == ("plain output", UNDEFINED)


def _gemini_file(name: str, call: str = "", query: str = "loop detection") -> str:
    text = (DATA / "gemini" / f"{name}.json").read_text(encoding="utf-8")
    return text.replace("@SESSION@", "S").replace("@CALL@", call).replace("@COMMAND@", query)


def test_a_gemini_mcp_tool_loop_is_blocked_under_its_qualified_name(hooks: HookRunner) -> None:
    # Gemini CLI names an MCP tool mcp_<server>_<tool> (packages/core/src/tools/mcp-tool.ts,
    # generateValidName) and sends mcp_context beside it; llmContent is a list of parts.
    reasons = []
    for _ in range(3):
        reasons.append(
            denied("gemini", hooks.process("gemini", _gemini_file("BeforeTool-mcp")).stdout)
        )
        if reasons[-1] is None:
            hooks.inprocess("gemini", _gemini_file("AfterTool-mcp"))
    assert reasons[:2] == [None, None]
    assert reasons[2] is not None and "mcp_github_search_issues" in reasons[2]
    store = hooks.store()
    history = store.history("gemini:S", time.time())
    store.close()
    assert {record.tool_name for record in history} == {"mcp_github_search_issues"}


def test_a_failed_gemini_mcp_tool_is_recorded_as_its_error(hooks: HookRunner) -> None:
    # An MCP tool that reported isError comes as tool_response.error {message, type:
    # "mcp_tool_error"} (DiscoveredMCPToolInvocation.execute, mcp-tool.ts @ 5411f113).
    from loopwatch.hooks import gemini

    event = gemini.parse(json.loads(_gemini_file("AfterTool-mcp-error")))
    assert event.result is UNDEFINED
    assert isinstance(event.error, str) and event.error.startswith("MCP tool 'search_issues'")
    ok = gemini.parse(json.loads(_gemini_file("AfterTool-mcp")))
    assert ok.result == [{"text": "No issues match the query."}] and ok.error is UNDEFINED
    hooks.process("gemini", _gemini_file("BeforeTool-mcp"))
    done = hooks.process("gemini", _gemini_file("AfterTool-mcp-error"))
    assert (done.returncode, done.stdout.strip()) == (0, "{}")
    store = hooks.store()
    (record,) = store.history("gemini:S", time.time())
    store.close()
    assert record.result_hash is not None and record.result_hash.startswith("error:")


def _cursor_mcp(event: str, call: str, tool_input: object, **fields: Any) -> str:
    data = json.loads((DATA / "cursor" / f"{event}.json").read_text(encoding="utf-8"))
    data.update(
        conversation_id="S",
        session_id="S",
        tool_use_id=call,
        tool_name="MCP:search_issues",
        tool_input=tool_input,
        **fields,
    )
    return json.dumps(data)


def test_a_cursor_mcp_input_sent_as_json_text_is_one_call_with_its_object(
    hooks: HookRunner,
) -> None:
    # Cursor's docs give an MCP tool's tool_input as a JSON string; the same call sent as
    # text spaced one way, as text spaced another, or as an object is one set of arguments.
    inputs: list[object] = ['{"query": "loops"}', '{"query":"loops"}', {"query": "loops"}]
    reasons = []
    for index, tool_input in enumerate(inputs):
        call = f"mcp-{index}"
        reasons.append(
            denied("cursor", hooks.inprocess("cursor", _cursor_mcp("preToolUse", call, tool_input)))
        )
        if reasons[-1] is None:
            hooks.inprocess(
                "cursor",
                _cursor_mcp("postToolUse", call, tool_input, tool_output='{"content":[]}'),
            )
    assert reasons[:2] == [None, None] and reasons[2] is not None
    from loopwatch.hooks import cursor

    for text in ("[1, 2]", "not json", '{"a": ', "{" * 5000):
        event = cursor.parse(json.loads(_cursor_mcp("preToolUse", "x", text)))
        assert event.params == text  # anything but a JSON object stays the text it was


def test_a_codex_harness_refusal_is_recorded_as_an_error() -> None:
    # A patch that does not apply answers the model with the harness's own text
    # (FunctionCallError::RespondToModel), a plain string like any Bash output.
    from loopwatch.hooks import codex

    def outcome(response: object) -> tuple[object, object]:
        event = codex.parse(
            {
                "hook_event_name": "PostToolUse",
                "session_id": "S",
                "turn_id": "t",
                "tool_name": "apply_patch",
                "tool_input": {"input": "*** Begin Patch"},
                "tool_use_id": "c1",
                "tool_response": response,
            }
        )
        return event.result, event.error

    refused = "apply_patch verification failed: Failed to find expected lines in src/app.py"
    assert outcome(refused) == (UNDEFINED, refused)
    # Output that merely mentions it is the command's own.
    said = "grep: apply_patch verification failed"
    assert outcome(said) == (said, UNDEFINED)
