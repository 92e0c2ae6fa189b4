"""Anthropic messages and Claude Code session JSONL (``tool_use`` / ``tool_result`` blocks).

**Anthropic messages** (a ``messages`` array, a request body with one, or JSONL of messages):
an ``assistant`` message's ``content`` holds ``{"type": "tool_use", "id", "name", "input"}``
blocks; a later ``user`` message answers with ``{"type": "tool_result", "tool_use_id",
"content", "is_error"}`` blocks. The result replayed is the block's ``content`` as the model
saw it (a string or a list of blocks; a missing one is ``""``, as the API reads it, never
``UNDEFINED``: SPEC §11.1). With ``is_error: true`` the call failed and its text is the error.
``usage`` on an assistant message (API responses carry it) is shared among its calls.
Server tools (web search and fetch, code execution, tool search) and the MCP connector are
calls too: ``server_tool_use`` / ``mcp_tool_use`` blocks, answered in the *same* assistant
message by a ``<tool>_tool_result`` block (``web_search_tool_result``, ``mcp_tool_result``,
...) with the ``tool_use_id``. A result whose ``content`` is an object of a type ending in
``_error`` (``{"type": "web_search_tool_result_error", "error_code"}``), or an
``mcp_tool_result`` with ``is_error: true``, is a failure.

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
run (``sidechain:<agentId>``). Claude Code 2.1 also streams a sub-agent's messages into
its parent's session as ``{"type": "progress", "data": {"type": "agent_progress",
"message": {...}}}`` records; the sub-agent's own file (``subagents/agent-<id>.jsonl``) has
the same calls, so they are not replayed twice but noted. Other record types (``summary``,
``file-history-snapshot``, ``queue-operation``, ``attachment``, other ``system`` records)
carry no calls and are skipped.

**Claude Code SDK output** (``claude -p --output-format stream-json``, one record a line, or
the single JSON array of the same records that ``anthropics/claude-code-action`` writes to
its execution file): ``{"type": "system", "subtype": "init", "session_id", ...}``, then
``{"type": "assistant" | "user", "message": {...}, "parent_tool_use_id", "session_id"}``
and a closing ``{"type": "result", ...}``. Records with a ``parent_tool_use_id`` are a
sub-agent's (the Task tool) and form their own run (``subagent:<id>``).

**Cline / Roo Code** (``tasks/<id>/api_conversation_history.json``): Anthropic messages whose
results are *text* blocks of the next user message, ``[read_file for 'a.py'] Result:``
followed by the output (``[attempt_completion] Result:`` without a target), never
``tool_result`` blocks. The calls are ``tool_use`` blocks (native tool calling) or, in older
versions, XML in the assistant text (``<execute_command><command>ls</command>
</execute_command>``). A result answers the oldest unanswered call of that tool (``use_subagents``
answers as ``[subagents]``); newer versions may wrap the same labelled text in a
``tool_result`` block. A body ``The tool execution failed with the following error:``, or a
command's ``Command failed with exit code N.`` / ``Command terminated by signal S.`` (Cline
``CommandOrchestrator``), makes it a failure; ``Tool [x] was not executed because ...``
means the call never ran (no outcome is replayed). Roo Code's native tool protocol
(since late 2025) answers with plain ``tool_result`` blocks, paired by id, and words a
failure as JSON, ``{"status": "error", "message": "The tool execution failed", "error"}``
(Roo Code ``formatResponse.toolError``): that is a failure too. Such a conversation has
no labels to tell it from any Anthropic one but the ``<environment_details>`` block both
hosts append to every user message.

Calls of one assistant message form a batch (replayed as the host ran them: every call,
then the outcomes), and a sibling's ``Cancelled: parallel tool call ... errored`` result is
not replayed as a failure: the call never ran. A call id seen before in the session is a
copy (Claude Code sub-agent files copy their parent's history) and is counted once.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Final

from loopwatch.core._undefined import UNDEFINED
from loopwatch.transcripts._common import (
    CallBook,
    CallDraft,
    Read,
    RunAssembler,
    as_mapping,
    content_text,
    optional_id,
    split_tokens,
    usage_tokens,
)
from loopwatch.transcripts.model import Compaction, TranscriptError
from loopwatch.transcripts.openai_chat import SourcedMessage

#: ``[tool_name for 'target'] Result:`` / ``[tool_name] Result:`` opening a Cline result. The
#: target is the call's parameter as given, so it may span lines (a follow-up question, a
#: multi-line command).
CLINE_RESULT: Final = re.compile(r"\[([A-Za-z0-9_.:-]+)(?: for .*?)?\] Result:", re.DOTALL)
#: Result labels that are not the tool's name (Cline ``UseSubagentsToolHandler``).
_CLINE_LABELS: Final = {"subagents": "use_subagents"}
_CLINE_ERROR: Final = "The tool execution failed with the following error:"
#: How Cline's command runner (``CommandOrchestrator``) opens the result of a command that
#: exited non-zero or was killed; success is ``Command executed successfully (exit code 0).``
#: (or a bare ``Command executed.`` where the terminal reports no exit code).
_CLINE_COMMAND_FAILED: Final = re.compile(
    r"Command (?:failed with exit code -?\d+|terminated by signal \S+)\."
)


#: Roo Code's ``formatResponse.toolError`` under its native tool protocol: a JSON object
#: ``{"status": "error", "message": "The tool execution failed", "error"}`` as the whole
#: ``tool_result`` (``is_error`` is not set, and there is no ``[...] Result:`` label).
_ROO_ERROR_STATUS: Final = "error"


def _roo_json_failed(text: str) -> bool:
    if not text.startswith("{"):
        return False
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        return False
    return (
        isinstance(value, Mapping)
        and value.get("status") == _ROO_ERROR_STATUS
        and isinstance(value.get("message"), str)
    )


def _cline_failed(text: str) -> bool:
    """Whether the body of a Cline / Roo Code result (after its ``[...] Result:`` label,
    when it has one) is a failure."""
    return (
        text.startswith(_CLINE_ERROR)
        or _CLINE_COMMAND_FAILED.match(text) is not None
        or _roo_json_failed(text)
    )


#: Tool names Cline and Roo Code write as XML in older, text-only transcripts.
CLINE_XML_TOOLS: Final = frozenset(
    {
        "execute_command",
        "read_file",
        "write_to_file",
        "replace_in_file",
        "apply_diff",
        "insert_content",
        "search_and_replace",
        "search_files",
        "list_files",
        "list_code_definition_names",
        "browser_action",
        "use_mcp_tool",
        "access_mcp_resource",
        "ask_followup_question",
        "attempt_completion",
        "new_task",
        "plan_mode_respond",
        "switch_mode",
        "codebase_search",
        "fetch_instructions",
        "update_todo_list",
        "web_fetch",
        "load_mcp_documentation",
    }
)
_XML_CALL: Final = re.compile(r"<([a-z_]+)>(.*?)</\1>", re.DOTALL)
_XML_PARAM: Final = re.compile(r"<([a-z_]+)>(.*?)</\1>", re.DOTALL)


def _blocks(message: Mapping[str, object]) -> list[Mapping[str, object]]:
    content = message.get("content")
    if not isinstance(content, list):
        return []  # a plain-string content has no tool blocks
    return [block for block in content if isinstance(block, Mapping)]


def _texts(message: Mapping[str, object]) -> list[str]:
    content = message.get("content")
    if isinstance(content, str):
        return [content]
    return [
        text
        for block in _blocks(message)
        if block.get("type") == "text" and isinstance(text := block.get("text"), str)
    ]


#: Content blocks that are calls.
_CALL_BLOCKS: Final = ("tool_use", "server_tool_use", "mcp_tool_use")


def _tool_uses(
    message: Mapping[str, object], path: str, line: int | None, book: CallBook | None = None
) -> list[tuple[str, object, str | None]]:
    """The calls of an assistant message; a block of another ``*_use`` type (a call kind
    this reader does not know) is counted on ``book`` as skipped."""
    uses: list[tuple[str, object, str | None]] = []
    for block in _blocks(message):
        kind = block.get("type")
        if kind not in _CALL_BLOCKS:
            if book is not None and isinstance(kind, str) and kind.endswith("_use"):
                book.skip(kind, call=True, call_id=block.get("id"))
            continue
        name = block.get("name")
        if not isinstance(name, str):
            raise TranscriptError(path, line, 'a tool_use block needs a string "name"')
        uses.append((name, block.get("input", {}), optional_id(block.get("id"), path, line, "id")))
    return uses


def xml_tool_uses(message: Mapping[str, object]) -> list[tuple[str, object, str | None]]:
    """Calls a text-only Cline transcript writes as XML tags in the assistant text."""
    uses: list[tuple[str, object, str | None]] = []
    for text in _texts(message):
        for match in _XML_CALL.finditer(text):
            name = match.group(1)
            if name not in CLINE_XML_TOOLS:
                continue
            params = {m.group(1): m.group(2).strip() for m in _XML_PARAM.finditer(match.group(2))}
            uses.append((name, params, None))
    return uses


def _server_error(content: object) -> str | None:
    """The failure a server tool result reports (``{"type": "..._error", "error_code"}``)."""
    if not isinstance(content, Mapping):
        return None
    kind = content.get("type")
    if not isinstance(kind, str) or not kind.endswith("_error"):
        return None
    code = content.get("error_code")
    return f"{kind}: {code}" if isinstance(code, str) else kind


class _BlockMatcher:
    """Pairs results with the calls they answer: ``tool_result`` blocks by id, Cline result
    texts by tool name."""

    def __init__(self, runs: RunAssembler, *, cline: bool = False) -> None:
        self.cline = cline
        self.book = CallBook(runs)
        self.by_name: dict[str, list[CallDraft]] = {}
        self._last_key: str | None = None
        self._last_drafts: list[CallDraft] = []

    def add_calls(
        self,
        run_id: str | None,
        uses: list[tuple[str, object, str | None]],
        tokens: int | None,
        line: int | None,
        message_key: str | None = None,
    ) -> None:
        """Record the calls of one assistant message (or one line of a message that Claude
        Code split over several lines sharing ``message_key``: still one batch)."""
        drafts: list[CallDraft] = []
        for (name, args, call_id), share in zip(uses, split_tokens(tokens, len(uses)), strict=True):
            draft = self.book.call(run_id, name, args, call_id, tokens=share, line=line)
            if draft is not None:
                self.by_name.setdefault(name, []).append(draft)
                drafts.append(draft)
        if message_key is not None and message_key == self._last_key:
            drafts = self._last_drafts + drafts
        self._last_key = message_key
        self._last_drafts = drafts
        self.book.mark_batch(drafts)

    def _forget(self, draft: CallDraft) -> None:
        queue = self.by_name.get(draft.tool)
        if queue and draft in queue:
            queue.remove(draft)

    def add_results(self, message: Mapping[str, object]) -> None:
        for block in _blocks(message):
            if block.get("type") != "tool_result":
                continue
            draft = self.book.answer(block.get("tool_use_id"))
            if draft is None:
                continue
            self._forget(draft)
            content = block.get("content", "")
            if block.get("is_error") is True or (self.cline and self._cline_block_failed(content)):
                self.book.settle(draft, UNDEFINED, content_text(content), content)
            else:
                self.book.settle(draft, content, UNDEFINED, content)
        self._text_results(message)

    @staticmethod
    def _cline_block_failed(content: object) -> bool:
        """A ``tool_result`` Cline wrote holds the same labelled text as its text results;
        one Roo Code wrote under its native protocol holds the bare text (or JSON)."""
        text = content_text(content)
        opening = CLINE_RESULT.match(text)
        body = text[opening.end() :].lstrip("\n") if opening is not None else text
        return _cline_failed(body)

    def add_server_results(self, message: Mapping[str, object]) -> None:
        """Settle server and MCP-connector calls from the result blocks of their message."""
        for block in _blocks(message):
            kind = block.get("type")
            if not isinstance(kind, str) or not kind.endswith("_tool_result"):
                continue
            draft = self.book.answer(block.get("tool_use_id"))
            if draft is None:
                continue
            self._forget(draft)
            content = block.get("content")
            error = _server_error(content)
            if block.get("is_error") is True:
                self.book.settle(draft, UNDEFINED, content_text(content) or "error", content)
            elif error is not None:
                self.book.settle(draft, UNDEFINED, error, content)
            else:
                self.book.settle(draft, content, UNDEFINED, content)

    def _text_results(self, message: Mapping[str, object]) -> None:
        for text in _texts(message):
            opening = CLINE_RESULT.match(text)
            if opening is not None:
                self._settle_named(opening.group(1), text[opening.end() :].lstrip("\n"))
            elif text.startswith("Tool [") and "was not executed" in text:
                name = text[len("Tool [") : text.find("]")]
                self._settle_named(name, text)

    def _settle_named(self, name: str, text: str) -> None:
        queue = self.by_name.get(_CLINE_LABELS.get(name, name))
        if not queue:
            self.book.unmatched += 1
            return
        draft = queue.pop(0)
        if draft.call_id:
            self.book.pending.pop(draft.call_id, None)
        if _cline_failed(text):
            self.book.settle(draft, UNDEFINED, text, text)
        else:
            self.book.settle(draft, text, UNDEFINED, text)

    def finish(self, none_label: str = "(no run id)") -> Read:
        return self.book.finish(none_label=none_label)


def read_anthropic_messages(
    messages: Sequence[SourcedMessage], path: str, *, xml_tools: bool = False
) -> Read:
    """Turn Anthropic (or Cline) messages into one run of calls.

    Args:
        messages: the messages in order, each with its source line.
        path: for error messages.
        xml_tools: also read Cline's XML tool calls from assistant text (only for Cline
            conversations: other transcripts may quote such tags without calling a tool).

    Returns:
        The run.

    Raises:
        TranscriptError: a message that is not an object or a malformed ``tool_use`` block.
    """
    runs = RunAssembler()
    matcher = _BlockMatcher(runs, cline=xml_tools)
    for number, (line, value) in enumerate(messages, start=1):
        message = as_mapping(value, path, line, f"message {number}")
        role = message.get("role")
        if role == "assistant":
            uses = _tool_uses(message, path, line, matcher.book)
            if not uses and xml_tools:
                uses = xml_tool_uses(message)
            matcher.add_calls(None, uses, usage_tokens(message.get("usage")), line)
            matcher.add_server_results(message)
        elif role == "user":
            matcher.add_results(message)
    return matcher.finish()


def _claude_code_run(record: Mapping[str, object]) -> str | None:
    parent = record.get("parent_tool_use_id")
    if isinstance(parent, str) and parent:
        return f"subagent:{parent}"
    if record.get("isSidechain") is not True:
        return None
    agent = record.get("agentId")
    return f"sidechain:{agent}" if isinstance(agent, str) and agent else "sidechain"


def read_claude_code_records(records: Iterable[tuple[int | None, object]], path: str) -> Read:
    """Parse Claude Code session records (JSONL lines, or the SDK's JSON array).

    Args:
        records: each record with its line.
        path: for error messages.

    Returns:
        The main run, and one run per sub-agent when present.

    Raises:
        TranscriptError: a record that is not a JSON object, or a malformed ``tool_use``.
    """
    runs = RunAssembler()
    matcher = _BlockMatcher(runs)
    usage_spent: set[str] = set()
    streamed: set[str] = set()  # sub-agent calls copied in as progress records
    for line, value in records:
        record = as_mapping(value, path, line, "a session record")
        kind = record.get("type")
        run_id = _claude_code_run(record)
        if kind == "system" and record.get("subtype") == "compact_boundary":
            meta = record.get("compactMetadata")
            trigger = meta.get("trigger") if isinstance(meta, Mapping) else None
            if trigger != "manual":
                runs.add(run_id, Compaction(run_id=run_id, line=line))
            continue
        if kind == "progress":
            streamed.update(_agent_progress_calls(record))
            continue
        message = record.get("message")
        if kind not in ("user", "assistant") or not isinstance(message, Mapping):
            continue
        if kind == "user":
            matcher.add_results(message)
            continue
        uses = _tool_uses(message, path, line, matcher.book)
        if uses:
            tokens = usage_tokens(message.get("usage"))
            message_id = message.get("id")
            if isinstance(message_id, str):
                if message_id in usage_spent:
                    tokens = 0 if tokens is not None else None
                usage_spent.add(message_id)
            key = message_id if isinstance(message_id, str) else None
            matcher.add_calls(run_id, uses, tokens, line, key)
        matcher.add_server_results(message)  # a split message: results on a later line
    read = matcher.finish(none_label="main")
    copied = len(streamed - matcher.book.seen)
    if copied:
        read = read.with_notes(
            f"{copied} sub-agent tool call{'' if copied == 1 else 's'} streamed as progress "
            "records not replayed here: "
            "they are in the sub-agent's own file (subagents/agent-<id>.jsonl), scan it too"
        )
    return read


def _agent_progress_calls(record: Mapping[str, object]) -> set[str]:
    """The ids of the calls a sub-agent's ``progress`` record streams into its parent's
    session (``{"type": "progress", "data": {"type": "agent_progress", "agentId",
    "message": {"type": "assistant", "message": {...}}}}``, Claude Code 2.1)."""
    data = record.get("data")
    if not isinstance(data, Mapping) or data.get("type") != "agent_progress":
        return set()
    outer = data.get("message")
    inner = outer.get("message") if isinstance(outer, Mapping) else None
    if not isinstance(inner, Mapping):
        return set()
    return {
        str(block["id"])
        for block in _blocks(inner)
        if block.get("type") in _CALL_BLOCKS and isinstance(block.get("id"), str)
    }


def read_claude_code(text: str, path: str) -> Read:
    """Parse a Claude Code session JSONL file (or SDK stream-json output)."""
    from loopwatch.transcripts._common import json_lines

    return read_claude_code_records(json_lines(text, path), path)


__all__ = [
    "CLINE_RESULT",
    "read_anthropic_messages",
    "read_claude_code",
    "read_claude_code_records",
    "xml_tool_uses",
]
