"""Microsoft Agent Framework: function and chat middleware that guard an agent's tool calls.

::

    from agent_framework import Agent
    from loopwatch import LoopGuard
    from loopwatch.integrations.agent_framework import loopguard_middleware

    agent = Agent(client=client, tools=[read_file],
                  middleware=loopguard_middleware(LoopGuard({"enabled": True})))
    session = agent.create_session()
    await agent.run("Summarise notes.txt", session=session)

:func:`loopguard_middleware` returns these middleware (SPEC §11):

* :class:`LoopGuardFunctionMiddleware` (a ``FunctionMiddleware``) guards every call of a
  function tool. A blocked call gets the blocked message as its result and the function is
  not run. What the model is shown (the text of the result's contents) is recorded, then an
  emitted warning is added as one more text content. A raised exception is recorded as the
  call's error and re-raised (the framework shows the model ``Error: Function failed.``);
  when a warning is emitted for it, the result becomes that error text plus the warning.
* :class:`LoopGuardChatMiddleware` (a ``ChatMiddleware``) sees each model response. The
  framework answers a call of a tool the agent does not have itself, without any function
  middleware, so this middleware records such calls as failed calls naming the tool and runs
  the stream-level :class:`~loopwatch.UnknownToolStreamGuard` (SPEC §5.7). A response whose
  call of a missing tool the guard blocks is replaced by the blocked message as a plain
  answer (the framework could only say "not found"), and so is one the stream guard stops.
  The framework runs one response's calls concurrently, so the chat middleware also admits
  them together (``guard.abefore_batch``) for the function middleware to take: identical
  calls of one response count as the repeats they are, and one critical blocks them all.
  A streamed run (``agent.run(..., stream=True)``) is screened the same way, on the stream's
  final response, which the framework invokes functions from; updates already streamed are
  left as they came (a replaced turn's calls stay in them, never answered).
* :class:`LoopGuardAgentMiddleware` (an ``AgentMiddleware``) gives each run without an
  ``AgentSession`` a session of its own (see Sessions below).

A ``guard.tool`` function used as a tool of the agent, with the same guard and session,
passes its calls through: each call is guarded and recorded once (by the middleware).

Sessions: the session is the ``AgentSession``'s ``session_id``; a run without a session is a
session of its own (:class:`LoopGuardAgentMiddleware`, the third middleware of
:func:`loopguard_middleware`; without it, every sessionless run shares ``"agent-framework"``),
or ``session_key`` when given (a string, or a callable taking the middleware context). The
framework has no per-run id visible to middleware, so no run id is recorded unless ``run_id``
is given. A host that compacts the conversation calls ``guard.compaction_retry(session_key=...)``.

``on_critical="end_run"`` raises :class:`LoopDetectedFailure`, which is both a
:class:`~loopwatch.LoopDetectedError` and the framework's ``MiddlewareFailure`` (the signal
that aborts the run instead of becoming a tool error), out of ``agent.run``.
"""

from __future__ import annotations

import contextvars
import uuid
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Final, TypeAlias

from agent_framework import (
    AgentContext,
    AgentMiddleware,
    BaseChatClient,
    ChatContext,
    ChatMiddleware,
    ChatResponse,
    ChatResponseUpdate,
    Content,
    FunctionInvocationContext,
    FunctionMiddleware,
    Message,
    ResponseStream,
)
from agent_framework._middleware import ChatMiddlewareLayer, MiddlewareFailure
from agent_framework._tools import FunctionInvocationLayer

from loopwatch import LoopVerdict
from loopwatch.adapter import (
    WARNING_SEPARATOR,
    AdapterOptions,
    Admissions,
    OnCritical,
    StreamGuards,
    ToolCall,
    unknown_tool_error,
)
from loopwatch.errors import LoopDetectedError
from loopwatch.guard import LoopGuard
from loopwatch.integrations._shared import check_adapter_arguments, note_warned
from loopwatch.testing import LoopScript

#: A session key or run id: fixed, or computed from the middleware's context.
IdSource: TypeAlias = "str | Callable[[Any], object] | None"

#: The session of runs without an ``AgentSession`` when no ``session_key`` is given and
#: no :class:`LoopGuardAgentMiddleware` gave the run a session of its own.
DEFAULT_SESSION: Final = "agent-framework"
#: The session :class:`LoopGuardAgentMiddleware` gave the current run without an
#: ``AgentSession``.
_RUN_SESSION: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "loopwatch_agent_framework_run_session", default=None
)
#: What the framework shows the model for a function that raised (without detailed errors).
FUNCTION_FAILED: Final = "Error: Function failed."


class LoopDetectedFailure(LoopDetectedError, MiddlewareFailure):
    """A :class:`~loopwatch.LoopDetectedError` the framework lets through to the caller."""

    def __init__(self, verdict: LoopVerdict) -> None:
        LoopDetectedError.__init__(self, verdict)


def _texts(result: object) -> object:
    """What the model is shown for a function result: the text of its contents."""
    if isinstance(result, list) and all(isinstance(c, Content) for c in result):
        return [c.text if c.type == "text" else c.to_dict() for c in result]
    return result


def _text_response(text: str) -> ChatResponse:
    return ChatResponse(messages=[Message(role="assistant", contents=[text])])


class _Ids:
    """Session and run resolution shared by both middleware."""

    def __init__(
        self, guard: LoopGuard, session_key: IdSource, run_id: IdSource, agent_id: str | None
    ) -> None:
        check_adapter_arguments(guard, agent_id=agent_id, session_key=session_key, run_id=run_id)
        self.guard = guard
        self.session_key = session_key
        self.run_id = run_id
        self.agent_id = agent_id

    def ids(self, context: Any) -> tuple[object, object]:
        session = self.session_key(context) if callable(self.session_key) else self.session_key
        if session is None:
            agent_session = getattr(context, "session", None)
            if agent_session is not None:
                session = agent_session.session_id
            else:
                session = _RUN_SESSION.get() or DEFAULT_SESSION
        run = self.run_id(context) if callable(self.run_id) else self.run_id
        return session, run


async def _start(tc: ToolCall) -> None:
    try:
        await tc.astart()
    except LoopDetectedError as exc:
        raise LoopDetectedFailure(exc.verdict) from None


class LoopGuardFunctionMiddleware(FunctionMiddleware):
    """Guards every function-tool call (see the module docs).

    Args:
        guard: the guard (its config, store, listeners and shadow mode apply).
        session_key: the conversation (default: the ``AgentSession``'s id).
        run_id: the agent run (default: none).
        agent_id: the agent, for ``openclaw_config`` per-agent blocks.
        warn_model: add an emitted warning to what the model reads.
        on_critical: ``"block_call"``, ``"end_run"`` (raise :class:`LoopDetectedFailure`)
            or ``"recover"`` (the run's second critical raises it).
        admissions: the decisions of whole model responses, shared with the
            :class:`LoopGuardChatMiddleware` that admits them (:func:`loopguard_middleware`
            wires both).
    """

    def __init__(
        self,
        guard: LoopGuard,
        *,
        session_key: IdSource = None,
        run_id: IdSource = None,
        agent_id: str | None = None,
        warn_model: bool = True,
        on_critical: OnCritical = "block_call",
        admissions: Admissions | None = None,
    ) -> None:
        self._ids = _Ids(guard, session_key, run_id, agent_id)
        self.options = AdapterOptions(warn_model=warn_model, on_critical=on_critical)
        self._admissions = admissions if admissions is not None else Admissions()

    async def process(
        self, context: FunctionInvocationContext, call_next: Callable[[], Awaitable[None]]
    ) -> None:
        """Guard one call: block it, or run it, record it and add an emitted warning."""
        session, run = self._ids.ids(context)
        tc = self._admissions.take(
            ToolCall(
                self._ids.guard,
                context.function.name,
                dict(context.arguments),
                session_key=session,
                run_id=run,
                tool_call_id=context.metadata.get("call_id"),
                agent_id=self._ids.agent_id,
                options=self.options,
            )
        )
        await _start(tc)
        if tc.blocked:
            context.result = tc.message
            return
        try:
            # While the function runs, a guard.tool function used as the tool (same guard
            # and session) passes the call through instead of guarding and recording it a
            # second time, which would count each call twice and, recording the warned
            # text as the outcome, keep the identical-outcome block from ever coming.
            with tc.scope():
                await call_next()
        except (MiddlewareFailure, LoopDetectedError):
            raise
        except Exception as exc:
            tc.error(exc)
            await tc.afinish()
            if tc.warning is None:
                raise
            context.result = f"{FUNCTION_FAILED}{WARNING_SEPARATOR}{tc.warning}"
            note_warned(context.result, tc.inner_original(exc))
            return
        # Without the warnings inner layers of another guard appended (a second
        # loopguard_middleware, a guard.tool function of another guard as the tool).
        original = tc.inner_original(context.result)
        if isinstance(original, Exception):
            tc.error(original)  # an inner middleware's answer for a failure it warned
        else:
            shown = _texts(original)
            parts = [tc.inner_original(part) for part in shown] if isinstance(shown, list) else None
            tc.result(shown if parts is None else parts)
        await tc.afinish()
        warning = tc.warning
        if warning is not None:
            result = context.result
            if isinstance(result, list):
                context.result = [*result, Content.from_text(warning)]
            else:
                context.result = f"{result}{WARNING_SEPARATOR}{warning}"
            note_warned(context.result, tc.inner_original(result))


class LoopGuardChatMiddleware(ChatMiddleware):
    """Records calls of tools the agent does not have, runs the stream guard, and admits
    the calls of one model response together.

    Takes the same arguments as :class:`LoopGuardFunctionMiddleware` (``warn_model`` has
    nothing to add to here). The framework runs a response's function calls concurrently,
    so each would be decided before any sibling has an outcome; with ``admissions`` shared
    with the function middleware, a response of two or more calls of the agent's tools is
    decided here at once (``guard.abefore_batch``): identical calls count as the repeats
    they are, and one critical blocks them all.
    """

    def __init__(
        self,
        guard: LoopGuard,
        *,
        session_key: IdSource = None,
        run_id: IdSource = None,
        agent_id: str | None = None,
        on_critical: OnCritical = "block_call",
        admissions: Admissions | None = None,
    ) -> None:
        self._ids = _Ids(guard, session_key, run_id, agent_id)
        self.options = AdapterOptions(on_critical=on_critical)
        self.streams = StreamGuards(guard)
        self._admissions = admissions

    async def process(self, context: ChatContext, call_next: Callable[[], Awaitable[None]]) -> None:
        """Screen the model's response for calls of missing tools."""
        await call_next()
        response = context.result
        if isinstance(response, ChatResponse):
            replaced = await self._screen(context, response)
            if replaced is not None:
                context.result = replaced
        elif isinstance(response, ResponseStream):
            # A streamed response (``agent.run(..., stream=True)``): its calls are known once
            # the stream is consumed. The framework invokes functions from the stream's final
            # response, so the same screening runs as a result hook there; without it, calls
            # of missing tools went unrecorded and a response's calls were not admitted
            # together (a stuck model read "not found" until the iteration limit).

            async def screen(final: ChatResponse[Any]) -> ChatResponse[Any] | None:
                return await self._screen(context, final)

            response.with_result_hook(screen)

    async def _screen(
        self, context: ChatContext, response: ChatResponse[Any]
    ) -> ChatResponse | None:
        """Record calls of missing tools, run the stream guard and admit the runnable calls
        together; the plain answer that replaces ``response``, if any."""
        known = [getattr(t, "name", None) for t in (context.options or {}).get("tools") or ()]
        calls = [c for m in response.messages for c in m.contents if c.type == "function_call"]
        session, run = self._ids.ids(context)
        for call in (c for c in calls if c.name not in known):
            tc = ToolCall(
                self._ids.guard,
                str(call.name),
                call.parse_arguments() or {},
                session_key=session,
                run_id=run,
                tool_call_id=call.call_id,
                agent_id=self._ids.agent_id,
                options=self.options,
            )
            await _start(tc)
            if tc.blocked:
                # The framework would answer the call itself: answer the turn instead.
                return _text_response(str(tc.message))
            tc.error(unknown_tool_error(str(call.name)))
            await tc.afinish()
        text = self.streams.observe(
            session, [c.name for c in calls], [k for k in known if k], agent_id=self._ids.agent_id
        )
        if text is not None:
            return _text_response(text)
        runnable = [c for c in calls if c.name in known]
        if self._admissions is not None and len(runnable) >= 2:
            batch = [
                ToolCall(
                    self._ids.guard,
                    str(call.name),
                    call.parse_arguments() or {},
                    session_key=session,
                    run_id=run,
                    tool_call_id=call.call_id,
                    agent_id=self._ids.agent_id,
                    options=self.options,
                )
                for call in runnable
            ]
            await self._admissions.aadmit(self._ids.guard, batch)
        return None


class LoopGuardAgentMiddleware(AgentMiddleware):
    """Gives each run without an ``AgentSession`` a session of its own.

    Such a run starts a new conversation (the framework keeps no history for it), so its
    calls are not the repeats of another run's: without this middleware every sessionless
    run of the process shared :data:`DEFAULT_SESSION`, and independent healthy runs that
    each read the same file once were warned at the 11th run and blocked from the 21st.
    """

    async def process(
        self, context: AgentContext, call_next: Callable[[], Awaitable[None]]
    ) -> None:
        """Run the agent, in a fresh session when it has no ``AgentSession``."""
        if context.session is not None:
            await call_next()
            return
        token = _RUN_SESSION.set(f"{DEFAULT_SESSION}:{uuid.uuid4().hex}")
        await call_next()
        if not context.stream:
            # A streamed run is consumed after this returns: its session stays set in this
            # context (the next sessionless run sets its own).
            _RUN_SESSION.reset(token)


def loopguard_middleware(
    guard: LoopGuard,
    *,
    session_key: IdSource = None,
    run_id: IdSource = None,
    agent_id: str | None = None,
    warn_model: bool = True,
    on_critical: OnCritical = "block_call",
) -> list[AgentMiddleware | FunctionMiddleware | ChatMiddleware]:
    """The middleware for one guard, for ``Agent(middleware=...)``: the function and chat
    middleware, sharing the decisions of whole model responses, and the agent middleware
    that gives each run without an ``AgentSession`` a session of its own."""
    ids: dict[str, Any] = {
        "session_key": session_key,
        "run_id": run_id,
        "agent_id": agent_id,
        "admissions": Admissions(),
    }
    return [
        LoopGuardAgentMiddleware(),
        LoopGuardFunctionMiddleware(guard, warn_model=warn_model, on_critical=on_critical, **ids),
        LoopGuardChatMiddleware(guard, on_critical=on_critical, **ids),
    ]


# --- a scripted offline model --------------------------------------------------------------


class ScriptedChatClient(
    FunctionInvocationLayer[Any], ChatMiddlewareLayer[Any], BaseChatClient[Any]
):
    """A chat client that plays a :class:`~loopwatch.testing.LoopScript`, offline.

    It invokes functions and runs chat and function middleware like the framework's own
    clients. ``max_iterations`` is raised so a long script is not cut short.
    """

    def __init__(self, script: LoopScript | None = None, **kwargs: Any) -> None:
        self.script = script if script is not None else LoopScript()
        config: Any = kwargs.pop("function_invocation_configuration", None) or {}
        config.setdefault("max_iterations", self.script.times + 5)
        config.setdefault("max_consecutive_errors_per_request", self.script.times + 5)
        super().__init__(function_invocation_configuration=config, **kwargs)
        self._calls = 0
        #: The function results the model read at its latest turn.
        self.read: list[Any] = []

    def _inner_get_response(
        self, *, messages: Sequence[Message], stream: bool, options: Any, **kwargs: Any
    ) -> Awaitable[ChatResponse] | ResponseStream[ChatResponseUpdate, ChatResponse]:
        """The script's next turn; for ``stream=True`` (``agent.run(..., stream=True)``) a
        stream of one update per message of it."""
        if not stream:
            return self._respond(messages)

        async def updates() -> Any:
            response = await self._respond(messages)
            for message in response.messages:
                yield ChatResponseUpdate(role="assistant", contents=list(message.contents))

        return ResponseStream(updates(), finalizer=ChatResponse.from_updates)

    async def _respond(self, messages: Sequence[Message]) -> ChatResponse:
        read = [c.result for m in messages for c in m.contents if c.type == "function_result"]
        self.read = read
        steps = self.script.next_calls(read)
        if not steps:
            return _text_response(self.script.final)
        calls = []
        for name, args in steps:
            self._calls += 1
            calls.append(
                Content.from_function_call(call_id=f"call-{self._calls}", name=name, arguments=args)
            )
        return ChatResponse(messages=[Message(role="assistant", contents=calls)])


__all__ = [
    "DEFAULT_SESSION",
    "FUNCTION_FAILED",
    "LoopDetectedFailure",
    "LoopGuardAgentMiddleware",
    "LoopGuardChatMiddleware",
    "LoopGuardFunctionMiddleware",
    "ScriptedChatClient",
    "loopguard_middleware",
]
