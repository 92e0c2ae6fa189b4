"""pydantic-ai: a real ``Agent`` with a ``FunctionModel`` that loops."""

from __future__ import annotations

import dataclasses
import itertools
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
from pydantic_ai import Agent, ModelRetry, ToolReturn
from pydantic_ai.messages import (
    CompactionPart,
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.usage import UsageLimits

from loopwatch import LoopDetectedError, LoopGuard, PostCompactionLoopPersistedError
from loopwatch import messages as texts
from loopwatch.integrations.pydantic_ai import WARNING_METADATA_KEY, LoopGuardCapability

LIMITS = UsageLimits(request_limit=100)


class LoopingModel:
    """A ``FunctionModel`` function: calls ``tool(**args)`` until it reads CRITICAL or made
    ``max_calls`` calls. Remembers the tool results it read, and what came with them."""

    def __init__(
        self, tool: str = TOOL, max_calls: int = 20, compact_at: int | None = None
    ) -> None:
        self.tool = tool
        self.max_calls = max_calls
        self.compact_at = compact_at
        self.read: list[Any] = []
        self.notes: list[str] = []
        self._ids = itertools.count(1)

    def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        self.read, self.notes = [], []
        for message in messages:
            if isinstance(message, ModelRequest):
                for part in message.parts:
                    if isinstance(part, ToolReturnPart):
                        self.read.append(part.content)
                    elif isinstance(part, UserPromptPart) and part.content != "go":
                        self.notes.append(str(part.content))
        last = self.read[-1] if self.read else None
        if isinstance(last, str) and "CRITICAL" in last:
            return ModelResponse(parts=[TextPart("stopping: the loop guard blocked me")])
        if len(self.read) >= self.max_calls:
            return ModelResponse(parts=[TextPart("done")])
        parts: list[Any] = [ToolCallPart(self.tool, dict(ARGS), f"call-{next(self._ids)}")]
        if self.compact_at is not None and len(self.read) == self.compact_at:
            parts.insert(0, CompactionPart(content="we kept reading notes.txt"))
        return ModelResponse(parts=parts)


def make_agent(
    model: LoopingModel, counter: Counter, capability: LoopGuardCapability, **kw: Any
) -> Agent[None, str]:
    agent: Agent[None, str] = Agent(FunctionModel(model), capabilities=[capability], **kw)

    @agent.tool_plain(name=TOOL)
    def read_file(path: str) -> str:
        """Read a file."""
        return counter()

    return agent


def test_warning_reaches_the_model_then_the_call_is_blocked() -> None:
    guard, events = make_guard()
    counter, model = Counter(), LoopingModel()
    agent = make_agent(model, counter, LoopGuardCapability(guard))
    result = agent.run_sync("go", conversation_id="conv-1", usage_limits=LIMITS)

    assert counter.calls == BLOCK_AT - 1
    assert model.read[: WARN_AT - 1] == [RESULT] * (WARN_AT - 1)
    assert model.read[WARN_AT - 1] == WARNED_RESULT
    assert model.read[WARN_AT] == RESULT
    assert model.read[BLOCK_AT - 1] == CRITICAL
    assert result.output == "stopping: the loop guard blocked me"
    assert [e.type for e in events] == ["tool.loop", "tool.loop", "tool.execution.blocked"]
    history = guard.history(session_key="conv-1")
    assert len(history) == BLOCK_AT - 1
    assert {r.run_id for r in history} == {result.run_id}


def test_warn_model_off() -> None:
    guard, _ = make_guard()
    model = LoopingModel()
    agent = make_agent(model, Counter(), LoopGuardCapability(guard, warn_model=False))
    agent.run_sync("go", usage_limits=LIMITS)
    assert model.read[WARN_AT - 1] == RESULT
    assert model.read[BLOCK_AT - 1] == CRITICAL


def test_end_run_raises_out_of_run() -> None:
    guard, _ = make_guard()
    counter = Counter()
    agent = make_agent(LoopingModel(), counter, LoopGuardCapability(guard, on_critical="end_run"))
    with pytest.raises(LoopDetectedError) as caught:
        agent.run_sync("go", usage_limits=LIMITS)
    assert str(caught.value) == CRITICAL
    assert counter.calls == BLOCK_AT - 1


def test_shadow_mode_never_blocks() -> None:
    guard, events = make_guard(enforce=False)
    counter, model = Counter(), LoopingModel(max_calls=16)
    agent = make_agent(model, counter, LoopGuardCapability(guard, on_critical="end_run"))
    result = agent.run_sync("go", usage_limits=LIMITS)
    assert result.output == "done"
    assert counter.calls == 16
    assert not any("CRITICAL" in str(r) for r in model.read)
    assert not any(e.type == "tool.execution.blocked" for e in events)


async def test_async_run_and_async_tool() -> None:
    guard, _ = make_guard()
    counter, model = Counter(), LoopingModel()
    agent: Agent[None, str] = Agent(FunctionModel(model), capabilities=[LoopGuardCapability(guard)])

    @agent.tool_plain(name=TOOL)
    async def read_file(path: str) -> str:
        """Read a file."""
        return counter()

    result = await agent.run("go", usage_limits=LIMITS)
    assert counter.calls == BLOCK_AT - 1
    assert model.read[WARN_AT - 1] == WARNED_RESULT
    assert model.read[BLOCK_AT - 1] == CRITICAL
    assert result.output == "stopping: the loop guard blocked me"


def test_a_structured_result_gets_the_warning_in_the_tool_result() -> None:
    guard, _ = make_guard()
    model = LoopingModel()
    agent: Agent[None, str] = Agent(FunctionModel(model), capabilities=[LoopGuardCapability(guard)])

    @agent.tool_plain(name=TOOL)
    def read_file(path: str) -> dict[str, str]:
        """Read a file."""
        return {"text": RESULT}

    result = agent.run_sync("go", usage_limits=LIMITS)
    # The model reads the warning in the tool result itself, after the result's JSON text
    # (as pydantic-ai renders a dict), in this request and every later one.
    assert model.read[WARN_AT - 2] == {"text": RESULT}
    assert model.read[WARN_AT - 1] == f'{{"text":"{RESULT}"}}\n\n{WARNING}'
    assert model.read[WARN_AT] == {"text": RESULT}
    assert model.notes == []
    assert model.read[BLOCK_AT - 1] == CRITICAL
    # The history keeps the tool's own result, and the warning beside it.
    returns = [p for m in result.all_messages() for p in m.parts if isinstance(p, ToolReturnPart)]
    assert returns[WARN_AT - 1].content == {"text": RESULT}
    assert returns[WARN_AT - 1].metadata == {WARNING_METADATA_KEY: WARNING}
    assert all(p.metadata is None for i, p in enumerate(returns) if i != WARN_AT - 1)


def test_a_tool_return_gets_the_warning_in_its_return_value_or_metadata() -> None:
    guard, _ = make_guard()
    model = LoopingModel()
    agent: Agent[None, str] = Agent(FunctionModel(model), capabilities=[LoopGuardCapability(guard)])

    @agent.tool_plain(name=TOOL)
    def read_file(path: str) -> ToolReturn:
        """Read a file."""
        return ToolReturn(return_value=RESULT, content="page 1 of 1")

    agent.run_sync("go", usage_limits=LIMITS)
    assert model.read[WARN_AT - 1] == WARNED_RESULT
    assert model.notes == ["page 1 of 1"] * (BLOCK_AT - 1)
    assert model.read[BLOCK_AT - 1] == CRITICAL

    guard, _ = make_guard()
    model = LoopingModel()
    agent = Agent(FunctionModel(model), capabilities=[LoopGuardCapability(guard)])

    @agent.tool_plain(name=TOOL)
    def read_rows(path: str) -> ToolReturn:
        """Read a file."""
        return ToolReturn(return_value=[1, 2], metadata={"rows": 2})

    result = agent.run_sync("go", usage_limits=LIMITS)
    assert model.read[WARN_AT - 1] == f"[1,2]\n\n{WARNING}"
    returns = [p for m in result.all_messages() for p in m.parts if isinstance(p, ToolReturnPart)]
    assert returns[WARN_AT - 1].content == [1, 2]
    assert returns[WARN_AT - 1].metadata == {"rows": 2, WARNING_METADATA_KEY: WARNING}


def test_a_tool_return_with_other_metadata_gets_the_warning_as_content() -> None:
    guard, _ = make_guard()
    model = LoopingModel()
    agent: Agent[None, str] = Agent(FunctionModel(model), capabilities=[LoopGuardCapability(guard)])

    @agent.tool_plain(name=TOOL)
    def read_rows(path: str) -> ToolReturn:
        """Read a file."""
        return ToolReturn(return_value=[1, 2], metadata=("not", "a dict"))

    agent.run_sync("go", usage_limits=LIMITS)
    assert model.read[WARN_AT - 1] == [1, 2]
    assert model.notes == [WARNING]


def test_unknown_tools_are_recorded_and_the_stream_guard_answers() -> None:
    guard, _ = make_guard(config={**CONFIG, "unknownToolThreshold": 3})
    counter, model = Counter(), LoopingModel(tool="open_file")
    # pydantic-ai's own retry budget ends such loops early by default; raise it so the
    # stream guard has something to stop.
    agent = make_agent(model, counter, LoopGuardCapability(guard, session_key="s"), retries=10)
    agent_result = agent.run_sync("go", usage_limits=LIMITS)
    history = guard.history(session_key="s")
    assert [r.unknown_tool_name for r in history] == ["open_file"] * 3
    assert agent_result.output == texts.UNKNOWN_TOOL_STREAM.format(name="open_file")
    assert counter.calls == 0


def test_a_compaction_part_arms_the_guard_and_a_persisting_loop_ends_the_run() -> None:
    guard, events = make_guard()
    counter = Counter()
    agent = make_agent(LoopingModel(compact_at=4), counter, LoopGuardCapability(guard))
    with pytest.raises(PostCompactionLoopPersistedError) as caught:
        agent.run_sync("go", usage_limits=LIMITS)
    assert [e.type for e in events].count("guard.armed") == 1
    assert counter.calls == 4 + 3
    assert caught.value.tool_name == TOOL


def test_options_are_validated() -> None:
    with pytest.raises(ValueError, match="on_critical"):
        LoopGuardCapability(LoopGuard(), on_critical="stop")  # type: ignore[arg-type]


def test_a_warned_part_that_cannot_be_rendered_is_left_as_it_is() -> None:
    from loopwatch.integrations.pydantic_ai import _warned

    class Unrenderable(ToolReturnPart):
        def model_response_str(self, *, wrap_if_error: bool = True) -> str:
            raise ValueError("no JSON form")

    part = Unrenderable(TOOL, {"text": RESULT}, metadata={WARNING_METADATA_KEY: WARNING})
    assert _warned(part) is part
    plain = ToolReturnPart(TOOL, {"text": RESULT}, metadata={WARNING_METADATA_KEY: WARNING})
    assert _warned(plain).content == f'{{"text":"{RESULT}"}}\n\n{WARNING}'
    failed = dataclasses.replace(plain, outcome="failed")
    assert _warned(failed) is failed


def test_a_request_context_of_another_shape_is_sent_as_it_is(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The per-request warning hook never raises into the run: a request context it cannot
    rebuild (another pydantic-ai's shape) goes to the model unchanged, with a log line."""
    import asyncio

    class OddContext:  # not a dataclass: dataclasses.replace refuses it
        def __init__(self) -> None:
            self.messages: list[Any] = []

    capability = LoopGuardCapability(LoopGuard({"enabled": True}), session_key="s")
    odd = OddContext()
    with caplog.at_level("WARNING", logger="loopwatch.tools"):
        sent = asyncio.run(capability.before_model_request(None, odd))  # type: ignore[arg-type]
    assert sent is odd
    assert "loop warnings not added" in caplog.text


@pytest.mark.parametrize("per_turn", [1, 3])
async def test_a_streamed_run_with_the_scripted_model(per_turn: int) -> None:
    # agent.run_stream with loopwatch.testing's model (it had no stream_function, so a
    # streamed run failed at its first request): guarded like a plain run, and the calls
    # of one streamed response are admitted together.
    from loopwatch.testing import loop_script, pydantic_ai_model

    events: list[Any] = []
    guard = LoopGuard({"enabled": True}, listeners=[events.append])
    agent: Agent[None, str] = Agent(
        pydantic_ai_model(loop_script(times=25, per_turn=per_turn)),
        capabilities=[LoopGuardCapability(guard)],
    )
    counter = Counter()

    @agent.tool_plain
    def read_file(path: str) -> str:
        """Read a file."""
        return counter()

    async with agent.run_stream("go", usage_limits=LIMITS, conversation_id="s") as run:
        assert await run.get_output() == "done"
    assert counter.calls == (20 if per_turn == 1 else 19)
    assert sum(e.type == "tool.execution.blocked" for e in events) == (5 if per_turn == 1 else 6)


@pytest.mark.parametrize("enforcing_first", [True, False])
async def test_two_capabilities_with_two_guards_both_block_on_time(enforcing_first: bool) -> None:
    # The first capability is the outermost: it read the inner guard's warned result as
    # another outcome, so its no-progress count started over and it never blocked.
    enforcing, events = make_guard()
    shadow, _ = make_guard(enforce=False)
    caps = [LoopGuardCapability(enforcing), LoopGuardCapability(shadow)]
    if not enforcing_first:
        caps.reverse()
    counter, model = Counter(), LoopingModel(max_calls=30)
    agent: Agent[None, str] = Agent(FunctionModel(model), capabilities=caps)

    @agent.tool_plain(name=TOOL)
    def read_file(path: str) -> str:
        """Read a file."""
        return counter()

    await agent.run("go", conversation_id="c-1", usage_limits=LIMITS)

    assert model.read[WARN_AT - 1].startswith(WARNED_RESULT)
    assert model.read[BLOCK_AT - 1] == CRITICAL
    assert counter.calls == BLOCK_AT - 1
    assert [e.type for e in events] == ["tool.loop", "tool.loop", "tool.execution.blocked"]
    for guard in (enforcing, shadow):
        # Each records the tool's own result, without the other's warning (an outer
        # shadow guard then records the inner guard's block, a failed call).
        history = guard.history(session_key="c-1")[: BLOCK_AT - 1]
        assert len({record.result_hash for record in history}) == 1
    assert len(enforcing.history(session_key="c-1")) == BLOCK_AT - 1


@pytest.mark.parametrize("enforcing_first", [True, False])
async def test_two_guards_on_a_failing_tool_record_the_same_error(enforcing_first: bool) -> None:
    enforcing, events = make_guard()
    shadow, _ = make_guard(enforce=False)
    caps = [LoopGuardCapability(enforcing), LoopGuardCapability(shadow)]
    if not enforcing_first:
        caps.reverse()
    model = LoopingModel(max_calls=30)
    agent: Agent[None, str] = Agent(FunctionModel(model), capabilities=caps)

    @agent.tool_plain(name=TOOL, retries=100)
    def read_file(path: str) -> str:
        """Read a file."""
        raise ModelRetry("disk on fire")

    await agent.run("go", conversation_id="c-1", usage_limits=LIMITS)

    assert [e.type for e in events][-1] == "tool.execution.blocked"
    history = enforcing.history(session_key="c-1")
    assert len(history) == BLOCK_AT - 1
    assert len({record.result_hash for record in history}) == 1
