"""LlamaIndex agent workflows: guard every tool call of a ``FunctionAgent`` / ``ReActAgent``.

::

    from llama_index.core.agent.workflow import FunctionAgent
    from loopwatch import LoopGuard
    from loopwatch.integrations.llamaindex import guard_agent

    agent = guard_agent(FunctionAgent(tools=[read_file], llm=llm), LoopGuard({"enabled": True}))
    await agent.run("Summarise notes.txt")

What :func:`guard_agent` does (SPEC §11), on the agent object (any ``BaseWorkflowAgent``, or
an ``AgentWorkflow`` and its agents):

* Every call of a tool the agent has goes through the agent's ``_call_tool`` (the one place
  where it calls ``tool.acall``); that is wrapped. The workflow runs the calls of one model
  turn as concurrent steps, so the agent's ``take_step`` is wrapped too: it admits the
  turn's calls together (``guard.abefore_batch``), so identical calls of one turn count as
  the repeats they are and one critical blocks them all. A blocked call is answered with an error
  ``ToolOutput`` carrying the blocked message, without calling the tool. The output's text
  (what the model reads) is recorded, or, for an error output, the exception (or its text);
  then an emitted warning is appended as one more text block.
* A call of a tool the agent does not have is answered by the workflow itself ("Tool X not
  found"); the wrapped ``handle_tool_call_results`` records it as a failed call naming the
  tool, and when the guard blocks it, replaces that answer by the blocked message.

A ``guard.tool`` function used as a tool of the agent, with the same guard and session,
passes its calls through: each call is guarded and recorded once (by the adapter).

Sessions: the session is kept in the workflow ``Context`` (key ``loopwatch_session``, a
fresh id the first time), so a run that reuses a context (``agent.run(..., ctx=ctx)``)
continues its conversation and a new run without one is a new conversation. Pass
``session_key=`` (a string, or a callable taking the ``Context``) to choose.

``on_critical="end_run"`` raises :class:`~loopwatch.LoopDetectedError` out of the run
(``await handler``): the workflow lets a step's exception through.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Final, TypeAlias, TypeVar

from llama_index.core.agent.workflow import AgentWorkflow, BaseWorkflowAgent
from llama_index.core.agent.workflow.workflow_events import AgentOutput, ToolCallResult
from llama_index.core.base.llms.types import ChatMessage, MessageRole, TextBlock, ToolCallBlock
from llama_index.core.llms.mock import MockFunctionCallingLLM
from llama_index.core.tools import ToolOutput

from loopwatch.adapter import (
    AdapterOptions,
    Admissions,
    OnCritical,
    QueuedIds,
    SessionCache,
    ToolCall,
    unknown_tool_error,
)
from loopwatch.guard import LoopGuard
from loopwatch.integrations._shared import check_adapter_arguments
from loopwatch.testing import LoopScript

AgentT = TypeVar("AgentT", BaseWorkflowAgent, AgentWorkflow)

#: A session key: fixed, or computed from the workflow ``Context``.
IdSource: TypeAlias = "str | Callable[[Any], object] | None"

#: The ``Context`` store key holding the conversation's session id.
SESSION_STORE_KEY: Final = "loopwatch_session"


class _Turns:
    """The model turns of one guarded agent (or workflow and its agents) awaiting their
    tool steps: the decisions they were admitted with, and their call ids per session
    (the tool step is not given the call's id)."""

    def __init__(self) -> None:
        self.admissions = Admissions()
        self.ids: SessionCache[QueuedIds] = SessionCache()

    def queued(self, session: object) -> QueuedIds:
        key = str(session)
        ids = self.ids.get(key)
        if ids is None:
            ids = QueuedIds()
            self.ids.put(key, ids)
        return ids


class _Guard:
    """The state of one guarded agent."""

    def __init__(
        self,
        agent: BaseWorkflowAgent | AgentWorkflow,
        guard: LoopGuard,
        session_key: IdSource,
        run_id: IdSource,
        agent_id: str | None,
        options: AdapterOptions,
        turns: _Turns,
    ) -> None:
        self.agent = agent
        self.guard = guard
        self.session_key = session_key
        self.run_id = run_id
        self.agent_id = agent_id
        self.options = options
        self.turns = turns
        self.call_tool: Callable[..., Awaitable[ToolOutput]] = agent._call_tool
        self.handle_results: Callable[..., Awaitable[None]] | None = getattr(
            agent, "handle_tool_call_results", None
        )
        self.take_step: Callable[..., Awaitable[AgentOutput]] | None = getattr(
            agent, "take_step", None
        )

    async def _session(self, ctx: Any) -> object:
        if self.session_key is not None:
            return self.session_key(ctx) if callable(self.session_key) else self.session_key
        session = await ctx.store.get(SESSION_STORE_KEY, default=None)
        if session is None:
            session = f"llamaindex:{uuid.uuid4().hex}"
            await ctx.store.set(SESSION_STORE_KEY, session)
        return session

    async def _new_call(self, ctx: Any, name: str, args: object, call_id: object) -> ToolCall:
        run = self.run_id(ctx) if callable(self.run_id) else self.run_id
        return ToolCall(
            self.guard,
            name,
            args,
            session_key=await self._session(ctx),
            run_id=run,
            tool_call_id=call_id,
            agent_id=self.agent_id,
            options=self.options,
        )

    async def guarded_take_step(self, ctx: Any, *args: Any, **kwargs: Any) -> AgentOutput:
        """The model's turn; its calls of the agent's tools are admitted together.

        The workflow runs the calls of one turn as concurrent ``call_tool`` steps, so each
        would be decided before any sibling has an outcome: the turn is decided here at once
        (``guard.abefore_batch``), identical calls counting as the repeats they are and one
        critical blocking them all, and its call ids are queued for the tool steps.
        """
        assert isinstance(self.agent, BaseWorkflowAgent) and self.take_step is not None
        output = await self.take_step(ctx, *args, **kwargs)
        known = {tool.metadata.get_name() for tool in await self.agent.get_tools("")}
        calls = [c for c in output.tool_calls if c.tool_name in known]
        if calls:
            session = await self._session(ctx)
            self.turns.queued(session).queue(
                [(c.tool_name, dict(c.tool_kwargs), c.tool_id) for c in calls]
            )
            batch = [
                await self._new_call(ctx, c.tool_name, dict(c.tool_kwargs), c.tool_id)
                for c in calls
            ]
            await self.turns.admissions.aadmit(self.guard, batch)
        return output

    async def guarded_call_tool(self, ctx: Any, tool: Any, tool_input: dict[str, Any]) -> Any:
        name = tool.metadata.get_name()
        args = dict(tool_input)
        call_id = self.turns.queued(await self._session(ctx)).take(name, args)
        tc = self.turns.admissions.take(await self._new_call(ctx, name, args, call_id))
        await tc.astart()
        if tc.blocked:
            return _output(name, tool_input, str(tc.message), is_error=True)
        with tc.scope():  # a guard.tool function as the tool passes the call through
            output = await self.call_tool(ctx, tool, tool_input)
        if output.is_error:
            tc.error(output.exception if output.exception is not None else output.content)
        else:
            tc.result(output.content)
        await tc.afinish()
        warning = tc.warning
        if warning is not None:
            output.blocks = [*output.blocks, TextBlock(text=warning)]
        return output

    async def guarded_handle_results(
        self, ctx: Any, results: list[ToolCallResult], memory: Any
    ) -> None:
        assert isinstance(self.agent, BaseWorkflowAgent) and self.handle_results is not None
        known = {tool.metadata.get_name() for tool in await self.agent.get_tools("")}
        for result in results:
            if result.tool_name in known or not result.tool_output.is_error:
                continue
            tc = await self._new_call(ctx, result.tool_name, result.tool_kwargs, result.tool_id)
            await tc.astart()  # raises LoopDetectedError under end_run
            if tc.blocked:
                result.tool_output = _output(
                    result.tool_name, result.tool_kwargs, str(tc.message), is_error=True
                )
                continue
            tc.error(unknown_tool_error(result.tool_name, result.tool_output.content))
            await tc.afinish()
            if tc.warning is not None:
                output = result.tool_output
                output.blocks = [*output.blocks, TextBlock(text=tc.warning)]
        await self.handle_results(ctx, results, memory)


def _output(name: str, args: object, text: str, *, is_error: bool) -> ToolOutput:
    return ToolOutput(
        content=text, tool_name=name, raw_input={"kwargs": args}, raw_output=text, is_error=is_error
    )


def guard_agent(
    agent: AgentT,
    guard: LoopGuard,
    *,
    session_key: IdSource = None,
    run_id: IdSource = None,
    agent_id: str | None = None,
    warn_model: bool = True,
    on_critical: OnCritical = "block_call",
) -> AgentT:
    """Guard every tool call of ``agent`` (changed in place and returned; see module docs).

    Args:
        agent: a workflow agent (``FunctionAgent``, ``ReActAgent``, ``CodeActAgent``) or an
            ``AgentWorkflow`` (its tool calls, and each of its agents' missing tools).
        guard: the guard (its config, store, listeners and shadow mode apply).
        session_key: the conversation (default: one per workflow ``Context``).
        run_id: the agent run: a string or a callable taking the ``Context``.
        agent_id: the agent, for ``openclaw_config`` per-agent blocks.
        warn_model: append an emitted warning to what the model reads.
        on_critical: ``"block_call"`` or ``"end_run"`` (raise ``LoopDetectedError``).

    Raises:
        TypeError: ``agent`` is not a workflow agent, or is already guarded.
    """
    if not isinstance(agent, (BaseWorkflowAgent, AgentWorkflow)):
        raise TypeError(f"guard_agent needs a llama-index workflow agent, not {type(agent)}")
    if isinstance(agent.__dict__.get("_loopwatch"), _Guard):
        raise TypeError("this agent is already guarded")
    check_adapter_arguments(guard, agent_id=agent_id, session_key=session_key, run_id=run_id)
    options = AdapterOptions(warn_model=warn_model, on_critical=on_critical)
    ids = (guard, session_key, run_id, agent_id, options, _Turns())
    state = _Guard(agent, *ids)
    # The agents are pydantic models: set the wrappers past their field validation.
    object.__setattr__(agent, "_call_tool", state.guarded_call_tool)
    members = agent.agents.values() if isinstance(agent, AgentWorkflow) else [agent]
    for member in members:
        member_state = state if member is agent else _Guard(member, *ids)
        object.__setattr__(member, "handle_tool_call_results", member_state.guarded_handle_results)
        object.__setattr__(member, "take_step", member_state.guarded_take_step)
    agent.__dict__["_loopwatch"] = state
    return agent


# --- a scripted offline model --------------------------------------------------------------


def scripted_llm(
    script: LoopScript | None = None, read: list[Any] | None = None
) -> MockFunctionCallingLLM:
    """A function-calling LLM that plays a :class:`~loopwatch.testing.LoopScript` offline.

    It reads the tool messages of the conversation and answers with the script's next
    call, or its final text. ``read``, when given, is kept equal to the tool messages' texts
    the model last read.
    """
    plan = script if script is not None else LoopScript()
    calls = [0]
    seen = read if read is not None else []

    def respond(messages: Sequence[ChatMessage], **kwargs: Any) -> ChatMessage:
        seen[:] = [m.content for m in messages if m.role == MessageRole.TOOL]
        read = list(seen)
        steps = plan.next_calls(read)
        if not steps:
            return ChatMessage(role=MessageRole.ASSISTANT, content=plan.final)
        blocks: list[Any] = []
        for name, args in steps:
            calls[0] += 1
            blocks.append(
                ToolCallBlock(tool_call_id=f"call-{calls[0]}", tool_name=name, tool_kwargs=args)
            )
        return ChatMessage(role=MessageRole.ASSISTANT, blocks=blocks)

    return MockFunctionCallingLLM(response_generator=respond, is_chat_model=True)


__all__ = ["SESSION_STORE_KEY", "guard_agent", "scripted_llm"]
