"""tau-bench ReAct / Act runs: the actions are JSON in the assistant text (sample hand-built).

Shape: sierra-research/tau-bench ``tau_bench/agents/chat_react_agent.py`` (the text after
the last ``Action:`` parsed as ``{"name", "arguments"}``; ``"API output: "`` before what a
tool returned) and ``run.py``'s result list; see ``tests/data/transcripts/SOURCES.md``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from loopwatch import UNDEFINED
from loopwatch.transcripts import parse_text, read_transcript
from loopwatch.transcripts.openai_chat import react_action

SAMPLE = Path(__file__).resolve().parents[1] / "data" / "transcripts" / "tau-bench"


def test_react_actions_are_calls_answered_by_the_next_api_output() -> None:
    transcript = read_transcript(SAMPLE / "react-retail.json")
    assert transcript.format == "tau-bench"  # it read as 0 calls
    [run] = transcript.runs
    assert run.label == "task-7-trial0"
    calls = run.calls
    assert [call.tool for call in calls] == [
        "find_user_id_by_email",
        "find_user_id_by_email",
        "find_user_id_by_name_zip",
        "list_orders",
        "get_order_details",
    ]
    assert calls[0].args == {"email": "mia.garcia@example.com"}
    # the environment's failures, behind the API output prefix
    assert calls[0].error == calls[1].error == "Error: user not found"
    assert calls[0].result is UNDEFINED
    assert calls[3].error == "Unknown action list_orders"
    assert calls[2].result == "mia_garcia_4516" and calls[2].error is UNDEFINED
    assert isinstance(calls[4].result, str) and calls[4].result.startswith('{"order_id"')


@pytest.mark.parametrize(
    "content",
    [
        'Thought:\nreply\nAction:\n{"name": "respond", "arguments": {"content": "hi"}}',
        "Thought:\nreply\nAction:\nWhich order?",
        'Action:\n["get_order_details"]',
        'Action:\n{"arguments": {}}',
        None,
        "no action here",
    ],
)
def test_replies_and_unparsed_actions_are_not_calls(content: object) -> None:
    assert react_action(content) is None


@given(st.text(max_size=40), st.text(max_size=20))
def test_any_assistant_text_reads_without_raising(thought: str, tail: str) -> None:
    task = {
        "task_id": 1,
        "traj": [
            {"role": "assistant", "content": f"Thought:\n{thought}\nAction:\n{tail}"},
            {"role": "user", "content": "API output: " + tail},
        ],
    }
    transcript = parse_text(json.dumps([task]))
    assert transcript.format == "tau-bench"
