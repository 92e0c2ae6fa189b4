"""LangChain v1 / LangGraph: a middleware that guards every tool call of ``create_agent``.

::

    from langchain.agents import create_agent
    from loopwatch import LoopGuard
    from loopwatch.integrations.langchain import LoopGuardMiddleware

    guard = LoopGuard({"enabled": True})
    agent = create_agent(model, tools=[...], middleware=[LoopGuardMiddleware(guard)])
    agent.invoke({"messages": [...]}, {"configurable": {"thread_id": "t-42"}})

What it does (SPEC §11):

* ``wrap_tool_call`` / ``awrap_tool_call``: every call goes through the guard. A blocked
  call is answered with an error ``ToolMessage`` carrying the blocked message, and the
  tool is not run. An emitted warning is appended to the ``ToolMessage`` after the
  original content was recorded. A call whose ``request.tool`` is ``None`` (a tool the
  agent does not have) is recorded as a failed call naming the tool.
* ``wrap_model_call`` / ``awrap_model_call``: each model answer goes through the
  stream-level :class:`~loopwatch.UnknownToolStreamGuard` (SPEC §5.7); a message that
  keeps calling the same missing tool is replaced by a plain answer. When a
  ``SummarizationMiddleware`` summary appears in the conversation, the run's
  post-compaction guard is armed (``compaction_retry``).

Sessions and runs: the session is the LangGraph thread (``thread_id``); the run is the
``run_id`` of the invocation's config when given, else one id per invocation. Without a
checkpointer (no thread), each invocation is its own session. Both ids live in two
private state keys (``loopwatch_session``, ``loopwatch_run``) that the middleware adds to
the agent's state. Pass ``session_key=`` (a string or a callable taking the request) to
choose the session yourself.

LangGraph's prebuilt ``create_react_agent`` takes no middleware: give
:meth:`~LoopGuardMiddleware.wrap_tool_call` / ``awrap_tool_call`` to its ``ToolNode``
(``ToolNode(tools, wrap_tool_call=..., awrap_tool_call=...)``). ``before_agent`` does not
run there, so without a thread the session is the id of the conversation's first message;
the model-call hooks do not run either (no stream guard, no summary), so the first call of
a model message to reach the tool hooks admits the message's calls as one batch.

Parallel tool calls: the calls of one model message are admitted together in
``wrap_model_call`` (``guard.before_batch``, when the guard has it): identical calls of
one turn count as the repeats they are, and one critical blocks them all. When the stream
guard replaces a message, its calls of missing tools are decided and recorded there (they
never reach the tool node), so the guard's block is evented and ends the run under
``end_run``. A ``guard.tool`` function used as a tool of the agent, with the same guard and
session, passes its calls through: each call is guarded and recorded once.

``on_critical="end_run"`` raises :class:`~loopwatch.LoopDetectedError` out of
``invoke``; so does :class:`~loopwatch.PostCompactionLoopPersistedError` in every mode.
``on_critical="recover"`` answers the first critical of a run with a recovery message and
raises at the second.
(A ``ToolNode`` configured with ``handle_tool_errors=True`` would turn them into tool
messages; ``create_agent``'s default lets them through.)
"""

from __future__ import annotations

import asyncio
import dataclasses
import threading
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Annotated, Any, Final, TypeAlias

from langchain.agents.middleware import (
    AgentMiddleware,
    AgentState,
    ModelRequest,
    ModelResponse,
    ToolCallRequest,
)
from langchain.agents.middleware.types import ExtendedModelResponse, PrivateStateAttr
from langchain_core.messages import AIMessage, AnyMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import BaseTool
from langgraph.errors import GraphInterrupt
from langgraph.runtime import Runtime
from langgraph.types import Command
from typing_extensions import NotRequired

from loopwatch.calls import ToolCall
from loopwatch.guard import LoopGuard
from loopwatch.integrations._guarded import (
    Admissions,
    aguarded_call,
    arecord_unknown,
    guarded_call,
    record_unknown,
    stream_stopped,
)
from loopwatch.integrations._sessions import SessionCache, StreamGuards
from loopwatch.integrations._shared import (
    AdapterOptions,
    OnCritical,
    Outcome,
    append_warning,
    check_adapter_arguments,
    check_capacity,
    render_for_model,
    resolve_id,
    unknown_tool_error,
)

#: State keys the middleware adds: the fallback session (kept with the thread) and the id
#: of the current invocation (rewritten by every invocation).
SESSION_STATE_KEY: Final = "loopwatch_session"
RUN_STATE_KEY: Final = "loopwatch_run"
#: ``additional_kwargs["lc_source"]`` of the summary message ``SummarizationMiddleware``
#: writes: its appearance is the framework's compaction event.
SUMMARY_SOURCE: Final = "summarization"

#: A session key, or a callable computing it from a ``ToolCallRequest`` / ``ModelRequest``.
SessionKeySource: TypeAlias = "str | Callable[[Any], object] | None"


class LoopwatchState(AgentState[Any]):
    """The agent state plus loopwatch's two private keys."""

    loopwatch_session: NotRequired[Annotated[str, PrivateStateAttr]]
    loopwatch_run: NotRequired[Annotated[str, PrivateStateAttr]]


ToolAnswer: TypeAlias = "ToolMessage | Command[Any]"
ModelAnswer: TypeAlias = "ModelResponse[Any] | AIMessage | ExtendedModelResponse[Any]"


def _text(content: object) -> str | None:
    """The text of a message's content, for matching error wordings."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [
            part if isinstance(part, str) else str(part.get("text", ""))
            for part in content
            if isinstance(part, (str, dict))
        ]
        return "\n".join(parts)
    return None


def _tool_message(answer: ToolAnswer, call_id: object) -> ToolMessage | None:
    """The message the model is shown for this call: the answer, or the matching
    ``ToolMessage`` of a ``Command``'s ``messages`` update."""
    if isinstance(answer, ToolMessage):
        return answer
    update = answer.update
    if isinstance(update, dict):
        for message in update.get("messages") or ():
            if isinstance(message, ToolMessage) and message.tool_call_id == call_id:
                return message
    return None


class _ToolMessages:
    """How LangChain shows a tool call to the model: a ``ToolMessage`` (SPEC §11.1)."""

    def __init__(self, name: str, call_id: str | None, *, unknown: bool) -> None:
        self.name = name
        self.call_id = call_id
        self.unknown = unknown

    def blocked(self, message: str) -> ToolAnswer:
        """An error ``ToolMessage`` with the blocked message; the tool never ran."""
        return ToolMessage(
            content=message, tool_call_id=self.call_id, name=self.name, status="error"
        )

    def outcome(self, answer: ToolAnswer) -> Outcome:
        """The content of the tool message; an error message is an error."""
        message = _tool_message(answer, self.call_id)
        if message is None:
            # A Command that shows the model nothing for this call (a handoff, a pure
            # state update): a real null result, never UNDEFINED.
            return Outcome(result=None)
        if message.status != "error":
            return Outcome(result=message.content)
        if self.unknown:
            # ToolNode's "X is not a valid tool" does not name the tool the way SPEC §3.5
            # reads it; record a wording that does.
            return Outcome(error=unknown_tool_error(self.name, _text(message.content)))
        return Outcome(error=message.content)

    def add_warning(self, answer: ToolAnswer, warning: str) -> ToolAnswer:
        """The tool message (also inside a ``Command``) with the warning appended."""
        if isinstance(answer, ToolMessage):
            content = append_warning(answer.content, warning)
            return answer.model_copy(update={"content": content})
        target = _tool_message(answer, self.call_id)
        if target is None or not isinstance(answer.update, dict):
            return answer
        warned = self.add_warning(target, warning)
        messages = [warned if m is target else m for m in answer.update["messages"]]
        return dataclasses.replace(answer, update={**answer.update, "messages": messages})

    def failed(self, error: Exception, warning: str) -> Exception:
        """The error itself: a tool error ``ToolNode`` does not turn into an error
        ``ToolMessage`` (those get the warning in :meth:`add_warning`) ends the run."""
        return error

    def passes(self, error: Exception) -> bool:
        """LangGraph's ``interrupt()`` (human in the loop) pauses the call; it runs again
        on resume."""
        return isinstance(error, GraphInterrupt)


def _allowed_tools(tools: Sequence[BaseTool | dict[str, Any]]) -> list[str]:
    names: list[str] = []
    for item in tools:
        if isinstance(item, BaseTool):
            names.append(item.name)
        elif isinstance(item, dict):
            function = item.get("function")
            name = item.get("name") or (
                function.get("name") if isinstance(function, dict) else None
            )
            if isinstance(name, str):
                names.append(name)
    return names


def _latest_summary_id(messages: Sequence[AnyMessage]) -> str | None:
    for message in reversed(messages):
        if (
            isinstance(message, HumanMessage)
            and message.additional_kwargs.get("lc_source") == SUMMARY_SOURCE
        ):
            return message.id or render_for_model(message.content)
    return None


def _conversation(state: Mapping[str, Any]) -> str | None:
    """The session of a graph that never ran :meth:`LoopGuardMiddleware.before_agent` (its
    hooks given to a ``ToolNode``, as in ``create_react_agent``) and has no thread: the
    id of the conversation's first message (LangGraph gives every message one), so each
    conversation is a session of its own instead of none (a ``None`` session skips the
    guard)."""
    messages = state.get("messages")
    if not isinstance(messages, Sequence) or not messages:
        return None
    first = getattr(messages[0], "id", None)
    return f"langgraph:{first}" if first else None


@dataclasses.dataclass
class _Turn:
    """What screening one model answer found: calls to decide or record after it."""

    session: object
    run: object
    #: The calls of each assistant message that goes on to the tool node.
    batches: list[list[ToolCall]] = dataclasses.field(default_factory=list)
    #: Calls of missing tools in messages the stream guard replaced.
    unknown: list[ToolCall] = dataclasses.field(default_factory=list)
    #: The texts that replaced those messages.
    stopped: list[str] = dataclasses.field(default_factory=list)


class LoopGuardMiddleware(AgentMiddleware[LoopwatchState, Any, Any]):
    """Guards every tool call of a LangChain v1 agent with a :class:`LoopGuard`.

    Args:
        guard: the guard (its config, store, listeners and shadow mode apply).
        session_key: the session of a call: a string, or a callable receiving the
            ``ToolCallRequest`` / ``ModelRequest`` (both have ``.state`` and
            ``.runtime``). Default: the thread id, else one session per invocation.
        agent_id: the agent, for ``openclaw_config`` per-agent blocks.
        warn_model: append an emitted warning to the tool message the model sees.
        on_critical: ``"block_call"`` (an error ``ToolMessage``; the run goes on),
            ``"end_run"`` (``invoke`` raises :class:`~loopwatch.LoopDetectedError`) or
            ``"recover"`` (a recovery message first, the error at the second critical).
        max_sessions: how many conversations' stream-guard state to keep.
    """

    state_schema = LoopwatchState

    def __init__(
        self,
        guard: LoopGuard,
        *,
        session_key: SessionKeySource = None,
        agent_id: str | None = None,
        warn_model: bool = True,
        on_critical: OnCritical = "block_call",
        max_sessions: int = 4096,
    ) -> None:
        check_adapter_arguments(guard, agent_id=agent_id, session_key=session_key)
        check_capacity("max_sessions", max_sessions)
        super().__init__()
        self.guard = guard
        self.agent_id = agent_id
        self.options = AdapterOptions(warn_model=warn_model, on_critical=on_critical)
        self._session_key = session_key
        self._streams = StreamGuards(guard, max_sessions=max_sessions)
        self._summaries: SessionCache[str] = SessionCache(max_sessions)
        self._admissions = Admissions(max_sessions)
        # The model messages a bare ToolNode's calls were admitted by (see
        # _tool_node_turn): True once admitted, or the admission under way (async).
        self._tool_node_turns: SessionCache[bool | asyncio.Future[bool]] = SessionCache(
            max_sessions
        )
        self._turn_lock = threading.Lock()

    # --- sessions and runs -----------------------------------------------------------------

    def _ids(self, request: ToolCallRequest | ModelRequest[Any]) -> tuple[object, object]:
        state = request.state if isinstance(request.state, dict) else {}
        info = request.runtime.execution_info if request.runtime is not None else None
        thread = info.thread_id if info is not None and info.thread_id else None
        session = resolve_id(
            self._session_key,
            request,
            default=thread or state.get(SESSION_STATE_KEY) or _conversation(state),
        )
        run = info.run_id if info is not None and info.run_id else state.get(RUN_STATE_KEY)
        return session, run

    def _new_ids(self, state: LoopwatchState) -> dict[str, Any]:
        update: dict[str, Any] = {RUN_STATE_KEY: uuid.uuid4().hex}
        if not state.get(SESSION_STATE_KEY):
            update[SESSION_STATE_KEY] = uuid.uuid4().hex
        return update

    def before_agent(self, state: LoopwatchState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        """Give the invocation its run id (and the conversation a fallback session)."""
        return self._new_ids(state)

    async def abefore_agent(
        self, state: LoopwatchState, runtime: Runtime[Any]
    ) -> dict[str, Any] | None:
        """Async twin of :meth:`before_agent`."""
        return self._new_ids(state)

    # --- tool calls --------------------------------------------------------------------------

    def _call(self, call: Any, session: object, run: object) -> ToolCall:
        return ToolCall(
            self.guard,
            call["name"],
            call.get("args", {}),
            session_key=session,
            run_id=run,
            tool_call_id=call.get("id"),
            agent_id=self.agent_id,
            options=self.options,
        )

    def _prepare(self, request: ToolCallRequest) -> tuple[ToolCall, _ToolMessages]:
        call = request.tool_call
        session, run = self._ids(request)
        tc = self._admissions.take(self._call(call, session, run))
        return tc, _ToolMessages(call["name"], call.get("id"), unknown=request.tool is None)

    def _tool_node_turn(self, request: ToolCallRequest) -> tuple[str, list[ToolCall]] | None:
        """The calls of the model message this call came in, when the hooks were given to
        a bare ``ToolNode`` (no ``before_agent``, so no ``wrap_model_call`` admitted them):
        a key for the message and its calls, or ``None``."""
        state = request.state if isinstance(request.state, dict) else {}
        if state.get(RUN_STATE_KEY):
            return None  # create_agent: the model hook admitted the turn
        call_id = request.tool_call.get("id")
        messages = state.get("messages")
        if not call_id or not isinstance(messages, Sequence):
            return None
        for message in reversed(messages):
            calls = message.tool_calls if isinstance(message, AIMessage) else []
            if any(call.get("id") == call_id for call in calls):
                if len(calls) < 2:
                    return None
                session, run = self._ids(request)
                key = "\x00".join([str(session), *(str(call.get("id")) for call in calls)])
                return key, [self._call(call, session, run) for call in calls]
        return None

    def wrap_tool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], ToolAnswer],
    ) -> ToolAnswer:
        """Guard one tool call (see the module docs)."""
        turn = self._tool_node_turn(request)
        if turn is not None:
            # A ToolNode runs a message's calls in threads: the first admits them all.
            with self._turn_lock:
                if self._tool_node_turns.get(turn[0]) is None:
                    self._tool_node_turns.put(turn[0], True)
                    self._admissions.admit(self.guard, turn[1])
        tc, translator = self._prepare(request)
        return guarded_call(tc, lambda: handler(request), translator)

    async def awrap_tool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], Awaitable[ToolAnswer]],
    ) -> ToolAnswer:
        """Async twin of :meth:`wrap_tool_call`."""
        turn = self._tool_node_turn(request)
        if turn is not None:
            admitting = self._tool_node_turns.get(turn[0])
            if not isinstance(admitting, asyncio.Future):
                admitting = asyncio.ensure_future(self._admissions.aadmit(self.guard, turn[1]))
                self._tool_node_turns.put(turn[0], admitting)
            await asyncio.shield(admitting)
        tc, translator = self._prepare(request)
        return await aguarded_call(tc, lambda: handler(request), translator)

    # --- model calls -------------------------------------------------------------------------

    def _new_summary(self, request: ModelRequest[Any], session: object) -> bool:
        """True the first time a conversation shows a given summary message."""
        if not isinstance(session, str):
            return False
        summary = _latest_summary_id(request.messages)
        if summary is None or self._summaries.get(session) == summary:
            return False
        self._summaries.put(session, summary)
        return True

    def _screen_message(
        self, message: BaseMessage, request: ModelRequest[Any], turn: _Turn
    ) -> BaseMessage:
        if not isinstance(message, AIMessage):
            return message
        allowed = _allowed_tools(request.tools)
        names: list[object] = [call.get("name") for call in message.tool_calls]
        names += [call.get("name") for call in message.invalid_tool_calls]
        text = self._streams.observe(turn.session, names, allowed, agent_id=self.agent_id)
        if text is None:
            turn.batches.append([self._call(c, turn.session, turn.run) for c in message.tool_calls])
            return message
        # The replaced message's calls never reach the tool node: decide and record the
        # missing tools' calls here, so the guard's block, its events and end_run happen.
        known = set(allowed)
        turn.unknown += [
            self._call(c, turn.session, turn.run)
            for c in message.tool_calls
            if c.get("name") not in known
        ]
        turn.stopped.append(text)
        return AIMessage(content=text, id=message.id, name=message.name)

    def _screen(
        self, response: ModelAnswer, request: ModelRequest[Any], turn: _Turn
    ) -> ModelAnswer:
        """Run the stream guard over the model's answer (SPEC §5.7)."""
        if isinstance(response, AIMessage):
            screened = self._screen_message(response, request, turn)
            return screened if isinstance(screened, AIMessage) else response
        if isinstance(response, ExtendedModelResponse):
            inner = self._screen(response.model_response, request, turn)
            if isinstance(inner, ModelResponse) and inner is not response.model_response:
                return dataclasses.replace(response, model_response=inner)
            return response
        result = [self._screen_message(m, request, turn) for m in response.result]
        if all(new is old for new, old in zip(result, response.result, strict=True)):
            return response
        return dataclasses.replace(response, result=result)

    def _stopped(self, turn: _Turn) -> None:
        name, count = self._streams.streak(turn.session)
        for text in turn.stopped:
            stream_stopped(
                text, name=name or "", count=count, session_key=turn.session, options=self.options
            )

    def wrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], ModelResponse[Any]],
    ) -> ModelAnswer:
        """Arm the post-compaction guard after a summary; screen the answer."""
        session, run = self._ids(request)
        if self._new_summary(request, session):
            self.guard.compaction_retry(session_key=session, run_id=run, agent_id=self.agent_id)
        turn = _Turn(session, run)
        answer = self._screen(handler(request), request, turn)
        for tc in turn.unknown:
            record_unknown(tc, unknown_tool_error(tc.tool_name))
        self._stopped(turn)
        for batch in turn.batches:
            self._admissions.admit(self.guard, batch)
        return answer

    async def awrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], Awaitable[ModelResponse[Any]]],
    ) -> ModelAnswer:
        """Async twin of :meth:`wrap_model_call`."""
        session, run = self._ids(request)
        if self._new_summary(request, session):
            await self.guard.acompaction_retry(
                session_key=session, run_id=run, agent_id=self.agent_id
            )
        turn = _Turn(session, run)
        answer = self._screen(await handler(request), request, turn)
        for tc in turn.unknown:
            await arecord_unknown(tc, unknown_tool_error(tc.tool_name))
        self._stopped(turn)
        for batch in turn.batches:
            await self._admissions.aadmit(self.guard, batch)
        return answer


__all__ = ["RUN_STATE_KEY", "SESSION_STATE_KEY", "LoopGuardMiddleware", "LoopwatchState"]
