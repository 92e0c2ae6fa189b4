"""Anthropic messages and Claude Code session JSONL (``tool_use`` / ``tool_result`` blocks).

**Anthropic messages** (a ``messages`` array, a request body with one, or JSONL of messages):
an ``assistant`` message's ``content`` holds ``{"type": "tool_use", "id", "name", "input"}``
blocks; a later ``user`` message answers with ``{"type": "tool_result", "tool_use_id",
"content", "is_error"}`` blocks. The result replayed is the block's ``content`` as the model
saw it (a string or a list of blocks; a missing one is ``""``, as the API reads it, never
``UNDEFINED``: SPEC §11.1). With ``is_error: true`` the call failed and its text is the error.
``usage`` on an assistant message (API responses carry it) is shared among its calls.

**Claude Code sessions** (``~/.claude/projects/<project>/<session>.jsonl``; not officially
documented, shapes from community analyses of real files, e.g. alosec/claude-editor-hook
``memory-bank/03-guides/jsonl-analysis.md`` and chrisguillory/claude-session-mcp
``CLAUDE.md``): one record a line, ``{"type": "user" | "assistant", "message": {...},
"uuid", "parentUuid", "sessionId", "isSidechain", ...}`` where ``message`` is an Anthropic
message as above. One API response is often split over several lines (one content block
each) that repeat the same ``message.id`` and ``usage``, so usage is counted once per id.
``{"type": "system", "subtype": "compact_boundary", "compactMetadata": {"trigger": "auto" |
"manual", "preTokens"}}`` marks a compaction: an automatic one (the agent continues its
task) arms the post-compaction guard; a manual ``/compact`` is an operator action, not a
retry, and does not. Records with ``isSidechain: true`` are a sub-agent's and form their own
run (``sidechain:<agentId>``). Other record types (``summary``, ``file-history-snapshot``,
``queue-operation``, other ``system`` records) carry no calls and are skipped.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

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
from loopwatch.transcripts.openai_chat import SourcedMessage


def _blocks(message: Mapping[str, object]) -> list[Mapping[str, object]]:
    content = message.get("content")
    if not isinstance(content, list):
        return []  # a plain-string content has no tool blocks
    return [block for block in content if isinstance(block, Mapping)]


def _tool_uses(
    message: Mapping[str, object], path: str, line: int | None
) -> list[tuple[str, object, str | None]]:
    uses: list[tuple[str, object, str | None]] = []
    for block in _blocks(message):
        if block.get("type") != "tool_use":
            continue
        name = block.get("name")
        if not isinstance(name, str):
            raise TranscriptError(path, line, 'a tool_use block needs a string "name"')
        uses.append((name, block.get("input", {}), optional_id(block.get("id"), path, line, "id")))
    return uses


class _BlockMatcher:
    """Pairs ``tool_result`` blocks with the ``tool_use`` calls they answer, by id."""

    def __init__(self) -> None:
        self.pending: dict[str, CallDraft] = {}

    def add_calls(
        self,
        runs: RunAssembler,
        run_id: str | None,
        uses: list[tuple[str, object, str | None]],
        tokens: int | None,
        line: int | None,
    ) -> None:
        for (name, args, call_id), share in zip(uses, split_tokens(tokens, len(uses)), strict=True):
            draft = CallDraft(name, args, call_id, run_id, share, line)
            runs.add(run_id, draft)
            if call_id:
                self.pending[call_id] = draft

    def add_results(self, message: Mapping[str, object]) -> None:
        for block in _blocks(message):
            if block.get("type") != "tool_result":
                continue
            draft = self.pending.pop(str(block.get("tool_use_id")), None)
            if draft is None:
                continue
            content = block.get("content", "")
            if block.get("is_error") is True:
                draft.error = content_text(content)
                draft.result = UNDEFINED
            else:
                draft.result = content


def read_anthropic_messages(messages: Sequence[SourcedMessage], path: str) -> tuple[Run, ...]:
    """Turn Anthropic messages into one run of calls.

    Args:
        messages: the messages in order, each with its source line.
        path: for error messages.

    Returns:
        The run.

    Raises:
        TranscriptError: a message that is not an object or a malformed ``tool_use`` block.
    """
    runs = RunAssembler()
    matcher = _BlockMatcher()
    for number, (line, value) in enumerate(messages, start=1):
        message = as_mapping(value, path, line, f"message {number}")
        role = message.get("role")
        if role == "assistant":
            uses = _tool_uses(message, path, line)
            matcher.add_calls(runs, None, uses, usage_tokens(message.get("usage")), line)
        elif role == "user":
            matcher.add_results(message)
    return runs.finish()


def _claude_code_run(record: Mapping[str, object]) -> str | None:
    if record.get("isSidechain") is not True:
        return None
    agent = record.get("agentId")
    return f"sidechain:{agent}" if isinstance(agent, str) and agent else "sidechain"


def read_claude_code(text: str, path: str) -> tuple[Run, ...]:
    """Parse a Claude Code session JSONL file.

    Args:
        text: the decoded file.
        path: for error messages.

    Returns:
        The main run, and one run per sub-agent (``isSidechain``) when present.

    Raises:
        TranscriptError: a line that is not a JSON object, or a malformed ``tool_use``.
    """
    runs = RunAssembler()
    matcher = _BlockMatcher()
    usage_spent: set[str] = set()
    for line, value in json_lines(text, path):
        record = as_mapping(value, path, line, "a session record")
        kind = record.get("type")
        run_id = _claude_code_run(record)
        if kind == "system" and record.get("subtype") == "compact_boundary":
            meta = record.get("compactMetadata")
            trigger = meta.get("trigger") if isinstance(meta, Mapping) else None
            if trigger != "manual":
                runs.add(run_id, Compaction(run_id=run_id, line=line))
            continue
        message = record.get("message")
        if kind not in ("user", "assistant") or not isinstance(message, Mapping):
            continue
        if kind == "user":
            matcher.add_results(message)
            continue
        uses = _tool_uses(message, path, line)
        if not uses:
            continue
        tokens = usage_tokens(message.get("usage"))
        message_id = message.get("id")
        if isinstance(message_id, str):
            if message_id in usage_spent:
                tokens = 0 if tokens is not None else None
            usage_spent.add(message_id)
        matcher.add_calls(runs, run_id, uses, tokens, line)
    return runs.finish(none_label="main")


__all__ = ["read_anthropic_messages", "read_claude_code"]
