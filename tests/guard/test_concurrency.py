"""Parallel tool calls of one session lose no record (SPEC §5.4), threads and asyncio."""

from __future__ import annotations

import asyncio
import threading

from loopwatch import LoopGuard

S = "parallel"
BIG = {
    "enabled": True,
    "historySize": 100_000,
    "warningThreshold": 50,
    "criticalThreshold": 100_000,
    "globalCircuitBreakerThreshold": 100_001,
}


def test_threads_lose_no_record() -> None:
    guard = LoopGuard(BIG)
    threads_n, calls_n = 8, 250
    barrier = threading.Barrier(threads_n)

    def worker(t: int) -> None:
        barrier.wait()
        for i in range(calls_n):
            call_id = f"{t}-{i}"
            guard.before_call("read", {"t": t % 2}, session_key=S, tool_call_id=call_id)
            guard.after_call(
                "read", {"t": t % 2}, session_key=S, tool_call_id=call_id, result=i % 3
            )

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(threads_n)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    history = guard.history(session_key=S)
    assert len(history) == threads_n * calls_n
    assert all(r.result_hash is not None for r in history)
    assert len({r.tool_call_id for r in history}) == threads_n * calls_n
    for t in range(threads_n):  # each thread's own order is kept
        mine = [
            int((r.tool_call_id or "").split("-")[1])
            for r in history
            if (r.tool_call_id or "").startswith(f"{t}-")
        ]
        assert mine == sorted(mine)


async def test_asyncio_tasks_lose_no_record_and_twins_agree() -> None:
    guard = LoopGuard(BIG)

    async def task(t: int) -> None:
        for i in range(100):
            call_id = f"{t}-{i}"
            await guard.abefore_call("read", {"t": t}, session_key=S, tool_call_id=call_id)
            await asyncio.sleep(0)
            await guard.aafter_call(
                "read", {"t": t}, session_key=S, tool_call_id=call_id, result="r"
            )

    await asyncio.gather(*(task(t) for t in range(10)))
    history = await guard.ahistory(session_key=S)
    assert len(history) == 1000 and all(r.result_hash for r in history)
    assert history == guard.history(session_key=S)


async def test_async_twins_match_sync_decisions() -> None:
    config = {
        "enabled": True,
        "warningThreshold": 2,
        "criticalThreshold": 4,
        "globalCircuitBreakerThreshold": 6,
    }
    sync_guard, async_guard = LoopGuard(config), LoopGuard(config)
    sync_actions, async_actions = [], []
    for _ in range(6):
        d = sync_guard.before_call("read", {"a": 1}, session_key=S, run_id="r")
        sync_actions.append((d.action, d.verdict))
        sync_guard.after_call(
            "read", {"a": 1}, session_key=S, run_id="r", result=d.tool_result or "x"
        )
        a = await async_guard.abefore_call("read", {"a": 1}, session_key=S, run_id="r")
        async_actions.append((a.action, a.verdict))
        await async_guard.aafter_call(
            "read", {"a": 1}, session_key=S, run_id="r", result=a.tool_result or "x"
        )
    assert sync_actions == async_actions
    await async_guard.acompaction_retry(session_key=S, run_id="r")
    snap = await async_guard.aguard_snapshot(session_key=S, run_id="r")
    assert snap.armed and snap.remaining_attempts == 3
    assert await async_guard.alast_guard_verdict(session_key=S, run_id="r") is not None
