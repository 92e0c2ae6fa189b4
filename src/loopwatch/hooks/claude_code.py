"""Claude Code hooks (``loopwatch hook claude-code``).

Contract (Claude Code hooks reference, code.claude.com/docs/en/hooks; the input types of
anthropics/claude-agent-sdk-python ``types.py``): JSON on stdin with ``session_id``,
``transcript_path``, ``cwd``, ``hook_event_name`` and, for tool events, ``tool_name``,
``tool_input``, ``tool_use_id``; ``PostToolUse`` adds ``tool_response``,
``PostToolUseFailure`` adds ``error`` (failed tools arrive there, not in ``PostToolUse``;
one the user interrupted, ``is_interrupt``, is no outcome and is skipped).
``prompt_id``, when the host sends it, is the run; ``agent_id`` (set inside a sub-agent)
gives the sub-agent's calls a history of their own.

Cursor runs these hooks too, with its own payloads (``cursor_version``,
``conversation_id``, camelCase event names): :func:`loopwatch.hooks.run_hook` hands such a
payload to the Cursor hook's reading and answer, or leaves it to loopwatch's Cursor hook
when that one is installed (:mod:`loopwatch.hooks._cursor_origin`).

Answers (exit 0, JSON on stdout): a block is ``hookSpecificOutput.permissionDecision:
"deny"`` with the reason (shown to Claude); a warning is ``additionalContext`` of the post
event; a loop that survived a compaction ends the run with ``continue: false``.
"""

from __future__ import annotations

import json
from typing import Any, Final

from loopwatch.core._undefined import UNDEFINED
from loopwatch.hooks._core import CompactionCheck, HookEvent, HookResult, Outcome, text

AGENT: Final = "claude-code"
#: ``prompt_id`` may come with tool events only: remember it for ``PreCompact`` (and a
#: call's post follows its pre, see ``_core._run_of``).
REMEMBER_RUN: Final = True
FAIL_OPEN: Final = HookResult("", 0)
#: A compaction event means a compaction ran: nothing to check (see gemini.COMPACTION_CHECK).
COMPACTION_CHECK: Final[CompactionCheck | None] = None

_KINDS: Final = {
    "PreToolUse": "before",
    "PostToolUse": "after",
    "PostToolUseFailure": "after",
    "PreCompact": "compaction",
    "PostCompact": "compaction",
}


def parse(payload: dict[str, Any]) -> HookEvent:
    """The event in a Claude Code hook payload (``ignore`` for events loopwatch skips)."""
    name = text(payload, "hook_event_name") or ""
    kind = _KINDS.get(name, "ignore")
    if name == "PostToolUseFailure" and payload.get("is_interrupt") is True:
        kind = "ignore"  # the user stopped the tool: no outcome, and no failure loop
    error: object = UNDEFINED
    if name == "PostToolUseFailure":
        error = payload.get("error") or "tool failed"
    return HookEvent(
        kind=kind,  # type: ignore[arg-type]
        name=name,
        session=text(payload, "session_id"),
        run=text(payload, "prompt_id"),
        tool=text(payload, "tool_name"),
        params=payload.get("tool_input"),
        call_id=text(payload, "tool_use_id"),
        result=payload.get("tool_response") if name == "PostToolUse" else UNDEFINED,
        error=error,
        agent=text(payload, "agent_id"),
    )


def render(event: HookEvent, outcome: Outcome) -> HookResult:
    """The answer Claude Code reads."""
    if event.kind == "before" and outcome.block:
        answer: dict[str, Any] = {
            "hookSpecificOutput": {
                "hookEventName": "PreToolUse",
                "permissionDecision": "deny",
                "permissionDecisionReason": outcome.block,
            }
        }
        return HookResult(json.dumps(answer), 0)
    if event.kind != "after" or not (outcome.warning or outcome.end_run):
        return FAIL_OPEN
    context = "\n\n".join(m for m in (outcome.warning, outcome.end_run) if m)
    answer = {"hookSpecificOutput": {"hookEventName": event.name, "additionalContext": context}}
    if outcome.end_run:
        answer["continue"] = False
        answer["stopReason"] = outcome.end_run
    return HookResult(json.dumps(answer), 0)
