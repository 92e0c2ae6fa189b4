"""Each transcript reader on small hand-made fixtures, and format detection."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from loopwatch import UNDEFINED
from loopwatch.transcripts import (
    Compaction,
    ReplayCall,
    TranscriptError,
    find_transcripts,
    parse_text,
    parse_transcript,
    read_transcript,
)

# --- loopwatch JSONL ---------------------------------------------------------------------


def test_loopwatch_jsonl_null_error_is_no_error_and_null_result_is_a_result(data: Path) -> None:
    transcript = read_transcript(data / "loopwatch" / "error_conventions.jsonl")
    assert transcript.format == "loopwatch"
    (run,) = transcript.runs
    first, second, third, fourth = run.calls
    # "error": null must never become None: SPEC §9 makes error=None a real error.
    assert first.error is UNDEFINED
    assert first.result is None
    assert first.call_id == "n1"
    assert second.result == "text"
    assert second.error is UNDEFINED
    assert third.error == "boom"
    assert third.result is UNDEFINED
    assert fourth.result is UNDEFINED
    assert fourth.error is UNDEFINED
    assert isinstance(run.events[-1], Compaction)
    assert [c.line for c in run.calls] == [1, 2, 3, 4]


def test_loopwatch_jsonl_groups_run_ids_in_order_of_first_appearance(data: Path) -> None:
    transcript = read_transcript(data / "loopwatch" / "runs_and_compaction.jsonl")
    assert [run.run_id for run in transcript.runs] == ["r1", "r2"]
    assert [run.label for run in transcript.runs] == ["r1", "r2"]
    r1, r2 = transcript.runs
    assert [c.call_id for c in r1.calls] == ["a1", "a2", "a3"]
    assert [c.call_id for c in r2.calls] == ["b1", "b2", "b3", "b4", "b5"]
    assert [type(e).__name__ for e in r2.events][:3] == ["ReplayCall", "Compaction", "ReplayCall"]
    assert r2.events[1] == Compaction(run_id="r2", line=4)
    assert {c.tokens for c in r2.calls} == {200}


def test_compaction_without_run_id_joins_the_run_of_the_previous_call() -> None:
    text = "\n".join(
        json.dumps(line)
        for line in (
            {"tool": "a", "run_id": "x"},
            {"tool": "b", "run_id": "y"},
            {"event": "compaction"},
            {"event": "compaction", "run_id": None},
        )
    )
    runs = parse_text(text, format="loopwatch").runs
    by_id = {run.run_id: run for run in runs}
    assert by_id["y"].events[-1] == Compaction(run_id="y", line=3)
    assert by_id[None].events == (Compaction(run_id=None, line=4),)
    assert by_id[None].label == "(no run id)"


def test_loopwatch_jsonl_defaults_and_id_coercion() -> None:
    text = '{"tool": "t", "call_id": 7, "run_id": 3}\n\n   \n{"tool": "u", "args": [1]}\n'
    (first_run, second_run) = parse_text(text).runs
    (call,) = first_run.calls
    assert call == ReplayCall(tool="t", args={}, call_id="7", run_id="3", line=1)
    assert second_run.calls[0].args == [1]
    assert second_run.calls[0].line == 4


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        ('{"tool": "t", "tokens": -1}', '"tokens" must be a non-negative integer'),
        ('{"tool": "t", "tokens": true}', '"tokens" must be a non-negative integer'),
        ('{"tool": "t", "call_id": {"a": 1}}', '"call_id" must be a string or null'),
        ('{"tool": "t", "run_id": [1]}', '"run_id" must be a string or null'),
        ('{"tool": null}', '"tool" must be a string'),
        ('{"event": "compaction", "run_id": 1.5}', '"run_id" must be a string or null'),
    ],
)
def test_loopwatch_jsonl_rejects_wrong_field_types(line: str, reason: str) -> None:
    with pytest.raises(TranscriptError) as caught:
        parse_text('{"tool": "ok"}\n' + line, path="f.jsonl", format="loopwatch")
    assert caught.value.line == 2
    assert caught.value.reason == reason
    assert str(caught.value) == f"f.jsonl:2: {reason}"


def test_empty_file_is_one_empty_run() -> None:
    transcript = parse_transcript(b"\n \n", path="empty.jsonl")
    assert transcript.format == "loopwatch"
    assert len(transcript.runs) == 1
    assert transcript.runs[0].calls == ()
    assert transcript.call_count == 0


# --- OpenAI ------------------------------------------------------------------------------


def test_openai_document_decodes_arguments_and_matches_results(data: Path) -> None:
    transcript = read_transcript(data / "openai" / "chat.json")
    assert transcript.format == "openai"
    (run,) = transcript.runs
    calls = run.calls
    assert len(calls) == 14
    assert calls[0] == ReplayCall(
        tool="search_flights",
        args={"from": "JFK", "to": "SFO"},
        result="[]",
        call_id="call_0",
        tokens=1020,
        line=None,
    )
    # Arguments that are not JSON are replayed as the raw string the model sent.
    assert calls[12].args == "{not json"
    assert calls[12].result == "error: bad args"
    assert calls[13].result == [{"type": "text", "text": "sent"}]
    # A message without usage gives no token count; chat has no error flag.
    assert calls[12].tokens is None
    assert all(call.error is UNDEFINED for call in calls)


def test_openai_jsonl_messages(data: Path) -> None:
    transcript = read_transcript(data / "openai" / "chat.jsonl")
    assert transcript.format == "openai"
    assert [c.line for c in transcript.runs[0].calls] == [3, 5, 7]


def test_openai_legacy_function_call_and_usage_split() -> None:
    messages = [
        {
            "role": "assistant",
            "function_call": {"name": "lookup", "arguments": '{"q": 1}'},
            "tool_calls": [
                {"id": "a", "type": "function", "function": {"name": "x", "arguments": {"k": 2}}},
                {"id": "b", "type": "function", "function": {"name": "y"}},
            ],
            "usage": {"total_tokens": 10},
        },
        {"role": "tool", "tool_call_id": "b", "content": None},
        {"role": "function", "name": "lookup", "content": "found"},
    ]
    calls = parse_text(json.dumps(messages), format="openai").runs[0].calls
    assert [(c.tool, c.args) for c in calls] == [("x", {"k": 2}), ("y", {}), ("lookup", {"q": 1})]
    assert [c.tokens for c in calls] == [4, 3, 3]
    assert calls[1].result is None  # a real null result
    assert calls[2].result == "found"
    assert calls[0].result is UNDEFINED  # never answered


# --- Anthropic and Claude Code -----------------------------------------------------------


def test_anthropic_is_error_becomes_the_error_text(data: Path) -> None:
    transcript = read_transcript(data / "anthropic" / "messages.json")
    assert transcript.format == "anthropic"
    calls = transcript.runs[0].calls
    assert [c.tool for c in calls] == ["Bash", "Bash", "Bash", "read_file"]
    assert calls[0].error == "exit 1: ImportError"
    assert calls[0].result is UNDEFINED
    assert calls[0].tokens == 530
    # A tool_result without content is an empty result, never UNDEFINED (SPEC §11.1).
    assert calls[3].result == ""
    assert calls[3].error is UNDEFINED


def test_claude_code_session(data: Path) -> None:
    transcript = read_transcript(data / "claude_code" / "session.jsonl")
    assert transcript.format == "claude-code"
    main, sidechain = transcript.runs
    assert main.run_id is None
    assert main.label == "main"
    assert sidechain.run_id == "sidechain:a1b2"
    make, read = main.calls
    assert make.args == {"command": "make"}
    assert make.error == "make: *** No rule"
    # One response over two lines: its usage is counted once.
    assert make.tokens == 1000
    assert read.tokens == 60
    assert read.result == "all: build"
    # Only the automatic compaction arms the guard; a manual /compact is not a retry.
    assert [type(e).__name__ for e in main.events] == ["ReplayCall", "Compaction", "ReplayCall"]
    assert sidechain.calls[0].result is UNDEFINED


# --- OpenClaw ----------------------------------------------------------------------------


def test_openclaw_session_turns_results_and_compaction(data: Path) -> None:
    transcript = read_transcript(data / "openclaw" / "session.jsonl")
    assert transcript.format == "openclaw"
    turn1, turn2 = transcript.runs
    assert (turn1.run_id, turn2.run_id) == ("turn-1", "turn-2")
    (ls,) = turn1.calls
    assert ls.tool == "exec"
    assert ls.args == {"command": "ls"}
    assert ls.call_id == "call_1"
    assert ls.tokens == 100
    assert ls.result == {
        "content": [{"type": "text", "text": "a.txt"}],
        "details": {"status": "completed", "exitCode": 0, "durationMs": 12, "aggregated": "a.txt"},
    }
    kinds = [type(e).__name__ for e in turn2.events]
    assert kinds == ["ReplayCall", "Compaction", *["ReplayCall"] * 4]
    assert turn2.events[1] == Compaction(run_id="turn-2", line=10)


def test_openclaw_error_results_and_bare_messages() -> None:
    lines = [
        {"role": "user", "content": "go"},
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "ok"},
                {"type": "toolCall", "id": "c1", "name": "read", "arguments": {"path": "x"}},
            ],
        },
        {
            "role": "toolResult",
            "toolCallId": "c1",
            "toolName": "read",
            "content": [{"type": "text", "text": "ENOENT"}],
            "isError": True,
        },
        {"type": "branch_summary", "summary": "s"},
    ]
    text = "\n".join(json.dumps(line) for line in lines)
    (run,) = parse_text(text, format="openclaw").runs
    (call,) = run.calls
    assert call.error == "ENOENT"
    assert call.result is UNDEFINED


def test_openclaw_without_tool_calls_is_one_empty_run() -> None:
    text = '{"type": "session", "id": "s"}\n{"type": "message", "message": {"role": "user"}}\n'
    transcript = parse_text(text)
    assert transcript.format == "openclaw"
    assert transcript.call_count == 0
    assert len(transcript.runs) == 1


# --- detection ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("relative", "expected"),
    [
        ("loopwatch/loop.jsonl", "loopwatch"),
        ("openai/chat.json", "openai"),
        ("openai/chat.jsonl", "openai"),
        ("anthropic/messages.json", "anthropic"),
        ("claude_code/session.jsonl", "claude-code"),
        ("openclaw/session.jsonl", "openclaw"),
    ],
)
def test_format_detection(data: Path, relative: str, expected: str) -> None:
    assert read_transcript(data / relative).format == expected


def test_forced_format_overrides_detection(data: Path) -> None:
    transcript = read_transcript(data / "anthropic" / "messages.json", format="openai")
    assert transcript.format == "openai"
    assert transcript.call_count == 0  # no OpenAI tool_calls in an Anthropic transcript


def test_unknown_forced_format_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="unknown transcript format"):
        parse_text("{}", format="yaml")  # type: ignore[arg-type]


def test_a_bom_is_ignored() -> None:
    transcript = parse_transcript(b'\xef\xbb\xbf{"tool": "a"}\n')
    assert transcript.runs[0].calls[0].tool == "a"


# --- malformed files ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "line", "reason"),
    [
        ("bad_json.jsonl", 3, "invalid JSON: Expecting property name enclosed in double quotes"),
        ("not_object.jsonl", 2, "a call line: expected a JSON object"),
        ("bad_tool.jsonl", 2, '"tool" must be a string'),
        ("unknown_event.jsonl", 1, "unknown event 'reset'"),
        ("broken_document.json", 4, "invalid JSON: Expecting ',' delimiter"),
        (
            "unknown_shape.jsonl",
            1,
            "not a transcript format loopwatch reads: a JSON object with keys hello",
        ),
        ("invalid_utf8.jsonl", 2, "not valid UTF-8"),
        ("bad_tool_calls.json", None, 'message 1: "tool_calls" must be a list'),
    ],
)
def test_malformed_files_name_path_line_and_reason(
    data: Path, name: str, line: int | None, reason: str
) -> None:
    path = data / "malformed" / name
    with pytest.raises(TranscriptError) as caught:
        read_transcript(path)
    assert caught.value.path == str(path)
    assert caught.value.line == line
    assert caught.value.reason.startswith(reason)


def test_unreadable_path_is_a_transcript_error(tmp_path: Path) -> None:
    with pytest.raises(TranscriptError) as caught:
        read_transcript(tmp_path)  # a directory cannot be read as a file
    assert caught.value.line is None
    assert caught.value.reason == "not a regular file (a directory)"


def test_transcript_error_pickles() -> None:
    import pickle

    error = pickle.loads(pickle.dumps(TranscriptError("p", 3, "bad")))
    assert (error.path, error.line, error.reason) == ("p", 3, "bad")


# --- finding files -----------------------------------------------------------------------


def test_find_transcripts_walks_folders_and_reports_problems(tmp_path: Path) -> None:
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "run.jsonl").write_text("")
    (tmp_path / "a.json").write_text("[]")
    (tmp_path / "notes.md").write_text("# not a transcript")
    (tmp_path / ".hidden").mkdir()
    (tmp_path / ".hidden" / "x.jsonl").write_text("")
    (tmp_path / "empty").mkdir()
    explicit = tmp_path / "notes.md"
    files, problems = find_transcripts([tmp_path, explicit, tmp_path / "nope", tmp_path / "empty"])
    assert files == (str(tmp_path / "a.json"), str(tmp_path / "b" / "run.jsonl"), str(explicit))
    assert [(p.path, p.reason) for p in problems] == [
        (str(tmp_path / "nope"), "no such file or directory"),
        (str(tmp_path / "empty"), "no transcript files found"),
    ]
