"""How the guard reads the ids a host passes: session keys, tool names, run ids.

Every public method of ``LoopGuard`` starts here; none of these raises into the host
(SPEC §5.1, §8.5): a value that cannot be read is "no session", ``"tool"`` or "no run".
"""

from __future__ import annotations

from typing import Final

from loopwatch.core.jsstr import WS_CHARS, is_blank
from loopwatch.core.naming import normalize_run_id, normalize_tool_name

#: JavaScript's whitespace (``js_trim``): a key starting with anything else is not blank.
WHITESPACE: Final = frozenset(WS_CHARS)


def plain_session_key(session_key: object) -> str | None:
    """The session key as a plain ``str``, or ``None`` for "no session" (SPEC §5.1).

    A ``str`` subclass is copied to a plain ``str`` first: its methods are the host's code
    and may raise, and the key must never escape the fail-open handlers.
    """
    if type(session_key) is not str:
        if not isinstance(session_key, str):
            return None
        session_key = str.__str__(session_key)
    elif session_key and session_key[0] not in WHITESPACE:
        return session_key  # the usual key: not blank, at the cost of one lookup
    return None if is_blank(session_key) else session_key


def safe_tool_name(tool_name: object) -> str:
    """The normalised tool name (SPEC §5.1), ``"tool"`` when it cannot be read."""
    try:
        return normalize_tool_name(tool_name)
    except Exception:
        return "tool"


def safe_run_id(run_id: object) -> str | None:
    """The normalised run id, ``None`` when it cannot be read."""
    try:
        return normalize_run_id(run_id)
    except Exception:
        return None


__all__ = ["WHITESPACE", "plain_session_key", "safe_run_id", "safe_tool_name"]
