"""Codex CLI hooks (``loopwatch hook codex``).

Contract (openai/codex ``codex-rs/hooks/schema/generated/*.schema.json`` and
``codex-rs/hooks/src/engine/output_parser.rs``): stdin carries ``session_id``, ``turn_id``
(every event: the run), ``hook_event_name``, ``tool_name``, ``tool_input``,
``tool_use_id``, and ``agent_id`` inside a sub-agent (whose calls get a history of their
own); ``PostToolUse`` adds ``tool_response``. There is no failure event: a
failed command is a ``tool_response`` like any other. For ``Bash`` (and ``apply_patch``)
it is a plain string, the command's output as the model sees it (``ExecCommandToolOutput::
post_tool_use_response`` in ``codex-rs/core/src/tools/context.rs``: no exit code, no
``Wall time`` header), so a failure and a success with the same output are one outcome;
an MCP tool's is its ``CallToolResult`` (``content`` parts), and one with ``isError:
true`` is recorded as the error it is (its text parts). A text that is the harness's own
refusal of the call (``apply_patch verification failed: ...``, as ``loopwatch scan`` reads
rollouts: :func:`~loopwatch.host_outcome.codex_refusal`) is an error too.

Answers: ``PreToolUse`` may only deny, with a non-empty reason (``ask``, a bare
``allow`` and ``continue: false`` are rejected, which lets the call run), so an allow is
an empty stdout. Warnings go to the model as ``additionalContext`` of ``PostToolUse``,
and ``PostToolUse`` is where a turn ends (``continue: false`` + ``stopReason``).
New hooks run only once the user trusted them in ``/hooks``.
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
from loopwatch.host_outcome import codex_refusal, content_text

AGENT: Final = "codex"
#: turn_id comes with every event today; releases whose PreToolUse had none (the
#: ``pre-tool-use.command.input`` schema of openai/codex @ 3be4afd3) still sent it with
#: PostToolUse, so the pre events decide (see ``_core._run_of``).
REMEMBER_RUN: Final = True
FAIL_OPEN: Final = HookResult("", 0)
#: A compaction event means a compaction ran: nothing to check (see gemini.COMPACTION_CHECK).
COMPACTION_CHECK: Final[CompactionCheck | None] = None

_KINDS: Final = {
    "PreToolUse": "before",
    "PostToolUse": "after",
    "PreCompact": "compaction",
    "PostCompact": "compaction",
}


def _outcome(response: object) -> tuple[object, object]:
    """``(result, error)`` of a ``tool_response``: an MCP ``CallToolResult`` flagged
    ``isError`` (a tool that failed: Codex has no failure event) is the error its text
    parts say; anything else is the result. (``McpToolOutput::post_tool_use_response``
    sends the ``CallToolResult`` as JSON, ``codex-rs/core/src/tools/context.rs``.)"""
    if isinstance(response, str) and codex_refusal(response):
        return UNDEFINED, response  # the harness refused the call (a patch that does not apply)
    if not isinstance(response, dict) or True not in (
        response.get("isError"),
        response.get("is_error"),
    ):
        return response, UNDEFINED
    return UNDEFINED, content_text(response.get("content")) or "tool failed"


def parse(payload: dict[str, Any]) -> HookEvent:
    """The event in a Codex hook payload (``ignore`` for events loopwatch skips)."""
    name = text(payload, "hook_event_name") or ""
    result: object = UNDEFINED
    error: object = UNDEFINED
    if name == "PostToolUse":
        result, error = _outcome(payload.get("tool_response"))
    return HookEvent(
        kind=_KINDS.get(name, "ignore"),  # type: ignore[arg-type]
        name=name,
        session=text(payload, "session_id"),
        run=text(payload, "turn_id"),
        tool=text(payload, "tool_name"),
        params=payload.get("tool_input"),
        call_id=text(payload, "tool_use_id"),
        result=result,
        error=error,
        agent=text(payload, "agent_id"),
    )


def render(event: HookEvent, outcome: Outcome) -> HookResult:
    """The answer Codex reads."""
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
    answer = {"hookSpecificOutput": {"hookEventName": "PostToolUse", "additionalContext": context}}
    if outcome.end_run:
        answer["continue"] = False
        answer["stopReason"] = outcome.end_run
    return HookResult(json.dumps(answer), 0)
