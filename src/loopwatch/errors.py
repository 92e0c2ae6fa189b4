"""One exception tree for everything loopwatch raises on purpose (a leaf module).

Every exception a user may catch derives from :class:`LoopwatchError`, an ``Exception``
(never a ``RuntimeError``: an agent loop that catches ``RuntimeError`` around its tools must
not swallow the deliberate end of a run). The configuration errors also stay ``ValueError``s,
as SPEC §9.2 promises.

This module imports nothing of loopwatch at run time (only for annotations), so importing an
exception never pulls in the detectors or the config layer.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from loopwatch.core.records import ToolCallRecord
    from loopwatch.detectors.compaction import GuardVerdict
    from loopwatch.detectors.reference import LoopVerdict

#: The detector id of a post-compaction abort (SPEC §6.1).
COMPACTION_LOOP_PERSISTED: Final = "compaction_loop_persisted"


class LoopwatchError(Exception):
    """The base of every exception loopwatch raises on purpose."""


@dataclass(frozen=True)
class ConfigIssue:
    """One problem found by strict loading.

    Attributes:
        path: dotted camelCase path relative to what was passed (``""`` for the whole input).
        message: a readable reason.
    """

    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}" if self.path else self.message


class ConfigError(LoopwatchError, ValueError):
    """A config the schema rejects; carries every issue so all can be fixed at once.

    Args:
        issues: the problems, in document order.
    """

    def __init__(self, issues: Iterable[ConfigIssue]) -> None:
        self.issues: tuple[ConfigIssue, ...] = tuple(issues)
        super().__init__("\n".join(str(issue) for issue in self.issues))

    def __reduce__(self) -> tuple[Any, ...]:
        # ``Exception`` pickles its message; rebuild from the issues instead.
        return (type(self), (self.issues,))


class StoreError(LoopwatchError):
    """A backend failed (connection, timeout, protocol); the guard applies its policy."""


class LoopDetectedError(LoopwatchError):
    """Raised by adapters under ``on_critical="end_run"``: the run ends at a critical loop.

    ``LoopGuard`` itself never raises it; ``str(exc)`` is the verdict's message.
    """

    def __init__(self, verdict: LoopVerdict) -> None:
        super().__init__(verdict.message or "")
        self.verdict = verdict

    def __str__(self) -> str:
        return self.verdict.message or ""

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.verdict,))


class PostCompactionLoopPersistedError(LoopwatchError):
    """Raised from ``after_call`` when the loop survived a compaction: end the run."""

    def __init__(
        self,
        message: str,
        *,
        count: int,
        tool_name: str,
        detector: str = COMPACTION_LOOP_PERSISTED,
        record: ToolCallRecord | None = None,
        verdict: GuardVerdict | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.count = count
        self.tool_name = tool_name
        self.detector = detector
        self.record = record
        self.verdict = verdict

    def __str__(self) -> str:
        return self.message

    @classmethod
    def from_verdict(
        cls, verdict: GuardVerdict, record: ToolCallRecord | None = None
    ) -> PostCompactionLoopPersistedError:
        """Build the error a caller raises for an abort verdict."""
        return cls(
            verdict.message or "",
            count=verdict.count or 0,
            tool_name=verdict.tool_name or "",
            detector=verdict.detector or COMPACTION_LOOP_PERSISTED,
            record=record,
            verdict=verdict,
        )


__all__ = [
    "COMPACTION_LOOP_PERSISTED",
    "ConfigError",
    "ConfigIssue",
    "LoopDetectedError",
    "LoopwatchError",
    "PostCompactionLoopPersistedError",
    "StoreError",
]
