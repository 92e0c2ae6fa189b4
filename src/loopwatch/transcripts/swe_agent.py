"""SWE-agent ``.traj`` files and mini-swe-agent trajectories.

**SWE-agent** (SWE-agent/SWE-agent ``sweagent/types.py``, ``TrajectoryStep``; files
``<instance>.traj``): one pretty-printed JSON document ``{"environment", "trajectory":
[...], "history": [...], "info": {...}, "replay_config"}``. Each ``trajectory`` step is one
action the agent ran: ``{"action", "observation", "response", "thought", "state",
"execution_time"}``. ``action`` is the command line (``open chall.py``, ``edit 1:5 ...``,
``submit``): the call replayed is the tool named by its first word with ``{"command":
action}`` as arguments, and ``observation`` is its result. SWE-agent records no error flag.

**mini-swe-agent** (SWE-agent/mini-swe-agent; ``<instance>.traj.json``):
``{"info": {"mini_version", ...}, "messages": [...], "trajectory_format":
"mini-swe-agent-1" | "mini-swe-agent-1.1"}``.

- Format ``mini-swe-agent-1`` (v1.x, text actions): an assistant message is an action when
  it holds exactly one ```` ```bash ```` block (the agent rejects any other count as a
  format error and runs nothing); the next user message (``<returncode>...</returncode>
  <output>...``) is its result. The tool is ``bash`` with ``{"command": ...}``.
- Format ``mini-swe-agent-1.1`` (v2.x, tool calling): OpenAI chat messages with
  ``tool_calls`` and ``tool`` results, read as OpenAI chat.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Final

from loopwatch.transcripts._common import CallBook, CallDraft, Read, RunAssembler
from loopwatch.transcripts.model import TranscriptError
from loopwatch.transcripts.openai_chat import add_openai_messages

_BASH_BLOCK: Final = re.compile(r"```(?:bash|mswea_bash_command)\s*\n(.*?)\n```", re.DOTALL)


def _tool_of(action: str) -> str:
    words = action.split(maxsplit=1)
    return words[0] if words else "bash"


def read_swe_agent(document: Mapping[str, object], path: str) -> Read:
    """Read a SWE-agent trajectory's steps as one run.

    Raises:
        TranscriptError: ``trajectory`` is not a list of objects.
    """
    steps = document.get("trajectory")
    if not isinstance(steps, list):
        raise TranscriptError(path, None, '"trajectory" must be a list')
    book = CallBook(RunAssembler(), dedupe=False)
    for number, step in enumerate(steps, start=1):
        if not isinstance(step, Mapping):
            raise TranscriptError(path, None, f"trajectory step {number}: expected a JSON object")
        action = step.get("action")
        if not isinstance(action, str) or not action.strip():
            continue
        command = action.strip()
        draft = book.call(None, _tool_of(command), {"command": command}, None, line=number)
        if draft is not None and "observation" in step:
            draft.result = step.get("observation")
    return book.finish()


def _text(content: object) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            str(part.get("text"))
            for part in content
            if isinstance(part, Mapping) and isinstance(part.get("text"), str)
        )
    return ""


def read_mini_swe_agent(document: Mapping[str, object], path: str) -> Read:
    """Read a mini-swe-agent trajectory (text actions or tool calling) as one run.

    Raises:
        TranscriptError: ``messages`` is not a list of objects.
    """
    messages = document.get("messages")
    if not isinstance(messages, list):
        raise TranscriptError(path, None, '"messages" must be a list')
    uses_tools = any(isinstance(m, Mapping) and m.get("tool_calls") for m in messages)
    book = CallBook(RunAssembler(), dedupe=False)
    if uses_tools:
        add_openai_messages([(None, m) for m in messages], path, book, None)
        return book.finish()
    waiting: CallDraft | None = None
    for number, message in enumerate(messages, start=1):
        if not isinstance(message, Mapping):
            raise TranscriptError(path, None, f"message {number}: expected a JSON object")
        role = message.get("role")
        if role == "assistant":
            actions = _BASH_BLOCK.findall(_text(message.get("content")))
            waiting = None
            if len(actions) == 1:
                command = actions[0].strip()
                waiting = book.call(None, "bash", {"command": command}, None, line=number)
        elif role == "user" and waiting is not None:
            waiting.result = _text(message.get("content"))
            waiting = None
    return book.finish()


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


def is_swe_agent(document: Mapping[str, object]) -> bool:
    """Whether a JSON object is a SWE-agent trajectory."""
    steps = document.get("trajectory")
    return isinstance(steps, list) and (
        not steps or any(isinstance(step, Mapping) and "action" in step for step in steps)
    )


__all__ = ["is_mini_swe_agent", "is_swe_agent", "read_mini_swe_agent", "read_swe_agent"]
