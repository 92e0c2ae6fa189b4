"""Cursor agent transcripts (``~/.cursor/projects/<project>/agent-transcripts/*.jsonl``).

Not documented by Cursor; the shape is the one community tools parse from real files: one
``{"role": "user" | "assistant", "message": {"content": [blocks]}}`` a line, the blocks
Anthropic-style: ``text``, and ``{"type": "tool_use", "name", "input"}`` for each call the
agent made (``id`` often absent). Results, when a line carries them, are ``tool_result``
blocks and are matched by ``tool_use_id``. Cursor does not write tool output into these
files as a rule, so calls usually have no outcome: the call-based detectors still see
every call, the result-based ones cannot fire (the scan says so in a note).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from loopwatch.transcripts._common import Read
from loopwatch.transcripts.anthropic import read_anthropic_messages
from loopwatch.transcripts.model import TranscriptError
from loopwatch.transcripts.openai_chat import SourcedMessage


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
    read = read_anthropic_messages(messages, path)
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


def is_cursor_line(first: Mapping[str, object]) -> bool:
    """Whether a first line looks like a Cursor agent transcript line."""
    message = first.get("message")
    return (
        isinstance(message, Mapping)
        and "type" not in first
        and first.get("role") in ("user", "assistant", None)
        and "content" in message
    )


__all__ = ["is_cursor_line", "read_cursor"]
