"""The Redis store: one consistent history per session across many worker processes.

Every operation of :class:`~loopwatch.stores.base.Store` is one Lua script run with
``EVALSHA`` (one round trip; ``EVAL`` once more when the server lost the script, after a
restart or on a new cluster node). A script reads, appends or updates, trims, refreshes
the idle expiry and returns what detection needs, atomically on the server, so workers
that share a session see one linearisable history and lose no record. Detection itself
stays in Python, in the pure core shared with the memory store.

Layout (hash scheme ``v1``, see ``lua/_common.lua``): four keys per session,
``<prefix>:v1:{<session>}:h|s|b|o``. The hash tag puts them in one cluster slot, so the
scripts work on Redis Cluster too. Records hold digests only, never raw arguments or
results.

The package imports neither ``redis`` nor ``valkey``: a store built around an existing
client needs only that client; :meth:`RedisStore.from_url` imports ``redis`` lazily.

One concept a module:

* ``store``: :class:`RedisStore`, its operations and their sync/async twins;
* ``_codec``: the wire format (record bodies, session keys, reply decoding);
* ``_scripts``: the Lua scripts (``lua/``, package data) and their SHA1s;
* ``_client``: the client Protocols and the redis-py clients of ``from_url``;
* ``_breaker``: the cool-down after a timeout.
"""

from loopwatch.stores.redis._breaker import DEFAULT_BREAKER_COOLDOWN_S
from loopwatch.stores.redis._client import DEFAULT_SOCKET_TIMEOUT_S, AsyncRedisClient, RedisClient
from loopwatch.stores.redis._codec import HASH_SCHEME
from loopwatch.stores.redis.store import DEFAULT_IDLE_TTL_S, DEFAULT_PREFIX, RedisStore

__all__ = [
    "DEFAULT_BREAKER_COOLDOWN_S",
    "DEFAULT_IDLE_TTL_S",
    "DEFAULT_PREFIX",
    "DEFAULT_SOCKET_TIMEOUT_S",
    "HASH_SCHEME",
    "AsyncRedisClient",
    "RedisClient",
    "RedisStore",
]
