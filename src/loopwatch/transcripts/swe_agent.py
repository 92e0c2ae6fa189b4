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

mini-swe-agent trajectories have their own reader (:mod:`.mini_swe_agent`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Final

from loopwatch.transcripts._common import CallBook, Read, RunAssembler
from loopwatch.transcripts.model import TranscriptError

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


def is_swe_agent(document: Mapping[str, object]) -> bool:
    """Whether a JSON object is a SWE-agent trajectory."""
    steps = document.get("trajectory")
    return isinstance(steps, list) and (
        not steps or any(isinstance(step, Mapping) and "action" in step for step in steps)
    )


__all__ = ["is_swe_agent", "read_swe_agent"]
