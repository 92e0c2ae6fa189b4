"""What only the Redis store has: key layout, expiry on the server, round trips, privacy,
script reloading, URLs, client kinds and the lazy import."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import redis
from _redis_helpers import RedisServer

from loopwatch import LoopGuard, MemoryStore
from loopwatch.stores import RedisStore, store_from_url
from loopwatch.stores.redis import HASH_SCHEME
from loopwatch.stores.redis._scripts import _scripts
from loopwatch.stores.url import parse_redis_url

pytestmark = pytest.mark.redis

S = "agent:main:redis"
ENABLED = {"enabled": True, "warningThreshold": 2, "criticalThreshold": 4}
#: Warnings emitted from the tenth call on (bucket 1), never a block.
WARN_ONLY = {"enabled": True, "warningThreshold": 2, "criticalThreshold": 50}


class CountingRedis(redis.Redis):
    """A redis-py client that counts commands: each one is one network round trip."""

    commands: list[str]

    def execute_command(self, *args: Any, **options: Any) -> Any:
        self.commands.append(str(args[0]))
        return super().execute_command(*args, **options)


@pytest.fixture
def counting(redis_url: str, redis_client: Any) -> Any:
    from _redis_helpers import delete_prefix, unique_prefix

    client = CountingRedis.from_url(redis_url)
    client.commands = []
    store = RedisStore(client, prefix=unique_prefix())
    for script in _scripts().values():  # as after any earlier use: counts start warm
        redis_client.script_load(script.source)
    yield client, store
    delete_prefix(redis_client, store.prefix)
    client.close()


def _dump(client: Any, prefix: str) -> bytes:
    """Every byte stored under a prefix: keys, list items, hash fields and values."""
    out = b""
    for key in client.scan_iter(match=f"{prefix}:*"):
        out += key
        kind = client.type(key)
        if kind == b"list":
            out += b"".join(client.lrange(key, 0, -1))
        elif kind == b"hash":
            for field, value in client.hgetall(key).items():
                out += field + value
        elif kind == b"zset":
            out += b"".join(client.zrange(key, 0, -1))
    return out


# --- layout --------------------------------------------------------------------------------


def test_keys_are_prefixed_versioned_and_hash_tagged(
    redis_store_factory: Callable[..., RedisStore], redis_client: Any
) -> None:
    store = redis_store_factory(prefix="lw-layout")
    guard = LoopGuard(WARN_ONLY, store=store)
    guard.before_call("read", {"p": 1}, session_key=S)
    guard.after_call("read", {"p": 1}, session_key=S, result="x")
    for _ in range(12):
        guard.before_call("read", {"p": 2}, session_key=S)
    keys = sorted(redis_client.scan_iter(match="lw-layout:*"))
    base = f"lw-layout:{HASH_SCHEME}:{{{S}}}:".encode()
    assert keys == [base + b"b", base + b"h", base + b"o", base + b"s"]
    assert store.keys(S) == (base + b"h", base + b"s", base + b"b", base + b"o")


@pytest.mark.parametrize("session", ["plain", "{x}", "a}b", "}{", "\U0001f600{", "%7B"])
def test_a_sessions_keys_share_one_cluster_slot(session: str) -> None:
    from redis.crc import key_slot

    store = RedisStore(redis.Redis(), prefix="p")
    slots = {key_slot(key) for key in store.keys(session)}
    assert len(slots) == 1
    assert store.keys(session) != store.keys(session + "x")


def test_idle_ttl_is_set_and_refreshed_by_touching_operations_only(
    redis_store_factory: Callable[..., RedisStore], redis_client: Any
) -> None:
    store = redis_store_factory(idle_ttl_s=100)
    guard = LoopGuard(WARN_ONLY, store=store)
    for _ in range(11):  # an emitted warning: the bucket keys exist too
        guard.before_call("read", {}, session_key=S)
    keys = store.keys(S)
    assert all(90_000 < redis_client.pttl(key) <= 100_000 for key in keys)
    for key in keys:
        redis_client.pexpire(key, 50_000)
    guard.history(session_key=S)
    guard.guard_snapshot(session_key=S)
    guard.last_guard_verdict(session_key=S)
    store.warning_buckets(S, time.time())
    assert all(redis_client.pttl(key) <= 50_000 for key in keys)
    guard.after_call("read", {}, session_key=S, result=1)
    assert all(redis_client.pttl(key) > 90_000 for key in keys)


def test_no_ttl_means_no_server_expiry(
    redis_store_factory: Callable[..., RedisStore], redis_client: Any
) -> None:
    store = redis_store_factory(idle_ttl_s=None)
    LoopGuard(ENABLED, store=store).before_call("read", {}, session_key=S)
    assert [redis_client.pttl(key) for key in store.keys(S)[:2]] == [-1, -1]


def test_server_expiry_forgets_the_session(
    redis_store_factory: Callable[..., RedisStore],
) -> None:
    store = redis_store_factory(idle_ttl_s=0.2)
    guard = LoopGuard(ENABLED, store=store)
    guard.before_call("read", {}, session_key=S)
    assert len(guard.history(session_key=S)) == 1
    time.sleep(0.35)
    assert guard.history(session_key=S) == ()


def test_accessors_create_no_keys(
    redis_store_factory: Callable[..., RedisStore], redis_client: Any
) -> None:
    store = redis_store_factory()
    guard = LoopGuard(ENABLED, store=store)
    assert guard.history(session_key=S) == ()
    guard.guard_snapshot(session_key=S, run_id="r")
    assert guard.last_guard_verdict(session_key=S, run_id="r") is None
    assert store.warning_buckets(S, time.time()) == {}
    assert redis_client.exists(*store.keys(S)) == 0


def test_no_raw_arguments_or_results_are_stored(
    redis_store_factory: Callable[..., RedisStore], redis_client: Any
) -> None:
    store = redis_store_factory()
    guard = LoopGuard(ENABLED, store=store)
    secret = {"password": "hunter2-SECRET-ARG", "nested": ["SECRET-ARG-2"]}
    for _ in range(5):
        decision = guard.before_call("exec", secret, session_key=S, tool_call_id="call-1")
        guard.after_call(
            "exec",
            secret,
            session_key=S,
            tool_call_id="call-1",
            result=decision.tool_result or {"content": [{"type": "text", "text": "SECRET-OUT"}]},
        )
    guard.before_call("read", secret, session_key=S)
    guard.after_call("read", secret, session_key=S, error="failed: SECRET-ERROR")
    stored = _dump(redis_client, store.prefix)
    assert b"exec" in stored and b"call-1" in stored
    for needle in (b"hunter2", b"SECRET"):
        assert needle not in stored


def test_records_are_compact(
    redis_store_factory: Callable[..., RedisStore], redis_client: Any
) -> None:
    store = redis_store_factory()
    guard = LoopGuard(ENABLED, store=store)
    guard.before_call("read", {"path": "x" * 10_000}, session_key=S, tool_call_id="c1")
    guard.after_call("read", {"path": "x" * 10_000}, session_key=S, tool_call_id="c1", result="y")
    (record,) = redis_client.lrange(store.keys(S)[0], 0, -1)
    # nonce, run, tool, args hash (tool + 64 hex), call id, result hash, unknown, ms.
    assert len(record) < 200


# --- round trips -------------------------------------------------------------------------


def test_one_round_trip_per_call_on_the_common_path(counting: Any) -> None:
    client, store = counting
    guard = LoopGuard(ENABLED, store=store)
    for i in range(6):
        guard.before_call("read", {"p": i}, session_key=S)
        guard.after_call("read", {"p": i}, session_key=S, result=i)
        guard.compaction_retry(session_key=S)
        guard.history(session_key=S)
    assert client.commands == ["EVALSHA"] * 24


def test_warnings_and_blocks_add_one_round_trip(counting: Any) -> None:
    client, store = counting
    guard = LoopGuard(ENABLED, store=store)
    per_call = []
    for _ in range(6):
        client.commands.clear()
        decision = guard.before_call("read", {}, session_key=S)
        per_call.append((decision.action, len(client.commands)))
        guard.after_call("read", {}, session_key=S, result=decision.tool_result or 1)
    assert per_call[1:] == [
        ("allow", 1),
        ("warn", 2),
        ("warn", 2),
        ("block", 2),
        ("block", 2),
    ]


def test_lost_scripts_are_sent_again(counting: Any, redis_client: Any) -> None:
    client, store = counting
    guard = LoopGuard(ENABLED, store=store)
    guard.before_call("read", {"p": 1}, session_key=S)
    redis_client.script_flush()
    client.commands.clear()
    guard.before_call("read", {"p": 2}, session_key=S)
    assert client.commands == ["EVALSHA", "EVAL"]
    client.commands.clear()
    guard.before_call("read", {"p": 3}, session_key=S)
    assert client.commands == ["EVALSHA"]
    assert len(guard.history(session_key=S)) == 3


# --- URLs and construction ---------------------------------------------------------------


def test_store_from_url_memory() -> None:
    store = store_from_url("memory://", max_sessions=5, idle_ttl_s=None)
    assert isinstance(store, MemoryStore)
    assert store.max_sessions == 5 and store.idle_ttl_s is None


def test_store_from_url_redis(redis_url: str, redis_client: Any) -> None:
    store = store_from_url(redis_url, prefix="lw-url", idle_ttl_s=60, fail_open=False)
    assert isinstance(store, RedisStore)
    assert (store.prefix, store.idle_ttl_s, store.fail_open) == ("lw-url", 60.0, False)
    assert not store.native_async
    guard = LoopGuard(ENABLED, store=store)
    guard.before_call("read", {}, session_key=S)
    assert len(guard.history(session_key=S)) == 1
    store.close()
    from _redis_helpers import delete_prefix

    delete_prefix(redis_client, "lw-url")


def test_store_from_url_unix_socket(
    redis_server_factory: Callable[..., RedisServer],
) -> None:
    server = redis_server_factory()
    store = store_from_url(f"redis+unix://{server.socket_path}?db=3")
    assert isinstance(store, RedisStore)
    guard = LoopGuard(ENABLED, store=store)
    guard.before_call("read", {}, session_key=S)
    assert len(guard.history(session_key=S)) == 1
    direct = redis.Redis(unix_socket_path=server.socket_path, db=3)
    assert direct.exists(store.keys(S)[0]) == 1
    direct.close()
    store.close()


def test_rediss_builds_a_tls_client() -> None:
    store = store_from_url("rediss://user:secret@cache.example:6380/2", ssl_cert_reqs="none")
    client: Any = store._client
    kwargs = client.connection_pool.connection_kwargs
    assert client.connection_pool.connection_class.__name__ == "SSLConnection"
    assert (kwargs["host"], kwargs["port"], kwargs["db"]) == ("cache.example", 6380, 2)
    assert kwargs["socket_timeout"] == 0.25 and kwargs["socket_connect_timeout"] == 0.25


def test_socket_timeouts_are_configurable() -> None:
    store = RedisStore.from_url(
        "redis://localhost:1/0", socket_timeout=1.5, socket_connect_timeout=0.1
    )
    kwargs: Any = store._client.connection_pool.connection_kwargs  # type: ignore[union-attr]
    assert (kwargs["socket_timeout"], kwargs["socket_connect_timeout"]) == (1.5, 0.1)


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("http://localhost", "unsupported store URL"),
        ("localhost:6379", "unsupported store URL"),
        ("redis://", "host is missing"),
        ("redis://:pw@/0", "host is missing"),
        ("redis://localhost:port", "port must be an integer"),
        ("redis://localhost:99999", "port must be an integer"),
        ("redis://localhost:0", "port must be an integer"),
        ("redis://localhost/zero", "database must be an integer"),
        ("redis://localhost/0/1", "database must be an integer"),
        ("redis://localhost?db=-1", "database must be an integer"),
        ("redis://localhost/0#frag", "unexpected fragment"),
        ("redis+unix://host/tmp/r.sock", "has no host"),
        ("redis+unix://", "socket path is missing"),
        ("redis+unix:///tmp/r.sock?db=x", "database must be an integer"),
        ("memory://sessions", "memory:// takes no host"),
        ("memory://?max_sessions=3", "memory:// takes no host"),
    ],
)
def test_misconfigured_urls_fail_at_construction(url: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        store_from_url(url)


def test_url_must_be_a_string() -> None:
    with pytest.raises(TypeError):
        store_from_url(b"redis://localhost")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        parse_redis_url(None)  # type: ignore[arg-type]


def test_unix_url_is_translated_for_redis_py() -> None:
    assert parse_redis_url("redis+unix:///run/redis.sock?db=2").url == (
        "unix:///run/redis.sock?db=2"
    )


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({}, ValueError),
        ({"client": redis.Redis(), "prefix": ""}, ValueError),
        ({"client": redis.Redis(), "prefix": "a{b"}, ValueError),
        ({"client": redis.Redis(), "idle_ttl_s": 0}, ValueError),
        ({"client": redis.Redis(), "idle_ttl_s": float("inf")}, ValueError),
        ({"client": redis.Redis(), "idle_ttl_s": True}, ValueError),
    ],
)
def test_bad_construction_is_rejected(kwargs: dict[str, Any], error: type[Exception]) -> None:
    with pytest.raises(error):
        RedisStore(**kwargs)


def test_bad_timeouts_are_rejected() -> None:
    with pytest.raises(ValueError, match="socket_timeout"):
        store_from_url("redis://localhost", socket_timeout=0)
    with pytest.raises(ValueError, match="socket_connect_timeout"):
        store_from_url("redis://localhost", socket_connect_timeout=-1)
    with pytest.raises(TypeError):
        store_from_url("redis://localhost", no_such_option=1)


def test_an_asyncio_client_passed_as_client_is_a_type_error() -> None:
    import redis.asyncio

    with pytest.raises(TypeError, match="async_client"):
        RedisStore(redis.asyncio.Redis())  # type: ignore[arg-type]


def test_an_async_only_store_refuses_sync_calls_and_the_guard_fails_open(
    caplog: pytest.LogCaptureFixture,
) -> None:
    import redis.asyncio

    store = RedisStore(async_client=redis.asyncio.Redis())
    # Not strict: the misuse is a documented fail-open, not a bug the suite must raise.
    guard = LoopGuard(ENABLED, store=store, strict=False)
    with caplog.at_level("WARNING"):
        assert guard.before_call("read", {}, session_key=S).action == "allow"
    assert "only an asyncio client" in caplog.text


def test_importing_loopwatch_does_not_import_redis() -> None:
    code = (
        "import sys, loopwatch, loopwatch.stores; "
        "from loopwatch.stores import store_from_url; "
        "bad = [m for m in ('redis', 'valkey', 'loopwatch.stores.redis') if m in sys.modules]; "
        "sys.exit(repr(bad) if bad else 0)"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_lua_scripts_ship_as_package_data() -> None:
    from importlib import resources

    folder = resources.files("loopwatch.stores.redis").joinpath("lua")
    names = {p.name for p in folder.iterdir()}
    assert {"_common.lua", "begin_call.lua", "record_outcome.lua"} <= names
    pyproject = Path(__file__).resolve().parents[2] / "pyproject.toml"
    assert '"stores/redis/lua/*.lua"' in pyproject.read_text()


def test_threads_share_one_store_and_lose_no_record(
    redis_store_factory: Callable[..., RedisStore],
) -> None:
    import threading

    store = redis_store_factory()
    guard = LoopGuard({"enabled": True, "historySize": 10_000}, store=store)
    barrier = threading.Barrier(8)

    def worker(t: int) -> None:
        barrier.wait()
        for i in range(40):
            call_id = f"{t}-{i}"
            guard.before_call("read", {"t": t % 2}, session_key=S, tool_call_id=call_id)
            guard.after_call("read", {"t": t % 2}, session_key=S, tool_call_id=call_id, result=i)

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    history = guard.history(session_key=S)
    assert sorted(r.tool_call_id or "" for r in history) == sorted(
        f"{t}-{i}" for t in range(8) for i in range(40)
    )
    assert all(r.result_hash is not None for r in history)
