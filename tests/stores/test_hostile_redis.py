"""The Redis fault and hostile-input suite (issue 17 items 6, 7, 9 and 10).

Promises (SECURITY.md): workers with skewed clocks share one session; Redis holds no text
cut from tool output (an unknown tool's name included), and what it holds per session is
bounded (per-run guard state is pruned); passwords never appear in URL errors; a hanging
Redis costs one timeout per breaker cool-down, then fails open at once.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest
import redis
from _redis_helpers import RedisServer

from loopwatch import LoopEvent, LoopGuard
from loopwatch.stores import RedisStore
from loopwatch.stores.redis._codec import _cached_session_keys, _session_keys
from loopwatch.stores.url import parse_redis_url, store_from_url
from loopwatch.testing import FakeClock

pytestmark = pytest.mark.redis

CONFIG = {"enabled": True, "warningThreshold": 2, "criticalThreshold": 4}


def actions(guard: LoopGuard, session: str, calls: int) -> list[str]:
    out = []
    for _ in range(calls):
        decision = guard.before_call("read", {"path": "same"}, session_key=session)
        guard.after_call("read", {"path": "same"}, session_key=session, result="same")
        out.append(decision.action)
    return out


def test_workers_with_skewed_clocks_share_one_session(
    redis_store_factory: Callable[..., RedisStore],
) -> None:
    ttl = 1800.0
    store = redis_store_factory(idle_ttl_s=ttl)
    early = LoopGuard(CONFIG, store=store, clock=FakeClock(1_700_000_000.0))
    late = LoopGuard(CONFIG, store=store, clock=FakeClock(1_700_000_000.0 + 3 * ttl))
    seen = []
    for n in range(12):  # the two workers take turns on one session
        guard = early if n % 2 == 0 else late
        decision = guard.before_call("read", {"path": "same"}, session_key="skewed")
        guard.after_call("read", {"path": "same"}, session_key="skewed", result="same")
        seen.append(decision.action)
    one_clock = actions(LoopGuard(CONFIG, store=store), "one-clock", 12)
    assert seen == one_clock
    assert "block" in seen  # before the fix, every call wiped the session: all allowed


def test_an_unknown_tools_name_is_never_stored_and_stays_small(
    redis_store_factory: Callable[..., RedisStore], redis_client: Any
) -> None:
    store = redis_store_factory()
    guard = LoopGuard({"enabled": True}, store=store)
    secret = "sk-live-" + "a1b2c3" * 700_000  # a 4 MB "name", as the reviewer used
    verdicts = []
    for i in range(30):
        decision = guard.before_call("shell", {"n": i}, session_key="ghost")
        verdicts.append(decision.action)
        guard.after_call(
            "shell", {"n": i}, session_key="ghost", error=f"Unknown tool: {secret} (try again)"
        )
    assert verdicts[10:] == ["block"] * 20  # SPEC §4: blocked from the 11th miss on
    stored = b"".join(
        b"".join(redis_client.lrange(key, 0, -1)) if kind == b"list" else b""
        for key in store.keys("ghost")
        for kind in [redis_client.type(key)]
    )
    assert len(stored) < 30 * 300
    for key in store.keys("ghost"):
        dump = redis_client.dump(key) or b""
        assert b"sk-live" not in dump and b"a1b2c3" not in dump


def test_the_called_tools_own_unknown_name_reads_back_exactly(
    redis_store_factory: Callable[..., RedisStore],
) -> None:
    store = redis_store_factory()
    guard = LoopGuard({"enabled": True}, store=store)
    for _ in range(11):
        decision = guard.before_call("jq", {}, session_key="jq")
        guard.after_call("jq", {}, session_key="jq", error="Unknown tool: jq")
    assert decision.action == "block"
    assert "jq" in (decision.verdict.message or "")
    assert {r.unknown_tool_name for r in guard.history(session_key="jq")} == {"jq"}


def test_per_run_guard_state_is_pruned(
    redis_store_factory: Callable[..., RedisStore], redis_client: Any
) -> None:
    store = redis_store_factory()
    guard = LoopGuard({"enabled": True}, store=store)
    for run in range(600):
        guard.before_call("read", {}, session_key="runs", run_id=f"run-{run}")
        guard.after_call("read", {}, session_key="runs", run_id=f"run-{run}", result="x")
    fields = redis_client.hlen(store.keys("runs")[1])
    assert fields <= 256 * 5 + 10  # was 5 per run, forever: 3,000 here


def test_the_key_cache_keeps_no_long_session_keys() -> None:
    _cached_session_keys.cache_clear()
    for n in range(50):
        keys = _session_keys("lw", f"{n}" + "k" * 100_000)
        assert keys[0].endswith(b"}:h")
    assert _cached_session_keys.cache_info().currsize == 0
    _session_keys("lw", "short")
    assert _cached_session_keys.cache_info().currsize == 1


@pytest.mark.parametrize(
    "url",
    [
        "redis://user:s3cr3t-pw@localhost:99999/0",
        "redis://:s3cr3t-pw@localhost/notadb",
        "redis://s3cr3t-pw@localhost:0",
        "redis://user:s3cr3t-pw@/0",
        "redis://localhost/0?password=s3cr3t-pw#frag",
        "ftp://user:s3cr3t-pw@localhost",
    ],
)
def test_url_errors_never_echo_the_password(url: str) -> None:
    with pytest.raises(ValueError) as caught:
        parse_redis_url(url) if url.startswith("redis") else store_from_url(url)
    assert "s3cr3t" not in str(caught.value)
    assert "***" in str(caught.value)


def test_a_hanging_redis_opens_the_breaker(
    redis_server_factory: Callable[..., RedisServer],
) -> None:
    server = redis_server_factory()
    events: list[LoopEvent] = []
    store = RedisStore.from_url(server.url, socket_timeout=0.2, breaker_cooldown_s=30)
    guard = LoopGuard(CONFIG, store=store, listeners=[events.append])
    assert actions(guard, "hang", 1) == ["allow"]
    admin = redis.Redis.from_url(server.url)
    admin.client_pause(3000, all=True)
    try:
        assert actions(guard, "hang", 5) == ["allow"] * 5  # fail-open
    finally:
        admin.client_unpause()
        admin.close()
    errors = [e.to_dict()["error"] for e in events if e.type == "store.error"]
    assert len(errors) == 10
    assert "TimeoutError" in errors[0]
    assert all("breaker open" in error for error in errors[1:])  # no second timeout
    store.close()


def test_the_breaker_can_be_turned_off(redis_server_factory: Callable[..., RedisServer]) -> None:
    server = redis_server_factory()
    store = RedisStore.from_url(server.url, socket_timeout=0.2, breaker_cooldown_s=0)
    events: list[LoopEvent] = []
    guard = LoopGuard(CONFIG, store=store, listeners=[events.append])
    admin = redis.Redis.from_url(server.url)
    admin.client_pause(1500, all=True)
    try:
        actions(guard, "hang", 2)
    finally:
        admin.client_unpause()
        admin.close()
    errors = [e.to_dict()["error"] for e in events if e.type == "store.error"]
    assert errors and all("TimeoutError" in error for error in errors)
    time.sleep(0.1)
    events.clear()
    actions(guard, "hang", 1)
    assert [e for e in events if e.type == "store.error"] == []
    store.close()


@pytest.mark.parametrize("bad", [-1, float("inf"), True, "1"])
def test_the_breaker_cooldown_is_checked(bad: Any) -> None:
    with pytest.raises(ValueError, match="breaker_cooldown_s"):
        RedisStore(redis.Redis(), breaker_cooldown_s=bad)
