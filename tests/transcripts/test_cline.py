"""Cline result texts as recent versions write them (shapes from a real 231-call task).

The real file (mike4567/MRA04242026 ``api_conversation_history.json`` @ 7644913, no licence,
so not copied) has multi-line follow-up questions as result labels, ``[subagents]`` for
``use_subagents``, and ``Command failed with exit code N.`` for failed commands.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from loopwatch import UNDEFINED
from loopwatch.transcripts import NotATranscript, ReplayCall, parse_text, read_transcript


def _use(call_id: str, name: str, params: dict[str, str]) -> dict[str, object]:
    return {"type": "tool_use", "id": call_id, "name": name, "input": params, "call_id": call_id}


def _said(text: str) -> dict[str, object]:
    return {"role": "user", "content": [{"type": "text", "text": text}]}


def _run(call_id: str, command: str) -> dict[str, object]:
    return {
        "role": "assistant",
        "content": [_use(call_id, "execute_command", {"command": command})],
    }


def _calls(messages: list[object]) -> list[ReplayCall]:
    transcript = parse_text(json.dumps(messages, indent=1))
    assert transcript.format == "cline" and transcript.unmatched_results == 0
    return list(transcript.runs[0].calls)


def test_failed_commands_are_failures_and_successes_are_results() -> None:
    failed, passed, killed = _calls(
        [
            _said("<task>\nbuild it\n</task>"),
            _run("a", "npm test"),
            _said("[execute_command for 'npm test'] Result:\nCommand failed with exit code 1.\n"
                  "Output:\n1 failing"),
            _run("b", "ls"),
            _said("[execute_command for 'ls'] Result:\nCommand executed successfully (exit code 0)."
                  "\nOutput:\na.txt"),
            _run("c", "sleep"),
            _said("[execute_command for 'sleep'] Result:\nCommand terminated by signal SIGKILL."),
        ]
    )  # fmt: skip
    assert failed.result is UNDEFINED and str(failed.error).startswith("Command failed with exit")
    assert passed.error is UNDEFINED and str(passed.result).endswith("a.txt")
    assert killed.result is UNDEFINED and "SIGKILL" in str(killed.error)


def test_multi_line_labels_and_the_subagents_label_answer_their_calls() -> None:
    question, agents = _calls(
        [
            _said("<task>\nplan\n</task>"),
            {"role": "assistant", "content": [
                _use("q", "ask_followup_question", {"question": "## Phase 1\n\nDone. Go on?"})]},
            _said("[ask_followup_question for '## Phase 1\n\nDone. Go on?'] Result:\n"
                  "<answer>\nyes\n</answer>"),
            {"role": "assistant", "content": [_use("s", "use_subagents", {"prompt_1": "look"})]},
            _said("[subagents] Result:\nSubagent results:\nTotal: 1"),
        ]
    )  # fmt: skip
    assert question.result == "<answer>\nyes\n</answer>"
    assert str(agents.result).startswith("Subagent results:")


def test_a_labelled_tool_result_block_is_cline_and_its_failure_is_read() -> None:
    (call,) = _calls(
        [
            _said("<task>\nrun\n</task>"),
            _run("a", "make"),
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "a", "call_id": "a",
             "content": "[execute_command for 'make'] Result:\nCommand failed with exit code 2."}]},
        ]
    )  # fmt: skip
    assert call.result is UNDEFINED and "exit code 2" in str(call.error)


ROO_NATIVE = (
    Path(__file__).resolve().parents[1]
    / "data"
    / "transcripts"
    / "cline"
    / "roo-native-api_conversation_history.json"
)


def test_roo_native_tool_errors_are_failures() -> None:
    """Roo Code's native protocol: bare ``tool_result`` blocks, a failure as JSON
    ``{"status": "error", ...}``; the conversation read as plain Anthropic, failures as
    successes."""
    transcript = read_transcript(ROO_NATIVE)
    assert transcript.format == "cline"
    assert transcript.unmatched_results == 0
    read, miss, again, applied, done = transcript.runs[0].calls
    assert read.error is UNDEFINED and isinstance(read.result, str)
    for failed in (miss, again):
        assert failed.result is UNDEFINED
        assert isinstance(failed.error, str) and '"status":"error"' in failed.error
    assert miss.args == again.args
    assert applied.error is UNDEFINED and isinstance(applied.result, str)
    assert done.result is UNDEFINED and done.error is UNDEFINED


@pytest.mark.parametrize(
    "content",
    [
        '{"status": "ok", "message": "done"}',
        '{"status": "error"}',
        "{not json",
        '["status", "error"]',
        "The tool failed",
    ],
)
def test_other_json_results_are_not_roo_failures(content: str) -> None:
    messages = [
        _said("<environment_details>\nx\n</environment_details>"),
        {"role": "assistant", "content": [_use("t1", "read_file", {"path": "a"})]},
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "t1", "content": content}],
        },
    ]
    [call] = _calls(messages)
    assert call.result == content and call.error is UNDEFINED


def test_a_cline_ui_log_is_named_as_such_not_read_as_zero_calls() -> None:
    """``ui_messages.json`` (ClineMessage items) read as OpenAI chat with 0 calls."""
    ui_log = [
        {"ts": 1772619120000, "type": "say", "say": "text", "text": "Rename the key"},
        {
            "ts": 1772619123000,
            "type": "ask",
            "ask": "tool",
            "text": '{"tool":"readFile","path":"src/config.ts"}',
        },
        {"ts": 1772619124000, "type": "say", "say": "api_req_started", "text": "{}"},
    ]
    with pytest.raises(NotATranscript, match=r"api_conversation_history\.json"):
        parse_text(json.dumps(ui_log, indent=1), path="ui_messages.json")
