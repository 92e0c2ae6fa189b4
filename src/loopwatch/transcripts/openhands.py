"""OpenHands event streams (All-Hands-AI/OpenHands ``openhands/events/serialization``).

An OpenHands run is a list of events. An *action* is ``{"id", "timestamp", "source":
"agent" | "user" | "environment", "action": "run" | "read" | "edit" | "think" | "finish" |
..., "args": {...}, "tool_call_metadata": {"function_name", "tool_call_id",
"model_response": {"id", ...}, "total_calls_in_response"}}``; an *observation* answers an
action: ``{"id", "observation": "run" | "read" | "error" | ..., "content", "extras",
"cause": <the action's id>}``. A file edit that failed is no ``error`` observation: the
editor answers with an ``edit`` (or ``read``) observation whose content opens with
``ERROR:`` and a newline (``No replacement was performed, old_str ... did not appear
verbatim``).

- The calls are the agent's actions that carry ``tool_call_metadata`` (the model's tool
  calls; ``system``, ``message`` and ``recall`` events do not). A stream without any
  metadata (CodeAct before function calling) counts the agent's tool actions instead.
- The call replayed is the action name (``run``, ``edit``, ...) with its ``args``, less
  the ``thought`` (the model's text before the call, not a tool parameter); the result is
  the observation's ``content``. An ``error`` observation is a failure, and so
  is a ``run`` observation whose command exited non-zero (``extras.metadata.exit_code``;
  ``extras.exit_code`` in older streams): OpenHands records no other error flag for a
  failed command, so without it a command failing the same way again and again would
  read as one succeeding. So is an ``edit`` or ``read`` observation that opens with the
  editor's ``ERROR:`` line (an edit retried with the same wrong ``old_str`` is the loop).
- A call of a tool the agent does not have leaves no action, only an ``error``
  observation ``Tool <name> is not registered. ...``: the call is rebuilt from it (no
  arguments), as a failure.
- A ``condensation`` action (the memory condenser dropped history) arms the
  post-compaction guard.
- Calls from one model response (same ``model_response.id``) form a batch.

**The V1 SDK** (OpenHands/software-agent-sdk ``openhands/sdk/event``, what OpenHands
writes since 1.0 and the ``benchmarks`` evaluations record) types every event by ``kind``
instead: ``{"kind": "ActionEvent", "id", "source": "agent", "tool_name", "tool_call_id",
"tool_call": {"name", "arguments"}, "action": {"kind": "TerminalAction", ...},
"llm_response_id"}`` is a call; ``{"kind": "ObservationEvent", "action_id", "tool_call_id",
"observation": {"kind", "content": [text parts] | "output": "...", "is_error",
"exit_code", "metadata": {"exit_code"}}}`` its result. Its ``action`` is an object, not an
action name, so without this reading a V1 stream holds no calls at all.

- The call replayed is ``tool_name`` with the ``action`` (without its ``kind``): the
  tool's own parameters. The model's ``tool_call.arguments`` (read when there is no
  ``action``) also hold the ``summary`` and ``security_risk`` the SDK asks for on every
  call: a free-text summary differs on each repeat of one command and would hide a loop.
- The result is the observation's text; ``is_error`` (``error`` before 1.0 of the SDK) or
  a non-zero exit code is a failure.
- An ``AgentErrorEvent`` (the scaffold refused the call: an unknown tool, arguments that
  do not validate) is the failure of the call its ``tool_call_id`` names; when no action
  was recorded for it, the call is rebuilt from its ``tool_name``, without arguments.
- A ``UserRejectObservation`` means the call never ran: it has no outcome.
- A ``Condensation`` event arms the post-compaction guard; calls with one
  ``llm_response_id`` form a batch.

**The memory form** (OpenHands 0.9, 2024: ``event_to_memory``, what the issue resolver's
``output.jsonl`` lines, ``{"issue", "instruction", "history": [...], "git_patch", ...}``,
hold): the same actions and observations with their ``args`` / ``extras`` spread at the top
level and no ``id``, ``source`` or ``cause``. An action's parameters are its fields less
the bookkeeping ones (``thought``, ``keep_prompt``, ``is_confirmed``, ``action_risk``, ...),
an observation's exit code is its ``exit_code``, and an observation without a ``cause``
answers the oldest unanswered call of its name (the stream alternates them); one that
answers none is counted as unmatched, never passed over.

Shapes read: a JSON array of events (what the UI's trajectory download and
``trajectory.json`` hold), ``{"history": [...]}`` documents, one event per file
(``sessions/<id>/events/<n>.json``; ``conversations/<id>/events/event-<n>-<uuid>.json`` in
V1), and evaluation ``output.jsonl`` files (one instance a
line, ``{"instance_id", "history": [...]}``: one run per instance).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Final

from loopwatch.core._undefined import UNDEFINED
from loopwatch.transcripts._common import (
    CallBook,
    CallDraft,
    Read,
    RunAssembler,
    content_text,
    decode_arguments,
)
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


#: The ``kind`` of every V1 SDK event a stream may hold (calls, outcomes, and the others).
SDK_KINDS: Final = frozenset(
    {
        "ActionEvent",
        "ObservationEvent",
        "AgentErrorEvent",
        "UserRejectObservation",
        "MessageEvent",
        "SystemPromptEvent",
        "SystemPromptUpdateEvent",
        "Condensation",
        "CondensationRequest",
        "CondensationSummaryEvent",
        "ConversationStateUpdateEvent",
        "ConversationErrorEvent",
        "PauseEvent",
        "TokenEvent",
        "LLMCompletionLogEvent",
        "HookExecutionEvent",
    }
)


def is_sdk_event(value: object) -> bool:
    """Whether a JSON value is one V1 SDK event (typed by ``kind``)."""
    if not isinstance(value, Mapping):
        return False
    kind = value.get("kind")  # any JSON value: a list or an object cannot be looked up
    return (
        isinstance(kind, str)
        and kind in SDK_KINDS
        and ("id" in value or "source" in value or "timestamp" in value)
    )


def is_event(value: object) -> bool:
    """Whether a JSON value is one OpenHands event (of the V0 stream or the V1 SDK)."""
    # A V0 action or observation is named by a string. Responses API items have an
    # ``action`` object and an ``id`` too (``web_search_call``, ``computer_call``,
    # ``local_shell_call``): read as events, their calls would vanish from the scan.
    return is_sdk_event(value) or (
        isinstance(value, Mapping)
        and (isinstance(value.get("action"), str) or isinstance(value.get("observation"), str))
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


#: How OpenHands' file editor (``_execute_file_editor`` in the runtime's action execution
#: server) opens the content of an ``edit`` or ``read`` observation it could not carry
#: out: an ``old_str`` not found, a path that does not exist, a bad ``view_range``.
EDITOR_ERROR: Final = "ERROR:\n"


def _failed(observation: Mapping[str, object]) -> bool:
    """Whether an observation reports a failure: an ``error`` one, a file edit or read the
    editor refused, or a non-zero exit."""
    kind = observation.get("observation")
    if kind == "error":
        return True
    content = observation.get("content")
    if kind in ("edit", "read") and isinstance(content, str) and content.startswith(EDITOR_ERROR):
        return True
    code = _exit_code(observation.get("extras"))
    if code is None and "extras" not in observation:  # the memory form: at the top level
        top = observation.get("exit_code")
        code = top if isinstance(top, int) and not isinstance(top, bool) else None
    return code is not None and code != 0


#: The error OpenHands V0 records, as an ``error`` observation that answers no action,
#: when the model calls a tool the agent does not have (``FunctionCallNotExistsError`` in
#: CodeAct's ``function_calling.py``): no action event is written for that call.
_NOT_REGISTERED: Final = re.compile(r"Tool (\S+) is not registered\.")


def _unknown_tool(
    book: CallBook, run_id: str | None, event: Mapping[str, object], line: int
) -> None:
    """Rebuild, as a failed call without arguments, the call of a tool that does not
    exist: a model retrying a missing tool is the loop the unknown-tool detector is for."""
    content = event.get("content")
    found = _NOT_REGISTERED.match(content) if isinstance(content, str) else None
    if found is None:
        return
    draft = book.call(run_id, found.group(1), {}, None, line=line)
    if draft is not None:
        book.synthesised += 1
        draft.error = content


#: Fields of an action in the memory form that are not the tool's parameters.
_MEMORY_BOOKKEEPING: Final = frozenset(
    {
        "action",
        "thought",
        "keep_prompt",
        "is_confirmed",
        "action_risk",
        "security_risk",
        "confirmation_state",
        "wait_for_response",
        "images_urls",
        "id",
        "timestamp",
        "source",
        "message",
        "cause",
        "tool_call_metadata",
        "llm_metrics",
        "timeout",
    }
)


def _action_arguments(event: Mapping[str, object]) -> object:
    """An action's parameters: its ``args``, or in the memory form its own fields."""
    if "args" in event or "id" in event or "source" in event:
        return _v0_arguments(event.get("args", {}))
    return {key: value for key, value in event.items() if key not in _MEMORY_BOOKKEEPING}


def _v0_arguments(args: object) -> object:
    """An action's ``args`` without its ``thought``: the text the model wrote before the
    call (OpenHands puts it on the first action of a response), not a parameter of the
    tool. It differs on each repeat of one edit, and would hide the loop."""
    if not isinstance(args, Mapping) or "thought" not in args:
        return args
    return {key: value for key, value in args.items() if key != "thought"}


def _batch_key(event: Mapping[str, object]) -> str | None:
    meta = event.get("tool_call_metadata")
    if not isinstance(meta, Mapping):
        return None
    response = meta.get("model_response")
    key = response.get("id") if isinstance(response, Mapping) else None
    return key if isinstance(key, str) else None


def _sdk_exit_code(observation: Mapping[str, object]) -> int | None:
    code = observation.get("exit_code")
    if not isinstance(code, int) or isinstance(code, bool):
        metadata = observation.get("metadata")
        code = metadata.get("exit_code") if isinstance(metadata, Mapping) else None
    return code if isinstance(code, int) and not isinstance(code, bool) else None


def _sdk_outcome(observation: object) -> tuple[object, bool]:
    """``(text, failed)`` of a V1 observation."""
    if not isinstance(observation, Mapping):
        return observation, False
    if "content" in observation:
        text: object = content_text(observation.get("content"))
    elif isinstance(observation.get("output"), str):
        text = observation["output"]
    else:
        text = {key: value for key, value in observation.items() if key != "kind"}
    code = _sdk_exit_code(observation)
    failed = (
        observation.get("is_error") is True
        or observation.get("error") is True
        or (code is not None and code != 0)
    )
    return text, failed


def _sdk_arguments(event: Mapping[str, object]) -> object:
    action = event.get("action")
    if isinstance(action, Mapping):
        return {key: value for key, value in action.items() if key != "kind"}
    tool_call = event.get("tool_call")
    if isinstance(tool_call, Mapping):
        return decode_arguments(tool_call.get("arguments"))
    return {}


def _settle(draft: CallDraft, text: object, failed: bool) -> None:
    """The call's outcome: its observation's text, as the error when the call failed."""
    if failed:
        draft.error = text
        draft.result = UNDEFINED
    else:
        draft.result = text


def _add_sdk_events(
    events: Sequence[object], path: str, book: CallBook, run_id: str | None, line: int | None
) -> None:
    """Record the calls of a V1 SDK event stream (see the module docstring)."""
    by_action: dict[str, CallDraft] = {}
    batches: dict[str, list[CallDraft]] = {}
    for number, event in enumerate(events, start=1):
        if not isinstance(event, Mapping):
            raise TranscriptError(path, line, f"event {number}: expected a JSON object")
        kind = event.get("kind")
        at = line if line else number
        tool_call_id = event.get("tool_call_id")
        call_key = str(tool_call_id) if tool_call_id is not None else None
        if kind == "Condensation":
            book.runs.add(run_id, Compaction(run_id=run_id, line=line))
        elif kind == "ActionEvent" and event.get("source") in (None, "agent"):
            tool = event.get("tool_name")
            draft = book.call(run_id, str(tool), _sdk_arguments(event), call_key, line=at)
            if draft is None:
                continue
            if "id" in event:
                by_action[str(event["id"])] = draft
            response = event.get("llm_response_id")
            if isinstance(response, str):
                batches.setdefault(response, []).append(draft)
        elif kind in ("ObservationEvent", "UserRejectObservation", "AgentErrorEvent"):
            action_id = event.get("action_id")
            draft_for = by_action.pop(str(action_id), None) if action_id is not None else None
            by_call = book.pending.pop(call_key, None) if call_key is not None else None
            draft_for = draft_for or by_call
            if kind == "UserRejectObservation":
                if draft_for is not None:
                    book.not_run += 1
                else:
                    book.unmatched += 1
                continue
            if kind == "AgentErrorEvent":
                if draft_for is None:
                    draft_for = book.call(run_id, str(event.get("tool_name")), {}, None, line=at)
                    book.synthesised += 1
                if draft_for is not None:
                    draft_for.error = event.get("error", "")
                    draft_for.result = UNDEFINED
                continue
            if draft_for is None:
                book.unmatched += 1
                continue
            text, failed = _sdk_outcome(event.get("observation"))
            _settle(draft_for, text, failed)
    book.mark_batches(batches)  # the calls of one model response


def add_events(
    events: Sequence[object], path: str, book: CallBook, run_id: str | None, line: int | None
) -> None:
    """Record the calls of one event stream (V0, or V1 SDK) in ``book``.

    Raises:
        TranscriptError: an event that is not an object.
    """
    if any(is_sdk_event(event) for event in events):
        _add_sdk_events(events, path, book, run_id, line)
        return
    with_metadata = any(
        isinstance(e, Mapping) and isinstance(e.get("tool_call_metadata"), Mapping) for e in events
    )
    by_event: dict[str, CallDraft] = {}
    uncaused: list[CallDraft] = []
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
            draft = book.call(run_id, action, _action_arguments(event), None, line=line or number)
            if draft is None:
                continue
            if "id" in event:
                by_event[str(event["id"])] = draft
            else:
                uncaused.append(draft)  # the memory form: its observation names no cause
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
            _settle(draft_for, event.get("content", ""), _failed(event))
        elif event.get("observation") == "error":
            _unknown_tool(book, run_id, event, line or number)
        elif isinstance(kind := event.get("observation"), str) and "id" not in event:
            answered = next((d for d in uncaused if d.tool == kind), None)
            if answered is not None:
                uncaused.remove(answered)
                _settle(answered, event.get("content", ""), _failed(event))
            elif kind in TOOL_ACTIONS:
                book.unmatched += 1  # a tool's output for no call read
    book.mark_batches(batches)  # the calls of one model response


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
    "SDK_KINDS",
    "TOOL_ACTIONS",
    "add_events",
    "is_event",
    "is_event_list",
    "is_sdk_event",
    "read_openhands_events",
    "read_openhands_instances",
]
