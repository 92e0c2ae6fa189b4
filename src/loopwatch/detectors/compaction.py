"""The post-compaction guard (SPEC §6.1).

After an auto-compaction the model forgets the loop it was in and often walks straight
back into it. The guard watches the first few calls after each compaction retry and
aborts the run when every one of them is the same (tool, args, result) triple.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Final

from loopwatch import messages
from loopwatch.config import js_truthy, resolve_window_size
from loopwatch.core._undefined import UNDEFINED
from loopwatch.errors import COMPACTION_LOOP_PERSISTED, PostCompactionLoopPersistedError

logger = logging.getLogger("loopwatch.guard")


Triple = tuple[str, str, str]


@dataclass(frozen=True, slots=True)
class GuardVerdict:
    """The guard's answer to one observation; only abort verdicts fill the last four."""

    should_abort: bool
    armed: bool
    remaining_attempts: int
    detector: str | None = None
    count: int | None = None
    tool_name: str | None = None
    message: str | None = None


@dataclass(frozen=True, slots=True)
class GuardSnapshot:
    """Whether the guard is armed and how many observations it has left."""

    armed: bool
    remaining_attempts: int


IDLE_VERDICT: Final = GuardVerdict(should_abort=False, armed=False, remaining_attempts=0)


class PostCompactionGuard:
    """Aborts when a loop persists through a compaction (SPEC §6.1).

    Not thread-safe on its own: the session engine serialises calls per session.
    """

    __slots__ = ("enabled", "remaining", "window", "window_size")

    def __init__(self, window_size: object = 3, enabled: object = True) -> None:
        self.window_size: int = resolve_window_size(window_size)
        self.enabled: bool = True if enabled is None or enabled is UNDEFINED else js_truthy(enabled)
        self.remaining: int = 0
        self.window: list[Triple] = []

    def arm(self) -> None:
        """Open a fresh window of ``window_size`` observations (logs only when enabled)."""
        self.arm_quietly()
        if self.enabled:
            log_armed(self.window_size)

    def observe(self, tool_name: str, args_hash: str, result_hash: str) -> GuardVerdict:
        """Count one post-compaction call; never raises (the caller turns aborts into errors)."""
        verdict = self.observe_quietly(tool_name, args_hash, result_hash)
        if verdict.should_abort:
            log_abort(verdict)
        return verdict

    def arm_quietly(self) -> None:
        """:meth:`arm` without its log line, for stores whose caller logs."""
        self.remaining = self.window_size
        self.window = []

    def observe_quietly(self, tool_name: str, args_hash: str, result_hash: str) -> GuardVerdict:
        """:meth:`observe` without its log line, for stores whose caller logs."""
        if not self.enabled or self.remaining <= 0:
            return IDLE_VERDICT
        self.remaining -= 1
        triple = (tool_name, args_hash, result_hash)
        self.window.append(triple)
        count = self.window.count(triple)
        armed = self.remaining > 0
        if count < self.window_size:
            return GuardVerdict(should_abort=False, armed=armed, remaining_attempts=self.remaining)
        return GuardVerdict(
            should_abort=True,
            armed=armed,
            remaining_attempts=self.remaining,
            detector=COMPACTION_LOOP_PERSISTED,
            count=count,
            tool_name=tool_name,
            message=messages.COMPACTION_LOOP_PERSISTED.format(
                tool=tool_name, count=count, window_size=self.window_size
            ),
        )

    def snapshot(self) -> GuardSnapshot:
        """The guard's state without changing it."""
        return GuardSnapshot(armed=self.remaining > 0, remaining_attempts=self.remaining)


def log_armed(window_size: int) -> None:
    """The reference's INFO line for arming an enabled guard."""
    logger.info(messages.LOG_GUARD_ARMED.format(attempts=window_size))


def log_abort(verdict: GuardVerdict) -> None:
    """The reference's ERROR line for an abort verdict."""
    logger.error(messages.LOG_GUARD_ABORT.format(tool=verdict.tool_name, count=verdict.count))


__all__ = [
    "COMPACTION_LOOP_PERSISTED",
    "IDLE_VERDICT",
    "GuardSnapshot",
    "GuardVerdict",
    "PostCompactionGuard",
    "PostCompactionLoopPersistedError",
    "log_abort",
    "log_armed",
]
