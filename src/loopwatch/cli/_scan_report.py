"""The renderers of ``loopwatch scan``: the terminal table and the ``--json`` document.

Pure functions of a :class:`~loopwatch.cli._scan.ScanResult`: one row per file (its runs
summarised) or, with ``per_run``, one per run; the per-file notes that keep a scan from
being a silent all-clear; the header counts.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from typing import Any

from loopwatch.replay import RunReplay
from loopwatch.transcripts import TranscriptError

from ._scan import FileReport, ScanResult, ScanSetup, describe_setup
from ._text import elide, run_label, safe_text, table

# --- text --------------------------------------------------------------------------------


def _stop_cell(replay: RunReplay, where: str = "") -> str:
    stop = replay.first_stop
    return f"{where}#{stop.index} {stop.action}" if stop else "-"


def _flagged(replay: RunReplay) -> bool:
    return replay.warned or replay.blocked or replay.aborted


def _tokens_cell(replays: Sequence[RunReplay]) -> str:
    counts = [r.wasted_tokens for r in replays if r.wasted_tokens is not None]
    return str(sum(counts)) if counts else "-"


def _note_cell(report: FileReport) -> str:
    if report.calls == 0:
        return "no calls"
    if report.unmatched_results:
        return f"{report.unmatched_results} unmatched"
    if report.skipped_calls:
        return f"{report.skipped_calls} skipped"
    return "-"


def _run_row(report: FileReport, replay: RunReplay, with_tokens: bool) -> list[str]:
    warning = replay.first_warning
    row = [
        elide(run_label(report.path, replay.run.label)),
        report.format,
        str(replay.calls),
        f"#{warning.index}" if warning else "-",
        _stop_cell(replay),
        safe_text(replay.detector or "-"),
        str(replay.wasted_calls),
    ]
    if with_tokens:
        row.append(_tokens_cell([replay]))
    row.append(_note_cell(report))
    return row


def _file_row(report: FileReport, with_tokens: bool) -> list[str]:
    """One row for a whole file: its runs summarised (the first finding, the sums)."""
    replays = report.replays
    several = len(replays) > 1
    warned = next((r for r in replays if r.first_warning), None)
    stopped = next((r for r in replays if r.first_stop), None)
    decisive = stopped or warned

    def where(replay: RunReplay) -> str:
        return safe_text(replay.run.label) if several else ""

    warn_cell = "-"
    if warned is not None and warned.first_warning is not None:
        warn_cell = f"{where(warned)}#{warned.first_warning.index}"
    row = [
        elide(run_label(report.path, "")),
        report.format,
        str(len(replays)),
        str(report.calls),
        warn_cell,
        _stop_cell(stopped, where(stopped)) if stopped else "-",
        safe_text(decisive.detector or "-") if decisive else "-",
        str(sum(r.wasted_calls for r in replays)),
    ]
    if with_tokens:
        row.append(_tokens_cell(replays))
    row.append(_note_cell(report))
    return row


def totals(result: ScanResult) -> dict[str, int | None]:
    """The scan's totals (also the ``totals`` object of ``--json``)."""
    replays = [replay for _path, replay in result.replays]
    token_counts = [r.wasted_tokens for r in replays if r.wasted_tokens is not None]
    return {
        "files": len(result.files) + len(result.skipped),
        "files_read": len(result.files),
        "skipped_files": len(result.skipped),
        "ignored_files": len(result.ignored),
        "files_not_understood": len(result.doubtful),
        "runs": len(replays),
        "calls": sum(r.calls for r in replays),
        "runs_warned": sum(1 for r in replays if r.warned),
        "runs_blocked": sum(1 for r in replays if r.blocked),
        "runs_aborted": sum(1 for r in replays if r.aborted),
        "calls_warned": sum(r.calls_warned for r in replays),
        "calls_blocked": sum(r.calls_blocked for r in replays),
        "wasted_calls": sum(r.wasted_calls for r in replays),
        "wasted_tokens": sum(token_counts) if token_counts else None,
    }


def _totals_line(result: ScanResult) -> str:
    t = totals(result)
    calls = t["calls"] or 0
    wasted = t["wasted_calls"] or 0
    share = f" ({100 * wasted / calls:.1f}% of all calls)" if calls else ""
    line = (
        f"totals: {t['runs']} runs, {calls} calls; {t['runs_warned']} warned, "
        f"{t['runs_blocked']} blocked, {t['runs_aborted']} aborted; "
        f"{wasted} calls wasted{share}"
    )
    if t["wasted_tokens"] is not None:
        line += f", {t['wasted_tokens']} tokens"
    return line


def _plural(count: int, word: str) -> str:
    return f"{count} {word}{'' if count == 1 else 's'}"


def _problem_lines(title: str, problems: Sequence[TranscriptError]) -> list[str]:
    if not problems:
        return []
    lines = [f"{title}: {_plural(len(problems), 'file')}"]
    lines += [f"  {safe_text(exc.location)}: {safe_text(exc.reason)}" for exc in problems]
    return lines


def _note_lines(result: ScanResult) -> list[str]:
    lines: list[str] = []
    for report in result.files:
        for note in (*report.doubts, *report.notes):
            lines.append(f"  {safe_text(report.path)}: {safe_text(note)}")
    return ["notes:", *lines] if lines else []


def header_line(result: ScanResult, prefix: str = "loopwatch scan") -> str:
    """``loopwatch scan: 3 files (1 skipped), 5 runs, 254 calls``."""
    t = totals(result)
    extra = []
    if t["skipped_files"]:
        extra.append(f"{t['skipped_files']} skipped")
    if t["ignored_files"]:
        extra.append(f"{t['ignored_files']} ignored")
    files = _plural(t["files"] or 0, "file") + (f" ({', '.join(extra)})" if extra else "")
    return (
        f"{prefix}: {files}, {_plural(t['runs'] or 0, 'run')}, {_plural(t['calls'] or 0, 'call')}"
    )


def render_table(result: ScanResult, *, flagged_only: bool = False, per_run: bool = False) -> str:
    """The terminal report: a header, one row per file (per run with ``per_run``), totals,
    notes, skipped and ignored files.

    Args:
        result: the scan.
        flagged_only: list only files (runs) that warned, blocked or aborted.
        per_run: one row per run instead of one per file.

    Returns:
        The text, ending with a newline.
    """
    lines = [header_line(result), *describe_setup(result.setup), ""]
    with_tokens = any(replay.wasted_tokens is not None for _p, replay in result.replays)
    rows: list[list[str]] = []
    total = 0
    if per_run:
        header = ["run", "format", "calls", "first warn", "first block/abort", "detector", "wasted"]
        right = {2, 6}
        for report in result.files:
            for replay in report.replays:
                total += 1
                if not flagged_only or _flagged(replay):
                    rows.append(_run_row(report, replay, with_tokens))
    else:
        header = [
            "file", "format", "runs", "calls", "first warn", "first block/abort", "detector",
            "wasted",
        ]  # fmt: skip
        right = {2, 3, 7}
        for report in result.files:
            total += 1
            if not flagged_only or any(_flagged(r) for r in report.replays):
                rows.append(_file_row(report, with_tokens))
    if with_tokens:
        right.add(len(header))
        header.append("wasted tokens")
    header.append("note")
    unit = "runs" if per_run else "files"
    if rows:
        lines.append(table(header, rows, right=frozenset(right)))
    else:
        lines.append(f"(no {unit} warned, blocked or aborted)" if flagged_only else f"(no {unit})")
    if total - len(rows):
        lines.append(f"({total - len(rows)} {unit} without findings not shown)")
    lines += ["", _totals_line(result)]
    lines += _note_lines(result)
    lines += _problem_lines("skipped", result.skipped)
    lines += _problem_lines("ignored", result.ignored)
    return "\n".join(lines) + "\n"


# --- JSON --------------------------------------------------------------------------------


def replay_json(
    path: str, format: str, replay: RunReplay, excerpt: str | None = None
) -> dict[str, Any]:
    """One run as ``--json`` reports it, every decision included."""
    warning = replay.first_warning
    stop = replay.first_stop
    return {
        "file": path,
        "format": format,
        "run": replay.run.label,
        "run_id": replay.run.run_id,
        "label": run_label(path, replay.run.label),
        "calls": replay.calls,
        "warned": replay.warned,
        "blocked": replay.blocked,
        "aborted": replay.aborted,
        "first_warning": warning.index if warning else None,
        "first_stop": {"index": stop.index, "action": stop.action} if stop else None,
        "detector": replay.detector,
        "calls_warned": replay.calls_warned,
        "calls_blocked": replay.calls_blocked,
        "wasted_calls": replay.wasted_calls,
        "wasted_tokens": replay.wasted_tokens,
        "excerpt": excerpt,
        "decisions": [dataclasses.asdict(decision) for decision in replay.decisions],
    }


def file_json(report: FileReport) -> dict[str, Any]:
    """One file as ``--json`` reports it (its runs are listed under ``runs``)."""
    return {
        "file": report.path,
        "format": report.format,
        "runs": len(report.replays),
        "calls": report.calls,
        "unmatched_results": report.unmatched_results,
        "skipped_calls": report.skipped_calls,
        "understood": not report.doubts,
        "doubts": list(report.doubts),
        "notes": list(report.notes),
    }


def setup_json(setup: ScanSetup) -> dict[str, Any]:
    """The config part of ``--json``."""
    return {
        "source": setup.config_path or "defaults",
        "agent": setup.agent_id,
        "block": dict(setup.block) if setup.block is not None else None,
        "resolved": dataclasses.asdict(setup.resolved),
        "warnings": [{"path": w.path, "message": w.message} for w in setup.warnings],
    }


def skipped_json(skipped: Sequence[TranscriptError]) -> list[dict[str, Any]]:
    """Skipped (or ignored) files as ``--json`` reports them."""
    return [{"path": exc.path, "line": exc.line, "reason": exc.reason} for exc in skipped]


def render_json(result: ScanResult, version: str, *, excerpts: bool = True) -> str:
    """The machine report: config, totals, files, one object per run, skipped files."""
    document = {
        "loopwatch": version,
        "config": setup_json(result.setup),
        "totals": totals(result),
        "files": [file_json(report) for report in result.files],
        "runs": [
            replay_json(
                report.path,
                report.format,
                replay,
                excerpt if excerpts else None,
            )
            for report in result.files
            for replay, excerpt in zip(
                report.replays, report.excerpts or [None] * len(report.replays), strict=True
            )
        ],
        "skipped": skipped_json(result.skipped),
        "ignored": skipped_json(result.ignored),
    }
    return json.dumps(document, indent=2, ensure_ascii=False) + "\n"


__all__ = [
    "file_json",
    "header_line",
    "render_json",
    "render_table",
    "replay_json",
    "setup_json",
    "skipped_json",
    "totals",
]
