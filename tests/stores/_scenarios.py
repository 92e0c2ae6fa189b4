"""Scenarios played through ``LoopGuard`` on any store, for the end-to-end comparisons.

A scenario plays a host's part (a blocked call is not run; its blocked result is what
``after_call`` gets) and the :class:`Transcript` records everything a host or an operator
can observe: decisions, returned records, aborts, events, log lines and accessor reads.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterator
from typing import Any

from loopwatch import UNDEFINED, LoopEvent, LoopGuard, Store
from loopwatch.detectors.compaction import PostCompactionLoopPersistedError
from loopwatch.testing import FakeClock

S = "agent:main:e2e"
LOW = {
    "enabled": True,
    "warningThreshold": 3,
    "criticalThreshold": 6,
    "globalCircuitBreakerThreshold": 9,
    "unknownToolThreshold": 4,
}


class Transcript:
    """Everything a host and an operator can observe, in order."""

    def __init__(self) -> None:
        self.items: list[Any] = []

    def listener(self, event: LoopEvent) -> None:
        self.items.append(("event", event.to_dict()))

    @contextlib.contextmanager
    def logs(self) -> Iterator[None]:
        transcript = self

        class Handler(logging.Handler):
            def emit(self, record: logging.LogRecord) -> None:
                transcript.items.append(("log", record.name, record.levelno, record.getMessage()))

        handler = Handler(level=logging.DEBUG)
        logger = logging.getLogger("loopwatch")
        old_level = logger.level
        logger.addHandler(handler)
        logger.setLevel(logging.DEBUG)
        try:
            yield
        finally:
            logger.removeHandler(handler)
            logger.setLevel(old_level)


class Host:
    """Plays the host's part: a blocked call is not run, its blocked result is recorded."""

    def __init__(self, guard: LoopGuard, transcript: Transcript, clock: FakeClock) -> None:
        self.guard, self.t, self.clock = guard, transcript, clock

    def call(
        self,
        tool: str,
        params: Any,
        *,
        session: str = S,
        run: Any = None,
        call_id: Any = None,
        result: Any = UNDEFINED,
        error: Any = UNDEFINED,
    ) -> None:
        self.clock.advance(0.25)
        decision = self.guard.before_call(
            tool, params, session_key=session, run_id=run, tool_call_id=call_id
        )
        self.t.items.append(("before", decision))
        if decision.tool_result is not None:
            result, error = decision.tool_result, UNDEFINED
        try:
            record = self.guard.after_call(
                tool,
                params,
                session_key=session,
                run_id=run,
                tool_call_id=call_id,
                result=result,
                error=error,
            )
            self.t.items.append(("after", record))
        except PostCompactionLoopPersistedError as exc:
            self.t.items.append(("abort", exc.message, exc.count, exc.tool_name, exc.record))

    def compact(self, *, session: str = S, run: Any = None) -> None:
        self.guard.compaction_retry(session_key=session, run_id=run)
        self.t.items.append(
            ("snapshot", self.guard.guard_snapshot(session_key=session, run_id=run))
        )

    def state(self, session: str = S, runs: tuple[Any, ...] = (None,)) -> None:
        self.t.items.append(("history", self.guard.history(session_key=session)))
        for run in runs:
            self.t.items.append(
                (
                    "guard",
                    self.guard.guard_snapshot(session_key=session, run_id=run),
                    self.guard.last_guard_verdict(session_key=session, run_id=run),
                )
            )


Scenario = Callable[[Host], None]


def generic_loop(host: Host) -> None:
    for i in range(25):
        host.call("read", {"path": "a.txt"}, call_id=f"c{i}", result="same text")
    host.call("read", {"path": "b.txt"}, result="other")
    host.state()


def warning_buckets_every_ten(host: Host) -> None:
    for i in range(34):
        host.call("exec", {"cmd": "make"}, run=" r1 ", call_id=f"c{i}", result={"n": i})
    host.state(runs=("r1",))


def ping_pong(host: Host) -> None:
    for i in range(16):
        host.call("read", {"path": "a" if i % 2 else "b"}, result="a" if i % 2 else "b")
    host.state()


def known_poll(host: Host) -> None:
    params = {"action": "poll", "sessionId": "s-1"}
    for _ in range(12):
        host.call("process", params, result={"details": {"status": "running"}, "content": []})
    host.state()


def unknown_tool(host: Host) -> None:
    for _ in range(6):
        host.call("ghost_tool", {}, error="Unknown tool: ghost_tool")
    host.call("read", {"path": "x"}, error=RuntimeError("boom"))
    host.state()


def runs_and_call_ids(host: Host) -> None:
    for i in range(10):
        run = ["r1", " r1 ", "r2", None, "  "][i % 5]
        host.call("read", {"p": i % 2}, run=run, call_id=i if i % 3 else "", result=i % 2)
    host.state(runs=("r1", "r2", None))


def compaction_abort(host: Host) -> None:
    host.call("read", {"p": 1}, run="r", result="x")
    host.compact(run="r")
    for _ in range(4):
        host.call("read", {"p": 1}, run="r", result="x")
    host.compact(run="r")
    host.call("read", {"p": 1}, run="r", result="y")
    host.state(runs=("r", None))


def trimmed_history(host: Host) -> None:
    for i in range(20):
        host.call("read", {"p": i % 3}, result="same")
    host.state()


def idle_expiry(host: Host) -> None:
    for _ in range(5):
        host.call("read", {"p": 1}, result="same")
    host.clock.advance(1801)
    host.state()
    for _ in range(5):
        host.call("read", {"p": 1}, result="same")
    host.state()


def odd_strings(host: Host) -> None:
    for i in range(5):
        host.call(
            ' We"ird\\Tool\x1f\ud800 ',
            {"k": "\x1f\x1e\u2028"},
            session="sess{ion}\U0001f600",
            run="r,\x1f\ud800",
            call_id="id\ud800",
            result=str(i % 2),
        )
    host.state(session="sess{ion}\U0001f600", runs=("r,\x1f\ud800",))


SCENARIOS: dict[str, tuple[Scenario, dict[str, Any]]] = {
    "generic": (generic_loop, {"enabled": True}),
    "buckets": (
        warning_buckets_every_ten,
        {"enabled": True, "warningThreshold": 10, "criticalThreshold": 40},
    ),
    "ping-pong": (ping_pong, LOW),
    "known-poll": (known_poll, LOW),
    "unknown-tool": (unknown_tool, LOW),
    "runs": (runs_and_call_ids, {**LOW, "warningThreshold": 2}),
    "compaction": (compaction_abort, {"enabled": True, "postCompactionGuard": {"windowSize": 3}}),
    "disabled": (generic_loop, {"enabled": False}),
    "unset": (generic_loop, {}),
    "global-breaker": (
        generic_loop,
        {**LOW, "detectors": {"genericRepeat": False}, "globalCircuitBreakerThreshold": 12},
    ),
    "trimmed": (trimmed_history, {**LOW, "historySize": 5}),
    # "expiry" (idle_expiry) is not here: MemoryStore expires on the LoopGuard clock,
    # RedisStore on Redis's own (so skewed workers agree), and a fake clock moves only the
    # first. Both expiries are tested on their own (test_contract.py, test_redis_store.py,
    # test_hostile_redis.py).
    "odd-strings": (odd_strings, {**LOW, "warningThreshold": 2}),
}


def play(
    store: Store, scenario: Scenario, config: dict[str, Any], **guard_options: Any
) -> list[Any]:
    transcript = Transcript()
    clock = FakeClock()
    guard = LoopGuard(
        config, store=store, clock=clock, listeners=[transcript.listener], **guard_options
    )
    with transcript.logs():
        scenario(Host(guard, transcript, clock))
    return transcript.items
