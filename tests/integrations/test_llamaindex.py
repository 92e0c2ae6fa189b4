"""LlamaIndex: a real ``FunctionAgent`` workflow with a scripted offline function-calling LLM."""

from __future__ import annotations

from typing import Any

import pytest
from framework_matrix import (
    BY_NAME,
    FAILURE,
    SINGLE,
    Scenario,
    Tools,
    blocks,
    check_answers,
    make_guard,
)
from llama_index.core.agent.workflow import AgentWorkflow, FunctionAgent
from llama_index.core.tools import FunctionTool
from workflows import Context

from loopwatch import LoopDetectedError
from loopwatch.integrations.llamaindex import SESSION_STORE_KEY, guard_agent, scripted_llm
from loopwatch.testing import LoopScript

# The workflow inspects its agent's members on every run, tripping pydantic's deprecations.
pytestmark = pytest.mark.filterwarnings("ignore::pydantic.warnings.PydanticDeprecationWarning")


def make_agent(script: LoopScript, tools: Tools, read: list[Any], **kw: Any) -> FunctionAgent:
    functions = [
        FunctionTool.from_defaults(fn=tools.read_file, name="read_file", description="Read"),
        FunctionTool.from_defaults(fn=tools.list_dir, name="list_dir", description="List"),
        FunctionTool.from_defaults(fn=tools.flaky_read, name="flaky_read", description="Read"),
    ]
    return FunctionAgent(tools=functions, llm=scripted_llm(script, read), **kw)


async def run(agent: FunctionAgent, ctx: Context | None = None) -> str:
    return str(await agent.run(user_msg="Summarise notes.txt", max_iterations=100, ctx=ctx))


# The recover and parallel rows. The workflow runs the calls of one turn as concurrent
# call_tool steps; the adapter admits them together from take_step, so the parallel row
# gives the batch figures (18 runs, 42 blocks). Agent workflows run only asynchronously.
@pytest.mark.parametrize(
    "scenario", [BY_NAME["recover"], BY_NAME["parallel"]], ids=lambda s: s.name
)
async def test_the_matrix_recover_and_parallel(scenario: Scenario) -> None:
    guard, events = make_guard()
    tools = Tools()
    read: list[Any] = []
    agent = guard_agent(
        make_agent(scenario.script, tools, read),
        guard,
        session_key="thread-1",
        on_critical=scenario.on_critical,  # type: ignore[arg-type]
    )
    error: BaseException | None = None
    try:
        assert await run(agent) == "done"
    except LoopDetectedError as exc:
        error = exc
    check_answers(scenario, [str(r) for r in read], tools, events, error)
    ids = {r.tool_call_id for r in guard.history(session_key="thread-1")}
    assert len(ids) == scenario.executions and None not in ids  # each call kept its own id


@pytest.mark.parametrize("scenario", SINGLE, ids=lambda s: s.name)
async def test_the_matrix(scenario: Scenario) -> None:
    guard, events = make_guard()
    tools = Tools()
    read: list[Any] = []
    agent = guard_agent(make_agent(scenario.script, tools, read), guard, session_key="thread-1")
    assert await run(agent) == "done"

    assert len(read) == 60
    assert tools.total == scenario.executions
    assert blocks(events) == scenario.blocks
    if scenario.warned_at is not None:
        assert read[scenario.warned_at].endswith(str(scenario.warning))
        assert "WARNING" not in read[scenario.warned_at - 1]
    if scenario.blocked_message is not None:
        assert read[-1] == scenario.blocked_message
    history = guard.history(session_key="thread-1")
    if scenario.name == "unknown":
        assert [r.unknown_tool_name for r in history] == ["open_file"] * 10
    if scenario.name == "failing":
        assert FAILURE in read[0]


async def test_end_run_raises_out_of_the_run() -> None:
    for name in ("repeat", "unknown"):
        guard, _ = make_guard()
        tools = Tools()
        agent = guard_agent(
            make_agent(BY_NAME[name].script, tools, []), guard, on_critical="end_run"
        )
        with pytest.raises(LoopDetectedError) as caught:
            await run(agent)
        assert str(caught.value) == BY_NAME[name].blocked_message
        assert tools.total == BY_NAME[name].executions


async def test_the_session_lives_in_the_context() -> None:
    guard, _ = make_guard()
    agent = guard_agent(make_agent(LoopScript(times=2), Tools(), []), guard)
    ctx = Context(agent)
    await run(agent, ctx)
    session = await ctx.store.get(SESSION_STORE_KEY)
    assert len(guard.history(session_key=session)) == 2
    await run(agent)  # a new context: a new conversation
    assert len(guard.history(session_key=session)) == 2
    with pytest.raises(TypeError, match="already guarded"):
        guard_agent(agent, guard)
    with pytest.raises(TypeError, match="workflow agent"):
        guard_agent(object(), guard)  # type: ignore[type-var]


async def test_shadow_mode_warn_model_off_and_async_tools() -> None:
    guard, events = make_guard(enforce=False)
    runs = 0

    async def read_file(path: str) -> str:
        """Read a file."""
        nonlocal runs
        runs += 1
        return "the same text"

    read: list[Any] = []
    agent = guard_agent(
        FunctionAgent(tools=[read_file], llm=scripted_llm(BY_NAME["repeat"].script, read)),
        guard,
        warn_model=False,
    )
    await run(agent)
    assert runs == 60
    assert blocks(events) == 0
    assert not any("WARNING" in str(r) for r in read)


@pytest.mark.parametrize("name", ["repeat", "unknown"])
async def test_an_agent_workflow_is_guarded(name: str) -> None:
    guard, events = make_guard()
    tools = Tools()
    read: list[Any] = []
    member = make_agent(BY_NAME[name].script, tools, read, name="reader", description="Reads")
    workflow = guard_agent(AgentWorkflow(agents=[member], root_agent="reader"), guard)
    await workflow.run(user_msg="Summarise notes.txt", max_iterations=100)
    assert len(read) == 60
    assert tools.total == BY_NAME[name].executions
    assert blocks(events) == BY_NAME[name].blocks
    assert read[-1] == BY_NAME[name].blocked_message


@pytest.mark.parametrize("scenario", [BY_NAME["repeat"], BY_NAME["parallel"]], ids=lambda s: s.name)
async def test_a_guard_tool_function_as_the_tool_is_guarded_once(scenario: Scenario) -> None:
    # Two layers on one guard and session: the adapter guards the call, the guard.tool
    # function passes it through (one record, one warning, and the block at the 20th).
    guard, events = make_guard()
    tools = Tools()
    read_file = guard.tool(tools.read_file, session_key="thread-1", name="read_file")
    read: list[Any] = []
    agent = FunctionAgent(
        tools=[FunctionTool.from_defaults(fn=read_file, name="read_file", description="Read")],
        llm=scripted_llm(scenario.script, read),
    )
    assert await run(guard_agent(agent, guard, session_key="thread-1")) == "done"

    assert tools.runs["read_file"] == scenario.executions
    assert blocks(events) == scenario.blocks
    assert len(guard.history(session_key="thread-1")) == scenario.executions
    assert sum(str(scenario.warning) in str(r) for r in read) == 1
