"""Transcript readers: recorded agent runs → call sequences for replay.

Five formats are read, each by its own module, into one data model (:class:`Transcript`
→ :class:`Run` → :class:`ReplayCall` / :class:`Compaction`):

- ``loopwatch``: loopwatch JSONL (:mod:`.loopwatch_jsonl`);
- ``openai``: OpenAI chat messages (:mod:`.openai_chat`);
- ``anthropic``: Anthropic messages, and ``claude-code``: Claude Code sessions
  (:mod:`.anthropic`);
- ``openclaw``: OpenClaw session transcripts (:mod:`.openclaw`).

:func:`read_transcript` detects the format (:mod:`.detect`) unless one is forced. A file
that cannot be read raises :class:`TranscriptError` with its path, line and reason.
"""

from loopwatch.transcripts.detect import (
    TRANSCRIPT_SUFFIXES,
    find_transcripts,
    parse_text,
    parse_transcript,
    read_transcript,
)
from loopwatch.transcripts.model import (
    FORMATS,
    Compaction,
    FormatName,
    ReplayCall,
    ReplayEvent,
    Run,
    Transcript,
    TranscriptError,
)

__all__ = [
    "FORMATS",
    "TRANSCRIPT_SUFFIXES",
    "Compaction",
    "FormatName",
    "ReplayCall",
    "ReplayEvent",
    "Run",
    "Transcript",
    "TranscriptError",
    "find_transcripts",
    "parse_text",
    "parse_transcript",
    "read_transcript",
]
