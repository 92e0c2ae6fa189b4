"""Codex CLI rollouts: what the ``event_msg`` lines and interrupted turns add to the items.

The sample is hand-built to the shapes of ``codex-rs`` (``RolloutLine``, the persisted
``ExecCommandEnd`` / ``McpToolCallEnd`` / ``TurnAborted`` events, the ``"aborted"`` output
it writes for a call cut off); see ``tests/data/transcripts/SOURCES.md``.
"""

from __future__ import annotations

import json
from pathlib import Path

from loopwatch import UNDEFINED
from loopwatch.transcripts import ReplayCall, parse_text, read_transcript

DATA = Path(__file__).resolve().parents[1] / "data" / "transcripts" / "codex"
SAMPLE = DATA / "rollout-2026-06-11T09-15-02-019e2c71-0000-7000-8000-00000000000a.jsonl"


def _calls() -> dict[str, ReplayCall]:
    transcript = read_transcript(SAMPLE)
    assert transcript.format == "codex"
    assert transcript.unmatched_results == 0
    calls = {call.call_id or "": call for run in transcript.runs for call in run.calls}
    assert len(calls) == 5
    return calls


def test_an_mcp_error_reported_by_its_end_event_is_a_failure() -> None:
    """The output item holds only the text parts; ``isError`` is in ``mcp_tool_call_end``."""
    call = _calls()["call_m1"]
    assert call.tool == "tracker__get_issue"
    assert call.result is UNDEFINED
    assert isinstance(call.error, str) and "401 Unauthorized" in call.error


def test_a_command_output_without_a_header_fails_by_its_exit_code_event() -> None:
    call = _calls()["call_x1"]
    assert call.result is UNDEFINED
    assert call.error == "gh: authentication required\n"


def test_a_call_cut_off_by_an_interrupt_has_no_outcome() -> None:
    """Codex writes ``"aborted"`` as the output of a call the user interrupted."""
    transcript = read_transcript(SAMPLE)
    call = _calls()["call_x2"]
    assert call.result is UNDEFINED and call.error is UNDEFINED
    assert any("never run" in note for note in transcript.notes)


def test_the_header_stays_the_authority_for_a_headed_output() -> None:
    calls = _calls()
    assert calls["call_x3"].error == "Process exited with code 1\n2 failing\n"
    # still running when the call returned: the model was shown a live process, and the
    # exit code the end event reports later is not this call's outcome
    running = calls["call_x4"]
    assert running.error is UNDEFINED
    assert isinstance(running.result, str) and running.result.startswith("Process running")


def _line(kind: str, payload: dict[str, object]) -> str:
    return json.dumps({"timestamp": "2026-06-11T00:00:00Z", "type": kind, "payload": payload})


def test_end_events_for_calls_never_seen_or_without_outcome_change_nothing() -> None:
    lines = [
        _line("session_meta", {"id": "s"}),
        _line("response_item", {"type": "function_call", "name": "x", "call_id": "c1"}),
        _line("event_msg", {"type": "exec_command_end", "call_id": "c1", "exit_code": 1}),
        _line("event_msg", {"type": "exec_command_end", "call_id": "c9", "exit_code": 1}),
        _line("event_msg", {"type": "patch_apply_end", "call_id": ["c1"], "success": False}),
        _line("event_msg", {"type": "mcp_tool_call_end", "call_id": "c1", "result": "Err"}),
    ]
    transcript = parse_text("\n".join(lines))
    [call] = transcript.runs[0].calls
    assert call.result is UNDEFINED and call.error is UNDEFINED


def test_a_patch_that_failed_to_apply_is_a_failure() -> None:
    lines = [
        _line("session_meta", {"id": "s"}),
        _line(
            "response_item",
            {
                "type": "custom_tool_call",
                "name": "apply_patch",
                "input": "*** Begin",
                "call_id": "p",
            },
        ),
        _line("event_msg", {"type": "patch_apply_end", "call_id": "p", "success": False}),
        _line(
            "response_item",
            {"type": "custom_tool_call_output", "call_id": "p", "output": "hunk 1 did not apply"},
        ),
    ]
    [call] = parse_text("\n".join(lines)).runs[0].calls
    assert call.result is UNDEFINED
    assert call.error == "hunk 1 did not apply"
