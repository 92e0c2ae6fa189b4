"""Blocked calls on a full history, under threads: no record of an allowed call is lost.

A blocked call's pending record is appended before detection decides and taken back after
(SPEC §5.2); with a full history its append trims the oldest record, which the take-back
restores. On a store whose operations are separate round trips (Redis), another thread's
write landing between the append and the take-back used to make the trimmed record unreturnable
(the store contract restores only right after the begin), so the history shrank below its
size for good. The guard holds the store's per-session lock for the whole begin-decide-cancel
step on every store; for Redis that lock is a real in-process lock (other processes: see
``RedisStore``).
"""

from __future__ import annotations

import threading

from _redis_helpers import StoreFactory

from loopwatch import LoopGuard

CONFIG = {
    "enabled": True,
    "historySize": 10,
    "warningThreshold": 3,
    "criticalThreshold": 5,
    "globalCircuitBreakerThreshold": 1000,
}


def test_blocks_on_a_full_history_lose_no_record_under_threads(make_store: StoreFactory) -> None:
    guard = LoopGuard(CONFIG, store=make_store(), strict=True)
    barrier = threading.Barrier(5)
    allowed = [0] * 5
    errors: list[BaseException] = []

    def looper(index: int) -> None:  # the same failing call again and again: blocked soon
        barrier.wait(timeout=60)
        for n in range(40):
            call = f"loop-{index}-{n}"
            decision = guard.before_call(
                "exec", {"command": "make test"}, session_key="s", tool_call_id=call
            )
            if decision.action != "block":
                allowed[index] += 1
            guard.after_call(
                "exec",
                {"command": "make test"},
                session_key="s",
                tool_call_id=call,
                result=decision.tool_result if decision.tool_result is not None else "1 failed",
            )

    def filler(index: int) -> None:  # distinct calls: always allowed, each one recorded
        barrier.wait(timeout=60)
        for n in range(40):
            call = f"fill-{index}-{n}"
            params = {"path": f"f{index}-{n}"}
            assert (
                guard.before_call("read", params, session_key="s", tool_call_id=call).action
                != "block"
            )
            allowed[index] += 1
            guard.after_call("read", params, session_key="s", tool_call_id=call, result="x")

    def run(work: object, index: int) -> None:
        try:
            work(index)  # type: ignore[operator]
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(looper, i)) for i in range(3)]
    threads += [threading.Thread(target=run, args=(filler, i)) for i in (3, 4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=300)
    assert errors == [] and not any(t.is_alive() for t in threads)
    history = guard.history(session_key="s")
    assert sum(allowed) > 10
    assert len(history) == 10  # full, as the allowed calls filled it
    assert all(record.result_hash is not None for record in history)


def test_blocks_on_a_full_history_lose_no_record_under_asyncio_tasks(
    make_store: StoreFactory,
) -> None:
    import asyncio

    guard = LoopGuard(CONFIG, store=make_store(use_asyncio=True), strict=True)
    allowed = [0] * 5

    async def looper(index: int) -> None:
        for n in range(30):
            call = f"loop-{index}-{n}"
            params = {"command": "make test"}
            decision = await guard.abefore_call("exec", params, session_key="s", tool_call_id=call)
            if decision.action != "block":
                allowed[index] += 1
            await asyncio.sleep(0)
            result = decision.tool_result if decision.tool_result is not None else "1 failed"
            await guard.aafter_call(
                "exec", params, session_key="s", tool_call_id=call, result=result
            )

    async def filler(index: int) -> None:
        for n in range(30):
            call = f"fill-{index}-{n}"
            params = {"path": f"f{index}-{n}"}
            decision = await guard.abefore_call("read", params, session_key="s", tool_call_id=call)
            assert decision.action != "block"
            allowed[index] += 1
            await guard.aafter_call("read", params, session_key="s", tool_call_id=call, result="x")

    async def main() -> None:
        await asyncio.gather(*(looper(i) for i in range(3)), *(filler(i) for i in (3, 4)))

    asyncio.run(main())
    history = guard.history(session_key="s")
    assert sum(allowed) > 10
    assert len(history) == 10
    assert all(record.result_hash is not None for record in history)
