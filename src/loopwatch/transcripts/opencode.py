"""OpenCode sessions: ``opencode export`` output, the JSON storage folder, the SQLite database.

OpenCode (sst/opencode, now anomalyco/opencode) keeps one record per message and one per
message *part*; the calls are the parts. Sources: ``packages/opencode/src/session/
message-v2.ts`` (the types), ``storage/storage.ts`` (the JSON layout),
``storage/json-migration.ts`` and ``packages/core/src/session/sql.ts`` (the database),
``cli/cmd/export.ts`` and ``tool/bash.ts``.

Three places hold the same records:

- **``opencode export <sessionID>``** prints ``{"info": <session>, "messages": [{"info":
  <message>, "parts": [<part>, ...]}, ...]}`` (newer releases add ``todos``): one session.
- **The storage folder** (``~/.local/share/opencode/storage/``, OpenCode before its SQLite
  database, and still on disk after the migration): ``session/<projectID>/<sessionID>.json``,
  ``message/<sessionID>/<messageID>.json`` and ``part/<messageID>/<partID>.json``, ids that
  sort in time order. Given to ``scan`` (or met in a walk) the folder is read as one
  transcript with a run per session, its messages and their parts in id order; a
  ``session/<projectID>/<sessionID>.json`` named alone is read as that one session. A
  folder beside an ``opencode.db`` was migrated into it, so a walk reads the database only.
- **The database** (``~/.local/share/opencode/opencode.db``, ``opencode-<channel>.db``):
  tables ``message`` (``id``, ``session_id``, ``time_created``, ``data``) and ``part``
  (``id``, ``message_id``, ``session_id``, ``data``), ``data`` the record as JSON without
  its ids. It is opened read-only (``mode=ro``), with the stdlib ``sqlite3``. Sessions that
  have rows only in the newer ``session_message`` table (OpenCode's V2 message model, not
  read here) are counted as skipped, so such a file is a doubt, never an all-clear.

A call is a part ``{"type": "tool", "tool", "callID", "state": {"status", "input", ...}}``.
``completed`` states carry ``output`` (the text the model was shown) and ``metadata``;
``error`` states carry ``error`` (a failure, also for a call the user interrupted, whose
partial output is in ``metadata.output``); ``pending`` / ``running`` calls never finished
(OpenCode was stopped, or the session was still running): they are counted with no
outcome, and a note says how many. The ``bash`` tool completes with ``metadata.exit``, the
command's exit code: a non-zero code is a failure, and so is a command OpenCode killed
(``exit`` null and its ``<bash_metadata>`` note, or the older ``(Command timed out ...)`` /
``(Command was aborted)`` line, at the end of the output). The tool parts of one assistant
message are a batch (each model step is one message in current releases; in older ones a
``step-start`` part opens each step of a message, and a step's parts are the batch). Tokens
are the step's ``step-finish`` count, else the message's, shared among its calls. A
``compaction`` part (the user message OpenCode adds when it compacts) arms the
post-compaction guard. Part types this reader does not know are noted, and counted as
skipped calls when their type names a tool.
"""

from __future__ import annotations

import os
import sqlite3
import urllib.parse
from collections.abc import Iterable, Mapping, Sequence
from typing import Final

from loopwatch.host_outcome import opencode_bash_failed
from loopwatch.transcripts._common import (
    CallBook,
    CallDraft,
    Read,
    RunAssembler,
    decode_text,
    optional_id,
    parse_json,
    split_tokens,
)
from loopwatch.transcripts.model import Compaction, NotATranscript, TranscriptError
from loopwatch.transcripts.paths import (
    DEFAULT_MAX_FILE_BYTES,
    check_readable,
    read_bytes,
)

#: Part types that hold no call (``message-v2.ts``'s ``Part`` union, less ``tool``).
_KNOWN_PARTS: Final = frozenset(
    {
        "text",
        "reasoning",
        "file",
        "step-start",
        "step-finish",
        "snapshot",
        "patch",
        "agent",
        "retry",
        "subtask",
        "compaction",
    }
)
#: The leading bytes of every SQLite 3 database file.
SQLITE_MAGIC: Final = b"SQLite format 3\x00"

Session = tuple[str | None, Sequence[tuple[object, Sequence[object]]]]
"""One session: its id, and its messages as ``(info, parts)`` pairs, in order."""


def _step_tokens(part: Mapping[str, object]) -> int | None:
    tokens = part.get("tokens")
    if not isinstance(tokens, Mapping):
        return None
    total = tokens.get("total")
    if isinstance(total, int) and not isinstance(total, bool) and total >= 0:
        return total
    count = 0
    found = False
    cache = tokens.get("cache")
    values = [tokens.get(k) for k in ("input", "output", "reasoning")]
    if isinstance(cache, Mapping):
        values += [cache.get("read"), cache.get("write")]
    for value in values:
        if isinstance(value, (int, float)) and not isinstance(value, bool) and value >= 0:
            count += int(value)
            found = True
    return count if found else None


class _SessionReader:
    """Reads the messages of one session into ``book`` (one run, ``run_id`` the session)."""

    def __init__(self, book: CallBook, path: str) -> None:
        self.book = book
        self.path = path
        self.unfinished = 0
        self.compactions = 0

    def read(self, session: Session) -> None:
        run_id, messages = session
        self.book.runs.open(run_id)
        for number, (info, parts) in enumerate(messages, start=1):
            message_tokens = None
            if isinstance(info, Mapping):
                message_tokens = _step_tokens(info)
            steps: list[list[tuple[Mapping[str, object], int | None]]] = [[]]
            step_tokens: list[int | None] = [None]
            for part in parts:
                if not isinstance(part, Mapping):
                    raise TranscriptError(
                        self.path, None, f"message {number}: a part is not a JSON object"
                    )
                kind = part.get("type")
                if kind == "step-start" and steps[-1]:
                    steps.append([])
                    step_tokens.append(None)
                elif kind == "step-finish":
                    step_tokens[-1] = _step_tokens(part)
                elif kind == "tool":
                    steps[-1].append((part, number))
                elif kind == "compaction":
                    self.compactions += 1
                    self.book.runs.add(run_id, Compaction(run_id=run_id))
                elif not isinstance(kind, str) or kind not in _KNOWN_PARTS:
                    named = str(kind)[:60] if kind is not None else "(no type)"
                    is_call = isinstance(kind, str) and "tool" in kind.lower()
                    self.book.skip(f"{named} part", call=is_call)
            single = len(steps) == 1
            for calls, tokens in zip(steps, step_tokens, strict=True):
                total = tokens if tokens is not None else (message_tokens if single else None)
                self._calls(run_id, calls, total)

    def _calls(
        self,
        run_id: str | None,
        calls: Sequence[tuple[Mapping[str, object], int | None]],
        tokens: int | None,
    ) -> None:
        batch = self.book.batch_for(len(calls))
        for (part, number), share in zip(calls, split_tokens(tokens, len(calls)), strict=True):
            tool = part.get("tool")
            if not isinstance(tool, str):
                raise TranscriptError(
                    self.path, None, f'message {number}: a tool part needs a string "tool"'
                )
            call_id = optional_id(part.get("callID"), self.path, None, "callID")
            state = part.get("state")
            state = state if isinstance(state, Mapping) else {}
            draft = self.book.call(
                run_id, tool, state.get("input", {}), call_id, tokens=share, batch=batch
            )
            if draft is None:
                continue
            if call_id:
                self.book.pending.pop(call_id, None)  # the outcome is on the part itself
            self._settle(draft, tool, state)

    def _settle(self, draft: CallDraft, tool: str, state: Mapping[str, object]) -> None:
        status = state.get("status")
        if status == "completed":
            output = state.get("output")
            if tool == "bash" and opencode_bash_failed(state.get("metadata"), output):
                draft.error = output if output not in (None, "") else "exit code non-zero"
            else:
                draft.result = output
        elif status == "error":
            error = state.get("error")
            draft.error = error if isinstance(error, str) and error else "error"
        elif status in ("pending", "running"):
            self.unfinished += 1
        else:
            self.book.skip(f"tool state {str(status)[:40]}", call=True)

    def finish(self, *extra: str) -> Read:
        read = self.book.finish()
        notes: list[str] = []
        if self.unfinished:
            calls = "call" if self.unfinished == 1 else "calls"
            notes.append(
                f"{self.unfinished} {calls} never finished (pending or running: OpenCode "
                "stopped, or the session was still running): counted with no outcome"
            )
        return read.with_notes(*notes, *extra)


def read_opencode_sessions(sessions: Iterable[Session], path: str, *extra: str) -> Read:
    """Read OpenCode sessions (each ``(session id, [(message info, parts), ...])``), a run
    each.

    Raises:
        TranscriptError: a part that is not an object, or a tool part without a name.
    """
    reader = _SessionReader(CallBook(RunAssembler()), path)
    for session in sessions:
        reader.read(session)
    return reader.finish(*extra)


def is_opencode_export(document: Mapping[str, object]) -> bool:
    """Whether a JSON object is ``opencode export`` output (``info`` + ``messages`` of
    ``{"info", "parts"}``)."""
    messages = document.get("messages")
    if not isinstance(document.get("info"), Mapping) or not isinstance(messages, list):
        return False
    return any(
        isinstance(m, Mapping) and "info" in m and isinstance(m.get("parts"), list)
        for m in messages
    )


def read_opencode_export(document: Mapping[str, object], path: str) -> Read:
    """Read ``opencode export`` output as one run (the session).

    Raises:
        TranscriptError: a message that is not ``{"info", "parts": [...]}``.
    """
    info = document.get("info")
    session_id = info.get("id") if isinstance(info, Mapping) else None
    messages: list[tuple[object, Sequence[object]]] = []
    raw = document.get("messages")
    for number, message in enumerate(raw if isinstance(raw, list) else [], start=1):
        if not isinstance(message, Mapping) or not isinstance(message.get("parts"), list):
            raise TranscriptError(path, None, f'message {number}: expected {{"info", "parts"}}')
        messages.append((message.get("info"), message["parts"]))
    run_id = session_id if isinstance(session_id, str) else None
    return read_opencode_sessions([(run_id, messages)], path)


# --- the storage folder --------------------------------------------------------------------


def _json_files(folder: str) -> list[str]:
    try:
        names = sorted(e.name for e in os.scandir(folder) if e.name.endswith(".json"))
    except OSError:
        return []
    return [os.path.join(folder, name) for name in names if not name.startswith(".")]


class _Budget:
    """Reads the many small files of a storage folder within one size limit; a file that
    cannot be read or parsed is counted (it may hold a call), never fatal to the others."""

    def __init__(self, max_bytes: int) -> None:
        self.left = max_bytes
        self.bad: list[str] = []

    def load(self, path: str) -> object:
        try:
            data = read_bytes(path, max_bytes=max(self.left, 0))
            self.left -= len(data)
            return parse_json(decode_text(data, path), path, 1)
        except TranscriptError as exc:
            if self.left <= 0 or "limit" in exc.reason:
                reason = f"the storage folder is too big: {exc.reason}"
                raise TranscriptError(path, None, reason) from exc
            self.bad.append(exc.location + ": " + exc.reason)
            return None


def _first_message(folder: str, session_id: str | None) -> tuple[int, str]:
    files = _json_files(os.path.join(folder, "message", session_id or ""))
    return (0, os.path.basename(files[0])) if files else (1, session_id or "")


def read_storage(
    folder: str, *, session_id: str | None = None, max_bytes: int = DEFAULT_MAX_FILE_BYTES
) -> Read:
    """Read an OpenCode storage folder (every session, or only ``session_id``).

    Raises:
        TranscriptError: the folder holds more than ``max_bytes``, or a malformed part.
    """
    budget = _Budget(max_bytes)
    if session_id is None:
        ids = sorted(
            os.path.basename(file)[: -len(".json")]
            for project in sorted(os.listdir(os.path.join(folder, "session")))
            for file in _json_files(os.path.join(folder, "session", project))
        )
        listed = set(ids)
        # Messages whose session file is gone still hold calls.
        ids += sorted(
            name
            for name in os.listdir(os.path.join(folder, "message"))
            if name not in listed and not name.startswith(".")
        )
    else:
        ids = [session_id]
    sessions: list[Session] = []
    skipped = 0
    for sid in ids:
        messages: list[tuple[object, Sequence[object]]] = []
        for file in _json_files(os.path.join(folder, "message", sid)):
            message_id = os.path.basename(file)[: -len(".json")]
            info = budget.load(file)
            parts = [budget.load(p) for p in _json_files(os.path.join(folder, "part", message_id))]
            skipped += sum(1 for p in parts if p is None)
            messages.append((info, [p for p in parts if p is not None]))
        sessions.append((sid, messages))
    # Session ids sort newest first (OpenCode makes them descending); message ids sort in
    # time order, so the runs come in the order their first messages were written.
    sessions.sort(key=lambda session: _first_message(folder, session[0]))
    notes: list[str] = []
    if budget.bad:
        more = f" (and {len(budget.bad) - 1} more)" if len(budget.bad) > 1 else ""
        notes.append(f"{len(budget.bad)} storage file(s) not read: {budget.bad[0]}{more}")
    read = read_opencode_sessions(sessions, folder, *notes)
    return Read(read.runs, read.unmatched, read.notes, read.skipped + skipped)


# --- the database ----------------------------------------------------------------------------


def is_database(data: bytes) -> bool:
    """Whether ``data`` (a file's first bytes) is a SQLite database."""
    return data.startswith(SQLITE_MAGIC)


def read_database(path: str, *, max_bytes: int = DEFAULT_MAX_FILE_BYTES) -> Read:
    """Read OpenCode's SQLite database (opened read-only), a run per session.

    Raises:
        NotATranscript: a SQLite file without OpenCode's ``message`` and ``part`` tables.
        TranscriptError: the file cannot be opened or read, is too big, or has bad rows.
    """
    try:
        info = os.stat(path)
    except OSError as exc:
        raise TranscriptError(path, None, f"cannot read: {exc.strerror or exc}") from exc
    check_readable(path, info, max_bytes)
    uri = "file:" + urllib.parse.quote(os.path.abspath(path)) + "?mode=ro"
    try:
        connection = sqlite3.connect(uri, uri=True)
    except sqlite3.Error as exc:
        raise TranscriptError(path, None, f"cannot open the SQLite database: {exc}") from exc
    try:
        return _read_rows(connection, path)
    except sqlite3.Error as exc:
        raise TranscriptError(path, None, f"cannot read the SQLite database: {exc}") from exc
    finally:
        connection.close()


def _row_json(raw: object, path: str, what: str) -> object:
    if isinstance(raw, bytes):
        raw = decode_text(raw, path)
    if not isinstance(raw, str):
        raise TranscriptError(path, None, f"{what}: the data column is not JSON text")
    try:
        return parse_json(raw, path, None)
    except TranscriptError as exc:
        raise TranscriptError(path, None, f"{what}: {exc.reason}") from exc


def _read_rows(connection: sqlite3.Connection, path: str) -> Read:
    tables = {row[0] for row in connection.execute("SELECT name FROM sqlite_master")}
    if not {"message", "part"} <= tables:
        names = ", ".join(sorted(str(t) for t in tables)[:8]) or "none"
        raise NotATranscript(
            path, None, f"a SQLite database without OpenCode's message and part tables ({names})"
        )
    parts: dict[str, list[object]] = {}
    for part_id, message_id, data in connection.execute(
        "SELECT id, message_id, data FROM part ORDER BY message_id, id"
    ):
        parts.setdefault(str(message_id), []).append(_row_json(data, path, f"part {part_id}"))
    order: dict[str | None, list[tuple[object, Sequence[object]]]] = {}
    for message_id, session_id, data in connection.execute(
        "SELECT id, session_id, data FROM message ORDER BY time_created, id"
    ):
        info = _row_json(data, path, f"message {message_id}")
        sid = session_id if isinstance(session_id, str) else None
        order.setdefault(sid, []).append((info, parts.pop(str(message_id), [])))
    notes: list[str] = []
    skipped = 0
    if parts:
        orphans = sum(len(p) for p in parts.values())
        notes.append(f"{orphans} part(s) of messages not in the message table: not read")
        skipped += sum(
            1
            for p in parts.values()
            for x in p
            if isinstance(x, Mapping) and x.get("type") == "tool"
        )
    if "session_message" in tables:
        v2_only = [
            str(row[0])
            for row in connection.execute("SELECT DISTINCT session_id FROM session_message")
            if row[0] not in order
        ]
        if v2_only:
            skipped += len(v2_only)
            notes.append(
                f"{len(v2_only)} session(s) recorded only in session_message (OpenCode's "
                f"newer message table, not read: their calls are not replayed), e.g. {v2_only[0]}"
            )
    read = read_opencode_sessions(list(order.items()), path, *notes)
    return Read(read.runs, read.unmatched, read.notes, read.skipped + skipped)


__all__ = [
    "SQLITE_MAGIC",
    "is_database",
    "is_opencode_export",
    "read_database",
    "read_opencode_export",
    "read_opencode_sessions",
    "read_storage",
]
