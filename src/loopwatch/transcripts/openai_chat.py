"""OpenAI chat messages: a ``messages`` array (or JSONL, one message a line).

The shape is the Chat Completions one: an ``assistant`` message carries ``tool_calls``, each
``{"id", "type": "function", "function": {"name", "arguments"}}`` with ``arguments`` a JSON
*string*; the result is a later ``{"role": "tool", "tool_call_id", "content"}`` message. The
legacy ``function_call`` / ``{"role": "function", "name"}`` pair is read too.

- Arguments that are not valid JSON are replayed as the raw string (what the model sent).
- The result is the tool message's ``content`` as the model saw it (a string or a list of
  parts), per SPEC §11.1. Chat messages carry no error flag, so no call counts as failed.
- ``usage`` on an assistant message (``total_tokens``, or prompt + completion) is shared
  among the calls it issued.
- The whole conversation is one run: the chat format has no run ids.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

from loopwatch.transcripts._common import (
    CallDraft,
    RunAssembler,
    optional_id,
    split_tokens,
    usage_tokens,
)
from loopwatch.transcripts.model import Run, TranscriptError

#: One message and where it came from: its 1-based line (JSONL) or ``None`` (a document).
SourcedMessage = tuple[int | None, object]


def _arguments(raw: object) -> object:
    """Decode a JSON-string ``arguments``; keep anything undecodable as the model sent it."""
    if not isinstance(raw, str):
        return {} if raw is None else raw
    try:
        return json.loads(raw)
    except (ValueError, RecursionError):
        return raw


def _fail(path: str, line: int | None, number: int, reason: str) -> TranscriptError:
    return TranscriptError(path, line, f"message {number}: {reason}")


def _tool_calls(
    message: Mapping[str, object], path: str, line: int | None, number: int
) -> list[tuple[str, object, str | None]]:
    """``(name, args, call_id)`` of every call an assistant message makes."""
    calls: list[tuple[str, object, str | None]] = []
    raw_calls = message.get("tool_calls")
    if raw_calls is not None:
        if not isinstance(raw_calls, list):
            raise _fail(path, line, number, '"tool_calls" must be a list')
        for raw in raw_calls:
            function = raw.get("function") if isinstance(raw, Mapping) else None
            if not isinstance(raw, Mapping) or not isinstance(function, Mapping):
                raise _fail(path, line, number, 'a tool call needs a "function" object')
            name = function.get("name")
            if not isinstance(name, str):
                raise _fail(path, line, number, 'a tool call needs a string "function.name"')
            call_id = optional_id(raw.get("id"), path, line, "id")
            calls.append((name, _arguments(function.get("arguments")), call_id))
    legacy = message.get("function_call")
    if isinstance(legacy, Mapping) and isinstance(legacy.get("name"), str):
        calls.append((str(legacy["name"]), _arguments(legacy.get("arguments")), None))
    return calls


def read_openai_messages(messages: Sequence[SourcedMessage], path: str) -> tuple[Run, ...]:
    """Turn OpenAI chat messages into one run of calls.

    Args:
        messages: the messages in order, each with its source line.
        path: for error messages.

    Returns:
        The run.

    Raises:
        TranscriptError: a message that is not an object, or malformed ``tool_calls``.
    """
    runs = RunAssembler()
    by_id: dict[str, CallDraft] = {}
    legacy_pending: list[CallDraft] = []
    for number, (line, value) in enumerate(messages, start=1):
        if not isinstance(value, Mapping):
            raise _fail(path, line, number, "expected a JSON object")
        role = value.get("role")
        if role == "assistant":
            calls = _tool_calls(value, path, line, number)
            shares = split_tokens(usage_tokens(value.get("usage")), len(calls))
            for (name, args, call_id), tokens in zip(calls, shares, strict=True):
                draft = CallDraft(name, args, call_id, None, tokens, line)
                runs.add(None, draft)
                if call_id:
                    by_id[call_id] = draft
                else:
                    legacy_pending.append(draft)
        elif role == "tool":
            target = by_id.pop(str(value.get("tool_call_id")), None)
            if target is not None:
                target.result = value.get("content")
        elif role == "function" and legacy_pending:
            legacy_pending.pop(0).result = value.get("content")
    return runs.finish()


__all__ = ["SourcedMessage", "read_openai_messages"]
