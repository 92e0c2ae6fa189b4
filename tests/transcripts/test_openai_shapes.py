"""OpenAI Chat Completions and Responses API shapes seen in real logs (samples hand-built).

Each sample is shaped like what the API (or an OpenAI-compatible server) records; the
source of each shape is named in ``tests/data/transcripts/SOURCES.md``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from loopwatch import UNDEFINED
from loopwatch.transcripts import (
    ReplayCall,
    Transcript,
    TranscriptError,
    parse_text,
    read_transcript,
)

DATA = Path(__file__).resolve().parents[1] / "data" / "transcripts"


def _calls(transcript: Transcript) -> list[ReplayCall]:
    return [call for run in transcript.runs for call in run.calls]


def test_chat_calls_without_ids_are_answered_in_order() -> None:
    """Gemini's OpenAI-compatible endpoint and LM Studio send ``"id": ""``: each tool
    message answers the oldest call still waiting (it used to answer none)."""
    transcript = read_transcript(DATA / "openai/chat-empty-call-ids.json")
    assert transcript.format == "openai"
    assert transcript.unmatched_results == 0
    calls = _calls(transcript)
    assert [(c.tool, c.args, c.result) for c in calls] == [
        ("git_tags", {"pattern": "v2.*"}, "v2.0.0\nv2.1.0"),
        ("read_file", {"path": "CHANGELOG.md"}, "## 2.1.0\n- faster sync"),
        ("read_file", {"path": "docs/release.md"}, "Error: no such file: docs/release.md"),
    ]
    assert calls[0].batch is not None and calls[0].batch == calls[1].batch
    assert calls[2].batch is None


def test_chat_tool_message_with_an_unknown_id_still_counts_as_unmatched() -> None:
    messages = [
        {"role": "assistant", "tool_calls": [_function("", "ls", "{}")]},
        {"role": "tool", "tool_call_id": "call_other", "content": "x"},
    ]
    transcript = parse_text(json.dumps({"messages": messages}))
    assert transcript.unmatched_results == 1
    assert _calls(transcript)[0].result is UNDEFINED


def test_chat_custom_tool_calls_are_read() -> None:
    """``{"type": "custom", "custom": {"name", "input"}}`` (GPT-5 custom tools): the file
    was refused whole; the call reads as a Responses ``custom_tool_call`` does."""
    transcript = read_transcript(DATA / "openai/chat-custom-tools.json")
    assert transcript.format == "openai"
    assert transcript.unmatched_results == 0
    patch, tests = _calls(transcript)
    assert patch.tool == "apply_patch"
    assert isinstance(patch.args, dict) and patch.args["input"].startswith("*** Begin Patch")
    assert patch.result == [{"type": "text", "text": "Done: 1 file updated"}]
    # invalid JSON arguments are replayed as the model sent them
    assert tests.args == '{"path": "tests/test_clock.py"'
    assert tests.result == "1 passed in 0.02s"
    assert patch.batch is not None and patch.batch == tests.batch


@pytest.mark.parametrize("custom", [None, {}, {"name": 3}, "apply_patch"])
def test_a_custom_tool_call_without_a_name_is_reported(custom: object) -> None:
    call = {"id": "c", "type": "custom", "custom": custom}
    messages = [{"role": "assistant", "tool_calls": [call]}]
    with pytest.raises(TranscriptError, match="custom tool call needs"):
        parse_text(json.dumps({"messages": messages}))


def test_a_saved_output_list_with_web_searches_is_not_an_openhands_stream() -> None:
    """A ``web_search_call`` has an ``action`` object and an ``id``, as an OpenHands
    action has: a response's ``output`` saved as a list was read as events, 0 calls."""
    transcript = read_transcript(DATA / "openai-responses/output-web-search.json")
    assert transcript.format == "openai-responses"
    search, page = _calls(transcript)
    assert search.tool == page.tool == "web_search"
    assert search.args == {"type": "search", "query": "sqlite 3.50 release notes"}
    assert search.batch is not None and search.batch == page.batch


@pytest.mark.parametrize(
    "kind", ["web_search_call", "computer_call", "local_shell_call", "shell_call"]
)
def test_responses_items_with_an_action_object_are_never_events(kind: str) -> None:
    items = [{"type": kind, "id": "x1", "call_id": "c1", "action": {"type": "exec"}}]
    transcript = parse_text(json.dumps(items))
    assert transcript.format == "openai-responses"
    assert transcript.call_count == 1


def test_a_local_shell_output_answers_its_call_by_item_id() -> None:
    """``local_shell_call_output`` has no ``call_id``: its ``id`` is the call's."""
    transcript = read_transcript(DATA / "openai-responses/local-shell-and-computer.json")
    assert transcript.unmatched_results == 0
    click, shell, scroll = _calls(transcript)
    assert shell.tool == "local_shell"
    assert isinstance(shell.args, dict) and shell.args["command"] == ["df", "-h", "/"]
    assert isinstance(shell.result, str) and "78%" in shell.result
    assert click.tool == scroll.tool == "computer"
    assert click.result is not UNDEFINED and scroll.result is not UNDEFINED


def _function(call_id: str, name: str, arguments: str) -> dict[str, object]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}
