"""Concurrency on every store, as an outsider would drive it (SPEC §5.4, §5.2).

Threads, asyncio tasks and processes share one guard or one store; afterwards the history
holds exactly the calls made, and detection saw them as some sequential order would:

* identical calls whose verdicts do not depend on order (warnings count every record,
  outcome or not): the counts the calls saw are exactly 0, 1, …, N-1, each once;
* identical calls past the critical threshold: a block sees at least the threshold's
  records, at most one more per other worker in flight (a streak counts only finished
  calls); blocked calls are never recorded; afterwards the next call is blocked with the
  exact count of the history, as the same history replayed sequentially is.

Also the store failing under concurrent calls (Redis killed, SQLite locked, SQLite
unable to commit): no exception, the calls are allowed and the reason logged, and
detection resumes when the store is back.
"""

from __future__ import annotations

import asyncio
import logging
import multiprocessing
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from _hostile_workers import Decided, identical_calls, open_new_file, open_store, process_worker
from _redis_helpers import RedisServer, StoreFactory, delete_prefix, unique_prefix

from loopwatch import LoopEvent, LoopGuard, MemoryStore, Store

#: Warnings only: every verdict's count is the number of records before the call.
WARN_ONLY = {
    "enabled": True,
    "historySize": 1000,
    "warningThreshold": 10,
    "criticalThreshold": 1_000_000,
    "globalCircuitBreakerThreshold": 1_000_001,
}
#: Criticals at 20 identical outcomes (the global breaker, at 30, stays out of reach).
CRITICAL = {
    "enabled": True,
    "historySize": 1000,
    "warningThreshold": 10,
    "criticalThreshold": 20,
    "globalCircuitBreakerThreshold": 30,
}
ROOT = Path(__file__).resolve().parents[2]


def _run_threads(count: int, work: Callable[[int], list[Decided]]) -> list[list[Decided]]:
    barrier = threading.Barrier(count)
    results: list[list[Decided]] = [[] for _ in range(count)]
    errors: list[BaseException] = []

    def worker(index: int) -> None:
        try:
            barrier.wait(timeout=60)
            results[index] = work(index)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=300)
    assert errors == []
    assert not any(thread.is_alive() for thread in threads)
    return results


def _assert_exact_warning_counts(decided: list[Decided], total: int) -> None:
    """Each of the ``total`` calls saw a different number of earlier records, 0 … total-1."""
    assert sorted(count for _, _, count in decided if count) == list(range(10, total))
    assert Counter(action for action, _, _ in decided) == {"allow": 10, "warn": total - 10}
    assert {detector for action, detector, _ in decided if action == "warn"} == {"generic_repeat"}


def _sequential_probe(records: int) -> Decided:
    """The decision on the next identical call after ``records`` identical finished calls,
    replayed in one thread on a fresh memory store."""
    store = MemoryStore()
    filler = LoopGuard(WARN_ONLY, store=store, strict=True)
    identical_calls(filler, "s", records, "fill")
    decision = LoopGuard(CRITICAL, store=store, strict=True).before_call(
        "read", {"path": "same"}, session_key="s", tool_call_id="probe"
    )
    return decision.action, decision.verdict.detector, decision.verdict.count


def _assert_critical_outcome(guard: LoopGuard, decided: list[Decided], workers: int) -> None:
    history = guard.history(session_key="shared")
    allowed = [d for d in decided if d[0] != "block"]
    blocked = [d for d in decided if d[0] == "block"]
    assert len(history) == len(allowed)  # every call that ran is recorded, no blocked one
    assert all(r.result_hash is not None for r in history)
    assert 20 <= len(history) <= 20 + workers - 1  # at most one in flight per other worker
    assert blocked and all(
        detector == "generic_repeat" and 20 <= count <= len(history)
        for _, detector, count in blocked
    )
    for _ in range(2):  # sticky: the count never grows, the history does not change
        probe = guard.before_call("read", {"path": "same"}, session_key="shared")
        assert (probe.action, probe.verdict.detector, probe.verdict.count) == _sequential_probe(
            len(history)
        )
        assert probe.verdict.count == len(history)
        guard.after_call("read", {"path": "same"}, session_key="shared", result=probe.tool_result)
    assert guard.history(session_key="shared") == history


# --- threads -----------------------------------------------------------------------------


def test_threads_on_one_session_see_every_record_once(make_store: StoreFactory) -> None:
    guard = LoopGuard(WARN_ONLY, store=make_store(), strict=True)
    results = _run_threads(8, lambda i: identical_calls(guard, "shared", 25, f"t{i}"))
    _assert_exact_warning_counts([d for r in results for d in r], 200)
    history = guard.history(session_key="shared")
    assert len(history) == 200 and all(r.result_hash is not None for r in history)
    assert len({r.tool_call_id for r in history}) == 200


def test_threads_on_one_session_emit_each_warning_bucket_at_most_once(
    make_store: StoreFactory,
) -> None:
    events: list[LoopEvent] = []
    lock = threading.Lock()

    def listen(event: LoopEvent) -> None:
        with lock:
            events.append(event)

    guard = LoopGuard(WARN_ONLY, store=make_store(), listeners=[listen], strict=True)
    _run_threads(8, lambda i: identical_calls(guard, "shared", 25, f"t{i}"))
    buckets = [e.to_dict()["count"] // 10 for e in events if e.type == "tool.loop"]
    assert buckets and len(buckets) == len(set(buckets))  # no bucket emitted twice
    assert set(buckets) <= set(range(1, 20))


def test_threads_past_the_critical_threshold_block_with_the_exact_count(
    make_store: StoreFactory,
) -> None:
    guard = LoopGuard(CRITICAL, store=make_store(), strict=True)
    results = _run_threads(8, lambda i: identical_calls(guard, "shared", 10, f"t{i}"))
    _assert_critical_outcome(guard, [d for r in results for d in r], 8)


def test_threads_on_their_own_sessions_decide_as_one_thread_would(
    make_store: StoreFactory,
) -> None:
    guard = LoopGuard(CRITICAL, store=make_store(), strict=True)
    expected = identical_calls(LoopGuard(CRITICAL, strict=True), "alone", 40, "x")
    assert expected[-1] == ("block", "generic_repeat", 20)
    results = _run_threads(6, lambda i: identical_calls(guard, f"own-{i}", 40, f"t{i}"))
    assert results == [expected] * 6
    assert [len(guard.history(session_key=f"own-{i}")) for i in range(6)] == [20] * 6


def test_parallel_batches_lose_no_record(make_store: StoreFactory, store_kind: str) -> None:
    """Threads each admitting whole turns of three identical calls: every call is recorded;
    on an in-process store a turn is admitted atomically, so its counts are consecutive."""
    guard = LoopGuard(WARN_ONLY, store=make_store(), strict=True)

    def turns(index: int) -> list[Decided]:
        decided: list[Decided] = []
        for turn in range(8):
            ids = [f"t{index}-{turn}-{k}" for k in range(3)]
            decisions = guard.before_batch(
                [("read", {"path": "same"}, call_id) for call_id in ids], session_key="shared"
            )
            decided += [(d.action, d.verdict.detector, d.verdict.count) for d in decisions]
            for call_id in ids:
                guard.after_call(
                    "read", {"path": "same"}, session_key="shared", tool_call_id=call_id, result="r"
                )
        return decided

    results = _run_threads(6, turns)
    history = guard.history(session_key="shared")
    assert len(history) == 6 * 8 * 3 and all(r.result_hash is not None for r in history)
    if store_kind != "redis":  # (a Redis batch is one round trip per call: see RedisStore)
        _assert_exact_warning_counts([d for r in results for d in r], 144)
        for decided in results:
            for turn in range(8):
                counts = [count for _, _, count in decided[3 * turn : 3 * turn + 3]]
                if counts[0] >= 10:
                    assert counts == [counts[0], counts[0] + 1, counts[0] + 2]


# --- asyncio -----------------------------------------------------------------------------


async def _task_calls(guard: LoopGuard, session: str, calls: int, tag: str) -> list[Decided]:
    decided: list[Decided] = []
    for index in range(calls):
        call_id = f"{tag}-{index}"
        decision = await guard.abefore_call(
            "read", {"path": "same"}, session_key=session, tool_call_id=call_id
        )
        decided.append((decision.action, decision.verdict.detector, decision.verdict.count))
        await asyncio.sleep(0)  # the tool runs: other tasks go on
        await guard.aafter_call(
            "read",
            {"path": "same"},
            session_key=session,
            tool_call_id=call_id,
            result=decision.tool_result if decision.tool_result is not None else "same text",
        )
    return decided


async def test_asyncio_tasks_on_one_session_see_every_record_once(
    make_store: StoreFactory,
) -> None:
    guard = LoopGuard(WARN_ONLY, store=make_store(use_asyncio=True), strict=True)
    results = await asyncio.gather(*(_task_calls(guard, "shared", 20, f"a{i}") for i in range(10)))
    _assert_exact_warning_counts([d for r in results for d in r], 200)
    history = await guard.ahistory(session_key="shared")
    assert len(history) == 200 and history == guard.history(session_key="shared")


async def test_asyncio_tasks_past_the_critical_threshold(make_store: StoreFactory) -> None:
    guard = LoopGuard(CRITICAL, store=make_store(use_asyncio=True), strict=True)
    results = await asyncio.gather(*(_task_calls(guard, "shared", 8, f"a{i}") for i in range(5)))
    _assert_critical_outcome(guard, [d for r in results for d in r], 5)


async def test_asyncio_batches_lose_no_record(make_store: StoreFactory, store_kind: str) -> None:
    guard = LoopGuard(WARN_ONLY, store=make_store(use_asyncio=True), strict=True)

    async def turns(index: int) -> list[Decided]:
        decided: list[Decided] = []
        for turn in range(6):
            ids = [f"a{index}-{turn}-{k}" for k in range(3)]
            decisions = await guard.abefore_batch(
                [("read", {"path": "same"}, call_id) for call_id in ids], session_key="shared"
            )
            decided += [(d.action, d.verdict.detector, d.verdict.count) for d in decisions]
            await asyncio.sleep(0)
            for call_id in ids:
                await guard.aafter_call(
                    "read", {"path": "same"}, session_key="shared", tool_call_id=call_id, result="r"
                )
        return decided

    results = await asyncio.gather(*(turns(i) for i in range(6)))
    history = await guard.ahistory(session_key="shared")
    assert len(history) == 6 * 6 * 3 and all(r.result_hash is not None for r in history)
    if store_kind != "redis":
        _assert_exact_warning_counts([d for r in results for d in r], 108)


# --- processes ---------------------------------------------------------------------------


@pytest.fixture(params=["sqlite", pytest.param("redis", marks=pytest.mark.redis)])
def shared_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, str, str]]:
    """(kind, where, prefix) of a store the worker processes open for themselves."""
    if request.param == "sqlite":
        yield "sqlite", str(tmp_path / "shared.db"), ""
        return
    import redis

    url = request.getfixturevalue("redis_url")
    prefix = unique_prefix()
    yield "redis", url, prefix
    client = redis.Redis.from_url(url)
    delete_prefix(client, prefix)
    client.close()


def _run_processes(
    where: tuple[str, str, str], config: dict[str, Any], calls: int
) -> list[list[Decided]]:
    kind, path, prefix = where
    context = multiprocessing.get_context("spawn")
    with context.Manager() as manager, context.Pool(4) as pool:
        barrier = manager.Barrier(4)
        pending = [
            pool.apply_async(
                process_worker, (kind, path, prefix, config, "shared", calls, f"p{i}", barrier)
            )
            for i in range(4)
        ]
        return [p.get(timeout=300) for p in pending]


def test_processes_opening_a_new_sqlite_file_at_once_all_open_it(tmp_path: Path) -> None:
    """The first openers of a new file race to switch it to WAL, and SQLite answers the
    losers "database is locked" without waiting (17 of 40 rounds of 8 processes failed
    before the store retried the switch within its busy timeout)."""
    context = multiprocessing.get_context("spawn")
    with context.Manager() as manager, context.Pool(8) as pool:
        for round_ in range(12):
            where = str(tmp_path / f"new-{round_}.db")
            barrier = manager.Barrier(8)
            opened = [pool.apply_async(open_new_file, (where, barrier)) for _ in range(8)]
            assert [result.get(timeout=120) for result in opened] == ["ok"] * 8


def test_four_processes_see_every_record_once(shared_store: tuple[str, str, str]) -> None:
    results = _run_processes(shared_store, WARN_ONLY, 10)
    _assert_exact_warning_counts([d for r in results for d in r], 40)
    store = open_store(*shared_store)
    try:
        history = LoopGuard(WARN_ONLY, store=store).history(session_key="shared")
        assert len(history) == 40 and all(r.result_hash is not None for r in history)
        assert len({r.tool_call_id for r in history}) == 40
    finally:
        store.close()


def test_four_processes_past_the_critical_threshold(shared_store: tuple[str, str, str]) -> None:
    results = _run_processes(shared_store, CRITICAL, 15)
    store = open_store(*shared_store)
    try:
        _assert_critical_outcome(
            LoopGuard(CRITICAL, store=store, strict=True), [d for r in results for d in r], 4
        )
    finally:
        store.close()


# --- the store failing under concurrent calls --------------------------------------------


def _pounding(guard: LoopGuard, stop: threading.Event, errors: list[BaseException]) -> None:
    try:
        while not stop.is_set():
            decision = guard.before_call("read", {"path": "same"}, session_key="pounded")
            guard.after_call(
                "read", {"path": "same"}, session_key="pounded", result=decision.tool_result or "r"
            )
    except BaseException as exc:  # pragma: no cover - reported by the test
        errors.append(exc)


def _loop_actions(guard: LoopGuard, session: str, calls: int) -> list[str]:
    return [action for action, _, _ in identical_calls(guard, session, calls, session)]


@pytest.mark.redis
def test_redis_killed_under_threads_fails_open_then_detection_resumes(
    redis_server_factory: Callable[..., RedisServer], caplog: pytest.LogCaptureFixture
) -> None:
    from loopwatch.stores import RedisStore

    server = redis_server_factory()
    events: list[LoopEvent] = []
    store = RedisStore.from_url(server.url, socket_timeout=2, breaker_cooldown_s=0.5)
    config = {"enabled": True, "warningThreshold": 2, "criticalThreshold": 4}
    guard = LoopGuard(config, store=store, listeners=[events.append], strict=True)
    stop, errors = threading.Event(), []  # type: ignore[var-annotated]
    threads = [threading.Thread(target=_pounding, args=(guard, stop, errors)) for _ in range(4)]
    with caplog.at_level(logging.WARNING, logger="loopwatch.store"):
        for thread in threads:
            thread.start()
        time.sleep(0.3)
        assert server.process is not None
        server.process.kill()  # SIGKILL, mid-run: no goodbye to the clients
        server.process.wait()
        time.sleep(0.5)
        assert _loop_actions(guard, "while-down", 5) == ["allow"] * 5
        server.start()
        time.sleep(1.0)  # past the breaker's cooldown
        stop.set()
        for thread in threads:
            thread.join(timeout=60)
    assert errors == []
    assert any(e.type == "store.error" for e in events)
    assert any(r.getMessage().startswith("loop detection store failed") for r in caplog.records)
    assert _loop_actions(guard, "after", 5) == ["allow", "allow", "warn", "warn", "block"]
    store.close()


def test_sqlite_locked_by_another_process_fails_open_then_resumes(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from loopwatch.stores.sqlite import SqliteStore

    path = tmp_path / "locked.db"
    store = SqliteStore(path, busy_timeout_s=0.2)
    config = {"enabled": True, "warningThreshold": 2, "criticalThreshold": 4}
    guard = LoopGuard(config, store=store, strict=True)
    assert _loop_actions(guard, "before", 2) == ["allow", "allow"]
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        with caplog.at_level(logging.WARNING, logger="loopwatch.store"):
            results = _run_threads(3, lambda i: identical_calls(guard, "locked", 3, f"t{i}"))
        assert {action for r in results for action, _, _ in r} == {"allow"}
        assert any("database is locked" in r.getMessage() for r in caplog.records)
    finally:
        holder.rollback()
        holder.close()
    assert _loop_actions(guard, "after", 5) == ["allow", "allow", "warn", "warn", "block"]
    assert len(guard.history(session_key="before")) == 2
    store.close()


_FULL_DISK = r"""
import json, logging, os, resource, signal, sys
from loopwatch import LoopGuard
from loopwatch.stores.sqlite import SqliteStore

lines = []
class Keep(logging.Handler):
    def emit(self, record):
        lines.append(record.getMessage())
logging.getLogger("loopwatch.store").addHandler(Keep())
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG
config = {"enabled": True, "warningThreshold": 2, "criticalThreshold": 4}
store = SqliteStore(sys.argv[1])
guard = LoopGuard(config, store=store, strict=True)

def loop(session, calls):
    actions = []
    for _ in range(calls):
        d = guard.before_call("read", {"p": 1}, session_key=session)
        guard.after_call("read", {"p": 1}, session_key=session, result=d.tool_result or "r")
        actions.append(d.action)
    return actions

first = loop("s", 2)
soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
resource.setrlimit(resource.RLIMIT_FSIZE, (1024, hard))  # the disk is full
full = loop("s", 4)
resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
after = loop("t", 5)
print(json.dumps({
    "first": first, "full": full, "after": after, "lines": lines,
    "s": len(guard.history(session_key="s")),
}))
"""


@pytest.mark.skipif(sys.platform != "linux", reason="RLIMIT_FSIZE and SIGXFSZ are Linux's")
def test_sqlite_that_cannot_commit_fails_open_and_says_so(tmp_path: Path) -> None:
    """A write SQLite cannot commit (a full disk) must surface as a store failure: the
    session lock's commit swallowed it, so the guard went on deciding against a history
    its writes never reached, and nothing was logged."""
    import json

    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    done = subprocess.run(
        [sys.executable, "-c", _FULL_DISK, str(tmp_path / "full.db")],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    assert seen["first"] == ["allow", "allow"]
    assert seen["full"] == ["allow"] * 4  # fail-open: nothing could be recorded
    assert seen["lines"] and "commit failed" in seen["lines"][0]
    assert "policy=fail-open" in seen["lines"][0]
    assert seen["s"] == 2  # the two calls before the disk filled, nothing half-written
    assert seen["after"] == ["allow", "allow", "warn", "warn", "block"]  # space is back


def test_a_worker_process_killed_mid_burst_leaves_the_others_exact(tmp_path: Path) -> None:
    """SIGKILL one of several processes on a shared SQLite file mid-run: the others go on,
    and the history holds every call that finished, each once."""
    script = r"""
import sys
from loopwatch import LoopGuard
from loopwatch.stores.sqlite import SqliteStore
guard = LoopGuard({"enabled": True, "historySize": 1000, "warningThreshold": 1000,
                   "criticalThreshold": 100000, "globalCircuitBreakerThreshold": 100001},
                  store=SqliteStore(sys.argv[1], busy_timeout_s=60), strict=True)
tag = sys.argv[2]
for i in range(int(sys.argv[3])):
    guard.before_call("read", {"p": 1}, session_key="s", tool_call_id=f"{tag}-{i}")
    guard.after_call("read", {"p": 1}, session_key="s", tool_call_id=f"{tag}-{i}", result="r")
    print(i, flush=True)
"""
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    db = str(tmp_path / "killed.db")
    steady = [
        subprocess.Popen([sys.executable, "-c", script, db, f"w{i}", "60"], env=env)
        for i in range(2)
    ]
    victim = subprocess.Popen(
        [sys.executable, "-c", script, db, "victim", "100000"],
        env=env,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert victim.stdout is not None
    for _ in range(10):
        victim.stdout.readline()
    victim.send_signal(signal.SIGKILL)
    victim.wait()
    for proc in steady:
        assert proc.wait(timeout=300) == 0
    from loopwatch.stores.sqlite import SqliteStore

    store: Store = SqliteStore(db)
    try:
        history = LoopGuard(WARN_ONLY, store=store).history(session_key="s")
    finally:
        store.close()
    ids = [r.tool_call_id or "" for r in history]
    assert len(ids) == len(set(ids))
    assert sum(1 for i in ids if i.startswith("w")) == 120
    assert all(
        r.result_hash is not None for r in history if not r.tool_call_id.startswith("victim")
    )  # type: ignore[union-attr]
    victims = [r for r in history if (r.tool_call_id or "").startswith("victim")]
    assert len(victims) >= 10
    assert all(r.result_hash is not None for r in victims[:-1])  # only its last may be pending
