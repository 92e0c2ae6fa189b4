"""OpenHands hooks (``loopwatch hook openhands``).

Contract (OpenHands/software-agent-sdk @ ``611629e6``, ``openhands-sdk/openhands/sdk/hooks/``:
``types.py``, ``executor.py``, ``manager.py``, ``conversation_hooks.py``): stdin carries the
SDK's ``HookEvent`` as JSON, ``{event_type, tool_name, tool_input, tool_response, message,
session_id, working_dir, metadata}`` (not Claude Code's field names). ``session_id`` is the
conversation's id; there is no tool-call id and no turn id, so the conversation is the run
and a call's post event finds its pre event by tool and arguments. ``tool_input`` is the
action's ``model_dump()`` and ``tool_response`` the observation's: ``content`` (text and
image parts), ``is_error``, and each tool's own fields. The terminal's carry the command's
process id and host in ``metadata``, which change on every identical run, so the outcome
is what the model reads (the text parts, and the terminal's exit code), not the whole dump.
An observation flagged ``is_error``, and a terminal command that exited non-zero (not
``-1``, which is a command still running past the soft timeout), is recorded as an error.

Answers (exit 0, JSON on stdout): ``{"decision": "deny", "reason": ...}`` blocks the
action (the agent gets the reason as the action's rejection). The SDK reads nothing else
of a ``PostToolUse`` answer (its hooks there cannot block or add context), so a warning
is written as ``additionalContext`` of that answer, where the SDK's hook execution event
shows it to the user, but it does not reach the model. There is no compaction event (a
condensation runs no hook), so the post-compaction guard is never armed by this hook.
"""

from __future__ import annotations

import json
from typing import Any, Final

from loopwatch.core._undefined import UNDEFINED
from loopwatch.hooks._core import (
    CompactionCheck,
    HookEvent,
    HookResult,
    Outcome,
    text,
)
from loopwatch.host_outcome import as_outcome, content_text

AGENT: Final = "openhands"
#: No turn id at all: the conversation is the run.
REMEMBER_RUN: Final = False
FAIL_OPEN: Final = HookResult("", 0)
#: OpenHands runs no hook when it condenses a conversation: nothing to check.
COMPACTION_CHECK: Final[CompactionCheck | None] = None

_KINDS: Final = {"PreToolUse": "before", "PostToolUse": "after"}
#: A terminal exit code that is no outcome yet: the command is still running.
_STILL_RUNNING: Final = -1


def _outcome(response: object) -> tuple[object, object]:
    """``(result, error)`` of a ``tool_response`` (an observation's ``model_dump()``)."""
    if not isinstance(response, dict):
        return as_outcome(response), UNDEFINED
    said = content_text(response.get("content")) or None
    exit_code = response.get("exit_code")
    if type(exit_code) is not int:
        exit_code = None
    if said is None:
        # No text the model reads (images only, an empty observation): the dump without
        # the terminal's per-run metadata, compared whole (wrapped, so that its typed
        # ``content`` is not read as an OpenClaw result, whose hash reads text parts only).
        kept = {key: value for key, value in response.items() if key != "metadata"}
        said_or_dump: object = as_outcome({"observation": kept})
    else:
        said_or_dump = said
        if exit_code is not None and exit_code != _STILL_RUNNING:
            said_or_dump = f"{said}\n[Command finished with exit code {exit_code}]"
    failed = response.get("is_error") is True or (
        exit_code is not None and exit_code not in (0, _STILL_RUNNING)
    )
    if failed:
        return UNDEFINED, said_or_dump if isinstance(said_or_dump, str) else "tool failed"
    return said_or_dump, UNDEFINED


def parse(payload: dict[str, Any]) -> HookEvent:
    """The event in an OpenHands hook payload (``ignore`` for events loopwatch skips)."""
    name = text(payload, "event_type") or ""
    result: object = UNDEFINED
    error: object = UNDEFINED
    if name == "PostToolUse":
        result, error = _outcome(payload.get("tool_response"))
    return HookEvent(
        kind=_KINDS.get(name, "ignore"),  # type: ignore[arg-type]
        name=name,
        session=text(payload, "session_id"),
        tool=text(payload, "tool_name"),
        params=payload.get("tool_input"),
        result=result,
        error=error,
    )


def render(event: HookEvent, outcome: Outcome) -> HookResult:
    """The answer OpenHands reads."""
    if event.kind == "before" and outcome.block:
        return HookResult(json.dumps({"decision": "deny", "reason": outcome.block}), 0)
    if event.kind != "after" or not (outcome.warning or outcome.end_run):
        return FAIL_OPEN
    context = "\n\n".join(m for m in (outcome.warning, outcome.end_run) if m)
    return HookResult(json.dumps({"additionalContext": context}), 0)
