"""Google ADK: a real ``LlmAgent`` and ``InMemoryRunner`` with a scripted offline model."""

from __future__ import annotations

import asyncio
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
from google.adk.agents import LlmAgent
from google.adk.apps import App
from google.adk.plugins.base_plugin import BasePlugin
from google.adk.runners import InMemoryRunner
from google.adk.tools.base_tool import BaseTool
from google.adk.tools.tool_context import ToolContext
from google.genai import types

from loopwatch import LoopDetectedError
from loopwatch.integrations.google_adk import (
    WARNING_KEY,
    LoopGuardPlugin,
    ScriptedModel,
    loop_error,
)
from loopwatch.testing import LoopScript

USER = "user-1"


class ErrorsAsAnswers(BasePlugin):
    """Answers a raised tool error for the model, as a host's error plugin would."""

    def __init__(self) -> None:
        super().__init__(name="errors-as-answers")

    async def on_tool_error_callback(
        self,
        *,
        tool: BaseTool,
        tool_args: dict[str, Any],
        tool_context: ToolContext,
        error: Exception,
    ) -> dict[str, Any] | None:
        return {"error": str(error)}


def make_runner(
    script: LoopScript, tools: Tools, *plugins: BasePlugin
) -> tuple[InMemoryRunner, ScriptedModel]:
    model = ScriptedModel(script)
    agent = LlmAgent(
        name="reader", model=model, tools=[tools.read_file, tools.list_dir, tools.flaky_read]
    )
    app = App(name="app", root_agent=agent, plugins=list(plugins))
    return InMemoryRunner(app=app), model


def message() -> types.Content:
    return types.Content(role="user", parts=[types.Part(text="Summarise notes.txt")])


def responses(events: list[Any]) -> list[dict[str, Any]]:
    """What the model was shown: the function responses, in order."""
    return [
        part.function_response.response
        for event in events
        for part in (event.content.parts if event.content else None) or ()
        if part.function_response is not None
    ]


async def run_async(
    runner: InMemoryRunner, session_id: str = "s-1", into: list[Any] | None = None
) -> list[Any]:
    """The run's events (also appended to ``into`` as they come, for a run that raises)."""
    await runner.session_service.create_session(app_name="app", user_id=USER, session_id=session_id)
    seen = [] if into is None else into
    async for e in runner.run_async(user_id=USER, session_id=session_id, new_message=message()):
        seen.append(e)
    return seen


def as_text(response: dict[str, Any]) -> str:
    """An answer the model read, as text."""
    text = str(response.get("result", response.get("error")))
    warning = response.get(WARNING_KEY)
    return text if warning is None else f"{text}\n\n{warning}"


# The recover and parallel rows. ADK runs the calls of one response concurrently; the
# plugin admits them together from the response event (``on_event_callback``), so the
# parallel row gives the batch figures (18 runs, 42 blocks), not the sequential 20 / 40.
@pytest.mark.parametrize("asynchronous", [True, False], ids=["async", "sync"])
@pytest.mark.parametrize(
    "scenario", [BY_NAME["recover"], BY_NAME["parallel"]], ids=lambda s: s.name
)
def test_the_matrix_recover_and_parallel(scenario: Scenario, asynchronous: bool) -> None:
    guard, events = make_guard()
    tools = Tools()
    plugin = LoopGuardPlugin(guard, on_critical=scenario.on_critical)  # type: ignore[arg-type]
    runner, _ = make_runner(scenario.script, tools, plugin, ErrorsAsAnswers())
    seen: list[Any] = []
    error: BaseException | None = None
    try:
        if asynchronous:
            asyncio.run(run_async(runner, into=seen))
        else:
            runner.session_service.create_session_sync(
                app_name="app", user_id=USER, session_id="s-1"
            )
            seen.extend(runner.run(user_id=USER, session_id="s-1", new_message=message()))
    except RuntimeError as exc:  # ADK wraps what a plugin raises
        error = exc
        assert loop_error(exc) is not None
    check_answers(scenario, [as_text(r) for r in responses(seen)], tools, events, error)


@pytest.mark.parametrize("scenario", SINGLE, ids=lambda s: s.name)
async def test_the_matrix(scenario: Scenario) -> None:
    guard, events = make_guard()
    tools = Tools()
    runner, _ = make_runner(scenario.script, tools, LoopGuardPlugin(guard), ErrorsAsAnswers())
    shown = responses(await run_async(runner))

    assert tools.total == scenario.executions
    assert blocks(events) == scenario.blocks
    assert len(shown) == 60
    if scenario.warned_at is not None:
        assert shown[scenario.warned_at][WARNING_KEY] == scenario.warning
        assert sum(WARNING_KEY in r for r in shown) == sum(
            1 for e in events if e.type == "tool.loop" and e.to_dict()["action"] == "warn"
        )
    if scenario.blocked_message is not None:
        assert {"error": scenario.blocked_message} in shown
    history = guard.history(session_key="s-1")
    if scenario.name == "unknown":
        assert [r.unknown_tool_name for r in history] == ["open_file"] * 10
    if scenario.name == "failing":
        assert shown[0] == {"error": FAILURE}


def test_sync_run_warns_and_blocks() -> None:
    guard, events = make_guard()
    tools = Tools()
    runner, _ = make_runner(BY_NAME["repeat"].script, tools, LoopGuardPlugin(guard))
    runner.session_service.create_session_sync(app_name="app", user_id=USER, session_id="s-2")
    shown = responses(list(runner.run(user_id=USER, session_id="s-2", new_message=message())))
    assert tools.total == 20
    assert blocks(events) == 40
    assert shown[10] == {"result": "the same text", WARNING_KEY: BY_NAME["repeat"].warning}
    assert shown[9] == {"result": "the same text"}


@pytest.mark.parametrize("name", ["repeat", "unknown"])
async def test_end_run_ends_the_run_with_the_loop_error(name: str) -> None:
    guard, events = make_guard()
    tools = Tools()
    runner, _ = make_runner(
        BY_NAME[name].script, tools, LoopGuardPlugin(guard, on_critical="end_run")
    )
    with pytest.raises(RuntimeError) as caught:
        await run_async(runner)
    error = loop_error(caught.value)
    assert isinstance(error, LoopDetectedError)
    assert str(error) == BY_NAME[name].blocked_message
    assert tools.total == BY_NAME[name].executions
    assert blocks(events) == 1
    assert loop_error(ValueError("other")) is None


async def test_warn_model_off_and_a_raised_error_ends_the_run_recorded() -> None:
    guard, _ = make_guard()
    tools = Tools()
    runner, _ = make_runner(
        BY_NAME["repeat"].script, tools, LoopGuardPlugin(guard, warn_model=False)
    )
    assert not any(WARNING_KEY in r for r in responses(await run_async(runner)))

    # Without an error plugin ADK raises a tool's exception out of the run; it is recorded.
    guard, _ = make_guard()
    runner, _ = make_runner(BY_NAME["failing"].script, Tools(), LoopGuardPlugin(guard))
    with pytest.raises(RuntimeError, match=FAILURE):
        await run_async(runner, "s-3")
    (record,) = guard.history(session_key="s-3")
    assert record.tool_name == "flaky_read"


async def test_shadow_mode_never_blocks() -> None:
    guard, events = make_guard(enforce=False)
    tools = Tools()
    runner, _ = make_runner(BY_NAME["repeat"].script, tools, LoopGuardPlugin(guard))
    await run_async(runner)
    assert tools.total == 60
    assert blocks(events) == 0


async def test_session_and_run_ids_can_be_chosen() -> None:
    guard, _ = make_guard()
    plugin = LoopGuardPlugin(guard, session_key=lambda ctx: f"user:{ctx.user_id}", run_id="r-1")
    runner, _ = make_runner(LoopScript(times=3), Tools(), plugin)
    await run_async(runner)
    history = guard.history(session_key=f"user:{USER}")
    assert [r.run_id for r in history] == ["r-1"] * 3


def _status_runner(changing: bool) -> tuple[InMemoryRunner, dict[str, int], list[Any]]:
    """An agent polling a tool that returns a dict (ADK's usual tool result) 30 times."""
    ran = {"n": 0}

    def job_status(job: str) -> dict[str, Any]:
        """The build job's state."""
        ran["n"] += 1
        return {"state": "running", "progress": ran["n"] if changing else 5}

    guard, events = make_guard()
    script = LoopScript(calls=(("job_status", {"job": "build-1"}),), times=30)
    agent = LlmAgent(name="poller", model=ScriptedModel(script), tools=[job_status])
    app = App(name="app", root_agent=agent, plugins=[LoopGuardPlugin(guard)])
    return InMemoryRunner(app=app), ran, events


async def test_a_dict_result_that_changes_is_progress_not_a_loop() -> None:
    # Before as_outcome, every dict result hashed as the same empty OpenClaw result, so a
    # job polled while it progressed was blocked at the 21st call.
    runner, ran, events = _status_runner(changing=True)
    await run_async(runner, session_id="s-status")
    assert ran["n"] == 30
    assert blocks(events) == 0


async def test_a_dict_result_that_never_changes_is_blocked() -> None:
    runner, ran, events = _status_runner(changing=False)
    await run_async(runner, session_id="s-status")
    assert ran["n"] == 20
    assert blocks(events) == 10


@pytest.mark.parametrize("scenario", [BY_NAME["repeat"], BY_NAME["parallel"]], ids=lambda s: s.name)
async def test_a_guard_tool_function_as_the_tool_is_guarded_once(scenario: Scenario) -> None:
    # Two layers on one guard and session: the plugin guards the call, the guard.tool
    # function passes it through (one record, one warning, and the block still comes).
    guard, events = make_guard()
    tools = Tools()
    read_file = guard.tool(tools.read_file, session_key="s-1", name="read_file")
    model = ScriptedModel(scenario.script)
    agent = LlmAgent(name="reader", model=model, tools=[read_file])
    app = App(name="app", root_agent=agent, plugins=[LoopGuardPlugin(guard)])
    shown = responses(await run_async(InMemoryRunner(app=app)))

    assert tools.runs["read_file"] == scenario.executions
    assert blocks(events) == scenario.blocks
    assert len(guard.history(session_key="s-1")) == scenario.executions
    assert not any(scenario.warning in str(r.get("result")) for r in shown)
    assert sum(WARNING_KEY in r for r in shown) == 1
