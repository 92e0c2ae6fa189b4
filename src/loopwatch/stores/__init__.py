"""Storage backends for ``LoopGuard``: one interface, chosen by URL scheme."""

from __future__ import annotations

from typing import TYPE_CHECKING

from loopwatch.stores.base import GuardSpec, OutcomeWrite, Store, StoreError
from loopwatch.stores.memory.store import MemoryStore

if TYPE_CHECKING:
    from loopwatch.stores.redis import RedisStore
    from loopwatch.stores.sqlite import SqliteStore
    from loopwatch.stores.url import store_from_url

__all__ = [
    "GuardSpec",
    "MemoryStore",
    "OutcomeWrite",
    "RedisStore",
    "SqliteStore",
    "Store",
    "StoreError",
    "store_from_url",
]


def __getattr__(name: str) -> object:
    # Lazy exports: ``import loopwatch`` must not import redis (nor read the Lua scripts),
    # nor sqlite3.
    if name == "RedisStore":
        from loopwatch.stores.redis import RedisStore

        return RedisStore
    if name == "SqliteStore":
        from loopwatch.stores.sqlite import SqliteStore

        return SqliteStore
    if name == "store_from_url":
        from loopwatch.stores.url import store_from_url

        return store_from_url
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
