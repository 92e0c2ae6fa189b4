"""smolagents: a real ``ToolCallingAgent`` (and ``CodeAgent`` tools) with a scripted model."""

from __future__ import annotations

from typing import Any

import pytest
from framework_matrix import (
    BY_NAME,
    FAILURE,
    SINGLE,
    Scenario,
    Tools,
    blocks,
    check_answers,
    make_guard,
)
from smolagents import CodeAgent, Tool, ToolCallingAgent
from smolagents.agents import ToolOutput
from smolagents.memory import ActionStep
from smolagents.models import ChatMessage, MessageRole, Model

from loopwatch import LoopDetectedError
from loopwatch.integrations.smolagents import ScriptedModel, guard_agent
from loopwatch.testing import LoopScript


def smol_tools(tools: Tools) -> list[Tool]:
    """The three matrix tools as smolagents ``Tool`` objects."""

    def make(name: str, fn: Any) -> Tool:
        class _T(Tool):  # type: ignore[misc]
            inputs = {"path": {"type": "string", "description": "the path"}}  # noqa: RUF012
            output_type = "string"

            def forward(self, path: str) -> str:
                return str(fn(path))

        _T.name = name
        _T.description = f"{name} a path"
        return _T()

    return [
        make("read_file", tools.read_file),
        make("list_dir", tools.list_dir),
        make("flaky_read", tools.flaky_read),
    ]


def make_agent(script: LoopScript, tools: Tools) -> ToolCallingAgent:
    return ToolCallingAgent(
        tools=smol_tools(tools),
        model=ScriptedModel(script),
        max_steps=script.times + 2,
        verbosity_level=0,
    )


def observations(agent: ToolCallingAgent) -> list[str]:
    """What the model read after each step: the observation, or the error."""
    read = []
    for step in agent.memory.steps:
        if not isinstance(step, ActionStep):
            continue
        if step.error is not None:
            read.append(str(step.error))
        elif step.tool_calls and step.tool_calls[0].name != "final_answer":
            read.append(str(step.observations))
    return read


def tool_outputs(agent: ToolCallingAgent, task: str) -> tuple[list[str], BaseException | None]:
    """What the model read for each call (smolagents' ``ToolOutput`` observations, in call
    order), and the exception that ended the run."""
    outputs: list[ToolOutput] = []
    try:
        for item in agent.run(task, stream=True):
            if isinstance(item, ToolOutput) and not item.is_final_answer:
                outputs.append(item)
    except LoopDetectedError as exc:
        return [o.observation for o in sorted(outputs, key=lambda o: o.id)], exc
    return [o.observation for o in sorted(outputs, key=lambda o: o.id)], None


# The recover and parallel rows. smolagents runs the calls of one message in a thread pool;
# the adapter admits them together from process_tool_calls, so the parallel row gives the
# batch figures (18 runs, 42 blocks). A ToolCallingAgent runs only synchronously.
@pytest.mark.parametrize(
    "scenario", [BY_NAME["recover"], BY_NAME["parallel"]], ids=lambda s: s.name
)
def test_the_matrix_recover_and_parallel(scenario: Scenario) -> None:
    guard, events = make_guard()
    tools = Tools()
    agent = guard_agent(
        make_agent(scenario.script, tools),
        guard,
        session_key="thread-1",
        on_critical=scenario.on_critical,  # type: ignore[arg-type]
    )
    read, error = tool_outputs(agent, "Summarise notes.txt")
    check_answers(scenario, read, tools, events, error)
    ids = {r.tool_call_id for r in guard.history(session_key="thread-1")}
    assert len(ids) == scenario.executions and None not in ids  # each call kept its own id


@pytest.mark.parametrize("scenario", SINGLE, ids=lambda s: s.name)
def test_the_matrix(scenario: Scenario) -> None:
    guard, events = make_guard()
    tools = Tools()
    agent = guard_agent(make_agent(scenario.script, tools), guard, session_key="thread-1")
    assert agent.run("Summarise notes.txt") == "done"
    read = observations(agent)

    assert len(read) == 60
    assert tools.total == scenario.executions
    assert blocks(events) == scenario.blocks
    if scenario.warned_at is not None:
        assert read[scenario.warned_at].endswith(f"\n\n{scenario.warning}")
        assert "WARNING" not in read[scenario.warned_at - 1]
    if scenario.blocked_message is not None:
        assert read[-1] == scenario.blocked_message
    history = guard.history(session_key="thread-1")
    if scenario.name == "unknown":
        assert [r.unknown_tool_name for r in history] == ["open_file"] * 10
    if scenario.name == "failing":
        assert FAILURE in read[0]


@pytest.mark.parametrize("name", ["repeat", "unknown", "failing"])
def test_end_run_raises_out_of_run(name: str) -> None:
    guard, _ = make_guard()
    tools = Tools()
    agent = guard_agent(make_agent(BY_NAME[name].script, tools), guard, on_critical="end_run")
    with pytest.raises(LoopDetectedError) as caught:
        agent.run("go")
    if BY_NAME[name].blocked_message is not None:
        assert str(caught.value) == BY_NAME[name].blocked_message
    assert tools.total == BY_NAME[name].executions


def test_default_session_shadow_mode_and_warn_model_off() -> None:
    guard, events = make_guard(enforce=False)
    tools = Tools()
    agent = guard_agent(make_agent(BY_NAME["repeat"].script, tools), guard, warn_model=False)
    agent.run("go")
    assert tools.total == 60
    assert blocks(events) == 0
    assert not any("WARNING" in r for r in observations(agent))
    assert len(guard.history(session_key=f"smolagents:{id(agent)}")) == 30  # historySize
    with pytest.raises(TypeError, match="already guarded"):
        guard_agent(agent, guard)


def test_code_agent_tools_are_guarded() -> None:
    guard, events = make_guard()
    tools = Tools()
    agent = guard_agent(
        CodeAgent(tools=smol_tools(tools), model=ScriptedModel()), guard, session_key="code"
    )
    read_file = agent.tools["read_file"]
    shown = [read_file("notes.txt") for _ in range(60)]
    assert tools.total == 20
    assert blocks(events) == 40
    assert shown[10].endswith(str(BY_NAME["repeat"].warning))
    assert shown[20] == BY_NAME["repeat"].blocked_message
    with pytest.raises(TypeError, match="ToolCallingAgent or a CodeAgent"):
        guard_agent(object(), guard)  # type: ignore[type-var]


class _GuardedTools(Tools):
    """The matrix tools, ``read_file`` a ``guard.tool`` function on the agent's session."""

    def __init__(self, guard: Any, session_key: str) -> None:
        super().__init__()
        self.read_file = guard.tool(super().read_file, session_key=session_key, name="read_file")  # type: ignore[method-assign]


@pytest.mark.parametrize("scenario", [BY_NAME["repeat"], BY_NAME["parallel"]], ids=lambda s: s.name)
def test_a_guard_tool_function_inside_the_tool_is_guarded_once(scenario: Scenario) -> None:
    # Two layers on one guard and session: the adapter guards the call, the guard.tool
    # function inside the tool passes it through (one record, one warning, the block at 20).
    guard, events = make_guard()
    tools = _GuardedTools(guard, "thread-1")
    agent = guard_agent(make_agent(scenario.script, tools), guard, session_key="thread-1")
    read, _ = tool_outputs(agent, "Summarise notes.txt")

    assert tools.runs["read_file"] == scenario.executions
    assert blocks(events) == scenario.blocks
    assert len(guard.history(session_key="thread-1")) == scenario.executions
    assert sum(str(scenario.warning) in r for r in read) == 1


def test_a_guard_tool_function_inside_a_code_agent_tool_is_guarded_once() -> None:
    guard, events = make_guard()
    tools = _GuardedTools(guard, "code")
    agent = guard_agent(
        CodeAgent(tools=smol_tools(tools), model=ScriptedModel()), guard, session_key="code"
    )
    shown = [agent.tools["read_file"]("notes.txt") for _ in range(60)]
    assert tools.total == 20
    assert blocks(events) == 40
    assert sum(str(BY_NAME["repeat"].warning) in s for s in shown) == 1


class _CodeModel(Model):  # type: ignore[misc]
    """A smolagents model for a ``CodeAgent``: writes ``code`` ``times`` times, then ends."""

    def __init__(self, code: str, times: int) -> None:
        super().__init__(model_id="scripted-code")
        self.code = code
        self.times = times
        self.turns = 0

    def generate(self, messages: Any, *args: Any, **kwargs: Any) -> ChatMessage:
        self.turns += 1
        body = self.code if self.turns <= self.times else "final_answer('done')"
        return ChatMessage(
            role=MessageRole.ASSISTANT, content=f"Thought: go\n<code>\n{body}\n</code>"
        )


def test_code_agents_sharing_tools_each_guard_their_own_calls() -> None:
    # One set of tools (a module's @tool objects) serves an agent per conversation. Each
    # agent's tools are guarded copies: the first agent's guard and session used to stay
    # wrapped around the shared tool, so the second conversation's 5th healthy call was
    # blocked by the first one's history (and each agent stacked one more layer).
    tools = Tools()
    shared = smol_tools(tools)
    originals = {tool.name: tool.forward for tool in shared}
    runs = []
    for _ in range(2):
        guard, events = make_guard()
        agent = guard_agent(
            CodeAgent(
                tools=shared,
                model=_CodeModel("print(read_file(path='notes.txt'))", times=15),
                max_steps=20,
                verbosity_level=0,
            ),
            guard,
        )
        agent.run("Summarise notes.txt")
        read = observations(agent)
        runs.append((blocks(events), sum(str(BY_NAME["repeat"].warning) in r for r in read)))

    assert runs == [(0, 1), (0, 1)]
    assert tools.runs["read_file"] == 30
    assert {tool.name: tool.forward for tool in shared} == originals
    with pytest.raises(TypeError, match="already guarded"):
        guard_agent(agent, guard)


def test_a_code_agent_reads_the_warning_of_a_failing_tool() -> None:
    # The code's error is what a CodeAgent's model reads: the warning rides on it, and the
    # error keeps its type (before, the warning of a failing call was never shown).
    guard, events = make_guard()
    tools = Tools()
    code = "print(flaky_read(path='notes.txt'))"
    agent = guard_agent(
        CodeAgent(
            tools=smol_tools(tools),
            model=_CodeModel(code, times=25),
            max_steps=30,
            verbosity_level=0,
        ),
        guard,
    )
    agent.run("Summarise notes.txt")
    read = observations(agent)

    assert tools.runs["flaky_read"] == 20
    assert blocks(events) == 5
    warned = [r for r in read if str(BY_NAME["failing"].warning) in r]
    assert len(warned) == 1
    assert f"RuntimeError: {FAILURE}" in warned[0]


@pytest.mark.parametrize("inner_enforces", [False, True])
def test_a_guard_tool_function_of_another_guard_keeps_the_adapter_blocking(
    inner_enforces: bool,
) -> None:
    # Two guards: the function's own appends its warning to the observation, which the
    # adapter recorded as another outcome (its no-progress count started over; with a
    # shadow guard inside it never blocked). It records the tool's text without it.
    scenario = BY_NAME["repeat"]
    inner, _ = make_guard(enforce=inner_enforces)
    outer, events = make_guard()
    tools = _GuardedTools(inner, "thread-1")
    agent = guard_agent(make_agent(scenario.script, tools), outer, session_key="thread-1")
    read, _ = tool_outputs(agent, "Summarise notes.txt")

    assert tools.runs["read_file"] == scenario.executions
    assert blocks(events) == scenario.blocks
    history = outer.history(session_key="thread-1")
    assert len(history) == scenario.executions
    assert len({record.result_hash for record in history}) == 1
    assert read[scenario.executions] == scenario.blocked_message
