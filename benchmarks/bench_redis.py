"""Throughput of LoopGuard on the Redis store vs the memory store, and round trips per call.

Run: ``python benchmarks/bench_redis.py [--calls N] [--url redis://…]``. Without ``--url``
(or ``LOOPWATCH_REDIS_URL``) it starts its own ``redis-server`` on a free loopback port.

A "call" is one ``before_call`` plus one ``after_call``, as a host makes them. Workers are
separate processes (spawned), each with its own ``LoopGuard``; with the Redis store they
share one server, either each on its own session or all on one shared session. Round
trips are counted with a client that counts the commands it sends. Not collected by
pytest.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

CONFIG = {"enabled": True}  # the reference defaults: historySize 30, warnings from 10
#: A realistic mix: a dozen distinct calls, so histories fill up but rarely loop.
CALLS = [("read", {"path": f"src/file_{i}.py"}, f"contents {i}") for i in range(10)] + [
    ("exec", {"command": "pytest -q"}, {"details": {"status": "completed", "exitCode": 0}}),
    ("grep", {"pattern": "TODO"}, "3 matches"),
]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def redis_server(url: str | None) -> Iterator[str]:
    """The given server, or a throwaway one on loopback."""
    if url:
        yield url
        return
    binary = shutil.which("redis-server")
    if binary is None:
        sys.exit("redis-server not found: apt-get install redis-server, or pass --url")
    port = _free_port()
    with tempfile.TemporaryDirectory() as folder:
        proc = subprocess.Popen(
            [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--dir", folder],
            stdout=subprocess.DEVNULL,
        )
        try:
            deadline = time.monotonic() + 10
            while True:
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                    break
                except OSError:
                    if time.monotonic() > deadline:
                        sys.exit("redis-server did not start")
                    time.sleep(0.02)
            yield f"redis://127.0.0.1:{port}/0"
        finally:
            proc.terminate()
            proc.wait()


class _PingGuard:
    """The floor: two bare PINGs per call (what two round trips cost with no work)."""

    def __init__(self, url: str) -> None:
        import redis

        self.client = redis.Redis.from_url(url)

    def before_call(self, *args: Any, **kwargs: Any) -> None:
        self.client.ping()

    def after_call(self, *args: Any, **kwargs: Any) -> None:
        self.client.ping()


def make_guard(kind: str, url: str, prefix: str) -> Any:
    if kind == "2 PINGs":
        return _PingGuard(url)
    from loopwatch import LoopGuard, MemoryStore
    from loopwatch.stores import RedisStore

    store = MemoryStore() if kind == "memory" else RedisStore.from_url(url, prefix=prefix)
    return LoopGuard(CONFIG, store=store)


def drive(guard: Any, session: str, calls: int) -> None:
    for index in range(calls):
        tool, params, result = CALLS[index % len(CALLS)]
        call_id = f"{session}-{index}"
        guard.before_call(tool, params, session_key=session, tool_call_id=call_id)
        guard.after_call(tool, params, session_key=session, tool_call_id=call_id, result=result)


def worker(
    kind: str, url: str, prefix: str, session: str, calls: int, barrier: Any, queue: Any
) -> None:
    guard = make_guard(kind, url, prefix)
    drive(guard, f"warmup-{session}-{os.getpid()}", 50)  # connections, scripts, caches
    barrier.wait()
    started = time.perf_counter()
    drive(guard, session, calls)
    queue.put((started, time.perf_counter()))


def measure(kind: str, url: str, processes: int, calls: int, shared: bool) -> float:
    """Aggregate calls per second of ``processes`` workers running at the same time."""
    context = multiprocessing.get_context("spawn")
    barrier, queue = context.Barrier(processes), context.Queue()
    prefix = f"bench-{os.getpid()}-{time.time_ns()}"
    procs = [
        context.Process(
            target=worker,
            args=(kind, url, prefix, "shared" if shared else f"s{i}", calls, barrier, queue),
        )
        for i in range(processes)
    ]
    for proc in procs:
        proc.start()
    spans = [queue.get(timeout=600) for _ in procs]
    for proc in procs:
        proc.join()
    wall = max(end for _, end in spans) - min(start for start, _ in spans)
    return processes * calls / wall


def round_trips(url: str) -> dict[str, float]:
    """Commands sent per operation, counted on the client (one command = one round trip)."""
    import redis

    from loopwatch import LoopGuard
    from loopwatch.stores import RedisStore

    class CountingRedis(redis.Redis):
        sent = 0

        def execute_command(self, *args: Any, **options: Any) -> Any:
            CountingRedis.sent += 1
            return super().execute_command(*args, **options)

    client = CountingRedis.from_url(url)
    store = RedisStore(client, prefix=f"bench-rt-{time.time_ns()}")
    low = {"enabled": True, "warningThreshold": 3, "criticalThreshold": 6}
    guard = LoopGuard(low, store=store)
    drive(guard, "warmup", 40)  # every script cached on the server
    for _ in range(8):
        guard.before_call("x", {}, session_key="warmup")

    def count(action: Any) -> int:
        before = CountingRedis.sent
        action()
        return CountingRedis.sent - before

    n = 200
    common = sum(
        count(lambda i=i: guard.before_call("read", {"i": i}, session_key="rt")) for i in range(n)
    )
    after = sum(
        count(lambda i=i: guard.after_call("read", {"i": i}, session_key="rt", result=i))
        for i in range(n)
    )
    warn = [count(lambda: guard.before_call("w", {}, session_key="rt-w")) for _ in range(6)]
    blocks = [count(lambda: guard.before_call("b", {}, session_key="rt-b")) for _ in range(9)]
    for _ in range(8):
        guard.after_call("b", {}, session_key="rt-b", result="same")
    blocks = [count(lambda: guard.before_call("b", {}, session_key="rt-b")) for _ in range(3)]
    client.close()
    return {
        "before_call (allowed)": common / n,
        "after_call": after / n,
        "before_call (warning)": warn[-1],
        "before_call (block)": blocks[-1],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=3000, help="calls per worker process")
    parser.add_argument("--url", default=os.environ.get("LOOPWATCH_REDIS_URL"))
    args = parser.parse_args()
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs, {args.calls} calls/worker")
    with redis_server(args.url) as url:
        import redis

        info = redis.Redis.from_url(url).info("server")
        print(f"redis-server {info['redis_version']} at {url}\n")
        rows = [
            ("memory", 1, False),
            ("memory", 2, False),
            ("redis", 1, False),
            ("redis", 2, False),
            ("redis", 2, True),
            ("2 PINGs", 1, False),
            ("2 PINGs", 2, False),
        ]
        print(f"{'store':<8}{'processes':>10}  {'session':<10}{'calls/s':>12}")
        results = {}
        for kind, processes, shared in rows:
            rate = measure(kind, url, processes, args.calls, shared)
            results[(kind, processes, shared)] = rate
            label = "shared" if shared else "own"
            print(f"{kind:<8}{processes:>10}  {label:<10}{rate:>12,.0f}", flush=True)
        print()
        ratio = results[("memory", 1, False)] / results[("redis", 1, False)]
        floor = results[("redis", 1, False)] / results[("2 PINGs", 1, False)]
        print(f"memory / redis, 1 process: {ratio:.1f}x")
        print(f"redis vs the two-PING floor, 1 process: {floor:.0%}")
        print("\nround trips per operation (counting client):")
        for name, value in round_trips(url).items():
            print(f"  {name:<24}{value:.2f}")


if __name__ == "__main__":
    main()
