"""The Cursor CLI's ``--output-format stream-json`` output (sample hand-built).

Shape: ``tool_call`` ``started`` / ``completed`` events as documented from real runs of
``cursor-agent`` (reifying/cursor-hack ``docs/stream-json-events.md``, cursor-agent
2026.01.28) and as community parsers read them; see ``tests/data/transcripts/SOURCES.md``.
"""

from __future__ import annotations

import json
from pathlib import Path

from loopwatch import UNDEFINED
from loopwatch.transcripts import ReplayCall, parse_text, read_transcript

SAMPLE = Path(__file__).resolve().parents[1] / "data" / "transcripts" / "cursor"
STREAM = SAMPLE / "cursor-agent-stream.jsonl"


def _calls() -> list[ReplayCall]:
    transcript = read_transcript(STREAM)
    assert transcript.format == "cursor"  # it was read as Claude Code SDK output: 0 calls
    assert transcript.unmatched_results == 0
    return [call for run in transcript.runs for call in run.calls]


def test_stream_calls_are_read_with_their_arguments_and_results() -> None:
    build, todo, cleanup, issues = _calls()
    assert (build.tool, todo.tool, cleanup.tool, issues.tool) == (
        "shell",
        "read",
        "shell",
        "list_issues",
    )
    # the toolCallId copy of the call id is new on every call: not an argument
    assert todo.args == {"path": "/home/dev/notes/TODO.md"}
    assert isinstance(build.args, dict) and "toolCallId" not in build.args
    assert issues.args == {"state": "open"}
    assert isinstance(todo.result, dict) and todo.result["content"] == "- fix the build\n"


def test_a_failed_command_is_a_failure_without_its_timing() -> None:
    build = _calls()[0]
    assert build.result is UNDEFINED
    assert isinstance(build.error, dict) and build.error["exitCode"] == 2
    assert "executionTime" not in build.error


def test_a_rejected_call_never_ran() -> None:
    transcript = read_transcript(STREAM)
    cleanup = _calls()[2]
    assert cleanup.result is UNDEFINED and cleanup.error is UNDEFINED
    assert any("never run" in note for note in transcript.notes)


def test_calls_of_one_model_call_are_a_batch() -> None:
    build, todo, cleanup, issues = _calls()
    assert build.batch is not None and build.batch == todo.batch
    assert cleanup.batch is None and issues.batch is None


def _event(subtype: str, call_id: str, body: dict[str, object]) -> str:
    return json.dumps(
        {"type": "tool_call", "subtype": subtype, "call_id": call_id, "tool_call": body}
    )


def test_a_completed_event_alone_is_the_call_and_an_mcp_error_fails() -> None:
    init = json.dumps({"type": "system", "subtype": "init", "session_id": "s"})
    body = {
        "mcpToolCall": {
            "args": {"toolName": "fetch", "args": {"url": "u"}},
            "result": {"success": {"content": [], "isError": True}},
        }
    }
    transcript = parse_text("\n".join([init, _event("completed", "c1", body)]))
    assert transcript.format == "cursor"
    [call] = transcript.runs[0].calls
    assert call.tool == "fetch" and call.args == {"url": "u"}
    assert call.result is UNDEFINED and call.error == {"content": [], "isError": True}


def test_an_error_result_is_a_failure_and_claude_sdk_streams_stay_claude() -> None:
    init = json.dumps({"type": "system", "subtype": "init", "session_id": "s"})
    started = _event("started", "c2", {"grepToolCall": {"args": {"pattern": "x"}}})
    failed = _event(
        "completed",
        "c2",
        {"grepToolCall": {"args": {"pattern": "x"}, "result": {"error": {"errorMessage": "no"}}}},
    )
    [call] = parse_text("\n".join([init, started, failed])).runs[0].calls
    assert call.tool == "grep" and call.error == {"errorMessage": "no"}
    claude = json.dumps(
        {
            "type": "assistant",
            "session_id": "s",
            "message": {"content": [{"type": "tool_use", "id": "t", "name": "Bash", "input": {}}]},
        }
    )
    assert parse_text("\n".join([init, claude])).format == "claude-code-sdk"
