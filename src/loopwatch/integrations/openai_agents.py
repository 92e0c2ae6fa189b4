"""OpenAI Agents SDK: tool guardrails that put a :class:`LoopGuard` around function tools.

::

    from agents import Agent, RunConfig, Runner
    from loopwatch import LoopGuard
    from loopwatch.integrations.openai_agents import guard_agent

    guard = LoopGuard({"enabled": True})
    agent = guard_agent(Agent(name="assistant", tools=[read_file]), guard)
    await Runner.run(agent, "...", run_config=RunConfig(group_id="conversation-42"))

:func:`guard_agent` returns a copy of the agent whose every ``FunctionTool`` carries
loopwatch's tool *input* guardrail (first, so a block wins) and tool *output* guardrail
(last, so your own output guardrails still see every result). The SDK's guardrails are
the hook it offers around each function call:

* the input guardrail asks the guard; a blocked call is rejected with the blocked message,
  which is what the model reads, and the tool is not run;
* the output guardrail records what the model will read (SPEC §11.1) and, for an emitted
  warning, replaces the output with the same text plus the warning (SPEC §11.2). (The SDK
  calls that a rejection: ``reject_content`` is its only way to change an output.)
* the tool's own guardrails (and an MCP server's) run between the two, and the SDK stops at
  the first one that rejects: when one of them refuses the call or rewrites its output,
  the copy records the text it answered with (what the model reads) and appends an
  emitted warning to it, so such a tool is still guarded. Guarded twice (two guards), the
  outer guard records the output without the inner guard's warning.

``on_critical="end_run"`` raises :class:`LoopDetectedRunError` (a
:class:`~loopwatch.LoopDetectedError` and an ``agents.AgentsException``, so the SDK lets it
through instead of wrapping it in ``UserError``) out of ``Runner.run``. The post-compaction
abort likewise surfaces as :class:`PostCompactionRunError`.

Sessions: the session is ``RunConfig.group_id`` (the SDK's "conversation or thread id");
without one, the current trace id when tracing is on (one session per run); otherwise the
guard is skipped (it logs ``tool loop detection skipped: no session key`` once). The run
is the trace id when there is a real trace. Pass ``session_key=`` / ``run_id=`` (strings
or callables taking the ``ToolContext``) to choose yourself.

A raised error is recorded as the error (SPEC §11.1): the guarded copy's failure policy
answers the model exactly as the tool's own does, and hands the exception to the output
guardrail. An emitted warning is appended to the error text the model reads.

:func:`guard_agent` also adds an ``on_llm_end`` agent hook (around the agent's own hooks),
which sees each model response before its tools run: the function calls of one response
are admitted together (``guard.before_batch``, when the guard has it: identical calls of
one turn count as the repeats they are), and calls of tools the agent does not have are
recorded as failed calls, so a model stuck on a missing tool is blocked (evented, and
ending the run under ``end_run``). The SDK itself ends the run at the first missing tool
unless ``RunConfig(tool_not_found_behavior="return_error_to_model")``; it then answers
such calls itself, with the text of ``RunConfig.tool_error_formatter`` (``kind=
"tool_not_found"``), the only place the SDK lets a host choose what the model reads for
them. Pass :func:`tool_error_formatter` there, and the model reads loopwatch's warning
(after the SDK's text) and blocked message for those calls; without it, the model keeps
reading the SDK's "not found" text under ``block_call`` (the block is still recorded,
evented and logged). The hook needs a session it can see outside a tool call: a
``session_key=`` string, the trace's ``group_id``, or a trace id. With tracing off and only
``RunConfig.group_id``, the hook keeps the response's calls and the first of them to reach
its input guardrail (which sees the group id) admits them all; calls of missing tools then
go unrecorded.

A ``guard.tool`` function used as a function tool of the guarded agent, with the same
guard and session, passes its calls through: they are guarded and recorded once.
``on_critical="recover"`` rejects the first critical of a run with a recovery message and
ends the run (``LoopDetectedRunError``) at the second.

The tools of the agent's own MCP servers (``Agent(mcp_servers=[...])``) are function tools
the SDK lists at each turn: the copy guards them as they are listed. Handoffs: the agents a
guarded agent hands off to are guarded copies too (the same guardrails, so one session, one
``tool_error_formatter`` for the run, their MCP servers' tools included); an agent
``guard_agent`` already returned is kept. Not covered, by the SDK's design: tools of hosted
MCP servers (``HostedMCPTool``, run by OpenAI), and the tools of an agent used as a tool
(``Agent.as_tool``) unless you guard that agent before calling ``as_tool`` on it.

The SDK has no compaction hook for tools: when you compact a session (for example
``OpenAIResponsesCompactionSession.run_compaction``) and run again, call
``guard.compaction_retry(session_key=..., run_id=...)``. The guarded copy's failure policy
is no longer the SDK's *default* one, so ``RunConfig.tool_error_formatter`` is asked by
loopwatch (same arguments), and the copy marks the default error text as the SDK does, so
it still bypasses a structured output schema (``output_type`` / ``output_json_schema``)
instead of failing the run. A blocked call never runs the tool and its message bypasses the
schema too (the SDK's rule for a rejection); a warning is appended to the result's JSON as
the SDK sends it, except for calls made by a hosted program, whose output is left to its
schema.
"""

from __future__ import annotations

import asyncio
import contextvars
import dataclasses
import inspect
import json
import weakref
from collections.abc import Callable, Iterable
from typing import Any, Final, TypeAlias, TypeVar

from agents import (
    Agent,
    AgentHooks,
    AgentsException,
    FunctionTool,
    Handoff,
    ItemHelpers,
    ModelResponse,
    RunContextWrapper,
    ToolGuardrailFunctionOutput,
    ToolInputGuardrail,
    ToolInputGuardrailData,
    ToolOutputGuardrail,
    ToolOutputGuardrailData,
    get_current_trace,
)
from agents import tool as agents_tool
from agents.run_config import ToolErrorFormatter, ToolErrorFormatterArgs
from agents.tool import (
    Tool,
    resolve_function_tool_failure_error_function,
    set_function_tool_failure_error_function,
)
from agents.tool_context import ToolContext
from openai.types.responses import ResponseFunctionToolCall

from loopwatch.calls import ToolCall
from loopwatch.detectors.compaction import PostCompactionLoopPersistedError
from loopwatch.detectors.reference import LoopVerdict
from loopwatch.errors import LoopDetectedError
from loopwatch.guard import LoopGuard
from loopwatch.integrations._guarded import Admissions, arecord_unknown
from loopwatch.integrations._sessions import SessionCache
from loopwatch.integrations._shared import (
    AdapterOptions,
    OnCritical,
    Outcome,
    append_warning,
    append_warning_text,
    check_adapter_arguments,
    check_capacity,
    enter_guarding,
    leave_guarding,
    render_for_model,
    resolve_id,
    unknown_tool_error,
)

TContext = TypeVar("TContext")

#: A session key or run id: fixed, or computed from the call's ``ToolContext``.
IdSource: TypeAlias = "str | Callable[[ToolContext[Any]], object] | None"

#: What the model is to read for a call of a missing tool: the blocked message, or the
#: warning to append to the SDK's text (``None`` for none).
_MissingNote: TypeAlias = "tuple[str | None, str | None]"

#: The id of the SDK's stand-in trace when tracing is off: not a run.
_NO_OP_TRACE: Final = "no-op"
#: Attributes of the function of a tool's own guardrail as a guarded copy runs it: the
#: guardrails that wrapped it and the guardrail itself (see ``LoopGuardrails._watched``).
_WATCHED_BY: Final = "_loopwatch_watched_by"
_WATCHED_GUARDRAIL: Final = "_loopwatch_guardrail"
_Guardrail = TypeVar("_Guardrail", ToolInputGuardrail[Any], ToolOutputGuardrail[Any])

#: Name of loopwatch's guardrails in the SDK's guardrail results.
GUARDRAIL_NAME: Final = "loopwatch"
#: The ``ToolContext`` attribute by which the SDK knows that its default failure policy
#: produced the call's output (``agents.tool``), so the text skips the output schema.
_DEFAULT_FAILURE_HANDLED: Final = getattr(
    agents_tool, "_DEFAULT_FAILURE_HANDLED_ATTR", "_function_tool_default_failure_handled"
)


class LoopDetectedRunError(LoopDetectedError, AgentsException):
    """:class:`LoopDetectedError` in a form the Agents SDK propagates unchanged.

    The SDK wraps exceptions raised around a tool in ``UserError``, except its own
    ``AgentsException``; this class is both, so ``except LoopDetectedError`` works.
    """

    def __init__(self, verdict: LoopVerdict) -> None:
        LoopDetectedError.__init__(self, verdict)
        self.run_data = None


class PostCompactionRunError(PostCompactionLoopPersistedError, AgentsException):
    """:class:`PostCompactionLoopPersistedError` in a form the Agents SDK propagates."""

    def __init__(self, error: PostCompactionLoopPersistedError) -> None:
        PostCompactionLoopPersistedError.__init__(
            self,
            error.message,
            count=error.count,
            tool_name=error.tool_name,
            detector=error.detector,
            record=error.record,
            verdict=error.verdict,
        )
        self.run_data = None


def _params(arguments: str) -> object:
    """The call's arguments as the model sent them (the raw text when it is not JSON)."""
    if not arguments.strip():
        return {}
    try:
        return json.loads(arguments)
    except (ValueError, RecursionError):  # not JSON, or nested past the parser's depth
        return arguments


def _guarded_tool(agent: Agent[Any], name: str) -> FunctionTool | None:
    """The function tool ``name`` of ``agent`` (the guarded copy), if it is one."""
    for tool in agent.tools:
        if isinstance(tool, FunctionTool) and tool.name == name:
            return tool
    return None


def _programmatic(call: object) -> bool:
    """True for a call made by a hosted program (``caller.type == "program"``), not the
    model: the SDK holds such calls of a tool with an output schema to that schema."""
    caller = getattr(call, "caller", None)
    kind = caller.get("type") if isinstance(caller, dict) else getattr(caller, "type", None)
    return kind == "program"


def _shown(output: Any, context: ToolContext[Any], tool: FunctionTool | None) -> object:
    """What the model reads for ``output``, as the SDK converts it (SPEC §11.1): for a tool
    with an output schema, the validated JSON the SDK sends."""
    schema = tool.output_json_schema if tool is not None else None
    adapter = getattr(tool, "_output_type_adapter", None)
    if isinstance(output, str) and schema is None and adapter is None:
        return output
    call = context.tool_call
    if isinstance(call, ResponseFunctionToolCall):
        try:
            item = ItemHelpers.tool_call_output_item(
                call, output, output_json_schema=schema, output_type_adapter=adapter
            )
            return item["output"]
        except Exception:
            # An output the SDK cannot convert fails the run right after this guardrail;
            # its text is the best record of it meanwhile.
            pass
    return str(output)


def _real_trace_id() -> str | None:
    trace = get_current_trace()
    trace_id = trace.trace_id if trace is not None else None
    return trace_id if trace_id and trace_id != _NO_OP_TRACE else None


def _trace_group() -> str | None:
    group = getattr(get_current_trace(), "group_id", None)
    return group if isinstance(group, str) and group else None


def _missing_tool_message(name: str) -> str:
    """The SDK's answer to a call of a tool the agent does not have."""
    return f"Tool '{name}' not found."


async def _known_names(agent: Agent[Any], context: RunContextWrapper[Any]) -> set[str] | None:
    """The names the model may call: the agent's tools and handoffs (``None`` if unknown)."""
    try:
        names = {tool.name for tool in await agent.get_all_tools(context)}
    except Exception:
        return None
    for target in agent.handoffs:
        names.add(
            target.tool_name if isinstance(target, Handoff) else Handoff.default_tool_name(target)
        )
    return names


@dataclasses.dataclass
class _Turn:
    """The function calls of one model response, (name, arguments, call id) each, until
    one of them admits them all."""

    calls: list[tuple[str, str, str]]
    admitting: asyncio.Future[bool] | None = None

    def holds(self, context: ToolContext[Any]) -> bool:
        """True when ``context`` is one of these calls (not a later one reusing its id)."""
        call = (context.tool_name, context.tool_arguments, context.tool_call_id)
        return call in self.calls


class LoopGuardrails:
    """The pair of tool guardrails that guards function tools with one :class:`LoopGuard`.

    Use :func:`guard_agent` for a whole agent, :meth:`apply` for one tool, or attach
    :attr:`input` and :attr:`output` to tools yourself (input first, output last).

    Args:
        guard: the guard (its config, store, listeners and shadow mode apply).
        session_key: the conversation: a string or a callable taking the ``ToolContext``
            (default: ``RunConfig.group_id``, else the trace id).
        run_id: the agent run, likewise (default: the trace id, when tracing is on).
        agent_id: the agent, for ``openclaw_config`` per-agent blocks.
        warn_model: append an emitted warning to the output the model reads.
        on_critical: ``"block_call"`` (reject the call with the message; the run goes on),
            ``"end_run"`` (raise :class:`LoopDetectedRunError` out of ``Runner.run``) or
            ``"recover"`` (a recovery message first, the error at the second critical).
        max_pending: how many started calls to remember until their output arrives.
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
        max_pending: int = 4096,
    ) -> None:
        check_adapter_arguments(guard, agent_id=agent_id, session_key=session_key, run_id=run_id)
        check_capacity("max_pending", max_pending)
        self.guard = guard
        self.agent_id = agent_id
        self.options = AdapterOptions(warn_model=warn_model, on_critical=on_critical)
        self._session_key = session_key
        self._run_id = run_id
        # Calls between their input and output guardrail, by session and call id: the
        # SDK may run input guardrails twice for one call (before and after approval).
        self._pending: SessionCache[ToolCall] = SessionCache(max_pending)
        # Exceptions the tool raised, by the same key, until the output guardrail records
        # them as the call's error (the SDK hands the guardrail only the error text).
        self._errors: SessionCache[Exception] = SessionCache(max_pending)
        self._admissions = Admissions(max_pending)
        # The calls of a response seen when no session was visible there (tracing off, the
        # session only in RunConfig.group_id), by call id: the first of them to reach its
        # input guardrail, which sees the session, admits them all.
        self._turns: SessionCache[_Turn] = SessionCache(max_pending)
        self._marks: SessionCache[contextvars.Token[Any]] = SessionCache(max_pending)
        # What the model is to read for the calls of missing tools of each run (its
        # context, which the SDK hands the tool error formatter too), by call id.
        self._missing: weakref.WeakKeyDictionary[
            RunContextWrapper[Any], dict[str, _MissingNote]
        ] = weakref.WeakKeyDictionary()
        self._max_pending = max_pending
        # The guardrails of agents this one hands off to that were guarded on their own
        # (guard_agent keeps them): the run has one tool error formatter for all agents.
        self._linked: list[LoopGuardrails] = []
        self.input: ToolInputGuardrail[Any] = ToolInputGuardrail(self._before, name=GUARDRAIL_NAME)
        self.output: ToolOutputGuardrail[Any] = ToolOutputGuardrail(
            self._after, name=GUARDRAIL_NAME
        )

    def _ids(self, context: RunContextWrapper[Any]) -> tuple[object, object]:
        trace_id = _real_trace_id()
        run_config = getattr(context, "run_config", None)
        group = run_config.group_id if run_config is not None else _trace_group()
        session = resolve_id(self._session_key, context, default=group or trace_id)
        return session, resolve_id(self._run_id, context, default=trace_id)

    @staticmethod
    def _key(session: object, context: ToolContext[Any]) -> str:
        return f"{session}\x00{context.tool_call_id}"

    def _call(
        self, name: str, arguments: str, call_id: object, session: object, run: object
    ) -> ToolCall:
        return ToolCall(
            self.guard,
            name,
            _params(arguments),
            session_key=session,
            run_id=run,
            tool_call_id=call_id,
            agent_id=self.agent_id,
            options=self.options,
        )

    async def _before(self, data: ToolInputGuardrailData) -> ToolGuardrailFunctionOutput:
        context = data.context
        session, run = self._ids(context)
        key = self._key(session, context)
        if self._pending.get(key) is not None:
            return ToolGuardrailFunctionOutput.allow()
        await self._admit_turn(context, session, run)
        tc = self._admissions.take(
            self._call(
                context.tool_name, context.tool_arguments, context.tool_call_id, session, run
            )
        )
        try:
            decision = await tc.astart()
        except LoopDetectedError as exc:
            raise LoopDetectedRunError(exc.verdict) from None
        if tc.blocked:
            return ToolGuardrailFunctionOutput.reject_content(
                tc.message or "", output_info=decision
            )
        self._pending.put(key, tc)
        if not tc.passthrough:
            # The SDK runs each call in a task of its own and the tool in a task created
            # after the input guardrails, from this one's context: a guard.tool function
            # inside then passes the call through instead of recording it twice. The mark
            # dies with this call's task (and is undone below where the context allows).
            self._marks.put(key, enter_guarding(self.guard, session, context.tool_name))
        return ToolGuardrailFunctionOutput.allow(output_info=decision)

    async def _admit_turn(self, context: ToolContext[Any], session: object, run: object) -> None:
        """Admit the response this call came in, if :meth:`on_model_response` could not."""
        turn = self._turns.pop(str(context.tool_call_id))
        if turn is None or not turn.holds(context):
            return
        if turn.admitting is None:
            batch = [self._call(*call, session, run) for call in turn.calls]
            turn.admitting = asyncio.ensure_future(self._admissions.aadmit(self.guard, batch))
        # Every call of the turn waits for the one admission (shielded: a cancelled call
        # leaves it to the others).
        await asyncio.shield(turn.admitting)

    async def _after(self, data: ToolOutputGuardrailData) -> ToolGuardrailFunctionOutput:
        return await self._finish(data.context, data.agent, data.output)

    async def _finish(
        self,
        context: ToolContext[Any],
        agent: Agent[Any],
        output: Any,
        *,
        rejected: ToolGuardrailFunctionOutput | None = None,
        decorated: bool = False,
    ) -> ToolGuardrailFunctionOutput:
        """Record the call's outcome (``output``, or the text another guardrail of the tool
        answered it with, ``rejected``) and append an emitted warning to what the model
        reads. ``decorated``: ``rejected`` is ``output`` with another loopwatch guard's
        warning appended, so ``output`` is recorded."""
        session, _run = self._ids(context)
        key = self._key(session, context)
        tc = self._pending.pop(key)
        error = self._errors.pop(key)
        mark = self._marks.pop(key)
        if mark is not None:
            leave_guarding(mark)
        allowed = rejected or ToolGuardrailFunctionOutput.allow()
        if tc is None:
            return allowed
        tool = _guarded_tool(agent, context.tool_name)
        message = str(rejected.behavior.get("message", "")) if rejected is not None else None
        if message is not None and not decorated:
            # The model reads the other guardrail's text instead of the output.
            error, output = None, message
        # A failure's text reaches the model as it is (the SDK bypasses the output schema
        # for it); a result, converted as the SDK converts it.
        if error is not None or (message is not None and not decorated):
            shown: object = str(output)
        else:
            shown = _shown(output, context, tool)
        # A raised error is recorded as the error (SPEC §11.1), not as the SDK's text.
        tc.outcome(Outcome(result=shown) if error is None else Outcome(error=error))
        try:
            await tc.afinish()
        except PostCompactionLoopPersistedError as exc:
            raise PostCompactionRunError(exc) from None
        warning = tc.warning
        if warning is None:
            return rejected or ToolGuardrailFunctionOutput.allow(output_info=tc.decision)
        if (
            rejected is None
            and tool is not None
            and tool.output_json_schema is not None
            and _programmatic(context.tool_call)
        ):
            # A program, not the model, reads this output, and a changed output would
            # reach it as an error object instead of its schema's JSON: left alone.
            return ToolGuardrailFunctionOutput.allow(output_info=tc.decision)
        if message is not None:
            text = message
        else:
            text = shown if isinstance(shown, str) else render_for_model(shown)
        return ToolGuardrailFunctionOutput.reject_content(
            str(append_warning(text, warning)), output_info=tc.decision
        )

    def _failure_function(self, tool: FunctionTool) -> Callable[..., Any]:
        """The copy's ``failure_error_function``: remember the exception for the output
        guardrail, then answer as ``tool``'s own failure policy does."""

        async def failure(context: RunContextWrapper[Any], error: Exception) -> str | None:
            if isinstance(context, ToolContext):
                session, _run = self._ids(context)
                self._errors.put(self._key(session, context), error)
            original = resolve_function_tool_failure_error_function(tool, context)
            if original is None:
                return None  # the SDK re-raises, as it would have
            message = original(context, error)
            if inspect.isawaitable(message):
                message = await message
            if isinstance(message, str) and getattr(
                tool, "_use_default_failure_error_function", False
            ):
                message = await self._formatted(context, error, message)
                if isinstance(context, ToolContext):
                    # As the SDK marks its own default failure text: the text then
                    # bypasses the tool's output schema (otherwise validating the error
                    # text against a structured output schema fails the whole run).
                    setattr(context, _DEFAULT_FAILURE_HANDLED, True)
            return message

        return failure

    @staticmethod
    async def _formatted(context: RunContextWrapper[Any], error: Exception, default: str) -> str:
        """``RunConfig.tool_error_formatter``'s text for a default-formatted failure (the
        SDK asks it only for tools with the default policy, which the copy no longer has)."""
        run_config = getattr(context, "run_config", None)
        formatter = run_config.tool_error_formatter if run_config is not None else None
        if formatter is None or not isinstance(context, ToolContext):
            return default
        from agents.run_config import ToolErrorFormatterArgs

        try:
            message = formatter(
                ToolErrorFormatterArgs(
                    kind="tool_exception",
                    tool_type="function",
                    tool_name=context.tool_name,
                    call_id=context.tool_call_id,
                    default_message=default,
                    run_context=context,
                    error=error,
                )
            )
            if inspect.isawaitable(message):
                message = await message
        except Exception:
            return default
        return message if isinstance(message, str) else default

    def apply(self, tool: FunctionTool) -> FunctionTool:
        """A copy of ``tool`` with loopwatch's guardrails around it (the original is kept).

        The copy's failure policy answers the model as ``tool``'s does, and also hands the
        raised exception to the output guardrail, so a failing call is recorded as failed.
        """
        inputs = [
            self._watched(g)
            for g in tool.tool_input_guardrails or ()
            if self._original(g) is not self.input
        ]
        outputs = [
            self._watched(g)
            for g in tool.tool_output_guardrails or ()
            if self._original(g) is not self.output
        ]
        guarded = dataclasses.replace(
            tool,
            tool_input_guardrails=[self.input, *inputs],
            tool_output_guardrails=[*outputs, self.output],
        )
        return set_function_tool_failure_error_function(guarded, self._failure_function(tool))

    def _original(self, guardrail: _Guardrail) -> _Guardrail:
        """The guardrail :meth:`_watched` made ``guardrail`` from (or ``guardrail``)."""
        function = guardrail.guardrail_function
        if getattr(function, _WATCHED_BY, None) is self:
            original: _Guardrail = getattr(function, _WATCHED_GUARDRAIL)
            return original
        return guardrail

    def _watched(self, guardrail: _Guardrail) -> _Guardrail:
        """``guardrail`` (another guardrail of the tool, which runs between loopwatch's
        input and output guardrails), answering a call itself when it rejects it.

        The SDK stops at the first guardrail that rejects a call: the tool's own input
        guardrail that refuses the call (the tool then does not run), or its own output
        guardrail that rewrites the output (``reject_content`` is the SDK's only way to),
        would keep loopwatch's output guardrail from ever recording the call, so a model
        repeating it would never be warned or blocked. The copy records the text the
        model reads instead, and appends an emitted warning to it.
        """
        original = self._original(guardrail)
        inner = original.run
        # The output guardrail of another loopwatch guard on the tool (guard_agent applied
        # twice) rewrites an output only to append its warning: the output is recorded.
        owner = getattr(original.guardrail_function, "__self__", None)
        decorated = isinstance(owner, LoopGuardrails) and original is owner.output

        async def watching(data: Any) -> ToolGuardrailFunctionOutput:
            answer = await inner(data)
            if answer.behavior.get("type") != "reject_content":
                return answer
            output = getattr(data, "output", None)
            return await self._finish(
                data.context, data.agent, output, rejected=answer, decorated=decorated
            )

        setattr(watching, _WATCHED_BY, self)
        setattr(watching, _WATCHED_GUARDRAIL, original)
        name = original.get_name()
        return dataclasses.replace(original, guardrail_function=watching, name=name)

    async def on_model_response(
        self, context: RunContextWrapper[Any], agent: Agent[Any], response: ModelResponse
    ) -> None:
        """See one model response before its tools run (``AgentHooks.on_llm_end``).

        Calls of tools the agent does not have are recorded as failed calls (SPEC §11.1:
        the SDK answers them itself, or ends the run, without any tool hook), and the
        function calls of one response are admitted together (``guard.before_batch``).
        Needs a session visible outside a tool call: a ``session_key=`` string (or a
        callable that also accepts the ``RunContextWrapper``), or a trace.

        Raises:
            LoopDetectedRunError: the guard blocks a missing tool's call under ``end_run``.
        """
        calls = [i for i in response.output if isinstance(i, ResponseFunctionToolCall)]
        if not calls:
            return
        try:
            session, run = self._ids(context)
        except Exception:
            # A session_key / run_id callable written for a ToolContext: nothing to see here.
            return
        known = await _known_names(agent, context)
        if known is None:
            return
        if session is None:
            # No session visible here: the turn is admitted by its first call's input
            # guardrail (calls of missing tools, which have none, go unrecorded).
            turn = _Turn([(c.name, c.arguments, c.call_id) for c in calls if c.name in known])
            if len(turn.calls) > 1:
                for _name, _arguments, call_id in turn.calls:
                    self._turns.put(call_id, turn)
            return
        try:
            for item in (c for c in calls if c.name not in known):
                tc = self._call(item.name, item.arguments, item.call_id, session, run)
                error = unknown_tool_error(item.name, _missing_tool_message(item.name))
                await arecord_unknown(tc, error)
                if tc.message is not None or tc.warning is not None:
                    self._note_missing(context, item.call_id, (tc.message, tc.warning))
        except LoopDetectedError as exc:
            raise LoopDetectedRunError(exc.verdict) from None
        batch = [
            self._call(c.name, c.arguments, c.call_id, session, run)
            for c in calls
            if c.name in known
        ]
        await self._admissions.aadmit(self.guard, batch)

    def _note_missing(
        self, context: RunContextWrapper[Any], call_id: str, note: _MissingNote
    ) -> None:
        notes = self._missing.setdefault(context, {})
        notes[call_id] = note
        if len(notes) > self._max_pending:
            # Notes no formatter asked for (none is configured): the oldest go first.
            del notes[next(iter(notes))]

    def tool_error_formatter(self, inner: ToolErrorFormatter | None = None) -> ToolErrorFormatter:
        """A ``RunConfig.tool_error_formatter`` that tells the model what the guard
        decided for calls of missing tools (see :func:`tool_error_formatter`)."""

        async def formatter(args: ToolErrorFormatterArgs[Any]) -> str | None:
            note = self._take_note(args) if args.kind == "tool_not_found" else None
            blocked, warning = note if note is not None else (None, None)
            if blocked is not None:
                return blocked
            text = await _inner_text(inner, args)
            if warning is None:
                return text
            return append_warning_text(text if text is not None else args.default_message, warning)

        return formatter

    def _take_note(self, args: ToolErrorFormatterArgs[Any]) -> _MissingNote | None:
        """The note of a missing tool's call, from these guardrails or linked ones."""
        seen: set[int] = set()
        todo: list[LoopGuardrails] = [self]
        while todo:
            guardrails = todo.pop()
            if id(guardrails) in seen:
                continue
            seen.add(id(guardrails))
            notes = guardrails._missing.get(args.run_context)
            note = notes.pop(args.call_id, None) if notes else None
            if note is not None:
                return note
            todo.extend(guardrails._linked)
        return None

    def _link(self, other: LoopGuardrails) -> None:
        if other is not self and all(g is not other for g in self._linked):
            self._linked.append(other)

    def apply_all(self, tools: Iterable[Tool]) -> list[Tool]:
        """``tools`` with every ``FunctionTool`` guarded; other tools are kept as they are."""
        return [self.apply(t) if isinstance(t, FunctionTool) else t for t in tools]


async def _inner_text(
    inner: ToolErrorFormatter | None, args: ToolErrorFormatterArgs[Any]
) -> str | None:
    """Your own formatter's text (``None``: the SDK's default), asked as the SDK asks it:
    a formatter that fails or returns no string gets the default."""
    if inner is None:
        return None
    try:
        text = inner(args)
        if inspect.isawaitable(text):
            text = await text
    except Exception:
        return None
    return text if isinstance(text, str) else None


def tool_error_formatter(
    agent: Agent[Any], inner: ToolErrorFormatter | None = None
) -> ToolErrorFormatter:
    """The ``RunConfig.tool_error_formatter`` for an agent guarded by :func:`guard_agent`.

    With ``RunConfig(tool_not_found_behavior="return_error_to_model")`` the SDK answers a
    call of a tool the agent does not have itself, with this formatter's text. The guard
    has already decided the call (the model-response hook): a blocked call reads the
    blocked message, a warned one the SDK's text (or ``inner``'s) with the warning after
    it. Every other call and kind of error is ``inner``'s to format. It answers for every
    agent of the run that ``agent`` may hand off to (they are guarded with it), so a run
    needs this one formatter, not one per agent.

    Args:
        agent: the agent :func:`guard_agent` returned.
        inner: your own formatter, asked for everything loopwatch does not answer.

    Raises:
        ValueError: ``agent`` is not one :func:`guard_agent` returned.
    """
    hooks = agent.hooks
    if not isinstance(hooks, _GuardHooks):
        raise ValueError("tool_error_formatter: the agent is not one guard_agent returned")
    return hooks.guardrails.tool_error_formatter(inner)


def guard_agent(
    agent: Agent[TContext],
    guard: LoopGuard,
    *,
    session_key: IdSource = None,
    run_id: IdSource = None,
    agent_id: str | None = None,
    warn_model: bool = True,
    on_critical: OnCritical = "block_call",
) -> Agent[TContext]:
    """A copy of ``agent`` whose every function tool, and every tool of its MCP servers
    (``mcp_servers=``), is guarded by ``guard``.

    Args:
        agent: the agent; it is not changed.
        guard: the guard.
        session_key: see :class:`LoopGuardrails`.
        run_id: see :class:`LoopGuardrails`.
        agent_id: the agent, for ``openclaw_config`` per-agent blocks (default: none).
        warn_model: append an emitted warning to the output the model reads.
        on_critical: ``"block_call"``, ``"end_run"`` or ``"recover"``.

    The agents it hands off to (``handoffs``: an agent, or a ``handoff(agent)``), theirs,
    and so on, are guarded copies too, with the same guardrails (so the same options and
    ``agent_id``), cycles included: the SDK hands the run to the target agent as it is, so
    a target left alone would run its tools unguarded. An agent :func:`guard_agent`
    already returned is kept as it is (guard a target first to give it options of its
    own), and a ``Handoff`` whose target is chosen only when it is invoked gets its target
    guarded then. One :func:`tool_error_formatter` of the returned agent answers for every
    agent of the run.

    Returns:
        The guarded copy (``agent.clone(tools=..., hooks=..., handoffs=...)``).
    """
    guardrails = LoopGuardrails(
        guard,
        session_key=session_key,
        run_id=run_id,
        agent_id=agent_id,
        warn_model=warn_model,
        on_critical=on_critical,
    )
    return _HandoffGraph(guardrails).guarded(agent, root=True)


class _HandoffGraph:
    """Guarded copies of an agent and of every agent it may hand the run to.

    Each original agent is copied once (by identity: ``Agent`` is an unhashable
    dataclass), before its handoffs are, so a cycle ends at the copy being built.
    """

    def __init__(self, guardrails: LoopGuardrails, known: _HandoffGraph | None = None) -> None:
        self._guardrails = guardrails
        self._known = known
        self._copies: dict[int, tuple[Agent[Any], Agent[Any]]] = {}

    def _copy_of(self, agent: Agent[Any]) -> Agent[Any] | None:
        graph: _HandoffGraph | None = self
        while graph is not None:
            found = graph._copies.get(id(agent))
            if found is not None and found[0] is agent:
                return found[1]
            graph = graph._known
        return None

    def guarded(self, agent: Agent[TContext], *, root: bool = False) -> Agent[TContext]:
        """The guarded copy of ``agent``; the agent itself when it is a handoff target
        guarded already (the ``root``, the agent ``guard_agent`` was given, is always
        guarded by these guardrails, as before handoffs were followed)."""
        hooks = agent.hooks
        if isinstance(hooks, _GuardHooks) and not root:
            # Guarded already (by this graph or by a guard_agent of its own): as it is.
            self._guardrails._link(hooks.guardrails)
            return agent
        found = self._copy_of(agent)
        if found is not None:
            return found
        guardrails = self._guardrails
        copy = _guarded_copy(agent, guardrails)
        self._copies[id(agent)] = (agent, copy)
        if agent.handoffs:
            copy.handoffs = [self._target(item) for item in agent.handoffs]
        return copy

    def _target(self, item: Agent[Any] | Handoff[Any, Any]) -> Agent[Any] | Handoff[Any, Any]:
        if isinstance(item, Agent):
            return self.guarded(item)
        if not isinstance(item, Handoff):
            return item  # not something the SDK hands off to: its own error, as before
        ref = item._agent_ref
        target = ref() if ref is not None else None
        guarded_target = self.guarded(target) if isinstance(target, Agent) else None
        invoke = item.on_invoke_handoff

        async def on_invoke_handoff(context: RunContextWrapper[Any], arguments: str) -> Any:
            chosen = await invoke(context, arguments)
            if guarded_target is not None and chosen is target:
                return guarded_target
            if isinstance(chosen, Agent):
                # A target chosen at run time: guarded now, with a graph of its own that
                # knows this one (so a handoff back reaches the copies made here).
                return _HandoffGraph(self._guardrails, self).guarded(chosen)
            return chosen

        copy = dataclasses.replace(item, on_invoke_handoff=on_invoke_handoff)
        if guarded_target is not None:
            # Read by the SDK (tool configuration, visualisation); init=False, so set here.
            # The copy stays alive: this graph, which the closure above holds, holds it.
            copy._agent_ref = weakref.ref(guarded_target)
        return copy


def _guarded_copy(agent: Agent[TContext], guardrails: LoopGuardrails) -> Agent[TContext]:
    """``agent``'s copy with its function tools and its MCP servers' tools guarded."""
    guarded = agent.clone(
        tools=guardrails.apply_all(agent.tools), hooks=_GuardHooks(guardrails, agent.hooks)
    )
    # The tools of the agent's MCP servers (``mcp_servers=``) are listed at each turn, as
    # function tools the copy never held: they are guarded as they are listed.
    fetch = guarded.get_mcp_tools

    async def get_mcp_tools(run_context: RunContextWrapper[TContext]) -> list[Tool]:
        return guardrails.apply_all(await fetch(run_context))

    setattr(guarded, "get_mcp_tools", get_mcp_tools)  # noqa: B010  (mypy: a method)
    return guarded


class _GuardHooks(AgentHooks[Any]):
    """The agent's own hooks, plus :meth:`LoopGuardrails.on_model_response` after each
    model call."""

    def __init__(self, guardrails: LoopGuardrails, inner: AgentHooks[Any] | None) -> None:
        self._guardrails = guardrails
        self._inner = inner

    @property
    def guardrails(self) -> LoopGuardrails:
        return object.__getattribute__(self, "_guardrails")  # type: ignore[no-any-return]

    def __getattribute__(self, name: str) -> Any:
        # Every hook but on_llm_end is the inner hooks' own (or the no-op default).
        if name.startswith("on_") and name != "on_llm_end":
            inner = object.__getattribute__(self, "_inner")
            if inner is not None:
                return getattr(inner, name)
        return object.__getattribute__(self, name)

    async def on_llm_end(
        self, context: RunContextWrapper[Any], agent: Agent[Any], response: ModelResponse
    ) -> None:
        if self._inner is not None:
            await self._inner.on_llm_end(context, agent, response)
        await self._guardrails.on_model_response(context, agent, response)


__all__ = [
    "GUARDRAIL_NAME",
    "LoopDetectedRunError",
    "LoopGuardrails",
    "PostCompactionRunError",
    "guard_agent",
    "tool_error_formatter",
]
