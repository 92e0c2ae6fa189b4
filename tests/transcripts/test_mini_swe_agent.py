"""mini-swe-agent: every version's message shapes, and failed commands read as failures."""

from __future__ import annotations

import json
from pathlib import Path

from loopwatch import UNDEFINED
from loopwatch.transcripts import ReplayCall, Transcript, parse_text, read_transcript

DATA = Path(__file__).resolve().parents[1] / "data" / "transcripts" / "mini-swe-agent"


def _calls(transcript: Transcript) -> list[ReplayCall]:
    return [call for run in transcript.runs for call in run.calls]


def _document(messages: list[object], fmt: str = "mini-swe-agent-1.1") -> str:
    return json.dumps(
        {"info": {"mini_version": "2.4.6"}, "messages": messages, "trajectory_format": fmt}
    )


def test_v1_non_zero_return_code_is_a_failure() -> None:
    """v1 keeps the return code only in the observation text (real sample)."""
    transcript = read_transcript(DATA / "astropy__astropy-13236.trimmed.traj.json")
    calls = _calls(transcript)
    assert transcript.format == "mini-swe-agent" and len(calls) == 5
    failed = [call for call in calls if call.error is not UNDEFINED]
    assert [call.args for call in failed] == [
        {"command": "pytest astropy/table/tests/test_mixin.py"},
        {"command": "pytest astropy/table/tests/test_mixin.py"},
    ]
    assert all(call.result is UNDEFINED for call in failed)
    assert all(str(call.error).startswith("<returncode>1</returncode>") for call in failed)
    passed = [call for call in calls if call.error is UNDEFINED]
    assert all(str(call.result).startswith("<returncode>0</returncode>") for call in passed)


def test_v2_tool_calling_return_code_is_read_from_extra() -> None:
    """v2 tool calling (real sample): ``extra.returncode`` on the ``tool`` message."""
    transcript = read_transcript(DATA / "v2-toolcall-astropy__astropy-12907.trimmed.traj.json")
    calls = _calls(transcript)
    assert len(calls) == 6 and transcript.unmatched_results == 0
    assert [call.error is not UNDEFINED for call in calls] == [False] * 2 + [True] + [False] * 3
    assert str(calls[2].error).startswith("<returncode>1</returncode>")
    assert calls[-1].result is UNDEFINED  # the submission ends the run: no observation


def test_v2_text_actions_are_the_ones_the_agent_parsed() -> None:
    """The XML config's ``<mswea_bash_command>`` block is no Markdown block: ``extra.actions``
    says what ran."""
    document = _document(
        [
            {"role": "system", "content": "s"},
            {
                "role": "assistant",
                "content": "<mswea_bash_command>ls</mswea_bash_command>",
                "extra": {"actions": [{"command": "ls"}]},
            },
            {"role": "user", "content": "out", "extra": {"returncode": 2}},
            {"role": "user", "content": "format error", "extra": {"interrupt_type": "FormatError"}},
            {
                "role": "assistant",
                "content": "<mswea_bash_command>pwd</mswea_bash_command>",
                "extra": {"actions": [{"command": "pwd"}]},
            },
            {"role": "user", "content": "/", "extra": {"returncode": 0}},
        ]
    )
    first, second = _calls(parse_text(document))
    assert (first.args, first.result, first.error) == ({"command": "ls"}, UNDEFINED, "out")
    assert (second.args, second.result, second.error) == ({"command": "pwd"}, "/", UNDEFINED)


def test_v2_responses_api_function_calls_and_outputs() -> None:
    document = _document(
        [
            {"role": "system", "content": "s"},
            {
                "object": "response",
                "output": [
                    {"type": "reasoning", "summary": []},
                    {"type": "function_call", "call_id": "c1", "name": "bash",
                     "arguments": '{"command": "ls"}'},
                    {"type": "function_call", "call_id": "c2", "name": "bash",
                     "arguments": '{"command": "false"}'},
                ],
                "extra": {"actions": [{"command": "ls", "tool_call_id": "c1"}]},
            },
            {"type": "function_call_output", "call_id": "c1", "output": "a",
             "extra": {"returncode": 0}},
            {"type": "function_call_output", "call_id": "c2", "output": "",
             "extra": {"returncode": 1}},
        ]
    )  # fmt: skip
    transcript = parse_text(document)
    first, second = _calls(transcript)
    assert transcript.format == "mini-swe-agent"
    assert (first.tool, first.args, first.result) == ("bash", {"command": "ls"}, "a")
    assert (second.result, second.error) == (UNDEFINED, "")
    assert first.batch is not None and first.batch == second.batch


def test_an_action_never_executed_has_no_outcome() -> None:
    document = _document(
        [
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [
                    {"id": "c1", "type": "function",
                     "function": {"name": "bash", "arguments": '{"command": "rm -rf x"}'}},
                ],
            },
            {"role": "user", "content": "Command not executed",
             "extra": {"interrupt_type": "UserRejection"}},
            {"role": "tool", "tool_call_id": "c1", "content": "<returncode>-1</returncode>",
             "extra": {"returncode": -1, "exception_info": "action was not executed"}},
        ]
    )  # fmt: skip
    transcript = parse_text(document)
    (call,) = _calls(transcript)
    assert (call.result, call.error) == (UNDEFINED, UNDEFINED)
    assert any("never run" in note for note in transcript.notes)


def test_v1_timeout_message_is_a_failure_and_human_commands_are_left_out() -> None:
    document = _document(
        [
            {"role": "assistant", "content": "THOUGHT: run\n\n```bash\nsleep 999\n```"},
            {"role": "user", "content": "The last command <command>sleep 999</command> timed "
             "out and has been killed.\nThe output of the command was:\n <output>\n\n</output>"},
            {"role": "user", "content": "User command: \n```bash\nls\n```",
             "extra": {"actions": [{"command": "ls"}]}},
            {"role": "user", "content": "<returncode>0</returncode>", "extra": {"returncode": 0}},
        ],
        fmt="mini-swe-agent-1",
    )  # fmt: skip
    (call,) = _calls(parse_text(document))
    assert call.args == {"command": "sleep 999"}
    assert call.result is UNDEFINED and "timed out" in str(call.error)
