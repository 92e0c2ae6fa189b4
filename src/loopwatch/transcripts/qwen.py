"""Qwen Code chat recordings (QwenLM/qwen-code, a Gemini CLI fork).

Qwen Code records each session as an append-only JSONL file,
``~/.qwen/projects/<project>/chats/<sessionId>.jsonl`` (``~/.qwen/tmp/<project>/chats/``
in older releases); the schema is ``ChatRecord`` in ``packages/core/src/services/
chatRecordingService.ts``. Every line is a record ``{"uuid", "parentUuid", "sessionId",
"timestamp", "type": "user" | "assistant" | "tool_result" | "system", "subtype", "cwd",
"version", "gitBranch", "message", ...}`` where ``message`` is a Gemini API ``Content``
(``{"role", "parts"}``). Its ``uuid`` / ``parentUuid`` / ``sessionId`` are Claude Code's
field names, so the file was once read as a Claude Code session without calls; the
``message.parts`` (Claude Code has ``message.content``), the ``tool_result`` type and the
``systemPayload`` / ``toolCallResult`` fields tell it apart.

- An ``assistant`` record is one model response: its ``functionCall`` parts (``{"id",
  "name", "args"}``) are the calls, one batch, sharing ``usageMetadata.totalTokenCount``.
- A ``tool_result`` record answers calls: ``functionResponse`` parts (``{"id", "name",
  "response"}``, matched by id, else by the record's ``toolCallResult.callId``, else in
  order by name) and ``toolCallResult`` (``{"callId", "status", "error", "resultDisplay",
  ...}``). ``status: "error"`` (or a ``response.error``) is a failure, with the response's
  ``error`` text; ``status: "cancelled"`` means the call never ran: no outcome. A
  ``run_shell_command`` text that reports an error, a non-zero exit code or a signal is a
  failure, and its process-id lines are dropped, as for Gemini CLI
  (:func:`loopwatch.transcripts.gemini.shell_outcome`).
- ``system`` records: ``chat_compression`` arms the post-compaction guard; a ``rewind``
  re-roots the ``parentUuid`` chain, but the calls made before it ran, so they are still
  replayed (a note says how many rewinds there were). Other records hold no calls.

The session's records are one run (``run_id`` its ``sessionId``); records a background
sub-agent wrote (``agentId``) are replayed as their own run, so its calls never count toward
the main agent's loop.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Final

from loopwatch.core._undefined import UNDEFINED
from loopwatch.transcripts._common import (
    CallBook,
    CallDraft,
    Read,
    RunAssembler,
    optional_id,
    split_tokens,
)
from loopwatch.transcripts.gemini import shell_outcome
from loopwatch.transcripts.model import Compaction, TranscriptError

_TYPES: Final = frozenset({"user", "assistant", "tool_result", "system"})


def is_qwen_record(value: object) -> bool:
    """Whether a JSONL value is a Qwen Code chat record (not a Claude Code one)."""
    if not isinstance(value, Mapping) or "sessionId" not in value or "uuid" not in value:
        return False
    if value.get("type") == "tool_result" or "systemPayload" in value:
        return True
    if "toolCallResult" in value or "usageMetadata" in value:
        return True
    message = value.get("message")
    return isinstance(message, Mapping) and isinstance(message.get("parts"), list)


def _parts(record: Mapping[str, object]) -> list[Mapping[str, object]]:
    message = record.get("message")
    parts = message.get("parts") if isinstance(message, Mapping) else None
    return [p for p in parts if isinstance(p, Mapping)] if isinstance(parts, list) else []


def _tokens(record: Mapping[str, object]) -> int | None:
    usage = record.get("usageMetadata")
    total = usage.get("totalTokenCount") if isinstance(usage, Mapping) else None
    if isinstance(total, int) and not isinstance(total, bool) and total >= 0:
        return total
    return None


class _QwenReader:
    def __init__(self, path: str) -> None:
        self.path = path
        self.book = CallBook(RunAssembler())
        self.by_name: dict[tuple[str | None, str], list[CallDraft]] = {}
        self.rewinds = 0

    def record(self, line: int, value: object) -> None:
        if not isinstance(value, Mapping):
            raise TranscriptError(self.path, line, "a chat record: expected a JSON object")
        kind = value.get("type")
        agent, session = value.get("agentId"), value.get("sessionId")
        run_id = agent if isinstance(agent, str) and agent else None
        if run_id is None and isinstance(session, str) and session:
            run_id = session
        if kind == "assistant":
            self._calls(line, run_id, value)
        elif kind == "tool_result":
            self._results(line, run_id, value)
        elif kind == "system":
            subtype = value.get("subtype")
            if subtype == "chat_compression":
                self.book.runs.add(run_id, Compaction(run_id=run_id, line=line))
            elif subtype == "rewind":
                self.rewinds += 1
        elif not isinstance(kind, str) or kind not in _TYPES:
            self.book.skip(f"{str(kind)[:40]} record", call=False)

    def _calls(self, line: int, run_id: str | None, record: Mapping[str, object]) -> None:
        calls = [c for p in _parts(record) if isinstance(c := p.get("functionCall"), Mapping)]
        batch = self.book.batch_for(len(calls))
        for call, tokens in zip(calls, split_tokens(_tokens(record), len(calls)), strict=True):
            name = call.get("name")
            if not isinstance(name, str):
                raise TranscriptError(self.path, line, 'a functionCall needs a string "name"')
            call_id = optional_id(call.get("id"), self.path, line, "id")
            draft = self.book.call(
                run_id, name, call.get("args", {}), call_id, tokens=tokens, line=line, batch=batch
            )
            if draft is not None:
                self.by_name.setdefault((run_id, name), []).append(draft)

    def _find(self, run_id: str | None, answer: Mapping[str, object], fallback: object) -> object:
        for key in (answer.get("id"), fallback):
            if isinstance(key, str) and key:
                if key in self.book.pending:
                    draft = self.book.pending.pop(key)
                    self._forget(draft)
                    return draft
                if key in self.book.seen:
                    return None  # a copy's result, or an answer given twice
        name = answer.get("name")
        queue = self.by_name.get((run_id, name), []) if isinstance(name, str) else []
        if queue:
            draft = queue[0]
            self._forget(draft)
            if draft.call_id:
                self.book.pending.pop(draft.call_id, None)
            return draft
        self.book.unmatched += 1
        return None

    def _forget(self, draft: CallDraft) -> None:
        queue = self.by_name.get((draft.run_id, draft.tool), [])
        if draft in queue:
            queue.remove(draft)

    def _results(self, line: int, run_id: str | None, record: Mapping[str, object]) -> None:
        info = record.get("toolCallResult")
        info = info if isinstance(info, Mapping) else {}
        answers = [a for p in _parts(record) if isinstance(a := p.get("functionResponse"), Mapping)]
        if not answers and info:
            self.book.unmatched += 1  # an outcome whose response parts are gone
        for answer in answers:
            draft = self._find(run_id, answer, info.get("callId") if len(answers) == 1 else None)
            if not isinstance(draft, CallDraft):
                continue
            response = answer.get("response")
            status = info.get("status")
            if status == "cancelled":
                self.book.not_run += 1
                continue
            error = response.get("error") if isinstance(response, Mapping) else None
            if status == "error" or isinstance(error, str):
                display = info.get("resultDisplay")
                draft.error = (
                    error
                    if isinstance(error, str) and error
                    else display
                    if isinstance(display, str) and display
                    else "error"
                )
                draft.result = UNDEFINED
            else:
                draft.result, draft.error = shell_outcome(response) or (response, UNDEFINED)

    def finish(self) -> Read:
        read = self.book.finish()
        if not self.rewinds:
            return read
        return read.with_notes(
            f"conversation rewound {self.rewinds} time(s): calls made before a rewind still "
            "replayed"
        )


def read_qwen(records: Iterable[tuple[int, object]], path: str) -> Read:
    """Read a Qwen Code chat recording (JSONL records) as runs (the session, and one per
    background sub-agent).

    Raises:
        TranscriptError: a line that is not an object, or a call without a name.
    """
    reader = _QwenReader(path)
    for line, value in records:
        reader.record(line, value)
    return reader.finish()


__all__ = ["is_qwen_record", "read_qwen"]
