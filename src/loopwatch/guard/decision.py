"""What the host does with an upcoming call: the :class:`Decision` a guard returns.

A leaf of the guard layer (it needs only the verdict type and the messages), so that
adapters and the batch driver can name a decision without importing the engine.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from loopwatch import messages
from loopwatch.detectors.reference import LoopVerdict

Action = Literal["allow", "warn", "block"]


@dataclass(frozen=True, slots=True)
class Decision:
    """What the host does with the upcoming call.

    ``tool_result`` is not ``None`` exactly when the host must not run the tool: it is the
    blocked result to give the model (and to pass to ``after_call``).
    """

    action: Action
    verdict: LoopVerdict
    emitted: bool
    tool_result: dict[str, Any] | None
    enforced: bool


def blocked_result(message: str) -> dict[str, Any]:
    """The tool result of a loop block; a new dict every time (hosts may mutate it)."""
    return {
        "content": [{"type": "text", "text": message}],
        "details": {
            "status": "blocked",
            "deniedReason": messages.DENIED_REASON_TOOL_LOOP,
            "reason": message,
        },
    }


__all__ = ["Action", "Decision", "blocked_result"]
