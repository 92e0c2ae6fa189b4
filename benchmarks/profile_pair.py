"""Where a guarded call spends its time: cProfile of before_call + after_call pairs.

    python benchmarks/profile_pair.py [--size 100] [--calls 20000] [--pure] [--top 25]

Plays the healthy steady state of ``run.py``'s figure 1 (small args and result by default,
eight distinct calls cycled in one session, history full) under cProfile and prints the
functions by own time and by cumulative time. ``--pure`` forces fingerprinting onto the
pure-Python path; ``--history N`` sets historySize (with N distinct calls in the cycle, so
the history stays healthy).
"""

from __future__ import annotations

import argparse
import cProfile
import logging
import pstats
import sys

import run  # the benchmark suite beside this file (the script's folder is on sys.path)

from loopwatch import LoopGuard


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=int, default=100, help="bytes of args and of result")
    parser.add_argument("--calls", type=int, default=20_000)
    parser.add_argument("--history", type=int, default=30)
    parser.add_argument("--pure", action="store_true", help="no orjson fast path")
    parser.add_argument("--top", type=int, default=25)
    opts = parser.parse_args()
    logging.getLogger("loopwatch").propagate = False
    run.use_mode("pure" if opts.pure else run.MODES[-1])

    runs = run.load_corpus(run.DEFAULT_CORPUS)
    text = run.corpus_text(runs)
    variants = max(run.VARIANTS, opts.history)
    values = [run.text_values(text, opts.size, v) for v in range(variants)]
    guard = LoopGuard({"enabled": True, "historySize": opts.history})

    def pairs(n: int) -> None:
        for i in range(n):
            args, result = values[i % len(values)]
            call_id = f"call_{i % 997}"
            guard.before_call(run.TOOL, args, session_key="bench", tool_call_id=call_id)
            guard.after_call(
                run.TOOL, args, session_key="bench", tool_call_id=call_id, result=result
            )

    pairs(2 * opts.history)  # fill the history
    profiler = cProfile.Profile()
    profiler.runcall(pairs, opts.calls)
    stats = pstats.Stats(profiler)
    stats.strip_dirs()
    mode = "pure" if opts.pure else run.MODES[-1]
    print(f"# {opts.calls} pairs, {opts.size} B values, history {opts.history}, {mode} path")
    stats.sort_stats("tottime").print_stats(opts.top)
    stats.sort_stats("cumulative").print_stats(opts.top)
    return 0


if __name__ == "__main__":
    sys.exit(main())
