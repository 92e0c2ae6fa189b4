"""LangChain v1: the adapter matrix (matrix_support.SCENARIOS), sync and async."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from typing import Any

import pytest
from integration_support import TOOL
from langchain.agents import create_agent
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import StructuredTool, ToolException
from matrix_support import IDS, OTHER, SCENARIOS, Run, Scenario, Tool, check, make_guard, next_calls
from pydantic import ConfigDict

from loopwatch.integrations.langchain import LoopGuardMiddleware

SESSION = "matrix-session"
CONFIG = RunnableConfig(recursion_limit=400)
GO: Any = {"messages": [{"role": "user", "content": "go"}]}


class ScriptedChatModel(BaseChatModel):
    """A chat model whose answer is computed by ``script`` from the conversation."""

    model_config = ConfigDict(arbitrary_types_allowed=True)
    script: Callable[[Sequence[BaseMessage]], AIMessage]

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def bind_tools(self, tools: Any, **kwargs: Any) -> ScriptedChatModel:
        return self

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any
    ) -> ChatResult:
        return ChatResult(generations=[ChatGeneration(message=self.script(messages))])


def _text(content: object) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n\n".join(p if isinstance(p, str) else str(p.get("text", "")) for p in content)
    return str(content)


def run_scenario(scenario: Scenario, *, asynchronous: bool) -> Run:
    guard, events = make_guard(scenario)
    tool = Tool(scenario, ToolException)
    read: list[str] = []

    def script(messages: Sequence[BaseMessage]) -> AIMessage:
        read[:] = [_text(m.content) for m in messages if isinstance(m, ToolMessage)]
        turn = sum(isinstance(m, AIMessage) and bool(m.tool_calls) for m in messages)
        calls = next_calls(scenario, read, turn)
        if calls is None:
            return AIMessage(content="done")
        return AIMessage(
            content="",
            tool_calls=[
                {"name": name, "args": args, "id": f"call-{uuid.uuid4().hex[:10]}"}
                for name, args in calls
            ],
        )

    def read_file(path: str) -> str:
        """Read a file."""
        return tool()

    def list_dir(path: str) -> str:
        """List a directory."""
        return tool()

    func: Callable[..., str] = read_file
    if scenario.decorated:
        func = guard.tool(read_file, session_key=SESSION)
    tools = [
        StructuredTool.from_function(func=func, name=TOOL, handle_tool_error=True),
        StructuredTool.from_function(func=list_dir, name=OTHER, handle_tool_error=True),
    ]
    middleware = LoopGuardMiddleware(
        guard,
        session_key=SESSION,
        on_critical=scenario.on_critical,  # type: ignore[arg-type]
    )
    agent = create_agent(ScriptedChatModel(script=script), tools=tools, middleware=[middleware])
    error: BaseException | None = None
    try:
        if asynchronous:
            import asyncio

            asyncio.run(agent.ainvoke(GO, CONFIG))
        else:
            agent.invoke(GO, CONFIG)
    except Exception as exc:
        error = exc
    return Run(read=list(read), runs=tool.runs, events=events, guard=guard, error=error)


@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
@pytest.mark.parametrize("scenario", SCENARIOS, ids=IDS)
def test_matrix(scenario: Scenario, asynchronous: bool) -> None:
    check(scenario, run_scenario(scenario, asynchronous=asynchronous), SESSION)
