"""CrewAI: tool call hooks that guard every tool call of every crew.

::

    from crewai import Agent, Crew, Task
    from loopwatch import LoopGuard
    from loopwatch.integrations.crewai import LoopGuardToolHooks

    agent = Agent(role="reader", goal="...", backstory="...", llm="gpt-5-mini", tools=[read_file])
    crew = Crew(agents=[agent], tasks=[Task(description="...", expected_output="...", agent=agent)])
    hooks = LoopGuardToolHooks(LoopGuard(profile="adaptive")).register()  # every crew
    try:
        result = crew.kickoff()
    finally:
        hooks.unregister()

(:class:`ScriptedLLM` plays a model offline: ``Agent(llm=ScriptedLLM(loop_script()))``.)

CrewAI fails a task itself (``ToolExecutionFailedError``) at the 5th identical (tool,
arguments, result) call of a run, so the reference thresholds (a block at the 21st) are
never reached by a plain repeat there; the ``adaptive`` profile blocks the 3rd identical
call in a row, before that limit, and the reference one still catches what the limit
misses (the same call with changing results, a missing tool called with changing
arguments).

CrewAI runs its ``before_tool_call`` hooks before every tool call, including calls of tools
the agent does not have, and its ``after_tool_call`` hooks after every call, including
blocked ones; a string returned by an after hook replaces what the agent reads. So (SPEC
§11):

* the before hook asks the guard and returns ``False`` for a blocked call (CrewAI does not
  run the tool); the after hook then replaces CrewAI's "blocked by hook" text with the
  blocked message;
* the after hook records what the agent reads: the tool's result, CrewAI's
  ``Error executing tool: ...`` text as the call's error, and a call of a missing tool
  (``Tool not found``) as a failed call naming the tool; then it appends an emitted warning.

A ``guard.tool`` function used as a tool of the crew, with the same guard and session,
passes its calls through: each call is guarded and recorded once (by the hooks).

CrewAI runs the native tool calls of one model message in a thread pool, each with its
own hooks and no call id: the before hook of a message's first call admits all of the
message's calls together (``guard.before_batch``), reading them from the agent executor's
latest assistant message, so identical calls of one message count as the repeats they
are and one critical blocks them all (without that message, each call is decided alone).
A refused message records nothing, so when the agent then sends the same call alone, the
guard decides it on the recorded history: after a message of three identical calls is
refused at the 18th record, the 19th and 20th calls alone run and the 21st is blocked (the
loop runs 20 times, as one call at a time; the hooks enforce each of those decisions).

CrewAI swallows any exception a hook raises (hooks fail open), so ``on_critical="end_run"``
(or ``"recover"``'s second critical) cannot raise through a tool hook: after a block, the
guard's ``before_llm_call`` hook stops the agent's next model call, CrewAI ends the run
with its own error, and :attr:`LoopGuardToolHooks.loop_error` holds the
:class:`~loopwatch.LoopDetectedError`.

Sessions: the session is the crew's id (one ``Crew`` object is one conversation), else the
agent's; pass ``session_key=`` (a string, or a callable taking the hook context) to choose.

CrewAI pins ``pydantic<2.13``, ``openai<3`` and ``mcp<2``: it cannot share an environment
with the other extras (``loopwatch[crewai]`` is not part of ``loopwatch[all]``).
"""

from __future__ import annotations

import contextvars
import json
import logging
import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Any, Final, TypeAlias

from crewai.hooks import (
    register_after_tool_call_hook,
    register_before_llm_call_hook,
    register_before_tool_call_hook,
    unregister_after_tool_call_hook,
    unregister_before_llm_call_hook,
    unregister_before_tool_call_hook,
)
from crewai.llms.base_llm import BaseLLM

from loopwatch.adapter import (
    WARNING_SEPARATOR,
    AdapterOptions,
    Admissions,
    OnCritical,
    QueuedIds,
    ToolCall,
)
from loopwatch.adapter import unknown_tool_error as _unknown_tool_error
from loopwatch.errors import LoopDetectedError
from loopwatch.guard import LoopGuard
from loopwatch.integrations._shared import (
    check_adapter_arguments,
    enter_guarding,
    leave_guarding,
)
from loopwatch.testing import LoopScript

#: A session key or run id: fixed, or computed from the hook context.
IdSource: TypeAlias = "str | Callable[[Any], object] | None"

#: The prefix of CrewAI's text for a tool that raised.
TOOL_ERROR_PREFIX: Final = "Error executing tool:"
#: CrewAI's text for a call of a tool the agent does not have.
TOOL_NOT_FOUND: Final = "Tool not found"
#: How many admitted model messages are remembered (one per agent running at once).
MAX_TURNS: Final = 64
#: Logged when ``end_run`` stops a session's next model call.
END_RUN_LOG: Final = (
    "loopwatch: stopped the next model call of session {session} after a critical loop "
    "(on_critical end_run); CrewAI raises LLMCallBlockedError, the LoopDetectedError is "
    "LoopGuardToolHooks.loop_error"
)

logger = logging.getLogger("loopwatch.tools")


class LoopGuardToolHooks:
    """The tool call hooks of one :class:`LoopGuard` (see the module docs).

    Args:
        guard: the guard (its config, store, listeners and shadow mode apply).
        session_key: the conversation (default: the crew's id, else the agent's).
        run_id: the agent run (default: none).
        agent_id: the agent, for ``openclaw_config`` per-agent blocks.
        warn_model: append an emitted warning to what the agent reads.
        on_critical: ``"block_call"``, ``"end_run"`` (stop the agent's next model call) or
            ``"recover"`` (block the run's first critical with the recovery message; the
            second stops the agent's next model call).
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
    ) -> None:
        self.guard = guard
        self.session_key = session_key
        self.run_id = run_id
        self.agent_id = agent_id
        check_adapter_arguments(guard, agent_id=agent_id, session_key=session_key, run_id=run_id)
        self.options = AdapterOptions(warn_model=warn_model, on_critical=on_critical)
        self.loop_error: LoopDetectedError | None = None
        self._pending: dict[int, ToolCall] = {}
        self._marks: dict[int, contextvars.Token[Any]] = {}
        self._stopped: set[object] = set()
        self._admissions = Admissions()
        # The assistant messages whose calls were admitted (held, so their ids stay
        # theirs), newest last: agents of one crew may run at once.
        self._turns: OrderedDict[int, tuple[object, QueuedIds]] = OrderedDict()
        self._lock = threading.Lock()

    # --- registration ------------------------------------------------------------------

    def register(self) -> LoopGuardToolHooks:
        """Register the hooks globally (for every crew); returns ``self``."""
        register_before_tool_call_hook(self.before_tool_call)
        register_after_tool_call_hook(self.after_tool_call)
        register_before_llm_call_hook(self.before_llm_call)
        return self

    def unregister(self) -> None:
        """Remove the hooks again."""
        unregister_before_tool_call_hook(self.before_tool_call)
        unregister_after_tool_call_hook(self.after_tool_call)
        unregister_before_llm_call_hook(self.before_llm_call)

    # --- the hooks -----------------------------------------------------------------------

    def _session(self, context: Any) -> object:
        if self.session_key is not None:
            return self.session_key(context) if callable(self.session_key) else self.session_key
        owner = getattr(context, "crew", None) or getattr(context, "agent", None)
        owner_id = getattr(owner, "id", None)
        return f"crewai:{owner_id}" if owner_id is not None else None

    def _call(self, context: Any, name: str, args: object, call_id: object) -> ToolCall:
        run = self.run_id(context) if callable(self.run_id) else self.run_id
        return ToolCall(
            self.guard,
            name,
            args,
            session_key=self._session(context),
            run_id=run,
            tool_call_id=call_id,
            agent_id=self.agent_id,
            options=self.options,
        )

    def _admit_turn(self, context: Any) -> QueuedIds | None:
        """Admit the calls of the model message this call belongs to, once per message;
        the message's queued call ids (``None`` without a message).

        CrewAI runs one message's native tool calls in a thread pool and gives the hooks
        no call id; the message itself (with its calls' ids) is already the executor's
        latest assistant message. Its calls are decided together (``guard.before_batch``)
        and their ids queued, per message, for the hooks of each call.
        """
        message = _latest_tool_message(context)
        if message is None:
            return None
        with self._lock:
            seen = self._turns.get(id(message))
            if seen is not None and seen[0] is message:
                return seen[1]
            ids = QueuedIds()
            self._turns[id(message)] = (message, ids)
            while len(self._turns) > MAX_TURNS:
                self._turns.popitem(last=False)
            calls = _message_calls(message)
            ids.queue(calls)
            batch = [self._call(context, name, args, call_id) for name, args, call_id in calls]
            # Still under the lock: a sibling's hook (another thread) must find the
            # decisions stored before it takes its own.
            self._admissions.admit(self.guard, batch)
            return ids

    def before_tool_call(self, context: Any) -> bool | None:
        """Ask the guard (or take the decision of the call's message); ``False`` blocks."""
        name, args = str(context.tool_name), dict(context.tool_input or {})
        ids = self._admit_turn(context)
        call_id = ids.take(name, args) if ids is not None else None
        tc = self._admissions.take(self._call(context, name, args, call_id))
        key = id(context.tool_input)
        self._pending[key] = tc
        try:
            tc.start()
        except LoopDetectedError as exc:
            # end_run, or recover's second critical: CrewAI swallows a hook's exception,
            # so the call is blocked and the session's next model call stopped.
            self.loop_error = exc
            self._stopped.add(self._session(context))
            return False
        if tc.blocked:
            return False
        if not tc.passthrough:
            # CrewAI runs the tool right after its before hooks, in the same context (a
            # copy of it per call for a message's parallel calls), and the after hooks
            # next: a guard.tool function used as the tool then passes the call through
            # instead of guarding and recording it a second time (two records a call, and
            # a block at half the threshold).
            self._marks[key] = enter_guarding(self.guard, tc.session_key, tc.tool_name)
        return None

    def after_tool_call(self, context: Any) -> str | None:
        """Record what the agent reads; show the blocked message or an emitted warning."""
        key = id(context.tool_input)
        mark = self._marks.pop(key, None)
        if mark is not None:
            leave_guarding(mark)
        tc = self._pending.pop(key, None)
        if tc is None:
            return None
        if tc.blocked:
            return tc.message
        shown = context.tool_result
        text = shown if isinstance(shown, str) else str(shown)
        if getattr(context, "tool", None) is None and text == TOOL_NOT_FOUND:
            tc.error(_unknown_tool_error(str(context.tool_name)))
        elif text.startswith(TOOL_ERROR_PREFIX):
            tc.error(text)
        else:
            tc.result(shown)
        tc.finish()
        warning = tc.warning
        return None if warning is None else f"{text}{WARNING_SEPARATOR}{warning}"

    def before_llm_call(self, context: Any) -> bool | None:
        """Under ``end_run``, stop the next model call of a session whose call was blocked."""
        session = self._session(context)
        if session in self._stopped:
            self._stopped.discard(session)
            # CrewAI's error for it (LLMCallBlockedError) does not say why.
            logger.warning(END_RUN_LOG.format(session=session))
            return False
        return None


def _latest_tool_message(context: Any) -> Any:
    """The executor's latest assistant message, when it carries tool calls (else None)."""
    executor = getattr(getattr(context, "agent", None), "agent_executor", None)
    messages = getattr(getattr(executor, "state", None), "messages", None)
    if not isinstance(messages, list):
        return None
    for message in reversed(messages):
        if isinstance(message, dict) and message.get("role") == "assistant":
            return message if message.get("tool_calls") else None
    return None


def _message_calls(message: dict[str, Any]) -> list[tuple[str, object, str]]:
    """``(tool name, arguments, id)`` of a message's tool calls, as the hooks see them."""
    calls = []
    for call in message.get("tool_calls") or ():
        function = call.get("function") if isinstance(call, dict) else None
        if not isinstance(function, dict) or not isinstance(call.get("id"), str):
            continue
        arguments = function.get("arguments")
        if isinstance(arguments, str):
            try:
                arguments = json.loads(arguments)
            except (ValueError, RecursionError):  # not JSON, or nested past the parser
                continue
        calls.append((str(function.get("name")), arguments if arguments else {}, call["id"]))
    return calls


# --- a scripted offline model --------------------------------------------------------------


class ScriptedLLM(BaseLLM):  # type: ignore[misc]
    """A CrewAI LLM with native tool calling that plays a
    :class:`~loopwatch.testing.LoopScript` offline."""

    def __init__(self, script: LoopScript | None = None, **kwargs: Any) -> None:
        kwargs.setdefault("model", "loopwatch-scripted")
        super().__init__(**kwargs)
        self._script = script if script is not None else LoopScript()

    def call(
        self,
        messages: Any,
        tools: Any = None,
        callbacks: Any = None,
        available_functions: Any = None,
        from_task: Any = None,
        from_agent: Any = None,
        response_model: Any = None,
    ) -> Any:
        """The script's next tool call, given the tool messages, or its final answer."""
        listed = messages if isinstance(messages, list) else []
        read = [m.get("content") for m in listed if isinstance(m, dict) and m.get("role") == "tool"]
        steps = self._script.next_calls(read)
        if not steps:
            return self._script.final
        return [
            {
                "id": f"call-{len(read) + i + 1}",
                "type": "function",
                "function": {"name": name, "arguments": json.dumps(args)},
            }
            for i, (name, args) in enumerate(steps)
        ]

    def supports_function_calling(self) -> bool:
        """Native tool calls."""
        return True

    def supports_stop_words(self) -> bool:
        """No stop words."""
        return False

    def get_context_window_size(self) -> int:
        """Large enough for any script."""
        return 1_000_000


__all__ = ["LoopGuardToolHooks", "ScriptedLLM"]
