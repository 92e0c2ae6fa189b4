"""A hook call through a running ``loopwatch serve`` vs ``python -c pass`` (issue 14).

Run: ``python benchmarks/bench_hooks_serve.py [--rounds N] [--calls N]``. Not collected by
pytest.

The target (issue 14): one hook call through ``loopwatch serve`` costs at most 1.0x the time
of ``python -c pass`` on the same machine. Measured side by side, round-robin in a rotating
order, as the median of per-round ratios (wall clock: a hook is a whole process):

- ``python -c pass``: the floor, the interpreter alone (``python -S -c pass`` beside it:
  the interpreter without ``site`` and this machine's ``.pth`` files);
- ``installed via serve``: the command ``loopwatch install`` writes (``python -S
  .../loopwatch/_hook_entry.py hook claude-code``) while the server runs: its own client
  on ``_socket`` and ``_json``, nothing of loopwatch imported;
- ``package client``: ``from loopwatch.serve import try_hook`` (the package import is paid);
- ``-m hook via serve``: ``python -m loopwatch.cli hook claude-code`` while the server
  runs (``loopwatch.cli`` -> ``_hook`` -> ``loopwatch.serve``);
- ``installed in-process`` / ``-m in-process``: the same commands with no server to find
  (SQLite store), the path the server saves;
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
    # Bytecode cached, as after a pip install (PYTHONDONTWRITEBYTECODE would recompile
    # every module in every process).
    env["PYTHONPYCACHEPREFIX"] = str(root / "pycache")
    env.pop("PYTHONDONTWRITEBYTECODE", None)
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
        sys.path.insert(0, str(SRC))
        from loopwatch.cli._install import hook_argv

        installed = [*hook_argv("claude-code"), "--store", store]
        module = [sys.executable, "-m", "loopwatch.cli", "hook", "claude-code", "--store", store]
        cases: dict[str, list[str]] = {
            "python -c pass": [sys.executable, "-c", "pass"],
            "python -S -c pass": [sys.executable, "-S", "-c", "pass"],
            "installed via serve": installed,
            "package client": [sys.executable, "-c", PACKAGE.format(sock=sock)],
            "-m hook via serve": module,
            "installed in-process": installed,
            "-m in-process": module,
        }
        envs = {name: cold_env if name.endswith("in-process") else env for name in cases}
        for name, command in cases.items():  # writes the bytecode cache and the store
            timed(command, payload(0), envs[name])
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
    print(f"{'case':<21} {'median ms':>10} {'ratio':>7}")
    for name in names:
        ratios = [value / base for value, base in zip(samples[name], floor, strict=True)]
        median_ms = statistics.median(samples[name]) * 1000
        print(f"{name:<21} {median_ms:>10.1f} {statistics.median(ratios):>6.2f}x")
    floor_s = statistics.median(floor)
    print(
        f"{'round trip':<21} {round_trip * 1000:>10.3f} {round_trip / floor_s:>6.3f}x"
        f"  (in-process client, {args.calls} calls)"
    )


if __name__ == "__main__":
    main()
