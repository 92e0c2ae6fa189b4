"""A hook call through a running ``loopwatch serve`` vs ``python -c pass`` (issue 14).

Run: ``python benchmarks/bench_hooks_serve.py [--rounds N] [--calls N]``. Not collected by
pytest.

The target (issue 14): one hook call through ``loopwatch serve`` costs at most 1.0x the time
of ``python -c pass`` on the same machine. Measured side by side, round-robin in a rotating
order, as the median of per-round ratios (wall clock: a hook is a whole process):

- ``python -c pass``: the floor, the interpreter alone;
- ``lean client``: a process that loads only ``loopwatch/serve.py`` (by file path, without
  ``loopwatch/__init__``, which imports the detectors) and asks the server (``try_hook``):
  what a hook entry point that tries the server first can reach;
- ``package client``: the same through ``from loopwatch.serve import try_hook`` (the package
  import is paid);
- ``hook via serve``: the real ``python -m loopwatch.cli hook claude-code`` while the server
  runs: the hook's warm path (``loopwatch.cli`` -> ``_hook`` -> ``loopwatch.serve``);
- ``in-process hook``: the same command with no server to find (SQLite store), the path the
  server saves;
- ``round trip``: the client's round trip alone, in this process, per call.

The server is the real ``python -m loopwatch.cli serve`` on a temporary socket and state
directory.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SRC = REPO / "src"
SERVE_FILE = SRC / "loopwatch" / "serve.py"


def payload(index: int) -> str:
    return json.dumps(
        {
            "session_id": "bench",
            "hook_event_name": "PreToolUse",
            "tool_name": "Read",
            "tool_input": {"file_path": f"src/file_{index % 25}.py"},
            "tool_use_id": f"t{index}",
            "cwd": "/tmp",
            "transcript_path": "/tmp/t.jsonl",
        }
    )


LEAN = (
    "import importlib.util as u, sys\n"
    "s = u.spec_from_file_location('lw_serve', {file!r}); m = u.module_from_spec(s)\n"
    "s.loader.exec_module(m)\n"
    "r = m.try_hook('claude-code', sys.stdin.read(), socket_path={sock!r})\n"
    "assert r is not None\n"
    "sys.stdout.write(r[0]); sys.exit(r[1])\n"
)
PACKAGE = (
    "import sys\n"
    "from loopwatch.serve import try_hook\n"
    "r = try_hook('claude-code', sys.stdin.read(), socket_path={sock!r})\n"
    "assert r is not None\n"
    "sys.stdout.write(r[0]); sys.exit(r[1])\n"
)


def timed(argv: list[str], stdin: str, env: dict[str, str]) -> float:
    start = time.perf_counter()
    done = subprocess.run(argv, input=stdin, capture_output=True, text=True, env=env, check=False)
    elapsed = time.perf_counter() - start
    if done.returncode not in (0, 2):
        raise SystemExit(f"{argv[:3]} failed ({done.returncode}): {done.stderr[-500:]}")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=21)
    parser.add_argument("--calls", type=int, default=2000, help="round trips timed in-process")
    args = parser.parse_args()

    root = Path(tempfile.mkdtemp(prefix="lwb", dir="/tmp"))
    sock = str(root / "s.sock")
    env = {**os.environ, "PYTHONPATH": str(SRC), "XDG_STATE_HOME": str(root / "state")}
    env.pop("LOOPWATCH_STORE", None)
    env["LOOPWATCH_SOCKET"] = sock
    cold_env = {**env, "LOOPWATCH_SOCKET": str(root / "none.sock")}
    store = f"sqlite:///{root / 'b.db'}"
    server = subprocess.Popen(
        [sys.executable, "-m", "loopwatch.cli", "serve", "--socket", sock, "--store", store],
        env=env,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert server.stderr is not None
        ready = server.stderr.readline()
        assert ready.startswith("loopwatch serve: listening"), ready
        cases: dict[str, list[str]] = {
            "python -c pass": [sys.executable, "-c", "pass"],
            "lean client": [sys.executable, "-c", LEAN.format(file=str(SERVE_FILE), sock=sock)],
            "package client": [sys.executable, "-c", PACKAGE.format(sock=sock)],
        }
        hook = [sys.executable, "-m", "loopwatch.cli", "hook", "claude-code", "--store", store]
        cases["hook via serve"] = hook
        cases["in-process hook"] = hook
        envs = {name: cold_env if name == "in-process hook" else env for name in cases}
        names = list(cases)
        samples: dict[str, list[float]] = {name: [] for name in names}
        counter = 0
        for round_index in range(args.rounds):
            order = names[round_index % len(names) :] + names[: round_index % len(names)]
            for name in order:
                counter += 1
                samples[name].append(timed(cases[name], payload(counter), envs[name]))

        from loopwatch.serve import request, try_hook

        request("health", socket_path=sock)
        start = time.perf_counter()
        for index in range(args.calls):
            assert try_hook("claude-code", payload(index), socket_path=sock) is not None
        round_trip = (time.perf_counter() - start) / args.calls
    finally:
        server.terminate()
        server.wait()
        shutil.rmtree(root, ignore_errors=True)

    floor = samples["python -c pass"]
    print(f"loopwatch serve vs python -c pass ({args.rounds} rounds, median of per-round ratios)")
    print(f"{'case':<18} {'median ms':>10} {'ratio':>7}")
    for name in names:
        ratios = [value / base for value, base in zip(samples[name], floor, strict=True)]
        median_ms = statistics.median(samples[name]) * 1000
        print(f"{name:<18} {median_ms:>10.1f} {statistics.median(ratios):>6.2f}x")
    floor_s = statistics.median(floor)
    print(
        f"{'round trip':<18} {round_trip * 1000:>10.3f} {round_trip / floor_s:>6.3f}x"
        f"  (in-process client, {args.calls} calls)"
    )


if __name__ == "__main__":
    main()
