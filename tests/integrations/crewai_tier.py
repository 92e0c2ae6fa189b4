"""CrewAI: a real ``Crew`` with a scripted offline LLM (native tool calls) and tool hooks.

CrewAI pins ``pydantic<2.13``, ``openai<3`` and ``mcp<2``, so it cannot be installed beside
the other extras and this module is not collected by the default run (its name does not
start with ``test_``). ``.ci/run`` runs it in a virtualenv of its own, as the README
("Try it on a fresh machine") shows::

    python -m venv /tmp/venv-crewai && /tmp/venv-crewai/bin/python -m pip install -e ".[crewai,dev]"
    /tmp/venv-crewai/bin/python -m pytest -q tests/integrations/crewai_tier.py
"""

from __future__ import annotations

import asyncio
import linecache
import logging
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

os.environ.setdefault("CREWAI_DISABLE_TELEMETRY", "true")
os.environ.setdefault("OTEL_SDK_DISABLED", "true")
os.environ.setdefault("CREWAI_TRACING_ENABLED", "false")

import pytest
from crewai import Agent, Crew, Task
from crewai.llms.base_llm import LLMCallBlockedError
from crewai.tools import tool
from crewai.tools.tool_failure import ToolExecutionFailedError
from crewai.utilities import agent_utils
from framework_matrix import (
    BY_NAME,
    FAILURE,
    READ_RESULT,
    SINGLE,
    Scenario,
    Tools,
    blocks,
    check_answers,
    make_guard,
)
from test_readme_snippets import snippets

from loopwatch import LoopGuard
from loopwatch.integrations.crewai import LoopGuardToolHooks, ScriptedLLM, _message_calls
from loopwatch.messages import BATCH_SIBLING_BLOCKED
from loopwatch.testing import LoopScript


class ReadingLLM(ScriptedLLM):
    """The scripted LLM, remembering the tool messages it last read."""

    def call(self, messages: Any, *args: Any, **kwargs: Any) -> Any:
        listed = messages if isinstance(messages, list) else []
        self.__dict__["read"] = [m.get("content") for m in listed if m.get("role") == "tool"]
        return super().call(messages, *args, **kwargs)


def make_crew(script: LoopScript, tools: Tools, **agent: Any) -> tuple[Crew, ReadingLLM]:
    @tool("read_file")
    def read_file(path: str) -> str:
        """Read a file."""
        return tools.read_file(path)

    @tool("list_dir")
    def list_dir(path: str) -> str:
        """List a folder."""
        return tools.list_dir(path)

    @tool("flaky_read")
    def flaky_read(path: str) -> str:
        """Read a file, unreliably."""
        return tools.flaky_read(path)

    llm = ReadingLLM(script)
    agent = Agent(
        role="reader",
        goal="read notes",
        backstory="reads",
        llm=llm,
        max_iter=script.times + 5,
        **agent,
        tools=[read_file, list_dir, flaky_read],
        verbose=False,
    )
    task = Task(description="Summarise notes.txt", expected_output="a summary", agent=agent)
    return Crew(agents=[agent], tasks=[task], verbose=False), llm


@pytest.fixture(autouse=True)
def crewai_repeat_limit(monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest) -> None:
    """CrewAI stops a run itself at the 5th identical (tool, args, result) call; the matrix
    lifts that limit to measure loopwatch alone (``test_crewai_own_limit`` keeps it)."""
    if "own_limit" not in request.node.name:
        monkeypatch.setattr(agent_utils, "MAX_REPEATED_TOOL_CALLS", 10_000)


@pytest.fixture
def hooks_of() -> Iterator[list[LoopGuardToolHooks]]:
    registered: list[LoopGuardToolHooks] = []
    yield registered
    for hooks in registered:
        hooks.unregister()


# The recover and parallel rows. CrewAI runs one message's native tool calls in a thread
# pool; the hooks admit them together (from the executor's latest assistant message), so
# the parallel row gives the batch figures (18 runs, 42 blocks). Under "recover" the second
# critical cannot raise through a hook: the next model call is stopped and CrewAI ends the
# run with its own error, the loop error kept on the hooks. Sync: Crew.kickoff; async:
# Crew.akickoff (native async execution).
@pytest.mark.parametrize(
    "scenario", [BY_NAME["recover"], BY_NAME["parallel"]], ids=lambda s: s.name
)
@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
def test_the_matrix_recover_and_parallel(
    scenario: Scenario, asynchronous: bool, hooks_of: list[LoopGuardToolHooks]
) -> None:
    guard, events = make_guard()
    hooks = LoopGuardToolHooks(
        guard,
        session_key="crew-1",
        on_critical=scenario.on_critical,  # type: ignore[arg-type]
    ).register()
    hooks_of.append(hooks)
    tools = Tools()
    # CrewAI retries a failed task (max_retry_limit, 2 by default), which would start the
    # loop again after the run ended; the row measures one run.
    crew, llm = make_crew(scenario.script, tools, max_retry_limit=0)
    error: BaseException | None = None
    try:
        result = asyncio.run(crew.akickoff()) if asynchronous else crew.kickoff()
        assert str(result) == "done"
    except LLMCallBlockedError:  # CrewAI's own error for the stopped model call
        error = hooks.loop_error
    read = [str(r) for r in llm.__dict__["read"]]
    check_answers(scenario, read, tools, events, error)
    ids = {r.tool_call_id for r in guard.history(session_key="crew-1")}
    assert len(ids) == scenario.executions and None not in ids  # each call kept its own id


@pytest.mark.parametrize("scenario", SINGLE, ids=lambda s: s.name)
def test_the_matrix(scenario: Scenario, hooks_of: list[LoopGuardToolHooks]) -> None:
    guard, events = make_guard()
    hooks_of.append(LoopGuardToolHooks(guard, session_key="crew-1").register())
    tools = Tools()
    crew, llm = make_crew(scenario.script, tools)
    assert str(crew.kickoff()) == "done"
    read = llm.__dict__["read"]

    assert len(read) == 60
    assert tools.total == scenario.executions
    assert blocks(events) == scenario.blocks
    if scenario.warned_at is not None:
        assert str(read[scenario.warned_at]).endswith(str(scenario.warning))
        assert "WARNING" not in str(read[scenario.warned_at - 1])
    if scenario.blocked_message is not None:
        assert read[-1] == scenario.blocked_message
    history = guard.history(session_key="crew-1")
    if scenario.name == "unknown":
        assert [r.unknown_tool_name for r in history] == ["open_file"] * 10
    if scenario.name == "failing":
        assert FAILURE in str(read[0])


def test_end_run_stops_the_crew(
    hooks_of: list[LoopGuardToolHooks], caplog: pytest.LogCaptureFixture
) -> None:
    guard, _ = make_guard()
    hooks = LoopGuardToolHooks(guard, on_critical="end_run").register()
    hooks_of.append(hooks)
    tools = Tools()
    crew, _ = make_crew(BY_NAME["repeat"].script, tools)
    with pytest.raises(LLMCallBlockedError, match="blocked by before_llm_call"):
        crew.kickoff()
    # CrewAI's error does not say why: the log line does, and where the loop error is.
    # (CrewAI retries the failed task twice: each retry is stopped again.)
    stops = [r for r in caplog.records if "after a critical loop" in r.getMessage()]
    assert len(stops) == 3
    assert all(r.name == "loopwatch.tools" for r in stops)
    assert "LoopGuardToolHooks.loop_error" in stops[0].getMessage()
    assert hooks.loop_error is not None
    assert str(hooks.loop_error) == BY_NAME["repeat"].blocked_message
    assert tools.total == 20


def test_the_default_session_is_the_crew(hooks_of: list[LoopGuardToolHooks]) -> None:
    guard, _ = make_guard()
    hooks_of.append(LoopGuardToolHooks(guard).register())
    crew, _ = make_crew(LoopScript(times=3), Tools())
    crew.kickoff()
    assert len(guard.history(session_key=f"crewai:{crew.id}")) == 3
    with pytest.raises(ValueError, match="on_critical"):
        LoopGuardToolHooks(LoopGuard(), on_critical="stop")  # type: ignore[arg-type]


@dataclass(frozen=True)
class SplitAfterBlock(LoopScript):
    """Three identical calls a message, then, once a block was read, one a message."""

    def next_calls(self, read: Sequence[object]) -> list[tuple[str, dict[str, Any]]]:
        if self.next_call(read) is None:
            return []
        size = 1 if any("CRITICAL" in str(r) for r in read) else self.per_turn
        return [("read_file", {"path": "notes.txt"})] * min(size, self.times - len(read))


@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
def test_a_call_alone_after_its_refused_batch_is_decided_on_the_recorded_history(
    asynchronous: bool, hooks_of: list[LoopGuardToolHooks]
) -> None:
    # Batches of three identical calls: six run (18 records), the seventh would make the
    # 19th, 20th and 21st call, so the whole batch is refused before any runs and nothing
    # of it is recorded. The same call alone is then the 19th: the guard allows it (as it
    # would without the refused batch), the 20th too, and the 21st is blocked: the loop
    # runs 20 times, as one call at a time, and never further.
    guard, events = make_guard()
    hooks_of.append(LoopGuardToolHooks(guard, session_key="crew-1").register())
    tools = Tools()
    crew, llm = make_crew(SplitAfterBlock(times=30, per_turn=3), tools, max_retry_limit=0)
    result = asyncio.run(crew.akickoff()) if asynchronous else crew.kickoff()
    assert str(result) == "done"
    read = [str(r) for r in llm.__dict__["read"]]
    critical = BY_NAME["repeat"].blocked_message
    assert len(read) == 30
    assert all(r.startswith(READ_RESULT) for r in read[:18])
    # CrewAI runs a turn's calls on threads: which of the three reaches the guard last (the
    # critical one) varies from run to run, so the batch is compared as a multiset.
    assert sorted(read[18:21]) == sorted([BATCH_SIBLING_BLOCKED, BATCH_SIBLING_BLOCKED, critical])
    assert all(r.startswith(READ_RESULT) for r in read[21:23])  # the 19th and 20th run
    assert read[23:] == [critical] * 7
    assert tools.total == 20 == len(guard.history(session_key="crew-1"))
    assert blocks(events) == 3 + 7
    # What the hooks enforced is the guard's own decision on 18 identical records.
    alone = LoopGuard({"enabled": True})
    call = ("read_file", {"path": "notes.txt"})
    for n in range(18):
        alone.before_call(*call, session_key="s", tool_call_id=n)
        alone.after_call(*call, session_key="s", tool_call_id=n, result=READ_RESULT)
    assert alone.before_call(*call, session_key="s", tool_call_id=18).action != "block"


def test_crewai_own_limit_stops_identical_calls_at_five(hooks_of: list[LoopGuardToolHooks]) -> None:
    guard, events = make_guard()
    hooks_of.append(LoopGuardToolHooks(guard, session_key="crew-2").register())
    tools = Tools()
    crew, _ = make_crew(BY_NAME["repeat"].script, tools)
    with pytest.raises(ToolExecutionFailedError, match="same arguments 5 times"):
        crew.kickoff()
    assert tools.total == 5
    assert len(guard.history(session_key="crew-2")) == 5
    assert blocks(events) == 0


# --- construction and hostile arguments (the main suite's test_adapter_construction) ----


@pytest.mark.parametrize("guard", [None, "guard", object(), LoopGuard], ids=repr)
def test_a_guard_that_is_no_guard_is_refused(guard: object) -> None:
    with pytest.raises(TypeError, match=r"^guard must be a LoopGuard, not "):
        LoopGuardToolHooks(guard)  # type: ignore[arg-type]


@pytest.mark.parametrize("setting", ["session_key", "run_id"])
@pytest.mark.parametrize("bad", [3, 2.5, b"s", ["s"]], ids=repr)
def test_an_id_setting_that_is_no_str_nor_callable_is_refused(setting: str, bad: object) -> None:
    guard = LoopGuard({"enabled": True})
    with pytest.raises(TypeError, match=f"^{setting} must be a str, a callable or None"):
        LoopGuardToolHooks(guard, **{setting: bad})  # type: ignore[arg-type]
    LoopGuardToolHooks(guard, **{setting: "fixed"})  # type: ignore[arg-type]
    LoopGuardToolHooks(guard, **{setting: lambda *_context: "computed"})  # type: ignore[arg-type]


@pytest.mark.parametrize("agent_id", [3, b"coder", ["coder"]], ids=repr)
def test_an_agent_id_that_is_no_str_is_refused(agent_id: object) -> None:
    with pytest.raises(TypeError, match=r"^agent_id must be a str or None, not "):
        LoopGuardToolHooks(LoopGuard({"enabled": True}), agent_id=agent_id)  # type: ignore[arg-type]
    LoopGuardToolHooks(LoopGuard({"enabled": True}), agent_id="coder")


def test_arguments_nested_past_the_json_parser_are_skipped_not_raised() -> None:
    deep = "[" * 200_000 + "]" * 200_000  # json.loads raises RecursionError on it
    message = {
        "role": "assistant",
        "tool_calls": [
            {"id": "c1", "function": {"name": "read_file", "arguments": deep}},
            {"id": "c2", "function": {"name": "read_file", "arguments": '{"path": "a"}'}},
        ],
    }
    assert _message_calls(message) == [("read_file", {"path": "a"}, "c2")]


# --- the README's CrewAI snippet (the main suite cannot run it) ------------------------------


def test_the_readme_snippet_runs_under_crewai_own_limit(caplog: pytest.LogCaptureFixture) -> None:
    # As written, with CrewAI's own repeat limit in place (the autouse fixture lifts it
    # only for the matrix): the adaptive profile blocks the 3rd identical call, before
    # that limit, and the scripted model gives up once it reads the block.
    assert agent_utils.MAX_REPEATED_TOOL_CALLS == 5
    (snippet,) = [s for s in snippets() if s.label == "CrewAI"]
    caplog.set_level(logging.ERROR, logger="loopwatch.tools")
    filename = f"<README.md:{snippet.line}>"
    source = snippet.code + "\n"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    namespace: dict[str, Any] = {"__name__": "__readme__"}
    exec(compile(source, filename, "exec"), namespace)
    assert str(namespace["result"]) == "done"
    blocking = [r for r in caplog.records if r.getMessage().startswith("Blocking read_file")]
    assert len(blocking) == 1
    hooks, crew = namespace["hooks"], namespace["crew"]
    assert len(hooks.guard.history(session_key=f"crewai:{crew.id}")) == 2
    # unregistered by the snippet: another crew is not guarded by these hooks
    other, _ = make_crew(LoopScript(times=3), Tools())
    other.kickoff()
    assert hooks.guard.history(session_key=f"crewai:{other.id}") == ()


# --- two layers: a guard.tool function as the crew's tool, on the hooks' guard ---------------


@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
@pytest.mark.parametrize("per_turn", [1, 3])
def test_a_guard_tool_function_as_the_tool_is_guarded_once(
    asynchronous: bool, per_turn: int, hooks_of: list[LoopGuardToolHooks]
) -> None:
    # The hooks guard the call, the guard.tool function passes it through: one record a
    # call, one warning, and the block where the hooks alone put it (not at half of it).
    guard, events = make_guard()
    runs: list[str] = []

    @tool("read_file")
    @guard.tool(session_key="crew-1")
    def read_file(path: str) -> str:
        """Read a file."""
        runs.append(path)
        return "the notes"

    hooks_of.append(LoopGuardToolHooks(guard, session_key="crew-1").register())
    llm = ReadingLLM(LoopScript(times=60, per_turn=per_turn))
    agent = Agent(role="reader", goal="g", backstory="b", llm=llm, tools=[read_file], max_iter=65)
    crew = Crew(agents=[agent], tasks=[Task(description="t", expected_output="e", agent=agent)])
    result = asyncio.run(crew.akickoff()) if asynchronous else crew.kickoff()
    assert str(result) == "done"
    read = [str(r) for r in llm.__dict__["read"]]
    expected = BY_NAME["parallel"] if per_turn == 3 else BY_NAME["repeat"]
    assert len(runs) == expected.executions
    assert len(guard.history(session_key="crew-1")) == expected.executions
    assert sum("WARNING" in r for r in read) == 1
    assert blocks(events) == expected.blocks
