"""Choose a store by URL, as the ``limits`` library does: ``store_from_url("redis://…")``.

A misconfigured URL fails here, at construction, with a message that names the problem;
never later, inside a tool call, where the failure policy would quietly allow everything.
The parsing lives in :mod:`loopwatch.stores._urls`; each scheme maps to a backend factory
in :data:`_BACKENDS`, imported only when used.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

from loopwatch.stores._urls import (
    REDACTED,
    SCHEMES,
    RedisTarget,
    parse_redis_url,
    parse_sqlite_url,
    redact_url,
)
from loopwatch.stores.base import Store


def _memory(url: str, **options: Any) -> Store:
    if url.lower() != "memory://":
        raise ValueError(
            f"invalid store URL {redact_url(url)!r}: memory:// takes no host, path or query "
            "(pass max_sessions= / idle_ttl_s= as keyword arguments)"
        )
    from loopwatch.stores.memory.store import MemoryStore

    return MemoryStore(**options)


def _sqlite(url: str, **options: Any) -> Store:
    from loopwatch.stores.sqlite import SqliteStore

    return SqliteStore(parse_sqlite_url(url), **options)


def _redis(url: str, **options: Any) -> Store:
    parse_redis_url(url)
    from loopwatch.stores.redis import RedisStore

    return RedisStore.from_url(url, **options)


#: The scheme registry: a new backend is one factory and one entry here.
_BACKENDS: Final[dict[str, Callable[..., Store]]] = {
    "memory": _memory,
    "sqlite": _sqlite,
    "redis": _redis,
    "rediss": _redis,
    "redis+unix": _redis,
}


def store_from_url(url: str, **options: Any) -> Store:
    """Build a store from a URL; the backend is chosen by the scheme.

    - ``memory://``: a :class:`~loopwatch.stores.memory.MemoryStore`; ``options`` are its
      keyword arguments (``max_sessions``, ``idle_ttl_s``).
    - ``redis://[[user]:password@]host[:port][/db]``, ``rediss://…`` (TLS),
      ``redis+unix:///path/to.sock[?db=N]``: a
      :class:`~loopwatch.stores.redis.RedisStore`; ``options`` are those of
      :meth:`RedisStore.from_url <loopwatch.stores.redis.RedisStore.from_url>`
      (``socket_timeout``, ``use_asyncio``, ``cluster``, ``prefix``, ``idle_ttl_s``,
      ``fail_open``, client options).

    - ``sqlite:///path/to/file.db``: a :class:`~loopwatch.stores.sqlite.SqliteStore`
      (one machine, many processes; the file is created, its folder must exist);
      ``options`` are its keyword arguments (``idle_ttl_s``, ``max_sessions``,
      ``busy_timeout_s``, ``fail_open``).

    To use a client you already have (redis-py, valkey, a cluster client), construct
    ``RedisStore(client)`` directly.

    Raises:
        ValueError: an unknown scheme or a malformed URL.
        TypeError: an option the backend does not take.
        ImportError: the Redis backend without the ``redis`` package.
        StoreError: a SQLite file that cannot be opened, its folder missing included
            (folders are not created).
    """
    if not isinstance(url, str):
        raise TypeError(f"a store URL must be a string, not {type(url).__name__}")
    scheme = url.partition("://")[0].lower() if "://" in url else ""
    backend: Callable[..., Store] = _BACKENDS.get(scheme, _redis)  # names a bad scheme
    return backend(url, **options)


__all__ = [
    "REDACTED",
    "SCHEMES",
    "RedisTarget",
    "parse_redis_url",
    "parse_sqlite_url",
    "redact_url",
    "store_from_url",
]
