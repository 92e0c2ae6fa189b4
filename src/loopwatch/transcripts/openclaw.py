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
hashes the thrown error's message, which that text normally carries). Bare message lines
without the ``type`` wrapper (``{"role": ..., ...}``) are read as messages too.

**Each call once.** The file is a tree: OpenClaw re-appends kept history as a new branch
when it compacts (the same ``toolCall`` ids again, later in the file). When every entry has
an ``id``, replay follows the ``parentId`` chain from the last entry (the session's leaf)
back to the root, as OpenClaw's own trajectory export does, and replays that branch in
order; a file without ids is replayed in file order. Call ids seen before are copies and
are counted once either way. Calls only on abandoned branches (the user went back and
retried) are left out, and the scan notes how many.

**Orphan results.** A call to a tool that does not exist is sometimes persisted only as
its ``toolResult`` (``Tool read_file not found``, ``isError: true``) without the
``toolCall``. Such a result names its tool (``toolName``), so the call is rebuilt from it
(arguments unknown: ``{}``) rather than dropped: a model retrying a missing tool is
exactly the loop the unknown-tool detector is for.

The calls of one assistant message form a batch (every call replayed, then the outcomes).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from loopwatch.core._undefined import UNDEFINED
from loopwatch.transcripts._common import (
    CallBook,
    Read,
    RunAssembler,
    as_mapping,
    content_text,
    json_lines,
    optional_id,
    split_tokens,
    usage_tokens,
)
from loopwatch.transcripts.model import Compaction, TranscriptError


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


def leaf_branch(entries: Sequence[tuple[int, object, object, object]]) -> set[int] | None:
    """The lines on the path from the root to the last entry.

    Args:
        entries: ``(line, type, id, parentId)`` of every entry, in file order.

    Returns:
        The lines of the leaf's branch (the session header included), or ``None`` when
        some entry has no ``id`` (an old, linear file) or the chain is broken before it
        reaches a root: then the file is replayed in file order.
    """
    body = [entry for entry in entries if entry[1] != "session"]
    if not body or not all(isinstance(entry_id, str) for _l, _t, entry_id, _p in body):
        return None
    by_id = {entry_id: (line, parent) for line, _t, entry_id, parent in body}
    on_branch = {line for line, kind, _i, _p in entries if kind == "session"}
    current: object = body[-1][2]
    while isinstance(current, str) and current in by_id:
        line, parent = by_id[current]
        if line in on_branch:
            break  # a cycle: keep what was reached
        on_branch.add(line)
        current = parent
    if current is not None and not (isinstance(current, str) and current in by_id):
        return None  # a parent that is not in the file: do not guess
    return on_branch


def _skeleton(text: str, path: str) -> list[tuple[int, object, object, object]]:
    """``(line, type, id, parentId)`` of every entry; the entries themselves are dropped,
    so a large file is not held parsed twice."""
    skeleton: list[tuple[int, object, object, object]] = []
    for line, value in json_lines(text, path):
        entry = as_mapping(value, path, line, "a transcript entry")
        skeleton.append((line, entry.get("type"), entry.get("id"), entry.get("parentId")))
    return skeleton


def read_openclaw(text: str, path: str) -> Read:
    """Parse an OpenClaw session transcript.

    Args:
        text: the decoded file.
        path: for error messages.

    Returns:
        One run per user turn that made tool calls (or one empty run).

    Raises:
        TranscriptError: a line that is not a JSON object, or a malformed ``toolCall``.
    """
    branch = leaf_branch(_skeleton(text, path))
    book = CallBook(RunAssembler())
    turn = 0
    run_id = "turn-0"
    off_branch: set[str] = set()
    for line, value in json_lines(text, path):
        entry = as_mapping(value, path, line, "a transcript entry")
        if branch is not None and line not in branch:
            message = _message_of(entry)
            if message is not None and message.get("role") == "assistant":
                off_branch.update(i for _n, _a, i in _tool_calls(message, path, line) if i)
            continue
        if entry.get("type") == "compaction":
            book.runs.add(run_id, Compaction(run_id=run_id, line=line))
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
            batch = book.batch_for(len(calls))
            for (name, args, call_id), tokens in zip(calls, shares, strict=True):
                book.call(run_id, name, args, call_id, tokens=tokens, line=line, batch=batch)
        elif role == "toolResult":
            _answer(book, message, run_id, line)
    read = book.finish(keep_empty=False)
    abandoned = len(off_branch - book.seen)
    if abandoned:
        note = f"{abandoned} calls on abandoned branches of the session tree not replayed"
        read = read.with_notes(note)
    return read


def _answer(book: CallBook, message: Mapping[str, object], run_id: str, line: int) -> None:
    call_id = message.get("toolCallId")
    key = call_id if isinstance(call_id, str) else None
    answered = book.pending.pop(key, None) if key else None
    if answered is None and key is not None and key in book.seen:
        return  # the result of a copied call
    if answered is None:
        name = message.get("toolName")
        if not isinstance(name, str) or not name:
            book.unmatched += 1
            return
        # An orphan result with a known tool: rebuild the call it answers.
        answered = book.call(run_id, name, {}, key, line=line)
        book.synthesised += 1
        if answered is None:
            return
        book.pending.pop(key or "", None)
    result, error = _tool_result(message)
    book.settle(answered, result, error, message.get("content", []))


__all__ = ["leaf_branch", "read_openclaw"]
