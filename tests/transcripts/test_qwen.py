"""Qwen Code chat recordings (sample in tests/data/transcripts/qwen-code/, built to
``ChatRecord`` in QwenLM/qwen-code ``chatRecordingService.ts``; see SOURCES.md)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from loopwatch import UNDEFINED
from loopwatch.cli import main
from loopwatch.transcripts import (
    Compaction,
    TranscriptError,
    parse_text,
    parse_transcript,
    read_transcript,
)

SID = "8d0f1c9e-3b6a-4c52-9e1d-7a4b2c8e5f01"
SAMPLE = Path(__file__).resolve().parents[1] / "data" / "transcripts" / "qwen-code" / f"{SID}.jsonl"
CLAUDE = (
    Path(__file__).resolve().parents[1]
    / "data"
    / "transcripts"
    / "claude_code"
    / "subagent-2.1.220-consult-architect.jsonl"
)


def _lines() -> list[dict[str, object]]:
    return [json.loads(line) for line in SAMPLE.read_text().splitlines() if line.strip()]


def _text(records: list[dict[str, object]]) -> str:
    return "".join(json.dumps(r) + "\n" for r in records)


def test_a_recording_is_read_as_qwen_code_with_its_outcomes() -> None:
    transcript = read_transcript(SAMPLE)
    assert transcript.format == "qwen-code"
    main_run, agent = transcript.runs
    assert (main_run.label, agent.label) == (SID, "explore-7f3c")
    assert [c.tool for c in main_run.calls] == [
        "run_shell_command",
        "read_file",
        "edit",
        "write_file",
        "run_shell_command",
        "run_shell_command",
    ]
    shell, read, edit, outside, cancelled, passing = main_run.calls
    # Exit Code: 1 in the text: a failure, the PGID line (new every run) dropped
    assert shell.result is UNDEFINED and "Exit Code: 1" in str(shell.error)
    assert "Process Group PGID" not in str(shell.error)
    assert shell.batch is not None and shell.batch == read.batch
    assert (shell.tokens, read.tokens) == (4604, 4604)
    assert isinstance(read.result, dict) and read.error is UNDEFINED
    assert edit.error is UNDEFINED
    assert str(outside.error).startswith("File path must be within")
    assert cancelled.result is UNDEFINED and cancelled.error is UNDEFINED
    assert isinstance(passing.result, dict) and passing.error is UNDEFINED
    assert "PGID" not in str(passing.result)
    assert [c.tool for c in agent.calls] == ["grep_search"]
    assert any(isinstance(e, Compaction) for e in main_run.events)
    assert transcript.unmatched_results == 0 and transcript.skipped_calls == 0
    assert any("cancelled or never run" in note for note in transcript.notes)


def test_claude_code_sessions_still_read_as_claude_code() -> None:
    assert read_transcript(CLAUDE).format == "claude-code"


def test_a_recording_whose_first_records_name_no_qwen_field_is_still_qwen() -> None:
    records = _lines()
    bare = {k: v for k, v in records[0].items() if k != "message"}
    bare["message"] = {"role": "user"}  # no parts: reads as a Claude Code record alone
    transcript = parse_text(_text([bare, *records[2:]]), path="s.jsonl")
    assert transcript.format == "qwen-code" and transcript.call_count == 7


def test_a_response_without_its_call_is_an_unmatched_result() -> None:
    records = _lines()
    del records[2]  # the assistant record of the first two calls
    transcript = parse_text(_text(records), path="s.jsonl")
    assert transcript.unmatched_results == 2


def test_a_response_without_an_id_pairs_by_call_id_then_name() -> None:
    records = _lines()
    for record in records[3:5]:
        message = record["message"]
        assert isinstance(message, dict)
        del message["parts"][0]["functionResponse"]["id"]
    records[4].pop("toolCallResult")
    shell, read, *_ = parse_text(_text(records), path="s.jsonl").runs[0].calls
    assert shell.error is not UNDEFINED and isinstance(read.result, dict)


def test_a_rewind_is_noted_and_earlier_calls_still_replayed() -> None:
    records = _lines()
    rewind = dict(records[1], subtype="rewind", systemPayload={"truncatedCount": 2})
    transcript = parse_text(_text([*records, rewind]), path="s.jsonl")
    assert transcript.call_count == 7
    assert any("rewound 1 time" in note for note in transcript.notes)


def test_a_call_without_a_name_names_its_line() -> None:
    records = _lines()
    message = records[5]["message"]
    assert isinstance(message, dict)
    message["parts"][0]["functionCall"]["name"] = None
    with pytest.raises(TranscriptError, match="a functionCall needs a string"):
        parse_text(_text(records), path="s.jsonl")


def test_scan_by_hand(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["scan", str(SAMPLE)]) == 0
    assert "qwen-code" in capsys.readouterr().out


@settings(max_examples=60, deadline=None)
@given(
    cut=st.floats(min_value=0.0, max_value=1.0),
    flips=st.lists(st.tuples(st.floats(0.0, 1.0), st.integers(0, 255)), max_size=3),
)
def test_a_damaged_recording_is_read_or_reported(
    cut: float, flips: list[tuple[float, int]]
) -> None:
    data = bytearray(SAMPLE.read_bytes())
    for where, byte in flips:
        data[int(where * (len(data) - 1))] = byte
    try:
        transcript = parse_transcript(bytes(data[: int(cut * len(data))]), path="s.jsonl")
    except TranscriptError:
        return
    if not flips:
        assert transcript.call_count <= 7


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner),
    max_leaves=10,
)


@settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.fixed_dictionaries(
            {
                "uuid": st.just("u"),
                "sessionId": st.just(SID),
                "type": st.sampled_from(["assistant", "tool_result", "system", "user"]) | _JSON,
                "message": st.fixed_dictionaries(
                    {
                        "parts": st.lists(
                            st.fixed_dictionaries(
                                {},
                                optional={
                                    "functionCall": st.fixed_dictionaries(
                                        {"name": st.sampled_from(["ls", "cat"])},
                                        optional={"id": st.sampled_from(["a", "b"]), "args": _JSON},
                                    )
                                    | _JSON,
                                    "functionResponse": st.fixed_dictionaries(
                                        {},
                                        optional={
                                            "id": st.sampled_from(["a", "b"]) | _JSON,
                                            "name": _JSON,
                                            "response": _JSON,
                                        },
                                    )
                                    | _JSON,
                                },
                            )
                            | _JSON,
                            max_size=3,
                        )
                    }
                )
                | _JSON,
                "toolCallResult": _JSON,
            }
        ),
        min_size=1,
        max_size=6,
    )
)
def test_any_records_are_read_or_reported(records: list[dict[str, object]]) -> None:
    try:
        transcript = parse_text(_text(records), path="s.jsonl", format="qwen-code")
    except TranscriptError:
        return
    calls = 0
    for record in records:
        message = record.get("message")
        parts = message.get("parts") if isinstance(message, dict) else None
        if record.get("type") == "assistant" and isinstance(parts, list):
            calls += sum(
                1 for p in parts if isinstance(p, dict) and isinstance(p.get("functionCall"), dict)
            )
    if calls:
        assert transcript.call_count > 0  # never a silent all-clear
