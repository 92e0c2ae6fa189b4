"""Redis failures: calls go on (fail-open) with ``store.error`` events and a rate-limited
log line; detection resumes by itself when Redis returns; fail-closed blocks instead;
a worker killed mid-session leaves the session's history intact for the next one."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import redis
from _redis_helpers import RedisServer

from loopwatch import LoopEvent, LoopGuard, StoreError
from loopwatch.messages import STORE_UNAVAILABLE_CRITICAL
from loopwatch.stores import RedisStore
from loopwatch.stores.redis import DEFAULT_BREAKER_COOLDOWN_S
from loopwatch.testing import FakeClock

pytestmark = pytest.mark.redis

WORKER = Path(__file__).with_name("_mp_worker.py")
S = "agent:main:faults"
CONFIG = {"enabled": True, "warningThreshold": 2, "criticalThreshold": 4}


def loop_once(guard: LoopGuard, *, tool: str = "read") -> str:
    decision = guard.before_call(tool, {"path": "same"}, session_key=S)
    guard.after_call(tool, {"path": "same"}, session_key=S, result=decision.tool_result or "same")
    return decision.action


def make_guard(server: RedisServer, **options: Any) -> tuple[LoopGuard, list[LoopEvent], Any]:
    events: list[LoopEvent] = []
    clock = FakeClock(time.time())
    store = RedisStore.from_url(server.url, **options)
    guard = LoopGuard(CONFIG, store=store, clock=clock, listeners=[events.append])
    return guard, events, clock


def store_errors(events: list[LoopEvent]) -> list[dict[str, Any]]:
    return [e.to_dict() for e in events if e.type == "store.error"]


def test_redis_down_allows_calls_then_detection_resumes(
    redis_server_factory: Callable[..., RedisServer], caplog: pytest.LogCaptureFixture
) -> None:
    server = redis_server_factory()
    guard, events, clock = make_guard(server)
    assert [loop_once(guard) for _ in range(5)] == ["allow", "allow", "warn", "warn", "block"]

    server.stop()
    events.clear()
    with caplog.at_level(logging.WARNING, logger="loopwatch.store"):
        actions = [loop_once(guard) for _ in range(4)]
        clock.advance(31)  # the log line is rate-limited on the guard's clock
        actions.append(loop_once(guard))
    assert actions == ["allow"] * 5
    errors = store_errors(events)
    assert [e["operation"] for e in errors] == ["before_call", "after_call"] * 5
    assert all(e["failOpen"] is True and "ConnectionError" in e["error"] for e in errors)
    lines = [r.getMessage() for r in caplog.records if r.name == "loopwatch.store"]
    assert len(lines) == 2
    assert lines[0].startswith("loop detection store failed: operation=before_call error=")
    assert lines[0].endswith("policy=fail-open")
    # Accessors are not on the tool-call path: they report the failure to their caller.
    with pytest.raises(StoreError):
        guard.history(session_key=S)

    server.start()  # same port, empty (no persistence), scripts gone: nothing to reset
    events.clear()
    assert [loop_once(guard) for _ in range(5)] == ["allow", "allow", "warn", "warn", "block"]
    assert store_errors(events) == []


def test_history_survives_a_redis_restart_with_persistence(
    redis_server_factory: Callable[..., RedisServer],
) -> None:
    server = redis_server_factory("--appendonly", "yes", "--appendfsync", "always")
    guard, events, _clock = make_guard(server)
    assert [loop_once(guard) for _ in range(4)] == ["allow", "allow", "warn", "warn"]
    server.restart()
    assert loop_once(guard) == "block"  # the loop is remembered across the restart
    assert store_errors(events) == []
    assert len(guard.history(session_key=S)) == 4


def test_a_slow_redis_times_out_and_the_call_is_allowed(
    redis_server_factory: Callable[..., RedisServer],
) -> None:
    server = redis_server_factory()
    guard, events, _clock = make_guard(server, socket_timeout=0.2)
    assert loop_once(guard) == "allow"
    admin = redis.Redis.from_url(server.url)
    admin.client_pause(1000, all=True)  # the server stops answering for a second
    started = time.monotonic()
    decision = guard.before_call("read", {"path": "other"}, session_key=S)
    elapsed = time.monotonic() - started
    assert decision.action == "allow"
    assert 0.15 < elapsed < 0.8
    (error,) = store_errors(events)
    assert error["operation"] == "before_call" and "TimeoutError" in error["error"]
    admin.client_unpause()
    admin.close()
    # The breaker: for its cool-down the store skips Redis and fails open at once.
    events.clear()
    started = time.monotonic()
    assert loop_once(guard) == "allow"
    assert time.monotonic() - started < 0.15
    assert all("breaker open" in e["error"] for e in store_errors(events))
    time.sleep(DEFAULT_BREAKER_COOLDOWN_S)
    events.clear()
    assert loop_once(guard) in ("allow", "warn")
    assert store_errors(events) == []


def test_fail_closed_blocks_with_the_store_unavailable_message(
    redis_server_factory: Callable[..., RedisServer],
) -> None:
    server = redis_server_factory()
    guard, events, _clock = make_guard(server, fail_open=False)
    assert loop_once(guard) == "allow"
    server.stop()
    decision = guard.before_call("exec", {"cmd": "ls"}, session_key=S)
    message = STORE_UNAVAILABLE_CRITICAL.format(tool="exec")
    assert decision.action == "block" and decision.enforced
    assert decision.verdict.message == message
    assert decision.tool_result is not None
    assert decision.tool_result["content"] == [{"type": "text", "text": message}]
    assert guard.after_call("exec", {"cmd": "ls"}, session_key=S, result="x") is None
    errors = store_errors(events)
    assert [(e["operation"], e["failOpen"]) for e in errors] == [
        ("before_call", False),
        ("after_call", False),
    ]
    server.start()
    assert loop_once(guard) in ("allow", "warn")


def test_fail_closed_in_shadow_mode_still_allows(
    redis_server_factory: Callable[..., RedisServer],
) -> None:
    server = redis_server_factory()
    store = RedisStore.from_url(server.url, fail_open=False)
    guard = LoopGuard(CONFIG, store=store, enforce=False)
    server.stop()
    assert guard.before_call("read", {}, session_key=S).action == "allow"


def test_compaction_retry_and_async_calls_fail_open(
    redis_server_factory: Callable[..., RedisServer],
) -> None:
    server = redis_server_factory()
    guard, events, _clock = make_guard(server)
    server.stop()
    guard.compaction_retry(session_key=S, run_id="r")
    assert [e.to_dict()["operation"] for e in events] == ["compaction_retry"]


async def test_async_client_fails_open_and_recovers(
    redis_server_factory: Callable[..., RedisServer],
) -> None:
    server = redis_server_factory()
    events: list[LoopEvent] = []
    store = RedisStore.from_url(server.url, use_asyncio=True)
    guard = LoopGuard(CONFIG, store=store, listeners=[events.append])

    async def once() -> str:
        decision = await guard.abefore_call("read", {"p": 1}, session_key=S)
        await guard.aafter_call(
            "read", {"p": 1}, session_key=S, result=decision.tool_result or "same"
        )
        return decision.action

    assert [await once() for _ in range(2)] == ["allow", "allow"]
    server.stop()
    assert await once() == "allow"
    assert [e.to_dict()["operation"] for e in events] == ["before_call", "after_call"]
    server.start()
    assert [await once() for _ in range(5)] == ["allow", "allow", "warn", "warn", "block"]
    await store.aclose()


def _steady(url: str, prefix: str, name: str, start: int, calls: int, delay: float) -> Any:
    return subprocess.Popen(
        [
            sys.executable,
            str(WORKER),
            "steady",
            f"--url={url}",
            f"--prefix={prefix}",
            f"--session={S}",
            f"--config={json.dumps({'enabled': True, 'warningThreshold': 3})}",
            f"--calls={calls}",
            f"--name={name}",
            f"--start={start}",
            f"--delay={delay}",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )


def test_a_killed_worker_leaves_the_session_history_intact(
    redis_url: str, redis_client: Any
) -> None:
    from _redis_helpers import delete_prefix, unique_prefix

    prefix = unique_prefix()
    first = _steady(redis_url, prefix, "first", 0, 1000, 0.01)
    assert first.stdout is not None
    finished = [json.loads(first.stdout.readline()) for _ in range(5)]
    first.kill()  # SIGKILL: no cleanup, no goodbye
    first.wait()
    store = RedisStore.from_url(redis_url, prefix=prefix)
    before = store.history(S, time.time())
    ids = [r.tool_call_id for r in before]
    # Every call the dead worker finished is there, in order; at most one more
    # (killed between its before_call and after_call, so still pending).
    assert ids[:5] == [f"first-{i}" for i in range(5)] == [c["call_id"] for c in finished]
    assert all(r.result_hash is not None for r in before[:5])
    assert len(before) <= 6 + 1

    second = _steady(redis_url, prefix, "second", 0, 3, 0.0)
    out, _ = second.communicate(timeout=30)
    decisions = [json.loads(line)["decision"] for line in out.splitlines()]
    # The restarted worker's detection counts the dead worker's calls.
    assert decisions[0][:3] == ["warn", "warning", "generic_repeat"]
    assert decisions[0][3] == len(before)
    after = store.history(S, time.time())
    assert after[: len(before)] == before  # pending ones may have been filled since
    assert [r.tool_call_id for r in after[len(before) :]] == [f"second-{i}" for i in range(3)]
    store.close()
    delete_prefix(redis_client, prefix)
