"""mini-swe-agent trajectories (SWE-agent/mini-swe-agent; ``<instance>.traj.json``).

One JSON document ``{"info": {"mini_version", ...}, "messages": [...], "trajectory_format":
"mini-swe-agent-1" | "mini-swe-agent-1.1"}``, saved after every step (or the ``messages``
list alone, as mini-swe-agent's own test data and replay files keep a run). The only tool is
``bash`` with ``{"command": ...}``; each command runs in a fresh subshell. What the messages
look like depends on the version and the model class, so each message is read by its shape:

- **v1.x, text actions** (``mini-swe-agent-1``): an assistant message is an action when it
  holds exactly one ```` ```bash ```` block (the agent rejects any other count as a format
  error and runs nothing); the next user message is its observation, rendered from the
  config's template (``<returncode>N</returncode><output>...`` by default).
- **v2.x, text actions** (``mini-swe-agent-1.1``, ``litellm_textbased_model``): the action the
  agent parsed is stored on the assistant message as ``extra.actions`` (the block may be
  ```` ```mswea_bash_command ```` or XML ``<mswea_bash_command>``, per the config), and the
  user observation carries ``extra.returncode``.
- **v2.x, tool calling** (``litellm_model``): OpenAI chat ``tool_calls`` (several calls in one
  message run one after the other, a batch) answered by ``tool`` messages, with
  ``extra.returncode`` on each.
- **v2.x, Responses API** (``litellm_response_model``): the assistant turn is a whole response
  object (``"object": "response"``) whose ``output`` holds ``function_call`` items, answered
  by ``function_call_output`` items (``call_id``, ``output``, ``extra.returncode``).

A non-zero return code is a failure (a timeout or an exception in the environment is
``-1``), and so is v1's "timed out and has been killed" message. An observation with
``exception_info: "action was not executed"`` (the agent stopped before it, or the user
declined it) is a call that never ran: it has no outcome. Commands a human typed in the
interactive agent (user messages with ``extra.actions``) are not the agent's calls and are
left out, with their observations.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
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
from loopwatch.transcripts.model import TranscriptError
from loopwatch.transcripts.openai_chat import message_tool_calls

#: The action blocks v1 and the v2 text-based default config parse.
_BASH_BLOCK: Final = re.compile(r"```(?:bash|mswea_bash_command)\s*\n(.*?)\n```", re.DOTALL)
#: The return code the default observation template opens with (v1 keeps no ``extra``).
_RETURN_CODE: Final = re.compile(r"\s*<returncode>\s*(-?\d+)\s*</returncode>")
#: v1's ``timeout_template``: the command was killed, its output so far follows.
_V1_TIMEOUT: Final = re.compile(r"\s*The last command <command>.*?</command> timed out", re.DOTALL)
#: ``exception_info`` of an action the agent never executed.
_NOT_EXECUTED: Final = "action was not executed"


def _return_code(message: Mapping[str, object], text: str) -> int | None:
    extra = message.get("extra")
    if isinstance(extra, Mapping) and "returncode" in extra:
        code = extra.get("returncode")
        return code if isinstance(code, int) and not isinstance(code, bool) else None
    match = _RETURN_CODE.match(text)
    return int(match.group(1)) if match else None


def _never_ran(message: Mapping[str, object]) -> bool:
    extra = message.get("extra")
    return isinstance(extra, Mapping) and extra.get("exception_info") == _NOT_EXECUTED


def _text_actions(message: Mapping[str, object]) -> list[str]:
    """The commands of a text-mode assistant message: those the agent parsed, if stored."""
    extra = message.get("extra")
    actions = extra.get("actions") if isinstance(extra, Mapping) else None
    if isinstance(actions, list) and actions:
        return [
            str(action["command"])
            for action in actions
            if isinstance(action, Mapping) and isinstance(action.get("command"), str)
        ]
    blocks = _BASH_BLOCK.findall(content_text(message.get("content")))
    return [blocks[0].strip()] if len(blocks) == 1 else []


class _Reader:
    """Walks the messages once; observations of text actions are answered in order."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.book = CallBook(RunAssembler(), dedupe=False)
        self.waiting: list[CallDraft] = []
        self.human_observations = 0

    def add(self, number: int, message: object) -> None:
        if not isinstance(message, Mapping):
            raise TranscriptError(self.path, None, f"message {number}: expected a JSON object")
        role = message.get("role")
        if message.get("object") == "response":
            self._response(message, number)
        elif role == "assistant":
            self._assistant(message, number)
        elif role == "tool":
            target = self.book.answer(message.get("tool_call_id"))
            if target is not None:
                self._settle(target, message, message.get("content"))
        elif message.get("type") == "function_call_output":
            target = self.book.answer(message.get("call_id"))
            if target is not None:
                self._settle(target, message, message.get("output"))
        elif role == "user":
            self._user(message)

    def _assistant(self, message: Mapping[str, object], number: int) -> None:
        self.waiting = []
        calls = message_tool_calls(message, self.path, None, number)
        if calls:
            batch = self.book.batch_for(len(calls))
            for name, args, call_id in calls:
                self.book.call(None, name, args, call_id, line=number, batch=batch)
            return
        for command in _text_actions(message):
            draft = self.book.call(None, "bash", {"command": command}, None, line=number)
            if draft is not None:
                self.waiting.append(draft)

    def _response(self, message: Mapping[str, object], number: int) -> None:
        self.waiting = []
        output = message.get("output")
        items = [
            item
            for item in (output if isinstance(output, list) else [])
            if isinstance(item, Mapping) and item.get("type") == "function_call"
        ]
        batch = self.book.batch_for(len(items))
        for item in items:
            name = item.get("name")
            call_id = item.get("call_id") or item.get("id")
            self.book.call(
                None,
                name if isinstance(name, str) else "",
                decode_arguments(item.get("arguments")),
                call_id if isinstance(call_id, str) else None,
                line=number,
                batch=batch,
            )

    def _user(self, message: Mapping[str, object]) -> None:
        extra = message.get("extra")
        extra = extra if isinstance(extra, Mapping) else {}
        actions = extra.get("actions")
        if isinstance(actions, list) and actions:  # a command the human typed
            self.waiting = []
            self.human_observations = len(actions)
            return
        if "interrupt_type" in extra:  # a format error or an interruption: no outcome
            return
        if self.human_observations:
            self.human_observations -= 1
            return
        if self.waiting:
            self._settle(self.waiting.pop(0), message, message.get("content"))

    def _settle(self, draft: CallDraft, message: Mapping[str, object], shown: object) -> None:
        if _never_ran(message):
            self.book.not_run += 1
            return
        text = content_text(shown)
        code = _return_code(message, text)
        failed = (code is not None and code != 0) or _V1_TIMEOUT.match(text) is not None
        if failed:
            self.book.settle(draft, UNDEFINED, shown, shown)
        else:
            self.book.settle(draft, shown, UNDEFINED, shown)


def read_mini_swe_agent(document: Mapping[str, object], path: str) -> Read:
    """Read a mini-swe-agent trajectory (any version, any model class) as one run.

    Raises:
        TranscriptError: ``messages`` is not a list of objects, or malformed ``tool_calls``.
    """
    messages = document.get("messages")
    if not isinstance(messages, list):
        raise TranscriptError(path, None, '"messages" must be a list')
    reader = _Reader(path)
    for number, message in enumerate(messages, start=1):
        reader.add(number, message)
    return reader.book.finish()


def is_mini_swe_agent(document: Mapping[str, object]) -> bool:
    """Whether a JSON object is a mini-swe-agent trajectory."""
    fmt = document.get("trajectory_format")
    if isinstance(fmt, str) and fmt.startswith("mini-swe-agent"):
        return True
    info = document.get("info")
    return (
        isinstance(document.get("messages"), list)
        and isinstance(info, Mapping)
        and "mini_version" in info
    )


#: How the default observation template opens (v1 and the v2 text-based config).
_OBSERVATION_OPENING: Final = "<returncode>"


def is_mini_swe_agent_messages(items: list[object]) -> bool:
    """Whether a JSON list is a mini-swe-agent run saved as its bare ``messages`` (what its
    own test data and replay files hold): chat messages without ``tool_calls`` whose
    assistant turns carry a bash block and whose user turns open with ``<returncode>``."""
    messages = [item for item in items if isinstance(item, Mapping)]
    if not messages or len(messages) != len(items):
        return False
    if any("tool_calls" in m or not isinstance(m.get("role"), str) for m in messages):
        return False
    return any(
        m.get("role") == "assistant"
        and isinstance(m.get("content"), str)
        and _BASH_BLOCK.search(str(m["content"])) is not None
        for m in messages
    ) and any(
        m.get("role") == "user"
        and isinstance(m.get("content"), str)
        and str(m["content"]).lstrip().startswith(_OBSERVATION_OPENING)
        for m in messages
    )


__all__ = ["is_mini_swe_agent", "is_mini_swe_agent_messages", "read_mini_swe_agent"]
