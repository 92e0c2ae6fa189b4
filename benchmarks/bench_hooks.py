"""What one ``loopwatch hook`` call costs as a whole process, and 8 hooks on one session.

Run from the repository root::

    PYTHONPATH=src python benchmarks/bench_hooks.py            # about a minute
    PYTHONPATH=src python benchmarks/bench_hooks.py --rounds 5 # quicker

1. **Process ratio** (issue 14 targets: <= 2.5x in-process, <= 1.0x through serve): the
   time of one hook process -- the command ``loopwatch install`` writes (``python -S
   .../loopwatch/_hook_entry.py hook claude-code``, from ``hook_argv``) with a
   ``PreToolUse`` on stdin -- on the SQLite store, and the same command while a
   ``loopwatch serve`` runs (the hook's warm path answers through it), against
   ``python -c pass`` on the same machine, as wall time and as the
   process's CPU time (user + system: what a busy machine disturbs least). The cases take
   turns, round after round, and a ratio is the median of the per-round ratios (the
   machine is shared and noisy: side by side is the only fair comparison). The old
   command (``python -m loopwatch.cli hook``) is measured beside it, and so are
   ``python -S -c pass`` and, with ``--venv``, a fresh venv's ``python -c pass`` and the
   installed command run by that venv's interpreter: a floor without this machine's own
   ``.pth`` files (see the README: a sandbox ``.pth`` here imports ``certifi`` at every
   start). ``hook PostToolUse`` is the same command on the round's ``PostToolUse`` (its
   ``PreToolUse`` may come before or after it in the rotating order). ``import loopwatch``
   and ``import loopwatch.cli`` show where the time goes. ``--baseline OTHER/src`` adds
   another tree's installed command (``before: hook ...``), for a before/after in one run.
   Bytecode is cached, as after a ``pip install``.
2. **8 processes at once on one session**: eight hook processes per step, all started
   before any is waited for, each a pre/post pair of a distinct call; afterwards the
   store holds every record, exactly once, each with its outcome (the serial replay of
   the same calls holds the same set).

Not collected by pytest (``testpaths = ["tests"]``).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def _env(state: Path) -> dict[str, str]:
    """The hook's environment: its own state folder, and bytecode cached as after a pip
    install (``PYTHONDONTWRITEBYTECODE`` would recompile every module in every process)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT / "src") + os.pathsep + env.get("PYTHONPATH", "")
    env["XDG_STATE_HOME"] = str(state)
    env["PYTHONPYCACHEPREFIX"] = str(state / "pycache")
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env.pop("LOOPWATCH_STORE", None)
    return env


def _pre(session: str, call: str, command: str = "ls") -> bytes:
    payload = {
        "session_id": session,
        "transcript_path": "/tmp/t.jsonl",
        "cwd": "/tmp",
        "hook_event_name": "PreToolUse",
        "tool_name": "Bash",
        "tool_input": {"command": command},
        "tool_use_id": call,
    }
    return json.dumps(payload).encode()


def _post(session: str, call: str, command: str = "ls") -> bytes:
    payload = json.loads(_pre(session, call, command))
    payload["hook_event_name"] = "PostToolUse"
    payload["tool_response"] = {"stdout": f"output of {command}", "stderr": ""}
    return json.dumps(payload).encode()


def start_server(state: Path, socket_path: str) -> subprocess.Popen[str]:
    """A real ``loopwatch serve`` with the hooks' defaults (so their options match)."""
    server = subprocess.Popen(
        [sys.executable, "-m", "loopwatch.cli", "serve", "--socket", socket_path],
        env=_env(state),
        stderr=subprocess.PIPE,
        text=True,
    )
    assert server.stderr is not None
    ready = server.stderr.readline()
    assert ready.startswith("loopwatch serve: listening"), ready
    return server


def _time(command: list[str], stdin: bytes, env: dict[str, str]) -> tuple[float, float]:
    """Wall time and CPU time (user + system) of one whole process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(command, input=stdin, env=env, capture_output=True, check=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def installed_hook(python: str | None = None) -> list[str]:
    """The command ``loopwatch install claude-code`` writes (run by ``python`` if given)."""
    sys.path.insert(0, str(ROOT / "src"))
    from loopwatch.cli._install import hook_argv

    argv = hook_argv("claude-code")
    return [python, *argv[1:]] if python else argv


def make_venv(folder: Path) -> str:
    """A fresh venv without pip (its ``site`` sees only its own, empty site-packages)."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(folder)], check=True)
    return str(folder / "bin" / "python")


def process_ratio(
    rounds: int, state: Path, venv: bool, baseline: Path | None = None
) -> dict[str, Any]:
    env = _env(state)
    env["LOOPWATCH_SOCKET"] = str(state / "no-server.sock")  # in-process: no server found
    served = state / "served"
    served_socket = str(served / "s.sock")
    served.mkdir(parents=True, exist_ok=True)
    served_env = _env(served)
    served_env["LOOPWATCH_SOCKET"] = served_socket
    module = [sys.executable, "-m", "loopwatch.cli", "hook", "claude-code"]
    hook = installed_hook()
    cases = {
        "python -c pass": [sys.executable, "-c", "pass"],
        "python -S -c pass": [sys.executable, "-S", "-c", "pass"],
        "import loopwatch": [sys.executable, "-c", "import loopwatch"],
        "import loopwatch.cli": [sys.executable, "-c", "import loopwatch.cli"],
        "hook PreToolUse": hook,
        "hook PostToolUse": hook,
        "hook via serve": hook,
        "-m hook PreToolUse": module,
        "-m hook via serve": module,
    }
    if baseline is not None:  # another tree's installed command, side by side
        before = [sys.executable, "-S", str(baseline / "loopwatch" / "_hook_entry.py")]
        cases["before: hook PreToolUse"] = [*before, "hook", "claude-code"]
        cases["before: hook PostToolUse"] = [*before, "hook", "claude-code"]
    if venv:
        python = make_venv(state / "venv")
        cases["venv python -c pass"] = [python, "-c", "pass"]
        cases["venv hook PreToolUse"] = installed_hook(python)
        cases["venv hook via serve"] = installed_hook(python)
    envs = {name: served_env if name.endswith("via serve") else env for name in cases}
    server = start_server(served, served_socket)
    try:
        return _rounds(rounds, cases, envs)
    finally:
        server.terminate()
        server.wait()


def _rounds(
    rounds: int, cases: dict[str, list[str]], envs: dict[str, dict[str, str]]
) -> dict[str, Any]:
    samples: dict[str, dict[str, list[float]]] = {name: {"wall": [], "cpu": []} for name in cases}
    floors = [name for name in ("python -c pass", "venv python -c pass") if name in cases]
    ratios: dict[str, dict[str, dict[str, list[float]]]] = {
        floor: {name: {"wall": [], "cpu": []} for name in cases if name != floor}
        for floor in floors
    }
    for warm in range(2):  # writes the bytecode cache and the store file
        for name, command in cases.items():
            stdin = _pre("warm", f"w{warm}") if "hook" in name else b""
            _time(command, stdin, envs[name])
    for index in range(rounds):
        order = list(cases)
        order = order[index % len(order) :] + order[: index % len(order)]
        got: dict[str, tuple[float, float]] = {}
        for name in order:
            # Distinct calls (a new session each round): no loop, the common path.
            make = _post if name.endswith("PostToolUse") else _pre
            stdin = make(f"bench-{index}", f"c{index}", f"ls {index}") if "hook" in name else b""
            got[name] = _time(cases[name], stdin, envs[name])
            samples[name]["wall"].append(got[name][0])
            samples[name]["cpu"].append(got[name][1])
        for floor, per_floor in ratios.items():
            base = got[floor]
            for name, per in per_floor.items():
                per["wall"].append(got[name][0] / base[0])
                per["cpu"].append(got[name][1] / max(base[1], 1e-6))
    return {
        "median_s": {
            name: {kind: statistics.median(v) for kind, v in per.items()}
            for name, per in samples.items()
        },
        "ratio": {
            floor: {
                name: {kind: statistics.median(v) for kind, v in per.items()}
                for name, per in per_floor.items()
            }
            for floor, per_floor in ratios.items()
        },
    }


def eight_processes(steps: int, state: Path) -> dict[str, Any]:
    env = _env(state)
    hook = installed_hook()
    session = "eight"
    calls = []
    for step in range(steps):
        batch = [f"s{step}-p{worker}" for worker in range(8)]
        calls += batch
        for make in (_pre, _post):
            procs = [
                subprocess.Popen(
                    hook,
                    stdin=subprocess.PIPE,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                    env=env,
                )
                for _ in batch
            ]
            for proc, call in zip(procs, batch, strict=True):
                assert proc.stdin is not None
                proc.stdin.write(make(session, call, f"cat {call}"))
                proc.stdin.close()
            for proc in procs:
                proc.wait(timeout=60)
    sys.path.insert(0, str(ROOT / "src"))
    from loopwatch.stores.sqlite import SqliteStore

    store = SqliteStore(state / "loopwatch" / "sessions.db", idle_ttl_s=None)
    history = store.history(f"claude-code:{session}", time.time())
    store.close()
    ids = [record.tool_call_id for record in history]
    return {
        "calls": len(calls),
        "records": len(ids),
        "lost": sorted(set(calls) - set(ids)),
        "duplicated": len(ids) - len(set(ids)),
        "without_outcome": sum(1 for record in history if record.result_hash is None),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--steps", type=int, default=3, help="8-process steps (history 30)")
    parser.add_argument(
        "--venv", action="store_true", help="also a fresh venv's floor and interpreter"
    )
    parser.add_argument(
        "--baseline",
        type=Path,
        metavar="SRC",
        help="also time the installed command of another tree's src folder ('before: ...')",
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        figures = process_ratio(args.rounds, Path(folder) / "ratio", args.venv, args.baseline)
        print(
            f"one hook call as a whole process, {args.rounds} rounds "
            "(medians; CPU = user + system time of the process, robust on a busy machine);"
        )
        print("'hook' is the command loopwatch install writes, '-m hook' python -m loopwatch.cli:")
        floors = list(figures["ratio"])
        for name, per in figures["median_s"].items():
            wall, cpu = per["wall"] * 1000, per["cpu"] * 1000
            line = f"  {name:<26} wall {wall:7.1f} ms   cpu {cpu:7.1f} ms"
            for floor in floors:
                ratio = figures["ratio"][floor].get(name, {"wall": 1.0, "cpu": 1.0})
                line += f"   {ratio['wall']:5.2f}x / {ratio['cpu']:5.2f}x"
            print(line)
        print("  ratios: wall / cpu of " + ", then of ".join(floors))
        print("  targets: hook PreToolUse <= 2.50x, hook via serve <= 1.00x")
        eight = eight_processes(args.steps, Path(folder) / "eight")
        print(
            f"8 hook processes at once on one session: {eight['calls']} calls, "
            f"{eight['records']} records, lost {len(eight['lost'])}, duplicated "
            f"{eight['duplicated']}, without outcome {eight['without_outcome']}"
        )


if __name__ == "__main__":
    main()
