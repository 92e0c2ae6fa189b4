"""Where a corpus call's time goes: the 1,500 calls of bench_reference_node.py, profiled.

    python benchmarks/profile_corpus.py [--passes 20] [--pure] [--profile reference] [--top 30]

Plays the first ``--calls`` corpus calls (one session, ``{"enabled": true}``, a fresh guard
each pass: exactly the loopwatch side of ``bench_reference_node.py``) and reports:

1. the unprofiled per-call CPU time, and the hashing alone (``hash_tool_call`` once and
   ``hash_tool_outcome`` once on the same calls, no profiler: the pair hashes the args once
   when the memo holds, twice otherwise);
2. a cProfile of the same passes, rolled up into the parts of a call (cumulative time of
   the functions named in ``PARTS``, matched by name so the table survives modules
   moving), scaled to the unprofiled time: cProfile adds a fixed cost to every Python-level
   call, so it inflates parts made of many small calls; the ``µs`` column is the part's
   share of the profiled time times the unprofiled per-call time;
3. the top functions by own time.
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import pstats
import statistics
import sys
import time
from collections.abc import Generator
from typing import Any

import bench_reference_node as bench

#: A call's parts: (label, functions whose cumulative time it is, functions nested in those
#: whose cumulative time is another part's and is taken out). Functions are ``"name"`` or
#: ``"file-part:name"``, matched by name so the table survives modules moving.
PARTS: tuple[tuple[str, tuple[str, ...], tuple[str, ...]], ...] = (
    ("args hashing (hash_tool_call)", ("hash_tool_call",), ()),
    (
        "outcome hashing (hash_tool_outcome, or its outcome_fields)",
        ("outcome_fields",),
        (),
    ),
    (
        "store begin_call (excl. the session touch): call_key, _Postponed, view",
        ("memory:begin_call",),
        ("memory:begin_call -> _touch",),
    ),
    (
        "store session touch (_touch: LRU, expiry) incl. the postponed append below",
        ("_touch",),
        (),
    ),
    (
        "  of which: begin_call's append + trim + index, postponed (MemoryStore._settle)",
        ("_settle",),
        (),
    ),
    (
        "detection (the profile's detect: evaluate + log_verdict, adaptive detectors)",
        ("evaluate", "log_verdict", "_detect_adaptive"),
        (),
    ),
    (
        "store record_outcome (excl. the session touch): find_pending, fill, trim, guard",
        ("memory:record_outcome", "after_call -> memory:record_outcome_fields"),
        ("memory:record_outcome_fields -> _touch",),
    ),
    (
        "args memo (ArgsMemos.remember / take, ArgsMemo.hash_of / context_for)",
        ("_memo:remember", "_memo:take", "hash_of", "context_for"),
        (),
    ),
    ("ToolCallRecord / OutcomeWrite / BeforePlan built", ("<string>:__init__", "<lambda>"), ()),
    ("conclude / Decision (conclude)", ("_verdicts:conclude",), ()),
    ("config lookup (block_for, _guard_spec)", ("block_for", "_guard_spec"), ()),
    (
        "ids (normalize_run_id, normalize_tool_call_id)",
        ("normalize_run_id", "normalize_tool_call_id"),
        (),
    ),
    (
        "tool name + session checks (ToolNames, _accepts)",
        ("_memo:__call__", "_accepts"),
        (),
    ),
    ("known-poll check (is_known_poll)", ("is_known_poll",), ()),
    ("clock (_now)", ("_now",), ()),
    (
        "session lock (RLock enter/exit)",
        (
            "<method '__enter__' of '_thread.RLock' objects>",
            "<method '__exit__' of '_thread.RLock' objects>",
        ),
        (),
    ),
    ("warning bucket (update_warning_bucket)", ("update_warning_bucket",), ()),
)
TOPS = ("before_call", "after_call")


def _matches(key: tuple[str, int, str], spec: str) -> bool:
    file, _line, name = key
    where, _, wanted = spec.rpartition(":")
    return name == wanted and where in file


def cumulative(stats: pstats.Stats, names: tuple[str, ...]) -> float:
    """Seconds of cumulative time of the functions ``names`` (see :data:`PARTS`); a name
    ``"caller -> callee"`` is the time of ``callee`` when called from ``caller``."""
    total = 0.0
    table: dict[Any, Any] = stats.stats  # type: ignore[attr-defined]
    for key, (_cc, _nc, _tt, ct, callers) in table.items():
        for spec in names:
            caller, _, callee = spec.rpartition(" -> ")
            if not _matches(key, callee):
                continue
            if not caller:
                total += ct
                continue
            for caller_key, edge in callers.items():
                if _matches(caller_key, caller):
                    total += edge[3]
    return total


def own(stats: pstats.Stats, names: tuple[str, ...]) -> float:
    total = 0.0
    table: dict[Any, Any] = stats.stats  # type: ignore[attr-defined]
    for (_file, _line, name), (_cc, _nc, tt, _ct, _callers) in table.items():
        if name in names:
            total += tt
    return total


def find_function(name: str) -> Any:
    """A function of the loaded ``loopwatch`` package by name, wherever it lives now."""
    for module_name, module in sorted(sys.modules.items()):
        if module_name.startswith("loopwatch") and callable(getattr(module, name, None)):
            return getattr(module, name)
    raise LookupError(name)


class _RecordingProfile:
    """The guard's detector profile, noting the arguments of each ``detect`` in ``ops``
    (the history is the store's view, replayed) and of each ``call_facts`` /
    ``outcome_facts`` in ``facts``; everything else passes through."""

    def __init__(
        self,
        base: Any,
        ops: list[tuple[str, tuple[Any, ...]]],
        facts: list[tuple[str, tuple[Any, ...]]],
    ) -> None:
        self._base = base
        self._ops = ops
        self._facts = facts

    def detect(self, history: Any, call: Any, config: Any) -> Any:
        self._ops.append(("detect", (call, config)))
        return self._base.detect(history, call, config)

    def call_facts(self, *args: Any) -> Any:
        self._facts.append(("call_facts", args))
        return self._base.call_facts(*args)

    def outcome_facts(self, *args: Any) -> Any:
        self._facts.append(("outcome_facts", args))
        return self._base.outcome_facts(*args)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._base, name)


def split(side: bench.LoopwatchSide, profile: str, mode: str, passes: int) -> list[str]:
    """The pair's time split without a profiler, by replaying its parts alone.

    One pass records, in order, every store operation the guard performs (with its very
    arguments), every detection's inputs and every facts request of the profile. Then,
    timed in alternation: the store operations replayed on a fresh ``MemoryStore``; the
    same with the detection (the profile's ``detect`` on each ``begin_call``'s view); the
    hashing (``hash_tool_call`` + ``hash_tool_outcome`` once per call); the profile's
    facts (``call_facts`` + ``outcome_facts``, the adaptive records); and the whole pair.
    What the pair spends beyond the four is the guard's own plumbing (memo, plan, ids, config,
    records built, the decision). Uses today's internals (``LoopGuard._store``, the
    guard's ``detector_profile``, whose ``detect(history, call, resolved)`` is the whole
    detection: ``evaluate`` + ``log_verdict``, and the adaptive detectors in that profile;
    ``MemoryStore``): a one-off tool.
    """
    store_type = type(side.guard(profile)._store)
    hash_call = find_function("hash_tool_call")
    hash_outcome = find_function("hash_tool_outcome")
    ops: list[tuple[str, tuple[Any, ...]]] = []
    guard = side.guard(profile)
    store = guard._store
    for name in ("begin_call", "record_outcome", "cancel_call", "update_warning_bucket"):
        method = getattr(store, name)

        def recorder(*args: Any, _name: str = name, _method: Any = method) -> Any:
            ops.append((_name, args))
            return _method(*args)

        setattr(store, name, recorder)
    profile_used = guard.detector_profile
    facts: list[tuple[str, tuple[Any, ...]]] = []
    guard.detector_profile = _RecordingProfile(profile_used, ops, facts)
    for i, (tool, args, result, error) in enumerate(side.calls):
        call_id = side.ids[i]
        decision = guard.before_call(tool, args, session_key="s", tool_call_id=call_id)
        if decision.tool_result is not None:
            result, error = decision.tool_result, side.lw.UNDEFINED
        guard.after_call(
            tool, args, session_key="s", tool_call_id=call_id, result=result, error=error
        )
    n = len(side.calls)

    def replay(with_detection: bool) -> None:
        fresh = store_type()
        view = None
        for name, args in ops:
            if name == "detect":
                if with_detection:
                    profile_used.detect(view, *args)
            elif name == "begin_call":
                view = getattr(fresh, name)(*args)
            else:
                getattr(fresh, name)(*args)

    def facts_built() -> None:
        for name, args in facts:
            getattr(profile_used, name)(*args)

    def hashing() -> None:
        for tool, args, result, error in side.calls:
            hash_call(tool, args)
            hash_outcome(tool, args, result=result, error=error)

    cases: dict[str, Any] = {
        "store ops alone": lambda: replay(False),
        "store ops + detection": lambda: replay(True),
        "hashing (args once, outcome once)": hashing,
        "profile facts": facts_built,
        "pair": lambda: side.corpus_pass(profile, side.calls),
    }
    samples: dict[str, list[float]] = {k: [] for k in cases}
    side.use(mode)
    try:
        for r in range(passes):
            names = list(cases)
            names = names[r % len(names) :] + names[: r % len(names)]
            for name in names:
                gc.collect()
                start = time.thread_time_ns()
                cases[name]()
                samples[name].append((time.thread_time_ns() - start) / n / 1000)
    finally:
        side.use("fast")
    med = {k: statistics.median(v) for k, v in samples.items()}
    pair = med["pair"]
    store_us = med["store ops alone"]
    detect_us = med["store ops + detection"] - store_us
    hash_us = med["hashing (args once, outcome once)"]
    facts_us = med["profile facts"]
    rest = pair - store_us - detect_us - hash_us - facts_us
    rows = [
        ("hashing: hash_tool_call + hash_tool_outcome, once each", hash_us),
        ("profile facts: call_facts + outcome_facts (none in the reference)", facts_us),
        ("store: begin_call + record_outcome (+ cancel, buckets), MemoryStore", store_us),
        ("detection: the profile's detect on the store's view", detect_us),
        ("guard plumbing: the rest of before_call + after_call", rest),
    ]
    out = [f"| part ({profile}, {mode}) | µs a call | share |", "|---|---|---|"]
    out += [f"| {label} | {us:.2f} | {100 * us / pair:.0f}% |" for label, us in rows]
    out.append(f"| pair | {pair:.2f} | 100% |")
    return out


#: (label, statement): single constructs of the hot path; names from :func:`micro`'s globals.
MICRO: tuple[tuple[str, str], ...] = (
    ("empty function call (the unit)", "empty()"),
    (
        "ToolCallRecord(8 fields, positional): frozen slots dataclass",
        "ToolCallRecord('exec', H, 'c1', None, None, None, 1, None)",
    ),
    ("namedtuple of 8 fields (yardstick)", "Eight(1, 2, 3, 4, 5, 6, 7, 8)"),
    ("plain __slots__ class of 8 fields (yardstick)", "Slots8(1, 2, 3, 4, 5, 6, 7, 8)"),
    ("OutcomeHash(hash, None): frozen slots dataclass", "OutcomeHash(H, None)"),
    (
        "OutcomeWrite(8 keywords): NamedTuple",
        "OutcomeWrite(tool_name='exec', args_hash=H, tool_call_id='c1', run_id=None, "
        "outcome=None, history_size=30, timestamp=1, facts=None)",
    ),
    ("ArgsMemo.of(dict of 2 scalars)", "ArgsMemo.of('exec', PARAMS, H)"),
    ("generator step: next + send + StopIteration (as guard._ops.adrive)", "drive()"),
    ("with RLock: (the session lock)", "with LOCK: pass"),
    ("isinstance('text', Mapping) (ABC check)", "isinstance('text', Mapping)"),
    ("type(x) is dict", "type(TEXT) is dict"),
    ("call_key(tool, args_hash): hex to 32 bytes", "call_key('exec', H)"),
    ("hash_tool_call('exec', small dict)", "hash_tool_call('exec', PARAMS)"),
    ("hash_tool_outcome('exec', 100 B str)", "hash_tool_outcome('exec', PARAMS, result=RESULT)"),
)


class Slots8:
    __slots__ = ("a", "b", "c", "d", "e", "f", "g", "h")

    def __init__(self, a: int, b: int, c: int, d: int, e: int, f: int, g: int, h: int) -> None:
        self.a, self.b, self.c, self.d = a, b, c, d
        self.e, self.f, self.g, self.h = e, f, g, h


def _steps() -> Generator[tuple[str, tuple[()]], Any, Any]:
    got = yield ("begin_call", ())
    return got


def _drive() -> Any:
    gen = _steps()
    next(gen)
    try:
        gen.send(None)
    except StopIteration as done:
        return done.value
    return None


def micro() -> list[str]:
    """Single constructs of the hot path, timed alone (``timeit``, best of 5), as multiples
    of an empty function call: what each costs wherever it sits. Uses today's internal
    names; a construct whose name is gone is reported as such."""
    import threading
    import timeit
    from collections import namedtuple
    from collections.abc import Mapping

    env: dict[str, Any] = {
        "H": "exec:" + "ab" * 32,
        "PARAMS": {"command": "ls -la /tmp", "timeout": 30},
        "RESULT": "x" * 100,
        "TEXT": "text",
        "Eight": namedtuple("Eight", "a b c d e f g h"),
        "Slots8": Slots8,
        "LOCK": threading.RLock(),
        "Mapping": Mapping,
        "drive": _drive,
        "empty": lambda: None,
    }
    rows = ["| construct | ns | x empty call |", "|---|---|---|"]
    unit = 0.0
    for label, stmt in MICRO:
        try:
            for name in ("ToolCallRecord", "OutcomeHash", "OutcomeWrite", "ArgsMemo"):
                if name in stmt:
                    env[name] = find_function(name)
            for name in ("call_key", "hash_tool_call", "hash_tool_outcome"):
                if name in stmt:
                    env[name] = find_function(name)
            cpu = time.thread_time  # CPU time: wall time on a loaded machine is several times more
            runs = timeit.repeat(stmt, number=100_000, repeat=5, globals=env, timer=cpu)
            ns = min(runs) / 1e5 * 1e9
        except Exception as exc:  # a name the restructured package no longer has
            rows.append(f"| {label} | n/a ({type(exc).__name__}) | |")
            continue
        unit = unit or ns
        rows.append(f"| {label} | {ns:.0f} | {ns / unit:.1f} |")
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--passes", type=int, default=20)
    parser.add_argument("--calls", type=int, default=1500)
    parser.add_argument("--pure", action="store_true", help="no orjson fast path")
    parser.add_argument("--profile", default="reference", choices=("reference", "adaptive"))
    parser.add_argument("--top", type=int, default=30)
    parser.add_argument("--micro", action="store_true", help="also time single constructs")
    opts = parser.parse_args()
    side = bench.LoopwatchSide(bench.DEFAULT_CORPUS, opts.calls)
    mode = "pure" if opts.pure else "fast"
    n = len(side.calls)

    # 1. unprofiled: the pair, and the hashing alone
    plain = sorted(side.time_corpus(opts.profile, mode, False) for _ in range(opts.passes))
    per_call = plain[len(plain) // 2] / 1000
    hash_call = find_function("hash_tool_call")
    hash_outcome = find_function("hash_tool_outcome")
    side.use(mode)
    samples_a, samples_o = [], []
    for _ in range(opts.passes):
        gc.collect()
        start = time.thread_time_ns()
        for tool, args, _result, _error in side.calls:
            hash_call(tool, args)
        samples_a.append((time.thread_time_ns() - start) / n / 1000)
        start = time.thread_time_ns()
        for tool, args, result, error in side.calls:
            hash_outcome(tool, args, result=result, error=error)
        samples_o.append((time.thread_time_ns() - start) / n / 1000)
    side.use("fast")
    args_us = sorted(samples_a)[len(samples_a) // 2]
    outcome_us = sorted(samples_o)[len(samples_o) // 2]
    print(f"# {n} corpus calls, {opts.profile} profile, {mode} path, {opts.passes} passes")
    print(f"unprofiled pair: {per_call:.1f} µs a call")
    print(f"hash_tool_call alone: {args_us:.2f} µs ({100 * args_us / per_call:.0f}%)")
    print(f"hash_tool_outcome alone: {outcome_us:.2f} µs ({100 * outcome_us / per_call:.0f}%)")
    rest = per_call - args_us - outcome_us
    print(f"the rest (engine, once-hashed args): {rest:.1f} µs ({100 * rest / per_call:.0f}%)")

    print("\nprofiler-free split (parts replayed alone, alternated):\n")
    print("\n".join(split(side, opts.profile, mode, opts.passes)))

    # 2. profiled, rolled up
    profiler = cProfile.Profile()
    side.use(mode)
    profiler.enable()
    for _ in range(opts.passes):
        side.corpus_pass(opts.profile, side.calls)
    profiler.disable()
    side.use("fast")
    stats = pstats.Stats(profiler)
    total = cumulative(stats, TOPS)
    calls_hashed = sum(
        nc
        for (_f, _l, name), (_cc, nc, *_rest) in stats.stats.items()  # type: ignore[attr-defined]
        if name == "hash_tool_call"
    )
    print(f"\nprofiled: {1e6 * total / (n * opts.passes):.1f} µs a call under cProfile; ")
    print(f"hash_tool_call ran {calls_hashed / (n * opts.passes):.2f} times a call")
    print("\n| part | µs a call (scaled) | share |\n|---|---|---|")
    covered = 0.0
    for label, names, nested in PARTS:
        seconds = cumulative(stats, names) - cumulative(stats, nested)
        share = seconds / total
        if not label.startswith(" "):  # an indented part is inside the one above
            covered += share
        print(f"| {label} | {share * per_call:.2f} | {100 * share:.1f}% |")
    left = 1 - covered
    print(
        f"| the rest: guard plumbing (own time of before_call, after_call, plan_before, "
        f"plan_after, run_follow_up, follow_up, records built) | {left * per_call:.2f} | "
        f"{100 * left:.1f}% |"
    )
    plumbing = (
        "before_call",
        "after_call",
        "plan_before",
        "plan_after",
        "run_follow_up",
        "before_steps",
        "follow_up",
        "detect",
        "abort_after",
        "__init__",
    )
    print("\nown time of the plumbing functions (profiled share):")
    for name in plumbing:
        print(f"  {name}: {100 * own(stats, (name,)) / total:.1f}%")
    if opts.top:
        stats.sort_stats("tottime").print_stats(opts.top)
    if opts.micro:
        print("\nsingle constructs:\n")
        print("\n".join(micro()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
