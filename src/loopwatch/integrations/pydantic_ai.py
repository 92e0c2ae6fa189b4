"""pydantic-ai: a capability that guards every tool call of an agent.

::

    from pydantic_ai import Agent
    from loopwatch import LoopGuard
    from loopwatch.integrations.pydantic_ai import LoopGuardCapability

    guard = LoopGuard({"enabled": True})
    agent = Agent("openai:gpt-5", tools=[read_file], capabilities=[LoopGuardCapability(guard)])
    agent.run_sync("...", conversation_id="conversation-42")

A capability sees both sides of the loop, so it does everything SPEC §11 asks:

* ``wrap_tool_execute``: every validated tool call goes through the guard. A blocked call
  is answered with ``ToolFailed`` carrying the blocked message (the model reads a failed
  tool result; the tool is not run; no retry budget is used). An emitted warning is
  appended to the result after the original was recorded, so the model reads it in the
  tool result itself: a string result (or a ``ToolReturn``'s string ``return_value``)
  gets it appended; any other result stays as it is in the ``ToolReturnPart`` (for
  structured consumers of the history), the warning is kept in the part's ``metadata``
  under :data:`WARNING_METADATA_KEY`, and ``before_model_request`` sends the model that
  result as pydantic-ai renders it (its JSON text) with the warning appended, in every
  request. A ``ToolReturn`` whose own ``metadata`` is not a dict gets the warning as its
  ``content`` instead (pydantic-ai sends that as a user message after the results).
* ``after_model_request``: each model response goes through the stream-level
  :class:`~loopwatch.UnknownToolStreamGuard` (SPEC §5.7), and a response that keeps
  calling the same missing tool is replaced by a plain answer. Calls of tools the agent
  does not have are recorded as failed calls naming the tool (pydantic-ai answers them
  itself and never reaches ``wrap_tool_execute``). A response carrying a
  ``CompactionPart`` (provider-side compaction) arms the post-compaction guard.

Sessions and runs: the session is the run's ``conversation_id`` (the one you pass, the one
of ``message_history``, or a fresh one per run) and the run is its ``run_id``. Pass
``session_key=`` / ``run_id=`` (strings or callables taking the ``RunContext``) to choose
yourself. If you compact the history yourself (a history processor) and run again, call
``guard.compaction_retry(session_key=..., run_id=...)``.

A failing call is recorded with its error first; an emitted warning is then appended to
what the model reads of the failure (the retry prompt of ``ModelRetry``, the failed result
of ``ToolFailed``). The calls of one model response are admitted together
(``guard.before_batch``, when the guard has it), so identical parallel calls count as the
repeats they are. A ``guard.tool`` function used as a tool of the agent, with the same
guard and session, passes its calls through: each is guarded and recorded once.

``on_critical="end_run"`` raises :class:`~loopwatch.LoopDetectedError` out of ``run``
(also for a model stuck on a missing tool); ``"recover"`` answers the first critical of a
run with a recovery message and raises at the second;
:class:`~loopwatch.PostCompactionLoopPersistedError` ends the run in every mode.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, NoReturn, TypeAlias

from pydantic_ai import ModelRetry, RunContext, ToolFailed, ToolReturn
from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.exceptions import (
    ApprovalRequired,
    CallDeferred,
    ToolFailedError,
    ToolRetryError,
)
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models import ModelRequestContext
from pydantic_ai.tools import ToolDefinition

from loopwatch.calls import ToolCall
from loopwatch.guard import LoopGuard
from loopwatch.integrations._guarded import (
    Admissions,
    aguarded_call,
    arecord_unknown,
    stream_stopped,
)
from loopwatch.integrations._sessions import StreamGuards
from loopwatch.integrations._shared import (
    AdapterOptions,
    OnCritical,
    Outcome,
    append_warning,
    append_warning_text,
    check_adapter_arguments,
    resolve_id,
    unknown_tool_error,
)

logger = logging.getLogger("loopwatch.tools")

#: A session key or run id: fixed, or computed from the run's ``RunContext``.
IdSource: TypeAlias = "str | Callable[[RunContext[Any]], object] | None"

#: The ``ToolReturnPart.metadata`` key holding the loop warning sent with a result that
#: is not a string (the part's ``content`` stays the tool's own result).
WARNING_METADATA_KEY: Final = "loopwatch_warning"

#: ``part_kind`` of a provider's compaction summary in a model response.
COMPACTION_PART: Final = "compaction"


class _ToolResults:
    """How pydantic-ai shows a tool call to the model: its return value (SPEC §11.1)."""

    def blocked(self, message: str) -> NoReturn:
        """A failed tool result carrying the blocked message."""
        raise ToolFailed(message)

    def outcome(self, answer: Any) -> Outcome:
        """The tool's return value (a ``ToolReturn``'s ``return_value``)."""
        if isinstance(answer, ToolReturn):
            return Outcome(result=answer.return_value)
        return Outcome(result=answer)

    def add_warning(self, answer: Any, warning: str) -> Any:
        """The warning in the tool result: appended to a string, else kept in the
        metadata for ``before_model_request`` to append to the rendered result."""
        if isinstance(answer, str):
            return append_warning(answer, warning)
        if not isinstance(answer, ToolReturn):
            return ToolReturn(return_value=answer, metadata={WARNING_METADATA_KEY: warning})
        if isinstance(answer.return_value, str):
            return dataclasses.replace(
                answer, return_value=append_warning_text(answer.return_value, warning)
            )
        if answer.metadata is None or isinstance(answer.metadata, dict):
            metadata = {**(answer.metadata or {}), WARNING_METADATA_KEY: warning}
            return dataclasses.replace(answer, metadata=metadata)
        content = answer.content
        if content is None:
            merged: str | Sequence[Any] = warning
        elif isinstance(content, str):
            merged = append_warning_text(content, warning)
        else:
            merged = [*content, warning]
        return dataclasses.replace(answer, content=merged)

    def failed(self, error: Exception, warning: str) -> Exception:
        """The failure with the warning appended to what the model reads of it: the retry
        prompt of a ``ModelRetry``, the failed result of a ``ToolFailed`` (SPEC §11.2)."""
        if isinstance(error, ToolRetryError) and isinstance(error.tool_retry.content, str):
            content = append_warning_text(error.tool_retry.content, warning)
            return ToolRetryError(dataclasses.replace(error.tool_retry, content=content))
        if isinstance(error, ToolFailedError) and isinstance(error.tool_failed.content, str):
            content = append_warning_text(error.tool_failed.content, warning)
            return ToolFailedError(dataclasses.replace(error.tool_failed, content=content))
        if isinstance(error, ModelRetry):
            return ModelRetry(append_warning_text(error.message, warning))
        if isinstance(error, ToolFailed):
            return ToolFailed(append_warning_text(error.message, warning))
        return error

    def passes(self, error: Exception) -> bool:
        """A deferred call or one awaiting approval has no outcome yet."""
        return isinstance(error, (CallDeferred, ApprovalRequired))


_RESULTS: Final = _ToolResults()


@dataclass
class LoopGuardCapability(AbstractCapability[Any]):
    """Guards every tool call of a pydantic-ai agent with a :class:`LoopGuard`.

    Args:
        guard: the guard (its config, store, listeners and shadow mode apply).
        session_key: the conversation: a string or a callable taking the ``RunContext``
            (default: the run's ``conversation_id``).
        run_id: the agent run, likewise (default: the run's ``run_id``).
        agent_id: the agent, for ``openclaw_config`` per-agent blocks.
        warn_model: append an emitted warning to what the model reads.
        on_critical: ``"block_call"`` (a failed tool result; the run goes on),
            ``"end_run"`` (``run`` raises :class:`~loopwatch.LoopDetectedError`) or
            ``"recover"`` (a recovery message first, the error at the second critical).
    """

    guard: LoopGuard
    session_key: IdSource = None
    run_id: IdSource = None
    agent_id: str | None = None
    warn_model: bool = True
    on_critical: OnCritical = "block_call"
    options: AdapterOptions = field(init=False, repr=False)
    streams: StreamGuards = field(init=False, repr=False)
    admissions: Admissions = field(init=False, repr=False)

    def __post_init__(self) -> None:
        check_adapter_arguments(
            self.guard, agent_id=self.agent_id, session_key=self.session_key, run_id=self.run_id
        )
        self.options = AdapterOptions(warn_model=self.warn_model, on_critical=self.on_critical)
        self.streams = StreamGuards(self.guard)
        self.admissions = Admissions()

    def _ids(self, ctx: RunContext[Any]) -> tuple[object, object]:
        return (
            resolve_id(self.session_key, ctx, default=ctx.conversation_id),
            resolve_id(self.run_id, ctx, default=ctx.run_id),
        )

    def _call(self, ctx: RunContext[Any], call: ToolCallPart) -> ToolCall:
        session, run = self._ids(ctx)
        return ToolCall(
            self.guard,
            call.tool_name,
            call.args_as_dict(),
            session_key=session,
            run_id=run,
            tool_call_id=call.tool_call_id,
            agent_id=self.agent_id,
            options=self.options,
        )

    async def wrap_tool_execute(
        self,
        ctx: RunContext[Any],
        *,
        call: ToolCallPart,
        tool_def: ToolDefinition,
        args: dict[str, Any],
        handler: Callable[[dict[str, Any]], Any],
    ) -> Any:
        """Guard one tool call (see the module docs)."""
        tc = self.admissions.take(self._call(ctx, call))
        return await aguarded_call(tc, lambda: handler(args), _RESULTS)

    async def before_model_request(
        self, ctx: RunContext[Any], request_context: ModelRequestContext
    ) -> ModelRequestContext:
        """Send each warned structured result with its warning appended (this request
        only: the history keeps the result, and the warning in its metadata)."""
        try:
            messages = [_with_warnings(message) for message in request_context.messages]
            return dataclasses.replace(request_context, messages=messages)
        except Exception as exc:  # (a pydantic-ai of another shape): the request as it is
            logger.warning("loopwatch: loop warnings not added to a model request: %r", exc)
            return request_context

    async def after_model_request(
        self,
        ctx: RunContext[Any],
        *,
        request_context: ModelRequestContext,
        response: ModelResponse,
    ) -> ModelResponse:
        """Arm on compaction, record calls of unknown tools, screen the response, admit
        the response's tool calls together."""
        session, run = self._ids(ctx)
        if any(part.part_kind == COMPACTION_PART for part in response.parts):
            await self.guard.acompaction_retry(
                session_key=session, run_id=run, agent_id=self.agent_id
            )
        known = request_context.model_request_parameters.tool_defs
        calls = [part for part in response.parts if isinstance(part, ToolCallPart)]
        # Calls of missing tools never reach wrap_tool_execute (pydantic-ai answers them
        # itself): decide and record them here, before the stream guard, so the guard's
        # block of a repeating one is evented and ends the run under end_run.
        for unknown in (c for c in calls if c.tool_name not in known):
            await arecord_unknown(self._call(ctx, unknown), unknown_tool_error(unknown.tool_name))
        text = self.streams.observe(
            session, [c.tool_name for c in calls], list(known), agent_id=self.agent_id
        )
        if text is not None:
            name, count = self.streams.streak(session)
            stream_stopped(
                text, name=name or "", count=count, session_key=session, options=self.options
            )
            return dataclasses.replace(response, parts=[TextPart(content=text)])
        await self.admissions.aadmit(
            self.guard, [self._call(ctx, c) for c in calls if c.tool_name in known]
        )
        return response


def _warned(part: ToolReturnPart) -> ToolReturnPart:
    """``part`` as the model reads it: its rendered result with the kept warning."""
    metadata = part.metadata
    warning = metadata.get(WARNING_METADATA_KEY) if isinstance(metadata, dict) else None
    if not isinstance(warning, str) or part.outcome != "success":
        return part
    try:
        rendered, files = part.model_response_str(), part.files
    except Exception:
        # A result pydantic-ai cannot render fails its own request, as it would have;
        # loopwatch adds no error of its own at call time.
        return part
    text = append_warning_text(rendered, warning)
    return dataclasses.replace(part, content=[text, *files] if files else text)


def _with_warnings(message: ModelMessage) -> ModelMessage:
    """``message`` with its warned tool results rendered with their warnings (new
    objects: the persistent history is left as it is)."""
    if not isinstance(message, ModelRequest) or not any(
        isinstance(p, ToolReturnPart) for p in message.parts
    ):
        return message
    parts = [_warned(p) if isinstance(p, ToolReturnPart) else p for p in message.parts]
    return dataclasses.replace(message, parts=parts)


__all__ = ["WARNING_METADATA_KEY", "LoopGuardCapability"]
