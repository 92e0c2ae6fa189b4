"""OpenClaw session transcripts (``~/.openclaw/agents/<agentId>/sessions/<sessionId>.jsonl``).

The shape, as OpenClaw documents it (openclaw/openclaw ``docs/reference/
session-management-compaction.md``, "Transcript structure") and as the message types of the
pi-ai / pi-agent-core packages it builds on define it (badlogic/pi-mono
``packages/coding-agent/docs/session.md``; stonegray/clawtools
``respec/07-message-format-spec.md``):

- First line: the session header ``{"type": "session", "id", "cwd", "timestamp", ...}``.
- Then append-only entries with ``id`` + ``parentId`` (a tree). The ones replay reads:

  - ``{"type": "message", "message": {"role": "assistant", "content": [...], "usage": {...}}}``
    with ``{"type": "toolCall", "id", "name", "arguments"}`` content blocks (``arguments``
    already parsed), and ``usage`` ``{input, output, cacheRead, cacheWrite, totalTokens}``;
  - ``{"type": "message", "message": {"role": "toolResult", "toolCallId", "toolName",
    "content": [...], "details": {...}, "isError": bool}}``;
  - ``{"type": "message", "message": {"role": "user", ...}}``: an inbound message, which
    starts a new agent run in the gateway (each run has its own ``runId``, and loop
    detection is run-scoped: SPEC §1). Transcripts do not store the run id, so runs are
    numbered ``turn-1``, ``turn-2``, ... (calls before any user message: ``turn-0``);
  - ``{"type": "compaction", "summary", "firstKeptEntryId", "tokensBefore"}``: a persisted
    compaction. It arms the post-compaction guard of the run in progress: an overflow
    compaction retries that run, so its next calls are watched. A threshold compaction
    after a finished turn is followed by a user message, i.e. a new run whose guard is not
    armed, which matches the gateway (it arms only on a retry).

  Everything else (``custom``, ``custom_message``, ``branch_summary``, ``model_change``,
  ``thinking_level_change``, other roles such as ``bashExecution``) is skipped.

The result replayed is ``{"content", "details"}`` of the tool result: exactly the fields
the outcome hash reads (SPEC §3.3), so ``exec`` and ``process`` results get their volatile
fields ignored as in the gateway. With ``isError: true`` the call failed; the transcript
keeps only the text shown to the model, so that text is the replayed error (the gateway
hashes the thrown error's message, which that text normally carries). Entries are replayed
in file order (the order they ran), abandoned tree branches included. Bare message lines
without the ``type`` wrapper (``{"role": ..., ...}``) are read as messages too.
"""

from __future__ import annotations

from collections.abc import Mapping

from loopwatch.core._undefined import UNDEFINED
from loopwatch.transcripts._common import (
    CallDraft,
    RunAssembler,
    as_mapping,
    content_text,
    json_lines,
    optional_id,
    split_tokens,
    usage_tokens,
)
from loopwatch.transcripts.model import Compaction, Run, TranscriptError


def _message_of(entry: Mapping[str, object]) -> Mapping[str, object] | None:
    if entry.get("type") == "message":
        message = entry.get("message")
        return message if isinstance(message, Mapping) else None
    if "type" not in entry and "role" in entry:
        return entry
    return None


def _tool_calls(
    message: Mapping[str, object], path: str, line: int
) -> list[tuple[str, object, str | None]]:
    content = message.get("content")
    if not isinstance(content, list):
        return []
    calls: list[tuple[str, object, str | None]] = []
    for block in content:
        if not isinstance(block, Mapping) or block.get("type") != "toolCall":
            continue
        name = block.get("name")
        if not isinstance(name, str):
            raise TranscriptError(path, line, 'a toolCall block needs a string "name"')
        call_id = optional_id(block.get("id"), path, line, "id")
        calls.append((name, block.get("arguments", {}), call_id))
    return calls


def _tool_result(message: Mapping[str, object]) -> tuple[object, object]:
    """``(result, error)`` of a ``toolResult`` message."""
    content = message.get("content", [])
    if message.get("isError") is True:
        return UNDEFINED, content_text(content)
    result: dict[str, object] = {"content": content}
    if "details" in message:
        result["details"] = message["details"]
    return result, UNDEFINED


def read_openclaw(text: str, path: str) -> tuple[Run, ...]:
    """Parse an OpenClaw session transcript.

    Args:
        text: the decoded file.
        path: for error messages.

    Returns:
        One run per user turn that made tool calls (or one empty run).

    Raises:
        TranscriptError: a line that is not a JSON object, or a malformed ``toolCall``.
    """
    runs = RunAssembler()
    pending: dict[str, CallDraft] = {}
    turn = 0
    run_id = "turn-0"
    for line, value in json_lines(text, path):
        entry = as_mapping(value, path, line, "a transcript entry")
        if entry.get("type") == "compaction":
            runs.add(run_id, Compaction(run_id=run_id, line=line))
            continue
        message = _message_of(entry)
        if message is None:
            continue
        role = message.get("role")
        if role == "user":
            turn += 1
            run_id = f"turn-{turn}"
        elif role == "assistant":
            calls = _tool_calls(message, path, line)
            shares = split_tokens(usage_tokens(message.get("usage")), len(calls))
            for (name, args, call_id), tokens in zip(calls, shares, strict=True):
                draft = CallDraft(name, args, call_id, run_id, tokens, line)
                runs.add(run_id, draft)
                if call_id:
                    pending[call_id] = draft
        elif role == "toolResult":
            answered = pending.pop(str(message.get("toolCallId")), None)
            if answered is not None:
                answered.result, answered.error = _tool_result(message)
    return runs.finish(keep_empty=False)


__all__ = ["read_openclaw"]
