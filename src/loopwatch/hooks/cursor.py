"""Cursor hooks (``loopwatch hook cursor``).

Contract (cursor.com/docs/hooks; not verified in source, Cursor's is closed): stdin
carries ``conversation_id`` (the session), ``generation_id`` (the run: one answer to
one prompt), ``hook_event_name``; ``preToolUse`` adds ``tool_name``, ``tool_input`` and
the call's id (``tool_use_id``); ``postToolUse`` adds the output (``tool_output``, read
also as ``tool_response`` / ``result_json``); ``postToolUseFailure`` the error
(``error_message`` or ``error``, with ``failure_type`` ``error`` / ``timeout`` /
``permission_denied`` and ``is_interrupt``: a tool the user interrupted is no outcome and is
skipped, as for Claude Code); ``preCompact`` arms the guard.

An MCP tool's ``tool_input`` may be a JSON string (the docs' MCP examples, as third-party
references quote them): one that holds a JSON object is read as that object.

Answers: ``{"permission": "deny", "user_message": ..., "agent_message": ...}`` blocks;
a warning is ``additional_context`` of the post event. Cursor has no documented way for a
post hook to end the run, so the abort message goes to the model the same way. Cursor
treats invalid JSON from a permission hook as a block, so loopwatch always prints JSON.

Checked 2026-12 (issue 14) against secondary sources, Cursor's own docs page not being in
the searchable corpus: a third-party reading of Cursor CLI build 2026.09.18's bundle
(``executeCommandHook``) and two hook adapters' contract tables agree that ``preToolUse``
is a permission hook (``permission`` / ``user_message`` / ``agent_message``; invalid or
schema-invalid JSON blocks the tool), that the ``postToolUse`` / ``postToolUseFailure``
answer is reduced to ``additional_context`` (appended after the tool result;
``updated_mcp_tool_output`` only for MCP tools), that ``tool_output`` is a JSON *string*
and that a failure carries ``error_message``. One limit from the bundle reading: an
``additional_context`` longer than 10,000 characters (after trimming) is dropped whole,
not truncated, so :func:`render` cuts a longer text to fit (loopwatch's warnings are
short, tool names and counts, but a tool name is the host's and unbounded).
"""

from __future__ import annotations

import json
from typing import Any, Final

from loopwatch.core._undefined import UNDEFINED
from loopwatch.core.jsstr import js_trim, utf16_len
from loopwatch.hooks._core import CompactionCheck, HookEvent, HookResult, Outcome, text

AGENT: Final = "cursor"
REMEMBER_RUN: Final = False
FAIL_OPEN: Final = HookResult("{}", 0)
#: A compaction event means a compaction ran: nothing to check (see gemini.COMPACTION_CHECK).
COMPACTION_CHECK: Final[CompactionCheck | None] = None

_KINDS: Final = {
    "preToolUse": "before",
    "postToolUse": "after",
    "postToolUseFailure": "after",
    "preCompact": "compaction",
}
_RESULT_KEYS: Final = ("tool_output", "tool_response", "result_json", "output", "result")
#: Cursor drops an ``additional_context`` longer than this whole (measured in JavaScript
#: string units, UTF-16), so loopwatch cuts its own text to fit.
MAX_CONTEXT: Final = 10_000


def _fit(context: str) -> str:
    """``context`` cut (with an ellipsis) to ``MAX_CONTEXT`` UTF-16 units when longer."""
    context = js_trim(context)  # (Cursor measures the text after trimming it)
    if utf16_len(context) <= MAX_CONTEXT:
        return context
    # A lone surrogate (a tool name of the host's) is cut as the code unit it is.
    units = context.encode("utf-16-le", "surrogatepass")
    return units[: 2 * (MAX_CONTEXT - 1)].decode("utf-16-le", "ignore") + "\u2026"


def _arguments(value: object) -> object:
    """A tool's arguments: a JSON object sent as text (Cursor's MCP ``tool_input`` is a
    JSON string in its docs' examples) is read as the object it is, so the same call
    is the same arguments however it was spaced or whether it came as text or object."""
    if isinstance(value, str) and value.lstrip().startswith("{"):
        try:
            decoded = json.loads(value)
        except (ValueError, RecursionError):
            return value
        if isinstance(decoded, dict):
            return decoded
    return value


def parse(payload: dict[str, Any]) -> HookEvent:
    """The event in a Cursor hook payload (``ignore`` for events loopwatch skips)."""
    name = text(payload, "hook_event_name") or ""
    result: object = UNDEFINED
    error: object = UNDEFINED
    if name == "postToolUse":
        result = next((payload[k] for k in _RESULT_KEYS if k in payload), UNDEFINED)
    elif name == "postToolUseFailure":
        error = text(payload, "error_message", "error") or payload.get("error") or "tool failed"
    kind = _KINDS.get(name, "ignore")
    if name == "postToolUseFailure" and payload.get("is_interrupt") is True:
        kind = "ignore"  # the user stopped the tool: no outcome, and no failure loop
    return HookEvent(
        kind=kind,  # type: ignore[arg-type]
        name=name,
        session=text(payload, "conversation_id", "session_id"),
        run=text(payload, "generation_id"),
        tool=text(payload, "tool_name"),
        params=_arguments(payload.get("tool_input")),
        call_id=text(payload, "tool_use_id", "tool_call_id"),
        result=result,
        error=error,
    )


def render(event: HookEvent, outcome: Outcome) -> HookResult:
    """The answer Cursor reads."""
    if event.kind == "before" and outcome.block:
        answer = {
            "permission": "deny",
            "user_message": outcome.block,
            "agent_message": outcome.block,
        }
        return HookResult(json.dumps(answer), 0)
    if event.kind != "after" or not (outcome.warning or outcome.end_run):
        return FAIL_OPEN
    context = "\n\n".join(m for m in (outcome.warning, outcome.end_run) if m)
    return HookResult(json.dumps({"additional_context": _fit(context)}), 0)
