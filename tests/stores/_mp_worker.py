"""A worker process for the multi-process and fault tests (run as a script, not collected).

``burst``: wait at a barrier in Redis, then make interleaving calls on one shared session
and write, per call, its decision and the history it saw (the run-scoped records the
store returned to ``before_call``) to a JSON file.

``steady``: make calls one by one and print one JSON line per finished call, so a test
can kill the process at a known point and start another one.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from collections.abc import Sequence
from typing import Any

import redis

from loopwatch import LoopGuard
from loopwatch.core.records import ToolCallRecord
from loopwatch.stores import RedisStore

#: The calls workers pick from: few enough that loops form across processes.
CHOICES: list[tuple[str, Any, Any]] = [
    ("read", {"path": "a.txt"}, "contents of a"),
    ("read", {"path": "b.txt"}, "contents of b"),
    ("exec", {"command": "make test"}, {"details": {"status": "completed", "exitCode": 1}}),
    ("process", {"action": "poll", "sessionId": "s1"}, {"details": {"status": "running"}}),
]


class RecordingStore(RedisStore):
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
    store = RecordingStore.from_url(args.url, prefix=args.prefix, socket_timeout=5)
    store.seen = []
    guard = LoopGuard(json.loads(args.config), store=store)
    rng = random.Random(args.worker)
    admin = redis.Redis.from_url(args.url)
    admin.incr(f"{args.prefix}:ready")
    admin.blpop([f"{args.prefix}:go"], timeout=30)
    calls = []
    for index in range(args.calls):
        tool, params, result = rng.choice(CHOICES)
        call_id = f"w{args.worker}-{index}"
        decision = guard.before_call(
            tool, params, session_key=args.session, run_id="run", tool_call_id=call_id
        )
        if rng.random() < 0.3:
            time.sleep(rng.random() / 1000)
        guard.after_call(
            tool,
            params,
            session_key=args.session,
            run_id="run",
            tool_call_id=call_id,
            result=decision.tool_result or result,
        )
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
    with open(args.out, "w", encoding="utf-8") as handle:
        json.dump(calls, handle)


def steady(args: argparse.Namespace) -> None:
    store = RedisStore.from_url(args.url, prefix=args.prefix)
    guard = LoopGuard(json.loads(args.config), store=store)
    for index in range(args.start, args.start + args.calls):
        call_id = f"{args.name}-{index}"
        decision = guard.before_call(
            "read", {"path": "same"}, session_key=args.session, tool_call_id=call_id
        )
        guard.after_call(
            "read",
            {"path": "same"},
            session_key=args.session,
            tool_call_id=call_id,
            result=decision.tool_result or "same",
        )
        print(json.dumps({"call_id": call_id, "decision": decision_fields(decision)}), flush=True)
        time.sleep(args.delay)


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("mode", choices=["burst", "steady"])
    parser.add_argument("--url", required=True)
    parser.add_argument("--prefix", required=True)
    parser.add_argument("--session", required=True)
    parser.add_argument("--config", required=True)
    parser.add_argument("--calls", type=int, required=True)
    parser.add_argument("--worker", type=int, default=0)
    parser.add_argument("--out", default="")
    parser.add_argument("--name", default="w")
    parser.add_argument("--start", type=int, default=0)
    parser.add_argument("--delay", type=float, default=0.0)
    args = parser.parse_args(argv)
    burst(args) if args.mode == "burst" else steady(args)


if __name__ == "__main__":
    main(sys.argv[1:])
