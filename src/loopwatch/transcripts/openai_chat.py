"""OpenAI chat messages: a ``messages`` array (or JSONL, one message a line).

The shape is the Chat Completions one: an ``assistant`` message carries ``tool_calls``, each
``{"id", "type": "function", "function": {"name", "arguments"}}`` with ``arguments`` a JSON
*string*; the result is a later ``{"role": "tool", "tool_call_id", "content"}`` message. The
legacy ``function_call`` / ``{"role": "function", "name"}`` pair is read too, and so are
custom tool calls (``{"id", "type": "custom", "custom": {"name", "input"}}``, free-text
input replayed as ``{"input": ...}``).

- OpenAI-compatible servers that give calls no id (Gemini's endpoint and LM Studio send
  ``"id": ""``) answer them in order: a tool message without a ``tool_call_id`` answers
  the oldest id-less call still waiting.

- Arguments that are not valid JSON are replayed as the raw string (what the model sent).
- The result is the tool message's ``content`` as the model saw it (a string or a list of
  parts), per SPEC §11.1. Chat messages carry no error flag, so no call counts as failed.
- ``usage`` on an assistant message (``total_tokens``, or prompt + completion) is shared
  among the calls it issued.
- The whole conversation is one run: the chat format has no run ids.
- The calls of one assistant message form a batch (replayed every call first, then the
  outcomes). Call ids are *not* de-duplicated: local models often reuse ``call_0``.

**tau-bench result files** (sierra-research/tau-bench ``historical_trajectories/*.json``,
what ``run.py`` saves): a JSON list of tasks ``{"task_id", "reward", "info", "traj":
[messages], "trial"}`` whose ``traj`` is OpenAI chat as above. Each task is one run,
labelled ``task-<task_id>`` (``-trial<n>`` when trials are recorded). The environment
answers a failed step in words: a tool result that opens with ``Error: `` (the tool raised,
or refused the request) or ``Unknown action `` (no such tool) is a failure. Runs of the
``react`` and ``act`` strategies (``ChatReActAgent``) call no tools through the API: each
assistant message ends with ``Action:`` and a JSON ``{"name", "arguments"}``, and the next
user message is ``API output: `` followed by what the tool returned (the ``respond``
action, and text that is no JSON, are replies to the user).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Final

from loopwatch.core._undefined import UNDEFINED
from loopwatch.transcripts._common import (
    CallBook,
    CallDraft,
    Read,
    RunAssembler,
    decode_arguments,
    optional_id,
    split_tokens,
    usage_tokens,
)
from loopwatch.transcripts.model import TranscriptError

#: One message and where it came from: its 1-based line (JSONL) or ``None`` (a document).
SourcedMessage = tuple[int | None, object]


_arguments = decode_arguments


def _fail(path: str, line: int | None, number: int, reason: str) -> TranscriptError:
    return TranscriptError(path, line, f"message {number}: {reason}")


def _custom_call(
    raw: Mapping[str, object], path: str, line: int | None, number: int
) -> tuple[str, object, str | None]:
    """A custom tool call (``{"type": "custom", "custom": {"name", "input"}}``): free text.

    The arguments are ``{"input": ...}``, as for a Responses ``custom_tool_call``, so one
    call reads the same whichever API recorded it.
    """
    custom = raw.get("custom")
    name = custom.get("name") if isinstance(custom, Mapping) else None
    if not isinstance(custom, Mapping) or not isinstance(name, str):
        raise _fail(path, line, number, 'a custom tool call needs a string "custom.name"')
    return name, {"input": custom.get("input", "")}, optional_id(raw.get("id"), path, line, "id")


def message_tool_calls(
    message: Mapping[str, object], path: str, line: int | None, number: int
) -> list[tuple[str, object, str | None]]:
    """``(name, args, call_id)`` of every call an assistant message makes."""
    calls: list[tuple[str, object, str | None]] = []
    raw_calls = message.get("tool_calls")
    if raw_calls is not None:
        if not isinstance(raw_calls, list):
            raise _fail(path, line, number, '"tool_calls" must be a list')
        for raw in raw_calls:
            if isinstance(raw, Mapping) and raw.get("type") == "custom":
                calls.append(_custom_call(raw, path, line, number))
                continue
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


def add_openai_messages(
    messages: Sequence[SourcedMessage],
    path: str,
    book: CallBook,
    run_id: str | None,
    *,
    failed: Callable[[object], bool] | None = None,
    text_actions: bool = False,
) -> None:
    """Record the calls of OpenAI chat ``messages`` in ``book``, under ``run_id``.

    Args:
        messages: the messages in order, each with its source line.
        path: for error messages.
        book: where the calls go.
        run_id: the run they belong to.
        failed: whether a tool message's ``content`` reports a failure, for hosts that say
            so in the text (chat messages have no error flag); ``None``: never.
        text_actions: also read tau-bench ReAct actions, written in the assistant text
            (``Action:`` then ``{"name", "arguments"}``) and answered by the next user
            message (``API output: ...``).

    Raises:
        TranscriptError: a message that is not an object, or malformed ``tool_calls``.
    """
    legacy_pending: list[CallDraft] = []
    acted: CallDraft | None = None  # the ReAct action the next user message answers
    for number, (line, value) in enumerate(messages, start=1):
        if not isinstance(value, Mapping):
            raise _fail(path, line, number, "expected a JSON object")
        role = value.get("role")
        if text_actions and role == "user" and acted is not None:
            content = value.get("content")
            if isinstance(content, str) and content.startswith(REACT_OUTPUT):
                shown = content[len(REACT_OUTPUT) :]
                if failed is not None and failed(shown):
                    book.settle(acted, UNDEFINED, shown, shown)
                else:
                    book.settle(acted, shown, UNDEFINED, shown)
            acted = None
        if role == "assistant":
            calls = message_tool_calls(value, path, line, number)
            if text_actions and not calls:
                action = react_action(value.get("content"))
                if action is not None:
                    shares = split_tokens(usage_tokens(value.get("usage")), 1)
                    acted = book.call(
                        run_id, action[0], action[1], None, tokens=shares[0], line=line
                    )
                    continue
            shares = split_tokens(usage_tokens(value.get("usage")), len(calls))
            batch = book.batch_for(len(calls))
            for (name, args, call_id), tokens in zip(calls, shares, strict=True):
                draft = book.call(
                    run_id, name, args, call_id, tokens=tokens, line=line, batch=batch
                )
                if draft is not None and not call_id:
                    legacy_pending.append(draft)
        elif role == "tool":
            answers = value.get("tool_call_id")
            if not answers and legacy_pending:
                # Servers that give calls no id (some OpenAI-compatible ones send "" or
                # none) answer them in order: the oldest call without an id.
                target: CallDraft | None = legacy_pending.pop(0)
            else:
                target = book.answer(answers)
            if target is not None:
                content = value.get("content")
                if failed is not None and failed(content):
                    book.settle(target, UNDEFINED, content, content)
                else:
                    book.settle(target, content, target.error, content)
        elif role == "function":
            if legacy_pending:
                legacy_pending.pop(0).result = value.get("content")
            else:
                book.unmatched += 1


#: How tau-bench's ReAct agent (``tau_bench/agents/chat_react_agent.py``) prefixes what a
#: tool returned, in the user message after the action; an answer to the user has none.
REACT_OUTPUT: Final = "API output: "
#: The action that answers the user (``RESPOND_ACTION_NAME``): a reply, not a tool call.
_RESPOND: Final = "respond"


def react_action(content: object) -> tuple[str, object] | None:
    """``(name, arguments)`` of the action a tau-bench ReAct message ends with, or ``None``.

    The agent parses the text after the last ``Action:`` as JSON; text that does not parse
    is sent to the user as a reply, and so is the ``respond`` action: neither is a call.
    """
    if not isinstance(content, str) or "Action:" not in content:
        return None
    try:
        action = json.loads(content.split("Action:")[-1].strip())
    except (ValueError, RecursionError):
        return None
    if not isinstance(action, Mapping) or not isinstance(action.get("name"), str):
        return None
    name = str(action["name"])
    if name == _RESPOND:
        return None
    return name, action.get("arguments", {})


def read_openai_messages(messages: Sequence[SourcedMessage], path: str) -> Read:
    """Turn OpenAI chat messages into one run of calls.

    Args:
        messages: the messages in order, each with its source line.
        path: for error messages.

    Returns:
        The run.

    Raises:
        TranscriptError: a message that is not an object, or malformed ``tool_calls``.
    """
    book = CallBook(RunAssembler(), dedupe=False)
    add_openai_messages(messages, path, book, None)
    return book.finish()


def _task_label(task: Mapping[str, object], index: int) -> str:
    task_id = task.get("task_id", index)
    label = f"task-{task_id}"
    trial = task.get("trial")
    if isinstance(trial, int) and not isinstance(trial, bool):
        label += f"-trial{trial}"
    return label


#: How tau-bench's environment words a failed step (``tau_bench/envs/base.py``,
#: ``Env.step``): a tool that raised, or a tool the environment does not have. Its tools
#: also return ``"Error: ..."`` themselves for a request they refuse.
_TAUBENCH_FAILURES: Final = ("Error: ", "Unknown action ")


def _taubench_failed(content: object) -> bool:
    return isinstance(content, str) and content.startswith(_TAUBENCH_FAILURES)


def read_taubench(tasks: Sequence[tuple[int | None, object]], path: str) -> Read:
    """Turn tau-bench results (tasks with OpenAI messages under ``traj``) into runs.

    Raises:
        TranscriptError: a task that is not an object, or malformed messages.
    """
    book = CallBook(RunAssembler(), dedupe=False)
    for index, (line, value) in enumerate(tasks):
        if not isinstance(value, Mapping):
            raise TranscriptError(path, line, f"task {index + 1}: expected a JSON object")
        traj = value.get("traj")
        if not isinstance(traj, list):
            raise TranscriptError(path, line, f'task {index + 1}: "traj" must be a list')
        label = _task_label(value, index)
        if book.runs.has(label):
            label += f"#{index + 1}"
        book.runs.open(label)
        add_openai_messages(
            [(line, message) for message in traj],
            path,
            book,
            label,
            failed=_taubench_failed,
            text_actions=True,
        )
    return book.finish(keep_empty=True)


__all__ = [
    "REACT_OUTPUT",
    "SourcedMessage",
    "add_openai_messages",
    "message_tool_calls",
    "react_action",
    "read_openai_messages",
    "read_taubench",
]
