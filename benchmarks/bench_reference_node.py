"""loopwatch against OpenClaw's own loop detection in node, on the same real calls (issue 12).

    python benchmarks/bench_reference_node.py [--quick] [--rounds N] [--calls 1500]
        [--baseline REV] [--openclaw-dir DIR] [--corpus DIR] [--skip-node]

At run time, installs ``openclaw@2026.6.10`` from npm into a temporary folder (never
committed; ``--openclaw-dir`` reuses an install), finds ``detectToolCallLoop``,
``recordToolCall``, ``recordToolCallOutcome`` and ``getDiagnosticSessionState`` by name in
its ``dist`` chunks, and drives them from ``reference_driver.mjs`` beside this file. Prints:

1. per call, the first ``--calls`` calls of ``../shared/corpus/traj/*.jsonl`` (sorted file
   names) in one session, ``{"enabled": true}``: node, ``loopwatch[fast]`` (orjson), the "pure"
   row of a plain install (orjson switched off: the standard library's C encoder where the
   tree has it, else the pure-Python walk) and the adaptive profile, each a fresh session
   per pass, in alternated rounds (33; 11 with ``--quick``); then the same on fresh copies
   of the values;
2. the adaptive profile against the reference profile (target <= 1.3x);
3. the small (~100 B) healthy pair against the floor (orjson + SHA-256 of the same values;
   target <= 4x) and the large (~50 KB) pair on fresh values (target <= 1.25x), with
   ``run.py``'s values (figure 1);
4. ``import loopwatch`` (``python -X importtime``: cumulative µs of the top-level module,
   median of alternated runs);
5. with ``--baseline REV``, every loopwatch figure for the code of a git revision too
   (``git archive REV src`` into a temporary folder), in the same rounds.

Each Python side runs in its own worker process (this script with ``--worker``), so two
versions of the package never share an interpreter; the node side is one process for the
whole run. Every figure is a median of per-round ratios of things timed in the same round
(as in ``run.py``). Times are CPU times: ``time.thread_time_ns`` in Python,
``process.cpuUsage()`` (user + system, all threads) in node.

What one call is on each side (equivalent work):

- node (``reference_driver.mjs``): the session state lookup, ``detectToolCallLoop`` (hashes
  the args: stable stringify + SHA-256, scans the history for the four detectors), the
  wiring's warning buckets when a detector warns, ``recordToolCall`` (hashes the args again,
  appends the record, trims to historySize), then the lookup again and
  ``recordToolCallOutcome`` (hashes the outcome, hashes the args a third time, finds the
  pending record, trims);
- loopwatch: ``LoopGuard.before_call`` (hashes the args, detection, warning buckets, the
  pending record) and ``after_call`` with the result or error (hashes the outcome, fills the
  record), ``MemoryStore``, no listeners; a critical verdict blocks on both sides, and its
  veto result is then the outcome. The script checks that both sides take the same
  allow / warn / block action on every call before timing.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import logging
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Final

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
DEFAULT_CORPUS = ROOT.parent / "shared" / "corpus" / "traj"
DRIVER = HERE / "reference_driver.mjs"
OPENCLAW = "openclaw@2026.6.10"
#: The functions the node side drives, found by name in the package's dist chunks.
NEEDED = ("detectToolCallLoop", "recordToolCall", "recordToolCallOutcome", "normalizeToolName")
OPTIONAL = ("getDiagnosticSessionState",)
CONFIG = {"enabled": True}
EXPORT_RE = re.compile(r"export\s*\{([^}]*)\}")
IMPORT_RE = re.compile(r'import\s*\{([^}]*)\}\s*from\s*"([^"]+)"')

# --- corpus ----------------------------------------------------------------------------------


def load_calls(folder: Path, limit: int) -> list[dict[str, Any]]:
    """The first ``limit`` calls of the corpus, one a line, files in sorted order."""
    calls: list[dict[str, Any]] = []
    for path in sorted(folder.glob("*.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            obj = json.loads(line)
            if "tool" not in obj:
                continue  # a compaction marker
            calls.append(
                {
                    "tool": obj["tool"],
                    "args": obj.get("args", {}),
                    "result": obj.get("result"),
                    "error": obj.get("error"),
                }
            )
            if len(calls) >= limit:
                return calls
    return calls


# --- the node side ---------------------------------------------------------------------------


def install_openclaw(folder: Path) -> Path:
    """``npm install --prefix folder openclaw@…``; returns the package's ``dist`` folder."""
    dist = folder / "node_modules" / "openclaw" / "dist"
    if not dist.is_dir():
        cmd = ["npm", "install", "--prefix", str(folder), OPENCLAW]
        cmd += ["--no-audit", "--no-fund", "--ignore-scripts", "--loglevel=error"]
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    return dist


def locate_exports(dist: Path) -> dict[str, tuple[str, str]]:
    """Where each needed function is defined and under which name its chunk exports it.

    The bundler renames exports (``export { detectToolCallLoop as t }``) and hashes chunk
    names, so the chunks are searched for the function's definition and their export lists
    parsed.
    """
    found: dict[str, tuple[str, str]] = {}
    for path in sorted(dist.glob("*.js")):
        if path.name.startswith("lw-diff-"):
            continue  # a patched copy tools/reference_diff.py left (it removes them)
        text = path.read_text(encoding="utf-8", errors="replace")
        for name in (*NEEDED, *OPTIONAL):
            if name in found or f"function {name}(" not in text:
                continue
            for block in EXPORT_RE.findall(text):
                for item in block.split(","):
                    parts = item.split()
                    if parts and parts[0] == name:
                        found[name] = (str(path), parts[-1])
    found.update(locate_import(dist, "runBeforeToolCallHook", "normalizeToolName"))
    missing = [n for n in NEEDED if n not in found]
    if missing:
        sys.exit(f"not found in {dist}: {', '.join(missing)}")
    return found


def locate_import(dist: Path, user: str, name: str) -> dict[str, tuple[str, str]]:
    """The ``name`` that the chunk defining function ``user`` imports, as ``locate_exports``.

    Several chunks define a ``normalizeToolName``; the wiring's own (``bash`` → ``exec``)
    is the one its chunk imports.
    """
    for path in sorted(dist.glob("*.js")):
        text = path.read_text(encoding="utf-8", errors="replace")
        if f"function {user}(" not in text:
            continue
        for names, source in IMPORT_RE.findall(text):
            for item in names.split(","):
                parts = item.split()
                if parts and parts[-1] == name:
                    return {name: (str((path.parent / source).resolve()), parts[0])}
    return {}


class Worker:
    """A child process answering one JSON line per command line."""

    def __init__(
        self,
        label: str,
        cmd: Sequence[str],
        env: dict[str, str] | None = None,
        stderr: IO[str] | None = None,
    ) -> None:
        self.label = label
        self.proc = subprocess.Popen(
            cmd,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
            env=env,
            cwd=ROOT,
        )

    def ask(self, command: str) -> dict[str, Any]:
        stdin, stdout = self._pipes()
        stdin.write(command + "\n")
        stdin.flush()
        while True:
            line = stdout.readline()
            if not line:
                sys.exit(f"{self.label} ended on {command!r} (exit {self.proc.poll()})")
            if line.startswith("{"):  # anything else is the library's own output
                reply: dict[str, Any] = json.loads(line)
                return reply

    def _pipes(self) -> tuple[IO[str], IO[str]]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        return self.proc.stdin, self.proc.stdout

    def close(self) -> None:
        with contextlib.suppress(BrokenPipeError, OSError):
            self._pipes()[0].write("quit\n")
            self._pipes()[0].close()
        self.proc.wait(timeout=30)


# --- the loopwatch side (``--worker``) -------------------------------------------------------


def fast_switches() -> list[tuple[Any, Any]]:
    """Every loaded ``loopwatch`` module holding the orjson fast path, with its value.

    ``run.py`` and ``tests/core/test_fastpath.py`` switch the pure path on by setting
    ``fingerprint._fast_json`` to ``None``; the search survives the module moving.
    """
    found = []
    for name, module in list(sys.modules.items()):
        if name.startswith("loopwatch") and getattr(module, "_fast_json", None) is not None:
            found.append((module, module._fast_json))
    return found


def without_orjson() -> Any:
    """What fingerprints a value without the ``fast`` extra: the standard library's C
    encoder in trees that have it (``_fastjson.stdlib_json``), else the pure path (``None``)."""
    for name, module in list(sys.modules.items()):
        if name.startswith("loopwatch") and getattr(module, "STDLIB_AVAILABLE", False):
            return module.stdlib_json
    return None


class LoopwatchSide:
    """The cases one worker times, by name; each command times one batch."""

    def __init__(self, corpus: Path, limit: int) -> None:
        import loopwatch

        self.lw: Any = loopwatch  # this worker's tree: the current one or the baseline
        logging.getLogger("loopwatch").addHandler(logging.NullHandler())
        logging.getLogger("loopwatch").propagate = False
        undefined = loopwatch.UNDEFINED
        self.calls = [
            (
                c["tool"],
                c["args"],
                undefined if c["result"] is None else c["result"],
                undefined if c["error"] is None else c["error"],
            )
            for c in load_calls(corpus, limit)
        ]
        self.ids = [f"c{i}" for i in range(len(self.calls))]
        self.pass_no = 0
        self.corpus_pass("reference", self.calls)  # loads every lazily imported module
        self.corpus_pass("adaptive", self.calls)
        self.switches = fast_switches()
        self.figure: dict[str, tuple[Callable[[int], object], Callable[[int], object] | None]] = {}
        self.batch: dict[str, int] = {}

    def use(self, mode: str) -> None:
        plain = without_orjson()
        for module, fast in self.switches:
            module._fast_json = plain if mode == "pure" else fast

    def guard(self, profile: str) -> Any:
        if profile == "reference":
            return self.lw.LoopGuard(dict(CONFIG))
        return self.lw.LoopGuard(dict(CONFIG), profile=profile)

    def corpus_pass(self, profile: str, calls: Sequence[tuple[Any, ...]]) -> list[str]:
        """One pass of the calls through a fresh guard, one session; returns the actions."""
        guard = self.guard(profile)
        before, after = guard.before_call, guard.after_call
        self.pass_no += 1
        key = f"bench-{self.pass_no}"
        actions = []
        for (tool, args, result, error), call_id in zip(calls, self.ids, strict=True):
            decision = before(tool, args, session_key=key, tool_call_id=call_id)
            if decision.tool_result is not None:
                after(
                    tool, args, session_key=key, tool_call_id=call_id, result=decision.tool_result
                )
            else:
                after(tool, args, session_key=key, tool_call_id=call_id, result=result, error=error)
            actions.append(decision.action)
        return actions

    def fresh_calls(self) -> list[tuple[Any, ...]]:
        """New copies of every value (strings never encoded yet), as a real tool call has."""
        undefined = self.lw.UNDEFINED
        return [
            tuple(undefined if v is undefined else json.loads(json.dumps(v)) for v in call)
            for call in self.calls
        ]

    def time_corpus(self, profile: str, mode: str, fresh: bool) -> float:
        calls = self.fresh_calls() if fresh else self.calls
        self.use(mode)
        gc.collect()
        start = time.thread_time_ns()
        self.corpus_pass(profile, calls)
        elapsed = time.thread_time_ns() - start
        self.use("fast")
        return elapsed / len(calls)

    def time_figure(self, name: str, mode: str) -> float:
        """One batch of a figure-1 case (``run.py``'s harness: gc paused, a warm eighth)."""
        run, prepare = self.figure_case(name)
        n = self.batch.get(name, 0)
        self.use(mode)
        try:
            if not n:  # calibrate to about 3 ms
                n = 1
                while True:
                    per = self._batch(run, prepare, n)
                    if per * n >= 0.75e6 or n >= 1 << 16:
                        n = max(1, int(3e6 / max(per, 1.0)))
                        break
                    n *= 4
                self.batch[name] = n
            return self._batch(run, prepare, n)
        finally:
            self.use("fast")

    @staticmethod
    def _batch(
        run: Callable[[int], object], prepare: Callable[[int], object] | None, n: int
    ) -> float:
        warm = max(1, n // 8)
        if prepare is not None:
            prepare(warm + n)
        gc.collect()
        gc.disable()
        try:
            run(warm)
            start = time.thread_time_ns()
            run(n)
            elapsed = time.thread_time_ns() - start
        finally:
            gc.enable()
        return elapsed / n

    def figure_case(
        self, name: str
    ) -> tuple[Callable[[int], object], Callable[[int], object] | None]:
        """``small`` / ``small-fresh`` / ``large-fresh``, as ``pair-…`` or ``floor-…``."""
        if name not in self.figure:
            import run as suite  # benchmarks/run.py: figure 1's values and floor

            kind, _, shape = name.partition("-")
            size = 100 if shape.startswith("small") else 50_000
            text = suite.corpus_text(suite.load_corpus(DEFAULT_CORPUS))
            values: Any = [suite.text_values(text, size, v) for v in range(suite.VARIANTS)]
            prepare = None
            if shape.endswith("fresh"):
                values = suite.FreshValues(values)
                prepare = values.prepare
            runner = self._pair(values) if kind == "pair" else suite.floor_runner(values)
            self.figure[name] = (runner, prepare)
        return self.figure[name]

    def _pair(self, values: Sequence[tuple[Any, Any]]) -> Callable[[int], object]:
        """``run.py``'s healthy steady state: 8 distinct calls cycled in one session."""
        guard = self.guard("reference")
        ids = [f"call_{i}" for i in range(997)]
        state = {"i": 0}
        before, after = guard.before_call, guard.after_call

        def run(n: int) -> None:
            i = state["i"]
            for _ in range(n):
                args, result = values[i % len(values)]
                call_id = ids[i % 997]
                before("read", args, session_key="bench", tool_call_id=call_id)
                after("read", args, session_key="bench", tool_call_id=call_id, result=result)
                i += 1
            state["i"] = i

        run(60)
        return run


def worker_main(opts: argparse.Namespace) -> int:
    side = LoopwatchSide(opts.corpus, opts.calls)
    for line in sys.stdin:
        words = line.split()
        if not words:
            continue
        if words[0] == "quit":
            break
        try:
            reply = answer(side, words)
        except Exception as exc:  # e.g. run.py's helpers gone from a restructured tree
            reply = {"error": f"{type(exc).__name__}: {exc}"}
        sys.stdout.write(json.dumps(reply) + "\n")
        sys.stdout.flush()
    return 0


def answer(side: LoopwatchSide, words: Sequence[str]) -> dict[str, Any]:
    """One command of the orchestrator (see :class:`Case`)."""
    if words[0] == "where":
        return {"file": side.lw.__file__}
    if words[0] == "check":  # check PROFILE
        return {"actions": side.corpus_pass(words[1], side.calls)}
    if words[0] == "corpus":  # corpus PROFILE MODE reused|fresh
        return {"cpu_ns": side.time_corpus(words[1], words[2], words[3] == "fresh")}
    return {"cpu_ns": side.time_figure(words[1], words[2])}  # figure NAME MODE


# --- the rounds ------------------------------------------------------------------------------


class CaseError(RuntimeError):
    """A worker could not perform a case (its tree lacks something the case needs)."""


@dataclass
class Case:
    """One timed thing: a command sent to a worker; ``samples`` are ns per call, per round."""

    label: str
    worker: Worker
    command: str
    per_call: bool = False  # the node driver replies with a pass's total, not per call
    samples: list[float] = field(default_factory=list)

    def once(self) -> float:
        reply = self.worker.ask(self.command)
        if "error" in reply:
            raise CaseError(f"{self.worker.label}: {self.command}: {reply['error']}")
        ns = float(reply["cpu_ns"])
        return ns / float(reply["n"]) if self.per_call else ns

    @property
    def us(self) -> float:
        return statistics.median(self.samples) / 1000


def rounds(cases: Sequence[Case], count: int, warmup: int = 3) -> None:
    """Every round times each case once, in an order rotated by one each round."""
    for case in cases:
        for _ in range(warmup):
            case.once()
    for r in range(count):
        shift = r % len(cases)
        for case in [*cases[shift:], *cases[:shift]]:
            case.samples.append(case.once())


def ratio(a: Case, b: Case) -> float:
    return statistics.median(x / y for x, y in zip(a.samples, b.samples, strict=True))


def spread(a: Case, b: Case) -> str:
    """The interquartile range of the per-round ratios: how much to trust the median."""
    rs = sorted(x / y for x, y in zip(a.samples, b.samples, strict=True))
    q = statistics.quantiles(rs, n=4) if len(rs) > 1 else [rs[0]] * 3
    return f"{q[0]:.2f}-{q[2]:.2f}"


def table(header: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def mark(value: float, target: float) -> str:
    return f"<= {target:g}x {'ok' if value <= target else 'MISSED'}"


#: Run in a fresh interpreter: the CPU time of ``import loopwatch`` alone (``-X importtime``
#: reports wall time, which a loaded machine inflates).
IMPORT_CPU = (
    "import time; t = time.process_time_ns(); import loopwatch; print(time.process_time_ns() - t)"
)


def import_time(src: Path) -> tuple[float, float]:
    """µs of ``import loopwatch``: the cumulative time of the top-level module in
    ``python -X importtime`` (wall), and the CPU time of the import in another run."""
    env = {**os.environ, "PYTHONPATH": str(src)}
    with tempfile.TemporaryDirectory() as cwd:

        def python(*args: str) -> subprocess.CompletedProcess[str]:
            cmd = [sys.executable, *args]
            return subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True, check=True)

        wall = python("-X", "importtime", "-c", "import loopwatch")
        cpu = python("-c", IMPORT_CPU)
    for line in wall.stderr.splitlines():
        parts = line.split("|")
        if len(parts) == 3 and parts[2].rstrip() == " loopwatch":
            return float(parts[1]), int(cpu.stdout) / 1000
    raise RuntimeError(f"no top-level loopwatch line in the import times of {src}")


@contextlib.contextmanager
def baseline_tree(rev: str) -> Iterator[Path]:
    """``git archive REV src`` unpacked in a temporary folder; yields its ``src``."""
    with tempfile.TemporaryDirectory(prefix="loopwatch-baseline-") as tmp:
        archive = subprocess.run(
            ["git", "archive", rev, "src"], cwd=ROOT, capture_output=True, check=True
        ).stdout
        subprocess.run(["tar", "-x", "-C", tmp], input=archive, check=True)
        yield Path(tmp) / "src"


def python_worker(label: str, src: Path, opts: argparse.Namespace) -> Worker:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(src), str(HERE)])}
    cmd = [sys.executable, str(Path(__file__).resolve()), "--worker"]
    cmd += ["--corpus", str(opts.corpus), "--calls", str(opts.calls)]
    return Worker(label, cmd, env)


def fx(x: float) -> str:
    return f"{x:.2f}x"


def main_run(opts: argparse.Namespace) -> int:
    count = opts.rounds or (11 if opts.quick else 33)
    sides = [("now", ROOT / "src")]
    out: list[str] = []
    with contextlib.ExitStack() as stack:
        if opts.baseline:
            sides.append(("before", stack.enter_context(baseline_tree(opts.baseline))))
        workers = {label: python_worker(label, src, opts) for label, src in sides}
        for w in workers.values():
            stack.callback(w.close)
        for label, w in workers.items():
            out.append(f"{label}: {w.ask('where')['file']}")
        node: Worker | None = None
        if not opts.skip_node:
            folder = opts.openclaw_dir
            if folder is None:
                folder = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="oc-")))
            exports = locate_exports(install_openclaw(folder))
            spec = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="spec-")))
            spec_file = spec / "spec.json"
            calls = load_calls(opts.corpus, opts.calls)
            spec_file.write_text(json.dumps({"calls": calls, "exports": exports, "config": CONFIG}))
            node_env = {**os.environ, "HOME": str(spec)}  # any state OpenClaw writes goes there
            # OpenClaw's logger prints its loop warnings (two a pass) in colour: to a file
            log = stack.enter_context((spec / "node-stderr.log").open("w"))
            node = Worker("node", ["node", str(DRIVER), str(spec_file)], node_env, log)
            stack.callback(node.close)
            version = subprocess.run(["node", "--version"], capture_output=True, text=True)
            out.append(f"node {version.stdout.strip()}, {OPENCLAW}: " + ", ".join(exports))
            expected = node.ask("check")["actions"]
            for label, w in workers.items():
                got = w.ask("check reference")["actions"]
                same = sum(a == b for a, b in zip(got, expected, strict=True))
                out.append(f"actions of {label} equal node's on {same} of {len(expected)} calls")
        out.append(f"{opts.calls} calls, {count} rounds, {time.strftime('%Y-%m-%d %H:%M UTC')}")
        out += ["", *corpus_table(workers, node, count), ""]
        out += [*figure_table(workers, count), ""]
        issue = stack.enter_context(baseline_tree(ISSUE_TREE))
        import_sides = [*sides, (f"issue 12 ({ISSUE_TREE})", issue)]
        out += [*import_table(import_sides, opts.import_runs or (7 if opts.quick else 21)), ""]
    print("\n".join(out))
    return 0


def corpus_table(workers: dict[str, Worker], node: Worker | None, count: int) -> list[str]:
    rows = []
    for values in ("reused", "fresh"):
        cases: list[Case] = []
        base = None
        if node is not None:
            base = Case("node", node, "run" if values == "reused" else "run fresh", True)
            cases.append(base)
        py: dict[tuple[str, str, str], Case] = {}
        for label, w in workers.items():
            for profile, mode in (
                ("reference", "fast"),
                ("reference", "pure"),
                ("adaptive", "fast"),
            ):
                name = f"{label} {profile} {mode}"
                py[(label, profile, mode)] = Case(name, w, f"corpus {profile} {mode} {values}")
        cases += py.values()
        rounds(cases, count)
        for (label, profile, mode), case in py.items():
            row: list[object] = [values, f"{label}: {profile}, {mode}", f"{case.us:.1f}"]
            if base is not None:
                r = ratio(case, base)
                row += [fx(r), spread(case, base)]
                row.append(
                    mark(r, 1.0) if (label, profile, mode) == ("now", "reference", "fast") else ""
                )
            else:
                row += ["-", "-", ""]
            ref = py[(label, "reference", mode if profile == "reference" else "fast")]
            row.append(fx(ratio(case, ref)) if profile == "adaptive" else "")
            if "before" in workers:
                before = py[("before", profile, mode)]
                row.append(fx(ratio(case, before)) if label == "now" else "")
            rows.append(row)
        if base is not None:
            rows.append(
                [
                    values,
                    "node (OpenClaw)",
                    f"{base.us:.1f}",
                    "1.00x",
                    "",
                    "",
                    "",
                    *([""] if "before" in workers else []),
                ]
            )
    header = ["values", "side", "µs a call", "x node", "IQR", "target", "adaptive / reference"]
    if "before" in workers:
        header.append("now / before")
    return ["### Per call, corpus", "", table(header, rows)]


def figure_table(workers: dict[str, Worker], count: int) -> list[str]:
    now = workers["now"]
    rows: list[list[object]] = []
    for shape, target in (("small", 4.0), ("small-fresh", 4.0), ("large-fresh", 1.25)):
        floor = Case("floor", now, f"figure floor-{shape} fast")
        pairs = {label: Case(label, w, f"figure pair-{shape} fast") for label, w in workers.items()}
        try:
            rounds([floor, *pairs.values()], count, warmup=1)
        except CaseError as exc:
            rows.append([shape, f"n/a: {exc}", "", "", ""])
            continue
        r = ratio(pairs["now"], floor)
        row: list[object] = [
            shape,
            f"{floor.us:.2f}",
            f"{pairs['now'].us:.1f}",
            fx(r),
            mark(r, target),
        ]
        if "before" in pairs:
            row += [fx(ratio(pairs["before"], floor)), fx(ratio(pairs["now"], pairs["before"]))]
        rows.append(row)
    header = ["values", "floor µs", "pair µs (fast)", "x floor", "target"]
    if "before" in workers:
        header += ["before x floor", "now / before"]
    rows = [r + [""] * (len(header) - len(r)) for r in rows]
    return ["### Pair vs floor (run.py figure 1 values)", "", table(header, rows)]


#: The tree issue 12 measured ``import loopwatch`` on (before its restructuring): the
#: import target (<= 0.4x of it) is a ratio to this tree, timed in the same run.
ISSUE_TREE: Final = "5f56b93"


def import_table(sides: Sequence[tuple[str, Path]], runs: int) -> list[str]:
    """``import loopwatch`` of each tree, alternated; the target is judged against the
    issue's own tree (:data:`ISSUE_TREE`), a ``--baseline`` tree gets a plain ratio."""
    times: dict[str, list[tuple[float, float]]] = {label: [] for label, _ in sides}
    for _ in range(2):  # the first imports write the bytecode caches: untimed
        for _label, src in sides:
            import_time(src)
    for r in range(runs):
        order = sides if r % 2 == 0 else list(reversed(sides))
        for label, src in order:
            times[label].append(import_time(src))
    med = {
        label: tuple(statistics.median(t[i] for t in times[label]) for i in (0, 1))
        for label, _ in sides
    }
    rows: list[list[object]] = []
    for label, _ in sides:
        wall, cpu = med[label]
        row: list[object] = [label, f"{wall / 1000:.1f}", f"{cpu / 1000:.1f}"]
        if label != "now":
            for i in (0, 1):
                share = med["now"][i] / med[label][i]
                target = f" ({mark(share, 0.4)})" if label.startswith("issue 12") else ""
                row.append(f"{fx(share)}{target}")
        rows.append(row + [""] * (5 - len(row)))
    title = f"### `import loopwatch` (median of {runs} alternated runs)"
    header = ["tree", "-X importtime ms (wall)", "CPU ms", "now / tree (wall)", "(CPU)"]
    return [title, "", table(header, rows)]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--quick", action="store_true", help="11 rounds, 7 import runs")
    parser.add_argument("--rounds", type=int, default=0)
    parser.add_argument("--import-runs", type=int, default=0)
    parser.add_argument("--calls", type=int, default=1500)
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS)
    parser.add_argument("--baseline", metavar="REV", help="also time this git revision")
    parser.add_argument("--openclaw-dir", type=Path, help="install (or reuse) openclaw here")
    parser.add_argument("--skip-node", action="store_true", help="loopwatch only")
    opts = parser.parse_args()
    if opts.worker:
        return worker_main(opts)
    if not opts.skip_node and shutil.which("node") is None:
        sys.exit("node is not on PATH (or pass --skip-node)")
    return main_run(opts)


if __name__ == "__main__":
    sys.exit(main())
