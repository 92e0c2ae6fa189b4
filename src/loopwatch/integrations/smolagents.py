"""smolagents: guard every tool call of a ``ToolCallingAgent`` (or a ``CodeAgent``'s tools).

::

    from smolagents import InferenceClientModel, ToolCallingAgent
    from loopwatch import LoopGuard
    from loopwatch.integrations.smolagents import guard_agent

    agent = guard_agent(ToolCallingAgent(tools=[read_file], model=InferenceClientModel()),
                        LoopGuard({"enabled": True}), session_key="thread-1")
    agent.run("Summarise notes.txt")

What :func:`guard_agent` does (SPEC §11):

* A ``ToolCallingAgent`` runs every call through ``execute_tool_call``; the agent's one is
  wrapped. The calls of one model message run in a thread pool, so ``process_tool_calls``
  is wrapped too: it admits them together (``guard.before_batch``), so identical calls of
  one message count as the repeats they are and one critical blocks them all. A blocked
  call returns the blocked message as the observation and the tool is not run. The
  observation the model reads (``str(result).strip()``) is recorded, then an emitted
  warning is appended to it. A failing call reaches the model as smolagents'
  ``AgentToolExecutionError``: it is recorded as the error, and an emitted warning is
  appended to its message. A call of a tool the agent does not have is recorded as a failed
  call naming the tool. ``final_answer``, which ends the run, is not guarded.
* A ``CodeAgent`` calls its tools from the code the model writes: its tools are replaced
  by copies whose ``forward`` is guarded (the tool objects you passed are left alone, so
  one ``@tool`` can serve many agents, each with its own guard and session; calls of
  missing tools are Python errors of the code). A failing tool's error reaches the code
  again, of its own type, with an emitted warning appended to its message (left as it
  was when its type cannot be rebuilt from one message).

A ``guard.tool`` function inside a tool, with the same guard and session, passes its calls
through: each call is guarded and recorded once.

Sessions: smolagents has none, so the session is ``session_key`` (a string or a callable
evaluated on every call), by default one per agent object (``"smolagents:<name or id>"``),
which keeps its history across ``run`` calls like the agent's own memory with
``reset=False``. The run is ``run_id`` (default: none).

``on_critical="end_run"`` raises :class:`~loopwatch.LoopDetectedError` out of
``agent.run`` (smolagents only turns its own ``AgentError`` into a step error).
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Callable, Generator
from typing import Any, Final, TypeVar

from smolagents import CodeAgent, MultiStepAgent, Tool, ToolCallingAgent
from smolagents.models import (
    ChatMessage,
    ChatMessageToolCall,
    ChatMessageToolCallFunction,
    MessageRole,
    Model,
)
from smolagents.utils import AgentToolExecutionError

from loopwatch.adapter import (
    WARNING_SEPARATOR,
    AdapterOptions,
    Admissions,
    IdSource,
    OnCritical,
    QueuedIds,
    ToolCall,
    unknown_tool_error,
)
from loopwatch.guard import LoopGuard
from loopwatch.integrations._shared import check_adapter_arguments
from loopwatch.testing import LoopScript

A = TypeVar("A", bound=MultiStepAgent)

#: The tool that ends a smolagents run; it is not guarded.
FINAL_ANSWER: Final = "final_answer"
#: The prefixes smolagents puts before a tool response in the model's messages.
_RESPONSE_PREFIXES: Final = ("Observation:\n", "Error:\n")


def _observation(result: object) -> str:
    """What the model reads for a tool result (smolagents' own rendering)."""
    return str(result).strip()


def _resolve(source: IdSource) -> object:
    return source() if callable(source) else source


class _Guarded:
    """The wrapped ``execute_tool_call`` (and ``process_tool_calls``) of one agent.

    smolagents hands ``execute_tool_call`` a call's name and arguments but not its id, and
    runs the calls of one message in a thread pool. ``process_tool_calls``, which sees the
    whole message, queues each call's id (:class:`QueuedIds`) and admits the message's calls
    together (``guard.before_batch``); each ``execute_tool_call`` then takes an id queued
    under its name and arguments, and with it the batch's decision.
    """

    def __init__(
        self,
        agent: ToolCallingAgent,
        guard: LoopGuard,
        session_key: IdSource,
        run_id: IdSource,
        agent_id: str | None,
        options: AdapterOptions,
    ) -> None:
        self.agent = agent
        self.inner = agent.execute_tool_call
        self.inner_process = agent.process_tool_calls
        self.guard = guard
        self.session_key = session_key
        self.run_id = run_id
        self.agent_id = agent_id
        self.options = options
        self.admissions = Admissions()
        self.ids = QueuedIds()

    def _call(self, tool_name: str, arguments: object, call_id: object) -> ToolCall:
        return ToolCall(
            self.guard,
            tool_name,
            arguments,
            session_key=_resolve(self.session_key),
            run_id=_resolve(self.run_id),
            tool_call_id=call_id,
            agent_id=self.agent_id,
            options=self.options,
        )

    def process(self, chat_message: ChatMessage, memory_step: Any) -> Generator[Any, None, None]:
        """Queue the message's call ids and admit its calls together, then process them."""
        calls = [
            (c.function.name, c.function.arguments, c.id)
            for c in chat_message.tool_calls or ()
            if c.function.name != FINAL_ANSWER
        ]
        self.ids.queue(calls)
        self.admissions.admit(self.guard, [self._call(*call) for call in calls])
        yield from self.inner_process(chat_message, memory_step)

    def __call__(self, tool_name: str, arguments: dict[str, str] | str) -> Any:
        if tool_name == FINAL_ANSWER:
            return self.inner(tool_name, arguments)  # ends the run: nothing to guard
        tc = self.admissions.take(
            self._call(tool_name, arguments, self.ids.take(tool_name, arguments))
        )
        tc.start()
        if tc.blocked:
            return tc.message
        known = tool_name in self.agent.tools or tool_name in self.agent.managed_agents
        try:
            # In the call's scope: a guard.tool function inside the tool, on the same guard
            # and session, passes the call through instead of counting it a second time.
            with tc.scope():
                result = self.inner(tool_name, arguments)
        except AgentToolExecutionError as exc:
            tc.error(exc.message if known else unknown_tool_error(tool_name, exc.message))
            tc.finish()
            if tc.warning is None:
                raise
            raise AgentToolExecutionError(
                f"{exc.message}{WARNING_SEPARATOR}{tc.warning}", self.agent.logger
            ) from exc
        except Exception as exc:
            tc.error(exc)
            tc.finish()
            raise
        tc.result(_observation(result))
        tc.finish()
        warning = tc.warning
        return result if warning is None else f"{_observation(result)}{WARNING_SEPARATOR}{warning}"


def _with_warning(error: Exception, warning: str) -> Exception | None:
    """``error`` again, of its own type, its message followed by ``warning`` (``None``
    when its type cannot be rebuilt from a message)."""
    text = f"{error}{WARNING_SEPARATOR}{warning}"
    try:
        again = type(error)(text)
    except Exception:
        return None
    return again if str(again) == text else None


#: Set on the guarded copy of a ``CodeAgent`` tool: the tool it guards.
_INNER: Final = "_loopwatch_inner"


def _guard_tool(
    tool: Tool, guard: LoopGuard, ids: Callable[[], dict[str, Any]], options: AdapterOptions
) -> Tool:
    """A copy of a ``CodeAgent`` tool whose ``forward`` (called with the code's arguments)
    is guarded.

    A copy, not the tool itself: a ``@tool`` object is usually defined once and shared by
    every agent built with it (one agent per conversation), and a ``forward`` wrapped in
    place would keep the first agent's guard and session for all of them, stacking one
    more layer with each agent.
    """
    inner = tool.forward
    names = list(tool.inputs)

    @functools.wraps(inner)
    def forward(*args: Any, **kwargs: Any) -> Any:
        params = {**dict(zip(names, args, strict=False)), **kwargs}
        tc = ToolCall(guard, tool.name, params, options=options, **ids())
        tc.start()
        if tc.blocked:
            return tc.message
        try:
            with tc.scope():  # a guard.tool function inside passes the call through
                result = inner(*args, **kwargs)
        except Exception as exc:
            tc.error(exc)
            tc.finish()
            again = None if tc.warning is None else _with_warning(exc, tc.warning)
            if again is None:
                raise
            # The model reads the code's error as "<type>: <message>": the same error,
            # its message followed by the warning.
            raise again from exc
        tc.result(_observation(result))
        tc.finish()
        warning = tc.warning
        return result if warning is None else f"{_observation(result)}{WARNING_SEPARATOR}{warning}"

    guarded = copy.copy(tool)
    guarded.forward = forward
    setattr(guarded, _INNER, tool)
    return guarded


def guard_agent(
    agent: A,
    guard: LoopGuard,
    *,
    session_key: IdSource = None,
    run_id: IdSource = None,
    agent_id: str | None = None,
    warn_model: bool = True,
    on_critical: OnCritical = "block_call",
) -> A:
    """Guard every tool call of ``agent`` (changed in place and returned; see the module docs).

    Args:
        agent: a ``ToolCallingAgent`` or a ``CodeAgent``.
        guard: the guard (its config, store, listeners and shadow mode apply).
        session_key: the conversation: a string or a callable (default: one per agent).
        run_id: the agent run, likewise (default: none).
        agent_id: the agent, for ``openclaw_config`` per-agent blocks.
        warn_model: append an emitted warning to what the model reads.
        on_critical: ``"block_call"`` or ``"end_run"`` (raise ``LoopDetectedError``).

    Raises:
        TypeError: ``agent`` is neither kind, or is already guarded.
    """
    check_adapter_arguments(guard, agent_id=agent_id, session_key=session_key, run_id=run_id)
    options = AdapterOptions(warn_model=warn_model, on_critical=on_critical)
    if not isinstance(agent, (ToolCallingAgent, CodeAgent)):
        raise TypeError(f"guard_agent needs a ToolCallingAgent or a CodeAgent, not {type(agent)}")
    session = session_key if session_key is not None else f"smolagents:{agent.name or id(agent)}"
    if isinstance(agent, ToolCallingAgent):
        if isinstance(agent.execute_tool_call, _Guarded):
            raise TypeError("this agent is already guarded")
        guarded = _Guarded(agent, guard, session, run_id, agent_id, options)
        agent.execute_tool_call = guarded
        agent.process_tool_calls = guarded.process
        return agent

    def ids() -> dict[str, Any]:
        return {"session_key": _resolve(session), "run_id": _resolve(run_id), "agent_id": agent_id}

    # A CodeAgent: its tools are replaced by guarded copies (the executor is sent the
    # agent's tools at each run).
    if any(hasattr(tool, _INNER) for tool in agent.tools.values()):
        raise TypeError("this agent is already guarded")
    for name, tool in list(agent.tools.items()):
        if name != FINAL_ANSWER:
            agent.tools[name] = _guard_tool(tool, guard, ids, options)
    return agent


# --- a scripted offline model --------------------------------------------------------------


def _text(message: Any) -> str:
    content = message.content
    if isinstance(content, list):
        return "".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return str(content or "")


class ScriptedModel(Model):  # type: ignore[misc]
    """A smolagents ``Model`` (for a ``ToolCallingAgent``) that plays a
    :class:`~loopwatch.testing.LoopScript` offline, then calls ``final_answer``."""

    def __init__(self, script: LoopScript | None = None, **kwargs: Any) -> None:
        kwargs.setdefault("model_id", "loopwatch-scripted")
        super().__init__(**kwargs)
        self.script = script if script is not None else LoopScript()
        self._calls = 0
        self._sent: list[int] = []  # how many calls each message of this run had

    def generate(
        self,
        messages: list[ChatMessage | dict[str, Any]],
        stop_sequences: list[str] | None = None,
        response_format: dict[str, str] | None = None,
        tools_to_call_from: list[Tool] | None = None,
        **kwargs: Any,
    ) -> ChatMessage:
        """The script's next calls, given the tool responses in ``messages``.

        smolagents answers all the calls of one message in one tool response, so the
        response of the ``i``-th message counts as as many results as that message had
        calls (each one read as the whole response text).
        """
        responses = []
        for message in messages:
            if isinstance(message, ChatMessage) and message.role == MessageRole.TOOL_RESPONSE:
                text = _text(message)
                for prefix in _RESPONSE_PREFIXES:
                    text = text.removeprefix(prefix)
                responses.append(text)
        if not responses:
            self._sent.clear()  # a new run
        read = [text for text, n in zip(responses, self._sent, strict=False) for _ in range(n)]
        steps = self.script.next_calls(read) or [(FINAL_ANSWER, {"answer": self.script.final})]
        self._sent.append(len(steps))
        calls = []
        for name, args in steps:
            self._calls += 1
            calls.append(
                ChatMessageToolCall(
                    id=f"call-{self._calls:04d}",
                    type="function",
                    function=ChatMessageToolCallFunction(name=name, arguments=args),
                )
            )
        return ChatMessage(role=MessageRole.ASSISTANT, content="", tool_calls=calls)


__all__ = ["ScriptedModel", "guard_agent"]
