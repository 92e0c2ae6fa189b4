"""The SQLite store: one session history shared by every process on one machine.

Coding agents run their hooks as a new process per tool call, so a session's history must
outlive each process. A SQLite file does that with the standard library alone: WAL mode
lets readers run beside the one writer, every operation is one ``BEGIN IMMEDIATE``
transaction (the write lock is taken up front, so two processes never both read and then
both append), and a process killed in the middle of a transaction leaves nothing behind:
SQLite rolls the unfinished transaction back and the OS releases its lock.

One step further than the Redis store: :meth:`SqliteStore.session_lock` holds a single
transaction across the whole of a ``before_call`` (its ``begin_call``, the detection in
Python and the ``cancel_call`` or bucket update it decides), so even a blocked call's
take-back is atomic with respect to other processes. The price is that detection runs
while this machine's other hooks wait; it takes microseconds.

Layout (schema version :data:`SCHEMA_VERSION`, kept in ``PRAGMA user_version``): tables
``sessions``, ``records``, ``buckets``, ``guards`` and ``notes`` (small per-call notes of
the hook commands, see :meth:`SqliteStore.put_note`). Text fields are stored as ASCII JSON
tokens (as in the Redis store), so every Python ``str`` the guard may produce, lone
surrogates and NUL included, round-trips exactly and compares by plain equality. Records
hold digests only, never raw arguments or results.
"""

from __future__ import annotations

import json
import logging
import math
import os
import sqlite3
import threading
import time
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager, suppress
from typing import TYPE_CHECKING, Any, Final

from loopwatch.core.records import ToolCallRecord
from loopwatch.detectors.compaction import GuardSnapshot, GuardVerdict
from loopwatch.stores._sqlite_schema import (
    INSERT_RECORD,
    NO_GUARD,
    NULL,
    RECORD_COLUMNS,
    SCHEMA,
    SCHEMA_VERSION,
    SESSION_TABLES,
    create_private,
    fields_of,
    path_text,
    read_only_reason,
    record_of,
    token,
    untoken,
    verdict_of,
)
from loopwatch.stores.base import GuardSpec, OutcomeWrite, Store, StoreError
from loopwatch.stores.memory.store import MAX_WARNING_KEYS

if TYPE_CHECKING:
    from pathlib import Path

DEFAULT_IDLE_TTL_S: Final = 1800.0
DEFAULT_MAX_SESSIONS: Final = 10_000
#: How long an operation waits for another process's transaction before failing (then
#: the guard's failure policy applies): long enough for a burst of parallel hooks.
DEFAULT_BUSY_TIMEOUT_S: Final = 2.0
#: Remembered record ids of ``begin_call`` appends, for ``cancel_call`` (as in Redis).
_MAX_PENDING_NONCES: Final = 4096
#: How often (seconds) a transaction first checks that the path is still the open file.
FILE_CHECK_INTERVAL_S: Final = 1.0
#: SQLite's primary result code of a write to a read-only database (extended codes share
#: its low byte).
SQLITE_READONLY: Final = 8

logger = logging.getLogger("loopwatch.store")


#: SQLite's result code for "the file is locked by another connection" (``SQLITE_BUSY``).
_SQLITE_BUSY: Final = 5


def _is_busy(exc: sqlite3.Error) -> bool:
    """Whether SQLite refused because another connection holds the file (``SQLITE_BUSY``,
    extended codes included); Python 3.10 gives no code, only the message."""
    code = getattr(exc, "sqlite_errorcode", None)
    if code is None:
        return "database is locked" in str(exc)
    return bool(code & 0xFF == _SQLITE_BUSY)


class SqliteStore(Store):
    """Session state in a SQLite file, shared by every process and thread on this machine.

    Use it where each tool call is its own process (the ``loopwatch hook`` commands), or
    for several worker processes on one host without a Redis. A file on a network file
    system is not supported (SQLite's locking needs a local disk).

    Args:
        path: the database file; created ``0600`` when missing. Its folder must exist:
            it is not created (a typo in a path would otherwise make a new, empty store).
        idle_ttl_s: forget a session untouched for longer than this many seconds of the
            ``LoopGuard`` clock (``None``: never). Expired sessions are deleted from the
            file whenever a new session starts.
        max_sessions: how many sessions to keep; a new session beyond it deletes the
            least recently touched ones.
        busy_timeout_s: how long an operation waits for another process's transaction
            before it fails with :class:`StoreError` (then the failure policy applies).
        fail_open: allow calls when the store fails (default) or block them.

    Raises:
        ValueError: a bad option value, or the path ``":memory:"``.
        TypeError: a ``fail_open`` that is not a ``bool`` (``"false"`` would be true).
        StoreError: the file cannot be opened (its folder does not exist, it is a
            folder, the file or its folder is read-only for this user, ...; the message
            names the path and, for a read-only one, which) or was written by a newer
            schema. At call time a store that cannot write (its file replaced by a
            read-only one) raises :class:`StoreError` to the guard, which applies
            ``fail_open`` and logs the error, path included; a file made read-only
            while open is still written through the open file.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        idle_ttl_s: float | None = DEFAULT_IDLE_TTL_S,
        max_sessions: int = DEFAULT_MAX_SESSIONS,
        busy_timeout_s: float = DEFAULT_BUSY_TIMEOUT_S,
        fail_open: bool = True,
    ) -> None:
        if idle_ttl_s is not None and (
            isinstance(idle_ttl_s, bool)
            or not isinstance(idle_ttl_s, (int, float))
            or not 0 < idle_ttl_s < math.inf
        ):
            raise ValueError("idle_ttl_s must be a positive number of seconds or None")
        if isinstance(max_sessions, bool) or not isinstance(max_sessions, int) or max_sessions < 1:
            raise ValueError("max_sessions must be an integer >= 1")
        if (
            isinstance(busy_timeout_s, bool)
            or not isinstance(busy_timeout_s, (int, float))
            or not 0 <= busy_timeout_s < math.inf
        ):
            raise ValueError("busy_timeout_s must be a number of seconds >= 0")
        self._path = path_text(path)
        if self._path == ":memory:":
            # sqlite3's private in-memory database: shared with no other process or store,
            # which is the one thing this store is for (and a file would be created).
            raise ValueError("path ':memory:' is not a file: use MemoryStore or memory://")
        self.idle_ttl_s = None if idle_ttl_s is None else float(idle_ttl_s)
        self.max_sessions = max_sessions
        self.busy_timeout_s = float(busy_timeout_s)
        if not isinstance(fail_open, bool):
            raise TypeError(f"fail_open must be a bool, not {type(fail_open).__name__}")
        self.fail_open = fail_open
        self._lock = threading.RLock()
        self._depth = 0
        self._nonces: OrderedDict[int, tuple[ToolCallRecord, int]] = OrderedDict()
        self._open()

    def _open(self) -> None:
        """Open (or create) the file and remember which file it is (:meth:`_same_file`)."""
        try:
            create_private(self._path)
            self._db = sqlite3.connect(
                self._path,
                timeout=self.busy_timeout_s,
                isolation_level=None,  # transactions are ours: BEGIN IMMEDIATE ... COMMIT
                check_same_thread=False,  # serialised by self._lock
            )
            self._setup()
            self._file_id = _file_id(self._path)
        except (OSError, sqlite3.Error) as exc:
            raise StoreError(
                f"cannot open the SQLite store {self._path!r}: {exc}{read_only_reason(self._path)}"
            ) from exc
        self._checked_at = time.monotonic()

    def _failed(self, what: str, exc: sqlite3.Error) -> StoreError:
        """The :class:`StoreError` of a failed operation, naming the file (and, for a
        read-only one, why: the file or its folder is not writable by this user)."""
        code = getattr(exc, "sqlite_errorcode", None)
        readonly = (
            code & 0xFF == SQLITE_READONLY
            if isinstance(code, int)
            else "readonly" in str(exc)  # Python 3.10: no error code on the exception
        )
        reason = read_only_reason(self._path) if readonly else ""
        return StoreError(f"sqlite: {what} ({self._path!r}): {exc}{reason}")

    def _same_file(self) -> None:
        """Reopen when the path no longer names the open file (deleted, or replaced).

        A long-running process (``loopwatch serve``, an agent's guard) would go on writing
        to a deleted file without an error, while every new process (each hook event)
        creates a new, empty one at the path: two histories that never meet. Checked at
        most once per :data:`FILE_CHECK_INTERVAL_S`, outside any transaction.
        """
        now = time.monotonic()
        if now - self._checked_at < FILE_CHECK_INTERVAL_S:
            return
        self._checked_at = now
        try:
            current: tuple[int, int] | None = _file_id(self._path)
        except OSError:
            current = None
        if current == self._file_id:
            return
        logger.warning(
            "loopwatch: the SQLite store %r is no longer the file it opened (%s): reopening",
            self._path,
            "deleted" if current is None else "replaced",
        )
        with suppress(sqlite3.Error):
            self._db.close()
        self._open()

    @property
    def path(self) -> Path:
        """The database file (``pathlib`` is imported here, not by every hook process)."""
        from pathlib import Path

        return Path(self._path)

    def _setup(self) -> None:
        db = self._db
        self._switch_to_wal()
        # NORMAL is durable across a crashed or killed process in WAL mode (only a power
        # loss may drop the latest transactions), and spares an fsync per tool call.
        db.execute("PRAGMA synchronous=NORMAL")
        version = db.execute("PRAGMA user_version").fetchone()[0]
        if version == SCHEMA_VERSION:
            return
        if version > SCHEMA_VERSION:
            raise StoreError(
                f"the SQLite store {self._path!r} has schema version {version}; this "
                f"loopwatch knows version {SCHEMA_VERSION} (upgrade loopwatch or use another file)"
            )
        db.execute("BEGIN IMMEDIATE")
        try:
            for statement in SCHEMA:
                db.execute(statement)
            db.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise

    def _switch_to_wal(self) -> None:
        """``PRAGMA journal_mode=WAL``, waiting for the file as the busy timeout says.

        The processes that open a new file at once (hooks of parallel tool calls) race to
        switch it to WAL, and SQLite answers the losers "database is locked" at once,
        without calling its busy handler: the switch is retried here, as the handler would
        wait, until the busy timeout has passed.
        """
        deadline = time.monotonic() + self.busy_timeout_s
        pause = 0.001
        while True:
            try:
                self._db.execute("PRAGMA journal_mode=WAL")
                return
            except sqlite3.OperationalError as exc:
                if not _is_busy(exc) or time.monotonic() + pause > deadline:
                    raise
            time.sleep(pause)
            pause = min(pause * 2, 0.05)

    def __repr__(self) -> str:
        return (
            f"SqliteStore({self._path!r}, idle_ttl_s={self.idle_ttl_s!r}, "
            f"max_sessions={self.max_sessions!r}, fail_open={self.fail_open!r})"
        )

    # --- transactions --------------------------------------------------------------------

    @contextmanager
    def _tx(self, write: bool = True) -> Iterator[sqlite3.Connection]:
        """One transaction (or a part of the one :meth:`session_lock` holds).

        Every sqlite3 error becomes :class:`StoreError`; a failed transaction is rolled
        back, so the file never holds half an operation.
        """
        with self._lock:
            if self._depth:
                try:
                    yield self._db
                except sqlite3.Error as exc:
                    raise self._failed("operation failed", exc) from exc
                return
            self._same_file()
            db = self._db
            try:
                db.execute("BEGIN IMMEDIATE" if write else "BEGIN")
            except sqlite3.Error as exc:
                raise self._failed("cannot begin a transaction", exc) from exc
            self._depth = 1
            try:
                yield db
            except BaseException as exc:
                self._depth = 0
                self._rollback()
                if isinstance(exc, sqlite3.Error):
                    raise self._failed("operation failed", exc) from exc
                raise
            self._depth = 0
            try:
                db.execute("COMMIT")
            except sqlite3.Error as exc:
                self._rollback()
                raise self._failed("commit failed", exc) from exc

    def _rollback(self) -> None:
        with suppress(sqlite3.Error):  # no transaction left to roll back
            self._db.execute("ROLLBACK")

    @contextmanager
    def _held(self) -> Iterator[None]:
        """The transaction of :meth:`session_lock`: committed unless the store failed."""
        with self._lock:
            if self._depth:
                yield
                return
            self._same_file()
            try:
                self._db.execute("BEGIN IMMEDIATE")
            except sqlite3.Error as exc:
                raise self._failed("cannot begin a transaction", exc) from exc
            self._depth = 1
            failed = True
            try:
                yield
                failed = False
            except StoreError:
                raise
            except BaseException:
                # Detection failed after its reads and writes: keep the writes, as the
                # memory store does (the guard fails open and records the outcome later).
                failed = False
                raise
            finally:
                self._depth = 0
                if failed:
                    self._rollback()
                else:
                    try:
                        self._db.execute("COMMIT")
                    except sqlite3.Error as exc:
                        # (a full disk, an I/O error: the writes are lost, which the guard
                        # must hear of, to fail open and log it, not go on as if recorded)
                        self._rollback()
                        raise self._failed("commit failed", exc) from exc

    def session_lock(self, session_key: str) -> AbstractContextManager[object]:
        """One transaction around a whole guard operation, across processes.

        ``LoopGuard`` runs a ``before_call`` (store reads, detection, the writes it
        decides) inside this, so a blocked call's ``cancel_call`` is atomic with its
        ``begin_call``: no other process sees the pending record of a blocked call.
        """
        return self._held()

    # --- sessions -------------------------------------------------------------------------

    def _expired(self, touched: float | None, now: float) -> bool:
        ttl = self.idle_ttl_s
        return touched is not None and ttl is not None and now - touched > ttl

    @staticmethod
    def _drop(db: sqlite3.Connection, skey: str) -> None:
        for table in SESSION_TABLES:
            db.execute(f"DELETE FROM {table} WHERE skey = ?", (skey,))

    def _reclaim(self, db: sqlite3.Connection, now: float) -> None:
        """Delete expired sessions, then the least recently touched beyond the cap."""
        doomed: list[str] = []
        if self.idle_ttl_s is not None:
            rows = db.execute(
                "SELECT skey FROM sessions WHERE touched < ?", (now - self.idle_ttl_s,)
            ).fetchall()
            doomed = [row[0] for row in rows]
        for skey in doomed:
            self._drop(db, skey)
        (count,) = db.execute("SELECT COUNT(*) FROM sessions").fetchone()
        excess = count - self.max_sessions + 1  # room for the session being created
        if excess > 0:
            rows = db.execute(
                "SELECT skey FROM sessions ORDER BY touched, skey LIMIT ?", (excess,)
            ).fetchall()
            for row in rows:
                self._drop(db, row[0])

    def _touch(self, db: sqlite3.Connection, skey: str, now: float) -> tuple[int, int]:
        """The live session, created if needed and marked touched; returns its counters
        ``(nonce, bucket_order)``."""
        row = db.execute(
            "SELECT touched, nonce, bucket_order FROM sessions WHERE skey = ?", (skey,)
        ).fetchone()
        if row is not None and self._expired(row[0], now):
            self._drop(db, skey)
            row = None
        if row is None:
            self._reclaim(db, now)
            db.execute("INSERT INTO sessions (skey, touched) VALUES (?, ?)", (skey, now))
            return 0, 0
        db.execute("UPDATE sessions SET touched = ? WHERE skey = ?", (now, skey))
        return int(row[1]), int(row[2])

    def _live(self, db: sqlite3.Connection, skey: str, now: float) -> bool:
        """True when the session exists and has not expired (read-only accessors)."""
        row = db.execute("SELECT touched FROM sessions WHERE skey = ?", (skey,)).fetchone()
        return row is not None and not self._expired(row[0], now)

    @staticmethod
    def _forget_trimmed(db: sqlite3.Connection, skey: str) -> None:
        db.execute(
            "UPDATE sessions SET trimmed_nonce = NULL, trimmed = NULL WHERE skey = ?", (skey,)
        )

    @staticmethod
    def _next_nonce(db: sqlite3.Connection, skey: str, nonce: int) -> int:
        db.execute("UPDATE sessions SET nonce = ? WHERE skey = ?", (nonce + 1, skey))
        return nonce + 1

    @staticmethod
    def _trim(db: sqlite3.Connection, skey: str, history_size: int) -> list[Any]:
        """Keep the newest ``history_size`` records; returns the rows deleted."""
        (count,) = db.execute("SELECT COUNT(*) FROM records WHERE skey = ?", (skey,)).fetchone()
        excess = count - max(int(history_size), 0)
        if excess <= 0:
            return []
        rows = db.execute(
            f"SELECT {RECORD_COLUMNS} FROM records WHERE skey = ? ORDER BY seq LIMIT ?",
            (skey, excess),
        ).fetchall()
        db.execute("DELETE FROM records WHERE skey = ? AND seq <= ?", (skey, rows[-1][0]))
        return rows

    # --- nonces ---------------------------------------------------------------------------

    def _remember_nonce(self, pending: ToolCallRecord, nonce: int) -> None:
        self._nonces[id(pending)] = (pending, nonce)
        if len(self._nonces) > _MAX_PENDING_NONCES:
            self._nonces.popitem(last=False)

    def _forget_nonce(self, pending: ToolCallRecord) -> int | None:
        entry = self._nonces.pop(id(pending), None)
        # The object is kept in the map, so its id cannot have been reused meanwhile.
        return entry[1] if entry is not None and entry[0] is pending else None

    # --- the Store interface ------------------------------------------------------------

    def begin_call(
        self,
        session_key: str,
        run_id: str | None,
        pending: ToolCallRecord | None,
        history_size: int,
        now: float,
    ) -> Sequence[ToolCallRecord]:
        skey = token(session_key)
        with self._tx() as db:
            nonce, _order = self._touch(db, skey, now)
            rows = db.execute(
                f"SELECT {RECORD_COLUMNS} FROM records WHERE skey = ? AND run = ? ORDER BY seq",
                (skey, token(run_id)),
            ).fetchall()
            scoped = [record_of(row) for row in rows]
            if pending is None:
                self._forget_trimmed(db, skey)
                return scoped
            nonce = self._next_nonce(db, skey, nonce)
            db.execute(INSERT_RECORD, (skey, nonce, *fields_of(pending)))
            trimmed = self._trim(db, skey, history_size)
            if trimmed:
                db.execute(
                    "UPDATE sessions SET trimmed_nonce = ?, trimmed = ? WHERE skey = ?",
                    (nonce, json.dumps(trimmed), skey),
                )
            else:
                self._forget_trimmed(db, skey)
            self._remember_nonce(pending, nonce)
            return scoped

    def cancel_call(self, session_key: str, pending: ToolCallRecord, now: float) -> None:
        skey = token(session_key)
        with self._tx() as db:
            nonce = self._forget_nonce(pending)
            self._touch(db, skey, now)
            kept = db.execute(
                "SELECT trimmed_nonce, trimmed FROM sessions WHERE skey = ?", (skey,)
            ).fetchone()
            self._forget_trimmed(db, skey)
            if nonce is not None:
                deleted = db.execute(
                    "DELETE FROM records WHERE skey = ? AND seq = ?", (skey, nonce)
                ).rowcount
                if deleted and kept is not None and kept[0] == nonce and kept[1]:
                    for row in json.loads(kept[1]):
                        db.execute(INSERT_RECORD, (skey, *row))
                return
            # Not from this store object: the newest pending record with these fields.
            fields = fields_of(pending)
            row = db.execute(
                "SELECT seq FROM records WHERE skey = ? AND run = ? AND tool = ? AND args = ? "
                "AND call = ? AND result = ? AND unknown = ? AND ts = ? AND facts = ? "
                "ORDER BY seq DESC LIMIT 1",
                (skey, *fields),
            ).fetchone()
            if row is not None and fields[4] == NULL:
                db.execute("DELETE FROM records WHERE skey = ? AND seq = ?", (skey, row[0]))

    def update_warning_bucket(self, session_key: str, key: str, bucket: int, now: float) -> bool:
        skey, key_token = token(session_key), token(key)
        with self._tx() as db:
            _nonce, order = self._touch(db, skey, now)
            self._forget_trimmed(db, skey)
            row = db.execute(
                "SELECT bucket FROM buckets WHERE skey = ? AND key = ?", (skey, key_token)
            ).fetchone()
            if bucket <= (0 if row is None else int(row[0])):
                return False
            if row is not None:  # a key already present keeps its insertion position
                db.execute(
                    "UPDATE buckets SET bucket = ? WHERE skey = ? AND key = ?",
                    (int(bucket), skey, key_token),
                )
                return True
            order += 1
            db.execute("UPDATE sessions SET bucket_order = ? WHERE skey = ?", (order, skey))
            db.execute(
                "INSERT INTO buckets (skey, key, bucket, ord) VALUES (?, ?, ?, ?)",
                (skey, key_token, int(bucket), order),
            )
            (count,) = db.execute("SELECT COUNT(*) FROM buckets WHERE skey = ?", (skey,)).fetchone()
            if count > MAX_WARNING_KEYS:
                db.execute(
                    "DELETE FROM buckets WHERE skey = ? AND ord = "
                    "(SELECT MIN(ord) FROM buckets WHERE skey = ?)",
                    (skey, skey),
                )
            return True

    def record_outcome(
        self, session_key: str, write: OutcomeWrite, guard: GuardSpec, now: float
    ) -> tuple[ToolCallRecord, GuardVerdict]:
        skey = token(session_key)
        run, tool, args = token(write.run_id), token(write.tool_name), token(write.args_hash)
        result = token(write.outcome.result_hash)
        unknown = token(write.outcome.unknown_tool_name)
        facts = token(write.facts)
        with self._tx() as db:
            nonce, _order = self._touch(db, skey, now)
            self._forget_trimmed(db, skey)
            query = (
                "SELECT seq FROM records WHERE skey = ? AND run = ? AND tool = ? AND args = ? "
                "AND result = 'null'"
            )
            params: tuple[Any, ...] = (skey, run, tool, args)
            if write.tool_call_id:
                query += " AND call = ?"
                params += (token(write.tool_call_id),)
            found = db.execute(query + " ORDER BY seq DESC LIMIT 1", params).fetchone()
            if found is not None:
                seq = int(found[0])
                db.execute(
                    "UPDATE records SET result = ?, unknown = ?, facts = ? "
                    "WHERE skey = ? AND seq = ?",
                    (result, unknown, facts, skey, seq),
                )
            else:
                seq = self._next_nonce(db, skey, nonce)
                db.execute(
                    INSERT_RECORD,
                    (
                        skey,
                        seq,
                        run,
                        tool,
                        args,
                        token(write.tool_call_id),
                        result,
                        unknown,
                        int(write.timestamp),
                        facts,
                    ),
                )
            stored = db.execute(
                f"SELECT {RECORD_COLUMNS} FROM records WHERE skey = ? AND seq = ?",
                (skey, seq),
            ).fetchone()
            self._trim(db, skey, write.history_size)
            record = record_of(stored)
            verdict = self._observe(db, skey, run, guard, (tool, args, result), record.tool_name)
            return record, verdict

    @staticmethod
    def _observe(
        db: sqlite3.Connection,
        skey: str,
        run: str,
        spec: GuardSpec,
        triple: tuple[str, str, str],
        tool_name: str,
    ) -> GuardVerdict:
        """``PostCompactionGuard.observe_quietly`` on the stored guard of (session, run)."""
        row = db.execute(
            "SELECT size, enabled, remaining, window FROM guards WHERE skey = ? AND run = ?",
            (skey, run),
        ).fetchone()
        if row is None:
            size, enabled, remaining, window = int(spec.window_size), bool(spec.enabled), 0, []
            db.execute(
                "INSERT INTO guards (skey, run, size, enabled, remaining, window) "
                "VALUES (?, ?, ?, ?, 0, '[]')",
                (skey, run, size, int(enabled)),
            )
        else:
            size, enabled, remaining = int(row[0]), bool(row[1]), int(row[2])
            window = json.loads(row[3])
        abort = armed = count = 0
        if enabled and remaining > 0:
            remaining -= 1
            entry = list(triple)
            window.append(entry)
            count = sum(1 for item in window if item == entry)
            armed = int(remaining > 0)
            abort = int(count >= size)
            db.execute(
                "UPDATE guards SET remaining = ?, window = ? WHERE skey = ? AND run = ?",
                (remaining, json.dumps(window), skey, run),
            )
        else:
            remaining = 0
        db.execute(
            "UPDATE guards SET verdict = ? WHERE skey = ? AND run = ?",
            (json.dumps([abort, armed, remaining, count, tool_name]), skey, run),
        )
        return verdict_of(abort, armed, remaining, count, tool_name, size)

    def arm_guard(
        self, session_key: str, run_id: str | None, guard: GuardSpec, now: float
    ) -> GuardSpec:
        skey, run = token(session_key), token(run_id)
        with self._tx() as db:
            self._touch(db, skey, now)
            self._forget_trimmed(db, skey)
            row = db.execute(
                "SELECT size, enabled FROM guards WHERE skey = ? AND run = ?", (skey, run)
            ).fetchone()
            if row is None:
                size, enabled = int(guard.window_size), bool(guard.enabled)
                db.execute(
                    "INSERT INTO guards (skey, run, size, enabled, remaining, window) "
                    "VALUES (?, ?, ?, ?, ?, '[]')",
                    (skey, run, size, int(enabled), size),
                )
            else:
                # Arming opens a fresh window; the last verdict is left as it is.
                size, enabled = int(row[0]), bool(row[1])
                db.execute(
                    "UPDATE guards SET remaining = ?, window = '[]' WHERE skey = ? AND run = ?",
                    (size, skey, run),
                )
            return GuardSpec(window_size=size, enabled=enabled)

    def history(self, session_key: str, now: float) -> tuple[ToolCallRecord, ...]:
        skey = token(session_key)
        with self._tx(write=False) as db:
            if not self._live(db, skey, now):
                return ()
            rows = db.execute(
                f"SELECT {RECORD_COLUMNS} FROM records WHERE skey = ? ORDER BY seq",
                (skey,),
            ).fetchall()
            return tuple(record_of(row) for row in rows)

    def _guard_row(self, session_key: str, run_id: str | None, now: float) -> Any:
        skey = token(session_key)
        with self._tx(write=False) as db:
            if not self._live(db, skey, now):
                return None
            return db.execute(
                "SELECT size, remaining, verdict FROM guards WHERE skey = ? AND run = ?",
                (skey, token(run_id)),
            ).fetchone()

    def guard_snapshot(self, session_key: str, run_id: str | None, now: float) -> GuardSnapshot:
        row = self._guard_row(session_key, run_id, now)
        if row is None:
            return NO_GUARD
        remaining = int(row[1])
        return GuardSnapshot(armed=remaining > 0, remaining_attempts=remaining)

    def last_guard_verdict(
        self, session_key: str, run_id: str | None, now: float
    ) -> GuardVerdict | None:
        row = self._guard_row(session_key, run_id, now)
        if row is None or row[2] is None:
            return None
        abort, armed, remaining, count, tool = json.loads(row[2])
        return verdict_of(abort, armed, remaining, count, tool, int(row[0]))

    def warning_buckets(self, session_key: str, now: float) -> dict[str, int]:
        """The session's warning buckets in insertion order (for tests and diagnostics)."""
        skey = token(session_key)
        with self._tx(write=False) as db:
            if not self._live(db, skey, now):
                return {}
            rows = db.execute(
                "SELECT key, bucket FROM buckets WHERE skey = ? ORDER BY ord", (skey,)
            ).fetchall()
        buckets: dict[str, int] = {}
        for key, bucket in rows:
            name = untoken(key)
            if name is not None:
                buckets[name] = int(bucket)
        return buckets

    def session_keys(self, now: float) -> list[tuple[str, float]]:
        """Every live session and when it was last touched, newest first (diagnostics)."""
        with self._tx(write=False) as db:
            rows = db.execute("SELECT skey, touched FROM sessions ORDER BY touched DESC").fetchall()
        live = []
        for skey, touched in rows:
            name = untoken(skey)
            if name is not None and not self._expired(touched, now):
                live.append((name, float(touched)))
        return live

    # --- notes (for the hook commands) ----------------------------------------------------

    def put_note(self, session_key: str, key: str, value: str, now: float) -> None:
        """Keep a short note of the session until :meth:`take_note` (or its expiry).

        The hook commands run each event in a new process; a note carries what one event
        decided to the next (the warning a ``PreToolUse`` emitted, shown by its
        ``PostToolUse``). Notes are the guard's own texts and ids, never tool data.
        """
        skey = token(session_key)
        with self._tx() as db:
            self._touch(db, skey, now)
            db.execute(
                "INSERT OR REPLACE INTO notes (skey, key, value) VALUES (?, ?, ?)",
                (skey, token(key), value),
            )

    def take_note(
        self, session_key: str, key: str, now: float, *, keep: bool = False
    ) -> str | None:
        """The note left by :meth:`put_note`, removed unless ``keep``; ``None`` if none."""
        skey, key_token = token(session_key), token(key)
        with self._tx(write=not keep) as db:
            if not self._live(db, skey, now):
                return None
            row = db.execute(
                "SELECT value FROM notes WHERE skey = ? AND key = ?", (skey, key_token)
            ).fetchone()
            if row is not None and not keep:
                db.execute("DELETE FROM notes WHERE skey = ? AND key = ?", (skey, key_token))
        return None if row is None else str(row[0])

    def close(self) -> None:
        """Close the connection (the file stays)."""
        with self._lock, suppress(sqlite3.Error):
            self._db.close()


def _file_id(path: str) -> tuple[int, int]:
    """Which file ``path`` names now (device, inode)."""
    found = os.stat(path)
    return found.st_dev, found.st_ino


__all__ = [
    "DEFAULT_BUSY_TIMEOUT_S",
    "DEFAULT_IDLE_TTL_S",
    "DEFAULT_MAX_SESSIONS",
    "FILE_CHECK_INTERVAL_S",
    "SCHEMA_VERSION",
    "SqliteStore",
]
