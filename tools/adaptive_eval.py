"""Replay the corpus through the adaptive detectors and score them against the hand labels.

Usage::

    python tools/adaptive_eval.py                      # defaults, every run, then a summary
    python tools/adaptive_eval.py --only-flagged       # runs that are loops or got a verdict
    python tools/adaptive_eval.py --config my.json5    # a loopwatch.adaptive block (or a whole
                                                       # config with one) instead of defaults

The driver plays a host's part in the simplest way: per run, calls in order; before each call
it asks :func:`loopwatch.detectors.adaptive.evaluate_adaptive` about it with the records of
the earlier calls, then builds the call's record from its recorded params/result/error and
appends it. The first warning and the first block of each run are reported (0-based call
indices, the JSONL line number minus one). Everything after the first block is
counterfactual (the agent would have seen the block message), so the replay of a run stops there.

The reference profile (SPEC §4, defaults with ``enabled: true``) is replayed on the same runs
through the real ``LoopGuard`` (``loopwatch.replay``), for comparison; the full adaptive
profile runs both, so its first block is the earlier of the two.

Labels come from ``docs/adaptive-labels.md`` (the "All runs" table): for a loop, "calls into
the loop before the block" is ``block index - loop start``, i.e. how many calls of the loop
ran before loopwatch stopped the next one.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import json5

from loopwatch.core.fingerprint import hash_tool_call
from loopwatch.core.naming import normalize_tool_name
from loopwatch.detectors.adaptive import (
    AdaptiveConfig,
    AdaptiveRecord,
    AdaptiveVerdict,
    build_adaptive_record,
    evaluate_adaptive,
)
from loopwatch.replay import ReplaySettings, replay_run
from loopwatch.transcripts import Run, read_transcript

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_CORPUS = ROOT.parent / "shared" / "corpus" / "traj"
DEFAULT_LABELS = ROOT / "docs" / "adaptive-labels.md"


@dataclass(frozen=True)
class Label:
    loop: bool
    start: int | None


@dataclass(frozen=True)
class Outcome:
    name: str
    calls: int
    first_warning: tuple[int, AdaptiveVerdict] | None
    first_block: tuple[int, AdaptiveVerdict] | None
    reference_block: int | None
    reference_warning: int | None
    thinking: tuple[bool, ...]

    @property
    def profile_block(self) -> int | None:
        """The first block of the full adaptive profile (reference detectors included)."""
        blocks = [i for i in (self.reference_block, self.block_index) if i is not None]
        return min(blocks) if blocks else None

    @property
    def block_index(self) -> int | None:
        return self.first_block[0] if self.first_block else None


def read_labels(path: Path) -> dict[str, Label]:
    """The "All runs" table of the labels document: run → (loop?, start)."""
    labels: dict[str, Label] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) < 6 or not cells[0].startswith("`") or cells[2] not in ("loop", "healthy"):
            continue
        start = int(cells[3]) if cells[3] else None
        labels[cells[0].strip("`")] = Label(cells[2] == "loop", start)
    return labels


def load_config(path: str | None) -> AdaptiveConfig:
    if path is None:
        return AdaptiveConfig()
    data: Any = json5.loads(Path(path).read_text(encoding="utf-8"))
    if isinstance(data, dict) and isinstance(data.get("loopwatch"), dict):
        return AdaptiveConfig.from_mapping(data["loopwatch"].get("adaptive"))
    return AdaptiveConfig.from_mapping(data)


def replay_adaptive(name: str, run: Run, config: AdaptiveConfig) -> Outcome:
    records: list[AdaptiveRecord] = []
    first_warning: tuple[int, AdaptiveVerdict] | None = None
    first_block: tuple[int, AdaptiveVerdict] | None = None
    thinking: list[bool] = []
    for index, call in enumerate(run.calls):
        tool = normalize_tool_name(call.tool)
        thinking.append(tool in config.all_thinking_tools)
        if first_block is not None:
            continue
        try:
            args_hash = hash_tool_call(tool, call.args)
        except (TypeError, ValueError):
            continue  # unhashable params: a host fails open and records nothing
        verdict = evaluate_adaptive(records, tool, args_hash, config)
        if verdict is not None and verdict.level == "critical":
            first_block = (index, verdict)
            continue
        if verdict is not None and first_warning is None:
            first_warning = (index, verdict)
        try:
            record = build_adaptive_record(
                tool, call.args, result=call.result, error=call.error, config=config
            )
        except (TypeError, ValueError):
            continue
        records.append(record)
    replayed = replay_run(run, ReplaySettings())
    reference = replayed.first_stop
    reference_warning = replayed.first_warning
    return Outcome(
        name=name,
        calls=len(run.calls),
        first_warning=first_warning,
        first_block=first_block,
        reference_block=reference.index - 1 if reference is not None else None,
        reference_warning=reference_warning.index - 1 if reference_warning is not None else None,
        thinking=tuple(thinking),
    )


def corpus_runs(corpus: Path) -> list[tuple[str, Run]]:
    runs: list[tuple[str, Run]] = []
    for path in sorted(corpus.glob("*.jsonl")):
        transcript = read_transcript(path)
        for run in transcript.runs:
            name = path.stem + (f"#{run.label}" if run.label else "")
            runs.append((name, run))
    return runs


def _cell(found: tuple[int, AdaptiveVerdict] | None) -> str:
    if found is None:
        return "-"
    index, verdict = found
    return f"{index} {verdict.detector}({verdict.count})"


def _median(values: Sequence[int]) -> str:
    return f"{statistics.median(values):g}" if values else "n/a"


def _into(block: int | None, start: int | None) -> int | None:
    if block is None or start is None:
        return None
    return max(0, block - start)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS)
    parser.add_argument("--labels", type=Path, default=DEFAULT_LABELS)
    parser.add_argument("--config", help="JSON5: an adaptive block, or a whole config")
    parser.add_argument("--only-flagged", action="store_true", help="hide quiet healthy runs")
    args = parser.parse_args(argv)

    if not args.corpus.is_dir() or not any(args.corpus.glob("*.jsonl")):
        sys.stderr.write(
            f"adaptive_eval: no corpus at {args.corpus} (expected a directory of *.jsonl "
            "transcripts, ../shared/corpus/traj beside the worktree); pass --corpus DIR\n"
        )
        return 2
    config = load_config(args.config)
    labels = read_labels(args.labels) if args.labels.exists() else {}
    outcomes = [replay_adaptive(name, run, config) for name, run in corpus_runs(args.corpus)]

    print(f"{'run':<66} {'calls':>5}  {'label':<9} {'first warning':<24} {'first block':<24} ref")
    for out in outcomes:
        label = labels.get(out.name)
        tag = "?" if label is None else (f"loop@{label.start}" if label.loop else "healthy")
        quiet = out.first_warning is None and out.first_block is None
        if args.only_flagged and quiet and not (label and label.loop):
            continue
        ref = "-" if out.reference_block is None else str(out.reference_block)
        print(
            f"{out.name[:66]:<66} {out.calls:>5}  {tag:<9} {_cell(out.first_warning):<24} "
            f"{_cell(out.first_block):<24} {ref}"
        )

    loops = [(o, labels[o.name]) for o in outcomes if o.name in labels and labels[o.name].loop]
    healthy = [o for o in outcomes if o.name in labels and not labels[o.name].loop]
    unlabelled = [o.name for o in outcomes if o.name not in labels]

    def stopped(block_of: Callable[[Outcome], int | None]) -> tuple[int, list[int], list[int]]:
        count = 0
        into: list[int] = []
        into_acting: list[int] = []
        for out, label in loops:
            block = block_of(out)
            if block is None or label.start is None:
                continue
            count += 1
            into.append(block - label.start)
            into_acting.append(sum(1 for t in out.thinking[label.start : block] if not t))
        return count, into, into_acting

    print()
    print(f"runs: {len(outcomes)}; labelled loops: {len(loops)}; labelled healthy: {len(healthy)}")
    if unlabelled:
        print(f"unlabelled: {len(unlabelled)}: {', '.join(unlabelled)}")
    profiles: list[tuple[str, Callable[[Outcome], int | None]]] = [
        ("adaptive detectors alone", lambda o: o.block_index),
        ("adaptive profile (reference + adaptive)", lambda o: o.profile_block),
        ("reference profile (defaults, enabled: true)", lambda o: o.reference_block),
    ]
    for title, block_of in profiles:
        count, into, into_acting = stopped(block_of)
        blocked_healthy = [o.name for o in healthy if block_of(o) is not None]
        print(f"\n{title}:")
        print(f"  loops stopped: {count}/{len(loops)}")
        print(
            f"  calls into the loop before the block: median {_median(into)}"
            f" (all: {sorted(into)}); non-thinking calls: median {_median(into_acting)}"
        )
        print(f"  healthy runs blocked: {len(blocked_healthy)}/{len(healthy)}")
        for name in blocked_healthy:
            print(f"    {name}")
    warned = [o.name for o in healthy if o.first_warning is not None and o.first_block is None]
    print(f"\nhealthy runs with an adaptive warning (no block): {len(warned)}")
    for name in warned:
        print(f"    {name}")
    profile_warned = [
        o.name
        for o in healthy
        if o.profile_block is None
        and (o.first_warning is not None or o.reference_warning is not None)
    ]
    print(
        f"healthy runs warned under the adaptive profile (reference + adaptive, no block): "
        f"{len(profile_warned)}"
    )
    for name in profile_warned:
        print(f"    {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:] if len(sys.argv) > 1 else None))
