"""Format detection and the one entry point that reads any transcript.

Detection looks at structure, never at file names (a ``.json`` may hold JSONL and the
other way round):

1. The whole text parses as one JSON document. An object is a SWE-agent trajectory
   (``trajectory`` steps), a mini-swe-agent one (``trajectory_format``), ``opencode
   export`` output (``info`` + ``messages[]`` of ``{"info", "parts"}``), a Gemini CLI
   session (``messages[].toolCalls``), an OpenHands ``history`` or single event, a Responses
   API response or request (``output`` / ``input`` items), Gemini ``contents``, tau2-bench
   results or simulations (``simulations``; ``task_id`` + ``termination_reason``), or chat
   ``messages``. A list is tau-bench results (tasks with ``traj``), tau2-bench simulations,
   an OpenHands event stream, Claude Code SDK records (``type`` + ``message``), Responses
   items, Gemini contents, or chat messages. Chat messages are OpenAI's (``tool_calls``,
   role ``tool``), Cline's (user text blocks ``[tool for '...'] Result:``, or the
   ``<environment_details>`` block Cline and Roo Code append) or Anthropic's (``tool_use``
   blocks).
2. Otherwise JSONL, decided by the first non-blank line: ``tool`` / ``event`` → loopwatch
   JSONL; ``traceSchema: openclaw-trajectory`` → OpenClaw trajectory; a Codex envelope
   (``session_meta``, ``response_item``, ...) or legacy header → Codex; ``traj`` →
   tau-bench; ``instance_id`` + ``history`` → OpenHands evaluation output; an OpenClaw entry
   type → OpenClaw; ``session_id`` records → Claude Code SDK; a Qwen Code record
   (``uuid`` + ``sessionId`` with Gemini ``message.parts``, ``tool_result`` type,
   ``systemPayload`` or ``toolCallResult``; also when only a later one of the first 50 lines
   shows it) → Qwen Code; a ``sessionId`` +
   ``projectHash`` header → Gemini CLI (JSONL sessions); a Claude Code record
   (``sessionId``, ``parentUuid``, ``user`` / ``assistant`` / ``summary`` types) → Claude
   Code; a Responses item → Responses; ``role`` + ``message`` → Cursor; a bare ``role`` →
   chat messages, one a line. A stream that reads as Claude Code SDK output but holds
   ``tool_call`` events is the Cursor CLI's (``--output-format stream-json``).
3. Not JSON at all, but a first line ``user:`` / ``assistant:``: a Cursor plain-text
   agent transcript.

Paths, before any of that: an OpenCode ``storage/`` folder (or a ``session/<project>/
<id>.json`` inside one) and a SQLite file (OpenCode's ``opencode.db``) are read by
:mod:`.opencode`.

Valid JSON of any other shape is :class:`NotATranscript`, naming its top-level keys, and so
are a Cline / Roo Code ``ui_messages.json`` and a Gemini CLI ``logs.json`` (their calls
are in the task's API history, the session's chats).
"""

from __future__ import annotations

import dataclasses
import os
import stat
from collections.abc import Callable, Mapping, Sequence
from typing import Final

from loopwatch.transcripts._common import Read, decode_text, json_lines, parse_json
from loopwatch.transcripts.anthropic import (
    CLINE_RESULT,
    read_anthropic_messages,
    read_claude_code_records,
)
from loopwatch.transcripts.codex import (
    CALL_TYPES,
    OUTPUT_TYPES,
    RESPONSES_TYPES,
    ROLLOUT_TYPES,
    is_legacy_rollout_header,
    read_codex,
    read_responses_items,
)
from loopwatch.transcripts.cursor import (
    is_cursor_line,
    is_cursor_text,
    is_stream_call,
    read_cursor,
    read_cursor_text,
)
from loopwatch.transcripts.gemini import (
    is_gemini_contents,
    is_gemini_jsonl_header,
    is_gemini_session,
    read_gemini_contents,
    read_gemini_jsonl,
    read_gemini_session,
)
from loopwatch.transcripts.loopwatch_jsonl import read_loopwatch
from loopwatch.transcripts.mini_swe_agent import (
    is_mini_swe_agent,
    is_mini_swe_agent_messages,
    read_mini_swe_agent,
)
from loopwatch.transcripts.model import (
    FORMATS,
    FormatName,
    NotATranscript,
    Run,
    Transcript,
    TranscriptError,
)
from loopwatch.transcripts.openai_chat import SourcedMessage, read_openai_messages, read_taubench
from loopwatch.transcripts.openclaw import read_openclaw
from loopwatch.transcripts.openclaw_trajectory import (
    is_trajectory_event,
    read_openclaw_trajectory,
)
from loopwatch.transcripts.opencode import (
    is_database,
    is_opencode_export,
    read_database,
    read_opencode_export,
    read_storage,
)
from loopwatch.transcripts.openhands import (
    is_event,
    is_event_list,
    read_openhands_events,
    read_openhands_instances,
)
from loopwatch.transcripts.paths import (
    DEFAULT_MAX_FILE_BYTES,
    TRANSCRIPT_SUFFIXES,
    Found,
    event_files,
    find_transcripts,
    is_event_folder,
    is_storage_folder,
    read_bytes,
    side_file_reason,
    storage_session_file,
    walk_transcripts,
)
from loopwatch.transcripts.qwen import is_qwen_record, read_qwen
from loopwatch.transcripts.swe_agent import (
    is_swe_agent,
    is_swe_agent_history,
    read_swe_agent,
    read_swe_agent_history,
)
from loopwatch.transcripts.tau2 import is_tau2_simulation, read_tau2, tau2_simulations

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
    {"user", "assistant", "system", "summary", "file-history-snapshot", "queue-operation", "result"}
)
_OPENAI_ROLES: Final = frozenset({"tool", "function"})
_MAX_KEYS_NAMED: Final = 8


def _text_of(value: object) -> str | None:
    return value if isinstance(value, str) else None


#: The block Cline and Roo Code append to every user message (their native tool protocol
#: leaves no other mark of the host in the conversation).
_CLINE_ENVIRONMENT: Final = "<environment_details>"


def _is_cline(message: Mapping[str, object]) -> bool:
    if message.get("role") != "user":
        return False
    content = message.get("content")
    blocks = content if isinstance(content, list) else [{"type": "text", "text": content}]
    for block in blocks:
        if not isinstance(block, Mapping):
            continue
        text = block.get("text") if block.get("type") != "tool_result" else block.get("content")
        if isinstance(text, str) and (
            CLINE_RESULT.match(text) is not None or text.startswith(_CLINE_ENVIRONMENT)
        ):
            return True
    return False


def _chat_flavour(messages: Sequence[SourcedMessage]) -> FormatName:
    anthropic = False
    for _line, message in messages:
        if not isinstance(message, Mapping):
            continue
        if "tool_calls" in message or "function_call" in message:
            return "openai"
        if _text_of(message.get("role")) in _OPENAI_ROLES:
            return "openai"
        if _is_cline(message):
            return "cline"
        content = message.get("content")
        if isinstance(content, list) and any(
            isinstance(block, Mapping) and block.get("type") in ("tool_use", "tool_result")
            for block in content
        ):
            anthropic = True
    return "anthropic" if anthropic else "openai"


def _read_chat(
    messages: Sequence[SourcedMessage], path: str, forced: FormatName | None
) -> tuple[FormatName, Read]:
    flavour = forced or _chat_flavour(messages)
    if flavour in ("anthropic", "cline"):
        return flavour, read_anthropic_messages(messages, path, xml_tools=flavour == "cline")
    return flavour, read_openai_messages(messages, path)


#: Why a named ``ui_messages.json`` is not scanned: the task's calls are in the API
#: history beside it, which this log only echoes for display.
CLINE_UI_LOG: Final = (
    "a Cline / Roo Code UI log (ui_messages.json): scan api_conversation_history.json "
    "beside it, which holds the calls"
)
#: Why a named Gemini CLI ``logs.json`` is not scanned: it holds the user's prompts only.
GEMINI_PROMPT_LOG: Final = (
    "a Gemini CLI prompt log (logs.json, the user's prompts only): scan the session files "
    "in chats/ beside it, which hold the calls"
)


def _side_log(document: object) -> str | None:
    """Why a JSON list is a host's side log rather than a transcript, or ``None``.

    A Cline / Roo Code ``ui_messages.json`` holds ``ClineMessage`` items (``{"ts",
    "type": "ask" | "say", ...}``); a Gemini CLI ``logs.json`` holds ``LogEntry`` items
    (``{"sessionId", "messageId", "timestamp", "type", "message"}``). Read as chat
    messages, either was an understood file with 0 calls.
    """
    if not isinstance(document, list) or not document:
        return None
    if all(
        isinstance(item, Mapping) and "ts" in item and item.get("type") in ("ask", "say")
        for item in document
    ):
        return CLINE_UI_LOG
    if all(
        isinstance(item, Mapping)
        and "sessionId" in item
        and "messageId" in item
        and isinstance(item.get("message"), str)
        for item in document
    ):
        return GEMINI_PROMPT_LOG
    return None


def _keys(document: object) -> str:
    if isinstance(document, Mapping):
        keys = [str(key) for key in list(document)[:_MAX_KEYS_NAMED]]
        more = ", ..." if len(document) > _MAX_KEYS_NAMED else ""
        return "a JSON object with keys " + (", ".join(keys) or "(none)") + more
    if isinstance(document, list):
        return f"a JSON list of {len(document)} items"
    return f"a JSON {type(document).__name__}"


def _not_a_transcript(path: str, document: object) -> NotATranscript:
    return NotATranscript(
        path,
        None,
        f"not a transcript format loopwatch reads: {_keys(document)} (force one with --format)",
    )


def _sourced(values: Sequence[object]) -> list[SourcedMessage]:
    return [(None, value) for value in values]


def _list_reader(items: list[object]) -> tuple[FormatName, Callable[[str], Read]] | None:
    dicts = [item for item in items if isinstance(item, Mapping)]
    if dicts and all("traj" in item for item in dicts):
        return "tau-bench", lambda path: read_taubench(_sourced(items), path)
    if dicts and all(is_tau2_simulation(item) for item in dicts):
        return "tau2-bench", lambda path: read_tau2(items, path)
    if is_event_list(items):
        return "openhands", lambda path: read_openhands_events(items, path)
    if is_mini_swe_agent_messages(items):
        return "mini-swe-agent", lambda path: read_mini_swe_agent({"messages": items}, path)
    if (
        dicts
        and all(isinstance(item.get("type"), str) and "role" not in item for item in dicts)
        and any(
            item.get("type") in ("assistant", "user") and isinstance(item.get("message"), Mapping)
            for item in dicts
        )
    ):
        return "claude-code-sdk", lambda path: read_claude_code_records(_sourced(items), path)
    if any(_text_of(item.get("type")) in (CALL_TYPES | OUTPUT_TYPES) for item in dicts):
        return "openai-responses", lambda path: read_responses_items(_sourced(items), path)
    if is_gemini_contents(items):
        return "gemini-cli", lambda path: read_gemini_contents(items, path)
    return None


def _responses_in(items: object) -> tuple[FormatName, Callable[[str], Read]] | None:
    if isinstance(items, list) and any(
        isinstance(i, Mapping) and _text_of(i.get("type")) in RESPONSES_TYPES for i in items
    ):
        return "openai-responses", lambda path: read_responses_items(_sourced(items), path)
    return None


def _object_reader(
    document: Mapping[str, object],
) -> tuple[FormatName, Callable[[str], Read]] | None:
    if is_swe_agent(document):
        return "swe-agent", lambda path: read_swe_agent(document, path)
    if is_swe_agent_history(document):
        return "swe-agent", lambda path: read_swe_agent_history(document, path)
    if is_mini_swe_agent(document):
        return "mini-swe-agent", lambda path: read_mini_swe_agent(document, path)
    simulations = tau2_simulations(document)
    if simulations is not None:
        return "tau2-bench", lambda path: read_tau2(simulations, path)
    if is_opencode_export(document):
        return "opencode", lambda path: read_opencode_export(document, path)
    if is_gemini_session(document):
        messages: list[object] = list(document["messages"])  # type: ignore[call-overload]
        return "gemini-cli", lambda path: read_gemini_session(messages, path)
    history = document.get("history")
    if isinstance(history, list) and is_event_list(history):
        return "openhands", lambda path: read_openhands_events(history, path)
    if is_event(document):
        return "openhands", lambda path: read_openhands_events([document], path)
    for key in ("output", "input"):
        found = _responses_in(document.get(key))
        if found is not None:
            return found
    contents = document.get("contents")
    if isinstance(contents, list) and is_gemini_contents(contents):
        return "gemini-cli", lambda path: read_gemini_contents(contents, path)
    return None


def _document_read(
    document: object, path: str, forced: FormatName | None
) -> tuple[FormatName, Read] | None:
    """Read a whole-file JSON document, or ``None`` when it is no document format."""
    if isinstance(document, list):
        found = None if forced in _CHAT_FORMATS else _list_reader(document)
        if found is not None and (forced is None or forced == found[0]):
            return found[0], found[1](path)
        if forced is None or forced in _CHAT_FORMATS:
            return _read_chat(_sourced(document), path, forced)
        return None
    if isinstance(document, Mapping):
        found = _object_reader(document)
        if found is not None and (forced is None or forced == found[0]):
            return found[0], found[1](path)
        messages = document.get("messages")
        if isinstance(messages, list) and (forced is None or forced in _CHAT_FORMATS):
            return _read_chat(_sourced(messages), path, forced)
    return None


_CHAT_FORMATS: Final = frozenset({"openai", "anthropic", "cline"})


def _line_format(first: object, path: str, line: int) -> FormatName | None:
    """The format a JSONL file's first value announces; ``None`` for chat messages."""
    if not isinstance(first, Mapping):
        raise TranscriptError(path, line, "expected a JSON object")
    # JSON values may be lists (unhashable): only strings are looked up in the sets.
    kind = _text_of(first.get("type"))
    if "tool" in first or "event" in first:
        return "loopwatch"
    if is_trajectory_event(first):
        return "openclaw-trajectory"
    if kind in ROLLOUT_TYPES or is_legacy_rollout_header(first):
        return "codex"
    if "traj" in first:
        return "tau-bench"
    if "history" in first and ("instance_id" in first or "issue" in first):
        return "openhands"  # an evaluation's instance, or the issue resolver's output
    if kind in _OPENCLAW_TYPES or (kind == "message" and isinstance(first.get("message"), Mapping)):
        return "openclaw"
    if kind is not None and "session_id" in first and "sessionId" not in first:
        return "claude-code-sdk"
    if is_qwen_record(first):  # before Claude Code: the same uuid / sessionId fields
        return "qwen-code"
    if is_gemini_jsonl_header(first):  # before Claude Code: both name a sessionId
        return "gemini-cli"
    if kind in _CLAUDE_CODE_TYPES or "sessionId" in first or "parentUuid" in first:
        return "claude-code"
    if kind in RESPONSES_TYPES:
        return "openai-responses"
    if is_cursor_line(first):
        return "cursor"
    if "role" in first:
        return None
    raise NotATranscript(
        path, line, f"not a transcript format loopwatch reads: {_keys(first)} on the first line"
    )


#: Lines looked at to detect a JSONL format when the first ones announce nothing (a
#: Claude Code session may open with title or snapshot records of types added later).
_DETECTION_LINES: Final = 50


def _first_value(text: str, path: str) -> tuple[int, object] | None:
    for line, value in json_lines(text, path):
        return line, value
    return None


def _detect_lines(text: str, path: str, first: tuple[int, object]) -> FormatName | None:
    """The format of a JSONL file: that of its first line, or of the first of the next
    lines that announces one (so one unknown record type does not hide a transcript)."""
    try:
        return _line_format(first[1], path, first[0])
    except NotATranscript as unknown:
        for index, (line, value) in enumerate(json_lines(text, path)):
            if index >= _DETECTION_LINES:
                break
            if line == first[0] or not isinstance(value, Mapping):
                continue
            try:
                return _line_format(value, path, line)
            except NotATranscript:
                continue
        raise unknown from None


def _line_read(fmt: FormatName, text: str, path: str) -> Read | None:
    lines = json_lines(text, path)
    readers: dict[str, Callable[[], Read]] = {
        "loopwatch": lambda: Read(read_loopwatch(text, path)),
        "openclaw": lambda: read_openclaw(text, path),
        "openclaw-trajectory": lambda: read_openclaw_trajectory(lines, path),
        "codex": lambda: read_codex(lines, path),
        "claude-code": lambda: read_claude_code_records(lines, path),
        "claude-code-sdk": lambda: read_claude_code_records(lines, path),
        "cursor": lambda: read_cursor(lines, path),
        "tau-bench": lambda: read_taubench(list(lines), path),
        "openhands": lambda: _openhands_lines(text, path),
        "openai-responses": lambda: read_responses_items(lines, path),
        "gemini-cli": lambda: read_gemini_jsonl(lines, path),
        "qwen-code": lambda: read_qwen(lines, path),
    }
    reader = readers.get(fmt)
    return reader() if reader is not None else None


def _openhands_lines(text: str, path: str) -> Read:
    values = list(json_lines(text, path))
    if values and isinstance(values[0][1], Mapping) and "history" in values[0][1]:
        return read_openhands_instances(values, path)
    return read_openhands_events([value for _line, value in values], path)


def _whole_document(text: str, path: str) -> tuple[object, TranscriptError | None]:
    stripped = text.lstrip()
    if not stripped or stripped[0] not in "[{":
        return None, None
    try:
        return parse_json(text, path, 1), None
    except TranscriptError as exc:
        return None, exc


def _transcript(path: str, fmt: FormatName, read: Read) -> Transcript:
    return Transcript(
        path=path,
        format=fmt,
        runs=read.runs,
        unmatched_results=read.unmatched,
        notes=read.notes,
        skipped_calls=read.skipped,
    )


def parse_text(text: str, *, path: str = "<text>", format: FormatName | None = None) -> Transcript:
    """Parse a decoded transcript, detecting its format unless one is forced.

    Args:
        text: the transcript.
        path: for error messages and the result.
        format: one of :data:`FORMATS` to skip detection.

    Returns:
        The transcript.

    Raises:
        NotATranscript: valid JSON of a shape no reader knows (its keys are named).
        TranscriptError: it cannot be parsed (the line and the reason are named).
        ValueError: ``format`` is not a known format name.
    """
    if format is not None and format not in FORMATS:
        raise ValueError(f"unknown transcript format {format!r}")
    try:
        return _parse_text(text, path, format)
    except NotATranscript:
        raise
    except TranscriptError as exc:
        head = _without_cut_last_line(text, exc)
        if head is None:
            raise
        try:
            transcript = _parse_text(head, path, format)
        except TranscriptError:
            raise exc from None
        cut_line = exc.line
    note = (
        f"the last line ({cut_line}) is cut off, with no newline at its end (a file still "
        "being written, or copied mid-write): not read"
    )
    return dataclasses.replace(
        transcript,
        notes=(*transcript.notes, note),
        skipped_calls=transcript.skipped_calls + 1,
    )


def _without_cut_last_line(text: str, error: TranscriptError) -> str | None:
    """The text before its last line, when that line is what failed and is cut off.

    A JSONL file whose writer was stopped (or that was copied) mid-write ends in a partial
    record without a newline; the records before it are whole. ``None`` for any other
    failure: a bad line inside the file is never passed over.
    """
    if error.line is None or error.line < 2 or text.endswith("\n"):
        return None
    if not error.reason.startswith("invalid JSON"):
        return None  # a whole line the reader refused: not a partial write
    start = text.rfind("\n")
    if start < 0 or text.count("\n", 0, start) + 2 != error.line:
        return None
    if not text[start + 1 :].lstrip().startswith(("{", "[")):
        return None
    return text[: start + 1]


def _parse_text(text: str, path: str, format: FormatName | None) -> Transcript:
    document, document_error = _whole_document(text, path)
    side_log = _side_log(document) if format is None else None
    if side_log is not None:
        raise NotATranscript(path, None, side_log)
    if document is not None and _reads_as_document(document, text):
        found = _document_read(document, path, format)
        if found is not None:
            return _transcript(path, found[0], found[1])
        if format is None:
            raise _not_a_transcript(path, document)
    if format in (None, "cursor") and document is None and is_cursor_text(text):
        return _transcript(path, "cursor", read_cursor_text(text, path))
    try:
        first = _first_value(text, path)
    except TranscriptError:
        if document_error is None:
            raise
        # A broken multi-line document: its own error names the right line.
        raise document_error from None
    if first is None:
        return Transcript(path=path, format=format or "loopwatch", runs=(Run(None, ""),))
    detected = format or _detect_lines(text, path, first)
    if detected == "claude-code-sdk" and format is None and _has_cursor_calls(text, path):
        detected = "cursor"  # the Cursor CLI streams Claude's events, but its own calls
    if detected == "claude-code" and format is None and _has_qwen_records(text, path):
        detected = "qwen-code"  # a Qwen Code file whose first records name no Qwen field
    if detected is not None:
        read = _line_read(detected, text, path)
        if read is not None:
            return _transcript(path, detected, read)
    fmt, read = _read_chat(list(json_lines(text, path)), path, detected)
    return _transcript(path, fmt, read)


def _has_qwen_records(text: str, path: str) -> bool:
    for index, (_line, value) in enumerate(json_lines(text, path)):
        if index >= _DETECTION_LINES:
            return False
        if is_qwen_record(value):
            return True
    return False


def _has_cursor_calls(text: str, path: str) -> bool:
    return any(is_stream_call(value) for _line, value in json_lines(text, path))


def _reads_as_document(document: object, text: str) -> bool:
    """Whether a whole-file JSON value is read as a document rather than one JSONL line.

    A list, or a value over several lines, is a document. A one-line object is a
    document only when a document reader knows its shape (else it is a one-line JSONL
    file, e.g. a single loopwatch call).
    """
    if isinstance(document, list) or "\n" in text.strip():
        return True
    return isinstance(document, Mapping) and (
        _object_reader(document) is not None or isinstance(document.get("messages"), list)
    )


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
    path: str | os.PathLike[str],
    *,
    format: FormatName | None = None,
    max_bytes: int = DEFAULT_MAX_FILE_BYTES,
) -> Transcript:
    """Read and parse one transcript file.

    Args:
        path: the file (a regular file: FIFOs and devices are refused).
        format: one of :data:`FORMATS` to skip detection.
        max_bytes: the largest file read.

    Returns:
        The transcript.

    Raises:
        TranscriptError: it cannot be read, decoded or parsed, or is too big.
        ValueError: ``format`` is not a known format name.
    """
    name = os.fspath(path)
    if (format is None or format == "openhands") and os.path.isdir(name) and is_event_folder(name):
        return read_event_folder(name, max_bytes=max_bytes)
    if format in (None, "opencode"):
        opencode = _read_opencode_store(name, max_bytes)
        if opencode is not None:
            return _transcript(name, "opencode", opencode)
    data = read_bytes(name, max_bytes=max_bytes)
    text = decode_text(data, name)
    del data  # the text is all the readers need; do not hold both
    return parse_text(text, path=name, format=format)


def _peek(path: str) -> bytes:
    """The first bytes of a regular file (``b""`` for anything else: read_bytes says why)."""
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0)
    try:
        descriptor = os.open(path, flags)
    except OSError:
        return b""
    try:
        if not stat.S_ISREG(os.fstat(descriptor).st_mode):
            return b""
        return os.read(descriptor, 16)
    except OSError:
        return b""
    finally:
        os.close(descriptor)


def _read_opencode_store(name: str, max_bytes: int) -> Read | None:
    """OpenCode's storage folder, one session file in it, or its SQLite database; ``None``
    for any other path."""
    if os.path.isdir(name):
        return read_storage(name, max_bytes=max_bytes) if is_storage_folder(name) else None
    in_storage = storage_session_file(name)
    if in_storage is not None:
        return read_storage(in_storage[0], session_id=in_storage[1], max_bytes=max_bytes)
    if is_database(_peek(name)):
        return read_database(name, max_bytes=max_bytes)
    return None


def read_event_folder(folder: str, *, max_bytes: int = DEFAULT_MAX_FILE_BYTES) -> Transcript:
    """Read an OpenHands ``events/`` folder as one transcript (events in number order).

    Raises:
        TranscriptError: an event file that cannot be read, or the folder holds too much.
    """
    files = event_files(folder)
    if files is None:
        raise TranscriptError(folder, None, "not a regular file (a directory)")
    events: list[object] = []
    budget = max_bytes
    for _number, path in files:
        data = read_bytes(path, max_bytes=budget)
        budget -= len(data)
        events.append(parse_json(decode_text(data, path), path, 1))
    return _transcript(folder, "openhands", read_openhands_events(events, folder))


__all__ = [
    "DEFAULT_MAX_FILE_BYTES",
    "TRANSCRIPT_SUFFIXES",
    "Found",
    "find_transcripts",
    "is_event_folder",
    "parse_text",
    "parse_transcript",
    "read_bytes",
    "read_event_folder",
    "read_transcript",
    "side_file_reason",
    "walk_transcripts",
]
