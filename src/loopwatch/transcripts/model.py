"""The common data model every transcript reader produces.

A recorded agent run is reduced to what the guard sees during a replay: the tool calls in
the order the agent made them (with what the model was shown as their outcome) and the
points where the host compacted and retried. Everything else a transcript holds (prompts,
assistant text, UI metadata) is dropped on purpose: replay must not depend on it.

All types are frozen so a parsed transcript can be replayed any number of times (``--sweep``
replays the same runs under many configs) without one replay influencing the next.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Final, Literal

from loopwatch.core._undefined import UNDEFINED

#: The names ``--format`` accepts, in the order auto-detection documents them.
FormatName = Literal[
    "loopwatch",
    "openai",
    "anthropic",
    "claude-code",
    "claude-code-sdk",
    "openclaw",
    "openclaw-trajectory",
    "codex",
    "openai-responses",
    "gemini-cli",
    "qwen-code",
    "opencode",
    "cursor",
    "cline",
    "swe-agent",
    "mini-swe-agent",
    "openhands",
    "tau-bench",
    "tau2-bench",
]
FORMATS: Final[tuple[FormatName, ...]] = (
    "loopwatch",
    "openai",
    "anthropic",
    "claude-code",
    "claude-code-sdk",
    "openclaw",
    "openclaw-trajectory",
    "codex",
    "openai-responses",
    "gemini-cli",
    "qwen-code",
    "opencode",
    "cursor",
    "cline",
    "swe-agent",
    "mini-swe-agent",
    "openhands",
    "tau-bench",
    "tau2-bench",
)


@dataclass(frozen=True, slots=True)
class ReplayCall:
    """One recorded tool call and the outcome the model was shown for it.

    Attributes:
        tool: the tool name as recorded (``LoopGuard`` normalises it, as a live host would).
        args: the parameters (any JSON value).
        result: what the tool returned; ``UNDEFINED`` when the transcript has no outcome
            (nothing is recorded then, exactly as for a live call that never finished).
            ``None`` is a real ``null`` result.
        error: the failure the tool reported, or ``UNDEFINED`` for "did not fail". Never
            ``None`` for "no error": SPEC §9 makes ``error=None`` a real error.
        call_id: the transcript's tool-call id, if it has one.
        run_id: the transcript's run id, if it has one.
        tokens: tokens the transcript attributes to this call (its share of the issuing
            assistant message's usage), when the transcript records usage.
        line: the 1-based source line (JSONL formats) or message number, for messages.
        batch: calls that share a batch number were issued together (one assistant message
            with several tool calls, which hosts run in parallel). Replay calls
            ``before_call`` for all of them before any outcome, as the host did. ``None``
            means the call was issued alone.
    """

    tool: str
    args: object
    result: object = UNDEFINED
    error: object = UNDEFINED
    call_id: str | None = None
    run_id: str | None = None
    tokens: int | None = None
    line: int | None = None
    batch: int | None = None


@dataclass(frozen=True, slots=True)
class Compaction:
    """A compaction followed by a retry: replay arms the run's post-compaction guard here.

    Attributes:
        run_id: the run that was compacted and retried.
        line: the 1-based source line, when known.
    """

    run_id: str | None = None
    line: int | None = None


ReplayEvent = ReplayCall | Compaction


@dataclass(frozen=True, slots=True)
class Run:
    """One agent run: the unit that gets a fresh session during replay.

    Attributes:
        run_id: the run id passed to the guard (``None`` when the transcript has none).
        label: a short name for reports, unique within its transcript (``""`` when the
            transcript holds a single run).
        events: calls and compactions in transcript order.
    """

    run_id: str | None
    label: str
    events: tuple[ReplayEvent, ...] = ()

    @property
    def calls(self) -> tuple[ReplayCall, ...]:
        """The tool calls of the run, in order (compactions left out)."""
        return tuple(event for event in self.events if isinstance(event, ReplayCall))


@dataclass(frozen=True, slots=True)
class Transcript:
    """A parsed transcript file.

    Attributes:
        path: where it was read from (``"<bytes>"`` for in-memory input).
        format: the format it was read as.
        runs: its runs, in order of first appearance; never empty (a transcript without
            calls is one empty run, so every scanned file shows up in a report).
        unmatched_results: tool results that answer no call the reader found (their
            call was lost, or the reader misread the file): a doubt the scan reports.
        notes: what else the reader wants the user to know (copies skipped, calls
            synthesised for orphan results), in plain words.
        skipped_calls: records that may hold tool calls (or their outcomes) the reader
            could not read (a kind it does not know, a last line cut off mid-write), left
            out of the runs: a doubt the scan reports, as unmatched results are (the notes
            say which).
    """

    path: str
    format: FormatName
    runs: tuple[Run, ...] = field(default_factory=tuple)
    unmatched_results: int = 0
    notes: tuple[str, ...] = ()
    skipped_calls: int = 0

    @property
    def call_count(self) -> int:
        """The number of tool calls in all runs."""
        return sum(len(run.calls) for run in self.runs)


class TranscriptError(Exception):
    """A transcript that cannot be read or parsed; the file is skipped, never half-replayed.

    Replaying part of a file could report a loop as caught (or missed) at the wrong call, so
    a reader stops at the first problem and names it.

    Args:
        path: the file.
        line: the 1-based line of the problem, or ``None`` when it concerns the whole file.
        reason: a readable reason.
    """

    def __init__(self, path: str | os.PathLike[str], line: int | None, reason: str) -> None:
        self.path = os.fspath(path)
        self.line = line
        self.reason = reason
        super().__init__(self.location + ": " + reason)

    @property
    def location(self) -> str:
        """``path:line``, or just ``path`` when the line is unknown."""
        return f"{self.path}:{self.line}" if self.line is not None else self.path

    def __reduce__(self) -> tuple[object, ...]:
        return (type(self), (self.path, self.line, self.reason))


class NotATranscript(TranscriptError):
    """Valid JSON (or a file name) that is no transcript loopwatch knows: a settings file,
    a sub-agent's ``*.meta.json``, a copy the host keeps beside the session.

    Named explicitly, such a file is skipped loudly like any unreadable one; met in a
    folder walk it is only counted, so a project folder with side files still scans clean.
    """


__all__ = [
    "FORMATS",
    "Compaction",
    "FormatName",
    "NotATranscript",
    "ReplayCall",
    "ReplayEvent",
    "Run",
    "Transcript",
    "TranscriptError",
]
