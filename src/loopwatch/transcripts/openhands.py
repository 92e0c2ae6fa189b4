"""OpenHands event streams (All-Hands-AI/OpenHands ``openhands/events/serialization``).

An OpenHands run is a list of events. An *action* is ``{"id", "timestamp", "source":
"agent" | "user" | "environment", "action": "run" | "read" | "edit" | "think" | "finish" |
..., "args": {...}, "tool_call_metadata": {"function_name", "tool_call_id",
"model_response": {"id", ...}, "total_calls_in_response"}}``; an *observation* answers an
action: ``{"id", "observation": "run" | "read" | "error" | ..., "content", "extras",
"cause": <the action's id>}``.

- The calls are the agent's actions that carry ``tool_call_metadata`` (the model's tool
  calls; ``system``, ``message`` and ``recall`` events do not). A stream without any
  metadata (CodeAct before function calling) counts the agent's tool actions instead.
- The call replayed is the action name (``run``, ``edit``, ...) with its ``args``; the
  result is the observation's ``content``. An ``error`` observation is a failure, and so
  is a ``run`` observation whose command exited non-zero (``extras.metadata.exit_code``;
  ``extras.exit_code`` in older streams): OpenHands records no other error flag for a
  failed command, so without it a command failing the same way again and again would
  read as one succeeding.
- A ``condensation`` action (the memory condenser dropped history) arms the
  post-compaction guard.
- Calls from one model response (same ``model_response.id``) form a batch.

Shapes read: a JSON array of events (what the UI's trajectory download and
``trajectory.json`` hold), ``{"history": [...]}`` documents, one event per file
(``sessions/<id>/events/<n>.json``), and evaluation ``output.jsonl`` files (one instance a
line, ``{"instance_id", "history": [...]}``: one run per instance).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Final

from loopwatch.core._undefined import UNDEFINED
from loopwatch.transcripts._common import CallBook, CallDraft, Read, RunAssembler
from loopwatch.transcripts.model import Compaction, TranscriptError

#: Agent actions that are tool calls in a stream without tool-call metadata.
TOOL_ACTIONS: Final = frozenset(
    {
        "run",
        "run_ipython",
        "read",
        "write",
        "edit",
        "browse",
        "browse_interactive",
        "delegate",
        "call_tool_mcp",
        "think",
        "finish",
        "task_tracking",
    }
)


def is_event(value: object) -> bool:
    """Whether a JSON value is one OpenHands event."""
    return (
        isinstance(value, Mapping)
        and ("action" in value or "observation" in value)
        and ("id" in value or "source" in value or "timestamp" in value)
    )


def is_event_list(values: Sequence[object]) -> bool:
    """Whether a list is an OpenHands event stream (most items are events)."""
    events = sum(1 for value in values if is_event(value))
    return events > 0 and events * 2 >= len(values)


def _exit_code(extras: object) -> int | None:
    """The exit code a ``run`` observation's ``extras`` record, or ``None``."""
    if not isinstance(extras, Mapping):
        return None
    metadata = extras.get("metadata")
    code = metadata.get("exit_code") if isinstance(metadata, Mapping) else None
    if code is None:
        code = extras.get("exit_code")
    return code if isinstance(code, int) and not isinstance(code, bool) else None


def _failed(observation: Mapping[str, object]) -> bool:
    """Whether an observation reports a failure: an ``error`` one, or a non-zero exit."""
    if observation.get("observation") == "error":
        return True
    code = _exit_code(observation.get("extras"))
    return code is not None and code != 0


def _batch_key(event: Mapping[str, object]) -> str | None:
    meta = event.get("tool_call_metadata")
    if not isinstance(meta, Mapping):
        return None
    response = meta.get("model_response")
    key = response.get("id") if isinstance(response, Mapping) else None
    return key if isinstance(key, str) else None


def add_events(
    events: Sequence[object], path: str, book: CallBook, run_id: str | None, line: int | None
) -> None:
    """Record the calls of one event stream in ``book``.

    Raises:
        TranscriptError: an event that is not an object.
    """
    with_metadata = any(
        isinstance(e, Mapping) and isinstance(e.get("tool_call_metadata"), Mapping) for e in events
    )
    by_event: dict[str, CallDraft] = {}
    actions: set[str] = set()
    batches: dict[str, list[CallDraft]] = {}
    for number, event in enumerate(events, start=1):
        if not isinstance(event, Mapping):
            raise TranscriptError(path, line, f"event {number}: expected a JSON object")
        action = event.get("action")
        if isinstance(action, str):
            if "id" in event:
                actions.add(str(event["id"]))
            if action == "condensation":
                book.runs.add(run_id, Compaction(run_id=run_id, line=line))
                continue
            if event.get("source") not in (None, "agent"):
                continue
            is_call = (
                isinstance(event.get("tool_call_metadata"), Mapping)
                if with_metadata
                else action in TOOL_ACTIONS
            )
            if not is_call:
                continue
            args = event.get("args", {})
            draft = book.call(run_id, action, args, None, line=line if line else number)
            if draft is None:
                continue
            if "id" in event:
                by_event[str(event["id"])] = draft
            key = _batch_key(event)
            if key is not None:
                batches.setdefault(key, []).append(draft)
        elif "observation" in event and "cause" in event:
            cause = event.get("cause")
            draft_for = by_event.pop(str(cause), None)
            if draft_for is None:
                if cause is not None and str(cause) not in actions:
                    book.unmatched += 1  # answers no action of this stream
                continue
            content = event.get("content", "")
            if _failed(event):
                draft_for.error = content
                draft_for.result = UNDEFINED
            else:
                draft_for.result = content
    for drafts in batches.values():
        if len(drafts) > 1:
            batch = book.batch_for(len(drafts))
            for draft in drafts:
                draft.batch = batch


def read_openhands_events(events: Sequence[object], path: str) -> Read:
    """Read one event stream (or one event) as one run."""
    book = CallBook(RunAssembler(), dedupe=False)
    add_events(events, path, book, None, None)
    return book.finish()


def read_openhands_instances(lines: Iterable[tuple[int, object]], path: str) -> Read:
    """Read an evaluation ``output.jsonl``: one run per instance line.

    Raises:
        TranscriptError: a line without a ``history`` list.
    """
    book = CallBook(RunAssembler(), dedupe=False)
    for line, value in lines:
        if not isinstance(value, Mapping) or not isinstance(value.get("history"), list):
            raise TranscriptError(path, line, 'expected an object with a "history" list')
        instance = value.get("instance_id")
        label = str(instance) if instance is not None else f"line-{line}"
        if book.runs.has(label):
            label = f"{label}#{line}"
        book.runs.open(label)
        add_events(value["history"], path, book, label, line)
    return book.finish()


__all__ = [
    "TOOL_ACTIONS",
    "add_events",
    "is_event",
    "is_event_list",
    "read_openhands_events",
    "read_openhands_instances",
]
