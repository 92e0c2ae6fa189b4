"""Eight worker processes share one session through a real Redis: nothing is lost, and
detection fires exactly where a single-process replay of the same global order fires.

Each worker records, per call, its decision and the history its ``before_call`` saw.
The final history (large ``historySize``: nothing is trimmed) gives the global order of
the calls. Linearisability means call number k saw exactly the k records before it, and
outcomes only ever appear, never vanish; from those views one global order of all
``before_call`` and ``after_call`` events is rebuilt and replayed through a
``MemoryStore`` in this process: every decision must be the same.

Criticals are out of reach here on purpose: a block removes its pending record with a
second round trip, and a concurrent call from another worker may land in between and
see it (a documented limit of the Redis store). Warnings carry exact counts, so they pin
the order down just as well.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from _redis_helpers import delete_prefix, unique_prefix

from loopwatch import LoopGuard, MemoryStore
from loopwatch.stores import RedisStore

pytestmark = pytest.mark.redis

WORKER = Path(__file__).with_name("_mp_worker.py")
PROCESSES = 8
CALLS = 40
SESSION = "agent:main:shared"
CONFIG = {
    "enabled": True,
    "historySize": 10_000,
    "warningThreshold": 4,
    "criticalThreshold": 1_000_000,
    "globalCircuitBreakerThreshold": 1_000_001,
}


@pytest.fixture
def prefix(redis_client: Any) -> Iterator[str]:
    value = unique_prefix()
    yield value
    delete_prefix(redis_client, value)
    redis_client.delete(f"{value}:ready", f"{value}:go")


def run_workers(url: str, prefix: str, out_dir: Path) -> list[list[dict[str, Any]]]:
    procs = []
    for worker in range(PROCESSES):
        command = [
            sys.executable,
            str(WORKER),
            "burst",
            f"--url={url}",
            f"--prefix={prefix}",
            f"--session={SESSION}",
            f"--config={json.dumps(CONFIG)}",
            f"--calls={CALLS}",
            f"--worker={worker}",
            f"--out={out_dir / f'{worker}.json'}",
        ]
        procs.append(subprocess.Popen(command))
    admin = redis.Redis.from_url(url)
    deadline = time.monotonic() + 30
    while int(admin.get(f"{prefix}:ready") or 0) < PROCESSES:
        assert all(p.poll() is None for p in procs), "a worker died before the start"
        assert time.monotonic() < deadline, "workers did not get ready"
        time.sleep(0.01)
    admin.rpush(f"{prefix}:go", *["go"] * PROCESSES)  # all start together
    for proc in procs:
        assert proc.wait(timeout=60) == 0
    admin.close()
    return [json.loads((out_dir / f"{w}.json").read_text()) for w in range(PROCESSES)]


def test_eight_processes_share_one_linearisable_history(
    redis_url: str, prefix: str, tmp_path: Path
) -> None:
    workers = run_workers(redis_url, prefix, tmp_path)
    calls = {call["call_id"]: call for worker in workers for call in worker}
    assert len(calls) == PROCESSES * CALLS

    # Every call and every outcome is in the history, exactly once.
    history = RedisStore.from_url(redis_url, prefix=prefix).history(SESSION, time.time())
    order = [record.tool_call_id for record in history]
    assert sorted(order) == sorted(calls)
    assert all(record.result_hash is not None for record in history)

    # The workers really ran interleaved, and saw each other's calls still in flight.
    worker_of = [call_id.split("-")[0] for call_id in order]
    switches = sum(1 for a, b in itertools.pairwise(worker_of) if a != b)
    assert switches > PROCESSES * 4
    in_flight = sum(
        1
        for call in calls.values()
        for cid, has_outcome in call["seen"]
        if not has_outcome and cid.split("-")[0] != call["call_id"].split("-")[0]
    )
    assert in_flight > 0

    # Each process's calls appear in the order the process made them.
    for worker in workers:
        own = [call["call_id"] for call in worker]
        assert [cid for cid in order if cid in set(own)] == own

    # Call k saw exactly the k calls before it; outcomes seen only ever grow.
    done: set[str] = set()
    events: list[tuple[str, str]] = []
    for position, call_id in enumerate(order):
        seen = calls[call_id]["seen"]
        assert [cid for cid, _ in seen] == order[:position], f"{call_id} saw another history"
        with_outcome = {cid for cid, has_outcome in seen if has_outcome}
        assert done <= with_outcome, f"{call_id} saw an outcome disappear"
        events += [("after", cid) for cid in order[:position] if cid in with_outcome - done]
        done |= with_outcome
        events.append(("before", call_id))
    events += [("after", cid) for cid in order if cid not in done]

    # Replay that global order in one process: the same decision for every call.
    guard = LoopGuard(CONFIG, store=MemoryStore())
    replayed: dict[str, list[Any]] = {}
    for kind, call_id in events:
        call = calls[call_id]
        common = {"session_key": SESSION, "run_id": "run", "tool_call_id": call_id}
        if kind == "before":
            decision = guard.before_call(call["tool"], call["params"], **common)
            verdict = decision.verdict
            replayed[call_id] = [decision.action, verdict.level, verdict.detector, verdict.count]
        else:
            guard.after_call(call["tool"], call["params"], result=call["result"], **common)
    assert {cid: calls[cid]["decision"] for cid in order} == replayed
    fired = [replayed[cid] for cid in order if replayed[cid][0] != "allow"]
    assert {d[2] for d in fired} >= {"generic_repeat", "known_poll_no_progress", "ping_pong"}
    # Same records too, but for timestamps (the workers' clocks are not this one's).
    strip = [dataclasses.replace(r, timestamp=0) for r in guard.history(session_key=SESSION)]
    assert strip == [dataclasses.replace(r, timestamp=0) for r in history]
