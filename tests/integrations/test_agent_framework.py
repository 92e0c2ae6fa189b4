"""Microsoft Agent Framework: a real ``Agent`` with a scripted offline chat client."""

from __future__ import annotations

from typing import Any

import pytest
from agent_framework import (
    Agent,
    AgentResponse,
    Message,
)
from framework_matrix import BY_NAME, SINGLE, Scenario, Tools, blocks, check_answers, make_guard

from loopwatch import LoopDetectedError
from loopwatch import messages as texts
from loopwatch.integrations.agent_framework import (
    DEFAULT_SESSION,
    FUNCTION_FAILED,
    LoopDetectedFailure,
    ScriptedChatClient,
    loopguard_middleware,
)
from loopwatch.testing import LoopScript


def make_agent(script: LoopScript, tools: Tools, middleware: list[Any]) -> Agent[Any]:
    return Agent(
        client=ScriptedChatClient(script),
        tools=[tools.read_file, tools.list_dir, tools.flaky_read],
        middleware=middleware,
    )


def shown(response: AgentResponse[Any]) -> list[Any]:
    """The function results the model read, as text."""
    results = []
    for message in response.messages:
        for content in message.contents:
            if content.type == "function_result":
                results.append(content.result)
    return results


def text(value: Any) -> str:
    if isinstance(value, list):
        return "\n".join(str(getattr(c, "text", c)) for c in value)
    return str(value)


# The recover and parallel rows. The framework runs one response's calls concurrently
# (asyncio.gather); the chat middleware admits them together, so the parallel row gives the
# batch figures (18 runs, 42 blocks).
@pytest.mark.parametrize(
    "scenario", [BY_NAME["recover"], BY_NAME["parallel"]], ids=lambda s: s.name
)
async def test_the_matrix_recover_and_parallel(scenario: Scenario) -> None:
    guard, events = make_guard()
    tools = Tools()
    client = ScriptedChatClient(scenario.script)
    agent = Agent(
        client=client,
        tools=[tools.read_file, tools.list_dir, tools.flaky_read],
        middleware=loopguard_middleware(guard, on_critical=scenario.on_critical),  # type: ignore[arg-type]
    )
    error: BaseException | None = None
    try:
        response = await agent.run("Summarise notes.txt", session=agent.create_session())
    except LoopDetectedFailure as exc:
        error = exc
        read = [text(r) for r in client.read]
    else:
        read = [text(r) for r in shown(response)]
    check_answers(scenario, read, tools, events, error)


@pytest.mark.parametrize("scenario", SINGLE, ids=lambda s: s.name)
async def test_the_matrix(scenario: Scenario) -> None:
    guard, events = make_guard()
    tools = Tools()
    agent = make_agent(scenario.script, tools, loopguard_middleware(guard))
    session = agent.create_session()
    response = await agent.run("Summarise notes.txt", session=session)
    results = [text(r) for r in shown(response)]

    assert tools.total == scenario.executions
    history = guard.history(session_key=session.session_id)
    if scenario.name == "unknown":
        # The framework answers missing tools itself; the 11th call's block ends the turn.
        assert [r.unknown_tool_name for r in history] == ["open_file"] * 10
        assert blocks(events) == 1
        assert response.text == scenario.blocked_message
        return
    assert blocks(events) == scenario.blocks
    assert len(results) == 60
    if scenario.warned_at is not None:
        assert results[scenario.warned_at].endswith(str(scenario.warning))
        assert str(scenario.warning) not in results[scenario.warned_at - 1]
    if scenario.blocked_message is not None:
        assert scenario.blocked_message in results
    if scenario.name == "failing":
        assert results[0] == FUNCTION_FAILED
        assert results[scenario.warned_at or 0] == f"{FUNCTION_FAILED}\n\n{scenario.warning}"


async def test_end_run_raises_a_loop_detected_error_out_of_run() -> None:
    guard, _ = make_guard()
    tools = Tools()
    agent = make_agent(
        BY_NAME["repeat"].script, tools, loopguard_middleware(guard, on_critical="end_run")
    )
    with pytest.raises(LoopDetectedError) as caught:
        await agent.run("go", session=agent.create_session())
    assert isinstance(caught.value, LoopDetectedFailure)
    assert str(caught.value) == BY_NAME["repeat"].blocked_message
    assert tools.total == 20


async def test_end_run_on_a_missing_tool() -> None:
    guard, _ = make_guard()
    agent = make_agent(
        BY_NAME["unknown"].script, Tools(), loopguard_middleware(guard, on_critical="end_run")
    )
    with pytest.raises(LoopDetectedError) as caught:
        await agent.run("go")
    assert str(caught.value) == texts.UNKNOWN_TOOL_CRITICAL.format(name="open_file", count=10)


async def test_a_lower_unknown_tool_threshold_ends_the_streak_sooner() -> None:
    guard, _ = make_guard(config={"enabled": True, "unknownToolThreshold": 3})
    agent = make_agent(BY_NAME["unknown"].script, Tools(), loopguard_middleware(guard))
    session = agent.create_session()
    response = await agent.run("go", session=session)
    assert response.text == texts.UNKNOWN_TOOL_CRITICAL.format(name="open_file", count=3)
    assert len(guard.history(session_key=session.session_id)) == 3


async def test_warn_model_off_and_shadow_mode() -> None:
    guard, _ = make_guard()
    agent = make_agent(
        BY_NAME["repeat"].script, Tools(), loopguard_middleware(guard, warn_model=False)
    )
    results = [text(r) for r in shown(await agent.run("go"))]
    assert not any("WARNING" in r for r in results)

    guard, events = make_guard(enforce=False)
    tools = Tools()
    agent = make_agent(BY_NAME["repeat"].script, tools, loopguard_middleware(guard))
    await agent.run("go")
    assert tools.total == 60
    assert blocks(events) == 0


async def test_async_tools_and_a_chosen_session() -> None:
    guard, events = make_guard()
    runs = 0

    async def read_file(path: str) -> str:
        """Read a file."""
        nonlocal runs
        runs += 1
        return "the same text"

    agent = Agent(
        client=ScriptedChatClient(BY_NAME["repeat"].script),
        tools=[read_file],
        middleware=loopguard_middleware(guard, session_key="thread-9", run_id="r-1"),
    )
    await agent.run([Message(role="user", contents=["go"])])
    assert runs == 20
    assert blocks(events) == 40
    assert {r.run_id for r in guard.history(session_key="thread-9")} == {"r-1"}


@pytest.mark.parametrize("scenario", [BY_NAME["repeat"], BY_NAME["parallel"]], ids=lambda s: s.name)
async def test_a_guard_tool_function_as_the_tool_is_guarded_once(scenario: Scenario) -> None:
    # Two layers on one guard and session: the function middleware guards the call, the
    # guard.tool function passes it through (one record, one warning, the block comes).
    guard, events = make_guard()
    tools = Tools()
    agent = Agent(
        client=ScriptedChatClient(scenario.script),
        tools=[guard.tool(tools.read_file, session_key="s-1", name="read_file")],
        middleware=loopguard_middleware(guard, session_key="s-1"),
    )
    results = [text(r) for r in shown(await agent.run("Summarise notes.txt"))]

    assert tools.runs["read_file"] == scenario.executions
    assert blocks(events) == scenario.blocks
    assert len(guard.history(session_key="s-1")) == scenario.executions
    assert sum(scenario.warning in r for r in results) == 1


@pytest.mark.parametrize("name", ["repeat", "unknown", "parallel"])
async def test_a_streamed_run_is_screened_like_a_plain_one(name: str) -> None:
    # agent.run(..., stream=True): the chat middleware screens the stream's final response
    # (which the framework invokes functions from), so calls of missing tools are recorded
    # and blocked, and a response's calls are admitted together (18 runs, not 21). The
    # shipped ScriptedChatClient answers stream=True itself (it raised "Expected
    # ResponseStream for streaming" before).
    scenario = BY_NAME[name]
    guard, events = make_guard()
    tools = Tools()
    client = ScriptedChatClient(scenario.script)
    agent = Agent(
        client=client,
        tools=[tools.read_file, tools.list_dir, tools.flaky_read],
        middleware=loopguard_middleware(guard),
    )
    session = agent.create_session()
    await agent.run("Summarise notes.txt", session=session, stream=True).get_final_response()

    history = guard.history(session_key=session.session_id)
    if name == "unknown":
        # The 11th call is blocked: the turn ends there, the model is not asked again.
        assert [r.unknown_tool_name for r in history] == ["open_file"] * 10
        assert blocks(events) == 1
        assert len(client.read) == 10
    else:
        assert tools.total == scenario.executions
        assert blocks(events) == scenario.blocks


async def test_each_run_without_a_session_is_a_session_of_its_own() -> None:
    # 25 independent sessionless runs that each read the same file once are healthy: none
    # is warned or blocked (they shared one session before, warned at the 11th run and
    # blocked from the 21st). Within one sessionless run the loop is still caught.
    guard, events = make_guard()
    tools = Tools()
    for _ in range(25):
        agent = make_agent(LoopScript(times=1), tools, loopguard_middleware(guard))
        assert str(BY_NAME["repeat"].warning) not in text(shown(await agent.run("go"))[0])
    assert tools.total == 25
    assert events == []

    agent = make_agent(BY_NAME["repeat"].script, tools, loopguard_middleware(guard))
    await agent.run("go")
    assert blocks(events) == BY_NAME["repeat"].blocks


async def test_without_the_agent_middleware_sessionless_runs_share_the_default() -> None:
    guard, _ = make_guard()
    _agent_middleware, function, chat = loopguard_middleware(guard)
    for _ in range(3):
        await make_agent(LoopScript(times=1), Tools(), [function, chat]).run("go")
    assert len(guard.history(session_key=DEFAULT_SESSION)) == 3


@pytest.mark.parametrize("inner", ["middleware", "guard.tool"])
@pytest.mark.parametrize("inner_enforces", [False, True])
@pytest.mark.parametrize("row", ["repeat", "failing"])
async def test_a_layer_of_another_guard_inside_keeps_the_outer_guard_blocking(
    inner: str, inner_enforces: bool, row: str
) -> None:
    # Two guards, one inside the other (a second loopguard_middleware, or a guard.tool
    # function of another guard as the tool): the outer middleware recorded the inner
    # one's warned answer as another outcome, so with a shadow guard inside it never
    # blocked. It records the function's own answer (its error, for a failure).
    scenario = BY_NAME[row]
    inner_guard, _ = make_guard(enforce=inner_enforces)
    outer, events = make_guard()
    tools = Tools()
    middleware = loopguard_middleware(outer, session_key="s-1")
    functions: list[Any] = [tools.read_file, tools.flaky_read]
    if inner == "middleware":
        middleware = [*middleware, *loopguard_middleware(inner_guard, session_key="s-1")]
    elif row == "repeat":
        functions = [inner_guard.tool(tools.read_file, session_key="s-1", name="read_file")]
    else:
        functions = [inner_guard.tool(tools.flaky_read, session_key="s-1", name="flaky_read")]
    agent = Agent(
        client=ScriptedChatClient(scenario.script), tools=functions, middleware=middleware
    )
    results = [text(r) for r in shown(await agent.run("Summarise notes.txt"))]

    assert tools.total == scenario.executions
    assert blocks(events) == scenario.blocks
    history = outer.history(session_key="s-1")
    assert len(history) == scenario.executions
    assert len({record.result_hash for record in history}) == 1
    tool = scenario.script.calls[0][0]
    assert results[scenario.executions].startswith(f"CRITICAL: Called {tool}")
