"""loopwatch JSONL: the project's own replay format (and that of ``shared/corpus/traj/``).

One tool call a line::

    {"tool": "exec", "args": {"command": "ls"}, "result": "a.txt", "error": null,
     "call_id": "c1", "run_id": "r1", "tokens": 812}

- ``tool`` (string) is required. ``args`` defaults to ``{}``.
- ``result``: a missing key means "no outcome recorded" (replayed as ``UNDEFINED``: nothing
  is hashed); ``null`` is a real ``null`` result.
- ``error``: missing or ``null`` means the call did not fail. It is replayed as
  ``UNDEFINED``, never as ``None``, because SPEC §9 makes ``error=None`` a real error.
- ``call_id``, ``run_id``: optional strings (numbers are kept as their digits).
- ``tokens``: optional non-negative integer, the tokens this call cost.

A line ``{"event": "compaction"}`` marks a compaction retry: the replay arms the run's
post-compaction guard there. It belongs to the run named by its own ``run_id``; without that
key, to the run of the call before it.

Lines with a ``run_id`` are grouped into one run per id, in order of first appearance.
"""

from __future__ import annotations

import numbers
from collections.abc import Mapping

from loopwatch.core._undefined import UNDEFINED
from loopwatch.transcripts._common import (
    CallDraft,
    RunAssembler,
    as_mapping,
    json_lines,
    optional_id,
)
from loopwatch.transcripts.model import Compaction, Run, TranscriptError

_UNSET = object()


def _tokens(value: object, path: str, line: int) -> int | None:
    if value is None:
        return None
    if isinstance(value, numbers.Integral) and not isinstance(value, bool) and int(value) >= 0:
        return int(value)
    raise TranscriptError(path, line, '"tokens" must be a non-negative integer')


def _call(obj: Mapping[str, object], path: str, line: int) -> CallDraft:
    tool = obj.get("tool")
    if not isinstance(tool, str):
        raise TranscriptError(path, line, '"tool" must be a string')
    error = obj.get("error")
    return CallDraft(
        tool=tool,
        args=obj.get("args", {}),
        call_id=optional_id(obj.get("call_id"), path, line, "call_id"),
        run_id=optional_id(obj.get("run_id"), path, line, "run_id"),
        tokens=_tokens(obj.get("tokens"), path, line),
        line=line,
        result=obj.get("result", UNDEFINED),
        error=UNDEFINED if error is None else error,
    )


def read_loopwatch(text: str, path: str) -> tuple[Run, ...]:
    """Parse loopwatch JSONL.

    Args:
        text: the decoded file.
        path: for error messages.

    Returns:
        The runs.

    Raises:
        TranscriptError: at the first line that is not JSON, not an object, has an unknown
            ``event`` or a field of the wrong type.
    """
    runs = RunAssembler()
    current: str | None = None
    for line, value in json_lines(text, path):
        obj = as_mapping(value, path, line, "a call line")
        if "event" in obj:
            event = obj["event"]
            if event != "compaction":
                raise TranscriptError(path, line, f"unknown event {event!r}")
            raw = obj.get("run_id", _UNSET)
            run_id = current if raw is _UNSET else optional_id(raw, path, line, "run_id")
            runs.add(run_id, Compaction(run_id=run_id, line=line))
            continue
        draft = _call(obj, path, line)
        current = draft.run_id
        runs.add(draft.run_id, draft)
    return runs.finish()


__all__ = ["read_loopwatch"]
