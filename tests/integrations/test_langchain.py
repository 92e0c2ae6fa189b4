"""LangChain v1: a real ``create_agent`` agent with a scripted chat model that loops."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from typing import Any

import pytest
from integration_support import (
    ARGS,
    BLOCK_AT,
    CONFIG,
    CRITICAL,
    RESULT,
    TOOL,
    WARN_AT,
    WARNED_RESULT,
    WARNING,
    Counter,
    make_guard,
)
from langchain.agents import create_agent
from langchain.agents.middleware import SummarizationMiddleware
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import StructuredTool
from langgraph.checkpoint.memory import InMemorySaver
from pydantic import ConfigDict

from loopwatch import LoopDetectedError, PostCompactionLoopPersistedError
from loopwatch import messages as texts
from loopwatch.integrations.langchain import LoopGuardMiddleware

RUN_CONFIG = RunnableConfig(recursion_limit=200)
GO: Any = {"messages": [{"role": "user", "content": "go"}]}
Script = Callable[[Sequence[BaseMessage]], AIMessage]


class ScriptedChatModel(BaseChatModel):
    """A chat model whose every answer is computed by ``script`` from the conversation.

    LangChain's own fakes cannot call tools (``GenericFakeChatModel`` has no
    ``bind_tools``); this one ignores the bound tools and lets the script decide.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)
    script: Script

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def bind_tools(self, tools: Any, **kwargs: Any) -> ScriptedChatModel:
        return self

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any
    ) -> ChatResult:
        return ChatResult(generations=[ChatGeneration(message=self.script(messages))])


def looping(tool: str = TOOL, args: dict[str, Any] = ARGS, max_calls: int = 20) -> Script:
    """Calls ``tool(**args)`` every turn; stops when told CRITICAL or after ``max_calls``
    calls since the user's last message."""

    def script(messages: Sequence[BaseMessage]) -> AIMessage:
        calls = 0
        for message in reversed(messages):
            if message.type == "human":
                break
            calls += isinstance(message, AIMessage) and bool(message.tool_calls)
        last = messages[-1]
        if isinstance(last, ToolMessage) and "CRITICAL" in str(last.content):
            return AIMessage(content="stopping: the loop guard blocked me")
        if calls >= max_calls:
            return AIMessage(content="done")
        return AIMessage(
            content="",
            tool_calls=[{"name": tool, "args": args, "id": f"call-{uuid.uuid4().hex[:8]}"}],
        )

    return script


def tool_messages(state: dict[str, Any]) -> list[ToolMessage]:
    return [m for m in state["messages"] if isinstance(m, ToolMessage)]


def read_tool(counter: Counter, *, asynchronous: bool = False) -> StructuredTool:
    def read_file(path: str) -> str:
        """Read a file."""
        return counter()

    async def aread_file(path: str) -> str:
        """Read a file."""
        return counter()

    if asynchronous:
        return StructuredTool.from_function(coroutine=aread_file, name=TOOL)
    return StructuredTool.from_function(func=read_file, name=TOOL)


def test_warning_reaches_the_model_then_the_call_is_blocked() -> None:
    guard, events = make_guard()
    counter = Counter()
    agent = create_agent(
        ScriptedChatModel(script=looping()),
        tools=[read_tool(counter)],
        middleware=[LoopGuardMiddleware(guard)],
    )
    state = agent.invoke(GO, RUN_CONFIG)

    shown = tool_messages(state)
    assert counter.calls == BLOCK_AT - 1  # the blocked call never ran the tool
    assert [m.content for m in shown[: WARN_AT - 1]] == [RESULT] * (WARN_AT - 1)
    assert shown[WARN_AT - 1].content == WARNED_RESULT
    assert shown[WARN_AT].content == RESULT  # the next warning is suppressed (same bucket)
    blocked = shown[BLOCK_AT - 1]
    assert (blocked.content, blocked.status, blocked.name) == (CRITICAL, "error", TOOL)
    assert len(shown) == BLOCK_AT
    assert state["messages"][-1].content == "stopping: the loop guard blocked me"
    assert [e.type for e in events] == ["tool.loop", "tool.loop", "tool.execution.blocked"]


def test_warn_model_off_shows_the_original_result() -> None:
    guard, _ = make_guard()
    agent = create_agent(
        ScriptedChatModel(script=looping()),
        tools=[read_tool(Counter())],
        middleware=[LoopGuardMiddleware(guard, warn_model=False)],
    )
    state = agent.invoke(GO, RUN_CONFIG)
    shown = tool_messages(state)
    assert shown[WARN_AT - 1].content == RESULT
    assert shown[BLOCK_AT - 1].content == CRITICAL


def test_end_run_raises_out_of_invoke() -> None:
    guard, _ = make_guard()
    counter = Counter()
    agent = create_agent(
        ScriptedChatModel(script=looping()),
        tools=[read_tool(counter)],
        middleware=[LoopGuardMiddleware(guard, on_critical="end_run")],
    )
    with pytest.raises(LoopDetectedError) as caught:
        agent.invoke(GO, RUN_CONFIG)
    assert str(caught.value) == CRITICAL
    assert caught.value.verdict.detector == "generic_repeat"
    assert counter.calls == BLOCK_AT - 1


def test_shadow_mode_never_blocks() -> None:
    guard, events = make_guard(enforce=False)
    counter = Counter()
    agent = create_agent(
        ScriptedChatModel(script=looping(max_calls=16)),
        tools=[read_tool(counter)],
        middleware=[LoopGuardMiddleware(guard, on_critical="end_run")],
    )
    state = agent.invoke(GO, RUN_CONFIG)
    assert counter.calls == 16
    assert all(m.status != "error" for m in tool_messages(state))
    blocks = [e.to_dict() for e in events if e.type == "tool.loop"]
    assert [b["action"] for b in blocks] == ["warn"] + ["block"] * 4
    assert not any(e.type == "tool.execution.blocked" for e in events)


async def test_async_agent() -> None:
    guard, _ = make_guard()
    counter = Counter()
    agent = create_agent(
        ScriptedChatModel(script=looping()),
        tools=[read_tool(counter, asynchronous=True)],
        middleware=[LoopGuardMiddleware(guard)],
    )
    state = await agent.ainvoke(GO, RUN_CONFIG)
    shown = tool_messages(state)
    assert counter.calls == BLOCK_AT - 1
    assert shown[WARN_AT - 1].content == WARNED_RESULT
    assert shown[BLOCK_AT - 1].content == CRITICAL


async def test_async_end_run() -> None:
    guard, _ = make_guard()
    agent = create_agent(
        ScriptedChatModel(script=looping()),
        tools=[read_tool(Counter(), asynchronous=True)],
        middleware=[LoopGuardMiddleware(guard, on_critical="end_run")],
    )
    with pytest.raises(LoopDetectedError):
        await agent.ainvoke(GO, RUN_CONFIG)


def test_the_thread_is_the_session_and_each_invocation_a_run() -> None:
    guard, _ = make_guard()
    agent = create_agent(
        ScriptedChatModel(script=looping(max_calls=3)),
        tools=[read_tool(Counter())],
        middleware=[LoopGuardMiddleware(guard)],
        checkpointer=InMemorySaver(),
    )
    config = RunnableConfig(recursion_limit=200, configurable={"thread_id": "thread-7"})
    agent.invoke(GO, config)
    agent.invoke({"messages": [{"role": "user", "content": "again"}]}, config)
    history = guard.history(session_key="thread-7")
    assert len(history) == 6
    first, second = history[0].run_id, history[3].run_id
    assert first and second and first != second
    assert [r.run_id for r in history] == [first] * 3 + [second] * 3


def test_a_run_id_in_the_config_is_the_run() -> None:
    guard, _ = make_guard()
    agent = create_agent(
        ScriptedChatModel(script=looping(max_calls=2)),
        tools=[read_tool(Counter())],
        middleware=[LoopGuardMiddleware(guard, session_key="s")],
    )
    run_id = uuid.uuid4()
    agent.invoke(GO, RunnableConfig(recursion_limit=200, run_id=run_id))
    assert {r.run_id for r in guard.history(session_key="s")} == {str(run_id)}


def test_without_a_thread_each_invocation_is_its_own_session() -> None:
    guard, _ = make_guard()
    counter = Counter()
    agent = create_agent(
        ScriptedChatModel(script=looping(max_calls=8)),
        tools=[read_tool(counter)],
        middleware=[LoopGuardMiddleware(guard)],
    )
    for _ in range(3):  # 24 identical calls in all, but never 13 in one session
        agent.invoke(GO, RUN_CONFIG)
    assert counter.calls == 24


def test_session_key_option() -> None:
    guard, _ = make_guard()
    agent = create_agent(
        ScriptedChatModel(script=looping(max_calls=2)),
        tools=[read_tool(Counter())],
        middleware=[LoopGuardMiddleware(guard, session_key=lambda request: "mine")],
    )
    agent.invoke(GO, RUN_CONFIG)
    assert len(guard.history(session_key="mine")) == 2


def test_unknown_tool_is_recorded_as_a_failed_call_and_the_stream_guard_answers() -> None:
    guard, _ = make_guard(config={**CONFIG, "unknownToolThreshold": 3})
    counter = Counter()
    agent = create_agent(
        ScriptedChatModel(script=looping(tool="open_file", max_calls=20)),
        tools=[read_tool(counter)],
        middleware=[LoopGuardMiddleware(guard, session_key="s")],
    )
    state = agent.invoke(GO, RUN_CONFIG)
    history = guard.history(session_key="s")
    assert [r.unknown_tool_name for r in history] == ["open_file"] * 3
    assert all(r.result_hash and r.result_hash.startswith("error:") for r in history)
    # The model saw LangChain's own error for each call...
    assert all("is not a valid tool" in str(m.content) for m in tool_messages(state))
    # ...and its 4th message calling the missing tool was replaced (SPEC §5.7).
    final = state["messages"][-1]
    assert isinstance(final, AIMessage) and not final.tool_calls
    assert final.content == texts.UNKNOWN_TOOL_STREAM.format(name="open_file")
    assert counter.calls == 0


def test_a_summary_arms_the_post_compaction_guard_and_a_persisting_loop_ends_the_run() -> None:
    guard, events = make_guard()
    counter = Counter()
    summarize = SummarizationMiddleware(
        ScriptedChatModel(script=looping()),
        trigger=("messages", 10),
        keep=("messages", 2),
        summarizer=lambda messages: "we kept reading notes.txt",
    )
    agent = create_agent(
        ScriptedChatModel(script=looping()),
        tools=[read_tool(counter)],
        # Middleware with different state schemas in one list: LangChain's list type is
        # invariant in the state, so a type checker wants the list annotated.
        middleware=[summarize, LoopGuardMiddleware(guard)],  # type: ignore[list-item]
    )
    with pytest.raises(PostCompactionLoopPersistedError) as caught:
        agent.invoke(GO, RUN_CONFIG)
    armed = [e.to_dict() for e in events if e.type == "guard.armed"]
    assert len(armed) == 1 and armed[0]["windowSize"] == 3
    # Summarised before the 6th model call; the 3 identical calls after it abort.
    assert counter.calls == 5 + 3
    assert caught.value.tool_name == TOOL and caught.value.count == 3


def test_listed_before_a_tool_error_middleware_the_warning_rides_on_its_message() -> None:
    # The README's ordering note: the first middleware is the outermost, so listed before
    # a middleware that turns tool exceptions into messages, LoopGuardMiddleware sees that
    # message and appends the warning; listed after it, it sees the exception and the
    # model reads the error middleware's text alone.
    from langchain.agents.middleware import wrap_tool_call

    @wrap_tool_call  # type: ignore[arg-type]
    def errors_as_messages(request: Any, handler: Any) -> Any:
        try:
            return handler(request)
        except Exception as exc:
            return ToolMessage(content=f"failed: {exc}", tool_call_id=request.tool_call["id"])

    def flaky(path: str) -> str:
        """Read a file."""
        raise RuntimeError("disk on fire")

    def warned(middleware: list[Any]) -> bool:
        guard, _ = make_guard()
        agent = create_agent(
            ScriptedChatModel(script=looping()),
            tools=[StructuredTool.from_function(func=flaky, name=TOOL)],
            middleware=[LoopGuardMiddleware(guard) if m is None else m for m in middleware],
        )
        shown = tool_messages(agent.invoke(GO, RUN_CONFIG))
        assert shown[-1].content == CRITICAL
        return shown[WARN_AT - 1].content == f"failed: disk on fire\n\n{WARNING}"

    assert warned([None, errors_as_messages])
    assert not warned([errors_as_messages, None])


def react_agent(guard: Any, counter: Counter, script: Script, **kw: Any) -> Any:
    """LangGraph's prebuilt ``create_react_agent`` (no middleware): the middleware's tool
    hooks given to its ``ToolNode``, as the README shows."""
    import warnings

    from langgraph.prebuilt import ToolNode, create_react_agent

    middleware = LoopGuardMiddleware(guard)
    node = ToolNode(
        [read_tool(counter)],
        wrap_tool_call=middleware.wrap_tool_call,
        awrap_tool_call=middleware.awrap_tool_call,
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # create_react_agent is deprecated since LangGraph 1.0
        return create_react_agent(ScriptedChatModel(script=script), tools=node, **kw)


@pytest.mark.parametrize("asynchronous", [False, True])
async def test_create_react_agent_without_a_thread_is_guarded(asynchronous: bool) -> None:
    # The ToolNode's hooks never see the middleware's before_agent, and a graph without a
    # thread has no thread id: the session was None, which skips the guard, so the loop
    # ran unguarded. Now the conversation's first message id is the session.
    guard, events = make_guard()
    counter = Counter()
    agent = react_agent(guard, counter, looping(max_calls=BLOCK_AT + 4))
    state = await agent.ainvoke(GO, RUN_CONFIG) if asynchronous else agent.invoke(GO, RUN_CONFIG)

    shown = [m.content for m in tool_messages(state)]
    assert counter.calls == BLOCK_AT - 1
    assert shown[WARN_AT - 1] == WARNED_RESULT
    assert shown[BLOCK_AT - 1] == CRITICAL
    assert [e.type for e in events] == ["tool.loop", "tool.loop", "tool.execution.blocked"]


def test_create_react_agent_each_conversation_is_its_own_session() -> None:
    guard, events = make_guard()
    counter = Counter()
    agent = react_agent(guard, counter, looping(max_calls=8))
    for _ in range(3):  # 24 identical calls in all, but never 13 in one conversation
        agent.invoke(GO, RUN_CONFIG)
    assert counter.calls == 24
    assert events == []

    # With a checkpointer, a thread is one conversation across invocations.
    threaded = react_agent(guard, counter, looping(max_calls=4), checkpointer=InMemorySaver())
    config = RunnableConfig(recursion_limit=200, configurable={"thread_id": "t-1"})
    for _ in range(2):
        threaded.invoke(GO, config)
    assert len(guard.history(session_key="t-1")) == 8


def test_the_scripted_model_makes_parallel_calls() -> None:
    # loopwatch.testing.langchain_model honours LoopScript.per_turn (it made one call a
    # message): a turn of 3 identical calls is admitted as one batch, 19 runs, not 20.
    from loopwatch.testing import langchain_model, loop_script

    guard, events = make_guard(config={"enabled": True})
    counter = Counter()
    agent = create_agent(
        langchain_model(loop_script(times=25, per_turn=3)),
        tools=[read_tool(counter)],
        middleware=[LoopGuardMiddleware(guard)],
    )
    agent.invoke(GO, RUN_CONFIG)
    assert counter.calls == 19
    assert sum(e.type == "tool.execution.blocked" for e in events) == 6


@pytest.mark.parametrize("asynchronous", [False, True])
async def test_create_react_agent_admits_a_message_s_calls_as_one_turn(asynchronous: bool) -> None:
    # A bare ToolNode has no model hook to admit a message's calls together: they were
    # decided one by one (20 runs sync, 21 async, of 25 identical calls 3 a message). The
    # first of them to reach the tool hooks now admits them all (19, as create_agent).
    from langgraph.prebuilt import ToolNode, create_react_agent

    from loopwatch.testing import langchain_model, loop_script

    guard, events = make_guard(config={"enabled": True})
    counter = Counter()
    middleware = LoopGuardMiddleware(guard)
    node = ToolNode(
        [read_tool(counter)],
        wrap_tool_call=middleware.wrap_tool_call,
        awrap_tool_call=middleware.awrap_tool_call,
    )
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        agent = create_react_agent(langchain_model(loop_script(times=25, per_turn=3)), tools=node)
    if asynchronous:
        await agent.ainvoke(GO, RUN_CONFIG)
    else:
        agent.invoke(GO, RUN_CONFIG)
    assert counter.calls == 19
    assert sum(e.type == "tool.execution.blocked" for e in events) == 6


@pytest.mark.parametrize("inner_enforces", [False, True])
@pytest.mark.parametrize("asynchronous", [False, True])
async def test_a_guard_tool_function_of_another_guard_keeps_the_middleware_blocking(
    inner_enforces: bool, asynchronous: bool
) -> None:
    # The function's own guard appends its warning to the text ToolNode wraps: the
    # middleware read it as another outcome, its no-progress count started over, and a
    # shadow guard inside kept the middleware's guard from ever blocking.
    inner, _ = make_guard(enforce=inner_enforces)
    outer, events = make_guard()
    counter = Counter()

    @inner.tool(name=TOOL, session_key="thread-1")
    def read_file(path: str) -> str:
        """Read a file."""
        return counter()

    @inner.tool(name=TOOL, session_key="thread-1")
    async def aread_file(path: str) -> str:
        """Read a file."""
        return counter()

    tool = (
        StructuredTool.from_function(coroutine=aread_file, name=TOOL)
        if asynchronous
        else StructuredTool.from_function(func=read_file, name=TOOL)
    )
    agent = create_agent(
        ScriptedChatModel(script=looping(max_calls=30)),
        tools=[tool],
        checkpointer=InMemorySaver(),
        middleware=[LoopGuardMiddleware(outer)],
    )
    config = RunnableConfig(recursion_limit=200, configurable={"thread_id": "thread-1"})
    state = await agent.ainvoke(GO, config) if asynchronous else agent.invoke(GO, config)

    shown = tool_messages(state)
    assert str(shown[WARN_AT - 1].content).startswith(WARNED_RESULT)
    assert shown[BLOCK_AT - 1].content == CRITICAL
    assert counter.calls == BLOCK_AT - 1
    assert [e.type for e in events] == ["tool.loop", "tool.loop", "tool.execution.blocked"]
    history = outer.history(session_key="thread-1")
    assert len(history) == BLOCK_AT - 1
    assert len({record.result_hash for record in history}) == 1


def test_a_sub_agent_in_a_tool_on_one_guard_and_session_is_guarded_from_its_first_call() -> None:
    # The child's first call of read_file, made while the parent's ask_child call was in
    # flight, passed through as if it were that call: unguarded and unrecorded, so the
    # child was warned and blocked one call late.
    guard, events = make_guard()
    counter = Counter()
    child = create_agent(
        ScriptedChatModel(script=looping(max_calls=30)),
        tools=[read_tool(counter)],
        middleware=[LoopGuardMiddleware(guard, session_key="shared")],
    )

    def ask_child(question: str) -> str:
        """Ask the reader."""
        state = child.invoke({"messages": [{"role": "user", "content": question}]}, RUN_CONFIG)
        child_shown[:] = tool_messages(state)
        return str(state["messages"][-1].content)

    child_shown: list[ToolMessage] = []
    parent = create_agent(
        ScriptedChatModel(script=looping("ask_child", {"question": "notes?"}, max_calls=1)),
        tools=[StructuredTool.from_function(func=ask_child)],
        middleware=[LoopGuardMiddleware(guard, session_key="shared")],
    )
    parent.invoke(GO, RUN_CONFIG)

    assert child_shown[WARN_AT - 1].content == WARNED_RESULT
    assert child_shown[BLOCK_AT - 1].content == CRITICAL
    assert counter.calls == BLOCK_AT - 1
    names = [record.tool_name for record in guard.history(session_key="shared")]
    assert names.count(TOOL) == BLOCK_AT - 1
    assert names.count("ask_child") == 1
    assert [e.type for e in events] == ["tool.loop", "tool.loop", "tool.execution.blocked"]


def test_langchain_refuses_a_second_loop_guard_middleware_and_a_subclass_runs_beside() -> None:
    # create_agent keeps one middleware of each name (the class name): a second guard, e.g.
    # a shadow guard measuring beside the enforcing one, needs a subclass (README).
    outer, events = make_guard()
    shadow, shadow_events = make_guard(enforce=False)
    counter = Counter()

    def read_file(path: str) -> str:
        """Read a file."""
        return counter()

    with pytest.raises(AssertionError, match="duplicate middleware"):
        create_agent(
            ScriptedChatModel(script=looping(max_calls=30)),
            tools=[read_file],
            middleware=[LoopGuardMiddleware(outer), LoopGuardMiddleware(shadow)],
        )

    class ShadowGuardMiddleware(LoopGuardMiddleware):
        pass

    agent = create_agent(
        ScriptedChatModel(script=looping(max_calls=30)),
        tools=[read_file],
        checkpointer=InMemorySaver(),
        middleware=[LoopGuardMiddleware(outer), ShadowGuardMiddleware(shadow)],
    )
    config = RunnableConfig(recursion_limit=200, configurable={"thread_id": "thread-1"})
    shown = tool_messages(agent.invoke(GO, config))
    assert str(shown[WARN_AT - 1].content).startswith(WARNED_RESULT)
    assert shown[BLOCK_AT - 1].content == CRITICAL
    assert counter.calls == BLOCK_AT - 1
    assert [e.type for e in events] == ["tool.loop", "tool.loop", "tool.execution.blocked"]
    # The shadow saw every call that ran, with the tool's own result (the outer warning is
    # appended after it) and warned at the same call; the blocked call never reaches it.
    history = shadow.history(session_key="thread-1")
    assert len(history) == BLOCK_AT - 1
    assert len({record.result_hash for record in history}) == 1
    assert [e.type for e in shadow_events] == ["tool.loop"]
