"""pydantic-ai: the adapter matrix (matrix_support.SCENARIOS), sync, async and streamed."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from integration_support import TOOL
from matrix_support import IDS, OTHER, SCENARIOS, Run, Scenario, Tool, check, make_guard, next_calls
from pydantic_ai import Agent, ModelRetry
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, DeltaToolCall, FunctionModel
from pydantic_ai.usage import UsageLimits

from loopwatch.integrations.pydantic_ai import LoopGuardCapability

SESSION = "matrix-session"
LIMITS = UsageLimits(request_limit=200)
#: Kinds of request parts that answer a tool call (results, failures, retry prompts).
ANSWERS = ("tool-return", "retry-prompt", "retry-feedback")


def _answer_text(part: Any) -> str:
    render = getattr(part, "model_response_str", None)
    if render is not None:
        try:
            return str(render(wrap_if_error=False))
        except TypeError:
            return str(render())
    return str(part.content)


async def _streamed(agent: Agent[None, str]) -> None:
    """A run through ``run_stream_events``, read to the end."""
    async with agent.run_stream_events("go", usage_limits=LIMITS) as stream:
        async for _ in stream:
            pass


def run_scenario(scenario: Scenario, *, asynchronous: bool, streamed: bool = False) -> Run:
    guard, events = make_guard(scenario)
    tool = Tool(scenario, ModelRetry)
    read: list[str] = []
    ids = itertools.count(1)

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        read[:] = [
            _answer_text(part)
            for message in messages
            if isinstance(message, ModelRequest)
            for part in message.parts
            if part.part_kind in ANSWERS
        ]
        turn = sum(
            isinstance(m, ModelResponse) and any(isinstance(p, ToolCallPart) for p in m.parts)
            for m in messages
        )
        calls = next_calls(scenario, read, turn)
        if calls is None:
            return ModelResponse(parts=[TextPart("done")])
        return ModelResponse(
            parts=[ToolCallPart(name, args, f"call-{next(ids)}") for name, args in calls]
        )

    async def stream(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[Any]:
        response = model(messages, info)
        calls = [part for part in response.parts if isinstance(part, ToolCallPart)]
        if not calls:
            yield "done"
            return
        yield {
            i: DeltaToolCall(c.tool_name, c.args_as_json_str(), tool_call_id=c.tool_call_id)
            for i, c in enumerate(calls)
        }

    capability = LoopGuardCapability(
        guard,
        session_key=SESSION,
        on_critical=scenario.on_critical,  # type: ignore[arg-type]
    )
    agent: Agent[None, str] = Agent(
        FunctionModel(model, stream_function=stream), capabilities=[capability], retries=20
    )

    def read_file(path: str) -> str:
        """Read a file."""
        return tool()

    def list_dir(path: str) -> str:
        """List a directory."""
        return tool()

    func: Callable[..., str] = read_file
    if scenario.decorated:
        func = guard.tool(read_file, session_key=SESSION)
    agent.tool_plain(name=TOOL)(func)
    agent.tool_plain(name=OTHER)(list_dir)

    error: BaseException | None = None
    try:
        if streamed:
            asyncio.run(_streamed(agent))
        elif asynchronous:
            asyncio.run(agent.run("go", usage_limits=LIMITS))
        else:
            agent.run_sync("go", usage_limits=LIMITS)
    except Exception as exc:
        error = exc
    return Run(read=list(read), runs=tool.runs, events=events, guard=guard, error=error)


@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
@pytest.mark.parametrize("scenario", SCENARIOS, ids=IDS)
def test_matrix(scenario: Scenario, asynchronous: bool) -> None:
    check(scenario, run_scenario(scenario, asynchronous=asynchronous), SESSION)


@pytest.mark.parametrize("scenario", SCENARIOS, ids=IDS)
def test_matrix_streamed(scenario: Scenario) -> None:
    # run_stream_events runs the same capability hooks as run.
    check(scenario, run_scenario(scenario, asynchronous=True, streamed=True), SESSION)
