"""Transcript readers: recorded agent runs → call sequences for replay.

Each format is read by its own module into one data model (:class:`Transcript` →
:class:`Run` → :class:`ReplayCall` / :class:`Compaction`):

- ``loopwatch``: loopwatch JSONL (:mod:`.loopwatch_jsonl`);
- ``openai``: OpenAI chat messages, and ``tau-bench`` result files (:mod:`.openai_chat`);
- ``anthropic``: Anthropic messages, ``cline``: Cline / Roo Code conversations,
  ``claude-code``: Claude Code sessions, ``claude-code-sdk``: Claude Code SDK output
  (:mod:`.anthropic`);
- ``openclaw``: OpenClaw session transcripts (:mod:`.openclaw`), and
  ``openclaw-trajectory``: its trajectory traces (:mod:`.openclaw_trajectory`);
- ``codex``: Codex CLI rollouts, and ``openai-responses``: Responses API items
  (:mod:`.codex`);
- ``gemini-cli``: Gemini CLI sessions and Gemini API contents (:mod:`.gemini`);
- ``qwen-code``: Qwen Code chat recordings (:mod:`.qwen`);
- ``opencode``: OpenCode sessions: ``opencode export`` output, the storage folder and the
  SQLite database (:mod:`.opencode`);
- ``cursor``: Cursor agent transcripts (:mod:`.cursor`);
- ``swe-agent`` trajectories (:mod:`.swe_agent`), ``mini-swe-agent`` ones
  (:mod:`.mini_swe_agent`);
- ``openhands``: OpenHands event streams (:mod:`.openhands`);
- ``tau2-bench``: tau2-bench results and simulations (:mod:`.tau2`).

:func:`read_transcript` detects the format (:mod:`.detect`) unless one is forced. A file
that cannot be read raises :class:`TranscriptError` with its path, line and reason; valid
JSON of another shape raises :class:`NotATranscript`, naming its top-level keys.
"""

from loopwatch.transcripts.detect import (
    TRANSCRIPT_SUFFIXES,
    find_transcripts,
    parse_text,
    parse_transcript,
    read_transcript,
    walk_transcripts,
)
from loopwatch.transcripts.model import (
    FORMATS,
    Compaction,
    FormatName,
    NotATranscript,
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
    "NotATranscript",
    "ReplayCall",
    "ReplayEvent",
    "Run",
    "Transcript",
    "TranscriptError",
    "find_transcripts",
    "parse_text",
    "parse_transcript",
    "read_transcript",
    "walk_transcripts",
]
