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
* :mod:`loopwatch.integrations.mcp_proxy`: ``loopwatch mcp-proxy -- COMMAND ...``, a stdio
  MCP proxy guarding any MCP server (no extra needed).
"""
