"""Whole-corpus replay throughput of ``loopwatch scan`` (calls replayed per second).

Not collected by pytest (the file name has no ``test_`` prefix and ``testpaths`` is
``tests``). Run it from the repository root::

    python benchmarks/bench_scan.py [--corpus ../shared/corpus/traj] [--repeat 5] [--quick]

Three figures are printed, best of ``--repeat`` runs each:

- **whole process**: ``python -m loopwatch.cli scan CORPUS --json`` in a subprocess, wall
  clock from spawn to exit: interpreter start, imports, reading, parsing, replaying and
  writing the report; what a user or CI job waits for;
- **in process, read + replay**: ``read_transcript`` + ``replay_run`` for every file;
- **in process, replay only**: ``replay_run`` over runs parsed beforehand (the cost a
  ``--sweep`` pays per combination).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from loopwatch.replay import replay_run
from loopwatch.transcripts import find_transcripts, read_transcript

REPO = Path(__file__).resolve().parents[1]
DEFAULT_CORPUS = REPO.parent / "shared" / "corpus" / "traj"


def _best(repeat: int, work: Callable[[], object]) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        work()
        times.append(time.perf_counter() - start)
    return min(times)


def main(argv: list[str] | None = None) -> int:
    """Measure and print the throughput figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="best of 2 (benchmarks/run.py)")
    args = parser.parse_args(argv)
    if args.quick:
        args.repeat = 2

    files, problems = find_transcripts([args.corpus])
    if problems:
        print(f"cannot read the corpus: {problems[0]}", file=sys.stderr)
        return 2
    command = [sys.executable, "-m", "loopwatch.cli", "scan", str(args.corpus), "--json"]
    first = subprocess.run(command, capture_output=True, text=True, check=False)
    calls = json.loads(first.stdout)["totals"]["calls"]

    def whole_process() -> None:
        subprocess.run(command, capture_output=True, check=False)

    def read_and_replay() -> None:
        for path in files:
            for run in read_transcript(path).runs:
                replay_run(run)

    runs = [run for path in files for run in read_transcript(path).runs]

    def replay_only() -> None:
        for run in runs:
            replay_run(run)

    print(f"corpus: {args.corpus} ({len(files)} files, {len(runs)} runs, {calls} calls)")
    for name, work in (
        ("whole process (python -m loopwatch.cli scan --json)", whole_process),
        ("in process, read + replay", read_and_replay),
        ("in process, replay only", replay_only),
    ):
        seconds = _best(args.repeat, work)
        print(f"{name}: {seconds:.3f} s, {calls / seconds:,.0f} calls/s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
