"""OpenClaw trajectory traces (``<sessionId>.trajectory.jsonl`` beside the session file, and
the ``events.jsonl`` of an exported trajectory bundle).

The shape is ``TrajectoryEvent`` in openclaw/openclaw ``src/trajectory/types.ts``: one
``{"traceSchema": "openclaw-trajectory", "schemaVersion": 1, "traceId", "source":
"runtime" | "transcript" | "export", "type", "ts", "seq", "sessionId", "runId", "data"}``
a line. The events replayed:

- ``tool.call``: ``data`` ``{"toolCallId", "name", "arguments"}`` (the export also emits one
  per ``toolCall`` block of an assistant message);
- ``tool.result``: ``data`` ``{"toolCallId", "name", "isError", "result" | "content"}``, or
  the exported form ``{"message": <a toolResult message>}``;
- ``session.compaction``: a persisted compaction (arms the post-compaction guard).

A bundle holds the runtime events *and* the transcript's, so the same call appears twice
with one ``toolCallId``: it is counted once. Runs follow the events' ``runId``. An orphan
``tool.result`` naming its tool rebuilds its call, as for session transcripts.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from loopwatch.core._undefined import UNDEFINED
from loopwatch.transcripts._common import CallBook, Read, RunAssembler, content_text
from loopwatch.transcripts.model import Compaction, TranscriptError

TRACE_SCHEMA = "openclaw-trajectory"


def _result_of(data: Mapping[str, object]) -> tuple[object, object, object, str | None, str | None]:
    """``(result, error, shown text, call id, tool)`` of a ``tool.result`` event's data."""
    message = data.get("message")
    source: Mapping[str, object] = message if isinstance(message, Mapping) else data
    call_id = source.get("toolCallId", data.get("toolCallId"))
    name = source.get("toolName", source.get("name", data.get("name")))
    if "content" in source:
        shown: object = source.get("content")
    else:
        shown = source.get("result", source.get("output"))
    key = call_id if isinstance(call_id, str) else None
    tool = name if isinstance(name, str) and name else None
    if source.get("isError") is True:
        return (
            UNDEFINED,
            content_text(shown) if not isinstance(shown, str) else shown,
            shown,
            key,
            tool,
        )
    result: dict[str, object] = {"content": shown}
    if "details" in source:
        result["details"] = source["details"]
    return result, UNDEFINED, shown, key, tool


def read_openclaw_trajectory(lines: Iterable[tuple[int, object]], path: str) -> Read:
    """Read an OpenClaw trajectory trace.

    Raises:
        TranscriptError: a line that is not an object, or a call without a name.
    """
    book = CallBook(RunAssembler())
    for line, value in lines:
        if not isinstance(value, Mapping):
            raise TranscriptError(path, line, "a trajectory event: expected a JSON object")
        kind = value.get("type")
        raw_run = value.get("runId")
        run_id = raw_run if isinstance(raw_run, str) else None
        data = value.get("data")
        data = data if isinstance(data, Mapping) else {}
        if kind == "session.compaction":
            book.runs.add(run_id, Compaction(run_id=run_id, line=line))
        elif kind in ("tool.call", "tool_call"):
            name = data.get("name", data.get("toolName"))
            if not isinstance(name, str):
                continue  # a wrapper event without the call's name carries nothing to replay
            call_id = data.get("toolCallId")
            args = data.get("arguments", data.get("input", data.get("params", {})))
            book.call(run_id, name, args, call_id if isinstance(call_id, str) else None, line=line)
        elif kind in ("tool.result", "tool_result"):
            result, error, shown, call_id, tool = _result_of(data)
            draft = book.pending.pop(call_id, None) if call_id else None
            if draft is None and call_id is not None and call_id in book.seen:
                continue
            if draft is None:
                if tool is None:
                    book.unmatched += 1
                    continue
                draft = book.call(run_id, tool, {}, call_id, line=line)
                book.synthesised += 1
                if draft is None:
                    continue
                book.pending.pop(call_id or "", None)
            book.settle(draft, result, error, shown)
    return book.finish()


def is_trajectory_event(first: Mapping[str, object]) -> bool:
    """Whether a first line is an OpenClaw trajectory event."""
    return first.get("traceSchema") == TRACE_SCHEMA


__all__ = ["TRACE_SCHEMA", "is_trajectory_event", "read_openclaw_trajectory"]
