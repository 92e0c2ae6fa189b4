"""The call-time surface under hostile names, ids and schedules, on every in-process store.

Strict guards (the suite's mode): a value of the host's follows the fail-open policy, so
anything raised here is a loopwatch bug. The SQLite store is included because its text
columns are tokens of their own (lone surrogates, NUL).
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from loopwatch import LoopGuard, MemoryStore, PostCompactionLoopPersistedError, Store
from loopwatch.stores.sqlite import SqliteStore

CONFIG = {
    "enabled": True,
    "warningThreshold": 2,
    "criticalThreshold": 3,
    "globalCircuitBreakerThreshold": 4,
}
NAMES = st.one_of(
    st.text(max_size=12),
    st.sampled_from(["", " ", "\x00", "a\x00b", "\ud800", "x\udfff", "\u2028", "READ", "x" * 5000]),
)
IDS = st.one_of(st.none(), NAMES, st.integers(), st.lists(st.integers(), max_size=2))


def _store(kind: str, folder: Path) -> Store:
    return MemoryStore() if kind == "memory" else SqliteStore(folder / "hostile.db")


def _pair(guard: LoopGuard, tool: Any, params: Any, **ids: Any) -> None:
    decision = guard.before_call(tool, params, **ids)
    result = decision.tool_result if decision.tool_result is not None else "same"
    with contextlib.suppress(PostCompactionLoopPersistedError):  # the deliberate one
        guard.after_call(tool, params, result=result, **ids)


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
def test_hostile_names_and_ids_never_raise(kind: str, tmp_path_factory: Any) -> None:
    store = _store(kind, tmp_path_factory.mktemp(kind))
    guard = LoopGuard(CONFIG, store=store, profile="adaptive", strict=True)

    @settings(max_examples=60, suppress_health_check=list(HealthCheck), deadline=None)
    @given(session=NAMES, tool=NAMES, run=IDS, call=IDS, agent=IDS, text=NAMES)
    def check(session: str, tool: str, run: Any, call: Any, agent: Any, text: str) -> None:
        ids = {"session_key": session, "run_id": run, "tool_call_id": call, "agent_id": agent}
        for _ in range(3):
            _pair(guard, tool, {"q": text}, **ids)
        guard.compaction_retry(session_key=session, run_id=run, agent_id=agent)
        guard.critical_strike(session_key=session, run_id=run)
        guard.before_batch([(tool, {}, call), (tool, {}, None)], session_key=session, run_id=run)
        guard.history(session_key=session)
        guard.guard_snapshot(session_key=session, run_id=run)
        guard.last_guard_verdict(session_key=session, run_id=run)

    try:
        check()
    finally:
        store.close()


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
def test_threads_and_tasks_on_one_guard_never_raise(kind: str, tmp_path: Path) -> None:
    store = _store(kind, tmp_path)
    guard = LoopGuard(CONFIG, store=store, strict=True)
    errors: list[BaseException] = []

    def worker(seed: int) -> None:
        try:
            for index in range(120):
                session = f"s{(seed + index) % 3}"
                call = f"c{index % 4}" if index % 3 else None
                _pair(guard, "read", {"p": index % 2}, session_key=session, tool_call_id=call)
                if index % 10 == 0:
                    guard.before_batch([("read", {}, None)] * 2, session_key=session)
                    guard.history(session_key=session)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    async def tasks() -> None:
        async def one(seed: int) -> None:
            for index in range(60):
                session = f"s{(seed + index) % 3}"
                decision = await guard.abefore_call("read", {"p": 1}, session_key=session)
                await asyncio.sleep(0)
                with contextlib.suppress(PostCompactionLoopPersistedError):
                    await guard.aafter_call(
                        "read", {"p": 1}, session_key=session, result=decision.tool_result or "x"
                    )

        await asyncio.gather(*(one(seed) for seed in range(4)))

    def loop() -> None:
        try:
            asyncio.run(tasks())
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(seed,)) for seed in range(3)]
    threads += [threading.Thread(target=loop) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    store.close()
    assert errors == []
