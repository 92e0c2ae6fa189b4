"""OpenHands V0 file edits that fail (sample hand-built; the shape is in the real sample).

OpenHands' editor answers a failed ``str_replace`` / ``view`` with an ``edit`` or ``read``
observation whose content opens with ``ERROR:`` (``_execute_file_editor`` in the runtime's
action execution server), as the real Multi-SWE-bench instance in
``openhands/output.jsonl`` shows; see ``tests/data/transcripts/SOURCES.md``.
"""

from __future__ import annotations

import json
from pathlib import Path

from loopwatch import UNDEFINED
from loopwatch.replay import replay_run
from loopwatch.transcripts import ReplayCall, parse_text, read_transcript

DATA = Path(__file__).resolve().parents[1] / "data" / "transcripts" / "openhands"


def _calls(name: str) -> list[ReplayCall]:
    transcript = read_transcript(DATA / name)
    assert transcript.format == "openhands"
    assert transcript.unmatched_results == 0
    return [call for run in transcript.runs for call in run.calls]


def test_a_failed_edit_and_a_refused_view_are_failures() -> None:
    read, edit, retry, cat, fixed, missing, _unknown, finish = _calls(
        "v0-failed-edit-trajectory.json"
    )
    assert read.result is UNDEFINED
    assert isinstance(read.error, str) and read.error.startswith("ERROR:\nInvalid `view_range`")
    for failed in (edit, retry):
        assert failed.result is UNDEFINED
        assert isinstance(failed.error, str) and "No replacement was performed" in failed.error
    assert isinstance(missing.error, str) and missing.error.startswith("Invalid `path`")
    assert fixed.error is UNDEFINED and isinstance(fixed.result, str)
    assert cat.error is UNDEFINED and finish.result is UNDEFINED


def test_the_retried_edit_is_the_same_call_whatever_the_model_thought() -> None:
    """``thought`` is the model's text before the call, new on each try: not an argument."""
    _read, edit, retry, *_ = _calls("v0-failed-edit-trajectory.json")
    assert edit.args == retry.args
    assert isinstance(edit.args, dict) and "thought" not in edit.args
    assert edit.error == retry.error


def test_the_real_sample_failed_edit_is_a_failure() -> None:
    """Multi-SWE-bench ponylang__ponyc-4595, event 28: it read as a success."""
    edits = [call for call in _calls("output.jsonl") if call.tool == "edit"]
    assert isinstance(edits[0].error, str) and edits[0].error.startswith("ERROR:\nNo replacement")
    assert edits[0].result is UNDEFINED
    assert edits[1].error is UNDEFINED


def test_a_run_observation_printing_error_is_not_an_editor_failure() -> None:
    events = [
        {"id": 1, "source": "agent", "action": "run", "args": {"command": "grep ERROR log"}},
        {"id": 2, "cause": 1, "observation": "run", "content": "ERROR:\nboom", "extras": {}},
    ]
    [call] = parse_text(json.dumps(events)).runs[0].calls
    assert call.result == "ERROR:\nboom" and call.error is UNDEFINED


def test_replay_sees_the_failed_edits() -> None:
    transcript = read_transcript(DATA / "v0-failed-edit-trajectory.json")
    replay = replay_run(transcript.runs[0])
    assert len(replay.decisions) == 8


def test_a_call_of_a_tool_that_does_not_exist_is_rebuilt_from_its_error() -> None:
    """OpenHands writes no action for it, only an ``error`` observation without a cause."""
    transcript = read_transcript(DATA / "v0-failed-edit-trajectory.json")
    unknown = transcript.runs[0].calls[6]
    assert unknown.tool == "view_file" and unknown.args == {}
    assert isinstance(unknown.error, str) and "is not registered" in unknown.error
    assert any("rebuilt from results" in note for note in transcript.notes)
    other = [{"id": 1, "source": "agent", "observation": "error", "content": "Boom"}]
    assert parse_text(json.dumps(other)).call_count == 0
