"""Gemini CLI chat sessions, and Gemini API ``contents`` (saved chats and checkpoints).

**Gemini CLI sessions** (``~/.gemini/tmp/<project-hash>/chats/session-<time>-<id>.json``;
``ConversationRecord`` in google-gemini/gemini-cli ``packages/core/src/services/
chatRecordingService.ts``): one JSON document ``{"sessionId", "projectHash", "startTime",
"lastUpdated", "messages": [...]}``. A message is ``{"id", "timestamp", "type": "user" |
"gemini" | "info" | "error" | "warning", "content", ...}``; a ``gemini`` message carries the
calls it made in ``toolCalls``: ``{"id", "name", "args", "status": "success" | "error" |
"cancelled", "result": [parts], "resultDisplay", ...}`` with the outcome recorded on the
call itself. The result replayed is the ``response`` of the ``functionResponse`` part (what
the model was shown); ``status: "error"`` makes the call a failure, with the response's
``error`` text (else ``resultDisplay``); ``cancelled`` calls never ran and get no outcome.
A shell command that ran but failed is still ``success``: ``run_shell_command`` reports it
in the text it returns, whose last lines are fields (``Error: ...``, ``Exit Code: N``,
``Signal: ...``, ``Background PIDs: ...``, ``Process Group PGID: N``). An error, a
non-zero exit code or a signal there is a failure; the PIDs lines, new on every run, are
dropped from the text, so one command repeated with the same output reads the same.

**Gemini CLI JSONL sessions** (``session-<time>-<id>.jsonl``, the recording Gemini CLI
writes since it stopped rewriting one whole document on every change, around 0.40): the same
``ConversationRecord`` as an append-only log. The first line is the header (``sessionId``,
``projectHash``, ``startTime``, ...); then each line is a message record (as above), a
``{"$set": {...}}`` metadata patch (whose ``messages``, when present, replace the model's
context: session start, compression, a rolled-back turn) or a ``{"$rewindTo": id}`` marker.
A message is written again, whole and under the same ``id``, each time its tool calls or
tokens change, so the lines are an upsert log, not a list: read line by line, every call
would count two or three times (scheduled, then finished) and pair with its first, empty
state. The reader folds the log by message id (the last version of each call wins, in the
order calls first appeared). Calls that a ``$set`` or a rewind later dropped from the
model's context still ran, so they are still replayed (a note says how many rewinds there
were).

**Gemini API contents** (``/chat save`` checkpoints, ``checkpoint-<tag>.json``, and request
bodies ``{"contents": [...]}``): ``{"role": "user" | "model", "parts": [...]}`` where a
``model`` turn's ``{"functionCall": {"name", "args", "id"}}`` parts are the calls and a
later ``user`` turn's ``{"functionResponse": {"name", "id", "response"}}`` parts answer
them (by id, else in order by name).

The calls of one message form a batch (Gemini CLI schedules them together).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Final

from loopwatch.core._undefined import UNDEFINED
from loopwatch.host_outcome import gemini_shell_text
from loopwatch.transcripts._common import (
    CallBook,
    CallDraft,
    Read,
    RunAssembler,
    optional_id,
    split_tokens,
    usage_tokens,
)
from loopwatch.transcripts.model import TranscriptError


def response_of(result: object) -> object:
    """The ``functionResponse.response`` inside a recorded result (parts), or the result."""
    parts = result if isinstance(result, list) else [result]
    responses = [
        part["functionResponse"].get("response")
        for part in parts
        if isinstance(part, Mapping) and isinstance(part.get("functionResponse"), Mapping)
    ]
    if len(responses) == 1:
        return responses[0]
    return responses if responses else result


def shell_outcome(response: object) -> tuple[object, object] | None:
    """``(result, error)`` of a ``run_shell_command`` response, or ``None`` for another
    (:func:`loopwatch.host_outcome.gemini_shell_text`)."""
    if not isinstance(response, Mapping) or not isinstance(response.get("output"), str):
        return None
    read = gemini_shell_text(response["output"])
    if read is None:
        return None
    shown, failed = read
    if failed:
        return UNDEFINED, shown
    return {**response, "output": shown}, UNDEFINED


def _error_text(call: Mapping[str, object], response: object) -> str:
    if isinstance(response, Mapping) and isinstance(response.get("error"), str):
        return str(response["error"])
    display = call.get("resultDisplay")
    if isinstance(display, str) and display:
        return display
    return str(response) if response is not None else "error"


def _gemini_tokens(message: Mapping[str, object]) -> int | None:
    tokens = message.get("tokens")
    if isinstance(tokens, Mapping):
        total = tokens.get("total")
        if isinstance(total, int) and not isinstance(total, bool) and total >= 0:
            return total
    return usage_tokens(message.get("usage"))


def read_gemini_session(
    messages: Sequence[object], path: str, lines: Sequence[int | None] = ()
) -> Read:
    """Read the ``messages`` of a Gemini CLI session as one run.

    Args:
        messages: the session's messages, in order.
        path: for error messages.
        lines: the source line of each message (JSONL sessions), when known.

    Raises:
        TranscriptError: a message or tool call that is not an object, or a call without a
            string ``name``.
    """
    book = CallBook(RunAssembler())
    for number, message in enumerate(messages, start=1):
        line = lines[number - 1] if number <= len(lines) else None
        if not isinstance(message, Mapping):
            raise TranscriptError(path, line, f"message {number}: expected a JSON object")
        calls = message.get("toolCalls")
        if not isinstance(calls, list) or not calls:
            continue
        batch = book.batch_for(len(calls))
        shares = split_tokens(_gemini_tokens(message), len(calls))
        for call, tokens in zip(calls, shares, strict=True):
            if not isinstance(call, Mapping) or not isinstance(call.get("name"), str):
                raise TranscriptError(
                    path, line, f'message {number}: a tool call needs a string "name"'
                )
            call_id = optional_id(call.get("id"), path, line, "id")
            draft = book.call(
                None,
                str(call["name"]),
                call.get("args", {}),
                call_id,
                tokens=tokens,
                line=line,
                batch=batch,
            )
            if draft is None:
                continue
            if call_id:
                book.pending.pop(call_id, None)  # the outcome is on the call itself
            status = call.get("status")
            if "result" not in call and status not in ("error", "cancelled"):
                continue
            response = response_of(call.get("result"))
            if status == "cancelled":
                book.not_run += 1
            elif status == "error":
                draft.error = _error_text(call, response)
            else:
                draft.result, draft.error = shell_outcome(response) or (response, UNDEFINED)
    return book.finish()


def _call_key(call: object) -> str | None:
    return call["id"] if isinstance(call, Mapping) and isinstance(call.get("id"), str) else None


def _merged(old: Mapping[str, object], new: Mapping[str, object]) -> dict[str, object]:
    """A message rewritten under its id: the new version, keeping calls it no longer lists.

    Each call takes its newest state (a finished call replaces its scheduled copy); a call
    only the old version lists stays where it was, so a rewrite can never lose a call.
    """
    merged = dict(new)
    old_calls, new_calls = old.get("toolCalls"), new.get("toolCalls")
    if not isinstance(old_calls, list) or not old_calls:
        return merged
    if not isinstance(new_calls, list) or not new_calls:
        merged["toolCalls"] = old_calls
        return merged
    newest = {key: call for call in new_calls if (key := _call_key(call)) is not None}
    calls: list[object] = []
    for call in old_calls:
        key = _call_key(call)
        if key is not None:  # an id-less old call is restated, if at all, by the new list
            calls.append(newest.pop(key, call))
    calls.extend(c for c in new_calls if (key := _call_key(c)) is None or key in newest)
    merged["toolCalls"] = calls
    return merged


def read_gemini_jsonl(records: Iterable[tuple[int, object]], path: str) -> Read:
    """Read a Gemini CLI JSONL session (an upsert log of messages) as one run.

    Raises:
        TranscriptError: a line that is not an object, or a malformed message or call.
    """
    messages: dict[str, tuple[int, dict[str, object]]] = {}
    rewinds = 0

    def upsert(line: int, message: object) -> None:
        if not isinstance(message, Mapping):
            raise TranscriptError(path, line, "a session message: expected a JSON object")
        raw_id = message.get("id")
        key = raw_id if isinstance(raw_id, str) else f"#line{line}:{len(messages)}"
        if key in messages:
            first_line, old = messages[key]
            messages[key] = (first_line, _merged(old, message))
        else:
            messages[key] = (line, dict(message))

    for line, value in records:
        if not isinstance(value, Mapping):
            raise TranscriptError(path, line, "a session line: expected a JSON object")
        if "$rewindTo" in value:
            rewinds += 1
        elif "$set" in value:
            patch = value.get("$set")
            replaced = patch.get("messages") if isinstance(patch, Mapping) else None
            for message in replaced if isinstance(replaced, list) else []:
                upsert(line, message)
        elif "type" in value or "toolCalls" in value:
            upsert(line, value)
        elif isinstance(value.get("messages"), list):  # a header carrying messages
            for message in value["messages"]:
                upsert(line, message)
        # else: the header (sessionId, projectHash, ...) or a metadata-only line
    ordered = list(messages.values())
    read = read_gemini_session([m for _l, m in ordered], path, [line for line, _m in ordered])
    if not rewinds:
        return read
    note = f"conversation rewound {rewinds} time(s): calls made before a rewind still replayed"
    return read.with_notes(note)


def is_gemini_jsonl_header(first: Mapping[str, object]) -> bool:
    """Whether a JSONL first line is the header of a Gemini CLI JSONL session."""
    return (
        "projectHash" in first
        and "sessionId" in first
        and "type" not in first
        and "parentUuid" not in first
    )


def _parts(content: Mapping[str, object]) -> list[Mapping[str, object]]:
    parts = content.get("parts")
    if not isinstance(parts, list):
        return []
    return [part for part in parts if isinstance(part, Mapping)]


#: Parts of a model turn that are calls of a built-in tool (code execution) rather than a
#: ``functionCall``: counted as calls not read (and any other ``*Call`` part with them).
_OTHER_CALL_PARTS: Final = frozenset({"executableCode"})


def read_gemini_contents(contents: Sequence[object], path: str) -> Read:
    """Read Gemini API ``contents`` (``functionCall`` / ``functionResponse`` parts).

    A part that calls a built-in tool (``executableCode``, another ``*Call`` key) is not
    replayed: it is counted as skipped, and the scan says so.

    Raises:
        TranscriptError: a content that is not an object, or a call without a name.
    """
    book = CallBook(RunAssembler())
    by_name: dict[str, list[CallDraft]] = {}
    for number, content in enumerate(contents, start=1):
        if not isinstance(content, Mapping):
            raise TranscriptError(path, None, f"content {number}: expected a JSON object")
        calls: list[Mapping[str, object]] = [
            call for p in _parts(content) if isinstance(call := p.get("functionCall"), Mapping)
        ]
        for part in _parts(content):
            for key in part:
                if key in _OTHER_CALL_PARTS or (key.endswith("Call") and key != "functionCall"):
                    book.skip(f"{key} part", call=True)
        batch = book.batch_for(len(calls))
        for call in calls:
            name = call.get("name")
            if not isinstance(name, str):
                raise TranscriptError(
                    path, None, f'content {number}: a functionCall needs a "name"'
                )
            call_id = optional_id(call.get("id"), path, None, "id")
            draft = book.call(None, name, call.get("args", {}), call_id, batch=batch)
            if draft is not None:
                by_name.setdefault(name, []).append(draft)
        for part in _parts(content):
            answer = part.get("functionResponse")
            if not isinstance(answer, Mapping):
                continue
            name = answer.get("name")
            draft_for: CallDraft | None = None
            answer_id = answer.get("id")
            if isinstance(answer_id, str) and answer_id in book.pending:
                draft_for = book.answer(answer_id)
            elif isinstance(name, str) and by_name.get(name):
                draft_for = by_name[name][0]
                if draft_for.call_id:
                    book.pending.pop(draft_for.call_id, None)
            else:
                book.unmatched += 1
            if draft_for is None:
                continue
            queue = by_name.get(draft_for.tool, [])
            if draft_for in queue:
                queue.remove(draft_for)
            response = answer.get("response")
            if isinstance(response, Mapping) and isinstance(response.get("error"), str):
                draft_for.error = response["error"]
                draft_for.result = UNDEFINED
            else:
                draft_for.result, draft_for.error = shell_outcome(response) or (
                    response,
                    UNDEFINED,
                )
    return book.finish()


def is_gemini_session(document: Mapping[str, object]) -> bool:
    """Whether a JSON object is a Gemini CLI session record."""
    messages = document.get("messages")
    if not isinstance(messages, list):
        return False
    if "projectHash" in document:
        return True
    return any(
        isinstance(m, Mapping) and ("toolCalls" in m or m.get("type") == "gemini") for m in messages
    )


def is_gemini_contents(items: Sequence[object]) -> bool:
    """Whether a list holds Gemini API contents (``role`` + ``parts``)."""
    return any(
        isinstance(item, Mapping) and isinstance(item.get("parts"), list) and "role" in item
        for item in items
    )


__all__ = [
    "is_gemini_contents",
    "is_gemini_jsonl_header",
    "is_gemini_session",
    "read_gemini_contents",
    "read_gemini_jsonl",
    "read_gemini_session",
    "response_of",
    "shell_outcome",
]
