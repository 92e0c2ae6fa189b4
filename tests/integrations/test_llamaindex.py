"""LlamaIndex: a real ``FunctionAgent`` workflow with a scripted offline function-calling LLM."""

from __future__ import annotations

import json
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
from llama_index.core.agent.workflow import (
    AgentWorkflow,
    FunctionAgent,
    ReActAgent,
    ToolCallResult,
)
from llama_index.core.base.llms.types import ChatMessage, MessageRole, ToolCallBlock
from llama_index.core.llms.mock import MockFunctionCallingLLM
from llama_index.core.tools import FunctionTool
from workflows import Context

from loopwatch import LoopDetectedError, LoopGuard
from loopwatch import messages as texts
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


# --- a newcomer's agents: LlamaIndex's own mock LLM, a ReActAgent, parallel calls ------------

DEFAULT_WARNING = texts.GENERIC_WARNING.format(tool="read_file", count=10)
DEFAULT_CRITICAL = texts.GENERIC_CRITICAL.format(tool="read_file", count=20)


def react_llm(args_of: Any, *, times: int = 40) -> tuple[MockFunctionCallingLLM, list[str]]:
    """A text-only model in the ReAct format that reads ``times`` observations, and the
    observations it last read."""
    seen: list[str] = []

    def respond(messages: Any, **kwargs: Any) -> ChatMessage:
        texts_read = [str(m.content) for m in messages if m.role == MessageRole.USER]
        seen[:] = [t.removeprefix("Observation: ") for t in texts_read if t.startswith("Obs")]
        if len(seen) >= times:
            answer = "Thought: I can answer without using any more tools.\nAnswer: done"
            return ChatMessage(role=MessageRole.ASSISTANT, content=answer)
        call = json.dumps(args_of(len(seen)))
        text = f"Thought: I need the file.\nAction: read_file\nAction Input: {call}"
        return ChatMessage(role=MessageRole.ASSISTANT, content=text)

    return MockFunctionCallingLLM(response_generator=respond, is_chat_model=True), seen


async def test_a_react_agent_is_warned_then_blocked_with_the_default_thresholds() -> None:
    runs: list[str] = []

    def read_file(path: str) -> str:
        """Read a file."""
        runs.append(path)
        return "the notes"

    guard = LoopGuard({"enabled": True})
    llm, seen = react_llm(lambda n: {"path": "notes.txt"})
    agent = guard_agent(ReActAgent(tools=[read_file], llm=llm), guard)
    assert str(await agent.run(user_msg="Summarise notes.txt", max_iterations=100)) == "done"
    assert len(runs) == 20 and len(seen) == 40
    # The warning is one more text block of the output; ReAct's observation joins the
    # blocks with a newline.
    assert seen[10] == f"the notes\n{DEFAULT_WARNING}"
    assert all("WARNING" not in s for s in seen[:10])
    assert seen[20:] == [DEFAULT_CRITICAL] * 20


async def test_a_healthy_react_agent_is_never_warned_nor_blocked() -> None:
    guard = LoopGuard({"enabled": True})

    def read_file(path: str) -> str:
        """Read a file."""
        return f"contents of {path}"

    llm, seen = react_llm(lambda n: {"path": f"f{n}.txt"})
    agent = guard_agent(ReActAgent(tools=[read_file], llm=llm), guard)
    await agent.run(user_msg="Summarise notes.txt", max_iterations=100)
    assert seen == [f"contents of f{n}.txt" for n in range(40)]


def parallel_llm(args_of: Any, *, per_turn: int, turns: int) -> MockFunctionCallingLLM:
    """LlamaIndex's mock function-calling LLM asking for ``per_turn`` calls a turn."""
    made = [0]

    def respond(messages: Any, **kwargs: Any) -> ChatMessage:
        if made[0] >= per_turn * turns:
            return ChatMessage(role=MessageRole.ASSISTANT, content="done")
        blocks = []
        for _ in range(per_turn):
            made[0] += 1
            name, n = "read_file", made[0]
            blocks.append(
                ToolCallBlock(tool_call_id=f"c{n}", tool_name=name, tool_kwargs=args_of(n))
            )
        return ChatMessage(role=MessageRole.ASSISTANT, blocks=blocks)

    return MockFunctionCallingLLM(response_generator=respond, is_chat_model=True)


async def test_parallel_calls_of_a_healthy_agent_lose_no_record() -> None:
    guard = LoopGuard({"enabled": True})

    def read_file(path: str) -> str:
        """Read a file."""
        return f"contents of {path}"

    llm = parallel_llm(lambda n: {"path": f"f{n}"}, per_turn=3, turns=9)
    agent = guard_agent(FunctionAgent(tools=[read_file], llm=llm), guard, session_key="t-1")
    assert str(await agent.run(user_msg="Summarise", max_iterations=100)) == "done"
    history = guard.history(session_key="t-1")
    assert sorted(str(r.tool_call_id) for r in history) == sorted(f"c{n}" for n in range(1, 28))
    assert all(r.result_hash is not None for r in history)


async def test_parallel_identical_calls_are_blocked_as_one_turn() -> None:
    runs: list[str] = []

    def read_file(path: str) -> str:
        """Read a file."""
        runs.append(path)
        return "the notes"

    guard = LoopGuard({"enabled": True})
    llm = parallel_llm(lambda n: {"path": "notes.txt"}, per_turn=4, turns=10)
    agent = guard_agent(FunctionAgent(tools=[read_file], llm=llm), guard, session_key="t-2")
    outputs = []
    handler = agent.run(user_msg="Summarise", max_iterations=100)
    async for event in handler.stream_events():
        if isinstance(event, ToolCallResult):
            outputs.append(event.tool_output)
    assert str(await handler) == "done"
    # 5 turns ran (20 calls); the 6th turn would pass the threshold: blocked whole.
    assert len(runs) == 20 and len(outputs) == 40
    assert all(o.is_error for o in outputs[20:]) and not any(o.is_error for o in outputs[:20])
    assert sum(DEFAULT_WARNING in str(o.content) for o in outputs) == 1
