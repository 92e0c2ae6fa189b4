"""Google ADK: a plugin that guards every tool call of every agent of a ``Runner``.

::

    from google.adk.agents import LlmAgent
    from google.adk.apps import App
    from google.adk.runners import InMemoryRunner
    from loopwatch import LoopGuard
    from loopwatch.integrations.google_adk import LoopGuardPlugin

    agent = LlmAgent(name="reader", model="gemini-2.5-flash", tools=[read_file])
    plugin = LoopGuardPlugin(LoopGuard({"enabled": True}))
    runner = InMemoryRunner(app=App(name="reader", root_agent=agent, plugins=[plugin]))

What it does (SPEC §11), with the three tool callbacks of ``BasePlugin``:

* ``on_event_callback`` sees each model response before its function calls run (ADK runs
  them concurrently) and admits a response of two or more calls as one batch
  (``guard.abefore_batch``): identical calls of one response count as the repeats they
  are, and one critical blocks every call of it.
* ``before_tool_callback`` asks the guard (or takes the batch's decision). A blocked call
  is answered with ``{"error": <blocked message>}``: ADK uses a plugin's answer instead of
  running the tool.
* ``after_tool_callback`` records what the model is shown (the tool's dict, or
  ``{"result": value}`` as ADK wraps any other value), then, for an emitted warning, answers
  with the same dict plus a ``"loop_warning"`` entry.
* ``on_tool_error_callback`` records a raised exception as the call's error and lets ADK
  handle it as usual (ADK raises it out of the run unless another plugin answers it; that
  answer then gets the warning). A call of a tool the agent does not have reaches the plugin
  as ADK's "not found" error and is recorded as a failed call naming the tool; ADK's own
  answer to the model is kept, with the warning when one is emitted.

A ``guard.tool`` function used as a tool of the agent, with the same guard and session,
passes its calls through: each call is guarded and recorded once (by the plugin).

Sessions and runs: the session is ADK's session id and the run its invocation id; pass
``session_key=`` / ``run_id=`` (strings, or callables taking the ``ToolContext``) to choose.
ADK compacts events on its own schedule; a host that wants the post-compaction guard calls
``guard.compaction_retry(session_key=..., run_id=...)`` after it.

``on_critical="end_run"``: ADK wraps any exception raised by a plugin in a ``RuntimeError``
("Error in plugin ..."), so the run ends with that ``RuntimeError``, whose ``__cause__`` is
the :class:`~loopwatch.LoopDetectedError` (see :func:`loop_error`).
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import AsyncGenerator, Callable
from typing import Any, Final, TypeAlias

from google.adk.agents.invocation_context import InvocationContext
from google.adk.events.event import Event
from google.adk.models.base_llm import BaseLlm
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.adk.plugins.base_plugin import BasePlugin
from google.adk.tools.base_tool import BaseTool
from google.adk.tools.tool_context import ToolContext
from google.genai import types
from pydantic import PrivateAttr

from loopwatch.adapter import (
    WARNING_SEPARATOR,
    AdapterOptions,
    Admissions,
    OnCritical,
    ToolCall,
    unknown_tool_error,
)
from loopwatch.errors import LoopDetectedError
from loopwatch.guard import LoopGuard
from loopwatch.integrations._shared import check_adapter_arguments, enter_guarding, leave_guarding
from loopwatch.testing import LoopScript

#: A session key or run id: fixed, or computed from the call's ``ToolContext``.
IdSource: TypeAlias = "str | Callable[[ToolContext], object] | None"

#: The key of the warning added to a tool's answer dict.
WARNING_KEY: Final = "loop_warning"
#: The description ADK gives the stand-in tool of a call whose tool was not found.
_NOT_FOUND_DESCRIPTION: Final = "Tool not found"


def loop_error(error: BaseException) -> LoopDetectedError | None:
    """The :class:`LoopDetectedError` behind an error ADK raised out of a run, or ``None``.

    ADK re-raises a plugin's exception as a ``RuntimeError`` chained to it.
    """
    seen: BaseException | None = error
    while seen is not None:
        if isinstance(seen, LoopDetectedError):
            return seen
        seen = seen.__cause__
    return None


def _shown(result: Any) -> Any:
    """What the model is shown for a tool's return value: ADK wraps a non-dict value."""
    return result if isinstance(result, dict) else {"result": result}


def _is_not_found(tool: BaseTool, error: Exception) -> bool:
    """True for ADK's stand-in tool of a call whose tool the agent does not have."""
    return (
        type(tool) is BaseTool
        and tool.description == _NOT_FOUND_DESCRIPTION
        and isinstance(error, ValueError)
    )


class LoopGuardPlugin(BasePlugin):
    """Guards every tool call of an ADK ``Runner`` with a :class:`LoopGuard`.

    Args:
        guard: the guard (its config, store, listeners and shadow mode apply).
        session_key: the conversation (default: the ADK session id).
        run_id: the agent run (default: the ADK invocation id).
        agent_id: the agent, for ``openclaw_config`` per-agent blocks.
        warn_model: add an emitted warning to what the model reads.
        on_critical: ``"block_call"`` (answer the call with the blocked message) or
            ``"end_run"`` (the run ends with an error; see the module docs).
        name: the plugin's name (ADK requires unique names).
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
        name: str = "loopwatch",
    ) -> None:
        super().__init__(name=name)
        self.guard = guard
        self.session_key = session_key
        self.run_id = run_id
        self.agent_id = agent_id
        check_adapter_arguments(guard, agent_id=agent_id, session_key=session_key, run_id=run_id)
        self.options = AdapterOptions(warn_model=warn_model, on_critical=on_critical)
        self._pending: dict[object, ToolCall] = {}
        self._warnings: dict[object, str] = {}
        self._marks: dict[object, contextvars.Token[Any]] = {}
        self._admissions = Admissions()

    @staticmethod
    def _key(tool_context: ToolContext) -> object:
        call_id = tool_context.function_call_id
        return call_id if call_id is not None else id(tool_context)

    def _call(self, name: str, tool_args: dict[str, Any], ctx: ToolContext) -> ToolCall:
        session = self.session_key(ctx) if callable(self.session_key) else self.session_key
        run = self.run_id(ctx) if callable(self.run_id) else self.run_id
        return ToolCall(
            self.guard,
            name,
            dict(tool_args),
            session_key=session if session is not None else ctx.session.id,
            run_id=run if run is not None else ctx.invocation_id,
            tool_call_id=ctx.function_call_id,
            agent_id=self.agent_id,
            options=self.options,
        )

    async def before_tool_callback(
        self, *, tool: BaseTool, tool_args: dict[str, Any], tool_context: ToolContext
    ) -> dict[str, Any] | None:
        """Ask the guard (or take the decision its model message was admitted with); answer
        a blocked call with its message instead of running it."""
        tc = self._admissions.take(self._call(tool.name, tool_args, tool_context))
        await tc.astart()
        if tc.blocked:
            return {"error": tc.message}
        key = self._key(tool_context)
        self._pending[key] = tc
        if not tc.passthrough:
            # ADK runs each call in a task of its own and the tool right after this
            # callback, in this task's context: a guard.tool function used as the tool
            # then passes the call through instead of guarding and recording it a second
            # time (two records a call, its warning twice, and a block that never came).
            self._marks[key] = enter_guarding(self.guard, tc.session_key, tc.tool_name)
        return None

    def _unmark(self, key: object) -> None:
        mark = self._marks.pop(key, None)
        if mark is not None:
            leave_guarding(mark)

    async def on_event_callback(
        self, *, invocation_context: InvocationContext, event: Event
    ) -> Event | None:
        """Admit the function calls of one model response together.

        ADK runs a response's calls concurrently, so each call's ``before_tool_callback``
        would be decided before any sibling has an outcome. The runner hands the plugin the
        response event (its calls carrying their final ids) before any of them starts, so
        the turn is decided here with ``guard.abefore_batch``: identical calls count as
        the repeats they are, and one critical blocks them all.
        """
        calls = event.get_function_calls() if not event.partial else []
        if len(calls) < 2:
            return None
        batch = [
            self._call(
                str(call.name),
                dict(call.args or {}),
                ToolContext(invocation_context, function_call_id=call.id),
            )
            for call in calls
        ]
        await self._admissions.aadmit(self.guard, batch)
        return None

    async def after_tool_callback(
        self,
        *,
        tool: BaseTool,
        tool_args: dict[str, Any],
        tool_context: ToolContext,
        result: dict[str, Any],
    ) -> dict[str, Any] | None:
        """Record the result the model is shown, then add an emitted warning to it."""
        key = self._key(tool_context)
        self._unmark(key)
        warning = self._warnings.pop(key, None)
        tc = self._pending.pop(key, None)
        shown = _shown(result)
        if tc is not None:
            tc.result(shown)
            await tc.afinish()
            warning = tc.warning
        if warning is None:
            return None
        return {**shown, WARNING_KEY: warning}

    async def on_tool_error_callback(
        self,
        *,
        tool: BaseTool,
        tool_args: dict[str, Any],
        tool_context: ToolContext,
        error: Exception,
    ) -> dict[str, Any] | None:
        """Record the error (a missing tool as a failed call naming it)."""
        key = self._key(tool_context)
        self._unmark(key)
        tc = self._pending.pop(key, None)
        if tc is None or isinstance(error, asyncio.CancelledError):
            # A cancelled call says nothing about the tool: it stays pending.
            return None
        if _is_not_found(tool, error):
            text = unknown_tool_error(tool.name)
            tc.error(text)
            await tc.afinish()
            warning = tc.warning
            if warning is None:
                return None  # ADK answers with its own "no tool with that name" text
            return {"error": f"{text}{WARNING_SEPARATOR}{warning}"}
        tc.error(error)
        await tc.afinish()
        if tc.warning is not None:
            # Shown only if a later plugin or callback answers the error for the model.
            self._warnings[key] = tc.warning
        return None


# --- a scripted offline model --------------------------------------------------------------


class ScriptedModel(BaseLlm):
    """An ADK model that plays a :class:`~loopwatch.testing.LoopScript`, offline.

    Use it where an ``LlmAgent`` takes ``model=``: it reads the function responses of the
    request and answers with the script's next function call, or its final text.
    """

    model: str = "loopwatch-scripted"
    _script: LoopScript = PrivateAttr(default_factory=LoopScript)
    _calls: int = PrivateAttr(default=0)

    def __init__(self, script: LoopScript | None = None, **data: Any) -> None:
        super().__init__(**data)
        if script is not None:
            self._script = script

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        """The script's next move (one or more function calls, or the final text), given
        the function responses in the request."""
        read = [
            part.function_response.response
            for content in llm_request.contents
            for part in content.parts or ()
            if part.function_response is not None
        ]
        parts = []
        for name, args in self._script.next_calls(read):
            self._calls += 1
            call = types.FunctionCall(name=name, args=args, id=f"call-{self._calls}")
            parts.append(types.Part(function_call=call))
        if not parts:
            parts.append(types.Part(text=self._script.final))
        yield LlmResponse(content=types.Content(role="model", parts=parts))


__all__ = ["WARNING_KEY", "LoopGuardPlugin", "ScriptedModel", "loop_error"]
