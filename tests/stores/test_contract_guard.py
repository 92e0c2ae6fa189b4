"""``LoopGuard`` end to end: the same calls give the same decisions on every store.

Each scenario is played through a ``MemoryStore`` and through each shared store (a
``RedisStore`` on a real server, a ``SqliteStore`` in a temporary file), with the same fake
clock; decisions, returned records, exceptions, events,
log lines and the final state must be identical. Scenarios are synthetic loops of every
detector plus real recorded agent runs from ``shared/corpus/traj``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from _scenarios import LOW, SCENARIOS, Host, S, Transcript, play

from loopwatch import UNDEFINED, LoopGuard, MemoryStore, Store
from loopwatch.detectors.compaction import PostCompactionLoopPersistedError
from loopwatch.stores.sqlite import SqliteStore
from loopwatch.testing import FakeClock

CORPUS = Path(__file__).resolve().parents[3] / "shared" / "corpus" / "traj"


@pytest.fixture(params=["sqlite", pytest.param("redis", marks=pytest.mark.redis)])
def shared_store_factory(request: pytest.FixtureRequest, tmp_path: Path) -> Callable[..., Store]:
    """Build the parametrised shared store (each call a fresh one)."""
    if request.param == "redis":
        factory: Callable[..., Store] = request.getfixturevalue("redis_store_factory")
        return factory
    counter = iter(range(1_000_000))

    def make(**options: Any) -> Store:
        options.pop("use_asyncio", None)
        return SqliteStore(tmp_path / f"guard-{next(counter)}.db", **options)

    return make


@pytest.mark.parametrize("enforce", [True, False], ids=["enforced", "shadow"])
@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_scenario_is_identical_on_memory_and_shared_stores(
    shared_store_factory: Callable[..., Store], name: str, enforce: bool
) -> None:
    scenario, config = SCENARIOS[name]
    expected = play(MemoryStore(), scenario, config, enforce=enforce)
    actual = play(shared_store_factory(), scenario, config, enforce=enforce)
    assert actual == expected
    assert any(item[0] == "before" for item in expected)


def test_scenarios_exercise_every_detector() -> None:
    """Guards the scenarios themselves: identical transcripts must not be trivially empty."""
    seen = set()
    for scenario, config in SCENARIOS.values():
        for item in play(MemoryStore(), scenario, config):
            if item[0] == "before" and item[1].verdict.detector:
                seen.add((item[1].action, item[1].verdict.detector))
            if item[0] == "abort":
                seen.add(("abort", "compaction_loop_persisted"))
    assert {
        ("block", "generic_repeat"),
        ("warn", "generic_repeat"),
        ("block", "ping_pong"),
        ("block", "known_poll_no_progress"),
        ("block", "unknown_tool_repeat"),
        ("block", "global_circuit_breaker"),
        ("abort", "compaction_loop_persisted"),
    } <= seen


# --- recorded agent runs ----------------------------------------------------------------


def _corpus_files() -> list[Path]:
    return sorted(CORPUS.glob("*.jsonl"))


def replay_corpus(host: Host, files: list[Path]) -> None:
    for path in files:
        session = f"corpus:{path.stem}"
        for index, line in enumerate(path.read_text(encoding="utf-8").splitlines()):
            step = json.loads(line)
            error = step.get("error")
            host.call(
                step["tool"],
                step.get("args"),
                session=session,
                run="run-1",
                call_id=step.get("call_id") or f"call-{index}",
                result=step.get("result"),
                error=UNDEFINED if error is None else error,
            )
        host.state(session=session, runs=("run-1",))


@pytest.mark.corpus
def test_recorded_runs_give_identical_decisions(
    shared_store_factory: Callable[..., Store],
) -> None:
    assert CORPUS.is_dir(), f"the shared corpus is missing: expected {CORPUS}"
    files = _corpus_files()
    assert len(files) > 100

    def scenario(host: Host) -> None:
        replay_corpus(host, files)

    config = {**LOW, "historySize": 20}
    expected = play(MemoryStore(), scenario, config)
    actual = play(shared_store_factory(), scenario, config)
    assert len(actual) == len(expected)
    for index, (got, want) in enumerate(zip(actual, expected, strict=True)):
        assert got == want, f"item {index} differs"
    actions = {item[1].action for item in expected if item[0] == "before"}
    assert actions == {"allow", "warn", "block"}


@pytest.mark.corpus
def test_adaptive_profile_gives_identical_decisions(
    shared_store_factory: Callable[..., Store],
) -> None:
    """The adaptive facts travel through the store: same adaptive verdicts on both."""
    assert CORPUS.is_dir(), f"the shared corpus is missing: expected {CORPUS}"
    files = _corpus_files()

    def scenario(host: Host) -> None:
        replay_corpus(host, files)

    config = {"enabled": True}
    expected = play(MemoryStore(), scenario, config, profile="adaptive")
    actual = play(shared_store_factory(), scenario, config, profile="adaptive")
    assert actual == expected
    detectors = {
        item[1].verdict.detector
        for item in expected
        if item[0] == "before" and item[1].action == "block"
    }
    assert {"repeated_failure", "identical_streak"} <= detectors


# --- asyncio ------------------------------------------------------------------------------


@pytest.mark.redis
async def test_async_twins_with_an_asyncio_client_match_memory(
    redis_store_factory: Callable[..., Store],
) -> None:
    store = redis_store_factory(use_asyncio=True)
    assert store.native_async

    async def run(guard: LoopGuard, transcript: Transcript) -> None:
        for i in range(8):
            decision = await guard.abefore_call("read", {"p": 1}, session_key=S, run_id="r")
            transcript.items.append(("before", decision))
            try:
                record = await guard.aafter_call(
                    "read", {"p": 1}, session_key=S, run_id="r", result=decision.tool_result or 1
                )
                transcript.items.append(("after", record))
            except PostCompactionLoopPersistedError as exc:
                transcript.items.append(("abort", exc.message))
            if i == 4:
                await guard.acompaction_retry(session_key=S, run_id="r")
        transcript.items.append(("history", await guard.ahistory(session_key=S)))
        transcript.items.append(
            ("snapshot", await guard.aguard_snapshot(session_key=S, run_id="r"))
        )
        transcript.items.append(
            ("verdict", await guard.alast_guard_verdict(session_key=S, run_id="r"))
        )

    results = []
    for candidate in (MemoryStore(), store):
        transcript, clock = Transcript(), FakeClock()
        guard = LoopGuard(
            {**LOW, "criticalThreshold": 20, "globalCircuitBreakerThreshold": 30},
            store=candidate,
            clock=clock,
            listeners=[transcript.listener],
        )
        await run(guard, transcript)
        results.append(transcript.items)
    assert results[0] == results[1]
    assert any(item[0] == "abort" for item in results[0])
    await store.aclose()
