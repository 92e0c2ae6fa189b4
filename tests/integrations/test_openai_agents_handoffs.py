"""OpenAI Agents SDK: a guarded agent's handoff targets are guarded too.

A triage agent with a scripted model hands off to a specialist whose scripted model loops
on its tool. ``guard_agent`` of the triage agent alone must guard the specialist's tools
(the SDK hands the run to the target agent as it is), whether the handoff is the agent
itself or a ``handoff(agent)`` object, cycles included; one ``tool_error_formatter`` of the
root covers every agent of the run.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from agents import Agent, FunctionTool, Handoff, RunConfig, Runner, handoff, set_tracing_disabled
from agents.testing import ModelStep, ScriptedModel, assistant_message, function_call
from integration_support import BLOCK_AT, CONFIG, CRITICAL, Counter, make_guard
from test_openai_agents import (
    MISSING,
    MISSING_RUN,
    LoopingModel,
    MissingToolModel,
    make_agent,
)

from loopwatch import LoopGuard
from loopwatch import messages as texts
from loopwatch.integrations.openai_agents import GUARDRAIL_NAME, guard_agent, tool_error_formatter

set_tracing_disabled(True)

SESSION = "conversation-1"
RUN = RunConfig(group_id=SESSION)
MAX_TURNS = 60


def triage(target: Agent[Any] | Handoff[Any, Any], transfer: str) -> Agent[Any]:
    """An agent that hands off at once, then answers when the run comes back."""
    model = ScriptedModel(
        [
            [function_call(transfer, {}, call_id="handoff-1")],
            *[ModelStep.respond(lambda _c: [assistant_message("back")]) for _ in range(3)],
        ]
    )
    return Agent(name="triage", model=model, handoffs=[target])


def _guarded(tool: Any) -> bool:
    return isinstance(tool, FunctionTool) and any(
        g.name == GUARDRAIL_NAME for g in tool.tool_input_guardrails or ()
    )


async def run(agent: Agent[Any], run_config: RunConfig = RUN) -> Any:
    return await Runner.run(agent, "go", max_turns=MAX_TURNS, run_config=run_config)


@pytest.mark.parametrize("wrapped", [False, True], ids=["agent", "handoff-object"])
async def test_the_tools_of_a_handoff_target_are_guarded(wrapped: bool) -> None:
    guard, events = make_guard()
    counter, model = Counter(), LoopingModel()
    specialist = make_agent(model, counter)
    target: Any = handoff(specialist) if wrapped else specialist
    result = await run(guard_agent(triage(target, "transfer_to_reader"), guard))
    assert result.last_agent.name == "reader"
    assert _guarded(result.last_agent.tools[0])
    assert counter.calls == BLOCK_AT - 1
    # The specialist's model reads the handoff's output first, then its tool's.
    assert model.read[0] == '{"assistant": "reader"}'
    assert model.read[BLOCK_AT] == CRITICAL
    assert [e.type for e in events][-1] == "tool.execution.blocked"
    # The originals are not changed.
    assert not _guarded(specialist.tools[0])
    if wrapped:
        assert target._agent_ref() is specialist


async def test_a_handoff_cycle_is_guarded_once_per_agent() -> None:
    guard, _ = make_guard()
    a = Agent(name="a")
    b = Agent(name="b", handoffs=[a])
    a.handoffs = [b, handoff(b)]
    guarded = guard_agent(a, guard)
    b_copy, b_handoff = guarded.handoffs
    assert isinstance(b_copy, Agent) and b_copy is not b
    assert b_copy.handoffs == [guarded]  # back to the guarded root, not the original
    assert isinstance(b_handoff, Handoff) and b_handoff._agent_ref is not None
    assert b_handoff._agent_ref() is b_copy
    assert a.handoffs[0] is b and b.handoffs == [a]  # the originals are untouched


async def test_an_agent_already_guarded_is_kept_as_it_is() -> None:
    guard, _ = make_guard()
    own = guard_agent(make_agent(LoopingModel(), Counter()), guard, agent_id="reader")
    root = guard_agent(triage(own, "transfer_to_reader"), guard)
    assert root.handoffs == [own]
    (tool,) = own.tools
    assert [g.name for g in tool.tool_input_guardrails or ()] == [GUARDRAIL_NAME]


async def test_a_dynamic_handoff_target_is_guarded_when_it_is_handed_the_run() -> None:
    guard, _ = make_guard()
    counter, model = Counter(), LoopingModel()
    specialist = make_agent(model, counter)

    async def invoke(_context: Any, _arguments: str) -> Agent[Any]:
        return specialist  # chosen at run time: not reachable before the run

    dynamic = Handoff(
        tool_name="transfer_to_reader",
        tool_description="",
        input_json_schema={},
        on_invoke_handoff=invoke,
        agent_name="reader",
    )
    result = await run(guard_agent(triage(dynamic, "transfer_to_reader"), guard))
    assert _guarded(result.last_agent.tools[0])
    assert counter.calls == BLOCK_AT - 1


class _TransferThenMissing(ScriptedModel):
    def __init__(self) -> None:
        super().__init__([[function_call("transfer_to_reader", {}, call_id="h")]])


@pytest.mark.parametrize("pre_guarded", [False, True], ids=["one-guard_agent", "guarded-first"])
async def test_the_roots_formatter_answers_for_every_agent_of_the_run(pre_guarded: bool) -> None:
    # A handoff target's model calls a missing tool: its model-response hook decides the
    # call, and the formatter of the root (the only one a RunConfig holds) shows the model
    # the block.
    guard, _ = make_guard(config={**CONFIG, "unknownToolThreshold": 12})
    model = MissingToolModel()
    specialist = make_agent(LoopingModel(), Counter()).clone(model=model)
    if pre_guarded:
        specialist = guard_agent(specialist, guard, session_key=SESSION)
    root = guard_agent(
        Agent(name="triage", model=_TransferThenMissing(), handoffs=[specialist]),
        guard,
        session_key=SESSION,
    )
    config = dataclasses.replace(MISSING_RUN, tool_error_formatter=tool_error_formatter(root))
    result = await run(root, config)
    assert result.final_output == "stopping"
    assert model.read[1] == f"Tool '{MISSING}' not found."  # after the handoff's output
    assert model.read[BLOCK_AT] == texts.UNKNOWN_TOOL_CRITICAL.format(name=MISSING, count=12)


async def test_the_agent_given_is_guarded_even_when_guarded_already() -> None:
    # As before handoffs were followed: guard_agent of a guarded agent adds its guardrails
    # (only handoff targets guarded already are kept as they are).
    first, _ = make_guard()
    second, _ = make_guard()
    once = guard_agent(make_agent(LoopingModel(), Counter()), first)
    twice = guard_agent(once, second)
    assert twice is not once
    (tool,) = twice.tools
    assert [g.name for g in tool.tool_input_guardrails or ()] == [GUARDRAIL_NAME] * 2


async def test_the_mcp_server_tools_of_a_handoff_target_are_guarded() -> None:
    import pathlib
    import sys

    from agents.mcp import MCPServerStdio

    from loopwatch.testing import loop_script, openai_agents_model

    server_script = pathlib.Path(__file__).with_name("mcp_echo_server.py")
    params: Any = {"command": sys.executable, "args": [str(server_script)]}
    async with MCPServerStdio(params=params, cache_tools_list=True) as server:
        specialist = Agent(
            name="reader",
            model=openai_agents_model(loop_script(args={"path": "notes.txt"}, times=25)),
            mcp_servers=[server],
        )
        guarded = guard_agent(
            triage(specialist, "transfer_to_reader"),
            LoopGuard({"enabled": True}),
            session_key="thread-1",
        )
        result = await Runner.run(guarded, "go", max_turns=40)
        ran = await server.call_tool("stats", {})
    assert result.last_agent.name == "reader"
    assert ran.content[0].text == "20"  # type: ignore[union-attr]  (25 unguarded)
