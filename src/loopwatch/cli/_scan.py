"""``loopwatch scan``: replay transcripts and report where loops would have been caught.

The pieces are small and pure where they can be: :func:`load_setup` turns the flags into
replay settings, :func:`scan` reads and replays, and the renderers turn a
:class:`ScanResult` into text or JSON. Only :func:`run_scan` touches streams and files.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal, cast

from loopwatch.config import Profile
from loopwatch.config.files import load_config_file
from loopwatch.config.merge import merge_agent_config
from loopwatch.config.resolve import ResolvedConfig
from loopwatch.core._undefined import UNDEFINED
from loopwatch.detectors.adaptive import AdaptiveConfig
from loopwatch.errors import ConfigIssue
from loopwatch.replay import DEFAULT_SCAN_BLOCK, ReplaySettings, RunReplay, replay_run
from loopwatch.transcripts import (
    Compaction,
    FormatName,
    ReplayCall,
    Run,
    TranscriptError,
    read_transcript,
)
from loopwatch.transcripts._common import content_text
from loopwatch.transcripts.detect import DEFAULT_MAX_FILE_BYTES
from loopwatch.transcripts.model import NotATranscript

from ._progress import Progress
from ._text import safe_text

FailOn = Literal["warn", "block"]

EXIT_OK: Final = 0
EXIT_FINDINGS: Final = 1
EXIT_USAGE: Final = 2
EXIT_SKIPPED: Final = 3
#: A file was read as a transcript but nothing in it can be trusted as an all-clear: it
#: yielded no tool calls, or tool results that match no call.
EXIT_DOUBT: Final = 4


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
        warnings: settings of the config that are valid but not used (adaptive settings
            under the reference profile).
    """

    settings: ReplaySettings
    config_path: str | None
    agent_id: str | None
    block: Mapping[str, Any] | None
    resolved: ResolvedConfig
    profile: Profile = "reference"
    adaptive: AdaptiveConfig | None = None
    warnings: tuple[ConfigIssue, ...] = ()


def load_setup(config_path: str | None, agent_id: str | None, profile: Profile | None) -> ScanSetup:
    """Build the scan's settings from the flags, validating everything up front.

    Without a config the scan runs the reference defaults with ``enabled: true``: the
    library default leaves detection off, and a scan that can find nothing helps nobody.

    Raises:
        UsageError: ``--agent`` without ``--config``.
        ConfigError: the config file is unreadable or invalid.
        ValueError: a profile this release does not have.
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
    # Resolved once here, so a bad config or profile fails now, not once per run; no guard
    # is built: the settings say everything the report shows.
    resolved_settings = settings.guard_settings()
    _block, resolved = resolved_settings.block_for(agent_id)
    return ScanSetup(
        settings,
        config_path,
        agent_id,
        block,
        resolved,
        cast(Profile, resolved_settings.profile),
        resolved_settings.adaptive,
        resolved_settings.warnings,
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
    lines += [f"warning: {safe_text(str(warning))}" for warning in setup.warnings]
    lines.append("thresholds: " + describe_thresholds(setup.resolved))
    if setup.profile == "adaptive":
        lines.append(
            "profile: adaptive (the reference detectors plus repeated failure, same error, "
            "identical streak and cycle detectors)"
        )
    return lines


@dataclass(frozen=True, slots=True)
class ArgsPreview:
    """A call's arguments cut to a short JSON preview: what a report shows of them.

    A scan keeps this instead of the arguments themselves once a run is replayed, so a
    large folder does not keep every file's tool data in memory (``--sweep`` keeps the
    full runs: it replays them again).
    """

    text: str


@dataclass(frozen=True)
class FileReport:
    """One scanned transcript and the replays of its runs.

    Attributes:
        path: the file.
        format: the format it was read as.
        replays: one per run.
        unmatched_results: tool results the reader could not match to a call.
        notes: the reader's notes (copies counted once, calls rebuilt, ...).
        excerpts: per replay, a short excerpt of the outcome the decisive call repeated
            (``None`` without a finding, or when the transcript has no outcome).
        skipped_calls: records that may hold calls the reader could not read (a call kind
            it does not know, a last line cut off), not replayed.
    """

    path: str
    format: FormatName
    replays: tuple[RunReplay, ...]
    unmatched_results: int = 0
    notes: tuple[str, ...] = ()
    excerpts: tuple[str | None, ...] = ()
    skipped_calls: int = 0

    @property
    def calls(self) -> int:
        """The calls of every run."""
        return sum(replay.calls for replay in self.replays)

    @property
    def doubts(self) -> tuple[str, ...]:
        """Why this file's verdict cannot be trusted as an all-clear (empty when it can)."""
        doubts: list[str] = []
        if self.calls == 0:
            doubts.append(NO_CALLS_NOTE.format(format=self.format))
        if self.unmatched_results:
            doubts.append(UNMATCHED_NOTE.format(count=self.unmatched_results))
        if self.skipped_calls:
            records = "record" if self.skipped_calls == 1 else "records"
            doubts.append(SKIPPED_CALLS_NOTE.format(count=self.skipped_calls, records=records))
        return tuple(doubts)


#: Per-file notes that make a file a doubt (exit code 4).
NO_CALLS_NOTE: Final = (
    "no tool calls found (read as {format}): nothing was checked; if the file has calls, "
    "its format was misread (try --format)"
)
UNMATCHED_NOTE: Final = "{count} tool results match no call: some calls were not understood"
SKIPPED_CALLS_NOTE: Final = (
    "{count} {records} that may hold tool calls not read (the notes say which): those calls "
    "were not checked"
)
#: Longest outcome excerpt kept per finding.
EXCERPT_CHARS: Final = 300


@dataclass(frozen=True)
class ScanResult:
    """Everything a scan found.

    Attributes:
        setup: the replay settings.
        files: the files read.
        skipped: files that could not be read (and missing paths): a doubt, exit 3.
        ignored: files a folder walk left out on purpose (side files, copies, special
            files, valid JSON that is no transcript): counted, not an error.
    """

    setup: ScanSetup
    files: tuple[FileReport, ...]
    skipped: tuple[TranscriptError, ...]
    ignored: tuple[TranscriptError, ...] = ()

    @property
    def replays(self) -> tuple[tuple[str, RunReplay], ...]:
        """Every replayed run with its file path, in scan order."""
        return tuple((report.path, replay) for report in self.files for replay in report.replays)

    @property
    def doubtful(self) -> tuple[FileReport, ...]:
        """Files read as transcripts whose all-clear cannot be trusted."""
        return tuple(report for report in self.files if report.doubts)

    def findings(self, fail_on: FailOn) -> bool:
        """Whether any run reached ``fail_on`` (a warning, or a block/abort)."""
        for _path, replay in self.replays:
            if replay.blocked or replay.aborted:
                return True
            if fail_on == "warn" and replay.warned:
                return True
        return False

    def exit_code(self, fail_on: FailOn | None) -> int:
        """1 findings, then 3 a file skipped, then 4 a file not understood, else 0."""
        if fail_on is not None and self.findings(fail_on):
            return EXIT_FINDINGS
        if self.skipped:
            return EXIT_SKIPPED
        if self.doubtful:
            return EXIT_DOUBT
        return EXIT_OK


def _outcome_text(value: object) -> str | None:
    if value is UNDEFINED:
        return None
    if isinstance(value, str):
        return value
    text = content_text(value)
    if not text and isinstance(value, Mapping):
        text = content_text(value.get("content"))
    if text:
        return text
    try:
        return json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)
    except (TypeError, ValueError, RecursionError):
        return None


def excerpt_of(replay: RunReplay) -> str | None:
    """A short excerpt of the error or result the decisive call of a finding repeated."""
    decisive = replay.first_stop or replay.first_warning
    if decisive is None:
        return None
    calls = replay.run.calls
    for decision in reversed(replay.decisions[: decisive.index]):
        if decision.signature != decisive.signature or decision.index > len(calls):
            continue
        call = calls[decision.index - 1]
        for value in (call.error, call.result):
            text = _outcome_text(value)
            if text:
                text = " ".join(text.split())
                return text if len(text) <= EXCERPT_CHARS else text[: EXCERPT_CHARS - 3] + "..."
    return None


def _preview_text(args: object) -> str:
    try:
        text = json.dumps(args, ensure_ascii=True, sort_keys=True, default=str)
    except (TypeError, ValueError, RecursionError):
        text = "<unprintable>"
    return text if len(text) <= PREVIEW_CHARS else text[: PREVIEW_CHARS - 3] + "..."


#: Characters of a call's arguments a report keeps.
PREVIEW_CHARS: Final = 100


def light_run(run: Run) -> Run:
    """``run`` with its calls' arguments cut to previews and their outcomes dropped."""
    events: list[Compaction | ReplayCall] = [
        event
        if isinstance(event, Compaction)
        else dataclasses.replace(
            event, args=ArgsPreview(_preview_text(event.args)), result=UNDEFINED, error=UNDEFINED
        )
        for event in run.events
    ]
    return dataclasses.replace(run, events=tuple(events))


def scan_file(
    path: str,
    setup: ScanSetup,
    *,
    format: FormatName | None = None,
    max_bytes: int = DEFAULT_MAX_FILE_BYTES,
    keep_runs: bool = False,
) -> FileReport:
    """Read and replay one file.

    Raises:
        TranscriptError: the file cannot be read (``NotATranscript`` when it is valid
            JSON of another shape).
    """
    transcript = read_transcript(path, format=format, max_bytes=max_bytes)
    replays = tuple(
        replay_run(run, setup.settings, session_key=f"{path}#{run.label}")
        for run in transcript.runs
    )
    excerpts = tuple(excerpt_of(replay) for replay in replays)
    if not keep_runs:
        replays = tuple(dataclasses.replace(r, run=light_run(r.run)) for r in replays)
    return FileReport(
        path,
        transcript.format,
        replays,
        transcript.unmatched_results,
        transcript.notes,
        excerpts,
        transcript.skipped_calls,
    )


_WORKER_SETUP: dict[str, ScanSetup] = {}


def _worker_init(config_path: str | None, agent_id: str | None, profile: Profile) -> None:
    _WORKER_SETUP["setup"] = load_setup(config_path, agent_id, profile)


def _worker_scan(
    path: str, format: FormatName | None, max_bytes: int, keep_runs: bool
) -> FileReport | TranscriptError:
    try:
        return scan_file(
            path, _WORKER_SETUP["setup"], format=format, max_bytes=max_bytes, keep_runs=keep_runs
        )
    except TranscriptError as exc:
        return exc


def scan(
    files: Sequence[str],
    setup: ScanSetup,
    *,
    format: FormatName | None = None,
    progress: Progress | None = None,
    explicit: Collection[str] | None = None,
    max_bytes: int = DEFAULT_MAX_FILE_BYTES,
    jobs: int = 1,
    keep_runs: bool = False,
) -> tuple[tuple[FileReport, ...], tuple[TranscriptError, ...], tuple[TranscriptError, ...]]:
    """Read and replay every file; a file that cannot be read is skipped, not fatal.

    Args:
        files: transcript paths.
        setup: the replay settings.
        format: force one transcript format.
        progress: advanced once per file.
        explicit: the files named on the command line (``None``: all of them). A walked
            file that is valid JSON but no transcript is ignored, not skipped.
        max_bytes: the largest file read.
        jobs: files replayed in parallel processes (1: in this process).
        keep_runs: keep the full runs (arguments and outcomes) in the reports, for a
            sweep; otherwise only previews are kept, so memory stays bounded.

    Returns:
        ``(reports, skipped, ignored)``, in file order.
    """
    reports: list[FileReport] = []
    skipped: list[TranscriptError] = []
    ignored: list[TranscriptError] = []

    def take(path: str, outcome: FileReport | TranscriptError) -> None:
        if isinstance(outcome, FileReport):
            reports.append(outcome)
        elif isinstance(outcome, NotATranscript) and explicit is not None and path not in explicit:
            ignored.append(outcome)
        else:
            skipped.append(outcome)
        if progress is not None:
            progress.advance()

    if jobs > 1 and len(files) > 1:
        from concurrent.futures import ProcessPoolExecutor

        with ProcessPoolExecutor(
            max_workers=jobs,
            initializer=_worker_init,
            initargs=(setup.config_path, setup.agent_id, setup.profile),
        ) as pool:
            outcomes = pool.map(
                _worker_scan,
                files,
                *([format] * len(files), [max_bytes] * len(files), [keep_runs] * len(files)),
                chunksize=1,
            )
            for path, outcome in zip(files, outcomes, strict=True):
                take(path, outcome)
    else:
        for path in files:
            try:
                one: FileReport | TranscriptError = scan_file(
                    path, setup, format=format, max_bytes=max_bytes, keep_runs=keep_runs
                )
            except TranscriptError as exc:
                one = exc
            take(path, one)
    return tuple(reports), tuple(skipped), tuple(ignored)


__all__ = [
    "EXIT_DOUBT",
    "EXIT_FINDINGS",
    "EXIT_OK",
    "EXIT_SKIPPED",
    "EXIT_USAGE",
    "ArgsPreview",
    "FailOn",
    "FileReport",
    "ScanResult",
    "ScanSetup",
    "UsageError",
    "describe_setup",
    "describe_thresholds",
    "excerpt_of",
    "light_run",
    "load_setup",
    "scan",
    "scan_file",
]
