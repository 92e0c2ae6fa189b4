"""How a guarded call's time splits between hashing and the session engine.

    python benchmarks/split_pair.py [--size 100] [--rounds 15]

Times, interleaved round by round (CPU time, medians), for the values of ``run.py``'s figure 1:

- ``floor``: orjson + SHA-256 of the args and of the result;
- ``hashing``: what the pair hashes, ``hash_tool_call`` + ``hash_tool_outcome`` once each;
- ``pair``: ``before_call`` + ``after_call`` of a healthy session;
- ``engine``: the same pair with both hash functions replaced by dictionary lookups of
  precomputed hashes, i.e. everything but the hashing (the session engine: store, records,
  detectors, decisions).

``pair`` is about ``hashing + engine``; the rest is what the engine loses to a cache just
flushed by hashing large values.
"""

from __future__ import annotations

import argparse
import gc
import importlib
import logging
import pkgutil
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

import run  # the benchmark suite beside this file

import loopwatch.guard
from loopwatch import LoopGuard
from loopwatch.core.fingerprint import hash_tool_call
from loopwatch.core.outcomes import OutcomeHash, hash_tool_outcome, outcome_fields

#: The hash functions the engine calls, by the name it imports them under.
HASHERS = {
    "hash_tool_call": hash_tool_call,
    "hash_tool_outcome": hash_tool_outcome,
    "outcome_fields": outcome_fields,
}


def hashing_sites() -> list[tuple[Any, str]]:
    """Every (guard module, name) through which the engine calls a hash function: the
    modules are walked, so the split survives the functions moving between them."""
    sites = []
    for info in pkgutil.iter_modules(loopwatch.guard.__path__, "loopwatch.guard."):
        module = importlib.import_module(info.name)
        for name, function in HASHERS.items():
            if getattr(module, name, None) is function:
                sites.append((module, name))
    return sites


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=int, default=100, help="bytes of args and of result")
    parser.add_argument("--rounds", type=int, default=15)
    opts = parser.parse_args()
    logging.getLogger("loopwatch").propagate = False
    text = run.corpus_text(run.load_corpus(run.DEFAULT_CORPUS))
    values = [run.text_values(text, opts.size, v) for v in range(run.VARIANTS)]

    # The hashes each value has, looked up by identity when hashing is switched off.
    call_hashes = {id(args): hash_tool_call(run.TOOL, args) for args, _ in values}
    outcomes = {id(result): hash_tool_outcome(run.TOOL, {}, result=result) for _, result in values}

    def looked_up_call(tool: str, params: object, **_: Any) -> str:
        return call_hashes[id(params)]

    def looked_up_outcome(tool: str, params: object, **kwargs: Any) -> OutcomeHash:
        return outcomes[id(kwargs["result"])]

    def looked_up_fields(tool: str, params: object, result: object, *_: Any) -> tuple[Any, ...]:
        return tuple(outcomes[id(result)])

    lookups = {
        "hash_tool_call": looked_up_call,
        "hash_tool_outcome": looked_up_outcome,
        "outcome_fields": looked_up_fields,
    }
    sites = hashing_sites()
    assert {name for _, name in sites} == set(HASHERS), sites  # the engine's hashing found

    guard = LoopGuard({"enabled": True})
    ids = [f"call_{i}" for i in range(997)]
    position = [0]

    def pairs(n: int) -> None:
        i = position[0]
        for _ in range(n):
            args, result = values[i % len(values)]
            call_id = ids[i % 997]
            guard.before_call(run.TOOL, args, session_key="bench", tool_call_id=call_id)
            guard.after_call(
                run.TOOL, args, session_key="bench", tool_call_id=call_id, result=result
            )
            i += 1
        position[0] = i

    def engine(n: int) -> None:
        for module, name in sites:
            setattr(module, name, lookups[name])
        try:
            pairs(n)
        finally:
            for module, name in sites:
                setattr(module, name, HASHERS[name])

    def hashing(n: int) -> None:
        for i in range(n):
            args, result = values[i % len(values)]
            hash_tool_call(run.TOOL, args)
            hash_tool_outcome(run.TOOL, args, result=result)

    def floor(n: int) -> None:
        for i in range(n):
            run.floor_op(*values[i % len(values)])

    cases: dict[str, Callable[[int], None]] = {
        "floor": floor,
        "hashing": hashing,
        "pair": pairs,
        "engine": engine,
    }
    batch = max(20, 300_000 // (opts.size + 100) // 4)
    pairs(100)  # fill the history
    times: dict[str, list[float]] = {name: [] for name in cases}
    for _ in range(opts.rounds):
        for name, case in cases.items():
            case(batch // 4)  # warm up after the previous case
            gc.disable()
            start = time.thread_time_ns()
            case(batch)
            elapsed = time.thread_time_ns() - start
            gc.enable()
            times[name].append(elapsed / batch / 1000)
    floor_us = statistics.median(times["floor"])
    print(f"# {opts.size} B args and result, {opts.rounds} rounds of {batch} calls")
    print(f"{'':8} {'µs':>8} {'x floor':>8}")
    for name, samples in times.items():
        median = statistics.median(samples)
        print(f"{name:8} {median:8.2f} {median / floor_us:7.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
