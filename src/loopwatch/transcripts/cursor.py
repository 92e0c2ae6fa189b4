"""Cursor agent transcripts (``~/.cursor/projects/<project>/agent-transcripts/*.jsonl``).

Not documented by Cursor; the shape is the one community tools parse from real files: one
``{"role": "user" | "assistant", "message": {"content": [blocks]}}`` a line, the blocks
Anthropic-style: ``text``, and ``{"type": "tool_use", "name", "input"}`` for each call the
agent made (``id`` often absent). Results, when a line carries them, are ``tool_result``
blocks and are matched by ``tool_use_id``. Cursor does not write tool output into these
files as a rule, so calls usually have no outcome: the call-based detectors still see
every call, the result-based ones cannot fire (the scan says so in a note).

**Cursor CLI stream output** (``cursor-agent --print --output-format stream-json``, one
event a line): the ``system`` / ``user`` / ``assistant`` / ``result`` events are Claude
Code's stream-json, but a call is a ``{"type": "tool_call", "subtype": "started" |
"completed", "call_id", "model_call_id", "tool_call": {"<kind>ToolCall": {"args",
"result"}}}`` event of its own. The tool is the kind (``shellToolCall`` → ``shell``; an
MCP call, ``mcpToolCall``, is its ``args.toolName`` with ``args.args``); the arguments
drop the ``toolCallId`` copy of the call id (new on every call, it would hide a loop). The
result is ``result.success`` without its timings; ``result.error`` / ``failure``, or a
``success`` with a non-zero ``exitCode`` (or an MCP ``isError``), is a failure;
``result.rejected`` (the user refused the call) means it never ran. Calls that share a
``model_call_id`` are a batch.

**Plain-text transcripts** (``agent-transcripts/<id>.txt``, what Cursor wrote before the
JSONL files, and still the only record of older sessions): turns open with a ``user:`` or
``assistant:`` line; in an assistant turn each call is a ``[Tool call] <name>`` line
followed by its parameters, one ``  <key>: <value>`` line each (a multi-line value goes on
unindented until the next parameter or marker), and each call is answered by a
``[Tool result] <name>`` line, in order. Calls listed together before their results were
issued together (a batch). Cursor writes no output after the result marker, so these calls
have no outcome either.
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Iterable, Mapping
from typing import Final

from loopwatch.core._undefined import UNDEFINED
from loopwatch.transcripts._common import CallBook, CallDraft, Read, RunAssembler, text_lines
from loopwatch.transcripts.anthropic import read_anthropic_messages
from loopwatch.transcripts.model import TranscriptError
from loopwatch.transcripts.openai_chat import SourcedMessage


def _with_outcome_note(read: Read) -> Read:
    calls = sum(len(run.calls) for run in read.runs)
    with_outcome = sum(
        1 for run in read.runs for call in run.calls if call.result is not call.error
    )
    if calls and not with_outcome:
        return read.with_notes(
            "the transcript records no tool outcomes: result-based detectors cannot fire"
        )
    return read


def is_stream_call(value: object) -> bool:
    """Whether a JSON value is a ``tool_call`` event of the Cursor CLI's stream output."""
    return (
        isinstance(value, Mapping)
        and value.get("type") == "tool_call"
        and value.get("subtype") in ("started", "completed")
        and isinstance(value.get("tool_call"), Mapping)
    )


#: Fields of a Cursor stream call that change on every run and say nothing of the call.
_STREAM_VOLATILE: Final = frozenset(
    {"toolCallId", "executionTime", "localExecutionTimeMs", "startedAtMs", "completedAtMs"}
)


def _stable(value: object) -> object:
    if not isinstance(value, Mapping):
        return value
    return {key: item for key, item in value.items() if key not in _STREAM_VOLATILE}


def _stream_call(event: Mapping[str, object]) -> tuple[str, object, object] | None:
    """``(tool, args, result)`` of a ``tool_call`` event (``result`` may be absent)."""
    payload = event.get("tool_call")
    if not isinstance(payload, Mapping):
        return None
    bodies = [(key, body) for key, body in payload.items() if isinstance(body, Mapping)]
    if not bodies:
        return None
    named = [(key, body) for key, body in bodies if key.endswith("ToolCall")]
    kind, body = (named or bodies)[0]
    tool = kind.removesuffix("ToolCall") or kind
    args = _stable(body.get("args", {}))
    if (
        kind == "mcpToolCall"
        and isinstance(args, Mapping)
        and isinstance(args.get("toolName"), str)
    ):
        tool = str(args["toolName"])
        args = args.get("args", {})
    return tool, args, body.get("result", UNDEFINED)


def _stream_outcome(result: object) -> tuple[object, object] | None:
    """``(result, error)`` of a completed stream call; ``None`` when it never ran."""
    if not isinstance(result, Mapping):
        return (UNDEFINED, UNDEFINED) if result is UNDEFINED else (result, UNDEFINED)
    if "rejected" in result:
        return None
    if "success" in result:
        success = _stable(result["success"])
        code = success.get("exitCode") if isinstance(success, Mapping) else None
        if isinstance(code, int) and not isinstance(code, bool) and code != 0:
            return UNDEFINED, success
        if isinstance(success, Mapping) and success.get("isError") is True:
            return UNDEFINED, success  # an MCP tool's error result
        return success, UNDEFINED
    for key in ("error", "failure"):
        if key in result:
            return UNDEFINED, _stable(result[key])
    return result, UNDEFINED


class _StreamCalls:
    """The calls of a Cursor CLI stream, paired by ``call_id``."""

    def __init__(self, book: CallBook) -> None:
        self.book = book
        self.batches: dict[str, list[CallDraft]] = {}

    def event(self, event: Mapping[str, object], line: int) -> None:
        found = _stream_call(event)
        if found is None:  # a call of a shape not read: counted, once per call id
            self.book.skip("tool_call without a call body", call=True, call_id=event.get("call_id"))
            return
        tool, args, result = found
        call_id = event.get("call_id")
        key = call_id if isinstance(call_id, str) and call_id else None
        draft = self.book.pending.get(key) if key is not None else None
        if draft is None:  # a completed event without its started one is the call too
            if key is not None and key in self.book.seen:
                return
            draft = self.book.call(None, tool, args, key, line=line)
            if draft is None:
                return
            model_call = event.get("model_call_id")
            if isinstance(model_call, str):
                self.batches.setdefault(model_call, []).append(draft)
        if event.get("subtype") != "completed":
            return
        if key is not None:
            self.book.pending.pop(key, None)
        outcome = _stream_outcome(result)
        if outcome is None:
            self.book.not_run += 1
        else:
            draft.result, draft.error = outcome

    def finish(self) -> None:
        self.book.mark_batches(self.batches)


def read_cursor_stream(lines: Iterable[tuple[int, object]], path: str) -> Read:
    """Read the Cursor CLI's ``stream-json`` output as one run.

    Raises:
        TranscriptError: a line that is not an object.
    """
    calls = _StreamCalls(CallBook(RunAssembler()))
    for line, value in lines:
        if not isinstance(value, Mapping):
            raise TranscriptError(path, line, "a stream event: expected a JSON object")
        if is_stream_call(value):
            calls.event(value, line)
    calls.finish()
    return calls.book.finish()


def read_cursor(lines: Iterable[tuple[int, object]], path: str) -> Read:
    """Read a Cursor agent transcript (or the CLI's stream output) as one run.

    Raises:
        TranscriptError: a line that is not an object, or a malformed ``tool_use``.
    """
    values = list(lines)
    if any(is_stream_call(value) for _line, value in values):
        return read_cursor_stream(values, path)
    messages: list[SourcedMessage] = []
    for line, value in values:
        if not isinstance(value, Mapping):
            raise TranscriptError(path, line, "a transcript line: expected a JSON object")
        message = value.get("message")
        if not isinstance(message, Mapping):
            continue
        role = value.get("role", message.get("role"))
        content = message.get("content")
        if role is None and isinstance(content, list):
            has_use = any(isinstance(b, Mapping) and b.get("type") == "tool_use" for b in content)
            role = "assistant" if has_use else "user"
        messages.append((line, {"role": role, "content": content}))
    return _with_outcome_note(read_anthropic_messages(messages, path))


_ROLE_LINES: Final = frozenset({"user:", "assistant:"})
_CALL: Final = "[Tool call] "
_RESULT: Final = "[Tool result] "
_PARAMETER: Final = re.compile(r"  ([A-Za-z_][A-Za-z0-9_]*): ?(.*)")


def is_cursor_text(text: str) -> bool:
    """Whether a text is a Cursor plain-text transcript (its first line opens a turn)."""
    for _number, line in text_lines(text):
        if line.strip():
            return line.strip() in _ROLE_LINES
    return False


class _TextCalls:
    """The calls of a plain-text transcript as its lines are read."""

    def __init__(self) -> None:
        self.book = CallBook(RunAssembler())
        self.pending: deque[CallDraft] = deque()
        self.group: list[CallDraft] = []
        self.args: dict[str, str] | None = None  # the parameters of the call being read
        self.key: str | None = None

    def close_call(self) -> None:
        """Trailing blank lines belong to the layout, not to the last value."""
        if self.args is not None and self.key is not None:
            self.args[self.key] = self.args[self.key].rstrip("\n")
        self.args, self.key = None, None

    def close_group(self) -> None:
        self.close_call()
        self.book.mark_batch(self.group)
        self.group = []

    def call(self, name: str, line: int) -> None:
        self.close_call()
        self.args = {}
        draft = self.book.call(None, name, self.args, None, line=line)
        if draft is not None:
            self.group.append(draft)
            self.pending.append(draft)

    def result(self, name: str) -> None:
        self.close_group()
        for draft in self.pending:
            if draft.tool == name:
                self.pending.remove(draft)
                return
        self.book.unmatched += 1  # a result for no call read: the file was misread

    def parameter(self, text: str) -> None:
        if self.args is None:
            return
        match = _PARAMETER.fullmatch(text)
        if match is not None:
            self.key = match.group(1)
            self.args[self.key] = match.group(2)
        elif self.key is not None:
            self.args[self.key] += "\n" + text


def read_cursor_text(text: str, path: str) -> Read:
    """Read a Cursor plain-text agent transcript as one run (no call has an outcome)."""
    del path  # every line of text is readable: there is nothing to reject
    calls = _TextCalls()
    in_assistant = False
    for number, line in text_lines(text):
        raw = line.removesuffix("\r")  # a file saved with Windows line ends
        if raw.strip() in _ROLE_LINES and not raw.startswith(" "):
            calls.close_group()
            in_assistant = raw.strip() == "assistant:"
        elif not in_assistant:
            continue  # a user turn: a pasted "[Tool call]" there is text, not a call
        elif raw.startswith(_CALL):
            calls.call(raw[len(_CALL) :].strip(), number)
        elif raw.startswith(_RESULT):
            calls.result(raw[len(_RESULT) :].strip())
        else:
            calls.parameter(raw)
    calls.close_group()
    return _with_outcome_note(calls.book.finish())


def is_cursor_line(first: Mapping[str, object]) -> bool:
    """Whether a first line looks like a Cursor agent transcript line."""
    message = first.get("message")
    return (
        isinstance(message, Mapping)
        and "type" not in first
        and first.get("role") in ("user", "assistant", None)
        and "content" in message
    )


__all__ = [
    "is_cursor_line",
    "is_cursor_text",
    "is_stream_call",
    "read_cursor",
    "read_cursor_stream",
    "read_cursor_text",
]
