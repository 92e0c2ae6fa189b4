"""Codex CLI rollouts and OpenAI Responses API items.

**OpenAI Responses items** (the ``input`` / ``output`` arrays of the Responses API): a list
of items told apart by ``type``. Calls are ``function_call`` (``name``, ``arguments`` a JSON
string, ``call_id``), ``custom_tool_call`` (``name``, free-text ``input``),
``local_shell_call`` (``action``: ``{"type": "exec", "command": [...]}``), ``mcp_call``
(``name``, ``arguments``, with its ``output`` / ``error`` inline), and the built-in tools,
named by their item type: ``tool_search_call`` (answered by ``tool_search_output``, whose
``tools`` are the result), ``shell_call`` (``action.commands``; ``shell_call_output``
chunks whose ``outcome`` is an exit code or a timeout), ``apply_patch_call``
(``operation``; ``apply_patch_call_output`` with ``status: "failed"`` on failure),
``computer_call`` (``action``; ``computer_call_output``), and the hosted
``web_search_call``, ``image_generation_call``, ``file_search_call`` and
``code_interpreter_call``, which run on OpenAI's side and have no outcome item. Each of
them is a call the model made, so a file that holds them has them counted: leaving them
out would report a loop of them as nothing. Outcomes are ``function_call_output`` and
``custom_tool_call_output`` (``call_id``, ``output``: a string, or a list of content
items); a ``local_shell_call_output`` has no ``call_id`` and names its call by ``id``.
An ``output`` object with ``"success": false`` is a failure. Codex itself never
writes that flag into a rollout (its ``FunctionCallOutputPayload`` serialises as the bare
string or content items), so a failed command shows only as the exit code in the text it
formats for the model: ``{"output", "metadata": {"exit_code"}}`` (the ``shell`` tool),
``Exit code: N`` (``shell_command``, ``apply_patch``) or ``Process exited with code N``
(``exec_command``) in the header before ``Output:``. A non-zero code is a failure, as a
non-zero Bash exit is one in Claude Code (``is_error``). The outcome replayed is the
envelope's ``output``, or the header without its chunk id, wall time and token counts
(they change on every run) followed by the output. A response object
(``{"object": "response", "output": [...]}``) or a request body (``{"input": [...]}``) is
read through its item list.

**Codex CLI rollouts** (``~/.codex/sessions/YYYY/MM/DD/rollout-<time>-<id>.jsonl``; the
schema is ``RolloutLine`` / ``RolloutItem`` in openai/codex ``codex-rs/protocol``): one
``{"timestamp", "type", "payload"}`` a line, ``type`` one of ``session_meta`` (first
line), ``response_item`` (a Responses item as above: the calls and outputs replayed),
``event_msg`` (UI events that mostly repeat what the items say), ``turn_context`` and
``compacted`` (history compacted: arms the post-compaction guard). Of the events, only the
end of a call is read, for what the output item may not say: an ``exec_command_end`` with
a non-zero ``exit_code``, a ``patch_apply_end`` with ``success: false`` or an
``mcp_tool_call_end`` whose ``result`` is ``Err`` or flagged ``isError`` makes its call a
failure, unless the output states its own exit code (a headed command output stays the
authority). A call the user interrupted has the output ``"aborted"`` (what ``codex-rs``
writes for a call cut off): it has no outcome. An output that is the harness's own refusal
(``apply_patch verification failed: ...``, ``exec command rejected by user``, ``unsupported
call: ...``: ``FunctionCallError::RespondToModel``) is a failure.

Item and line types this reader does not know (a newer Codex's) are never passed over in
silence: a ``*_call`` / ``*_output`` item is counted as a skipped call, which makes the scan
a doubt, and any other unknown type is noted. Known types that hold no call
(``ghost_snapshot``, ``agent_message``, compaction items, ``world_state`` lines, ...) are
passed over. Rollouts written before
the envelope (mid 2025) have a bare ``{"id", "timestamp", "instructions"}`` first line
followed by bare items and ``{"record_type": "state"}`` lines; both are read.

A ``function_call`` / ``custom_tool_call`` with a ``namespace`` (newer Codex, MCP tools) is
the tool ``namespace:name``, the key Codex itself dispatches on.

Consecutive call items (with only reasoning between them) are one batch: the model issued
them in one response, and Codex runs them in parallel. Call ids seen before in the file are
copies (a resumed session) and are counted once.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from typing import Final

from loopwatch.core._undefined import UNDEFINED
from loopwatch.host_outcome import codex_refusal
from loopwatch.transcripts._common import (
    CallBook,
    CallDraft,
    Read,
    RunAssembler,
    content_text,
    decode_arguments,
    optional_id,
)
from loopwatch.transcripts.model import Compaction, TranscriptError

#: Item types that are calls, and those that are outcomes.
CALL_TYPES: Final = frozenset(
    {
        "function_call",
        "custom_tool_call",
        "local_shell_call",
        "mcp_call",
        "tool_search_call",
        "web_search_call",
        "shell_call",
        "apply_patch_call",
        "computer_call",
        "image_generation_call",
        "file_search_call",
        "code_interpreter_call",
    }
)
OUTPUT_TYPES: Final = frozenset(
    {
        "function_call_output",
        "custom_tool_call_output",
        "local_shell_call_output",
        "tool_search_output",
        "shell_call_output",
        "apply_patch_call_output",
        "computer_call_output",
    }
)
#: Every item type of the Responses API a transcript may hold (for detection).
RESPONSES_TYPES: Final = CALL_TYPES | OUTPUT_TYPES | frozenset({"message", "reasoning"})
#: Item types known to hold no tool call: Codex's ``ResponseItem`` variants besides the
#: calls (``agent_message`` between agents, ``ghost_snapshot`` undo points, compaction
#: summaries and triggers, ``additional_tools``, ``configuration_update``, ``other``) and
#: the Responses API's MCP bookkeeping and references. Any other type is counted as not
#: read (a ``*_call`` or ``*_output`` one makes the scan a doubt).
_NO_CALL_TYPES: Final = frozenset(
    {
        "message",
        "reasoning",
        "agent_message",
        "ghost_snapshot",
        "compaction",
        "compaction_summary",
        "compaction_trigger",
        "context_compaction",
        "additional_tools",
        "configuration_update",
        "other",
        "item_reference",
        "mcp_list_tools",
        "mcp_approval_request",
        "mcp_approval_response",
    }
)
#: Top-level line types of an enveloped Codex rollout.
ROLLOUT_TYPES: Final = frozenset(
    {"session_meta", "response_item", "event_msg", "turn_context", "compacted"}
)
#: Rollout line types newer Codex versions write that hold no call (sub-agent messages
#: and their metadata, the ``AGENTS.md`` world-state baseline).
_NO_CALL_ROLLOUT_TYPES: Final = frozenset(
    {"inter_agent_communication", "inter_agent_communication_metadata", "world_state"}
)


def _call_like(kind: str) -> bool:
    """Whether an unknown item type names a tool call or an outcome (``*_call``, ``*_output``)."""
    return kind.endswith(("_call", "_output"))


#: Built-in tools: no ``name`` on the item; the key holding what the model asked for.
_HOSTED: Final = {
    "local_shell_call": ("local_shell", "action"),
    "web_search_call": ("web_search", "action"),
    "tool_search_call": ("tool_search", "arguments"),
    "shell_call": ("shell", "action"),
    "apply_patch_call": ("apply_patch", "operation"),
    "computer_call": ("computer", "action"),
    "image_generation_call": ("image_generation", "revised_prompt"),
    "file_search_call": ("file_search", "queries"),
    "code_interpreter_call": ("code_interpreter", "code"),
}
#: Hosted tools that run on OpenAI's side: no outcome item ever follows their call.
_NO_OUTCOME_ITEM: Final = frozenset(
    {"web_search_call", "image_generation_call", "file_search_call", "code_interpreter_call"}
)


def _call_of(
    item: Mapping[str, object], path: str, line: int | None
) -> tuple[str, object, str | None]:
    kind = str(item.get("type"))
    raw_id = item.get("call_id") if item.get("call_id") is not None else item.get("id")
    call_id = optional_id(raw_id if isinstance(raw_id, (str, int)) else None, path, line, "call_id")
    if kind in _HOSTED:
        tool, key = _HOSTED[kind]
        if key in ("action", "arguments", "operation"):
            args = item.get(key, item.get("action", item.get("arguments", {})))
            return tool, decode_arguments(args), call_id
        return tool, {key: item.get(key)} if key in item else {}, call_id
    name = item.get("name")
    if not isinstance(name, str):
        raise TranscriptError(path, line, f'a {kind} item needs a string "name"')
    namespace = item.get("namespace")
    if isinstance(namespace, str) and namespace:
        # Codex keys a namespaced tool (an MCP server's) as ``namespace:name``
        # (``tool_handler_key`` in ``codex-rs/core``): two servers' tools of one name differ.
        name = f"{namespace}:{name}"
    if kind == "custom_tool_call":
        return name, {"input": item.get("input", "")}, call_id
    return name, decode_arguments(item.get("arguments")), call_id


#: The header lines Codex puts before ``Output:`` that carry a command's exit code.
_EXIT_LINE: Final = re.compile(r"(?:Exit code:|Process exited with code) (-?\d+)")
#: Header lines that change on every run (a chunk id, timings, sizes) and say nothing of
#: what the command did.
_VOLATILE_LINE: Final = re.compile(
    r"(?:Chunk ID|Wall time|Original token count|Total output lines):.*"
)
#: How many header lines are looked at (the header has at most five; the output follows).
_HEADER_LINES: Final = 6


def _envelope_outcome(text: str) -> tuple[object, object] | None:
    """``(result, error)`` of the ``shell`` tool's ``{"output", "metadata"}`` envelope."""
    try:
        envelope = json.loads(text)
    except (ValueError, RecursionError):
        return None
    metadata = envelope.get("metadata") if isinstance(envelope, Mapping) else None
    code = metadata.get("exit_code") if isinstance(metadata, Mapping) else None
    if not isinstance(envelope, Mapping) or not isinstance(code, int) or isinstance(code, bool):
        return None
    inner = envelope.get("output")
    shown = inner if isinstance(inner, str) else text
    return (shown, UNDEFINED) if code == 0 else (UNDEFINED, shown or text)


def _header_outcome(text: str) -> tuple[str, int | None] | None:
    """The text of a headed command output without its volatile lines, and its exit code.

    ``None`` when the text has no Codex header (a line of it before ``Output:``).
    """
    header = text.split("\n", _HEADER_LINES)[:_HEADER_LINES]
    if "Output:" not in header:
        return None
    lines = header[: header.index("Output:")]
    codes = [int(m.group(1)) for line in lines if (m := _EXIT_LINE.fullmatch(line.strip()))]
    if not codes and not any(_VOLATILE_LINE.fullmatch(line.strip()) for line in lines):
        return None
    kept = [line.strip() for line in lines if not _VOLATILE_LINE.fullmatch(line.strip())]
    body = text.partition("\nOutput:\n")[2]
    return "\n".join([*kept, body] if body else kept), (codes[0] if codes else None)


def _command_outcome(output: object) -> tuple[object, object] | None:
    """``(result, error)`` of a Codex command output, or ``None`` for any other output.

    Codex formats what a command did for the model as a JSON envelope (``shell``) or a
    header before ``Output:`` (``shell_command``, ``exec_command``, ``apply_patch``). A
    non-zero exit code is a failure. The chunk id, wall time and token counts are dropped
    from the text: they change on every run, so two runs of a command that printed the same
    thing would never look the same, and a command repeated without progress could never
    be seen as such. Only the header is read, never the command's own output, which may
    print anything. Content items (code-mode ``exec``) keep their shape; only their exit
    code is read.
    """
    text = output if isinstance(output, str) else content_text(output)
    if text.startswith("{") and '"metadata"' in text:
        return _envelope_outcome(text) if isinstance(output, str) else None
    headed = _header_outcome(text)
    if headed is None:
        return None
    shown, code = headed
    if code is not None and code != 0:
        return UNDEFINED, shown
    return (shown, UNDEFINED) if isinstance(output, str) else (output, UNDEFINED)


def _shell_failure(chunks: object) -> str | None:
    """The failure text of a ``shell_call_output`` (chunks with an ``outcome``), else ``None``.

    A chunk that timed out or exited non-zero makes the call a failure; the text is what
    the chunks printed (stderr first), or the outcome when they printed nothing.
    """
    if not isinstance(chunks, list):
        return None
    failed: list[str] = []
    texts: list[str] = []
    for chunk in chunks:
        if not isinstance(chunk, Mapping):
            continue
        texts.extend(
            text for key in ("stderr", "stdout") if isinstance(text := chunk.get(key), str) and text
        )
        outcome = chunk.get("outcome")
        if not isinstance(outcome, Mapping):
            continue
        code = outcome.get("exit_code")
        if outcome.get("type") == "timeout":
            failed.append("timeout")
        elif isinstance(code, int) and not isinstance(code, bool) and code != 0:
            failed.append(f"exit code {code}")
    if not failed:
        return None
    return "\n".join(texts) if texts else ", ".join(failed)


def _item_outcome(kind: str, item: Mapping[str, object], output: object) -> tuple[object, object]:
    """``(result, error)`` of an outcome item of type ``kind`` (its payload is ``output``)."""
    if kind == "shell_call_output":
        failure = _shell_failure(output)
        return (output, UNDEFINED) if failure is None else (UNDEFINED, failure)
    if kind == "apply_patch_call_output" and item.get("status") == "failed":
        return UNDEFINED, output if isinstance(output, str) and output else "failed"
    if kind in ("tool_search_output", "computer_call_output", "apply_patch_call_output"):
        return output, UNDEFINED
    return _outcome(output)


def _outcome(output: object) -> tuple[object, object]:
    """``(result, error)`` of an output item's ``output``."""
    if isinstance(output, Mapping) and output.get("success") is False:
        content = output.get("content", output.get("output", ""))
        return UNDEFINED, content if isinstance(content, str) else content_text(content)
    command = _command_outcome(output)
    return command if command is not None else (output, UNDEFINED)


#: What Codex records as the output of a call the user interrupted (or that never
#: answered before the turn ended): ``codex-rs`` writes ``FunctionCallOutput`` with this
#: content. The call was cut off, so it has no outcome, as an interrupted Claude Code tool
#: has none.
CODEX_ABORTED: Final = "aborted"


def _event_failed(event: Mapping[str, object]) -> bool:
    """Whether a Codex ``event_msg`` reports that the call it names (``call_id``) failed.

    ``exec_command_end`` (a non-zero ``exit_code``), ``patch_apply_end`` (``success:
    false``) and ``mcp_tool_call_end`` (``result`` ``{"Err": ...}`` or ``{"Ok":
    {"isError": true}}``) are what Codex knew of the call; the output item shows the
    model only the text, which may not say so (an MCP tool's error, a patch that did not
    apply).
    """
    kind = event.get("type")
    if kind == "exec_command_end":
        code = event.get("exit_code")
        return isinstance(code, int) and not isinstance(code, bool) and code != 0
    if kind == "patch_apply_end":
        return event.get("success") is False
    if kind == "mcp_tool_call_end":
        result = event.get("result")
        if not isinstance(result, Mapping):
            return False
        ok = result.get("Ok")
        return "Err" in result or (
            isinstance(ok, Mapping) and (ok.get("isError") is True or ok.get("is_error") is True)
        )
    return False


class ItemReader:
    """Feeds Responses items, one at a time, into a :class:`CallBook`.

    Args:
        book: where the calls go.
        codex: the items come from a Codex rollout (an ``"aborted"`` output means the
            call was cut off: no outcome).
    """

    def __init__(self, book: CallBook, *, codex: bool = False) -> None:
        self.book = book
        self.codex = codex
        self._group: list[CallDraft] = []
        #: Calls by id whose output text states no exit code, for the failures a Codex
        #: event reports beside it (a headed command output is the authority: a process
        #: still running when the call returned may fail later, after the model moved on).
        self._unstated: dict[str, CallDraft] = {}
        #: A call item's own ``id`` → its ``call_id``: a ``local_shell_call_output`` names
        #: the call it answers by ``id`` alone (it has no ``call_id`` field).
        self._item_ids: dict[str, str] = {}
        #: Ids of call items of unknown types (skipped): their outcomes are not orphans.
        self._skipped_ids: set[str] = set()

    def _close_group(self) -> None:
        self.book.mark_batch(self._group)
        self._group = []

    def item(self, item: Mapping[str, object], path: str, line: int | None) -> None:
        """Read one item: a call or an outcome; a known item of another type is passed over.

        An item of a type this reader does not know is counted on the book (see
        :meth:`CallBook.skip`), and so is the output of a call skipped that way.
        """
        raw_kind = item.get("type")
        kind = raw_kind if isinstance(raw_kind, str) else None  # JSON lists are unhashable
        if kind == "reasoning":
            return  # reasoning precedes the calls it plans; it does not end a batch
        if kind is not None and kind not in CALL_TYPES | OUTPUT_TYPES | _NO_CALL_TYPES:
            self._unknown(kind, item)
            return
        if kind in CALL_TYPES:
            name, args, call_id = _call_of(item, path, line)
            draft = self.book.call(None, name, args, call_id, line=line)
            if draft is None:
                return
            item_id = item.get("id")
            if isinstance(item_id, str) and call_id is not None and item_id != call_id:
                self._item_ids[item_id] = call_id
            self._group.append(draft)
            if kind == "mcp_call" and call_id is not None:
                self.book.pending.pop(call_id, None)
                error = item.get("error")
                if isinstance(error, str) and error:
                    draft.error = error
                elif "output" in item:
                    draft.result = item.get("output")
            elif kind in _NO_OUTCOME_ITEM and call_id is not None:
                self.book.pending.pop(call_id, None)
            return
        self._close_group()
        if kind in OUTPUT_TYPES:
            answers = item.get("call_id")
            if answers is None and isinstance(item.get("id"), str):
                answers = self._item_ids.get(str(item["id"]), item["id"])
            if isinstance(answers, str) and answers in self._skipped_ids:
                return  # the outcome of a call not read: counted with it
            draft = self.book.answer(answers)
            if draft is not None:
                output = item.get("tools") if kind == "tool_search_output" else item.get("output")
                if self.codex and output == CODEX_ABORTED:
                    self.book.not_run += 1
                    return
                result, error = _item_outcome(kind, item, output)
                if self.codex and error is UNDEFINED and codex_refusal(output):
                    result, error = UNDEFINED, output
                self.book.settle(draft, result, error, output)
                if draft.call_id and _command_outcome(output) is None:
                    self._unstated[draft.call_id] = draft

    def _unknown(self, kind: str, item: Mapping[str, object]) -> None:
        """Count an item of a type not known; a call's id is kept so its outcome is too."""
        self._close_group()
        call_like = _call_like(kind)
        answers = item.get("call_id")
        if call_like and isinstance(answers, str) and answers in self._skipped_ids:
            return  # the outcome of a call already counted
        if kind.endswith("_output") and isinstance(answers, str) and answers in self.book.pending:
            # An outcome of a newer type answering a call that was read: its ``output``
            # is read as a function call's would be.
            draft = self.book.answer(answers)
            if draft is not None:
                output = item.get("output")
                result, error = _outcome(output)
                self.book.settle(draft, result, error, output)
            return
        self.book.skip(kind, call=call_like)
        for key in ("call_id", "id"):
            if call_like and isinstance(value := item.get(key), str) and value:
                self._skipped_ids.add(value)

    def fail(self, call_id: object) -> None:
        """Make the call ``call_id`` a failure (its host said so beside the output item).

        The text the model was shown stays the outcome, now as the error. A call whose
        output states its exit code, has no outcome, or already failed is left as it is.
        """
        draft = self._unstated.get(call_id) if isinstance(call_id, str) else None
        if draft is None or draft.result is UNDEFINED or draft.error is not UNDEFINED:
            return
        draft.error, draft.result = draft.result, UNDEFINED

    def finish(self) -> Read:
        """The run."""
        self._close_group()
        return self.book.finish()


def read_responses_items(items: Iterable[tuple[int | None, object]], path: str) -> Read:
    """Read a list of Responses items as one run.

    Raises:
        TranscriptError: an item that is not an object, or a call without a name.
    """
    reader = ItemReader(CallBook(RunAssembler()))
    for number, (line, value) in enumerate(items, start=1):
        if not isinstance(value, Mapping):
            raise TranscriptError(path, line, f"item {number}: expected a JSON object")
        reader.item(value, path, line)
    return reader.finish()


def read_codex(records: Iterable[tuple[int, object]], path: str) -> Read:
    """Read a Codex CLI rollout (enveloped or legacy lines) as one run.

    Raises:
        TranscriptError: a line that is not an object, or a call without a name.
    """
    book = CallBook(RunAssembler())
    reader = ItemReader(book, codex=True)
    failed: list[object] = []
    for line, value in records:
        if not isinstance(value, Mapping):
            raise TranscriptError(path, line, "a rollout line: expected a JSON object")
        raw_kind = value.get("type")
        kind = raw_kind if isinstance(raw_kind, str) else None
        payload = value.get("payload")
        if kind == "response_item" and isinstance(payload, Mapping):
            reader.item(payload, path, line)
        elif kind == "event_msg" and isinstance(payload, Mapping):
            if _event_failed(payload):
                failed.append(payload.get("call_id"))  # the end event may precede the output
        elif kind == "compacted":
            book.runs.add(None, Compaction(run_id=None, line=line))
        elif kind in ("session_meta", "turn_context") or kind in _NO_CALL_ROLLOUT_TYPES:
            continue
        elif kind in RESPONSES_TYPES or kind in _NO_CALL_TYPES:
            reader.item(value, path, line)  # a legacy rollout: bare items
        elif kind is not None:
            if kind in ("response_item", "event_msg"):
                book.skip(f"{kind} without a payload object", call=kind == "response_item")
            elif _call_like(kind):
                reader.item(value, path, line)  # a bare item of a newer type: counted
            else:
                book.skip(kind, call=False)
    for call_id in failed:
        reader.fail(call_id)
    return reader.finish()


def is_legacy_rollout_header(first: Mapping[str, object]) -> bool:
    """Whether a first line is the bare session header of a pre-envelope Codex rollout."""
    return (
        "type" not in first
        and isinstance(first.get("id"), str)
        and "timestamp" in first
        and ("instructions" in first or "git" in first)
    )


__all__ = [
    "CALL_TYPES",
    "OUTPUT_TYPES",
    "RESPONSES_TYPES",
    "ROLLOUT_TYPES",
    "ItemReader",
    "is_legacy_rollout_header",
    "read_codex",
    "read_responses_items",
]
