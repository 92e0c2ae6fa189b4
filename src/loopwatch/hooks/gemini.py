"""Gemini CLI hooks (``loopwatch hook gemini``).

Contract (google-gemini/gemini-cli ``packages/core/src/hooks/types.ts``, ``hookRunner.ts``
and ``docs/hooks/reference.md``): stdin carries ``session_id``, ``hook_event_name``,
``timestamp``; ``BeforeTool`` adds ``tool_name`` and ``tool_input``; ``AfterTool`` adds
``tool_response`` (``{llmContent, returnDisplay, error?}``; the shell tool's
``llmContent`` is ``Output: ...``, ``Exit Code: N`` when not 0, ``Process Group PGID: N``:
the process ids are left out of the outcome, and a failed command, which Gemini CLI reports
as a success, is recorded as the error it is, as ``loopwatch scan`` reads it). There is
no turn id: the session is the run.

``PreCompress`` is advisory (it cannot block), and it is no word that a compression runs:
``ChatCompressionService.compress`` (``packages/core/src/context/chatCompressionService.ts``)
fires it on every attempt, which ``GeminiClient.processTurn`` makes before every model
request, and only then compares the prompt's tokens with the threshold (most attempts
compress nothing). A compression that ran restarts the chat with the summarised history
(``GeminiClient.tryCompressChat`` → ``startChat(newHistory, resumedData)``), and the
restarted chat's recorder appends ``{"$set":{"sessionId":...}}`` to the session's JSONL
transcript (``ChatRecordingService.initialize``, ``packages/core/src/services/
chatRecordingService.ts``), nothing else does between the hook and the next model request.
So ``PreCompress`` notes the transcript's size, and the session's next event arms the guard
when that record was appended since (``maybe_compaction`` in :mod:`loopwatch.hooks._core`).
Without a readable ``.jsonl`` transcript (recording off, a legacy ``.json`` one) it arms a
guard that is not armed already, so the attempts before every request never restart a
window under way.

Answers: ``{"decision": "deny", "reason": ...}`` blocks (the reason reaches the model as
the tool's error); ``hookSpecificOutput.additionalContext`` of ``AfterTool`` is appended
to the result; ``continue: false`` ends the agent loop. Any exit code but 0 and 1 blocks
the call, so loopwatch always exits 0, with ``{}`` when it has nothing to say.
"""

from __future__ import annotations

import json
import os
import stat
from typing import Any, Final

from loopwatch.core._undefined import UNDEFINED
from loopwatch.hooks._core import CompactionCheck, HookEvent, HookResult, Outcome, text
from loopwatch.host_outcome import gemini_shell_text

AGENT: Final = "gemini"
REMEMBER_RUN: Final = False
FAIL_OPEN: Final = HookResult("{}", 0)

_KINDS: Final = {"BeforeTool": "before", "AfterTool": "after", "PreCompress": "maybe_compaction"}
#: The record a restarted chat's recorder appends first: the mark of a compression.
RESTART_RECORD: Final = b'{"$set":{"sessionId":'
#: Read at most this much of what the transcript gained since ``PreCompress`` (the restart
#: record comes first; a model answer recorded after it can be long).
MAX_SCAN_BYTES: Final = 1 << 20


SHELL_TOOL: Final = "run_shell_command"


def _outcome(tool: str | None, response: object) -> tuple[object, object]:
    """``(result, error)`` of a ``tool_response``: what the model reads, or its error."""
    if not isinstance(response, dict):
        return response, UNDEFINED
    error = response.get("error")
    if error:
        message = error.get("message") if isinstance(error, dict) else None
        return UNDEFINED, message or error
    if "llmContent" in response:
        content = response["llmContent"]
        if tool == SHELL_TOOL and isinstance(content, str):
            read = gemini_shell_text(content)
            if read is not None:  # without its process ids; a failed command is an error
                shown, failed = read
                return (UNDEFINED, shown) if failed else (shown, UNDEFINED)
        return content, UNDEFINED
    return response, UNDEFINED


def transcript_mark(event: HookEvent) -> str | None:
    """``"<size> <path>"`` of the event's JSONL transcript, else ``None``."""
    path = event.transcript
    if not path or not os.path.isabs(path) or not path.endswith(".jsonl"):
        return None
    size = _regular_file_size(path)
    return None if size is None else f"{size} {path}"


def _regular_file_size(path: str) -> int | None:
    try:
        info = os.stat(path)
    except (OSError, ValueError):
        return None
    return info.st_size if stat.S_ISREG(info.st_mode) else None


def _restarted(line: bytes) -> bool:
    if not line.startswith(RESTART_RECORD):
        return False
    try:
        record = json.loads(line)
    except ValueError:
        return False
    update = record.get("$set") if isinstance(record, dict) else None
    return isinstance(update, dict) and list(update) == ["sessionId"]


def compressed_since(mark: str) -> bool | None:
    """Whether the transcript gained a restart record since ``mark`` (``None``: it cannot
    tell: unreadable, or rewritten shorter)."""
    size_text, _, path = mark.partition(" ")
    try:
        offset = int(size_text)
        # Non-blocking: a FIFO in the transcript's place must not hang the hook.
        descriptor = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
        with open(descriptor, "rb") as file:
            info = os.fstat(descriptor)
            if not stat.S_ISREG(info.st_mode) or info.st_size < offset:
                return None
            file.seek(offset)
            gained = file.read(min(info.st_size - offset, MAX_SCAN_BYTES))
    except (OSError, ValueError):
        return None
    return any(_restarted(line.strip()) for line in gained.split(b"\n"))


COMPACTION_CHECK: Final[CompactionCheck | None] = CompactionCheck(transcript_mark, compressed_since)


def parse(payload: dict[str, Any]) -> HookEvent:
    """The event in a Gemini CLI hook payload (``ignore`` for events loopwatch skips)."""
    name = text(payload, "hook_event_name") or ""
    result: object = UNDEFINED
    error: object = UNDEFINED
    tool = text(payload, "tool_name")
    if name == "AfterTool":
        result, error = _outcome(tool, payload.get("tool_response"))
    return HookEvent(
        kind=_KINDS.get(name, "ignore"),  # type: ignore[arg-type]
        name=name,
        session=text(payload, "session_id"),
        tool=tool,
        params=payload.get("tool_input"),
        call_id=text(payload, "tool_use_id", "tool_call_id"),
        result=result,
        error=error,
        transcript=text(payload, "transcript_path"),
    )


def render(event: HookEvent, outcome: Outcome) -> HookResult:
    """The answer Gemini CLI reads."""
    if event.kind == "before" and outcome.block:
        return HookResult(json.dumps({"decision": "deny", "reason": outcome.block}), 0)
    if event.kind != "after" or not (outcome.warning or outcome.end_run):
        return FAIL_OPEN
    context = "\n\n".join(m for m in (outcome.warning, outcome.end_run) if m)
    answer: dict[str, Any] = {
        "hookSpecificOutput": {"hookEventName": "AfterTool", "additionalContext": context}
    }
    if outcome.end_run:
        answer["continue"] = False
        answer["stopReason"] = outcome.end_run
    return HookResult(json.dumps(answer), 0)
