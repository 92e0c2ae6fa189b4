"""Every adapter refuses, when it is built, a guard or an id setting every call would fail on.

Without the check ``guard=None`` reached the agent's first tool call as an
``AttributeError`` the framework reported as the tool's failure (into the agent), and
``session_key=3`` silently guarded nothing (every call had no session).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from loopwatch import LoopGuard


def _build(module: str, name: str) -> Callable[..., Any]:
    try:
        found = importlib.import_module(f"loopwatch.integrations.{module}")
    except ImportError as exc:  # the framework is not installed here
        pytest.skip(f"{module}: {exc}")
    return getattr(found, name)  # type: ignore[no-any-return]


#: (module, constructor, the id settings it takes).
ADAPTERS = [
    ("openai_agents", "LoopGuardrails", ("session_key", "run_id")),
    ("langchain", "LoopGuardMiddleware", ("session_key",)),
    ("pydantic_ai", "LoopGuardCapability", ("session_key", "run_id")),
    ("claude_agent_sdk", "LoopGuardHooks", ("session_key", "run_id")),
    ("google_adk", "LoopGuardPlugin", ("session_key", "run_id")),
    ("agent_framework", "LoopGuardFunctionMiddleware", ("session_key", "run_id")),
    ("agent_framework", "LoopGuardChatMiddleware", ("session_key", "run_id")),
    ("crewai", "LoopGuardToolHooks", ("session_key", "run_id")),
    ("mcp_proxy", "McpLoopProxy", ()),
]
IDS = [f"{module}.{name}" for module, name, _ids in ADAPTERS]


@pytest.mark.parametrize(("module", "name", "ids"), ADAPTERS, ids=IDS)
@pytest.mark.parametrize("guard", [None, "guard", object(), LoopGuard], ids=repr)
def test_a_guard_that_is_no_guard_is_refused(
    module: str, name: str, ids: tuple[str, ...], guard: object
) -> None:
    build = _build(module, name)
    with pytest.raises(TypeError, match=r"^guard must be a LoopGuard, not "):
        build(guard)


@pytest.mark.parametrize(("module", "name", "ids"), ADAPTERS, ids=IDS)
def test_a_real_guard_and_good_ids_are_accepted(
    module: str, name: str, ids: tuple[str, ...]
) -> None:
    build = _build(module, name)
    guard = LoopGuard({"enabled": True})
    build(guard)
    for setting in ids:
        build(guard, **{setting: "fixed"})
        build(guard, **{setting: lambda *_context: "computed"})
        build(guard, **{setting: None})


@pytest.mark.parametrize(
    ("module", "name", "ids"),
    [a for a in ADAPTERS if a[2]],
    ids=[i for i, a in zip(IDS, ADAPTERS, strict=True) if a[2]],
)
@given(bad=st.one_of(st.integers(), st.floats(), st.binary(), st.lists(st.text(), max_size=2)))
def test_an_id_setting_that_is_no_str_nor_callable_is_refused(
    module: str, name: str, ids: tuple[str, ...], bad: object
) -> None:
    build = _build(module, name)
    guard = LoopGuard({"enabled": True})
    for setting in ids:
        with pytest.raises(TypeError, match=f"^{setting} must be a str, a callable or None"):
            build(guard, **{setting: bad})


@pytest.mark.parametrize(("module", "name", "ids"), ADAPTERS, ids=IDS)
@pytest.mark.parametrize("agent_id", [3, b"coder", ["coder"]], ids=repr)
def test_an_agent_id_that_is_no_str_is_refused(
    module: str, name: str, ids: tuple[str, ...], agent_id: object
) -> None:
    # Only a str selects an openclaw_config per-agent block: 3 silently selected none.
    build = _build(module, name)
    with pytest.raises(TypeError, match=r"^agent_id must be a str or None, not "):
        build(LoopGuard({"enabled": True}), agent_id=agent_id)
    build(LoopGuard({"enabled": True}), agent_id="coder")


@pytest.mark.parametrize("session_key", [None, "", "  ", 3, lambda: "s"])
def test_the_mcp_proxy_needs_one_fixed_session(session_key: object) -> None:
    build = _build("mcp_proxy", "McpLoopProxy")
    with pytest.raises(TypeError, match="session_key must be a non-blank str"):
        build(LoopGuard({"enabled": True}), session_key=session_key)


@pytest.mark.parametrize(
    ("module", "name", "setting"),
    [
        ("openai_agents", "LoopGuardrails", "max_pending"),
        ("langchain", "LoopGuardMiddleware", "max_sessions"),
    ],
)
@pytest.mark.parametrize("bad", [0, -1, True, 2.5, "10", None])
def test_a_bound_below_one_is_refused(module: str, name: str, setting: str, bad: object) -> None:
    build = _build(module, name)
    with pytest.raises(ValueError, match=f"^{setting} must be an integer >= 1"):
        build(LoopGuard({"enabled": True}), **{setting: bad})


def test_guard_agent_of_the_agents_sdk_refuses_no_guard() -> None:
    agents = pytest.importorskip("agents")
    from loopwatch.integrations.openai_agents import guard_agent

    with pytest.raises(TypeError, match=r"^guard must be a LoopGuard, not NoneType"):
        guard_agent(agents.Agent(name="a"), None)  # type: ignore[arg-type]


@pytest.mark.parametrize("module", ["smolagents", "llamaindex"])
def test_guard_agent_of_the_agent_frameworks_refuses_no_guard(module: str) -> None:
    if module == "smolagents":
        smolagents = pytest.importorskip("smolagents")
        from loopwatch.integrations.smolagents import ScriptedModel, guard_agent
        from loopwatch.testing import LoopScript

        def agent() -> Any:
            model = ScriptedModel(LoopScript("read_file", times=1))
            return smolagents.ToolCallingAgent(tools=[], model=model, verbosity_level=0)
    else:
        workflow = pytest.importorskip("llama_index.core.agent.workflow")
        from loopwatch.integrations.llamaindex import guard_agent, scripted_llm  # type: ignore[assignment]
        from loopwatch.testing import LoopScript

        def agent() -> Any:
            llm = scripted_llm(LoopScript("read_file", times=1), [])
            return workflow.FunctionAgent(tools=[], llm=llm)

    with pytest.raises(TypeError, match=r"^guard must be a LoopGuard, not NoneType"):
        guard_agent(agent(), None)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"^session_key must be a str, a callable or None"):
        guard_agent(agent(), LoopGuard({"enabled": True}), session_key=3)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"^agent_id must be a str or None"):
        guard_agent(agent(), LoopGuard({"enabled": True}), agent_id=3)  # type: ignore[arg-type]
    guard_agent(agent(), LoopGuard({"enabled": True}), session_key="thread-1")
