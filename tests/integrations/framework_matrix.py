"""The scenario matrix every new adapter's test runs against its real framework.

A scripted offline model (``loopwatch.testing.LoopScript``) plays each scenario through a
real agent under ``LoopGuard({"enabled": True})`` (the default thresholds: warning 10,
critical 20, unknown tool 10). The expected figures are what ``loopwatch.testing.drive``
gives for the same calls (checked in ``test_the_matrix_matches_drive``), so an adapter that
loses a record, records twice, appends a warning before recording or runs a blocked tool
gets a different count:

* ``repeat``: 60 identical calls of ``read_file``: the warning rides on the 11th result,
  the tool runs 20 times, the other 40 calls are blocked.
* ``unknown``: 60 calls of ``open_file``, which no agent has: 10 recorded misses, then 50
  blocked calls (``unknown_tool_repeat``).
* ``failing``: 60 identical calls of ``flaky_read``, which always raises: the same as
  ``repeat`` for a framework that shows the error to the model.
* ``ping_pong``: ``read_file`` and ``list_dir`` alternating, 60 calls: the ping-pong
  warning on the 10th result, blocks at calls 20, 40 and 60 (57 runs).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from loopwatch import LoopEvent, LoopGuard
from loopwatch import messages as texts
from loopwatch.testing import LoopScript, ScriptedCall, loop_script

CONFIG: Final = {"enabled": True}
ARGS: Final = {"path": "notes.txt"}
READ_RESULT: Final = "the same text"
LIST_RESULT: Final = "a.txt b.txt"
FAILURE: Final = "disk on fire"


@dataclass(frozen=True)
class Scenario:
    """One row of the matrix: a script and what a correct adapter makes of it."""

    name: str
    script: LoopScript
    executions: int
    blocks: int
    warned_at: int | None = None
    warning: str | None = None
    blocked_message: str | None = None


SCENARIOS: Final = (
    Scenario(
        "repeat",
        loop_script("read_file", ARGS),
        executions=20,
        blocks=40,
        warned_at=10,
        warning=texts.GENERIC_WARNING.format(tool="read_file", count=10),
        blocked_message=texts.GENERIC_CRITICAL.format(tool="read_file", count=20),
    ),
    Scenario(
        "unknown",
        loop_script("open_file", ARGS),
        executions=0,
        blocks=50,
        blocked_message=texts.UNKNOWN_TOOL_CRITICAL.format(name="open_file", count=10),
    ),
    Scenario(
        "failing",
        loop_script("flaky_read", ARGS),
        executions=20,
        blocks=40,
        warned_at=10,
        warning=texts.GENERIC_WARNING.format(tool="flaky_read", count=10),
    ),
    Scenario(
        "ping_pong",
        LoopScript(calls=(("read_file", ARGS), ("list_dir", ARGS))),
        executions=57,
        blocks=3,
        warned_at=9,
        warning=texts.PING_PONG_WARNING.format(count=10),
    ),
)
BY_NAME: Final = {s.name: s for s in SCENARIOS}


class Tools:
    """The agent's tools, counting how often each really ran."""

    def __init__(self) -> None:
        self.runs: dict[str, int] = {"read_file": 0, "list_dir": 0, "flaky_read": 0}

    @property
    def total(self) -> int:
        return sum(self.runs.values())

    def read_file(self, path: str) -> str:
        self.runs["read_file"] += 1
        return READ_RESULT

    def list_dir(self, path: str) -> str:
        self.runs["list_dir"] += 1
        return LIST_RESULT

    def flaky_read(self, path: str) -> str:
        self.runs["flaky_read"] += 1
        raise RuntimeError(FAILURE)


def make_guard(
    config: dict[str, object] = CONFIG, **kwargs: object
) -> tuple[LoopGuard, list[LoopEvent]]:
    """A guard (default config) and the list its listener fills."""
    events: list[LoopEvent] = []
    return LoopGuard(config, listeners=[events.append], **kwargs), events  # type: ignore[arg-type]


def blocks(events: list[LoopEvent]) -> int:
    """How many calls were blocked."""
    return sum(1 for e in events if e.type == "tool.execution.blocked")


def reference_calls(scenario: Scenario) -> list[ScriptedCall]:
    """The scenario as ``drive`` plays it."""
    outcome = {
        "read_file": {"result": READ_RESULT},
        "list_dir": {"result": LIST_RESULT},
        "flaky_read": {"error": RuntimeError(FAILURE)},
        "open_file": {"error": texts.UNKNOWN_TOOL_ERROR.format(name="open_file")},
    }
    script = scenario.script
    return [
        ScriptedCall(name, args, **outcome[name])  # type: ignore[arg-type]
        for name, args in (script.calls[i % len(script.calls)] for i in range(script.times))
    ]
