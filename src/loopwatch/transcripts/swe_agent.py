"""SWE-agent ``.traj`` files.

**SWE-agent** (SWE-agent/SWE-agent ``sweagent/types.py``, ``TrajectoryStep``; files
``<instance>.traj``): one pretty-printed JSON document ``{"environment", "trajectory":
[...], "history": [...], "info": {...}, "replay_config"}``. Each ``trajectory`` step is one
action the agent ran: ``{"action", "observation", "response", "thought", "state",
"execution_time"}``. ``action`` is the command line (``open chall.py``, ``edit 1:5 ...``,
``submit``): the call replayed is the tool named by its first word with ``{"command":
action}`` as arguments, and ``observation`` is its result. SWE-agent records no error flag
or exit code; the one failure its observations name is a command killed for taking too long:
``EXECUTION TIMED OUT`` appended to the output (0.x, ``swe_env.py``), or the default
``command_cancelled_timeout_template`` ``The command '...' was cancelled because it took more
than N seconds.`` (1.x, ``agents.py``). Such a step is a failure, its observation the error.

A trajectory saved with its ``history`` alone (``{"history": [...]}``: the function-calling
demonstrations, ``trajectories/demonstrations/function_calling_simple.traj``) is read
through that history: chat messages tagged with a ``message_type`` (``system_prompt``,
``observation``, ``action``), whose ``assistant`` ones carry OpenAI ``tool_calls`` and whose
``tool`` ones answer by ``tool_call_ids`` (a list). History messages of a full trajectory
repeat its steps and are not read again.

mini-swe-agent trajectories have their own reader (:mod:`.mini_swe_agent`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Final

from loopwatch.transcripts._common import CallBook, Read, RunAssembler
from loopwatch.transcripts.model import TranscriptError
from loopwatch.transcripts.openai_chat import read_openai_messages

#: The observation of a command SWE-agent killed for running too long (see above).
_TIMED_OUT: Final = re.compile(
    r"(?:.*\n)?EXECUTION TIMED OUT\b|\s*The command '.*' was cancelled because it took more than",
    re.DOTALL,
)


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
        if draft is None or "observation" not in step:
            continue
        observation = step.get("observation")
        if isinstance(observation, str) and _TIMED_OUT.match(observation):
            draft.error = observation
        else:
            draft.result = observation
    return book.finish()


def read_swe_agent_history(document: Mapping[str, object], path: str) -> Read:
    """Read a SWE-agent trajectory saved with its ``history`` alone, as chat messages.

    Raises:
        TranscriptError: a message that is not an object, or malformed ``tool_calls``.
    """
    history = document.get("history")
    messages: list[tuple[int | None, object]] = []
    for message in history if isinstance(history, list) else []:
        if isinstance(message, Mapping) and "tool_call_id" not in message:
            ids = message.get("tool_call_ids")
            if isinstance(ids, list) and len(ids) == 1 and isinstance(ids[0], str):
                message = {**message, "tool_call_id": ids[0]}
        messages.append((None, message))
    return read_openai_messages(messages, path)


def is_swe_agent(document: Mapping[str, object]) -> bool:
    """Whether a JSON object is a SWE-agent trajectory."""
    steps = document.get("trajectory")
    return isinstance(steps, list) and (
        not steps or any(isinstance(step, Mapping) and "action" in step for step in steps)
    )


def is_swe_agent_history(document: Mapping[str, object]) -> bool:
    """Whether a JSON object is a SWE-agent trajectory saved with its ``history`` alone."""
    history = document.get("history")
    return (
        "trajectory" not in document
        and isinstance(history, list)
        and any(isinstance(m, Mapping) and "message_type" in m and "role" in m for m in history)
    )


__all__ = ["is_swe_agent", "is_swe_agent_history", "read_swe_agent", "read_swe_agent_history"]
