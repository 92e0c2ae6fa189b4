"""What loopwatch needs from a Redis client, typed as Protocols (the ``limits`` way).

A client is "anything with these methods": ``redis.Redis``, ``redis.cluster.RedisCluster``,
``valkey.Valkey``, their asyncio variants, and test fakes all fit, and nothing heavy is
imported when ``loopwatch`` is. The store only ever runs its Lua scripts, so two methods
are enough: ``evalsha`` on the common path and ``eval`` when the server has lost the
script (a restart, ``SCRIPT FLUSH``, a new cluster node).

The argument and return types are ``Any`` on purpose: redis-py and valkey annotate keys
and replies with their own aliases (redis-py with overloads on ``self``, valkey with
``Awaitable[str] | str`` for both kinds of client), and the store decodes replies
defensively anyway.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable


@runtime_checkable
class RedisClient(Protocol):
    """A blocking client: each call does one round trip and returns the reply."""

    def evalsha(self, sha: str, numkeys: int, *keys_and_args: Any) -> Any:
        """Run a cached script by its SHA1 digest."""
        ...

    def eval(self, script: str, numkeys: int, *keys_and_args: Any) -> Any:
        """Run (and cache) a script from its source."""
        ...


@runtime_checkable
class AsyncRedisClient(Protocol):
    """An asyncio client: the same two methods, returning awaitables.

    Typed as returning ``Any`` because valkey declares one union for both kinds of
    client; the store awaits whatever is awaitable.
    """

    def evalsha(self, sha: str, numkeys: int, *keys_and_args: Any) -> Any:
        """Run a cached script by its SHA1 digest."""
        ...

    def eval(self, script: str, numkeys: int, *keys_and_args: Any) -> Any:
        """Run (and cache) a script from its source."""
        ...


__all__ = ["AsyncRedisClient", "RedisClient"]
