"""Stream-level unknown-tool guard (SPEC §5.7).

Some models keep emitting calls to a tool that does not exist, message after message;
adapters that see the model's messages replace such a message once the same missing
tool has been asked for more than ``threshold`` times in a row. Independent of the
history and always on.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterable, Sequence
from typing import Final, Literal

from loopwatch import messages
from loopwatch.core.jsstr import is_blank, js_trim
from loopwatch.core.naming import normalize_tool_name

_DEFAULT_THRESHOLD: Final = 10

_Kind = Literal["none", "allowed", "malformed", "incomplete", "unknown"]


def _resolve_threshold(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        return _DEFAULT_THRESHOLD
    if isinstance(value, numbers.Integral):
        # Exact for any size (a float would overflow or round huge integers).
        whole = int(value)
        return whole if whole > 0 else _DEFAULT_THRESHOLD
    number = float(value)
    if math.isnan(number) or math.isinf(number) or number <= 0:
        return _DEFAULT_THRESHOLD
    return math.floor(number)


class UnknownToolStreamGuard:
    """Replaces an assistant message that keeps calling the same missing tool."""

    def __init__(self, allowed_tools: Iterable[str], threshold: object = 10) -> None:
        # A plain ``str`` is one name, as for LoopGuard's send_tools: iterating
        # ``"read_file"`` would make its letters the allowed tools, and every real call
        # an unknown one.
        names = (allowed_tools,) if isinstance(allowed_tools, str) else allowed_tools
        self.allowed_tools: tuple[str, ...] = tuple(t for t in names if isinstance(t, str))
        self._exact = frozenset(self.allowed_tools)
        self._lowered = [t.lower() for t in self.allowed_tools]
        self.threshold: int = _resolve_threshold(threshold)
        self.last_name: str | None = None
        self.count: int = 0

    def _is_allowed(self, name: str) -> bool:
        trimmed = js_trim(name)
        normalized = normalize_tool_name(name)
        if trimmed in self._exact or normalized in self._exact:
            return True
        # Case-insensitive matches count only when they are unambiguous.
        for candidate in (trimmed.lower(), normalized.lower()):
            if sum(1 for allowed in self._lowered if js_trim(allowed) == candidate) == 1:
                return True
        return False

    def _classify(self, names: Sequence[object]) -> tuple[_Kind, str | None]:
        if not names:
            return "none", None
        saw_allowed = saw_blank = saw_incomplete = False
        unknown: str | None = None
        for name in names:
            if not isinstance(name, str):
                saw_incomplete = True
            elif is_blank(name):
                saw_blank = True
            elif not self.allowed_tools:
                continue
            elif self._is_allowed(name):
                saw_allowed = True
            else:
                normalized = normalize_tool_name(name)
                if unknown is not None and unknown != normalized:
                    saw_incomplete = True
                else:
                    unknown = normalized
        if not self.allowed_tools:
            return ("malformed", None) if saw_blank else ("none", None)
        if saw_allowed:
            return "allowed", None
        if saw_blank and not saw_incomplete and unknown is None:
            return "malformed", None
        if saw_incomplete:
            return "incomplete", None
        if unknown is None:
            return "none", None
        return "unknown", unknown

    def observe(self, assistant_tool_names: Sequence[object]) -> str | None:
        """Classify one complete assistant message by its tool-call names.

        Returns:
            The text that replaces the message (its tool calls dropped), or ``None``.
        """
        kind, name = self._classify(list(assistant_tool_names))
        if kind == "allowed":
            self.last_name, self.count = None, 0
            return None
        if kind == "malformed":
            return messages.UNKNOWN_TOOL_STREAM.format(name=messages.BLANK_TOOL_NAME)
        if self.threshold == 0:
            return None
        if kind in ("none", "incomplete") or name is None:
            self.last_name, self.count = None, 0
            return None
        if name == self.last_name:
            self.count += 1
        else:
            self.last_name, self.count = name, 1
        if self.count > self.threshold:
            return messages.UNKNOWN_TOOL_STREAM.format(name=name)
        return None


__all__ = ["UnknownToolStreamGuard"]
