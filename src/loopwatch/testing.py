"""Helpers for testing code that uses loopwatch (a fake clock, a scripted session, a store).

Shipped with the library so users' own tests can drive a ``LoopGuard`` deterministically:
expiry and timestamps follow :class:`FakeClock`, and :func:`drive` plays a list of calls
the way a well-behaved host does (a blocked call is not run; its result is the block).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterable
from dataclasses import dataclass
from typing import Any

from loopwatch.core._undefined import UNDEFINED
from loopwatch.guard import Decision, LoopGuard
from loopwatch.stores.reference import ReferenceStore


class FakeClock:
    """A clock for ``LoopGuard(clock=...)`` that only moves when told to."""

    def __init__(self, start: float = 1_700_000_000.0) -> None:
        self.now = float(start)

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        """Move the clock forward (idle expiry, timestamps)."""
        self.now += seconds


@dataclass(frozen=True)
class ScriptedCall:
    """One call of a scripted session: what the tool returns, or raises."""

    tool: str
    args: Any = None
    result: Any = UNDEFINED
    error: Any = UNDEFINED


def drive(
    guard: LoopGuard,
    calls: Iterable[ScriptedCall],
    *,
    session_key: str = "test-session",
    run_id: str | None = None,
    on_decision: Callable[[int, Decision], None] | None = None,
) -> list[Decision]:
    """Play ``calls`` through ``guard`` as a host would and return every decision.

    A blocked call is not "run": its blocked result is passed to ``after_call``.
    ``PostCompactionLoopPersistedError`` propagates, as it would end a real run.
    """
    decisions: list[Decision] = []
    for index, call in enumerate(calls):
        call_id = f"call-{index}"
        decision = guard.before_call(
            call.tool, call.args, session_key=session_key, run_id=run_id, tool_call_id=call_id
        )
        decisions.append(decision)
        if on_decision is not None:
            on_decision(index, decision)
        if decision.tool_result is not None:
            guard.after_call(
                call.tool,
                call.args,
                session_key=session_key,
                run_id=run_id,
                tool_call_id=call_id,
                result=decision.tool_result,
            )
        else:
            guard.after_call(
                call.tool,
                call.args,
                session_key=session_key,
                run_id=run_id,
                tool_call_id=call_id,
                result=call.result,
                error=call.error,
            )
    return decisions


__all__ = ["FakeClock", "ReferenceStore", "ScriptedCall", "drive"]


# ==========================================================================================
# Scripted offline models (issue 16): what a looping model does, for every framework.
#
# Each framework adapter ships a small scripted model of its framework's own kind
# (``loopwatch.integrations.<framework>.ScriptedModel`` and the like) that plays a
# :class:`LoopScript`, so examples and users' tests run offline, with no API key. The
# script itself knows nothing of frameworks: it is told what the model has read so far.
# ==========================================================================================

from collections.abc import Sequence  # noqa: E402  (this section is appended on its own)

#: The call a looping model repeats by default: the README's ``read_file`` example.
DEFAULT_LOOP_CALL: tuple[str, dict[str, Any]] = ("read_file", {"path": "notes.txt"})


@dataclass(frozen=True)
class LoopScript:
    """What a scripted model does: call tools in a fixed cycle, then give a final answer.

    The model makes call ``n`` (counting from 0) as ``calls[n % len(calls)]`` until it has
    read ``times`` tool results, or until the last result it read contains ``stop_on``
    (a model that gives up once told it is blocked); then it answers ``final``.

    Attributes:
        calls: the (tool name, arguments) pairs to cycle through; two alternating pairs
            make a ping-pong.
        times: how many tool results the model reads before answering.
        final: the final answer's text.
        stop_on: text that makes the model stop when it reads it (``None``: never stop
            early).
        per_turn: how many calls each model message carries (parallel tool calls, the
            next ``per_turn`` calls of the cycle); see :meth:`next_calls`.
    """

    calls: tuple[tuple[str, dict[str, Any]], ...] = (DEFAULT_LOOP_CALL,)
    times: int = 60
    final: str = "done"
    stop_on: str | None = None
    per_turn: int = 1

    def __post_init__(self) -> None:
        if not self.calls:
            raise ValueError("a LoopScript needs at least one call")
        if self.times < 0:
            raise ValueError(f"times must be >= 0, not {self.times}")
        if self.per_turn < 1:
            raise ValueError(f"per_turn must be >= 1, not {self.per_turn}")

    def next_call(self, read: Sequence[object]) -> tuple[str, dict[str, Any]] | None:
        """The next call, given the tool results read so far, or ``None`` to answer."""
        if len(read) >= self.times:
            return None
        if self.stop_on is not None and read and self.stop_on in str(read[-1]):
            return None
        name, args = self.calls[len(read) % len(self.calls)]
        return name, dict(args)

    def next_calls(self, read: Sequence[object]) -> list[tuple[str, dict[str, Any]]]:
        """The calls of the model's next message (empty: answer with :attr:`final`).

        The next ``per_turn`` calls of the cycle, never past ``times`` results in all, so a
        framework that runs one message's calls in parallel sees them as one turn.
        """
        if self.next_call(read) is None:
            return []
        start = len(read)
        end = min(start + self.per_turn, self.times)
        return [
            (self.calls[i % len(self.calls)][0], dict(self.calls[i % len(self.calls)][1]))
            for i in range(start, end)
        ]


def loop_script(
    tool: str = DEFAULT_LOOP_CALL[0],
    args: dict[str, Any] | None = None,
    *,
    times: int = 60,
    final: str = "done",
    stop_on: str | None = None,
    per_turn: int = 1,
) -> LoopScript:
    """A :class:`LoopScript` that calls one tool with the same arguments ``times`` times
    (``per_turn`` of them in each model message)."""
    call_args = dict(DEFAULT_LOOP_CALL[1]) if args is None else dict(args)
    return LoopScript(
        calls=((tool, call_args),), times=times, final=final, stop_on=stop_on, per_turn=per_turn
    )


__all__ += ["DEFAULT_LOOP_CALL", "LoopScript", "loop_script"]


# --- scripted models of the frameworks whose adapters predate issue 16 -------------------
# Each function imports its framework when called, so ``loopwatch.testing`` itself needs
# none. The newer adapters ship theirs beside the adapter (``ScriptedModel`` and the like).


def langchain_model(script: LoopScript | None = None) -> Any:
    """A LangChain chat model playing ``script`` offline (``create_agent(model=...)``).

    It reads the ``ToolMessage`` contents since the last human message.
    """
    from langchain_core.language_models import BaseChatModel
    from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
    from langchain_core.outputs import ChatGeneration, ChatResult

    plan = script if script is not None else LoopScript()

    class ScriptedChatModel(BaseChatModel):
        @property
        def _llm_type(self) -> str:
            return "loopwatch-scripted"

        def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
            return self

        def _generate(
            self,
            messages: list[BaseMessage],
            stop: Any = None,
            run_manager: Any = None,
            **kwargs: Any,
        ) -> ChatResult:
            read: list[object] = []
            for message in reversed(messages):
                if message.type == "human":
                    break
                if isinstance(message, ToolMessage):
                    read.insert(0, message.content)
            steps = plan.next_calls(read)
            if not steps:
                answer = AIMessage(content=plan.final)
            else:
                calls = [
                    {"name": name, "args": args, "id": f"call-{len(read) + i + 1}"}
                    for i, (name, args) in enumerate(steps)
                ]
                answer = AIMessage(content="", tool_calls=calls)
            return ChatResult(generations=[ChatGeneration(message=answer)])

    return ScriptedChatModel()


def openai_agents_model(script: LoopScript | None = None) -> Any:
    """An OpenAI Agents SDK model playing ``script`` offline (``Agent(model=...)``).

    Built on the SDK's own ``agents.testing.ScriptedModel``; it reads the
    ``function_call_output`` items of the run's input.
    """
    from agents.testing import ModelCall, ModelStep, ScriptedModel, assistant_message, function_call

    plan = script if script is not None else LoopScript()

    def respond(call: ModelCall) -> list[Any]:
        items = call.input if isinstance(call.input, list) else []
        read = [
            item.get("output")
            for item in items
            if isinstance(item, dict) and item.get("type") == "function_call_output"
        ]
        steps = plan.next_calls(read)
        if not steps:
            return [assistant_message(plan.final)]
        return [
            function_call(name, args, call_id=f"call-{len(read) + i + 1}")
            for i, (name, args) in enumerate(steps)
        ]

    return ScriptedModel([ModelStep.respond(respond) for _ in range(plan.times + 1)])


def pydantic_ai_model(script: LoopScript | None = None) -> Any:
    """A pydantic-ai model playing ``script`` offline (``Agent(model=...)``): a
    ``FunctionModel`` reading the ``ToolReturnPart`` / ``RetryPromptPart`` contents, for
    ``run`` / ``run_sync`` and streamed runs (``run_stream``) alike."""
    from pydantic_ai.messages import (
        ModelMessage,
        ModelRequest,
        ModelResponse,
        RetryPromptPart,
        TextPart,
        ToolCallPart,
        ToolReturnPart,
    )
    from pydantic_ai.models.function import AgentInfo, DeltaToolCall, FunctionModel

    plan = script if script is not None else LoopScript()

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        read: list[object] = []
        for message in messages:
            if isinstance(message, ModelRequest):
                for part in message.parts:
                    if isinstance(part, (ToolReturnPart, RetryPromptPart)):
                        read.append(part.content)
        steps = plan.next_calls(read)
        if not steps:
            return ModelResponse(parts=[TextPart(plan.final)])
        return ModelResponse(
            parts=[
                ToolCallPart(name, args, f"call-{len(read) + i + 1}")
                for i, (name, args) in enumerate(steps)
            ]
        )

    async def stream(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[Any]:
        # agent.run_stream / iter with streamed requests: the same answer, one delta a part.
        for index, part in enumerate(respond(messages, info).parts):
            if isinstance(part, TextPart):
                yield part.content
            elif isinstance(part, ToolCallPart):
                yield {
                    index: DeltaToolCall(
                        name=part.tool_name,
                        json_args=part.args_as_json_str(),
                        tool_call_id=part.tool_call_id,
                    )
                }

    return FunctionModel(respond, stream_function=stream)


__all__ += ["langchain_model", "openai_agents_model", "pydantic_ai_model"]
