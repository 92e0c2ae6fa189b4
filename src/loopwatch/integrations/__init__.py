"""Adapters that put a :class:`~loopwatch.LoopGuard` around real agent frameworks.

Each module imports its framework at import time, so import the one you use; nothing here
is imported by ``import loopwatch``. Every adapter shares :mod:`loopwatch.adapter` (SPEC
§11) and the two options ``warn_model`` and ``on_critical``.

* :mod:`loopwatch.integrations.langchain`: ``LoopGuardMiddleware`` for LangChain v1
  ``create_agent`` (extra ``loopwatch[langchain]``).
* :mod:`loopwatch.integrations.openai_agents`: ``guard_agent`` for the OpenAI Agents SDK
  (extra ``loopwatch[openai-agents]``).
* :mod:`loopwatch.integrations.pydantic_ai`: ``LoopGuardCapability`` for pydantic-ai
  (extra ``loopwatch[pydantic-ai]``).
* :mod:`loopwatch.integrations.google_adk`: ``LoopGuardPlugin`` for Google ADK runners
  (extra ``loopwatch[google-adk]``).
* :mod:`loopwatch.integrations.agent_framework`: ``loopguard_middleware`` for the Microsoft
  Agent Framework (extra ``loopwatch[agent-framework]``).
* :mod:`loopwatch.integrations.claude_agent_sdk`: ``LoopGuardHooks`` for the Claude Agent
  SDK (extra ``loopwatch[claude-agent-sdk]``).
* :mod:`loopwatch.integrations.smolagents`: ``guard_agent`` for smolagents (extra
  ``loopwatch[smolagents]``).
* :mod:`loopwatch.integrations.llamaindex`: ``guard_agent`` for LlamaIndex agent workflows
  (extra ``loopwatch[llamaindex]``).
* :mod:`loopwatch.integrations.crewai`: ``LoopGuardToolHooks`` for CrewAI (extra
  ``loopwatch[crewai]``, in an environment of its own).
* :mod:`loopwatch.integrations.otel`: ``OtelListener``, span events and a decisions counter
  (extra ``loopwatch[otel]``).
* :mod:`loopwatch.integrations.mcp_proxy`: ``loopwatch mcp-proxy -- COMMAND ...``, a stdio
  MCP proxy guarding any MCP server (no extra needed).
"""
