"""The read-only accessors and a broken clock or store (SPEC §9.4, §5.6).

The accessors are inspection APIs: every failure reaches the caller as one ``StoreError``
(never the raw exception of a clock or a store of the host's). The call-time methods,
which the agent calls, never raise even when the clock fails inside their store-failure
handler.
"""

from __future__ import annotations

import asyncio
import logging
import math
import re
from collections.abc import Callable
from typing import Any

import pytest

from loopwatch import LoopGuard, MemoryStore, StoreError, store_from_url
from loopwatch.detectors.compaction import GuardSnapshot

S = "session"
ENABLED = {"enabled": True}
ACCESSORS = ("history", "guard_snapshot", "last_guard_verdict")


def _broken_clock() -> float:
    raise ValueError("clock broke")


def _read(guard: LoopGuard, name: str, *, use_async: bool) -> Any:
    if use_async:
        return asyncio.run(getattr(guard, f"a{name}")(session_key=S))
    return getattr(guard, name)(session_key=S)


class RaisingStore(MemoryStore):
    """A store of the host's whose reads raise something else than ``StoreError``."""

    def history(self, session_key: str, now: float) -> Any:
        raise KeyError("internal")

    def guard_snapshot(self, session_key: str, run_id: str | None, now: float) -> Any:
        raise KeyError("internal")

    def last_guard_verdict(self, session_key: str, run_id: str | None, now: float) -> Any:
        raise KeyError("internal")


class GarbageStore(MemoryStore):
    """A store of the host's whose reads answer something else than the contract's types."""

    def history(self, session_key: str, now: float) -> Any:
        return ("not a record",)

    def guard_snapshot(self, session_key: str, run_id: str | None, now: float) -> Any:
        return {"armed": True}

    def last_guard_verdict(self, session_key: str, run_id: str | None, now: float) -> Any:
        return "a verdict"


class DownStore(MemoryStore):
    def history(self, session_key: str, now: float) -> Any:
        raise StoreError("connection refused")

    def begin_call(self, *args: Any) -> Any:
        raise StoreError("connection refused")

    def record_outcome(self, *args: Any) -> Any:
        raise StoreError("connection refused")


@pytest.mark.parametrize("use_async", [False, True])
@pytest.mark.parametrize("name", ACCESSORS)
@pytest.mark.parametrize("strict", [False, True])
def test_a_raising_clock_is_a_store_error(name: str, use_async: bool, strict: bool) -> None:
    guard = LoopGuard(ENABLED, clock=_broken_clock, strict=strict)
    with pytest.raises(StoreError, match=f"^{name} failed: ValueError: clock broke$") as info:
        _read(guard, name, use_async=use_async)
    assert isinstance(info.value.__cause__, ValueError)


@pytest.mark.parametrize("use_async", [False, True])
@pytest.mark.parametrize("name", ACCESSORS)
def test_a_store_raising_another_exception_is_a_store_error(name: str, use_async: bool) -> None:
    guard = LoopGuard(ENABLED, store=RaisingStore())
    with pytest.raises(StoreError, match=f"^{name} failed: KeyError: 'internal'$") as info:
        _read(guard, name, use_async=use_async)
    assert isinstance(info.value.__cause__, KeyError)


@pytest.mark.parametrize("use_async", [False, True])
@pytest.mark.parametrize("name", ACCESSORS)
def test_a_store_answering_garbage_is_a_store_error(name: str, use_async: bool) -> None:
    guard = LoopGuard(ENABLED, store=GarbageStore())
    with pytest.raises(StoreError, match=f"^{name} failed: TypeError: the store's "):
        _read(guard, name, use_async=use_async)


@pytest.mark.parametrize("use_async", [False, True])
def test_the_stores_own_store_error_is_raised_as_it_is(use_async: bool) -> None:
    guard = LoopGuard(ENABLED, store=DownStore())
    with pytest.raises(StoreError, match=r"^connection refused$"):
        _read(guard, "history", use_async=use_async)


@pytest.mark.parametrize("use_async", [False, True])
def test_a_blank_session_reads_nothing_and_never_calls_the_clock(use_async: bool) -> None:
    guard = LoopGuard(ENABLED, clock=_broken_clock, store=RaisingStore())
    for session in (None, "", "  ", 3):
        if use_async:
            assert asyncio.run(guard.ahistory(session_key=session)) == ()
            snapshot = asyncio.run(guard.aguard_snapshot(session_key=session))
            assert asyncio.run(guard.alast_guard_verdict(session_key=session)) is None
        else:
            assert guard.history(session_key=session) == ()
            snapshot = guard.guard_snapshot(session_key=session)
            assert guard.last_guard_verdict(session_key=session) is None
        assert snapshot == GuardSnapshot(armed=False, remaining_attempts=0)


def _every_second_tick_fails() -> Callable[[], float]:
    ticks = [0]

    def clock() -> float:
        ticks[0] += 1
        if ticks[0] % 2 == 0:
            raise ValueError("tick")
        return 1000.0

    return clock


def test_a_clock_failing_in_the_store_failure_handler_never_reaches_the_agent(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # before_call reads the clock for its plan (tick 1), then the store fails and the
    # handler reads it again for the log rate (tick 2): that read must not raise.
    events: list[Any] = []
    guard = LoopGuard(
        ENABLED,
        store=DownStore(),
        clock=_every_second_tick_fails(),
        listeners=[events.append],
        strict=False,
    )
    caplog.set_level(logging.WARNING, logger="loopwatch.store")
    for _ in range(3):
        assert guard.before_call("read", {}, session_key=S).action == "allow"
        assert guard.after_call("read", {}, session_key=S, result="x") is None
    assert [e.operation for e in events] == ["before_call", "after_call"] * 3
    logged = [r for r in caplog.records if r.name == "loopwatch.store"]
    assert len(logged) == 1  # still rate-limited while the clock is unreadable


def test_a_clock_failing_in_the_async_store_failure_handler_never_reaches_the_agent() -> None:
    # Not strict: a batch reads the clock once per call, so some ticks fail in the plan.
    guard = LoopGuard(ENABLED, store=DownStore(), clock=_every_second_tick_fails(), strict=False)

    async def run() -> None:
        for _ in range(3):
            assert (await guard.abefore_call("read", {}, session_key=S)).action == "allow"
            assert await guard.aafter_call("read", {}, session_key=S, result="x") is None
            decisions = await guard.abefore_batch(
                [("read", {}, "a"), ("read", {}, "b")], session_key=S
            )
            assert [d.action for d in decisions] == ["allow", "allow"]

    asyncio.run(run())


# --- the clock is the host's: a reading that fails follows the fail-open policy ---------


@pytest.mark.parametrize(
    ("clock", "text"),
    [
        (_broken_clock, "ValueError: clock broke"),
        (lambda: math.nan, "ClockError: clock returned nan, not epoch seconds"),
        (lambda: math.inf, "ClockError: clock returned inf, not epoch seconds"),
        (lambda: 1e300, "ClockError: clock returned 1e+300, not epoch seconds"),
        (lambda: "soon", "ValueError: could not convert string to float: 'soon'"),
    ],
    ids=["raises", "nan", "inf", "1e300", "str"],
)
@pytest.mark.parametrize("backend", ["memory", "sqlite"])
def test_a_clock_that_is_no_clock_fails_open_even_when_strict(
    clock: Callable[[], float],
    text: str,
    backend: str,
    tmp_path: Any,
    caplog: pytest.LogCaptureFixture,
) -> None:
    # A host's value, not a loopwatch bug: strict mode does not raise it. (1e300 made the
    # SQLite store raise OverflowError; NaN and inf a bare ValueError / OverflowError.)
    store = MemoryStore() if backend == "memory" else store_from_url(f"sqlite://{tmp_path}/x.db")
    guard = LoopGuard(ENABLED, store=store, clock=clock, strict=True)
    caplog.set_level(logging.WARNING, logger="loopwatch.tools")
    decision = guard.before_call("read", {}, session_key=S)
    assert decision.action == "allow"
    assert guard.after_call("read", {}, session_key=S, result="x") is None
    assert guard.critical_strike(session_key=S) == 1
    guard.compaction_retry(session_key=S)
    logged = [r.getMessage() for r in caplog.records if r.name == "loopwatch.tools"]
    assert f"tool loop detection failed: tool=read error={text}" in logged
    assert f"tool loop outcome tracking failed: tool=read error={text}" in logged
    with pytest.raises(StoreError, match=re.escape(f"history failed: {text}")):
        guard.history(session_key=S)


def test_a_clock_far_in_the_past_is_still_a_clock() -> None:
    guard = LoopGuard(ENABLED, clock=lambda: -1e12, strict=True)
    assert guard.before_call("read", {}, session_key=S).action == "allow"
    assert guard.after_call("read", {}, session_key=S, result="x") is not None
