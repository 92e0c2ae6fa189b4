"""The matrix's expected figures are what the core gives for the same calls."""

from __future__ import annotations

import pytest
from framework_matrix import (
    BY_NAME,
    SCENARIOS,
    SINGLE,
    Scenario,
    Tools,
    blocks,
    check_answers,
    drive_batches,
    make_guard,
    reference_calls,
)

from loopwatch.testing import LoopScript, drive, loop_script


def test_every_row_has_a_reference() -> None:
    assert {s.name for s in SCENARIOS} - {s.name for s in SINGLE} == {"recover", "parallel"}


@pytest.mark.parametrize("scenario", SINGLE, ids=lambda s: s.name)
def test_the_matrix_matches_drive(scenario: Scenario) -> None:
    guard, events = make_guard()
    decisions = drive(guard, reference_calls(scenario))
    ran = sum(1 for d in decisions if d.tool_result is None)
    if scenario.name == "unknown":
        ran = 0  # drive "runs" the missing tool; a framework cannot
    assert ran == scenario.executions
    assert sum(1 for e in events if e.type == "tool.execution.blocked") == scenario.blocks
    emitted = [i for i, d in enumerate(decisions) if d.action == "warn" and d.emitted]
    if scenario.warned_at is not None:
        assert emitted[0] == scenario.warned_at
        assert decisions[scenario.warned_at].verdict.message == scenario.warning


def test_the_parallel_row_matches_before_batch() -> None:
    scenario = BY_NAME["parallel"]
    guard, events = make_guard()
    read = drive_batches(guard, scenario)
    tools = Tools()
    tools.runs["read_file"] = sum(1 for text in read if text.startswith("the same text"))
    check_answers(scenario, read, tools, events, None)
    # Decided one call at a time, the same calls give the repeat row's figures.
    guard, events = make_guard()
    decisions = drive(guard, reference_calls(scenario))
    assert sum(1 for d in decisions if d.tool_result is None) == BY_NAME["repeat"].executions
    assert blocks(events) == BY_NAME["repeat"].blocks


def test_loop_script_cycles_stops_and_answers() -> None:
    script = LoopScript(calls=(("a", {"x": 1}), ("b", {})), times=3, stop_on="STOP")
    assert script.next_call([]) == ("a", {"x": 1})
    assert script.next_call(["r"]) == ("b", {})
    assert script.next_call(["r", "r"]) == ("a", {"x": 1})
    assert script.next_call(["r", "r", "r"]) is None
    assert script.next_call(["r", "please STOP now"]) is None
    assert loop_script("t", {"p": 1}, times=1).next_call([]) == ("t", {"p": 1})
    assert script.next_calls(["r"]) == [("b", {})]
    assert script.next_calls(["r"] * 3) == []


def test_loop_script_sends_several_calls_a_turn() -> None:
    script = LoopScript(calls=(("a", {}), ("b", {})), times=5, per_turn=2)
    assert script.next_calls([]) == [("a", {}), ("b", {})]
    assert script.next_calls(["r", "r"]) == [("a", {}), ("b", {})]
    assert script.next_calls(["r"] * 4) == [("a", {})]  # never past ``times``
    assert script.next_calls(["r"] * 5) == []
    assert loop_script(per_turn=3).next_calls([]) == [loop_script().next_call([])] * 3


def test_loop_script_is_validated() -> None:
    with pytest.raises(ValueError, match="at least one call"):
        LoopScript(calls=())
    with pytest.raises(ValueError, match="times"):
        LoopScript(times=-1)
    with pytest.raises(ValueError, match="per_turn"):
        LoopScript(per_turn=0)
