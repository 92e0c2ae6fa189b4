"""OpenAI Agents SDK: the adapter matrix (matrix_support.SCENARIOS), sync, async and streamed.

Calls of missing tools are answered by the SDK itself (``tool_not_found_behavior=
"return_error_to_model"``); the guard sees them in the model-response hook. Tracing is off.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Callable
from typing import Any

import pytest
from agents import Agent, RunConfig, Runner, function_tool, set_tracing_disabled
from agents.testing import ModelCall, ModelStep, ScriptedModel, assistant_message, function_call
from integration_support import TOOL
from matrix_support import IDS, SCENARIOS, Run, Scenario, Tool, check, make_guard, next_calls

from loopwatch.integrations.openai_agents import guard_agent

set_tracing_disabled(True)

SESSION = "matrix-session"
RUN = RunConfig(group_id=SESSION, tool_not_found_behavior="return_error_to_model")


def _outputs(call: ModelCall) -> list[str]:
    items = call.input if isinstance(call.input, list) else []
    return [
        str(item.get("output"))
        for item in items
        if isinstance(item, dict) and item.get("type") == "function_call_output"
    ]


class MatrixModel(ScriptedModel):
    """Follows ``next_calls`` for the scenario; remembers what it read."""

    def __init__(self, scenario: Scenario) -> None:
        self.scenario = scenario
        self.read: list[str] = []
        self.turn = 0
        self._ids = itertools.count(1)
        super().__init__([ModelStep.respond(self._respond) for _ in range(scenario.turns + 3)])

    def _respond(self, call: ModelCall) -> list[Any]:
        self.read = _outputs(call)
        calls = next_calls(self.scenario, self.read, self.turn)
        self.turn += 1
        if calls is None:
            return [assistant_message("done")]
        return [
            function_call(name, args, call_id=f"call-{next(self._ids)}") for name, args in calls
        ]


async def _streamed(agent: Agent[Any], max_turns: int) -> None:
    """A streamed run, its events read to the end (the tools run as the stream goes)."""
    result = Runner.run_streamed(agent, "go", max_turns=max_turns, run_config=RUN)
    async for _ in result.stream_events():
        pass


def run_scenario(scenario: Scenario, *, asynchronous: bool, streamed: bool = False) -> Run:
    guard, events = make_guard(scenario)
    tool = Tool(scenario, RuntimeError)
    model = MatrixModel(scenario)

    def read_file(path: str) -> str:
        """Read a file."""
        return tool()

    def list_dir(path: str) -> str:
        """List a directory."""
        return tool()

    func: Callable[..., str] = read_file
    if scenario.decorated:
        func = guard.tool(read_file, session_key=SESSION)
    agent: Agent[Any] = Agent(
        name="reader",
        model=model,
        tools=[function_tool(func, name_override=TOOL), function_tool(list_dir)],
    )
    guarded = guard_agent(
        agent,
        guard,
        session_key=SESSION,
        on_critical=scenario.on_critical,  # type: ignore[arg-type]
    )
    max_turns = scenario.turns + 5
    error: BaseException | None = None
    try:
        if streamed:
            asyncio.run(_streamed(guarded, max_turns))
        elif asynchronous:
            asyncio.run(Runner.run(guarded, "go", max_turns=max_turns, run_config=RUN))
        else:
            Runner.run_sync(guarded, "go", max_turns=max_turns, run_config=RUN)
    except Exception as exc:
        error = exc
    return Run(read=list(model.read), runs=tool.runs, events=events, guard=guard, error=error)


@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
@pytest.mark.parametrize("scenario", SCENARIOS, ids=IDS)
def test_matrix(scenario: Scenario, asynchronous: bool) -> None:
    check(scenario, run_scenario(scenario, asynchronous=asynchronous), SESSION)


@pytest.mark.parametrize("scenario", SCENARIOS, ids=IDS)
def test_matrix_streamed(scenario: Scenario) -> None:
    # Runner.run_streamed runs the same guardrails and hooks as Runner.run.
    check(scenario, run_scenario(scenario, asynchronous=True, streamed=True), SESSION)
