"""Exceptions that end an agent run on purpose (SPEC §11.4)."""

from __future__ import annotations

from loopwatch.detectors import LoopVerdict


class LoopDetectedError(RuntimeError):
    """Raised by adapters under ``on_critical="end_run"``: the run ends at a critical loop.

    ``LoopGuard`` itself never raises it; ``str(exc)`` is the verdict's message.
    """

    def __init__(self, verdict: LoopVerdict) -> None:
        super().__init__(verdict.message or "")
        self.verdict = verdict

    def __str__(self) -> str:
        return self.verdict.message or ""


__all__ = ["LoopDetectedError"]
