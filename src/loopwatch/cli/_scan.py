"""``loopwatch scan``: replay transcripts and report where loops would have been caught.

The pieces are small and pure where they can be: :func:`load_setup` turns the flags into
replay settings, :func:`scan` reads and replays, and the renderers turn a
:class:`ScanResult` into text or JSON. Only :func:`run_scan` touches streams and files.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal, cast

from loopwatch.adaptive import AdaptiveConfig
from loopwatch.config import (
    Profile,
    ResolvedConfig,
    load_config_file,
    merge_agent_config,
)
from loopwatch.replay import DEFAULT_SCAN_BLOCK, ReplaySettings, RunReplay, replay_run
from loopwatch.transcripts import FormatName, TranscriptError, read_transcript

from ._progress import Progress
from ._text import elide, run_label, safe_text, table

FailOn = Literal["warn", "block"]

EXIT_OK: Final = 0
EXIT_FINDINGS: Final = 1
EXIT_USAGE: Final = 2
EXIT_SKIPPED: Final = 3


class UsageError(Exception):
    """A flag combination that makes no sense; reported with exit code 2."""


@dataclass(frozen=True)
class ScanSetup:
    """The config a scan replays under, and how to describe it to the user.

    Attributes:
        settings: what every run's guard is built from.
        config_path: the ``--config`` file, or ``None`` for the defaults.
        agent_id: the ``--agent``, if any.
        block: the merged ``tools.loopDetection`` block that applies (for display).
        resolved: that block resolved as the detectors read it (in the adaptive profile,
            ``enabled`` unset counts as on).
        profile: the profile every run is replayed under.
        adaptive: the adaptive profile's settings (``None`` in the reference profile).
    """

    settings: ReplaySettings
    config_path: str | None
    agent_id: str | None
    block: Mapping[str, Any] | None
    resolved: ResolvedConfig
    profile: Profile = "reference"
    adaptive: AdaptiveConfig | None = None


def load_setup(config_path: str | None, agent_id: str | None, profile: Profile | None) -> ScanSetup:
    """Build the scan's settings from the flags, validating everything up front.

    Without a config the scan runs the reference defaults with ``enabled: true``: the
    library default leaves detection off, and a scan that can find nothing helps nobody.

    Raises:
        UsageError: ``--agent`` without ``--config``.
        ConfigError: the config file is unreadable or invalid.
        NotImplementedError: a profile this release does not have.
    """
    if config_path is None:
        if agent_id is not None:
            raise UsageError("--agent needs --config (the defaults have no agents)")
        settings = ReplaySettings(profile=profile)
        block: Mapping[str, Any] | None = dict(DEFAULT_SCAN_BLOCK)
    else:
        config = load_config_file(config_path)
        settings = ReplaySettings(
            config=None, openclaw_config=config, agent_id=agent_id, profile=profile
        )
        block = merge_agent_config(config, agent_id)
    guard = settings.new_guard()  # fail now, not once per run
    _block, resolved = guard.block_for(agent_id)
    return ScanSetup(
        settings,
        config_path,
        agent_id,
        block,
        resolved,
        cast(Profile, guard.profile),
        guard.adaptive,
    )


def describe_thresholds(resolved: ResolvedConfig) -> str:
    """One line with the effective thresholds, and any detector that is off."""
    text = (
        f"warning {resolved.warning_threshold}, critical {resolved.critical_threshold}, "
        f"global breaker {resolved.global_circuit_breaker_threshold}, "
        f"unknown tool {resolved.unknown_tool_threshold}, history {resolved.history_size}, "
        f"compaction window {resolved.guard_window_size}"
    )
    off = [
        name
        for name, on in (
            ("genericRepeat", resolved.generic_repeat),
            ("knownPollNoProgress", resolved.known_poll_no_progress),
            ("pingPong", resolved.ping_pong),
        )
        if not on
    ]
    return text + (f"; detectors off: {', '.join(off)}" if off else "")


def describe_setup(setup: ScanSetup) -> list[str]:
    """The header lines that say what the scan replayed under."""
    if setup.config_path is None:
        lines = [
            "config: default thresholds with enabled: true (no --config given; the library "
            "default, enabled: false, would find nothing)"
        ]
    else:
        agent = f" (agent {setup.agent_id})" if setup.agent_id else ""
        lines = [f"config: {safe_text(setup.config_path)}{agent}"]
        if setup.block is not None and setup.block.get("enabled") is False:
            lines.append("note: enabled is false: detection and the post-compaction guard are off")
        elif not setup.resolved.enabled:
            lines.append(
                "note: enabled is not set to true: detection is off, only the "
                "post-compaction guard can act"
            )
    lines.append("thresholds: " + describe_thresholds(setup.resolved))
    if setup.profile == "adaptive":
        lines.append(
            "profile: adaptive (the reference detectors plus repeated failure, same error, "
            "identical streak and cycle detectors)"
        )
    return lines


@dataclass(frozen=True)
class FileReport:
    """One scanned transcript and the replays of its runs."""

    path: str
    format: FormatName
    replays: tuple[RunReplay, ...]


@dataclass(frozen=True)
class ScanResult:
    """Everything a scan found."""

    setup: ScanSetup
    files: tuple[FileReport, ...]
    skipped: tuple[TranscriptError, ...]

    @property
    def replays(self) -> tuple[tuple[str, RunReplay], ...]:
        """Every replayed run with its file path, in scan order."""
        return tuple((report.path, replay) for report in self.files for replay in report.replays)

    def findings(self, fail_on: FailOn) -> bool:
        """Whether any run reached ``fail_on`` (a warning, or a block/abort)."""
        for _path, replay in self.replays:
            if replay.blocked or replay.aborted:
                return True
            if fail_on == "warn" and replay.warned:
                return True
        return False


def scan(
    files: Sequence[str],
    setup: ScanSetup,
    *,
    format: FormatName | None = None,
    progress: Progress | None = None,
) -> tuple[tuple[FileReport, ...], tuple[TranscriptError, ...]]:
    """Read and replay every file; a file that cannot be read is skipped, not fatal.

    Args:
        files: transcript paths.
        setup: the replay settings.
        format: force one transcript format.
        progress: advanced once per file.

    Returns:
        ``(reports, skipped)``.
    """
    reports: list[FileReport] = []
    skipped: list[TranscriptError] = []
    for path in files:
        try:
            transcript = read_transcript(path, format=format)
        except TranscriptError as exc:
            skipped.append(exc)
        else:
            replays = tuple(
                replay_run(run, setup.settings, session_key=f"{path}#{run.label}")
                for run in transcript.runs
            )
            reports.append(FileReport(path, transcript.format, replays))
        if progress is not None:
            progress.advance()
    return tuple(reports), tuple(skipped)


# --- text --------------------------------------------------------------------------------


def _stop_cell(replay: RunReplay) -> str:
    stop = replay.first_stop
    return f"#{stop.index} {stop.action}" if stop else "-"


def _row(path: str, replay: RunReplay, with_tokens: bool) -> list[str]:
    warning = replay.first_warning
    row = [
        elide(run_label(path, replay.run.label)),
        str(replay.calls),
        f"#{warning.index}" if warning else "-",
        _stop_cell(replay),
        replay.detector or "-",
        str(replay.wasted_calls),
    ]
    if with_tokens:
        tokens = replay.wasted_tokens
        row.append("-" if tokens is None else str(tokens))
    return row


def _flagged(replay: RunReplay) -> bool:
    return replay.warned or replay.blocked or replay.aborted


def totals(result: ScanResult) -> dict[str, int | None]:
    """The scan's totals (also the ``totals`` object of ``--json``)."""
    replays = [replay for _path, replay in result.replays]
    token_counts = [r.wasted_tokens for r in replays if r.wasted_tokens is not None]
    return {
        "files": len(result.files),
        "skipped_files": len(result.skipped),
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


def _skipped_lines(skipped: Sequence[TranscriptError]) -> list[str]:
    if not skipped:
        return []
    lines = [f"skipped: {len(skipped)} file{'s' if len(skipped) != 1 else ''}"]
    lines += [f"  {safe_text(exc.location)}: {safe_text(exc.reason)}" for exc in skipped]
    return lines


def render_table(result: ScanResult, *, flagged_only: bool = False) -> str:
    """The terminal report: a header, one row per run, totals, skipped files.

    Args:
        result: the scan.
        flagged_only: list only runs that warned, blocked or aborted.

    Returns:
        The text, ending with a newline.
    """
    t = totals(result)
    lines = [
        f"loopwatch scan: {t['files']} files, {t['runs']} runs, {t['calls']} calls",
        *describe_setup(result.setup),
        "",
    ]
    replays = result.replays
    with_tokens = any(replay.wasted_tokens is not None for _p, replay in replays)
    shown = [(p, r) for p, r in replays if _flagged(r)] if flagged_only else list(replays)
    header = ["run", "calls", "first warn", "first block/abort", "detector", "wasted"]
    if with_tokens:
        header.append("wasted tokens")
    if shown:
        rows = [_row(path, replay, with_tokens) for path, replay in shown]
        right = frozenset({1, 5, 6})
        lines.append(table(header, rows, right=right))
    else:
        lines.append("(no runs warned, blocked or aborted)" if flagged_only else "(no runs)")
    hidden = len(replays) - len(shown)
    if hidden:
        lines.append(f"({hidden} runs without findings not shown)")
    lines += ["", _totals_line(result), *_skipped_lines(result.skipped)]
    return "\n".join(lines) + "\n"


# --- JSON --------------------------------------------------------------------------------


def replay_json(path: str, format: str, replay: RunReplay) -> dict[str, Any]:
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
        "decisions": [dataclasses.asdict(decision) for decision in replay.decisions],
    }


def setup_json(setup: ScanSetup) -> dict[str, Any]:
    """The config part of ``--json``."""
    return {
        "source": setup.config_path or "defaults",
        "agent": setup.agent_id,
        "block": dict(setup.block) if setup.block is not None else None,
        "resolved": dataclasses.asdict(setup.resolved),
    }


def skipped_json(skipped: Sequence[TranscriptError]) -> list[dict[str, Any]]:
    """Skipped files as ``--json`` reports them."""
    return [{"path": exc.path, "line": exc.line, "reason": exc.reason} for exc in skipped]


def render_json(result: ScanResult, version: str) -> str:
    """The machine report: config, totals, one object per run, skipped files."""
    document = {
        "loopwatch": version,
        "config": setup_json(result.setup),
        "totals": totals(result),
        "runs": [
            replay_json(report.path, report.format, replay)
            for report in result.files
            for replay in report.replays
        ],
        "skipped": skipped_json(result.skipped),
    }
    return json.dumps(document, indent=2, ensure_ascii=False) + "\n"


__all__ = [
    "EXIT_FINDINGS",
    "EXIT_OK",
    "EXIT_SKIPPED",
    "EXIT_USAGE",
    "FailOn",
    "FileReport",
    "ScanResult",
    "ScanSetup",
    "UsageError",
    "describe_setup",
    "describe_thresholds",
    "load_setup",
    "render_json",
    "render_table",
    "replay_json",
    "scan",
    "setup_json",
    "skipped_json",
    "totals",
]
