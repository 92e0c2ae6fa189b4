"""Property tests: readers never crash on bad input, and loopwatch JSONL round-trips."""

from __future__ import annotations

import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from loopwatch import UNDEFINED
from loopwatch.replay import replay_run
from loopwatch.transcripts import FORMATS, FormatName, TranscriptError, parse_transcript

_FORMATS: list[FormatName | None] = [None, *FORMATS]

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**60), max_value=2**60)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=12),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=12,
)

# Objects that look like the formats' own lines, so the readers' deeper paths are exercised.
_KEYS = [
    "tool",
    "args",
    "result",
    "error",
    "call_id",
    "run_id",
    "tokens",
    "event",
    "type",
    "role",
    "message",
    "content",
    "tool_calls",
    "function",
    "name",
    "arguments",
    "id",
    "tool_call_id",
    "tool_use_id",
    "is_error",
    "isError",
    "toolCallId",
    "details",
    "usage",
    "subtype",
    "compactMetadata",
    "isSidechain",
    "messages",
    # the formats added for issue 13
    "toolCalls",
    "status",
    "payload",
    "output",
    "input",
    "traj",
    "trajectory",
    "trajectory_format",
    "action",
    "observation",
    "cause",
    "history",
    "tool_call_metadata",
    "parts",
    "functionCall",
    "functionResponse",
    "traceSchema",
    "data",
    "parent_tool_use_id",
    "session_id",
    "sessionId",
    "projectHash",
    "parentId",
    "toolName",
    "instance_id",
    # mini-swe-agent v2 messages
    "extra",
    "actions",
    "command",
    "returncode",
    "exception_info",
    "interrupt_type",
    "object",
    "call_id",
    # tau2-bench simulations
    "simulations",
    "simulation_run",
    "task_id",
    "termination_reason",
    "ticks",
    "agent_tool_calls",
    "agent_tool_results",
    "tool_messages",
    "requestor",
    # Cursor CLI stream-json calls
    "tool_call",
    "model_call_id",
    "shellToolCall",
    "mcpToolCall",
    "success",
    "rejected",
    "exitCode",
    "toolName",
    # Codex call-end events
    "exit_code",
    "Ok",
    "Err",
]
_WORDS = st.sampled_from(
    [
        "compaction",
        "message",
        "session",
        "assistant",
        "user",
        "tool",
        "toolResult",
        "toolCall",
        "tool_use",
        "tool_result",
        "system",
        "compact_boundary",
        "function",
        "text",
        "gemini",
        "cancelled",
        "error",
        "response_item",
        "session_meta",
        "compacted",
        "function_call",
        "function_call_output",
        "custom_tool_call",
        "local_shell_call",
        "mcp_call",
        "openclaw-trajectory",
        "tool.call",
        "tool.result",
        "session.compaction",
        "mini-swe-agent-1",
        "mini-swe-agent-1.1",
        "response",
        "action was not executed",
        "<returncode>1</returncode>",
        "run",
        "condensation",
        "[read_file for 'x'] Result:\nok",
        "Cancelled: parallel tool call x errored",
        "```bash\nls\n```",
        "<read_file><path>a</path></read_file>",
        "started",
        "completed",
        "event_msg",
        "exec_command_end",
        "mcp_tool_call_end",
        "patch_apply_end",
        "aborted",
        "custom",
        "web_search_call",
        "local_shell_call_output",
    ]
)
shaped = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 5) | _WORDS | st.text(max_size=5),
    lambda children: (
        st.lists(children, max_size=3)
        | st.dictionaries(st.sampled_from(_KEYS), children, max_size=5)
    ),
    max_leaves=20,
)


def _parses_or_reports(data: bytes, fmt: FormatName | None) -> None:
    try:
        transcript = parse_transcript(data, path="fuzz", format=fmt)
    except TranscriptError as exc:
        assert exc.path == "fuzz"
        assert exc.reason
        assert exc.line is None or exc.line >= 1
        return
    assert transcript.runs
    for run in transcript.runs:
        replay_run(run)  # whatever was read replays without raising


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.binary(max_size=300), fmt=st.sampled_from(_FORMATS))
def test_arbitrary_bytes_never_crash_a_reader(data: bytes, fmt: FormatName | None) -> None:
    _parses_or_reports(data, fmt)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(lines=st.lists(shaped | json_values, max_size=8), fmt=st.sampled_from(_FORMATS))
def test_arbitrary_json_lines_never_crash_a_reader(
    lines: list[object], fmt: FormatName | None
) -> None:
    _parses_or_reports("\n".join(json.dumps(line) for line in lines).encode(), fmt)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(document=shaped, fmt=st.sampled_from(_FORMATS))
def test_arbitrary_json_documents_never_crash_a_reader(
    document: object, fmt: FormatName | None
) -> None:
    _parses_or_reports(json.dumps(document, indent=1).encode(), fmt)


@settings(max_examples=100, deadline=None)
@given(
    calls=st.lists(
        st.fixed_dictionaries(
            {"tool": st.text(min_size=1, max_size=8), "args": json_values},
            optional={
                "result": json_values,
                "error": st.none() | st.text(max_size=8),
                "call_id": st.none() | st.text(max_size=6),
            },
        ),
        max_size=6,
    )
)
def test_loopwatch_jsonl_round_trip(calls: list[dict[str, object]]) -> None:
    data = "\n".join(json.dumps(call) for call in calls).encode()
    transcript = parse_transcript(data, format="loopwatch")
    read = transcript.runs[0].calls
    assert len(read) == len(calls)
    for original, call in zip(calls, read, strict=True):
        assert call.tool == original["tool"]
        assert call.args == original["args"]
        assert call.result == original.get("result", UNDEFINED)
        error = original.get("error")
        assert call.error == (UNDEFINED if error is None else error)
        assert call.call_id == original.get("call_id")
