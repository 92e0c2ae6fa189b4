"""Cursor agent transcripts (``~/.cursor/projects/<project>/agent-transcripts/*.jsonl``).

Not documented by Cursor; the shape is the one community tools parse from real files: one
``{"role": "user" | "assistant", "message": {"content": [blocks]}}`` a line, the blocks
Anthropic-style: ``text``, and ``{"type": "tool_use", "name", "input"}`` for each call the
agent made (``id`` often absent). Results, when a line carries them, are ``tool_result``
blocks and are matched by ``tool_use_id``. Cursor does not write tool output into these
files as a rule, so calls usually have no outcome: the call-based detectors still see
every call, the result-based ones cannot fire (the scan says so in a note).

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

from loopwatch.transcripts._common import CallBook, CallDraft, Read, RunAssembler, text_lines
from loopwatch.transcripts.anthropic import read_anthropic_messages
from loopwatch.transcripts.model import TranscriptError
from loopwatch.transcripts.openai_chat import SourcedMessage


def _with_outcome_note(read: Read) -> Read:
    calls = sum(len(run.calls) for run in read.runs)
    with_outcome = sum(
        1 for run in read.runs for call in run.calls if call.result is not call.error
    )
    notes = read.notes
    if calls and not with_outcome:
        notes = (
            *notes,
            "the transcript records no tool outcomes: result-based detectors cannot fire",
        )
    return Read(read.runs, read.unmatched, notes)


def read_cursor(lines: Iterable[tuple[int, object]], path: str) -> Read:
    """Read a Cursor agent transcript as one run.

    Raises:
        TranscriptError: a line that is not an object, or a malformed ``tool_use``.
    """
    messages: list[SourcedMessage] = []
    for line, value in lines:
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
        batch = self.book.batch_for(len(self.group))
        for draft in self.group:
            draft.batch = batch
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


__all__ = ["is_cursor_line", "is_cursor_text", "read_cursor", "read_cursor_text"]
