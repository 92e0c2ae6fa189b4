"""``RedisStore``: the Store interface as one Lua script per operation, sync and async.

Sync and async twins share all logic in a sans-I/O style: each operation is described by
an :class:`_Op` (script, keys, arguments, reply parser); only the call that sends it
differs. The wire format is :mod:`._codec`, the scripts :mod:`._scripts`, the clients
:mod:`._client`, the cool-down after a timeout :mod:`._breaker`.
"""

from __future__ import annotations

import inspect
import math
import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable, Sequence
from contextlib import AbstractAsyncContextManager, AbstractContextManager
from dataclasses import dataclass
from typing import Any, Final, Generic, TypeVar

from loopwatch.core.records import ToolCallRecord
from loopwatch.detectors.compaction import GuardSnapshot, GuardVerdict
from loopwatch.stores.base import GuardSpec, OutcomeWrite, Store, StoreError
from loopwatch.stores.memory.store import MAX_WARNING_KEYS
from loopwatch.stores.redis._breaker import DEFAULT_BREAKER_COOLDOWN_S, Breaker
from loopwatch.stores.redis._client import (
    DEFAULT_SOCKET_TIMEOUT_S,
    AsyncRedisClient,
    RedisClient,
    _looks_async,
    _resolve,
    build_clients,
)
from loopwatch.stores.redis._codec import (
    _body,
    _decode_record,
    _int,
    _records,
    _seq,
    _session_keys,
    _text,
    _token,
    _unknown_token,
    _untoken,
    _verdict,
)
from loopwatch.stores.redis._scripts import _is_noscript, _Script, _scripts

T = TypeVar("T")

DEFAULT_PREFIX: Final = "loopwatch"
DEFAULT_IDLE_TTL_S: Final = 1800.0

_NO_GUARD: Final = GuardSnapshot(armed=False, remaining_attempts=0)
#: Remembered nonces of records appended by ``begin_call`` (for ``cancel_call``); a
#: cancel follows its begin within one ``before_call``, so a small bound is plenty.
_MAX_PENDING_NONCES: Final = 4096
#: Sessions share this many in-process locks (by hash): a lock is held for one guard step.
_LOCK_STRIPES: Final = 64


# --- operations (sans I/O) ---------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Op(Generic[T]):
    """One store operation: a script, its keys and arguments, and the reply's parser."""

    script: _Script
    keys: tuple[bytes, ...]
    args: tuple[str, ...]
    parse: Callable[[Any], T]


class RedisStore(Store):
    """Session state in Redis (7+), Valkey or Redis Cluster, shared by every worker.

    Give it a client you built (``redis.Redis``, ``redis.cluster.RedisCluster``,
    ``valkey.Valkey``…) or use :meth:`from_url` / ``store_from_url("redis://…")``. With an
    asyncio client (``async_client=``) the guard's async twins do real asynchronous I/O;
    both clients may be given, so one store serves sync and async callers.

    Clients you pass in keep their own settings: give them a short ``socket_timeout``
    and no retries of writes (a retried script may append a record twice). Every client
    error, timeout or unexpected reply raises :class:`StoreError`, and ``LoopGuard``
    applies :attr:`fail_open`. Nothing needs resetting when Redis comes back: the next
    call reconnects, and a lost script is sent again.

    Each operation is atomic on the server, and any number of threads, tasks and
    processes may share a session. One limit, on a rare path: a blocked call's pending
    record is removed by a second round trip (``cancel_call``), and a call of the same
    session from another process that lands in between sees that record (one extra
    pending record, for that one call) without the oldest record its append trimmed; the
    cancel puts that record back unless the other call wrote to the session meanwhile
    (then the history holds one record fewer than its size, until the next append). The
    threads of one process, and the asyncio tasks of one loop, never land in between: the
    guard holds :meth:`session_lock` (:meth:`async_session_lock`) for the whole step.
    There is no ``max_sessions``: memory is bounded by the idle expiry and Redis's own
    policy.

    Args:
        client: a blocking client (anything with ``evalsha`` and ``eval``).
        async_client: an asyncio client with the same two methods.
        prefix: the first part of every key; must not contain ``{`` or ``}``.
        idle_ttl_s: forget a session untouched for longer than this many seconds
            (``None``: never), measured by Redis: the keys get a Redis expiry of that
            length, restarted by every touching operation.
        fail_open: allow calls when Redis fails (default) or block them (``False``).
        breaker_cooldown_s: after an operation timed out, skip Redis for this many
            seconds (operations raise :class:`StoreError` at once); ``0`` never skips.

    Idle expiry runs on Redis's clock only (relative ``PEXPIRE`` TTLs, restarted by every
    touching operation): workers whose clocks disagree still share one session. The
    ``LoopGuard`` clock stamps records, nothing else.

    A write whose reply timed out may still run when a paused Redis resumes (the command
    was sent; nothing can recall it). That is harmless by construction: the guard already
    treated the operation as failed and applied the failure policy, and the late write is
    the truth about the call (``begin_call``: the call was allowed and ran; an outcome: it
    happened). The worst case is one warning bucket marked as emitted whose warning the
    agent did not see, so that warning is shown at the next bucket instead.

    A run's post-compaction guard state is kept for the 256 most recent runs of a session
    (``MAX_RUN_GUARDS`` in ``_common.lua``); older runs' guards are dropped.

    Raises:
        ValueError: no client, or a bad prefix or TTL.
        TypeError: an asyncio client passed as ``client``, or a ``fail_open`` that is not
            a ``bool`` (``"false"`` would be true).
    """

    def __init__(
        self,
        client: RedisClient | None = None,
        *,
        async_client: AsyncRedisClient | None = None,
        prefix: str = DEFAULT_PREFIX,
        idle_ttl_s: float | None = DEFAULT_IDLE_TTL_S,
        fail_open: bool = True,
        breaker_cooldown_s: float = DEFAULT_BREAKER_COOLDOWN_S,
    ) -> None:
        if client is None and async_client is None:
            raise ValueError("RedisStore needs a client, an async_client, or both")
        if client is not None and _looks_async(client):
            raise TypeError(
                f"{type(client).__module__}.{type(client).__name__} is an asyncio client: "
                "pass it as async_client="
            )
        if not isinstance(prefix, str) or not prefix or "{" in prefix or "}" in prefix:
            raise ValueError("prefix must be a non-empty string without '{' or '}'")
        if idle_ttl_s is not None and (
            isinstance(idle_ttl_s, bool)
            or not isinstance(idle_ttl_s, (int, float))
            or not 0 < idle_ttl_s < math.inf
        ):
            raise ValueError("idle_ttl_s must be a positive number of seconds or None")
        if (
            isinstance(breaker_cooldown_s, bool)
            or not isinstance(breaker_cooldown_s, (int, float))
            or not 0 <= breaker_cooldown_s < math.inf
        ):
            raise ValueError("breaker_cooldown_s must be a number of seconds >= 0")
        self._breaker = Breaker(float(breaker_cooldown_s))
        self._client = client
        self._async_client = async_client
        self.prefix = prefix
        self.idle_ttl_s = None if idle_ttl_s is None else float(idle_ttl_s)
        if not isinstance(fail_open, bool):
            raise TypeError(f"fail_open must be a bool, not {type(fail_open).__name__}")
        self.fail_open = fail_open
        self.native_async = async_client is not None
        self._owns_clients = False
        self._scripts = _scripts()
        if self.idle_ttl_s is None:
            self._ttl_args = ("", "")
        else:
            ttl_ms = max(1, math.ceil(self.idle_ttl_s * 1000))
            self._ttl_args = (repr(self.idle_ttl_s), str(ttl_ms))
        self._nonces: OrderedDict[int, tuple[ToolCallRecord, str]] = OrderedDict()
        self._nonce_lock = threading.Lock()
        self._session_locks = tuple(threading.RLock() for _ in range(_LOCK_STRIPES))
        #: Per event loop, its asyncio locks (an asyncio lock belongs to one loop).
        self._async_locks: weakref.WeakKeyDictionary[Any, tuple[Any, ...]] = (
            weakref.WeakKeyDictionary()
        )

    @classmethod
    def from_url(
        cls,
        url: str,
        *,
        socket_timeout: float = DEFAULT_SOCKET_TIMEOUT_S,
        socket_connect_timeout: float | None = None,
        use_asyncio: bool = False,
        cluster: bool = False,
        prefix: str = DEFAULT_PREFIX,
        idle_ttl_s: float | None = DEFAULT_IDLE_TTL_S,
        fail_open: bool = True,
        breaker_cooldown_s: float = DEFAULT_BREAKER_COOLDOWN_S,
        **client_options: Any,
    ) -> RedisStore:
        """Build a store and its redis-py client(s) from a URL.

        Accepted: ``redis://[[user]:password@]host[:port][/db]``, ``rediss://`` (TLS) and
        ``redis+unix:///path/to.sock[?db=N]``. The clients retry nothing (a retried
        script could append a record twice) and time out after ``socket_timeout``.

        Args:
            url: where Redis is.
            socket_timeout: seconds to wait for a reply before failing the call.
            socket_connect_timeout: seconds to wait for a connection (default: the same).
            use_asyncio: also build a ``redis.asyncio`` client, for the async twins.
            cluster: the URL names a node of a Redis Cluster (``redis.cluster``).
            prefix: see the class.
            idle_ttl_s: see the class.
            fail_open: see the class.
            breaker_cooldown_s: see the class.
            **client_options: passed to the redis-py client constructor.

        Every client connects lazily, except the blocking cluster client, which asks the
        node for the slot map at construction (redis-py's choice): an unreachable cluster
        raises redis-py's error here rather than failing open later.

        Raises:
            ValueError: a malformed URL, an unknown scheme or a bad option value.
            TypeError: an option the redis-py client does not take, or a ``fail_open``
                that is not a ``bool``.
            ImportError: the ``redis`` package is missing (``pip install loopwatch[redis]``).
        """
        if not isinstance(fail_open, bool):  # before any client is built
            raise TypeError(f"fail_open must be a bool, not {type(fail_open).__name__}")
        client, async_client = build_clients(
            url,
            socket_timeout=socket_timeout,
            socket_connect_timeout=socket_connect_timeout,
            use_asyncio=use_asyncio,
            cluster=cluster,
            client_options=client_options,
        )
        store = cls(
            client,
            async_client=async_client,
            prefix=prefix,
            idle_ttl_s=idle_ttl_s,
            fail_open=fail_open,
            breaker_cooldown_s=breaker_cooldown_s,
        )
        store._owns_clients = True
        return store

    def __repr__(self) -> str:
        return (
            f"RedisStore(prefix={self.prefix!r}, idle_ttl_s={self.idle_ttl_s!r}, "
            f"fail_open={self.fail_open!r}, native_async={self.native_async!r})"
        )

    # --- plumbing ----------------------------------------------------------------------

    def session_lock(self, session_key: str) -> AbstractContextManager[object]:
        """An in-process lock of the session, held for one guard step.

        Every operation is one atomic script on the server, but a blocked call's step is
        two (``begin_call``, then ``cancel_call``): a write of another thread landing in
        between would make the record the begin trimmed unreturnable, and the history
        would shrink below its size for good. Threads of this process wait for each
        other's step; workers in other processes still may land in between (the limit in
        the class docstring).
        """
        return self._session_locks[hash(session_key) % _LOCK_STRIPES]

    def async_session_lock(self, session_key: str) -> AbstractAsyncContextManager[object]:
        """:meth:`session_lock` for the asyncio tasks of the running loop."""
        import asyncio

        loop = asyncio.get_running_loop()
        with self._nonce_lock:
            locks = self._async_locks.get(loop)
            if locks is None:
                locks = self._async_locks[loop] = tuple(
                    asyncio.Lock() for _ in range(_LOCK_STRIPES)
                )
        lock: AbstractAsyncContextManager[object] = locks[hash(session_key) % _LOCK_STRIPES]
        return lock

    def keys(self, session_key: str) -> tuple[bytes, ...]:
        """The session's Redis keys (history, meta, buckets, bucket order), for operators."""
        return _session_keys(self.prefix, session_key)

    def _op(
        self,
        name: str,
        session_key: str,
        now: float,
        args: tuple[str, ...],
        parse: Callable[[Any], T],
    ) -> _Op[T]:
        return _Op(
            self._scripts[name],
            _session_keys(self.prefix, session_key),
            (repr(float(now)), *self._ttl_args, *args),
            parse,
        )

    def _run(self, op: _Op[T]) -> T:
        client = self._client
        if client is None:
            raise RuntimeError(
                "this RedisStore has only an asyncio client: use the async methods "
                "(LoopGuard.abefore_call, ...) or give it a blocking client too"
            )
        script, numkeys = op.script, len(op.keys)
        self._breaker.check(script.name)
        try:
            try:
                reply = client.evalsha(script.sha, numkeys, *op.keys, *op.args)
            except Exception as exc:
                if not _is_noscript(exc):
                    raise
                reply = client.eval(script.source, numkeys, *op.keys, *op.args)
        except Exception as exc:
            raise self._breaker.failure(script.name, exc) from exc
        return _parse(op, reply)

    async def _arun(self, op: _Op[T]) -> T:
        client = self._async_client
        if client is None:
            return self._run(op)
        script, numkeys = op.script, len(op.keys)
        self._breaker.check(script.name)
        try:
            try:
                reply = await _resolve(client.evalsha(script.sha, numkeys, *op.keys, *op.args))
            except Exception as exc:
                if not _is_noscript(exc):
                    raise
                reply = await _resolve(client.eval(script.source, numkeys, *op.keys, *op.args))
        except Exception as exc:
            raise self._breaker.failure(script.name, exc) from exc
        return _parse(op, reply)

    @property
    def breaker_cooldown_s(self) -> float:
        """Seconds Redis is skipped after a timeout (see the class)."""
        return self._breaker.cooldown_s

    def _remember_nonce(self, pending: ToolCallRecord, nonce: str) -> None:
        with self._nonce_lock:
            self._nonces[id(pending)] = (pending, nonce)
            if len(self._nonces) > _MAX_PENDING_NONCES:
                self._nonces.popitem(last=False)

    def _forget_nonce(self, pending: ToolCallRecord) -> str:
        with self._nonce_lock:
            entry = self._nonces.pop(id(pending), None)
        # The object is kept in the map, so its id cannot have been reused meanwhile.
        return entry[1] if entry is not None and entry[0] is pending else ""

    # --- operation builders ------------------------------------------------------------

    def _begin_op(
        self,
        session_key: str,
        run_id: str | None,
        pending: ToolCallRecord | None,
        history_size: int,
        now: float,
    ) -> _Op[Sequence[ToolCallRecord]]:
        def parse(reply: Any) -> Sequence[ToolCallRecord]:
            nonce, records = _seq(reply)
            if pending is not None:
                self._remember_nonce(pending, _text(nonce))
            return _records(records)

        body = "" if pending is None else _body(pending)
        args = (_token(run_id), body, str(int(history_size)))
        return self._op("begin_call", session_key, now, args, parse)

    def _cancel_op(self, session_key: str, pending: ToolCallRecord, now: float) -> _Op[None]:
        nonce = self._forget_nonce(pending)
        args = (nonce, _body(pending))
        return self._op("cancel_call", session_key, now, args, lambda _reply: None)

    def _bucket_op(self, session_key: str, key: str, bucket: int, now: float) -> _Op[bool]:
        args = (_token(key), str(int(bucket)), str(MAX_WARNING_KEYS))
        return self._op("update_warning_bucket", session_key, now, args, lambda r: _int(r) == 1)

    def _outcome_op(
        self, session_key: str, write: OutcomeWrite, guard: GuardSpec, now: float
    ) -> _Op[tuple[ToolCallRecord, GuardVerdict]]:
        def parse(reply: Any) -> tuple[ToolCallRecord, GuardVerdict]:
            raw, abort, armed, remaining, count, size = _seq(reply)
            record = _decode_record(_text(raw))
            verdict = _verdict(
                _int(abort), _int(armed), _int(remaining), _int(count), record.tool_name, _int(size)
            )
            return record, verdict

        call_token = _token(write.tool_call_id)
        args = (
            _token(write.run_id),
            _token(write.tool_name),
            _token(write.args_hash),
            call_token if write.tool_call_id else "",
            _token(write.outcome.result_hash),
            _unknown_token(write.outcome.unknown_tool_name, write.tool_name),
            call_token,
            str(int(write.timestamp)),
            str(int(write.history_size)),
            str(int(guard.window_size)),
            "1" if guard.enabled else "0",
            _token(write.facts),
        )
        return self._op("record_outcome", session_key, now, args, parse)

    def _arm_op(
        self, session_key: str, run_id: str | None, guard: GuardSpec, now: float
    ) -> _Op[GuardSpec]:
        def parse(reply: Any) -> GuardSpec:
            size, enabled = _seq(reply)
            return GuardSpec(window_size=_int(size), enabled=_int(enabled) == 1)

        args = (_token(run_id), str(int(guard.window_size)), "1" if guard.enabled else "0")
        return self._op("arm_guard", session_key, now, args, parse)

    def _history_op(self, session_key: str, now: float) -> _Op[tuple[ToolCallRecord, ...]]:
        return self._op("read_state", session_key, now, ("history",), lambda r: tuple(_records(r)))

    def _guard_read_op(
        self, session_key: str, run_id: str | None, now: float
    ) -> _Op[tuple[GuardSnapshot, GuardVerdict | None]]:
        def parse(reply: Any) -> tuple[GuardSnapshot, GuardVerdict | None]:
            items = _seq(reply)
            if not items or items[0] is None:
                return _NO_GUARD, None
            size, remaining, last = items
            rem = _int(remaining)
            snapshot = GuardSnapshot(armed=rem > 0, remaining_attempts=rem)
            if last is None:
                return snapshot, None
            abort, armed, left, count, tool = _text(last).split(",", 4)
            verdict = _verdict(
                int(abort), int(armed), int(left), int(count), _untoken(tool), _int(size)
            )
            return snapshot, verdict

        args = ("guard", _token(run_id))
        return self._op("read_state", session_key, now, args, parse)

    def _buckets_op(self, session_key: str, now: float) -> _Op[dict[str, int]]:
        def parse(reply: Any) -> dict[str, int]:
            items = _seq(reply)
            buckets: dict[str, int] = {}
            for index in range(0, len(items), 2):
                key = _untoken(_text(items[index]))
                if key is not None:
                    buckets[key] = _int(items[index + 1])
            return buckets

        return self._op("read_state", session_key, now, ("buckets",), parse)

    # --- the Store interface -------------------------------------------------------------

    def begin_call(
        self,
        session_key: str,
        run_id: str | None,
        pending: ToolCallRecord | None,
        history_size: int,
        now: float,
    ) -> Sequence[ToolCallRecord]:
        return self._run(self._begin_op(session_key, run_id, pending, history_size, now))

    def cancel_call(self, session_key: str, pending: ToolCallRecord, now: float) -> None:
        self._run(self._cancel_op(session_key, pending, now))

    def update_warning_bucket(self, session_key: str, key: str, bucket: int, now: float) -> bool:
        return self._run(self._bucket_op(session_key, key, bucket, now))

    def record_outcome(
        self, session_key: str, write: OutcomeWrite, guard: GuardSpec, now: float
    ) -> tuple[ToolCallRecord, GuardVerdict]:
        return self._run(self._outcome_op(session_key, write, guard, now))

    def arm_guard(
        self, session_key: str, run_id: str | None, guard: GuardSpec, now: float
    ) -> GuardSpec:
        return self._run(self._arm_op(session_key, run_id, guard, now))

    def history(self, session_key: str, now: float) -> tuple[ToolCallRecord, ...]:
        return self._run(self._history_op(session_key, now))

    def guard_snapshot(self, session_key: str, run_id: str | None, now: float) -> GuardSnapshot:
        return self._run(self._guard_read_op(session_key, run_id, now))[0]

    def last_guard_verdict(
        self, session_key: str, run_id: str | None, now: float
    ) -> GuardVerdict | None:
        return self._run(self._guard_read_op(session_key, run_id, now))[1]

    def warning_buckets(self, session_key: str, now: float) -> dict[str, int]:
        """The session's warning buckets in insertion order (for tests and diagnostics)."""
        return self._run(self._buckets_op(session_key, now))

    def close(self) -> None:
        """Close the clients this store built (from a URL); clients passed in stay open."""
        if self._owns_clients and self._client is not None:
            close = getattr(self._client, "close", None)
            if callable(close):
                close()

    # --- async twins ---------------------------------------------------------------------

    async def abegin_call(
        self,
        session_key: str,
        run_id: str | None,
        pending: ToolCallRecord | None,
        history_size: int,
        now: float,
    ) -> Sequence[ToolCallRecord]:
        return await self._arun(self._begin_op(session_key, run_id, pending, history_size, now))

    async def acancel_call(self, session_key: str, pending: ToolCallRecord, now: float) -> None:
        await self._arun(self._cancel_op(session_key, pending, now))

    async def aupdate_warning_bucket(
        self, session_key: str, key: str, bucket: int, now: float
    ) -> bool:
        return await self._arun(self._bucket_op(session_key, key, bucket, now))

    async def arecord_outcome(
        self, session_key: str, write: OutcomeWrite, guard: GuardSpec, now: float
    ) -> tuple[ToolCallRecord, GuardVerdict]:
        return await self._arun(self._outcome_op(session_key, write, guard, now))

    async def aarm_guard(
        self, session_key: str, run_id: str | None, guard: GuardSpec, now: float
    ) -> GuardSpec:
        return await self._arun(self._arm_op(session_key, run_id, guard, now))

    async def ahistory(self, session_key: str, now: float) -> tuple[ToolCallRecord, ...]:
        return await self._arun(self._history_op(session_key, now))

    async def aguard_snapshot(
        self, session_key: str, run_id: str | None, now: float
    ) -> GuardSnapshot:
        return (await self._arun(self._guard_read_op(session_key, run_id, now)))[0]

    async def alast_guard_verdict(
        self, session_key: str, run_id: str | None, now: float
    ) -> GuardVerdict | None:
        return (await self._arun(self._guard_read_op(session_key, run_id, now)))[1]

    async def awarning_buckets(self, session_key: str, now: float) -> dict[str, int]:
        """Async twin of :meth:`warning_buckets`."""
        return await self._arun(self._buckets_op(session_key, now))

    async def aclose(self) -> None:
        """Close the clients this store built (from a URL); clients passed in stay open."""
        self.close()
        if self._owns_clients and self._async_client is not None:
            close = getattr(self._async_client, "aclose", None) or getattr(
                self._async_client, "close", None
            )
            if callable(close):
                result = close()
                if inspect.isawaitable(result):
                    await result


def _parse(op: _Op[T], reply: Any) -> T:
    try:
        return op.parse(reply)
    except StoreError:
        raise
    except Exception as exc:
        raise StoreError(
            f"redis {op.script.name} returned an unexpected reply: {type(exc).__name__}: {exc}"
        ) from exc


__all__ = ["DEFAULT_IDLE_TTL_S", "DEFAULT_PREFIX", "RedisStore"]
