"""Every adapter refuses, when it is built, a guard or an id setting every call would fail on.

Without the check ``guard=None`` reached the agent's first tool call as an
``AttributeError`` the framework reported as the tool's failure (into the agent), and
``session_key=3`` silently guarded nothing (every call had no session).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any, Final

import pytest
from hypothesis import given
from hypothesis import strategies as st

from framework_python import ALL_FRAMEWORKS
from loopwatch import LoopGuard


def _build(module: str, name: str) -> Callable[..., Any]:
    # Every framework here is in the ``all`` extra the suite runs with: a missing one fails.
    found = importlib.import_module(f"loopwatch.integrations.{module}")
    return getattr(found, name)  # type: ignore[no-any-return]


#: The adapters whose frameworks need Python 3.11+ (``framework_python.NEEDS_PYTHON_311``:
#: on 3.10 the suite says in its summary that their tests were not collected).
_NEEDS_311: Final = frozenset({"langchain", "pydantic_ai", "google_adk"})

#: (module, constructor, the id settings it takes). CrewAI cannot share this environment:
#: the same checks of its adapter run in ``crewai_tier.py``.
_ALL_ADAPTERS = [
    ("openai_agents", "LoopGuardrails", ("session_key", "run_id")),
    ("langchain", "LoopGuardMiddleware", ("session_key",)),
    ("pydantic_ai", "LoopGuardCapability", ("session_key", "run_id")),
    ("claude_agent_sdk", "LoopGuardHooks", ("session_key", "run_id")),
    ("google_adk", "LoopGuardPlugin", ("session_key", "run_id")),
    ("agent_framework", "LoopGuardFunctionMiddleware", ("session_key", "run_id")),
    ("agent_framework", "LoopGuardChatMiddleware", ("session_key", "run_id")),
    ("mcp_proxy", "McpLoopProxy", ()),
]
ADAPTERS = [a for a in _ALL_ADAPTERS if ALL_FRAMEWORKS or a[0] not in _NEEDS_311]
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
        bound
        for bound in (
            ("openai_agents", "LoopGuardrails", "max_pending"),
            ("langchain", "LoopGuardMiddleware", "max_sessions"),
        )
        if ALL_FRAMEWORKS or bound[0] not in _NEEDS_311
    ],
)
@pytest.mark.parametrize("bad", [0, -1, True, 2.5, "10", None])
def test_a_bound_below_one_is_refused(module: str, name: str, setting: str, bad: object) -> None:
    build = _build(module, name)
    with pytest.raises(ValueError, match=f"^{setting} must be an integer >= 1"):
        build(LoopGuard({"enabled": True}), **{setting: bad})


def test_guard_agent_of_the_agents_sdk_refuses_no_guard() -> None:
    import agents

    from loopwatch.integrations.openai_agents import guard_agent

    with pytest.raises(TypeError, match=r"^guard must be a LoopGuard, not NoneType"):
        guard_agent(agents.Agent(name="a"), None)  # type: ignore[arg-type]


@pytest.mark.parametrize("module", ["smolagents", "llamaindex"])
def test_guard_agent_of_the_agent_frameworks_refuses_no_guard(module: str) -> None:
    if module == "smolagents":
        import smolagents

        from loopwatch.integrations.smolagents import ScriptedModel, guard_agent
        from loopwatch.testing import LoopScript

        def agent() -> Any:
            model = ScriptedModel(LoopScript("read_file", times=1))
            return smolagents.ToolCallingAgent(tools=[], model=model, verbosity_level=0)
    else:
        from llama_index.core.agent import workflow

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
