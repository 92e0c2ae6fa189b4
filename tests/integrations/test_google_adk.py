"""Google ADK: a real ``LlmAgent`` and ``InMemoryRunner`` with a scripted offline model."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator
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
from google.adk.agents.run_config import RunConfig
from google.adk.apps import App
from google.adk.models.base_llm import BaseLlm
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.adk.plugins.base_plugin import BasePlugin
from google.adk.runners import InMemoryRunner
from google.adk.telemetry import tracing as adk_tracing
from google.adk.tools.base_tool import BaseTool
from google.adk.tools.tool_context import ToolContext
from google.genai import types
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from loopwatch import LoopDetectedError, LoopGuard
from loopwatch import messages as texts
from loopwatch.integrations.google_adk import (
    WARNING_KEY,
    LoopGuardPlugin,
    ScriptedModel,
    loop_error,
)
from loopwatch.integrations.otel import OtelListener
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


# --- a newcomer's agent: a model of their own (a BaseLlm), the default thresholds ------------


class LoopingLlm(BaseLlm):
    """A model written as ADK documents it: ``generate_content_async`` over the request.

    It calls ``read_file`` once a response, with ``args_of(n)`` for the n-th call, until it
    has read ``times`` function responses.
    """

    model: str = "looping"
    times: int = 40
    args_of: Any = None

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        read = [
            p.function_response
            for c in llm_request.contents
            for p in c.parts or ()
            if p.function_response is not None
        ]
        if len(read) >= self.times:
            part = types.Part(text="done")
        else:
            call = types.FunctionCall(name="read_file", args=self.args_of(len(read)))
            part = types.Part(function_call=call)
        yield LlmResponse(content=types.Content(role="model", parts=[part]))


def newcomer_runner(guard: LoopGuard, args_of: Any, runs: list[str]) -> InMemoryRunner:
    def read_file(path: str) -> str:
        """Read a file."""
        runs.append(path)
        return "the notes" if path == "notes.txt" else f"contents of {path}"

    agent = LlmAgent(name="reader", model=LoopingLlm(args_of=args_of), tools=[read_file])
    return InMemoryRunner(app=App(name="app", root_agent=agent, plugins=[LoopGuardPlugin(guard)]))


DEFAULT_WARNING = texts.GENERIC_WARNING.format(tool="read_file", count=10)
DEFAULT_CRITICAL = texts.GENERIC_CRITICAL.format(tool="read_file", count=20)


@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
def test_a_model_of_ones_own_is_warned_then_blocked(asynchronous: bool) -> None:
    guard, runs = LoopGuard({"enabled": True}), []
    runner = newcomer_runner(guard, lambda n: {"path": "notes.txt"}, runs)
    config = RunConfig(max_llm_calls=100)
    if asynchronous:

        async def run() -> list[Any]:
            await runner.session_service.create_session(
                app_name="app", user_id=USER, session_id="s"
            )
            return [
                e
                async for e in runner.run_async(
                    user_id=USER, session_id="s", new_message=message(), run_config=config
                )
            ]

        events = asyncio.run(run())
    else:
        runner.session_service.create_session_sync(app_name="app", user_id=USER, session_id="s")
        events = list(
            runner.run(user_id=USER, session_id="s", new_message=message(), run_config=config)
        )
    shown = responses(events)
    assert len(runs) == 20 and len(shown) == 40
    assert shown[10] == {"result": "the notes", WARNING_KEY: DEFAULT_WARNING}
    assert all(WARNING_KEY not in r for r in shown[:10])
    assert shown[20:] == [{"error": DEFAULT_CRITICAL}] * 20
    assert events[-1].content.parts[0].text == "done"


async def test_a_healthy_model_of_ones_own_is_never_warned_nor_blocked() -> None:
    guard, runs = LoopGuard({"enabled": True}), []
    runner = newcomer_runner(guard, lambda n: {"path": f"f{n}.txt"}, runs)
    await runner.session_service.create_session(app_name="app", user_id=USER, session_id="s")
    config = RunConfig(max_llm_calls=100)
    events = [
        e
        async for e in runner.run_async(
            user_id=USER, session_id="s", new_message=message(), run_config=config
        )
    ]
    assert responses(events) == [{"result": f"contents of f{n}.txt"} for n in range(40)]


async def test_the_otel_listener_beside_the_plugin_keeps_blocking_and_uses_adk_spans(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Two layers on one guard: the OpenTelemetry listener and the plugin. Blocking is
    # unchanged, and the events land on ADK's own "execute_tool" spans (the current span
    # inside the plugin's callbacks).
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    # ADK's tracer is a ProxyTracer of the global provider: point it at this one.
    monkeypatch.setattr(adk_tracing.tracer, "_real_tracer", provider.get_tracer("adk"))
    guard, runs = LoopGuard({"enabled": True}, listeners=[OtelListener()]), []
    runner = newcomer_runner(guard, lambda n: {"path": "notes.txt"}, runs)
    await runner.session_service.create_session(app_name="app", user_id=USER, session_id="s")
    config = RunConfig(max_llm_calls=100)
    events = [
        e
        async for e in runner.run_async(
            user_id=USER, session_id="s", new_message=message(), run_config=config
        )
    ]
    assert len(runs) == 20
    assert responses(events)[20:] == [{"error": DEFAULT_CRITICAL}] * 20
    tool_spans = [s for s in exporter.get_finished_spans() if s.name == "execute_tool read_file"]
    assert len(tool_spans) == 40
    found = [[e.name for e in s.events] for s in tool_spans]
    assert found[10] == ["tool.loop"]  # the emitted warning
    assert found[20:] == [["tool.loop", "tool.execution.blocked"]] * 20
    assert found[:10] == [[]] * 10
