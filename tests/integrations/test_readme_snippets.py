"""Every Python snippet of the README's "Guarding real agents" section runs, offline.

Each snippet is executed as written (a fresh namespace per snippet, no network, no API
key: the models are the scripted ones of ``loopwatch.testing`` and the adapter modules).
The scripted model asks for ``notes.txt`` 25 times, so each guarded agent must log 5
blocks (``Blocking read_file due to critical loop``, on ``loopwatch.tools``): the tool ran
20 times. Python blocks outside that section are listed below with the reason they are not
run; a new one fails :func:`test_every_python_block_is_run_or_exempt` until it is classified.
"""

from __future__ import annotations

import linecache
import logging
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import pytest

from framework_python import SNIPPETS_NOT_RUN

README: Final = Path(__file__).resolve().parents[2] / "README.md"
SECTION: Final = "## Guarding real agents"
#: The marker that exempts a block of the section, on the line before it (``not run``, or
#: ``run by <test module>``: CrewAI's, run by its own tier).
EXEMPT: Final = re.compile(r"<!-- snippet (?:not run|run by (?P<runner>\S+)): (?P<reason>.+?) -->")

#: Python blocks elsewhere in the README, by section, and why they are not run here.
EXEMPT_SECTIONS: Final = {
    "## Quick start": "fragments of the host's own loop (tool, args, run_tool are the host's)",
    "## Configuration": "reads the host's own openclaw.json5 (as tests/core/test_config_files.py)",
    "## Two profiles: `reference` and `adaptive`": "constructor alternatives, no calls",
    "## Many workers: state on Redis": "needs a Redis server (tests/stores cover it)",
    "## Coding agents: `loopwatch hook`": (
        "a store under /var/lib (tests/stores/test_sqlite_store.py covers sqlite://)"
    ),
}

#: Blocks logged by each snippet (the label is the bold lead-in of its paragraph).
EXPECTED_BLOCKS: Final = {
    "Hand-written loops": 10,  # the decorator and guard.call, 25 calls each
    "OpenTelemetry": 0,  # only builds a guard
    "OpenAI Agents SDK, missing tools": 0,  # the unknown-tool block logs no "Blocking" line
}
DEFAULT_BLOCKS: Final = 5


@dataclass(frozen=True)
class Snippet:
    section: str
    label: str
    line: int
    code: str
    exempt: str | None


def snippets() -> list[Snippet]:
    """Every ```python block of the README, with its section, label and exemption."""
    found: list[Snippet] = []
    section, label, exempt = "", "", None
    lines = README.read_text(encoding="utf-8").splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("## "):
            section = line.strip()
        elif line.startswith("**"):
            label = line[2:].split("**", 1)[0]
        if (match := EXEMPT.search(line)) is not None:
            exempt = match["reason"]
        if line.strip() == "```python":
            start = i + 1
            end = next(j for j in range(start, len(lines)) if lines[j].strip() == "```")
            found.append(Snippet(section, label, start + 1, "\n".join(lines[start:end]), exempt))
            exempt, i = None, end
        i += 1
    return found


FRAMEWORK_SNIPPETS: Final = [
    s
    for s in snippets()
    if s.section == SECTION and s.exempt is None and s.label not in SNIPPETS_NOT_RUN
]


def test_every_python_block_is_run_or_exempt() -> None:
    for snippet in snippets():
        if snippet.section == SECTION:
            continue
        assert snippet.section in EXEMPT_SECTIONS, (
            f"README.md:{snippet.line}: a Python block in {snippet.section!r} is neither run "
            "nor listed in EXEMPT_SECTIONS"
        )
    labels = {s.label for s in FRAMEWORK_SNIPPETS}
    # Every adapter has a snippet that runs (CrewAI's is exempt: it has its own environment).
    assert {
        "Hand-written loops",
        "LangChain v1 / LangGraph",
        "OpenAI Agents SDK",
        "OpenAI Agents SDK, missing tools",
        "pydantic-ai",
        "Google ADK",
        "Microsoft Agent Framework",
        "Claude Agent SDK",
        "smolagents",
        "LlamaIndex",
        "OpenTelemetry",
    } - SNIPPETS_NOT_RUN <= labels
    assert [s.label for s in snippets() if s.section == SECTION and s.exempt] == ["CrewAI"]


def test_a_snippet_run_elsewhere_names_a_module_that_runs_it() -> None:
    runners = EXEMPT.finditer(README.read_text(encoding="utf-8"))
    named = [m["runner"] for m in runners if m["runner"] is not None]
    assert named == ["tests/integrations/crewai_tier.py"]
    for runner in named:
        module = README.parent / runner
        assert "README.md" in module.read_text(encoding="utf-8"), runner


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
@pytest.mark.filterwarnings("ignore::pydantic.warnings.PydanticDeprecationWarning")
@pytest.mark.parametrize("snippet", FRAMEWORK_SNIPPETS, ids=lambda s: s.label)
def test_the_snippet_runs_offline(snippet: Snippet, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.ERROR, logger="loopwatch.tools")
    filename = f"<README.md:{snippet.line}>"
    # Some frameworks read a tool's source (smolagents' @tool): give it one.
    source = snippet.code + "\n"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    exec(compile(source, filename, "exec"), {"__name__": "__readme__"})
    blocking = [r for r in caplog.records if r.getMessage().startswith("Blocking read_file")]
    assert len(blocking) == EXPECTED_BLOCKS.get(snippet.label, DEFAULT_BLOCKS)
