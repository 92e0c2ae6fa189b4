"""Gemini CLI hooks (``loopwatch hook gemini``).

Contract (google-gemini/gemini-cli ``packages/core/src/hooks/types.ts``, ``hookRunner.ts``
and ``docs/hooks/reference.md``): stdin carries ``session_id``, ``hook_event_name``,
``timestamp``; ``BeforeTool`` adds ``tool_name`` and ``tool_input``; ``AfterTool`` adds
``tool_response`` (``{llmContent, returnDisplay, error?}``; the shell tool's
``llmContent`` is ``Output: ...``, ``Exit Code: N`` when not 0, ``Process Group PGID: N``:
the process ids are left out of the outcome, and a failed command, which Gemini CLI reports
as a success, is recorded as the error it is, as ``loopwatch scan`` reads it). There is
no turn id: the session is the run. ``PreCompress`` is advisory (it cannot block) and arms
the guard.

Answers: ``{"decision": "deny", "reason": ...}`` blocks (the reason reaches the model as
the tool's error); ``hookSpecificOutput.additionalContext`` of ``AfterTool`` is appended
to the result; ``continue: false`` ends the agent loop. Any exit code but 0 and 1 blocks
the call, so loopwatch always exits 0, with ``{}`` when it has nothing to say.
"""

from __future__ import annotations

import json
from typing import Any, Final

from loopwatch.core._undefined import UNDEFINED
from loopwatch.hooks._core import HookEvent, HookResult, Outcome, text
from loopwatch.host_outcome import gemini_shell_text

AGENT: Final = "gemini"
REMEMBER_RUN: Final = False
FAIL_OPEN: Final = HookResult("{}", 0)

_KINDS: Final = {"BeforeTool": "before", "AfterTool": "after", "PreCompress": "compaction"}


SHELL_TOOL: Final = "run_shell_command"


def _outcome(tool: str | None, response: object) -> tuple[object, object]:
    """``(result, error)`` of a ``tool_response``: what the model reads, or its error."""
    if not isinstance(response, dict):
        return response, UNDEFINED
    error = response.get("error")
    if error:
        message = error.get("message") if isinstance(error, dict) else None
        return UNDEFINED, message or error
    if "llmContent" in response:
        content = response["llmContent"]
        if tool == SHELL_TOOL and isinstance(content, str):
            read = gemini_shell_text(content)
            if read is not None:  # without its process ids; a failed command is an error
                shown, failed = read
                return (UNDEFINED, shown) if failed else (shown, UNDEFINED)
        return content, UNDEFINED
    return response, UNDEFINED


def parse(payload: dict[str, Any]) -> HookEvent:
    """The event in a Gemini CLI hook payload (``ignore`` for events loopwatch skips)."""
    name = text(payload, "hook_event_name") or ""
    result: object = UNDEFINED
    error: object = UNDEFINED
    tool = text(payload, "tool_name")
    if name == "AfterTool":
        result, error = _outcome(tool, payload.get("tool_response"))
    return HookEvent(
        kind=_KINDS.get(name, "ignore"),  # type: ignore[arg-type]
        name=name,
        session=text(payload, "session_id"),
        tool=tool,
        params=payload.get("tool_input"),
        call_id=text(payload, "tool_use_id", "tool_call_id"),
        result=result,
        error=error,
    )


def render(event: HookEvent, outcome: Outcome) -> HookResult:
    """The answer Gemini CLI reads."""
    if event.kind == "before" and outcome.block:
        return HookResult(json.dumps({"decision": "deny", "reason": outcome.block}), 0)
    if event.kind != "after" or not (outcome.warning or outcome.end_run):
        return FAIL_OPEN
    context = "\n\n".join(m for m in (outcome.warning, outcome.end_run) if m)
    answer: dict[str, Any] = {
        "hookSpecificOutput": {"hookEventName": "AfterTool", "additionalContext": context}
    }
    if outcome.end_run:
        answer["continue"] = False
        answer["stopReason"] = outcome.end_run
    return HookResult(json.dumps(answer), 0)
