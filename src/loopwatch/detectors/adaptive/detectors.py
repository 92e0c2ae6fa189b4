"""The adaptive detectors: records in, verdict out (pure: no I/O, no clock, no logging).

Every detector has one signature, ``(DetectionContext) -> AdaptiveVerdict | None``, and
:data:`DETECTOR_TABLE` lists them in the order they win a tie (the most specific evidence
first): a new built-in detector is one function and one table entry, plus, optionally, a
screen in :data:`~loopwatch.detectors.adaptive.screens.SCREENS` that lets the hot path skip
it when it cannot fire (without one it runs on every call).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Final

from loopwatch.detectors.adaptive.facts import AdaptiveRecord
from loopwatch.detectors.adaptive.screens import SCREENS, WindowSummary, summarise
from loopwatch.detectors.adaptive.settings import DEFAULT_ADAPTIVE_CONFIG, AdaptiveConfig
from loopwatch.detectors.adaptive.stalls import (
    ARGUMENT_CHURN,
    POLL_NO_PROGRESS,
    TERMINAL_FAILURE,
    TYPED_ERROR,
    UNCHANGED_WRITE,
    detect_argument_churn,
    detect_poll_no_progress,
    detect_terminal_failure,
    detect_typed_error,
    detect_unchanged_write,
)
from loopwatch.detectors.adaptive.verdicts import (
    AdaptiveLevel,
    AdaptiveVerdict,
    DetectionContext,
    Detector,
    level_of,
    make_verdict,
    segment_start,
    streak_verdict,
)
from loopwatch.messages import (
    MSG_CYCLE_CRITICAL,
    MSG_CYCLE_WARNING,
    MSG_IDENTICAL_STREAK_CRITICAL,
    MSG_IDENTICAL_STREAK_WARNING,
    MSG_REPEATED_FAILURE_CRITICAL,
    MSG_REPEATED_FAILURE_WARNING,
    MSG_SAME_ERROR_CRITICAL,
    MSG_SAME_ERROR_WARNING,
)

# --- detector names ------------------------------------------------------------------------

REPEATED_FAILURE: Final = "repeated_failure"
SAME_ERROR: Final = "same_error"
IDENTICAL_STREAK: Final = "identical_streak"
CYCLE: Final = "cycle"

# --- what would have reset each count (operator-facing, AdaptiveVerdict.resets) -------------

RESETS_REPEATED_FAILURE: Final = (
    "a success of this call, a successful state-changing call (an edit, a write, a command "
    "that is not read-only), or the read a 'read it first' error asks for"
)
RESETS_IDENTICAL_STREAK: Final = "any other call in between, or a different outcome"
RESETS_CYCLE: Final = "a call outside the cycle, or a different outcome in it"
RESETS_SAME_ERROR: Final = "a success of this tool, or a successful state-changing call"


def _repeated_failure(
    records: Sequence[AdaptiveRecord], segment: int, tool: str, args_hash: str
) -> tuple[list[int], str | None]:
    """Earlier failures of this exact call with its newest error, since the last progress.

    A success of the same call ends the count: a retry after a transient error that then
    succeeded is never a loop.
    """
    indices: list[int] = []
    reference: str | None = None
    for index in range(len(records) - 1, segment - 1, -1):
        record = records[index]
        if record.transparent or record.tool_name != tool or record.args_hash != args_hash:
            continue
        if record.result_hash is None:
            continue
        if not record.failed:
            break
        if reference is None:
            reference = record.failure_hash
        if record.failure_hash == reference:
            indices.append(index)
    indices.reverse()
    return indices, reference


def _same_error(
    records: Sequence[AdaptiveRecord], segment: int, tool: str
) -> tuple[list[int], str | None, int]:
    """Failures of this tool with the newest failure's error class, since the last progress.

    Any success of the same tool ends the run of failures: the tool works again, so the
    earlier failures are history (a read that succeeds after parallel reads were rejected,
    a view between edit attempts). Returns the indices, the class, and how many distinct
    argument sets the failures have.
    """
    failures: list[int] = []
    for index in range(segment, len(records)):
        record = records[index]
        if record.transparent or record.tool_name != tool or record.result_hash is None:
            continue
        if record.failed:
            failures.append(index)
        else:
            failures.clear()
    if not failures:
        return [], None, 0
    reference = records[failures[-1]].error_class
    if reference is None:
        return [], None, 0  # the newest failure says nothing beyond an exit status
    indices = [i for i in failures if records[i].error_class == reference]
    return indices, reference, len({records[i].args_hash for i in indices})


def _identical_streak(
    records: Sequence[AdaptiveRecord], start: int, tool: str, args_hash: str
) -> list[int]:
    """The newest run of this exact call with one identical outcome (thinking skipped)."""
    indices: list[int] = []
    reference: str | None = None
    for index in range(len(records) - 1, start - 1, -1):
        record = records[index]
        if record.transparent:
            continue
        if (
            record.tool_name != tool
            or record.args_hash != args_hash
            or record.result_hash is None
            or record.polling
        ):
            break
        if reference is None:
            reference = record.result_hash
        if record.result_hash != reference:
            break
        indices.append(index)
    indices.reverse()
    return indices


@dataclass(frozen=True, slots=True)
class _Cycle:
    period: int
    indices: tuple[int, ...]
    count: int
    unit: tuple[AdaptiveRecord, ...]


def _call_key(record: AdaptiveRecord) -> tuple[str, str, str | None]:
    return (record.tool_name, record.args_hash, record.result_hash)


def _cycles(
    records: Sequence[AdaptiveRecord], start: int, tool: str, args_hash: str, max_period: int
) -> Iterator[_Cycle]:
    """Every cycle the upcoming call would continue, one per period.

    The sequence ignores thinking calls; a pending record or a poll ends it. A unit of one
    repeated call is a streak, not a cycle, and a unit that itself repeats (``A B A B`` for
    period 4) is left to its own, shorter period.
    """
    seq: list[int] = []
    for index in range(len(records) - 1, start - 1, -1):
        record = records[index]
        if record.transparent:
            continue
        if record.result_hash is None or record.polling:
            break
        seq.append(index)
    seq.reverse()
    for period in range(2, max_period + 1):
        if len(seq) < period:
            break
        head = records[seq[-period]]
        if head.tool_name != tool or head.args_hash != args_hash:
            continue  # (checked before the unit is built: most periods end here)
        unit = tuple(records[i] for i in seq[-period:])
        keys = [_call_key(r) for r in unit]
        if any(
            period % sub == 0 and all(keys[k] == keys[k % sub] for k in range(period))
            for sub in range(1, period)
        ):
            continue  # one repeated call (a streak) or a shorter cycle
        repeats = 0
        while repeats + period < len(seq) and _call_key(records[seq[-1 - repeats]]) == _call_key(
            records[seq[-1 - repeats - period]]
        ):
            repeats += 1
        run = tuple(seq[-(period + repeats) :])
        yield _Cycle(period, run, len(run) + 1, unit)


def detect_repeated_failure(ctx: DetectionContext) -> AdaptiveVerdict | None:
    """The same call failing again with the same error, since the last progress."""
    thresholds = ctx.config.repeated_failure
    if not thresholds.enabled:
        return None
    indices, failure_hash = _repeated_failure(ctx.records, ctx.segment, ctx.tool, ctx.args_hash)
    if not indices:
        return None
    return streak_verdict(
        REPEATED_FAILURE,
        indices,
        thresholds,
        MSG_REPEATED_FAILURE_WARNING,
        MSG_REPEATED_FAILURE_CRITICAL,
        ctx.tool,
        f"{ctx.args_hash}:{failure_hash}",
        RESETS_REPEATED_FAILURE,
    )


def detect_identical_streak(ctx: DetectionContext) -> AdaptiveVerdict | None:
    """The same call with the same outcome, consecutively."""
    thresholds = ctx.config.identical_streak
    if not thresholds.enabled:
        return None
    indices = _identical_streak(ctx.records, ctx.start, ctx.tool, ctx.args_hash)
    if not indices:
        return None
    return streak_verdict(
        IDENTICAL_STREAK,
        indices,
        thresholds,
        MSG_IDENTICAL_STREAK_WARNING,
        MSG_IDENTICAL_STREAK_CRITICAL,
        ctx.tool,
        f"{ctx.args_hash}:{ctx.records[indices[-1]].result_hash}",
        RESETS_IDENTICAL_STREAK,
    )


def detect_cycle(ctx: DetectionContext) -> AdaptiveVerdict | None:
    """A sequence of calls repeating lap after lap with identical outcomes."""
    settings = ctx.config.cycle
    if not settings.enabled:
        return None
    found: list[tuple[bool, float, _Cycle, AdaptiveLevel]] = []
    for cycle in _cycles(ctx.records, ctx.start, ctx.tool, ctx.args_hash, settings.max_period):
        if cycle.period < settings.min_period:
            continue
        period = cycle.period
        # ``count - 1`` calls ran in the cycle; ``laps`` full laps of them are identical.
        level = level_of(
            cycle.count, settings.warn_laps * period + 1, settings.block_laps * period + 1
        )
        if level is not None:
            found.append((level == "critical", cycle.count / period, cycle, level))
    if not found:
        return None
    _, _, cycle, level = max(found, key=lambda item: (item[0], item[1]))
    period = cycle.period
    template = MSG_CYCLE_CRITICAL if level == "critical" else MSG_CYCLE_WARNING
    return make_verdict(
        CYCLE,
        level,
        cycle.count,
        cycle.indices,
        template,
        ctx.tool,
        "|".join(sorted({r.args_hash for r in cycle.unit})),
        RESETS_CYCLE,
        period=period,
        laps=(cycle.count - 1) // period,
        tools=" -> ".join(record.tool_name for record in cycle.unit),
    )


def detect_same_error(ctx: DetectionContext) -> AdaptiveVerdict | None:
    """One tool returning the same normalised error while its arguments change."""
    thresholds = ctx.config.same_error
    if not thresholds.enabled:
        return None
    indices, error_class, distinct = _same_error(ctx.records, ctx.segment, ctx.tool)
    if distinct < 2:
        return None
    return streak_verdict(
        SAME_ERROR,
        indices,
        thresholds,
        MSG_SAME_ERROR_WARNING,
        MSG_SAME_ERROR_CRITICAL,
        ctx.tool,
        str(error_class),
        RESETS_SAME_ERROR,
    )


#: The detectors in the order they win a tie (same level): the most specific evidence first.
DETECTOR_TABLE: Final[tuple[tuple[str, Detector], ...]] = (
    (REPEATED_FAILURE, detect_repeated_failure),
    (UNCHANGED_WRITE, detect_unchanged_write),
    (IDENTICAL_STREAK, detect_identical_streak),
    (POLL_NO_PROGRESS, detect_poll_no_progress),
    (CYCLE, detect_cycle),
    (TERMINAL_FAILURE, detect_terminal_failure),
    (SAME_ERROR, detect_same_error),
    (TYPED_ERROR, detect_typed_error),
    (ARGUMENT_CHURN, detect_argument_churn),
)

#: Detector names in tie-breaking order.
ADAPTIVE_DETECTORS: Final[tuple[str, ...]] = tuple(name for name, _ in DETECTOR_TABLE)
#: Every detector has a screen, so a quiet window needs no detector at all.
_ALL_SCREENED: Final = all(name in SCREENS for name in ADAPTIVE_DETECTORS)


def _candidates(
    records: Sequence[AdaptiveRecord],
    upcoming_tool: str,
    upcoming_args_hash: str,
    config: AdaptiveConfig,
    start: int,
    summary: WindowSummary | None,
) -> Iterator[AdaptiveVerdict]:
    """The verdicts of the detectors that fire, in :data:`DETECTOR_TABLE` order.

    With a ``summary``, a detector runs only when its screen
    (:data:`~loopwatch.detectors.adaptive.screens.SCREENS`) passes, and the segment is
    computed only when one does: the same verdicts, without the scans that find nothing.
    """
    ctx: DetectionContext | None = None
    for name, detector in DETECTOR_TABLE:
        if summary is not None:
            screen = SCREENS.get(name)
            if screen is not None and not screen(summary):
                continue
        if ctx is None:
            ctx = DetectionContext(
                records=records,
                tool=upcoming_tool,
                args_hash=upcoming_args_hash,
                config=config,
                start=start,
                segment=segment_start(records, start),
            )
        verdict = detector(ctx)
        if verdict is not None:
            yield verdict


def evaluate_adaptive(
    records: Sequence[AdaptiveRecord],
    upcoming_tool: str,
    upcoming_args_hash: str,
    config: AdaptiveConfig = DEFAULT_ADAPTIVE_CONFIG,
) -> AdaptiveVerdict | None:
    """Decide about the upcoming call from the run's earlier calls (pure; never logs).

    Args:
        records: the run's records, oldest first (the newest ``config.window`` are used).
        upcoming_tool: the normalised tool name of the call about to run.
        upcoming_args_hash: its call signature (SPEC §3.2).
        config: the adaptive settings.

    Returns:
        The strongest verdict (critical before warning; ties in the order of
        :data:`ADAPTIVE_DETECTORS`), or ``None`` when no adaptive detector fires.
    """
    return _evaluate(records, upcoming_tool, upcoming_args_hash, config, screened=True)


def _evaluate(
    records: Sequence[AdaptiveRecord],
    upcoming_tool: str,
    upcoming_args_hash: str,
    config: AdaptiveConfig,
    *,
    screened: bool,
) -> AdaptiveVerdict | None:
    """:func:`evaluate_adaptive`; without ``screened`` every detector scans (the oracle)."""
    if upcoming_tool in config.all_thinking_tools:
        return None  # scratch notes are never a loop
    start = max(0, len(records) - config.window)
    summary: WindowSummary | None = None
    if screened:
        summary = summarise(
            records, start, upcoming_tool, upcoming_args_hash, config, shortcut=_ALL_SCREENED
        )
        if _ALL_SCREENED and (summary is None or summary.quiet):
            return None  # no detector can fire (most calls)
    best: AdaptiveVerdict | None = None
    for verdict in _candidates(records, upcoming_tool, upcoming_args_hash, config, start, summary):
        if verdict.level == "critical":
            return verdict
        if best is None:
            best = verdict
    return best
