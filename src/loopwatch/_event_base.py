"""The base of every event (:class:`loopwatch.events.LoopEvent`), alone in a module.

``LoopGuard`` names the base at import (its listeners' type) but builds the events
themselves only when something happens: a warning, a block, a store failure, an armed
guard. Each event class is a frozen dataclass, about a millisecond of generated code to
build, so a hook process whose call is allowed imports this module and never
:mod:`loopwatch.events`. That module re-exports this class; import it from there.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, ClassVar


@dataclass(frozen=True)
class LoopEvent:
    """Base of every event; ``to_dict`` omits keys whose value is ``None``."""

    type: ClassVar[str] = ""
    _KEYS: ClassVar[dict[str, str]] = {}

    def to_dict(self) -> dict[str, Any]:
        payload: dict[str, Any] = {"type": self.type}
        for f in fields(self):
            value = getattr(self, f.name)
            if value is not None:
                payload[self._KEYS.get(f.name, f.name)] = value
        return payload


LoopEvent.__module__ = "loopwatch.events"  # where users import it from (docs, repr, pickle)

__all__ = ["LoopEvent"]
