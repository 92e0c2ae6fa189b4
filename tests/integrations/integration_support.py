"""Shared pieces of the integration tests: one loop, one config, the expected texts.

Every framework test drives the same loop: the scripted model calls ``read_file`` with
the same arguments, the tool returns the same text, again and again. With the config
below (SPEC §4, §5.3):

* call 11 sees 10 identical calls: a generic warning that is *emitted* (10 // 10 = 1);
* call 13 sees a no-progress streak of 12: a generic critical, so it is blocked, and
  stays blocked with the same count (blocked calls are not recorded).

If an adapter appended the warning before recording (breaking SPEC §11.2), call 11's
outcome would differ from the others, the streak would restart and call 13 would run:
the block at call 13 is what proves the order.
"""

from __future__ import annotations

from typing import Any, Final

from loopwatch import LoopEvent, LoopGuard
from loopwatch import messages as texts

CONFIG: Final = {
    "enabled": True,
    "warningThreshold": 10,
    "criticalThreshold": 12,
    "globalCircuitBreakerThreshold": 14,
}
TOOL: Final = "read_file"
ARGS: Final = {"path": "notes.txt"}
RESULT: Final = "the same text"
WARN_AT: Final = 11
BLOCK_AT: Final = 13

WARNING: Final = texts.GENERIC_WARNING.format(tool=TOOL, count=10)
CRITICAL: Final = texts.GENERIC_CRITICAL.format(tool=TOOL, count=12)
WARNED_RESULT: Final = f"{RESULT}\n\n{WARNING}"


def make_guard(**kwargs: Any) -> tuple[LoopGuard, list[LoopEvent]]:
    """A guard with the test config and a listener collecting its events."""
    events: list[LoopEvent] = []
    config = kwargs.pop("config", CONFIG)
    return LoopGuard(config, listeners=[events.append], **kwargs), events


class Counter:
    """Counts how often the real tool function ran."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self) -> str:
        self.calls += 1
        return RESULT
