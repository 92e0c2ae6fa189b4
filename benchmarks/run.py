"""loopwatch benchmarks: what a guarded tool call costs, measured as ratios.

Run from the repository root (needs the ``fast`` extra, which brings orjson for the floor)::

    python benchmarks/run.py            # the full suite: about 5 minutes on 2 cores
    python benchmarks/run.py --quick    # fewer rounds and sessions: about 30 seconds

Machines are shared and noisy, so every figure is a ratio of things measured side by side
in the same run: the cases of a table take turns (round-robin, in a rotating order), each
turn times one batch with the garbage collector paused, and a ratio is the median of the
per-round ratios over many rounds. Times are the CPU time of the benchmark thread
(``time.thread_time_ns``), so time slices lost to other processes do not count; absolute
times are printed for orientation only.

When loopwatch has the orjson fast path (``loopwatch.core._fastjson``), each table is measured
with fingerprinting forced onto the pure-Python path (``pure``) and with the fast path
(``fast``), interleaved in the same rounds, so before/after is itself a ratio. With
``--baseline DIR`` (the ``src`` folder of another checkout), that code is measured too, as
mode ``before``, in the same rounds: ``fast/before`` is then this code against it.

Figures (targets from issue #6):

1. overhead: ``before_call`` + ``after_call`` vs the floor (orjson sorted-key dumps + SHA-256
   of the same args and result): <= 3x for small values, <= 1.5x for large ones;
2. growth: per-call cost at historySize 300 and 3,000 vs 30 on a healthy corpus replay:
   <= 1.5x at 3,000;
3. many sessions: bytes per history record (<= 250) and per idle session (<= 2 KB) with
   100,000 sessions in one process, and the cost of a call with 100,000 live sessions vs one;
4. detectors firing: per-call cost in the middle of long loops vs a healthy run;
5. scan throughput: the corpus replayed with ``loopwatch.replay`` (or a plain loop).

Not collected by pytest (``testpaths = ["tests"]``).
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import hashlib
import importlib
import importlib.util
import itertools
import json
import logging
import os
import platform
import statistics
import subprocess
import sys
import threading
import time
import tracemalloc
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

try:
    import orjson
except ImportError:  # pragma: no cover - the floor needs it
    sys.exit('benchmarks need orjson for the floor: pip install -e ".[fast]"')

import loopwatch
from loopwatch import UNDEFINED, LoopGuard

try:
    from loopwatch.core import fingerprint as _fingerprint
except ImportError:  # a tree from before core/ (bench_reference_node.py --baseline 5f56b93)
    from loopwatch import fingerprint as _fingerprint  # type: ignore[attr-defined,no-redef]

with contextlib.suppress(ImportError):  # figure 5 replays with them when the library has them
    import loopwatch.replay
    import loopwatch.transcripts

HERE = Path(__file__).resolve().parent
DEFAULT_CORPUS = HERE.parents[1] / "shared" / "corpus" / "traj"
SORT_KEYS = orjson.OPT_SORT_KEYS
TOOL = "read"  # a tool without special outcome rules: the generic path

# --- fingerprint modes -----------------------------------------------------------------------

#: The fast path the library chose at import (``None`` when it has none, e.g. before it
#: existed, or without orjson). Benchmarks switch it off to time the pure path.
_FAST = getattr(_fingerprint, "_fast_json", None)
MODES: tuple[str, ...] = ("pure", "fast") if _FAST is not None else ("pure",)
#: The mode of the ``--baseline`` code (measured as it is, fast path included).
BEFORE = "before"
_BASELINE: ModuleType | None = None
#: Each measured package's ``UNDEFINED`` (the corpus is read with this one's).
_UNDEFINED: dict[type, object] = {LoopGuard: UNDEFINED}


#: What fingerprints a value without orjson: the standard library's C encoder where the
#: tree has it, else the pure-Python walk.
_PLAIN = (
    getattr(_fingerprint._fastjson, "stdlib_json", None)
    if getattr(getattr(_fingerprint, "_fastjson", None), "STDLIB_AVAILABLE", False)
    else None
)


def use_mode(mode: str) -> None:
    """Route fingerprinting as a plain install does (``pure``: no orjson) or through orjson."""
    if _FAST is not None:
        _fingerprint._fast_json = _PLAIN if mode == "pure" else _FAST


def lib(mode: str) -> Any:
    """The loopwatch package a mode measures: this one, or the ``--baseline`` one."""
    return _BASELINE if mode == BEFORE else loopwatch


def load_baseline(src: Path) -> None:
    """Import the ``loopwatch`` package of another checkout beside this one (mode ``before``).

    Its modules are imported under their own names while this package's are set aside, then
    both are put back: each package's code keeps its own modules. (Imports that the old code
    makes lazily, inside functions, would find this package's modules: none are on the paths
    measured here.)
    """
    global _BASELINE, MODES
    ours = {k: m for k, m in sys.modules.items() if k == "loopwatch" or k.startswith("loopwatch.")}
    for name in ours:
        del sys.modules[name]
    sys.path.insert(0, str(src))
    try:
        base = importlib.import_module("loopwatch")
        for name in (
            "core.fingerprint",
            "core.outcomes",
            "fingerprint",
            "outcomes",
            "stores.memory",
            "replay",
            "transcripts",
        ):
            with contextlib.suppress(ImportError):
                importlib.import_module(f"loopwatch.{name}")
    finally:
        sys.path.remove(str(src))
        for name in [k for k in sys.modules if k == "loopwatch" or k.startswith("loopwatch.")]:
            del sys.modules[name]
        sys.modules.update(ours)
    if Path(base.__file__).resolve().parent == Path(loopwatch.__file__).resolve().parent:
        sys.exit(f"--baseline {src} is this same code")
    _BASELINE = base
    _UNDEFINED[base.LoopGuard] = base.UNDEFINED
    MODES = (*MODES, BEFORE)


def comparisons() -> list[tuple[str, str, str]]:
    """The (label, mode, reference mode) ratio columns the measured modes allow."""
    pairs = [("fast/pure", "fast", "pure"), ("fast/before", "fast", BEFORE)]
    return [p for p in pairs if p[1] in MODES and p[2] in MODES]


def compare(by_mode: Mapping[str, Case]) -> list[str]:
    return [fx(ratio(by_mode[a], by_mode[b])) for _, a, b in comparisons()]


# --- harness ---------------------------------------------------------------------------------


@dataclass
class Case:
    """One measured thing: ``run(n)`` performs ``n`` operations (after ``mode`` is set).

    ``n`` is the batch size: 0 means "calibrate to the batch time".
    """

    name: str
    run: Callable[[int], object]
    mode: str = "pure"
    n: int = 0
    samples: list[float] = field(default_factory=list)  # ns per operation, one per round
    #: Called, untimed, before each batch with the number of operations it will perform
    #: (the warm-up eighth included): builds the batch's fresh values (:class:`FreshValues`).
    prepare: Callable[[int], object] | None = None

    @property
    def median_us(self) -> float:
        return statistics.median(self.samples) / 1000


def _timed(case: Case) -> float:
    use_mode(case.mode)
    warm = max(1, case.n // 8)
    if case.prepare is not None:
        case.prepare(warm + case.n)
    gc.collect()
    gc.disable()
    try:
        # The collection just walked every object in the process, flushing the CPU caches:
        # a few untimed calls first, so that a batch of slow calls (30 pairs) is not timed
        # mostly cold while a batch of fast ones (1,000 floors) is timed warm.
        case.run(warm)
        start = time.thread_time_ns()
        case.run(case.n)
        elapsed = time.thread_time_ns() - start
    finally:
        gc.enable()
    return elapsed / case.n


def _calibrate(case: Case, batch_s: float) -> None:
    """Pick ``n`` so that one batch takes about ``batch_s`` (and warm the case up)."""
    n = 1
    while True:
        case.n = n
        per_op = _timed(case)
        if per_op * n >= batch_s * 1e9 / 4 or n >= 1 << 20:
            case.n = max(1, int(batch_s * 1e9 / max(per_op, 1.0)))
            return
        n *= 4


def measure(cases: Sequence[Case], rounds: int, batch_s: float) -> None:
    """Interleave the cases: every round times one batch of each, in a rotating order."""
    for case in cases:
        if case.n:
            case.run(case.n)  # warm up
        else:
            _calibrate(case, batch_s)
    for r in range(rounds):
        shift = r % len(cases)
        for case in [*cases[shift:], *cases[:shift]]:
            case.samples.append(_timed(case))
    use_mode("fast")


def ratio(a: Case, b: Case) -> float:
    """Median over rounds of a/b: both were timed in the same rounds, so drift cancels."""
    return statistics.median(x / y for x, y in zip(a.samples, b.samples, strict=True))


def table(header: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def fx(x: float) -> str:
    return f"{x:.2f}x"


def fus(x: float) -> str:
    return f"{x:.1f}" if x >= 10 else f"{x:.2f}"


def mark(value: float, target: float) -> str:
    return f"<= {target:g}x {'ok' if value <= target else 'MISSED'}"


# --- corpus ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Call:
    tool: str
    args: Any
    result: Any  # UNDEFINED when the run recorded none
    error: Any  # UNDEFINED when the call did not fail


def load_corpus(folder: Path) -> list[tuple[str, list[Call]]]:
    runs = []
    for path in sorted(folder.glob("*.jsonl")):
        calls = []
        for line in path.read_text(encoding="utf-8").splitlines():
            obj = json.loads(line)
            if "tool" not in obj:
                continue  # compaction markers: not needed for timing
            error = obj.get("error")
            calls.append(
                Call(
                    tool=obj["tool"],
                    args=obj.get("args", {}),
                    result=obj.get("result", UNDEFINED),
                    error=UNDEFINED if error is None else error,
                )
            )
        runs.append((path.stem, calls))
    return runs


def play(
    guard: LoopGuard,
    call: Call,
    session: str,
    call_id: str,
    run_id: str | None = None,
) -> str:
    """Play the host's part for one call (SPEC §9.3); returns the decision's action."""
    undefined = _UNDEFINED[type(guard)]
    decision = guard.before_call(
        call.tool, call.args, session_key=session, tool_call_id=call_id, run_id=run_id
    )
    blocked = decision.tool_result is not None
    guard.after_call(
        call.tool,
        call.args,
        session_key=session,
        tool_call_id=call_id,
        run_id=run_id,
        result=decision.tool_result if blocked else _own(call.result, undefined),
        error=undefined if blocked else _own(call.error, undefined),
    )
    return decision.action


def _own(value: object, undefined: object) -> object:
    """A corpus value for a guard whose package has its own ``UNDEFINED``."""
    return undefined if value is UNDEFINED else value


def healthy_runs(runs: Sequence[tuple[str, list[Call]]]) -> list[tuple[str, list[Call]]]:
    """The runs the default config lets through untouched, replayed alone."""
    kept = []
    for name, calls in runs:
        guard = LoopGuard({"enabled": True})
        actions = {play(guard, c, "probe", f"c{i}") for i, c in enumerate(calls)}
        if actions <= {"allow"}:
            kept.append((name, calls))
    return kept


def corpus_text(runs: Sequence[tuple[str, list[Call]]]) -> str:
    """Real tool output, concatenated: the filler for the sized values."""
    parts = [c.result for _, calls in runs for c in calls if isinstance(c.result, str)]
    return "\n".join(parts)


def structured_records(runs: Sequence[tuple[str, list[Call]]]) -> list[Any]:
    """Real JSON API results (tau-bench): nested objects of strings and ints."""
    found = []
    for _name, calls in runs:
        for c in calls:
            if isinstance(c.result, str) and c.result[:1] in "[{":
                with contextlib.suppress(ValueError):
                    found.append(json.loads(c.result))
    return found


# --- figure 1: overhead vs the floor ----------------------------------------------------------

VARIANTS = 8  # distinct calls cycled through: a healthy history (no detector fires)


def _size(value: object) -> int:
    return len(orjson.dumps(value))


def text_values(text: str, size: int, variant: int) -> tuple[Any, Any]:
    """Args and result of about ``size`` bytes of JSON each, OpenClaw-shaped."""
    start = (variant * 7919 * max(size, 64)) % max(1, len(text) - 2 * size - 1)
    args: dict[str, Any] = {"path": f"src/pkg/module_{variant}.py", "offset": variant}
    args["content"] = ""  # sized with the key present, then filled
    args["content"] = text[start : start + max(0, size - _size(args))]
    result: dict[str, Any] = {
        "content": [{"type": "text", "text": ""}],
        "details": {"status": "ok", "truncated": False, "lines": variant},
    }
    body = text[start + size : start + size + max(0, size - _size(result))]
    result["content"][0]["text"] = body
    return args, result


def structured_values(records: Sequence[Any], size: int, variant: int) -> tuple[Any, Any]:
    """Nested args and a result holding a list of real API objects, about ``size`` bytes."""
    args = {
        "reservation_id": f"R{variant:05d}",
        "cabin": "economy",
        "flights": [{"flight_number": f"HAT{variant:03d}", "date": "2024-05-19"}],
        "payment_id": "gift_card_1642017",
    }
    items: list[Any] = []
    result: dict[str, Any] = {"details": {"items": items, "page": variant}, "content": []}
    pool = itertools.cycle(records[variant:] + records[:variant])
    while _size(result) < size:
        items.append(next(pool))
    return args, result


class FreshValues(Sequence[tuple[Any, Any]]):
    """The values of a table as new objects for every batch, as a tool's output is.

    CPython caches a string's UTF-8 form the first time it is encoded, and orjson copies a
    cached form instead of transcoding: values hashed again and again are hashed warm. A
    real call brings fresh arguments and a fresh result, so these cases build, untimed
    before each batch (:attr:`Case.prepare`), one copy per operation whose strings are all
    new objects (a JSON round trip), and the runners index this pool as they would the
    values. Copy ``j`` is a copy of value ``j % len(values)``, and the pool holds a multiple
    of ``len(values)`` copies, so the calls follow the same healthy cycle.
    """

    def __init__(self, values: Sequence[tuple[Any, Any]]) -> None:
        self.values = values
        self.pool: list[tuple[Any, Any]] = []
        self.prepare(len(values))

    def prepare(self, n: int) -> None:
        count = len(self.values)
        size = -(-(n + 1) // count) * count  # one more than a batch: no copy used twice
        self.pool = [tuple(json.loads(json.dumps(self.values[j % count]))) for j in range(size)]

    def __len__(self) -> int:
        return len(self.pool)

    def __getitem__(self, index: Any) -> Any:
        return self.pool[index]


def floor_op(args: object, result: object) -> None:
    hashlib.sha256(orjson.dumps(args, option=SORT_KEYS)).hexdigest()
    hashlib.sha256(orjson.dumps(result, option=SORT_KEYS)).hexdigest()


def pair_runner(values: Sequence[tuple[Any, Any]], mode: str) -> Callable[[int], object]:
    """A guard in a steady, healthy state: cycles through distinct calls of one session."""
    guard = lib(mode).LoopGuard({"enabled": True})
    ids = [f"call_{i}" for i in range(997)]
    state = {"i": 0}
    before, after = guard.before_call, guard.after_call

    def run(n: int, actions: set[str] | None = None) -> None:
        i = state["i"]
        for _ in range(n):
            args, result = values[i % len(values)]
            call_id = ids[i % 997]
            decision = before(TOOL, args, session_key="bench", tool_call_id=call_id)
            after(TOOL, args, session_key="bench", tool_call_id=call_id, result=result)
            if actions is not None:
                actions.add(decision.action)
            i += 1
        state["i"] = i

    seen: set[str] = set()
    run(50 + len(values), seen)  # fill the history, and prove the steady state healthy
    assert seen == {"allow"}, seen
    return run


def floor_runner(values: Sequence[tuple[Any, Any]]) -> Callable[[int], object]:
    state = {"i": 0}

    def run(n: int) -> None:
        i = state["i"]
        for _ in range(n):
            args, result = values[i % len(values)]
            floor_op(args, result)
            i += 1
        state["i"] = i

    return run


class SkeletonGuard:
    """The least any loop guard of this shape does: no JavaScript-exact check, no outcome
    rule, one detector (a count over the last 30 calls), no record, no event.

    Not a loop guard; a yardstick for figure 1: what the same two Python method calls cost
    over the floor when they only hash, lock, look up the session and count.
    """

    def __init__(self) -> None:
        self.sessions: dict[str, list[str]] = {}
        self.lock = threading.Lock()

    def before_call(
        self, tool: str, params: object, *, session_key: str, tool_call_id: str | None = None
    ) -> int:
        args_hash = hashlib.sha256(orjson.dumps(params, option=SORT_KEYS)).hexdigest()
        with self.lock:
            history = self.sessions.setdefault(session_key, [])
            repeats = history.count(args_hash)
            history.append(args_hash)
            del history[:-30]
        return repeats

    def after_call(
        self,
        tool: str,
        params: object,
        *,
        session_key: str,
        tool_call_id: str | None = None,
        result: object = None,
    ) -> None:
        result_hash = hashlib.sha256(orjson.dumps(result, option=SORT_KEYS)).hexdigest()
        with self.lock:
            self.sessions[session_key][-1] = result_hash


def skeleton_runner(values: Sequence[tuple[Any, Any]]) -> Callable[[int], object]:
    guard = SkeletonGuard()
    ids = [f"call_{i}" for i in range(997)]
    state = {"i": 0}

    def run(n: int) -> None:
        i = state["i"]
        for _ in range(n):
            args, result = values[i % len(values)]
            call_id = ids[i % 997]
            guard.before_call(TOOL, args, session_key="bench", tool_call_id=call_id)
            guard.after_call(TOOL, args, session_key="bench", tool_call_id=call_id, result=result)
            i += 1
        state["i"] = i

    return run


def hashing_runner(values: Sequence[tuple[Any, Any]], mode: str) -> Callable[[int], object]:
    """The fingerprinting a pair does before #6: the args hashed twice, the outcome once."""
    hash_call = lib(mode).fingerprint.hash_tool_call
    hash_tool_outcome = lib(mode).outcomes.hash_tool_outcome

    def run(n: int) -> None:
        for i in range(n):
            args, result = values[i % len(values)]
            hash_call(TOOL, args)
            hash_tool_outcome(TOOL, args, result=result)
            hash_call(TOOL, args)

    return run


def digest_runner(values: Sequence[object], mode: str) -> Callable[[int], object]:
    digest = lib(mode).fingerprint.digest

    def run(n: int) -> None:
        for i in range(n):
            digest(values[i % len(values)])

    return run


def orjson_digest_runner(values: Sequence[object]) -> Callable[[int], object]:
    def run(n: int) -> None:
        for i in range(n):
            hashlib.sha256(orjson.dumps(values[i % len(values)], option=SORT_KEYS)).hexdigest()

    return run


def figure_overhead(
    runs: Sequence[tuple[str, list[Call]]], rounds: int, batch_s: float
) -> list[str]:
    text = corpus_text(runs)
    records = structured_records(runs)
    shapes: list[tuple[str, float, list[tuple[Any, Any]]]] = []
    for label, size, target in (
        ("small", 100, 3.0),
        ("medium", 2_000, 0.0),
        ("large", 50_000, 1.5),
    ):
        shapes.append(
            (f"{label} text", target, [text_values(text, size, v) for v in range(VARIANTS)])
        )
    for label, size in (("medium", 2_000), ("large", 50_000)):
        values = [structured_values(records, size, v) for v in range(VARIANTS)]
        shapes.append((f"{label} structured", 0.0, values))

    out = ["## 1. Overhead: before_call + after_call vs the floor", ""]
    out.append(
        "Floor: orjson sorted-key dumps + SHA-256 of the same args and result, once each. "
        'MemoryStore, `{"enabled": true}`, a healthy session cycling through '
        f"{VARIANTS} distinct calls (history full at 30 records)."
    )
    out.append(
        "Fresh: the same, on new copies of the values for every batch (their strings not "
        "yet encoded, as a tool's output is); the floor is then measured on fresh copies too."
    )
    header = ["values", "args B", "result B", "floor µs", "skeleton x floor"]
    for mode in MODES:
        header += [f"pair µs ({mode})", f"hashing µs ({mode})", f"x floor ({mode})"]
    header += [label for label, _, _ in comparisons()]
    header += ["fresh floor µs", *(f"fresh x floor ({mode})" for mode in MODES), "target"]
    rows = []
    fp_rows = []
    for name, target, values in shapes:
        floor = Case("floor", floor_runner(values))
        skeleton = Case("skeleton", skeleton_runner(values))
        pairs = [Case(f"pair {m}", pair_runner(values, m), mode=m) for m in MODES]
        hashing = [Case(f"hashing {m}", hashing_runner(values, m), mode=m) for m in MODES]
        arg_values = [a for a, _ in values]
        res_values = [r for _, r in values]
        digests = [Case(f"digest {m}", digest_runner(res_values, m), mode=m) for m in MODES]
        floor_digest = Case("orjson digest", orjson_digest_runner(res_values))
        fresh = FreshValues(values)
        fresh_floor = Case("fresh floor", floor_runner(fresh), prepare=fresh.prepare)
        fresh_pairs = [
            Case(f"fresh pair {m}", pair_runner(fresh, m), mode=m, prepare=fresh.prepare)
            for m in MODES
        ]
        measure(
            [floor, skeleton, *pairs, *hashing, floor_digest, *digests, fresh_floor, *fresh_pairs],
            rounds,
            batch_s,
        )
        row: list[object] = [
            name,
            round(statistics.median(map(_size, arg_values))),
            round(statistics.median(map(_size, res_values))),
            fus(floor.median_us),
            fx(ratio(skeleton, floor)),
        ]
        for pair, hashes in zip(pairs, hashing, strict=True):
            row += [fus(pair.median_us), fus(hashes.median_us), fx(ratio(pair, floor))]
        row += compare({c.mode: c for c in pairs})
        row.append(fus(fresh_floor.median_us))
        row += [fx(ratio(pair, fresh_floor)) for pair in fresh_pairs]
        main = MODES.index("fast") if "fast" in MODES else 0
        final = max(ratio(pairs[main], floor), ratio(fresh_pairs[main], fresh_floor))
        row.append(mark(final, target) if target else "-")
        rows.append(row)
        fp_row: list[object] = [name, fus(floor_digest.median_us)]
        for d in digests:
            fp_row += [fus(d.median_us), fx(ratio(d, floor_digest))]
        fp_row += compare({c.mode: c for c in digests})
        fp_rows.append(fp_row)
    out += ["", table(header, rows), ""]
    fp_header = ["result value", "orjson+sha µs"]
    for mode in MODES:
        fp_header += [f"digest µs ({mode})", f"x orjson ({mode})"]
    fp_header += [label for label, _, _ in comparisons()]
    out += ["Fingerprint alone: `fingerprint.digest(result)`", ""]
    out += [table(fp_header, fp_rows), ""]
    return out


# --- figure 2: growth with history -------------------------------------------------------------


GROWTH_BATCH = 40  # calls per batch in figure 2


def salted_sequence(runs: Sequence[tuple[str, list[Call]]], length: int) -> list[tuple[Call, str]]:
    """The healthy runs concatenated (repeated as needed), each pass of each run salted.

    The salt (one extra key in the args) keeps identical commands of *different* runs from
    adding up to a loop in a 3,000-record history: the runs are unrelated agents.
    """
    seq: list[tuple[Call, str]] = []
    for pass_no in itertools.count():
        for index, (_name, calls) in enumerate(runs):
            salt = f"{pass_no}.{index}"
            for c in calls:
                args = {"_run": salt, **c.args} if isinstance(c.args, dict) else c.args
                seq.append((Call(c.tool, args, c.result, c.error), salt))
                if len(seq) >= length:
                    return seq
    raise AssertionError("unreachable")


def replay_runner(
    seq: Sequence[tuple[Call, str]], history: int, start: int, per_run: bool, mode: str
) -> tuple[Callable[[int], object], Counter[str]]:
    guard = lib(mode).LoopGuard({"enabled": True, "historySize": history})
    actions: Counter[str] = Counter()
    state = {"i": 0}

    def step(n: int, count: bool) -> None:
        i = state["i"]
        for _ in range(n):
            call, salt = seq[i % len(seq)]
            action = play(guard, call, "bench", f"c{i}", salt if per_run else None)
            if count:
                actions[action] += 1
            i += 1
        state["i"] = i

    step(start, False)  # fill the history
    return (lambda n: step(n, True)), actions


def figure_growth(runs: Sequence[tuple[str, list[Call]]], rounds: int, batch_s: float) -> list[str]:
    healthy = healthy_runs(runs)
    sizes = (30, 300, 3_000)
    warm = 3_200
    seq = salted_sequence(healthy, warm + (rounds + 2) * GROWTH_BATCH)
    out = ["## 2. Growth with history", ""]
    out.append(
        f"{len(healthy)} healthy corpus runs ({sum(len(c) for _, c in healthy)} calls) "
        "concatenated, each run's args salted so unrelated runs never add up to a loop; "
        f"every guard first replays {warm} calls. Per-call cost of before_call + after_call."
    )
    header = ["scope", "mode"] + [f"µs @{s}" for s in sizes]
    header += [f"@{s} / @30" for s in sizes[1:]] + ["verdicts @3000", "target"]
    rows = []
    for per_run in (False, True):
        scope = "run_id per corpus run" if per_run else "one run (no run_id)"
        cases: list[Case] = []
        counters: dict[tuple[str, int], Counter[str]] = {}
        for mode in MODES:
            use_mode(mode)
            for size in sizes:
                runner, actions = replay_runner(seq, size, warm, per_run, mode)
                counters[mode, size] = actions
                # Same batch size everywhere: every guard plays the same calls in a round.
                cases.append(Case(f"{mode} {size}", runner, mode=mode, n=GROWTH_BATCH))
        measure(cases, rounds, batch_s)
        for m, mode in enumerate(MODES):
            mine = cases[m * len(sizes) : (m + 1) * len(sizes)]
            growth = [ratio(c, mine[0]) for c in mine[1:]]
            mix = counters[mode, sizes[-1]]
            total = sum(mix.values()) or 1
            verdicts = ", ".join(f"{k} {v / total:.1%}" for k, v in sorted(mix.items()))
            rows.append(
                [
                    scope,
                    mode,
                    *(fus(c.median_us) for c in mine),
                    *map(fx, growth),
                    verdicts,
                    mark(growth[-1], 1.5),
                ]
            )
        for label, a, b in comparisons():
            ia, ib = MODES.index(a) * len(sizes), MODES.index(b) * len(sizes)
            speedups = [fx(ratio(cases[ia + k], cases[ib + k])) for k in range(len(sizes))]
            rows.append([scope, label, *speedups, "", "", "", ""])
    out += ["", table(header, rows), ""]
    return out


# --- figure 3: many sessions --------------------------------------------------------------------


def _traced(build: Callable[[], LoopGuard]) -> tuple[int, int, LoopGuard]:
    """The guard ``build`` returns, the bytes still allocated for its sessions, and the
    bytes of its call book (tracemalloc).

    The call book (``LoopGuard._calls``, since step 4) remembers the latest 4,096 finished
    tool-call ids of the guard, whatever the number of sessions: a fixed cost per guard,
    not per record or session. Left in, it was divided among the records of the figure
    (about 36 B a record in ``--quick``, 3 B in the full run). So it is measured apart:
    what replacing it by an empty one frees.
    """
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    guard = build()
    gc.collect()
    after = tracemalloc.get_traced_memory()[0]
    book_bytes = 0
    book = getattr(guard, "_calls", None)
    if book is not None:
        guard._calls = type(book)()  # type: ignore[attr-defined]
        del book
        gc.collect()
        book_bytes = after - tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    return after - before - book_bytes, book_bytes, guard


def _filled(
    calls: Sequence[Call], sessions: int, per_session: int, mode: str, history: int = 30
) -> LoopGuard:
    """A guard whose store holds ``sessions`` sessions of ``per_session`` calls each."""
    package = lib(mode)
    store = package.MemoryStore(max_sessions=sessions + 10)
    guard: LoopGuard = package.LoopGuard({"enabled": True, "historySize": history}, store=store)
    k = 0
    for s in range(sessions):
        key = f"session-{s:06d}"
        for _ in range(per_session):
            play(guard, calls[k % len(calls)], key, f"call_{k:07d}")
            k += 1
    return guard


def figure_sessions(
    runs: Sequence[tuple[str, list[Call]]],
    sessions: int,
    full_sessions: int,
    rounds: int,
    batch_s: float,
) -> list[str]:
    healthy = healthy_runs(runs)
    # Distinct real calls, so no session ever looks like a loop.
    calls = [c for _, cs in healthy for c in cs if c.result is not UNDEFINED]
    history = 30

    out = ["## 3. Many sessions", ""]
    # Memory does not depend on the fingerprint path: measured once per package.
    big_guards: dict[str, LoopGuard] = {}
    mem_rows = []
    long_history, long_sessions = 3_000, max(4, full_sessions // 100)
    for code in [m for m in MODES if m != "pure"] or ["pure"]:
        one_bytes, book_bytes, big_guards[code] = _traced(
            lambda c=code: _filled(calls, sessions, 1, c)
        )
        full_bytes, _, _ = _traced(lambda c=code: _filled(calls, full_sessions, history, c))
        per_one = one_bytes / sessions  # a session holding one record
        per_full = full_bytes / full_sessions  # a session holding a full history
        per_record = (per_full - per_one) / (history - 1)
        idle = per_one - per_record
        long_bytes, _, _ = _traced(
            lambda c=code: _filled(calls, long_sessions, long_history, c, long_history)
        )
        per_long = (long_bytes / long_sessions - per_one) / (long_history - 1)
        mem_rows.append(
            [
                "this code" if code != BEFORE else BEFORE,
                f"{per_record:.0f}",
                mark_bytes(per_record, 250),
                f"{idle:.0f}",
                mark_bytes(idle, 2048),
                f"{per_full:.0f}",
                f"{per_long:.0f}",
                f"{book_bytes / 1024:.0f}",
            ]
        )

    hot = calls[:VARIANTS]
    cases = []
    for mode in MODES:
        use_mode(mode)
        big_guard = big_guards[BEFORE if mode == BEFORE else next(iter(big_guards))]
        lone_guard = lib(mode).LoopGuard({"enabled": True})
        cases.append(Case(f"among {mode}", hot_runner(big_guard, hot), mode=mode))
        cases.append(Case(f"alone {mode}", hot_runner(lone_guard, hot), mode=mode))
    measure(cases, rounds, batch_s)
    timing_rows = []
    for among, alone in zip(cases[::2], cases[1::2], strict=True):
        timing_rows.append(
            [among.mode, fus(alone.median_us), fus(among.median_us), fx(ratio(among, alone))]
        )
    out.append(
        f"tracemalloc: {sessions:,} sessions with one call each, and {full_sessions:,} "
        f"sessions with a full history ({history} records; real corpus calls with call ids). "
        "Per record = (full session - one-call session) / 29; idle session = one-call session "
        f"- one record. `B / record @{long_history:,}`: per record with historySize "
        f"{long_history:,} "
        f"({long_sessions} sessions of {long_history:,} calls). The guard's call book (the "
        "latest 4,096 finished tool-call ids, a fixed cost per guard) is measured apart "
        "and left out of the other columns."
    )
    out += [
        "",
        table(
            [
                "code",
                "B / record",
                "target",
                "B / idle session",
                "target",
                "B / full session",
                f"B / record @{long_history:,}",
                "call book KiB (per guard)",
            ],
            mem_rows,
        ),
        "",
        f"A hot session's per-call cost with {sessions:,} other live sessions in the store vs "
        "alone:",
        "",
        table(["mode", "µs alone", f"µs among {sessions:,}", "ratio"], timing_rows),
        "",
    ]
    return out


def mark_bytes(value: float, target: int) -> str:
    return f"<= {target} {'ok' if value <= target else 'MISSED'}"


def hot_runner(guard: LoopGuard, calls: Sequence[Call]) -> Callable[[int], object]:
    state = {"i": 0}

    def run(n: int) -> None:
        i = state["i"]
        for _ in range(n):
            play(guard, calls[i % len(calls)], "hot-session", f"hot_{i % 997}")
            i += 1
        state["i"] = i

    run(100)
    return run


# --- figure 4: detectors firing -------------------------------------------------------------------


def loop_runner(
    script: Callable[[int], tuple[Call, str]], mode: str
) -> tuple[Callable[[int], object], Counter[str]]:
    guard = lib(mode).LoopGuard({"enabled": True})
    actions: Counter[str] = Counter()
    state = {"i": 0}

    def step(n: int, count: bool) -> None:
        i = state["i"]
        for _ in range(n):
            call, call_id = script(i)
            action = play(guard, call, "loop", call_id)
            if count:
                actions[action] += 1
            i += 1
        state["i"] = i

    step(200, False)  # into the middle of the loop
    return (lambda n: step(n, True)), actions


def figure_detectors(text: str, rounds: int, batch_s: float) -> list[str]:
    values = [text_values(text, 100, v) for v in range(VARIANTS)]
    healthy = [Call(TOOL, a, r, UNDEFINED) for a, r in values]
    args, result = values[0]
    other_args, other_result = values[1]
    changing = [
        {"content": [{"type": "text", "text": f"tick {i}"}], "details": {}} for i in range(997)
    ]
    scripts: dict[str, Callable[[int], tuple[Call, str]]] = {
        "healthy (8 distinct calls)": lambda i: (healthy[i % VARIANTS], f"c{i % 997}"),
        "same call, same result (blocks)": lambda i: (
            Call(TOOL, args, result, UNDEFINED),
            f"c{i % 997}",
        ),
        "same call, new result (warnings)": lambda i: (
            Call(TOOL, args, changing[i % 997], UNDEFINED),
            f"c{i % 997}",
        ),
        "ping-pong A/B, same results": lambda i: (
            Call(TOOL, args, result, UNDEFINED)
            if i % 2 == 0
            else Call("write", other_args, other_result, UNDEFINED),
            f"c{i % 997}",
        ),
    }
    out = ["## 4. Detectors firing", ""]
    out.append(
        "Per-call cost of before_call + after_call in the middle of a long loop (small args, "
        "defaults; each guard first plays 200 calls), vs a healthy session. A blocked call's "
        "result is the block itself, as a host passes it."
    )
    header = ["session", "verdicts"]
    for mode in MODES:
        header += [f"µs ({mode})", f"vs healthy ({mode})"]
    rows = []
    cases: dict[tuple[str, str], Case] = {}
    counters: dict[tuple[str, str], Counter[str]] = {}
    for name, script in scripts.items():
        for mode in MODES:
            use_mode(mode)
            runner, actions = loop_runner(script, mode)
            cases[name, mode] = Case(f"{name} {mode}", runner, mode=mode)
            counters[name, mode] = actions
    measure(list(cases.values()), rounds, batch_s)
    first = next(iter(scripts))
    header += [label for label, _, _ in comparisons()]
    for name in scripts:
        mix = counters[name, "fast" if "fast" in MODES else MODES[0]]
        total = sum(mix.values()) or 1
        row: list[object] = [
            name,
            ", ".join(f"{k} {v / total:.0%}" for k, v in sorted(mix.items())),
        ]
        for mode in MODES:
            row += [
                fus(cases[name, mode].median_us),
                fx(ratio(cases[name, mode], cases[first, mode])),
            ]
        row += compare({mode: cases[name, mode] for mode in MODES})
        rows.append(row)
    out += ["", table(header, rows), ""]
    return out


# --- figure 5: scan throughput -----------------------------------------------------------------


def _replay_with_library(folder: Path, mode: str) -> Callable[[], int] | None:
    """``loopwatch.replay`` over the parsed corpus, if the library has it."""
    package = lib(mode)
    replay, transcripts_module = (getattr(package, n, None) for n in ("replay", "transcripts"))
    if replay is None or transcripts_module is None:
        return None
    replay_run, read_transcript = replay.replay_run, transcripts_module.read_transcript
    transcripts = [read_transcript(p) for p in sorted(folder.glob("*.jsonl"))]
    runs = [run for t in transcripts for run in t.runs]

    def scan() -> int:
        return sum(replay_run(run).calls for run in runs)

    return scan


def _replay_plainly(runs: Sequence[tuple[str, list[Call]]], mode: str) -> Callable[[], int]:
    def scan() -> int:
        n = 0
        for _name, calls in runs:
            guard = lib(mode).LoopGuard({"enabled": True})
            for i, c in enumerate(calls):
                play(guard, c, "scan", f"call-{i + 1}")
            n += len(calls)
        return n

    return scan


def figure_scan(
    folder: Path, runs: Sequence[tuple[str, list[Call]]], rounds: int, quick: bool
) -> list[str]:
    out = ["## 5. Scan throughput", ""]
    how = "`loopwatch.replay.replay_run` over every corpus run (parsing excluded)"
    scans = {mode: _replay_with_library(folder, mode) for mode in MODES}
    if any(scan is None for scan in scans.values()):
        scans = {mode: _replay_plainly(runs, mode) for mode in MODES}
        how = "every corpus run replayed through a fresh LoopGuard (plain loop)"
    calls = {mode: scan() for mode, scan in scans.items() if scan is not None}
    cases = []
    for mode, scan in scans.items():
        cases.append(Case(f"scan {mode}", lambda n, s=scan: [s() for _ in range(n)], mode=mode))
    measure(cases, max(3, rounds // 5), 0.0)
    rows: list[list[object]] = []
    for case in cases:
        per_call = case.median_us * 1000 / calls[case.mode]
        rows.append(
            [case.mode, f"{calls[case.mode]}", f"{1e9 / per_call:,.0f}", f"{per_call / 1000:.1f}"]
        )
    by_mode = {case.mode: case for case in cases}
    for label, a, b in comparisons():
        speed = ratio(by_mode[a], by_mode[b])
        rows.append([label, "", fx(1 / speed), fx(speed)])
    out += [
        f"{how}, {len(runs)} runs.",
        "",
        table(["mode", "calls", "calls/s (CPU time)", "µs/call"], rows),
        "",
    ]
    for script in ("bench_scan.py", "bench_redis.py"):
        path = HERE / script
        if path.exists():
            out += [f"### {script}", "", "```"]
            # Pass --quick on only to scripts that know it.
            knows_quick = "--quick" in path.read_text(encoding="utf-8")
            cmd = [sys.executable, str(path), *(["--quick"] if quick and knows_quick else [])]
            done = subprocess.run(cmd, capture_output=True, text=True, check=False)
            out += [(done.stdout + done.stderr).strip() or f"(exit {done.returncode})", "```", ""]
            if _BASELINE is not None and _BASELINE.__file__ is not None:
                # The same script on the baseline code (found first on the path).
                env = {**os.environ, "PYTHONPATH": str(Path(_BASELINE.__file__).parents[1])}
                done = subprocess.run(cmd, capture_output=True, text=True, check=False, env=env)
                text = (done.stdout + done.stderr).strip() or f"(exit {done.returncode})"
                out += [f"{script}, `{BEFORE}` code:", "", "```", text, "```", ""]
    return out


# --- main ----------------------------------------------------------------------------------------


def machine() -> list[str]:
    cpu = "unknown"
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    has_fast = getattr(_fingerprint, "_fast_json", None) is not None
    return [
        f"- CPU: {cpu}; nproc: {os.cpu_count()}; {platform.platform()}",
        f"- Python: {sys.version.replace(chr(10), ' ')}",
        f"- orjson {orjson.__version__}; fast path in loopwatch: {'yes' if has_fast else 'no'}"
        f" (modes: {', '.join(MODES)})",
    ]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer rounds and sessions")
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS, help="traj folder")
    parser.add_argument(
        "--only", default="12345", help="figures to run, e.g. --only 13 (default: all)"
    )
    parser.add_argument("--sessions", type=int, help="sessions for figure 3")
    parser.add_argument(
        "--baseline",
        type=Path,
        help="the src folder of another checkout, measured beside this code as mode 'before'",
    )
    opts = parser.parse_args(argv)
    if opts.baseline is not None:
        load_baseline(opts.baseline.resolve())
    logging.getLogger("loopwatch").propagate = False  # loops log warnings: keep them quiet

    rounds = 21 if opts.quick else 101
    batch_s = 0.002 if opts.quick else 0.003
    sessions = opts.sessions or (10_000 if opts.quick else 100_000)
    full_sessions = max(100, sessions // 20)
    runs = load_corpus(opts.corpus)
    if not runs:
        sys.exit(f"no corpus runs in {opts.corpus}")

    out = ["# loopwatch benchmarks", "", *machine(), ""]
    print("\n".join(out), flush=True)
    started = time.perf_counter()
    figures: Mapping[str, Callable[[], list[str]]] = {
        "1": lambda: figure_overhead(runs, rounds, batch_s),
        "2": lambda: figure_growth(runs, rounds, batch_s),
        "3": lambda: figure_sessions(runs, sessions, full_sessions, rounds, batch_s),
        "4": lambda: figure_detectors(corpus_text(runs), rounds, batch_s),
        "5": lambda: figure_scan(opts.corpus, runs, rounds, opts.quick),
    }
    for key, figure in figures.items():
        if key in opts.only:
            print("\n".join(figure()), flush=True)
    print(f"_{time.perf_counter() - started:.0f} s, {rounds} rounds per table_")
    return 0


if __name__ == "__main__":
    sys.exit(main())
