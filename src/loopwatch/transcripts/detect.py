"""Format detection and the one entry point that reads any transcript.

Detection looks at structure, never at file names (a ``.json`` may hold JSONL and the
other way round):

1. The whole text parses as one JSON array, or an object with a ``messages`` array: chat
   messages. They are OpenAI's when some message has ``tool_calls`` / ``function_call`` or
   the role ``tool`` / ``function``, Anthropic's when some content block is a ``tool_use`` or
   ``tool_result``.
2. Otherwise JSONL, decided by the first non-blank line: ``tool`` or ``event`` keys →
   loopwatch JSONL; an OpenClaw entry type (``session``, ``message`` wrapping a
   ``message`` object, ``compaction``, ...) → OpenClaw; a Claude Code record (``sessionId``,
   ``parentUuid``, or types such as ``user`` / ``assistant`` / ``summary``) → Claude Code;
   a bare ``role`` → chat messages, one a line (told apart as in 1.).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Final

from loopwatch.transcripts._common import decode_text, json_lines, parse_json
from loopwatch.transcripts.anthropic import read_anthropic_messages, read_claude_code
from loopwatch.transcripts.loopwatch_jsonl import read_loopwatch
from loopwatch.transcripts.model import FORMATS, FormatName, Run, Transcript, TranscriptError
from loopwatch.transcripts.openai_chat import SourcedMessage, read_openai_messages
from loopwatch.transcripts.openclaw import read_openclaw

#: File name suffixes picked up when a folder is scanned (files named explicitly are always
#: read, whatever their name).
TRANSCRIPT_SUFFIXES: Final = frozenset({".jsonl", ".json", ".ndjson"})

_OPENCLAW_TYPES: Final = frozenset(
    {
        "session",
        "compaction",
        "custom",
        "custom_message",
        "branch_summary",
        "model_change",
        "thinking_level_change",
    }
)
_CLAUDE_CODE_TYPES: Final = frozenset(
    {"user", "assistant", "system", "summary", "file-history-snapshot", "queue-operation"}
)
_OPENAI_ROLES: Final = frozenset({"tool", "function"})


def _text_of(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _chat_flavour(messages: Sequence[SourcedMessage]) -> FormatName:
    for _line, message in messages:
        if not isinstance(message, Mapping):
            continue
        if "tool_calls" in message or "function_call" in message:
            return "openai"
        if _text_of(message.get("role")) in _OPENAI_ROLES:
            return "openai"
        content = message.get("content")
        if isinstance(content, list) and any(
            isinstance(block, Mapping) and block.get("type") in ("tool_use", "tool_result")
            for block in content
        ):
            return "anthropic"
    return "openai"


def _document_messages(document: object) -> list[SourcedMessage] | None:
    """The messages of a whole-file JSON document, or ``None`` when it is not one."""
    if isinstance(document, list):
        return [(None, message) for message in document]
    if isinstance(document, Mapping) and isinstance(document.get("messages"), list):
        messages: list[object] = document["messages"]
        return [(None, message) for message in messages]
    return None


def _line_format(first: object, path: str, line: int) -> FormatName | None:
    """The format a JSONL file's first value announces; ``None`` for chat messages."""
    if not isinstance(first, Mapping):
        raise TranscriptError(path, line, "expected a JSON object")
    # JSON values may be lists (unhashable): only strings are looked up in the sets.
    kind = _text_of(first.get("type"))
    if "tool" in first or "event" in first:
        return "loopwatch"
    if kind in _OPENCLAW_TYPES or (kind == "message" and isinstance(first.get("message"), Mapping)):
        return "openclaw"
    if kind in _CLAUDE_CODE_TYPES or "sessionId" in first or "parentUuid" in first:
        return "claude-code"
    if "role" in first:
        return None
    raise TranscriptError(path, line, "unrecognised transcript format (force one with --format)")


def _first_value(text: str, path: str) -> tuple[int, object] | None:
    for raw_line, raw in enumerate(text.split("\n"), start=1):
        if raw.strip():
            return raw_line, parse_json(raw, path, raw_line)
    return None


_LINE_READERS: Final[dict[FormatName, Callable[[str, str], tuple[Run, ...]]]] = {
    "loopwatch": read_loopwatch,
    "claude-code": read_claude_code,
    "openclaw": read_openclaw,
}


def _read_chat(
    messages: Sequence[SourcedMessage], path: str, forced: FormatName | None
) -> Transcript:
    flavour = forced or _chat_flavour(messages)
    reader = read_anthropic_messages if flavour == "anthropic" else read_openai_messages
    return Transcript(path=path, format=flavour, runs=reader(messages, path))


def _whole_document(text: str, path: str) -> tuple[object, TranscriptError | None]:
    stripped = text.lstrip()
    if not stripped or stripped[0] not in "[{":
        return None, None
    try:
        return parse_json(text, path, 1), None
    except TranscriptError as exc:
        return None, exc


def parse_text(text: str, *, path: str = "<text>", format: FormatName | None = None) -> Transcript:
    """Parse a decoded transcript, detecting its format unless one is forced.

    Args:
        text: the transcript.
        path: for error messages and the result.
        format: one of :data:`FORMATS` to skip detection.

    Returns:
        The transcript.

    Raises:
        TranscriptError: it cannot be parsed (the line and the reason are named).
        ValueError: ``format`` is not a known format name.
    """
    if format is not None and format not in FORMATS:
        raise ValueError(f"unknown transcript format {format!r}")
    if format in _LINE_READERS:
        return Transcript(path=path, format=format, runs=_LINE_READERS[format](text, path))
    document, document_error = _whole_document(text, path)
    messages = _document_messages(document)
    if messages is not None:
        return _read_chat(messages, path, format)
    try:
        first = _first_value(text, path)
    except TranscriptError:
        if document_error is None:
            raise
        # A broken multi-line document: its own error names the right line.
        raise document_error from None
    if first is None:
        return Transcript(path=path, format=format or "loopwatch", runs=(Run(None, ""),))
    detected = format or _line_format(first[1], path, first[0])
    if detected in _LINE_READERS:
        return Transcript(path=path, format=detected, runs=_LINE_READERS[detected](text, path))
    return _read_chat(list(json_lines(text, path)), path, detected)


def parse_transcript(
    data: bytes, *, path: str = "<bytes>", format: FormatName | None = None
) -> Transcript:
    """Parse transcript bytes (UTF-8; a BOM is ignored).

    Any input gives a transcript or a :class:`TranscriptError`, never another exception:
    the scan reports a bad file and goes on with the others.

    Args:
        data: the file content.
        path: for error messages and the result.
        format: one of :data:`FORMATS` to skip detection.

    Returns:
        The transcript.

    Raises:
        TranscriptError: it cannot be decoded or parsed.
        ValueError: ``format`` is not a known format name.
    """
    return parse_text(decode_text(data, path), path=path, format=format)


def read_transcript(
    path: str | os.PathLike[str], *, format: FormatName | None = None
) -> Transcript:
    """Read and parse one transcript file.

    Args:
        path: the file.
        format: one of :data:`FORMATS` to skip detection.

    Returns:
        The transcript.

    Raises:
        TranscriptError: it cannot be read, decoded or parsed.
        ValueError: ``format`` is not a known format name.
    """
    name = os.fspath(path)
    try:
        data = Path(name).read_bytes()
    except OSError as exc:
        raise TranscriptError(name, None, f"cannot read: {exc.strerror or exc}") from exc
    return parse_transcript(data, path=name, format=format)


def _walk(folder: Path) -> Iterator[Path]:
    for entry in sorted(folder.iterdir(), key=lambda p: p.name):
        if entry.name.startswith("."):
            continue
        if entry.is_dir():
            yield from _walk(entry)
        elif entry.suffix.lower() in TRANSCRIPT_SUFFIXES:
            yield entry


def find_transcripts(
    paths: Iterable[str | os.PathLike[str]],
) -> tuple[tuple[str, ...], tuple[TranscriptError, ...]]:
    """Expand files and folders (recursively) into the transcript files to scan.

    Folders contribute their ``.jsonl`` / ``.json`` / ``.ndjson`` files in name order (hidden
    entries skipped); files named explicitly are always included.

    Args:
        paths: files and folders.

    Returns:
        ``(files, problems)``: a missing path, or a folder without transcripts, is a problem
        (so a mistyped path in CI never passes as "nothing found").
    """
    files: list[str] = []
    problems: list[TranscriptError] = []
    for raw in paths:
        path = Path(raw)
        try:
            if path.is_dir():
                found = [os.fspath(p) for p in _walk(path)]
                if not found:
                    problems.append(TranscriptError(path, None, "no transcript files found"))
                files.extend(found)
            elif path.exists():
                files.append(os.fspath(path))
            else:
                problems.append(TranscriptError(path, None, "no such file or directory"))
        except OSError as exc:
            problems.append(TranscriptError(path, None, f"cannot read: {exc.strerror or exc}"))
    return tuple(files), tuple(problems)


__all__ = [
    "TRANSCRIPT_SUFFIXES",
    "find_transcripts",
    "parse_text",
    "parse_transcript",
    "read_transcript",
]
