"""The Redis client: what the store needs of one (Protocols), and how ``from_url`` builds one.

What loopwatch needs from a Redis client is typed as Protocols (the ``limits`` way).

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

import inspect
import math
from typing import Any, Final, Protocol, runtime_checkable

from loopwatch.stores._urls import parse_redis_url

#: Socket (and connect) timeout of the clients built by :meth:`RedisStore.from_url`: a
#: slow store must not stall the agent; past it the failure policy applies.
DEFAULT_SOCKET_TIMEOUT_S: Final = 0.25


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


def build_clients(
    url: str,
    *,
    socket_timeout: float,
    socket_connect_timeout: float | None,
    use_asyncio: bool,
    cluster: bool,
    client_options: dict[str, Any],
) -> tuple[Any, Any]:
    """The redis-py client(s) of :meth:`RedisStore.from_url`, after checking every option.

    The clients retry nothing (a retried script could append a record twice) and time out
    after ``socket_timeout``.

    Returns:
        ``(client, async_client)``; ``async_client`` is ``None`` unless ``use_asyncio``.

    Raises:
        ValueError: a malformed URL, an unknown scheme or a bad option value.
        TypeError: an option the redis-py client does not take.
        ImportError: the ``redis`` package is missing.
    """
    target = parse_redis_url(url)
    for name, value in (
        ("socket_timeout", socket_timeout),
        ("socket_connect_timeout", socket_connect_timeout),
    ):
        if value is not None and (
            isinstance(value, bool)
            or not isinstance(value, (int, float))
            or not 0 < value < math.inf
        ):
            raise ValueError(f"{name} must be a positive number of seconds")
    if cluster and target.unix:
        raise ValueError("a Redis Cluster is reached over TCP, not a unix socket")
    if not isinstance(use_asyncio, bool) or not isinstance(cluster, bool):
        raise TypeError("use_asyncio and cluster must be bools")
    try:
        import redis
        import redis.asyncio
        import redis.asyncio.cluster
        import redis.cluster
        from redis.asyncio.retry import Retry as AsyncRetry
        from redis.backoff import NoBackoff
        from redis.retry import Retry
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError(
            "RedisStore.from_url needs the 'redis' package: pip install 'loopwatch[redis]'"
        ) from exc

    timeouts: dict[str, Any] = {
        "socket_timeout": float(socket_timeout),
        "socket_connect_timeout": float(
            socket_timeout if socket_connect_timeout is None else socket_connect_timeout
        ),
    }
    client_class = redis.cluster.RedisCluster if cluster else redis.Redis
    _check_client_options(client_class, client_options)
    # No retries by default: a script retried after a dropped connection may already
    # have run, and would append its record twice. A stale pooled connection is
    # replaced before sending anyway, so recovery after a restart needs no retry.
    sync_options = {**timeouts, "retry": Retry(NoBackoff(), 0), **client_options}
    async_options = {**timeouts, "retry": AsyncRetry(NoBackoff(), 0), **client_options}
    client: Any
    async_client: Any = None
    if cluster:
        client = redis.cluster.RedisCluster.from_url(target.url, **sync_options)
        if use_asyncio:
            async_client = redis.asyncio.cluster.RedisCluster.from_url(target.url, **async_options)
    else:
        client = redis.Redis.from_url(target.url, **sync_options)
        if use_asyncio:
            async_client = redis.asyncio.Redis.from_url(target.url, **async_options)
    return client, async_client


def _check_client_options(client_class: type, options: dict[str, Any]) -> None:
    """Reject unknown client options now: redis-py would only fail on the first connect."""
    parameters = inspect.signature(client_class).parameters
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values()):
        return  # the cluster client passes extra options on to its node clients
    unknown = sorted(set(options) - set(parameters) - {"self"})
    if unknown:
        raise TypeError(f"unknown option(s) for {client_class.__name__}: {', '.join(unknown)}")


async def _resolve(reply: Any) -> Any:
    """Await an asyncio client's reply; a blocking client's reply is already there."""
    return await reply if inspect.isawaitable(reply) else reply


def _looks_async(client: object) -> bool:
    """An asyncio redis-py/valkey client (their command methods are not coroutine
    functions, so the module is the reliable tell)."""
    module = type(client).__module__
    return ".asyncio" in module or module.endswith("asyncio")


__all__ = ["DEFAULT_SOCKET_TIMEOUT_S", "AsyncRedisClient", "RedisClient", "build_clients"]
