"""Python opcodes and calls per guarded call pair: a cost measure that load cannot move.

    python benchmarks/opcount_pair.py [--calls N] [--profile adaptive] [--top K]

Plays the first ``N`` corpus calls (sorted file names, as ``bench_reference_node.py``)
through ``LoopGuard.before_call`` + ``after_call`` once untraced (every lazy import and
memo warm), then again under ``sys.settrace`` with opcode events, and prints the Python
opcodes and the Python function calls per pair, with the ``K`` functions that execute the
most opcodes. C work (orjson, SHA-256, dict operations) is not counted, so this ranks
Python-level overhead only: the timings of ``bench_reference_node.py`` stay the measure;
this one tells, on a shared machine, whether a change removed work.
"""

from __future__ import annotations

import argparse
import collections
import logging
import sys
from pathlib import Path
from types import FrameType
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from bench_reference_node import load_calls  # noqa: E402

import loopwatch  # noqa: E402

DEFAULT_CORPUS = HERE.parent.parent / "shared" / "corpus" / "traj"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--profile", choices=("reference", "adaptive"), default="reference")
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS)
    parser.add_argument("--top", type=int, default=25)
    opts = parser.parse_args()
    logging.getLogger("loopwatch").addHandler(logging.NullHandler())
    logging.getLogger("loopwatch").propagate = False
    undefined = loopwatch.UNDEFINED
    calls = [
        (
            c["tool"],
            c["args"],
            undefined if c["result"] is None else c["result"],
            undefined if c["error"] is None else c["error"],
        )
        for c in load_calls(opts.corpus, opts.calls)
    ]
    if not calls:
        print(f"no calls in {opts.corpus}", file=sys.stderr)
        return 2

    def play() -> None:
        guard = loopwatch.LoopGuard({"enabled": True}, profile=opts.profile)
        for index, (tool, args, result, error) in enumerate(calls):
            call_id = f"c{index}"
            decision = guard.before_call(tool, args, session_key="k", tool_call_id=call_id)
            if decision.tool_result is not None:
                result, error = decision.tool_result, undefined
            guard.after_call(
                tool, args, session_key="k", tool_call_id=call_id, result=result, error=error
            )

    play()  # warm: lazy imports, memos, specialised bytecode
    counts: collections.Counter[str] = collections.Counter()
    totals = {"ops": 0, "calls": 0}

    def tracer(frame: FrameType, event: str, arg: Any) -> Any:
        if event == "call":
            totals["calls"] += 1
            frame.f_trace_opcodes = True
            frame.f_trace_lines = False
            return tracer
        if event == "opcode":
            totals["ops"] += 1
            counts[frame.f_code.co_qualname] += 1
        return tracer

    sys.settrace(tracer)
    try:
        play()
    finally:
        sys.settrace(None)
    pairs = len(calls)
    print(
        f"{opts.profile}: {totals['ops'] / pairs:.0f} opcodes and "
        f"{totals['calls'] / pairs:.1f} Python calls per pair ({pairs} corpus calls)"
    )
    for name, count in counts.most_common(opts.top):
        print(f"{count / pairs:9.1f}  {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
