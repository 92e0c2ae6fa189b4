"""Which adapter tests this Python can run: the frameworks of the ``all`` extra that need
Python 3.11 or newer (read by ``conftest.py`` and the README snippet test)."""

import sys

#: The adapters whose frameworks need Python 3.11 or newer at the versions loopwatch
#: supports (LangChain 1.5, pydantic-ai 2.68, google-adk 2.13), with their test modules and
#: README snippet labels. The ``all`` extra leaves the frameworks out on Python 3.10, so
#: there their tests are not collected, and the run's header names them: never a silent
#: skip.
NEEDS_PYTHON_311: dict[str, tuple[tuple[str, ...], str]] = {
    "LangChain": (
        ("integrations/test_langchain.py", "integrations/test_langchain_matrix.py"),
        "LangChain v1 / LangGraph",
    ),
    "pydantic-ai": (
        ("integrations/test_pydantic_ai.py", "integrations/test_pydantic_ai_matrix.py"),
        "pydantic-ai",
    ),
    "Google ADK": (("integrations/test_google_adk.py",), "Google ADK"),
}
#: Whether this Python can install every framework of the ``all`` extra.
ALL_FRAMEWORKS: bool = sys.version_info >= (3, 11)
#: README snippet labels not run here (see :data:`NEEDS_PYTHON_311`).
SNIPPETS_NOT_RUN: frozenset[str] = (
    frozenset() if ALL_FRAMEWORKS else frozenset(label for _, label in NEEDS_PYTHON_311.values())
)
