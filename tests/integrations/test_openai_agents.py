"""OpenAI Agents SDK: a real ``Agent`` run by ``Runner`` with a scripted model that loops.

The model is the SDK's own ``agents.testing.ScriptedModel``: each step computes the
answer from what the model was sent. Tracing is off (and the one test that turns it on
first removes every trace processor), so nothing leaves the process.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Callable
from typing import Any

import pytest
from agents import (
    Agent,
    FunctionTool,
    RunConfig,
    Runner,
    ToolGuardrailFunctionOutput,
    ToolInputGuardrail,
    ToolOutputGuardrail,
    function_tool,
    set_trace_processors,
    set_tracing_disabled,
)
from agents.testing import ModelCall, ModelStep, ScriptedModel, assistant_message, function_call
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
from openai.types.responses import ResponseFunctionToolCall
from pydantic import BaseModel

from loopwatch import LoopDetectedError, LoopGuard, PostCompactionLoopPersistedError
from loopwatch import messages as texts
from loopwatch.integrations.openai_agents import (
    LoopDetectedRunError,
    LoopGuardrails,
    PostCompactionRunError,
    _params,
    _programmatic,
    guard_agent,
    tool_error_formatter,
)

set_tracing_disabled(True)

SESSION = "conversation-1"
RUN = RunConfig(group_id=SESSION)
MAX_TURNS = 60


def outputs(call: ModelCall) -> list[str]:
    """The tool outputs the model has read so far, in order."""
    items = call.input if isinstance(call.input, list) else []
    return [
        str(item.get("output"))
        for item in items
        if isinstance(item, dict) and item.get("type") == "function_call_output"
    ]


class LoopingModel(ScriptedModel):
    """Calls ``read_file`` with the same arguments until it reads CRITICAL or made
    ``max_calls`` calls; remembers every output it read."""

    def __init__(self, max_calls: int = 20) -> None:
        self.read: list[str] = []
        self.max_calls = max_calls
        self._ids = itertools.count(1)
        super().__init__([ModelStep.respond(self._respond) for _ in range(max_calls + 2)])

    def _respond(self, call: ModelCall) -> list[Any]:
        self.read = outputs(call)
        if self.read and "CRITICAL" in self.read[-1]:
            return [assistant_message("stopping: the loop guard blocked me")]
        if len(self.read) >= self.max_calls:
            return [assistant_message("done")]
        return [function_call(TOOL, ARGS, call_id=f"call-{next(self._ids)}")]


def make_agent(model: LoopingModel, counter: Counter, *, asynchronous: bool = False) -> Agent[Any]:
    def read_file(path: str) -> str:
        """Read a file."""
        return counter()

    async def aread_file(path: str) -> str:
        """Read a file."""
        return counter()

    tool = (
        function_tool(aread_file, name_override=TOOL) if asynchronous else function_tool(read_file)
    )
    return Agent(name="reader", model=model, tools=[tool])


async def run(agent: Agent[Any], run_config: RunConfig = RUN) -> Any:
    return await Runner.run(agent, "go", max_turns=MAX_TURNS, run_config=run_config)


async def test_warning_reaches_the_model_then_the_call_is_blocked() -> None:
    guard, events = make_guard()
    counter, model = Counter(), LoopingModel()
    result = await run(guard_agent(make_agent(model, counter), guard))

    assert counter.calls == BLOCK_AT - 1
    assert model.read[: WARN_AT - 1] == [RESULT] * (WARN_AT - 1)
    assert model.read[WARN_AT - 1] == WARNED_RESULT
    assert model.read[WARN_AT] == RESULT
    assert model.read[BLOCK_AT - 1] == CRITICAL
    assert len(model.read) == BLOCK_AT
    assert result.final_output == "stopping: the loop guard blocked me"
    assert [e.type for e in events] == ["tool.loop", "tool.loop", "tool.execution.blocked"]
    assert len(guard.history(session_key=SESSION)) == BLOCK_AT - 1


async def test_the_original_agent_is_not_changed() -> None:
    guard, _ = make_guard()
    agent = make_agent(LoopingModel(), Counter())
    guarded = guard_agent(agent, guard)
    assert guarded is not agent
    (original,), (copy,) = agent.tools, guarded.tools
    assert isinstance(original, FunctionTool) and isinstance(copy, FunctionTool)
    assert not original.tool_input_guardrails
    assert copy.tool_input_guardrails


async def test_warn_model_off() -> None:
    guard, _ = make_guard()
    model = LoopingModel()
    await run(guard_agent(make_agent(model, Counter()), guard, warn_model=False))
    assert model.read[WARN_AT - 1] == RESULT
    assert model.read[BLOCK_AT - 1] == CRITICAL


async def test_end_run_raises_out_of_the_runner() -> None:
    guard, _ = make_guard()
    counter = Counter()
    agent = guard_agent(make_agent(LoopingModel(), counter), guard, on_critical="end_run")
    with pytest.raises(LoopDetectedError) as caught:
        await run(agent)
    assert isinstance(caught.value, LoopDetectedRunError)
    assert str(caught.value) == CRITICAL
    assert counter.calls == BLOCK_AT - 1


async def test_shadow_mode_never_blocks() -> None:
    guard, events = make_guard(enforce=False)
    counter, model = Counter(), LoopingModel(max_calls=16)
    agent = guard_agent(make_agent(model, counter), guard, on_critical="end_run")
    result = await run(agent)
    assert counter.calls == 16
    assert result.final_output == "done"
    assert "CRITICAL" not in "".join(model.read)
    assert not any(e.type == "tool.execution.blocked" for e in events)
    assert sum(e.type == "tool.loop" for e in events) == 1 + 4  # a warning, 4 would-be blocks


async def test_async_tool() -> None:
    guard, _ = make_guard()
    counter, model = Counter(), LoopingModel()
    await run(guard_agent(make_agent(model, counter, asynchronous=True), guard))
    assert counter.calls == BLOCK_AT - 1
    assert model.read[WARN_AT - 1] == WARNED_RESULT
    assert model.read[BLOCK_AT - 1] == CRITICAL


def test_sync_runner() -> None:
    guard, _ = make_guard()
    counter, model = Counter(), LoopingModel()
    agent = guard_agent(make_agent(model, counter), guard)
    Runner.run_sync(agent, "go", max_turns=MAX_TURNS, run_config=RUN)
    assert counter.calls == BLOCK_AT - 1
    assert model.read[BLOCK_AT - 1] == CRITICAL


async def test_session_key_and_run_id_options() -> None:
    guard, _ = make_guard()
    keys: Callable[[Any], object] = lambda context: f"user-{context.tool_name}"  # noqa: E731
    agent = guard_agent(
        make_agent(LoopingModel(max_calls=2), Counter()), guard, session_key=keys, run_id="r-1"
    )
    await run(agent, RunConfig())
    history = guard.history(session_key=f"user-{TOOL}")
    assert [(r.run_id, r.tool_call_id) for r in history] == [("r-1", "call-1"), ("r-1", "call-2")]


async def test_without_a_session_nothing_is_guarded() -> None:
    guard, _ = make_guard()
    counter = Counter()
    await run(guard_agent(make_agent(LoopingModel(), counter), guard), RunConfig())
    assert counter.calls == 20  # tracing is off and no group id: no session, no blocks


async def test_with_tracing_on_the_trace_is_the_session_and_the_run() -> None:
    # Tracing on, but with no processor: trace ids exist and nothing is exported.
    set_trace_processors([])
    set_tracing_disabled(False)
    try:
        guard, _ = make_guard()
        counter = Counter()
        await run(guard_agent(make_agent(LoopingModel(), counter), guard), RunConfig())
    finally:
        set_tracing_disabled(True)
    assert counter.calls == BLOCK_AT - 1


async def test_post_compaction_abort_ends_the_run() -> None:
    guard, _ = make_guard()
    guard.compaction_retry(session_key=SESSION)  # the host compacted the session
    counter = Counter()
    with pytest.raises(PostCompactionLoopPersistedError) as caught:
        await run(guard_agent(make_agent(LoopingModel(), counter), guard))
    assert isinstance(caught.value, PostCompactionRunError)
    assert (caught.value.tool_name, caught.value.count) == (TOOL, 3)
    assert counter.calls == 3


async def test_existing_guardrails_keep_their_place() -> None:
    guard = LoopGuard()
    rails = LoopGuardrails(guard)
    agent = make_agent(LoopingModel(), Counter())
    (tool,) = agent.tools
    assert isinstance(tool, FunctionTool)
    once = rails.apply(tool)
    twice = rails.apply(once)
    assert twice.tool_input_guardrails == [rails.input]
    assert twice.tool_output_guardrails == [rails.output]


class Notes(BaseModel):
    """A structured tool output (the tool gets an output schema)."""

    text: str


def structured_agent(model: LoopingModel, runs: Counter, *, fails: bool) -> Agent[Any]:
    def read_file(path: str) -> Notes:
        """Read a file."""
        runs()
        if fails:
            raise RuntimeError("disk on fire")
        return Notes(text=RESULT)

    return Agent(name="reader", model=model, tools=[function_tool(read_file, output_type=Notes)])


async def test_a_structured_output_is_recorded_and_warned_as_the_sdk_sends_it() -> None:
    guard, events = make_guard()
    counter = Counter()
    model = LoopingModel()
    await run(guard_agent(structured_agent(model, counter, fails=False), guard))
    sent = Notes(text=RESULT).model_dump_json()
    assert model.read[: WARN_AT - 1] == [sent] * (WARN_AT - 1)
    # The warning rides on the JSON the model reads, not on the model's Python repr.
    assert model.read[WARN_AT - 1] == f"{sent}\n\n{WARNING}"
    # A blocked call never runs the tool; the model reads the blocked message.
    assert counter.calls == BLOCK_AT - 1
    assert model.read[BLOCK_AT - 1] == CRITICAL
    assert sum(1 for e in events if e.type == "tool.execution.blocked") == 1


async def test_a_failing_tool_with_an_output_schema_does_not_fail_the_run() -> None:
    # The SDK sends its default error text past the output schema; the guarded copy's
    # failure policy must keep that, or validating the text fails the run at once.
    guard, _ = make_guard()
    counter = Counter()
    model = LoopingModel()
    unguarded = LoopingModel()
    await run(structured_agent(unguarded, Counter(), fails=True))
    await run(guard_agent(structured_agent(model, counter, fails=True), guard))
    error_text = unguarded.read[0]
    assert model.read[: WARN_AT - 1] == [error_text] * (WARN_AT - 1)
    assert model.read[WARN_AT - 1].startswith(f"{error_text}\n\nWARNING")
    assert model.read[BLOCK_AT - 1].startswith("CRITICAL")
    assert counter.calls == BLOCK_AT - 1
    # Recorded as the raised error, as a plain guard records it, not as the SDK's text.
    reference, _ = make_guard()
    reference.before_call(TOOL, ARGS, session_key="ref")
    reference.after_call(TOOL, ARGS, error=RuntimeError("disk on fire"), session_key="ref")
    (expected,) = reference.history(session_key="ref")
    history = guard.history(session_key=SESSION)
    assert {r.result_hash for r in history} == {expected.result_hash}


@pytest.mark.parametrize(
    "arguments", ["[" * 100_000 + "]" * 100_000, "not json", "9" * 5000, '{"a": 1'], ids=repr
)
def test_arguments_the_model_sent_that_are_no_json_are_kept_as_text(arguments: str) -> None:
    # The model writes the arguments: a nest deeper than the parser's recursion limit is
    # not JSON loopwatch can read either, and must not raise out of the guardrail.
    assert _params(arguments) == arguments


def test_program_calls_are_told_apart() -> None:
    # A call a hosted program makes (it needs a hosted tool, so no offline run has one)
    # keeps its schema output: no warning is spliced into it.
    args = {"arguments": "{}", "call_id": "c", "name": "t", "type": "function_call"}
    program = {"type": "program", "caller_id": "p"}
    assert _programmatic(ResponseFunctionToolCall.model_validate({**args, "caller": program}))
    assert not _programmatic(ResponseFunctionToolCall.model_validate(args))
    assert not _programmatic(None)


@pytest.mark.parametrize(
    ("session_key", "runs"),
    [(None, 18), (lambda ctx: ctx.context["thread_id"], 18)],
    ids=["group-id-only", "session-key"],
)
async def test_with_tracing_off_a_response_is_admitted_as_one_batch(
    session_key: Any, runs: int
) -> None:
    # With tracing off, only the tool guardrails see RunConfig.group_id, not the hook that
    # reads each response: the calls of one response were decided one by one (21 of 30
    # identical calls ran, three per response). Now the first of them to reach its input
    # guardrail admits them all, as a session_key callable taking the run context lets the
    # hook do (18 run: the seventh response is blocked whole). Default thresholds (20).
    guard = LoopGuard({"enabled": True})
    counter = Counter()
    steps = [
        [function_call(TOOL, ARGS, call_id=f"call-{turn}-{i}") for i in range(3)]
        for turn in range(10)
    ]
    model = ScriptedModel([*steps, [assistant_message("done")]])
    agent = guard_agent(make_agent(model, counter), guard, session_key=session_key)  # type: ignore[arg-type]
    await Runner.run(
        agent, "go", max_turns=MAX_TURNS, run_config=RUN, context={"thread_id": SESSION}
    )
    assert counter.calls == runs


MISSING = "open_file"
MISSING_RUN = RunConfig(group_id=SESSION, tool_not_found_behavior="return_error_to_model")


class MissingToolModel(ScriptedModel):
    """Calls the missing ``open_file`` until it reads CRITICAL or made ``max_calls`` calls."""

    def __init__(self, max_calls: int = 20) -> None:
        self.read: list[str] = []
        self.max_calls = max_calls
        super().__init__([ModelStep.respond(self._respond) for _ in range(max_calls + 2)])

    def _respond(self, call: ModelCall) -> list[Any]:
        self.read = outputs(call)
        if (self.read and "CRITICAL" in self.read[-1]) or len(self.read) >= self.max_calls:
            return [assistant_message("stopping")]
        return [function_call(MISSING, ARGS, call_id=f"call-{len(self.read)}")]


async def test_a_missing_tool_loop_reaches_the_model_through_the_tool_error_formatter() -> None:
    # The SDK answers a call of a missing tool itself, with RunConfig.tool_error_formatter's
    # text: loopwatch's formatter shows the model the warning (generic, at the 11th
    # identical call) after the SDK's text, then the unknown-tool block (12 misses).
    guard, events = make_guard(config={**CONFIG, "unknownToolThreshold": 12})
    model = MissingToolModel()
    agent = guard_agent(make_agent(LoopingModel(), Counter()), guard, session_key=SESSION)
    agent = agent.clone(model=model)
    asked: list[str] = []

    def mine(args: Any) -> str | None:
        asked.append(args.kind)
        return f"no tool named {args.tool_name}" if args.kind == "tool_not_found" else None

    config = dataclasses.replace(
        MISSING_RUN, tool_error_formatter=tool_error_formatter(agent, mine)
    )
    result = await run(agent, config)
    assert result.final_output == "stopping"
    assert model.read[: WARN_AT - 1] == [f"no tool named {MISSING}"] * (WARN_AT - 1)
    warning = texts.GENERIC_WARNING.format(tool=MISSING, count=10)
    assert model.read[WARN_AT - 1] == f"no tool named {MISSING}\n\n{warning}"
    assert model.read[WARN_AT] == f"no tool named {MISSING}"
    assert model.read[BLOCK_AT - 1] == texts.UNKNOWN_TOOL_CRITICAL.format(name=MISSING, count=12)
    assert len(model.read) == BLOCK_AT
    assert asked == ["tool_not_found"] * (BLOCK_AT - 1)  # not asked for the block
    assert [r.unknown_tool_name for r in guard.history(session_key=SESSION)] == [MISSING] * 12
    assert [e.type for e in events][-1] == "tool.execution.blocked"

    # Without an inner formatter the SDK's own text is kept.
    guard, _ = make_guard(config={**CONFIG, "unknownToolThreshold": 12})
    model = MissingToolModel()
    agent = guard_agent(make_agent(LoopingModel(), Counter()), guard, session_key=SESSION)
    agent = agent.clone(model=model)
    config = dataclasses.replace(MISSING_RUN, tool_error_formatter=tool_error_formatter(agent))
    await run(agent, config)
    assert model.read[0] == f"Tool '{MISSING}' not found."
    assert model.read[WARN_AT - 1] == f"Tool '{MISSING}' not found.\n\n{warning}"
    assert model.read[BLOCK_AT - 1].startswith("CRITICAL: attempted unavailable tool")


async def test_without_the_formatter_the_model_reads_the_sdk_text() -> None:
    # The documented limitation: the block is decided and evented, but the SDK's text is
    # all the model reads.
    guard, events = make_guard(config={**CONFIG, "unknownToolThreshold": 3})
    model = MissingToolModel(max_calls=6)
    agent = guard_agent(make_agent(LoopingModel(), Counter()), guard, session_key=SESSION)
    await run(agent.clone(model=model), MISSING_RUN)
    assert model.read == [f"Tool '{MISSING}' not found."] * 6
    assert "tool.execution.blocked" in [e.type for e in events]


def test_the_formatter_needs_a_guarded_agent() -> None:
    with pytest.raises(ValueError, match="guard_agent"):
        tool_error_formatter(Agent(name="plain"))


def test_the_scripted_model_makes_parallel_calls() -> None:
    # loopwatch.testing.openai_agents_model honours LoopScript.per_turn (it made one call a
    # response): a turn of 3 identical calls is admitted as one batch, 19 runs, not 20.
    from loopwatch.testing import loop_script, openai_agents_model

    events: list[Any] = []
    runs: list[str] = []

    @function_tool
    def read_file(path: str) -> str:
        """Read a file."""
        runs.append(path)
        return "the notes"

    agent = guard_agent(
        Agent(
            name="reader",
            model=openai_agents_model(loop_script(times=25, per_turn=3)),
            tools=[read_file],
        ),
        LoopGuard({"enabled": True}, listeners=[events.append]),
        session_key="thread-1",
    )
    Runner.run_sync(agent, "go", max_turns=30)
    assert len(runs) == 19
    assert sum(e.type == "tool.execution.blocked" for e in events) == 6


async def test_the_tools_of_the_agents_mcp_servers_are_guarded() -> None:
    # Agent(mcp_servers=[...]): the SDK lists the servers' tools at each turn, as function
    # tools the guarded copy never held, so they ran unguarded (30 of 30 calls reached
    # the server). The copy now guards them as they are listed.
    import pathlib
    import sys

    from agents.mcp import MCPServerStdio

    from loopwatch.testing import loop_script, openai_agents_model

    server_script = pathlib.Path(__file__).with_name("mcp_echo_server.py")
    events: list[Any] = []
    params: Any = {"command": sys.executable, "args": [str(server_script)]}
    async with MCPServerStdio(params=params, cache_tools_list=True) as server:
        agent = guard_agent(
            Agent(
                name="reader",
                model=openai_agents_model(loop_script(args={"path": "notes.txt"}, times=25)),
                mcp_servers=[server],
            ),
            LoopGuard({"enabled": True}, listeners=[events.append]),
            session_key="thread-1",
        )
        result = await Runner.run(agent, "go", max_turns=30)
        ran = await server.call_tool("stats", {})

    outputs = [str(i.output) for i in result.new_items if i.type == "tool_call_output_item"]
    assert ran.content[0].text == "20"  # type: ignore[union-attr]
    assert texts.GENERIC_WARNING.format(tool="read_file", count=10) in outputs[10]
    assert outputs[20] == texts.GENERIC_CRITICAL.format(tool="read_file", count=20)
    assert sum(e.type == "tool.execution.blocked" for e in events) == 5


async def _refuse(data: Any) -> ToolGuardrailFunctionOutput:
    return ToolGuardrailFunctionOutput.reject_content("not allowed today")


async def _shout(data: Any) -> ToolGuardrailFunctionOutput:
    return ToolGuardrailFunctionOutput.reject_content(str(data.output).upper())


@pytest.mark.parametrize("side", ["input", "output"])
async def test_a_tool_guardrail_of_its_own_that_rejects_keeps_the_loop_guarded(side: str) -> None:
    # The SDK stops at the first guardrail that rejects: the tool's own input guardrail
    # refusing the call, or its output guardrail rewriting the output, kept loopwatch's
    # output guardrail from recording anything, so the loop was never warned or blocked.
    guard, events = make_guard()
    counter, model = Counter(), LoopingModel()
    agent = make_agent(model, counter)
    (tool,) = agent.tools
    assert isinstance(tool, FunctionTool)
    if side == "input":
        own = dataclasses.replace(tool, tool_input_guardrails=[ToolInputGuardrail(_refuse)])
        shown = "not allowed today"
    else:
        own = dataclasses.replace(tool, tool_output_guardrails=[ToolOutputGuardrail(_shout)])
        shown = RESULT.upper()
    result = await run(guard_agent(agent.clone(tools=[own]), guard))

    assert model.read[: WARN_AT - 1] == [shown] * (WARN_AT - 1)
    assert model.read[WARN_AT - 1] == f"{shown}\n\n{WARNING}"
    assert model.read[BLOCK_AT - 1] == CRITICAL
    assert len(model.read) == BLOCK_AT
    assert counter.calls == (0 if side == "input" else BLOCK_AT - 1)
    assert len(guard.history(session_key=SESSION)) == BLOCK_AT - 1
    assert [e.type for e in events] == ["tool.loop", "tool.loop", "tool.execution.blocked"]
    # The tool's own guardrail is still there, under its own name, and still decides.
    names = [r.guardrail.get_name() for r in result.tool_input_guardrail_results]
    names += [r.guardrail.get_name() for r in result.tool_output_guardrail_results]
    assert ("_refuse" if side == "input" else "_shout") in names


async def test_a_tool_guardrail_of_its_own_keeps_a_healthy_agent_unwarned() -> None:
    guard, events = make_guard()
    ids = itertools.count(1)

    def respond(call: ModelCall) -> list[Any]:
        read = outputs(call)
        if len(read) >= 30:
            return [assistant_message("done")]
        return [function_call(TOOL, {"path": f"{len(read)}.txt"}, call_id=f"c-{next(ids)}")]

    model = ScriptedModel([ModelStep.respond(respond) for _ in range(32)])
    agent = make_agent(LoopingModel(), Counter())
    (tool,) = agent.tools
    assert isinstance(tool, FunctionTool)
    own = dataclasses.replace(tool, tool_output_guardrails=[ToolOutputGuardrail(_shout)])
    await run(guard_agent(agent.clone(model=model, tools=[own]), guard))

    assert events == []
    assert len(guard.history(session_key=SESSION)) == 30


@pytest.mark.parametrize("inner_enforces", [True, False])
async def test_guard_agent_twice_with_two_guards_blocks_at_the_threshold(
    inner_enforces: bool,
) -> None:
    # The outer guard's output guardrail runs after the inner one's, which rewrites a
    # warned output: the outer guard records the output itself, and still blocks on time.
    inner, _ = make_guard(enforce=inner_enforces)
    outer, outer_events = make_guard()
    counter, model = Counter(), LoopingModel()
    agent = guard_agent(guard_agent(make_agent(model, counter), inner), outer)
    await run(agent)

    assert model.read[: WARN_AT - 1] == [RESULT] * (WARN_AT - 1)
    assert model.read[WARN_AT - 1] == f"{RESULT}\n\n{WARNING}\n\n{WARNING}"
    assert model.read[BLOCK_AT - 1] == CRITICAL
    assert counter.calls == BLOCK_AT - 1
    assert [e.type for e in outer_events] == ["tool.loop", "tool.loop", "tool.execution.blocked"]
    history = outer.history(session_key=SESSION)
    assert len(history) == BLOCK_AT - 1
    assert len({record.result_hash for record in history}) == 1
