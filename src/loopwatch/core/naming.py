"""How the session engine reads tool names, run ids and tool-call ids (SPEC §1, §5.1).

Hosts pass whatever their framework hands them; these rules make ``" Bash "`` and ``exec``
the same tool and ``" run-1 "`` the same run, exactly as the reference does.
"""

from __future__ import annotations

from typing import Final

from loopwatch.core.jsstr import js_trim

#: Exact-match aliases applied after trimming and lower-casing (a plain dict lookup, so
#: names such as ``constructor`` are never aliases).
TOOL_NAME_ALIASES: Final[dict[str, str]] = {"bash": "exec", "apply-patch": "apply_patch"}


def plain_str(text: str) -> str:
    """``text`` as a plain ``str``: a subclass's methods are the host's code and may raise
    (or lie), so its characters are copied without calling any of them."""
    return text if type(text) is str else str.__str__(text)


def normalize_tool_name(tool_name: object) -> str:
    """Normalise a tool name as the reference does before hashing and recording.

    ``None`` and ``""`` become ``"tool"``; a whitespace-only name becomes ``""`` (the
    fallback applies before trimming, as in the reference). A ``str`` subclass is read as
    its characters (:func:`plain_str`).
    """
    if isinstance(tool_name, str):
        tool_name = plain_str(tool_name)
    name = tool_name or "tool"
    text = name if isinstance(name, str) else str(name)
    lowered = js_trim(text).lower()
    return TOOL_NAME_ALIASES.get(lowered, lowered)


def normalize_run_id(run_id: object) -> str | None:
    """The run scope of a call: the trimmed id, or ``None`` for no/blank/non-string ids."""
    if not isinstance(run_id, str):
        return None
    trimmed = js_trim(plain_str(run_id))
    return trimmed or None


def normalize_tool_call_id(tool_call_id: object) -> str | None:
    """Tool-call ids are stored as given; a value that is neither ``None`` nor a str is
    converted with ``str`` so records stay serialisable; a ``str`` subclass is stored as its
    characters (:func:`plain_str`), never as the host's object."""
    if tool_call_id is None:
        return None
    if isinstance(tool_call_id, str):
        return plain_str(tool_call_id)
    return str(tool_call_id)


__all__ = [
    "TOOL_NAME_ALIASES",
    "normalize_run_id",
    "normalize_tool_call_id",
    "normalize_tool_name",
    "plain_str",
]
