"""A stand-in for ``loopwatch.hooks`` with its public API, for the serve tests only.

``loopwatch.hooks`` (``run_hook``, ``AGENTS``, ``default_guard``) is built on another branch;
until it is merged the serve tests load this module in its place (see
``serve_launcher.py``). Once the real module exists the tests use it and ignore this one.
The contract is the real one's: ``run_hook`` answers a Claude-shaped hook event with the
stdout / exit code / stderr the hook process would emit.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from loopwatch import LoopGuard
from loopwatch.config import load_config_file

AGENTS = ("claude-code", "codex", "gemini", "cursor", "opencode")


@dataclass(frozen=True)
class HookResult:
    stdout: str
    exit_code: int
    stderr: str = ""


def default_guard(
    store_url: str | None = None, config_file: str | None = None, profile: str | None = None
) -> LoopGuard:
    openclaw = load_config_file(config_file) if config_file else None
    chosen = profile or "adaptive"
    assert chosen in ("reference", "adaptive")
    return LoopGuard(openclaw_config=openclaw, profile=chosen)  # type: ignore[arg-type]


def run_hook(agent: str, payload_text: str, guard: LoopGuard) -> HookResult:
    try:
        event = json.loads(payload_text)
    except ValueError:
        return HookResult("", 0, "")
    if not isinstance(event, dict):
        return HookResult("", 0, "")
    name = event.get("hook_event_name")
    session = event.get("session_id")
    tool = event.get("tool_name")
    params = event.get("tool_input")
    call_id = event.get("tool_use_id")
    if name == "PreToolUse":
        decision = guard.before_call(tool, params, session_key=session, tool_call_id=call_id)
        if decision.tool_result is not None:
            reason = decision.verdict.message or "blocked"
            output = {
                "hookSpecificOutput": {
                    "hookEventName": "PreToolUse",
                    "permissionDecision": "deny",
                    "permissionDecisionReason": reason,
                }
            }
            return HookResult(json.dumps(output), 0, "")
        if decision.verdict.stuck:
            context = {"hookEventName": "PreToolUse", "additionalContext": decision.verdict.message}
            return HookResult(json.dumps({"hookSpecificOutput": context}), 0, "")
        return HookResult("{}", 0, "")
    if name == "PostToolUse":
        guard.after_call(
            tool,
            params,
            session_key=session,
            tool_call_id=call_id,
            result=event.get("tool_response"),
        )
        return HookResult("{}", 0, "")
    if name == "PreCompact":
        guard.compaction_retry(session_key=session)
        return HookResult("{}", 0, "")
    return HookResult("", 0, f"{agent}: unknown event")
