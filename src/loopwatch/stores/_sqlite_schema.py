"""The SQLite store's file layout and encoding (schema version 1), kept apart from the
store's operations in :mod:`loopwatch.stores.sqlite`.

Text fields are stored as ASCII JSON tokens (``null`` or a quoted string, as in the Redis
store), so every Python ``str`` the guard may produce (lone surrogates and NUL included)
round-trips exactly and equal values compare equal as plain column values.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from typing import Any, Final

from loopwatch import messages
from loopwatch.core.records import ToolCallRecord
from loopwatch.detectors.compaction import COMPACTION_LOOP_PERSISTED, GuardSnapshot, GuardVerdict

#: Version of the tables; a file written by a newer loopwatch is refused, not misread.
SCHEMA_VERSION: Final = 1
NULL: Final = "null"
NO_GUARD: Final = GuardSnapshot(armed=False, remaining_attempts=0)

SCHEMA: Final = (
    """CREATE TABLE IF NOT EXISTS sessions (
        skey TEXT PRIMARY KEY,
        touched REAL NOT NULL,
        nonce INTEGER NOT NULL DEFAULT 0,
        bucket_order INTEGER NOT NULL DEFAULT 0,
        trimmed_nonce INTEGER,
        trimmed TEXT
    ) WITHOUT ROWID""",
    "CREATE INDEX IF NOT EXISTS sessions_touched ON sessions (touched)",
    """CREATE TABLE IF NOT EXISTS records (
        skey TEXT NOT NULL,
        seq INTEGER NOT NULL,
        run TEXT NOT NULL,
        tool TEXT NOT NULL,
        args TEXT NOT NULL,
        call TEXT NOT NULL,
        result TEXT NOT NULL,
        unknown TEXT NOT NULL,
        ts INTEGER NOT NULL,
        facts TEXT NOT NULL,
        PRIMARY KEY (skey, seq)
    ) WITHOUT ROWID""",
    """CREATE TABLE IF NOT EXISTS buckets (
        skey TEXT NOT NULL,
        key TEXT NOT NULL,
        bucket INTEGER NOT NULL,
        ord INTEGER NOT NULL,
        PRIMARY KEY (skey, key)
    ) WITHOUT ROWID""",
    """CREATE TABLE IF NOT EXISTS guards (
        skey TEXT NOT NULL,
        run TEXT NOT NULL,
        size INTEGER NOT NULL,
        enabled INTEGER NOT NULL,
        remaining INTEGER NOT NULL,
        window TEXT NOT NULL,
        verdict TEXT,
        PRIMARY KEY (skey, run)
    ) WITHOUT ROWID""",
    """CREATE TABLE IF NOT EXISTS notes (
        skey TEXT NOT NULL,
        key TEXT NOT NULL,
        value TEXT NOT NULL,
        PRIMARY KEY (skey, key)
    ) WITHOUT ROWID""",
)
SESSION_TABLES: Final = ("records", "buckets", "guards", "notes", "sessions")
RECORD_COLUMNS: Final = "seq, run, tool, args, call, result, unknown, ts, facts"
INSERT_RECORD: Final = (
    "INSERT INTO records (skey, seq, run, tool, args, call, result, unknown, ts, facts) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)


def token(value: str | None) -> str:
    """A text field as an ASCII JSON token (``null`` for ``None``)."""
    if value is None:
        return NULL
    if value.isascii() and value.isprintable() and '"' not in value and "\\" not in value:
        return f'"{value}"'
    return json.dumps(value)


def untoken(token: str) -> str | None:
    if token == NULL:
        return None
    if "\\" not in token:
        return token[1:-1]
    value = json.loads(token)
    if not isinstance(value, str):
        raise ValueError(f"not a text token: {token!r}")
    return value


def record_of(row: Sequence[Any]) -> ToolCallRecord:
    """A stored row (``_RECORD_COLUMNS``) as a public record."""
    _seq, run, tool, args, call, result, unknown, ts, facts = row
    tool_name, args_hash = untoken(tool), untoken(args)
    if tool_name is None or args_hash is None:
        raise ValueError("malformed record: no tool name or args hash")
    return ToolCallRecord(
        tool_name=tool_name,
        args_hash=args_hash,
        tool_call_id=untoken(call),
        run_id=untoken(run),
        result_hash=untoken(result),
        unknown_tool_name=untoken(unknown),
        timestamp=int(ts),
        facts=untoken(facts),
    )


def verdict_of(
    abort: int, armed: int, remaining: int, count: int, tool: str | None, window_size: int
) -> GuardVerdict:
    """Rebuild a guard verdict; abort verdicts get their detector and message here."""
    if not abort:
        return GuardVerdict(should_abort=False, armed=bool(armed), remaining_attempts=remaining)
    tool_name = tool or ""
    return GuardVerdict(
        should_abort=True,
        armed=bool(armed),
        remaining_attempts=remaining,
        detector=COMPACTION_LOOP_PERSISTED,
        count=count,
        tool_name=tool_name,
        message=messages.COMPACTION_LOOP_PERSISTED.format(
            tool=tool_name, count=count, window_size=window_size
        ),
    )


def path_text(path: str | os.PathLike[str]) -> str:
    """``str(pathlib.Path(path))``, without importing ``pathlib`` on POSIX (a hook process
    opens one store: ``pathlib`` would cost it a few milliseconds, ``urllib.parse`` and
    ``ipaddress`` included).

    As ``PurePosixPath`` spells it: repeated slashes and ``.`` parts dropped (``..``
    kept), a leading ``//`` kept, ``.`` for nothing; a ``bytes`` path is a ``TypeError``.
    """
    text = os.fspath(path)
    if not isinstance(text, str):
        raise TypeError(
            "argument should be a str or an os.PathLike object where __fspath__ returns a "
            f"str, not {type(text).__name__!r}"
        )
    if os.name != "posix":
        from pathlib import Path

        return str(Path(text))
    root = "//" if text.startswith("//") and not text.startswith("///") else "/" * (text[:1] == "/")
    parts = [part for part in text.split("/") if part and part != "."]
    return root + "/".join(parts) if root or parts else "."


def create_private(path: str) -> None:
    """Create the database file readable by this user only, in a folder that must exist.

    SQLite gives the ``-wal`` and ``-shm`` files the permissions of the database file, so
    creating it ``0600`` here, before SQLite does, keeps all three private.

    A missing folder is refused, as ``sqlite3.connect`` refuses it: creating it would turn
    a typo in a path (``/var/lib/ap/loops.db``) into a new, empty store that nothing else
    reads, and a guard that silently detects nothing across processes.

    Raises:
        FileNotFoundError: the folder does not exist (the message names it).
    """
    folder = os.path.dirname(path) or "."
    if not os.path.isdir(folder):
        raise FileNotFoundError(
            f"its folder {folder!r} does not exist or is not a folder (create it first: "
            "loopwatch does not create folders)"
        )
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    os.close(fd)


def read_only_reason(path: str) -> str:
    """Why the store cannot write ``path``, when the file or its folder is read-only for
    this user (``""`` otherwise): appended to the error that names the path.

    SQLite needs both: the file, which every call writes, and its folder, where it
    creates the ``-wal`` and ``-shm`` files beside the file (its error for a read-only
    folder, "attempt to write a readonly database", names neither).
    """
    folder = os.path.dirname(path) or "."
    try:
        if os.path.exists(path) and not os.access(path, os.W_OK):
            return " (the file is read-only for this user: loopwatch writes every call to it)"
        if os.path.isdir(folder) and not os.access(folder, os.W_OK | os.X_OK):
            return (
                f" (its folder {folder!r} is not writable by this user: the store creates "
                "its file there, and SQLite its -wal and -shm files beside it)"
            )
    except (OSError, ValueError):  # an unreadable path: the error itself says enough
        return ""
    return ""


def fields_of(record: ToolCallRecord) -> tuple[str, str, str, str, str, str, int, str]:
    """A record's stored columns after ``seq``: run, tool, args, call, result, unknown,
    ts, facts."""
    return (
        token(record.run_id),
        token(record.tool_name),
        token(record.args_hash),
        token(record.tool_call_id),
        token(record.result_hash),
        token(record.unknown_tool_name),
        int(record.timestamp),
        token(record.facts),
    )


__all__ = [
    "INSERT_RECORD",
    "NO_GUARD",
    "NULL",
    "RECORD_COLUMNS",
    "SCHEMA",
    "SCHEMA_VERSION",
    "SESSION_TABLES",
    "create_private",
    "fields_of",
    "path_text",
    "read_only_reason",
    "record_of",
    "token",
    "untoken",
    "verdict_of",
]
