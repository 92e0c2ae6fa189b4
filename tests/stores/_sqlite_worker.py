"""A worker process for the SQLite multi-process and kill tests (run as a script).

``burst``: wait for the ``go`` file, then make interleaving calls on one shared session
and write, per call, its decision and the run's records its ``before_call`` saw.

``hold``: append a pending record inside the store's transaction, say so on stdout, and
wait there until killed (the kill-a-writer test).

``steady``: make identical calls one by one, one JSON line per finished call, so a test
can kill the process at any point.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from loopwatch import LoopGuard
from loopwatch.core.records import ToolCallRecord
from loopwatch.stores.sqlite import SqliteStore

CHOICES: list[tuple[str, Any, Any]] = [
    ("read", {"path": "a.txt"}, "contents of a"),
    ("read", {"path": "b.txt"}, "contents of b"),
    ("exec", {"command": "make test"}, {"details": {"status": "completed", "exitCode": 1}}),
    ("process", {"action": "poll", "sessionId": "s1"}, {"details": {"status": "running"}}),
]


class RecordingStore(SqliteStore):
    """Keeps what each ``begin_call`` returned: the history that call's detection saw."""

    seen: list[list[tuple[str | None, bool]]]

    def begin_call(
        self,
        session_key: str,
        run_id: str | None,
        pending: ToolCallRecord | None,
        history_size: int,
        now: float,
    ) -> Sequence[ToolCallRecord]:
        scoped = super().begin_call(session_key, run_id, pending, history_size, now)
        self.seen.append([(r.tool_call_id, r.result_hash is not None) for r in scoped])
        return scoped


def decision_fields(decision: Any) -> list[Any]:
    verdict = decision.verdict
    return [decision.action, verdict.level, verdict.detector, verdict.count]


def burst(args: argparse.Namespace) -> None:
    store = RecordingStore(args.db, busy_timeout_s=30)
    store.seen = []
    guard = LoopGuard(json.loads(args.config), store=store)
    rng = random.Random(args.worker)
    Path(args.out + ".ready").touch()
    go = Path(args.go)
    while not go.exists():
        time.sleep(0.002)
    calls = []
    for index in range(args.calls):
        tool, params, result = rng.choice(CHOICES)
        call_id = f"w{args.worker}-{index}"
        common = {"session_key": args.session, "run_id": "run", "tool_call_id": call_id}
        decision = guard.before_call(tool, params, **common)
        if rng.random() < 0.3:
            time.sleep(rng.random() / 1000)
        guard.after_call(tool, params, result=decision.tool_result or result, **common)
        calls.append(
            {
                "call_id": call_id,
                "tool": tool,
                "params": params,
                "result": result,
                "decision": decision_fields(decision),
                "seen": store.seen[-1],
            }
        )
    Path(args.out).write_text(json.dumps(calls), encoding="utf-8")


def hold(args: argparse.Namespace) -> None:
    store = SqliteStore(args.db)
    with store.session_lock(args.session):
        store.begin_call(
            args.session, None, ToolCallRecord("read", "read:killed", "killed"), 30, time.time()
        )
        print("holding", flush=True)
        time.sleep(120)


def steady(args: argparse.Namespace) -> None:
    guard = LoopGuard(json.loads(args.config), store=SqliteStore(args.db))
    for index in range(args.calls):
        call_id = f"{args.name}-{index}"
        common = {"session_key": args.session, "tool_call_id": call_id}
        decision = guard.before_call("read", {"path": "same"}, **common)
        guard.after_call("read", {"path": "same"}, result=decision.tool_result or "same", **common)
        print(json.dumps({"call_id": call_id, "decision": decision_fields(decision)}), flush=True)


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("mode", choices=["burst", "hold", "steady"])
    parser.add_argument("--db", required=True)
    parser.add_argument("--session", required=True)
    parser.add_argument("--config", default='{"enabled": true}')
    parser.add_argument("--calls", type=int, default=0)
    parser.add_argument("--worker", type=int, default=0)
    parser.add_argument("--out", default="")
    parser.add_argument("--go", default="")
    parser.add_argument("--name", default="w")
    args = parser.parse_args(argv)
    {"burst": burst, "hold": hold, "steady": steady}[args.mode](args)


if __name__ == "__main__":
    main(sys.argv[1:])
