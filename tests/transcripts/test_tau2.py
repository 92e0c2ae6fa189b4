"""tau2-bench: results documents, simulation files and lists, voice ticks, user tools."""

from __future__ import annotations

import json
from pathlib import Path

from loopwatch import UNDEFINED
from loopwatch.transcripts import ReplayCall, Transcript, parse_text, read_transcript

DATA = Path(__file__).resolve().parents[1] / "data" / "transcripts" / "tau2-bench"


def _calls(transcript: Transcript) -> list[ReplayCall]:
    return [call for run in transcript.runs for call in run.calls]


def _simulation(messages: list[object], task_id: str = "7") -> dict[str, object]:
    return {
        "id": "s",
        "task_id": task_id,
        "trial": 0,
        "termination_reason": "user_stop",
        "messages": messages,
    }


def test_results_document_is_one_run_a_simulation_with_failures_and_batches() -> None:
    """Real sample (``Results`` with two simulations)."""
    transcript = read_transcript(DATA / "whissle-airline.first-two.json")
    assert transcript.format == "tau2-bench" and transcript.unmatched_results == 0
    assert [run.label for run in transcript.runs] == ["task-9-trial0", "task-14-trial0"]
    assert [len(run.calls) for run in transcript.runs] == [4, 6]
    (failed,) = [call for call in _calls(transcript) if call.error is not UNDEFINED]
    assert (failed.tool, failed.args) == ("get_reservation_details", {"reservation_id": "IFOYWZ"})
    assert failed.error == "Error: Reservation IFOYWZ not found" and failed.result is UNDEFINED
    searches = [call for call in transcript.runs[1].calls if call.tool == "search_direct_flight"]
    assert len(searches) == 3 and len({call.batch for call in searches}) == 1
    assert searches[0].batch is not None
    assert all(isinstance(call.result, str) for call in searches)


def test_a_simulation_file_a_list_and_the_dataset_example_are_read() -> None:
    messages = [
        {"role": "assistant", "content": None,
         "tool_calls": [{"id": "a", "name": "get_order", "arguments": {"id": 1},
                         "requestor": "assistant"}]},
        {"role": "tool", "id": "a", "content": "{}", "requestor": "assistant", "error": False},
    ]  # fmt: skip
    one = _simulation(messages)
    for document in (one, [one, _simulation(messages, "8")], {"task": {}, "simulation_run": one}):
        transcript = parse_text(json.dumps(document, indent=1))
        assert transcript.format == "tau2-bench"
        call = _calls(transcript)[0]
        assert (call.tool, call.args, call.result, call.call_id) == (
            "get_order",
            {"id": 1},
            "{}",
            "a",
        )


def test_user_tool_calls_are_left_out_with_a_note() -> None:
    """In the telecom domain the simulated user runs tools on its phone: not the agent's."""
    document = _simulation(
        [
            {"role": "user", "content": None,
             "tool_calls": [{"id": "u", "name": "toggle_airplane_mode", "arguments": {},
                             "requestor": "user"}]},
            {"role": "tool", "id": "u", "content": "ok", "requestor": "user", "error": False},
            {"role": "assistant", "content": None,
             "tool_calls": [{"id": "a", "name": "get_line", "arguments": {}}]},
            {"role": "tool", "tool_messages": [
                {"role": "tool", "id": "a", "content": "Error: no line", "error": True}]},
        ]
    )  # fmt: skip
    transcript = parse_text(json.dumps(document))
    (call,) = _calls(transcript)
    assert (call.tool, call.error) == ("get_line", "Error: no line")
    assert transcript.unmatched_results == 0
    assert transcript.notes == ("1 tool call of the simulated user left out (not the agent's)",)


def test_voice_ticks_are_read_when_messages_were_not_stored() -> None:
    document = {
        "id": "s",
        "task_id": "1",
        "termination_reason": "user_stop",
        "messages": None,
        "ticks": [
            {"tick_id": 0, "agent_tool_calls": [{"id": "a", "name": "lookup", "arguments": {}}]},
            {"tick_id": 1, "agent_tool_results": [{"id": "a", "content": "x", "error": False}]},
        ],
    }
    (call,) = _calls(parse_text(json.dumps(document)))
    assert (call.tool, call.result) == ("lookup", "x")
