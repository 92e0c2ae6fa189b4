"""Screens: a cheap test per detector that says "this detector cannot fire on this call".

A detector scans the window (30 records by default) and most of them first need the newest
progress (:func:`~loopwatch.detectors.adaptive.verdicts.segment_start`, one more scan), on
every call, while on a healthy run none of them fires. The evidence every detector needs is
narrow: all but three need an earlier record of the very same call, and those three need a
failure of the upcoming call's tool that no later success of it cleared. :class:`WindowSummary`
gathers that evidence once per call, mostly with C-level searches, and each detector's screen
(:data:`SCREENS`) reads it: the detector runs, and the segment is computed, only when its
screen passes.

A screen is a *necessary* condition: when it fails, its detector returns ``None`` on the same
records. Each screen relaxes its detector's bound to the window's start (the segment is never
before it): every detector only counts fewer calls from a later bound, so a count that does
not reach the thresholds from the start does not reach them from the segment either.
``tests/core/test_adaptive_screens.py`` checks this on generated windows. A detector without
a screen always runs. A new screen must fail whenever :attr:`WindowSummary.quiet` holds
(the property test checks every detector of the table against it).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from itertools import compress, repeat
from operator import attrgetter, eq
from typing import Final

from loopwatch.detectors.adaptive.facts import AdaptiveRecord
from loopwatch.detectors.adaptive.settings import AdaptiveConfig, DetectorThresholds

_ARGS: Final = attrgetter("args_hash")
_TOOL: Final = attrgetter("tool_name")


def _reaches(count: int, thresholds: DetectorThresholds) -> bool:
    """Whether ``count`` gets a level at all (``level_of`` is ``None`` below both counts)."""
    return count >= thresholds.warn or count >= thresholds.block


class WindowSummary:
    """The evidence the screens read, gathered once per upcoming call (:func:`summarise`).

    Attributes:
        records: the run's records, oldest first.
        start: the first index inside the window.
        tool: the upcoming call's normalised tool name.
        args_hash: the upcoming call's signature.
        config: the adaptive settings.
        newest: the index of the newest record of the window that is not transparent, or -1.
        hits: the indices of the window's records of the upcoming call (same tool and args
            hash), newest first.
        failures: the indices of the window's failures of the upcoming call's tool since its
            newest success there (transparent and pending records skipped), newest first.
        quiet: no screen can pass: no record of the call, no uncleared failure of its tool,
            and the newest record is not a failure (which the terminal-failure screen needs).
    """

    __slots__ = (
        "args_hash",
        "config",
        "failures",
        "hits",
        "newest",
        "quiet",
        "records",
        "start",
        "tool",
    )

    def __init__(
        self,
        records: Sequence[AdaptiveRecord],
        start: int,
        tool: str,
        args_hash: str,
        config: AdaptiveConfig,
        newest: int,
    ) -> None:
        self.records = records
        self.start = start
        self.tool = tool
        self.args_hash = args_hash
        self.config = config
        self.newest = newest
        end = len(records)
        window = records[start:] if start else records
        # Positions found at C speed; the few matches are checked for the tool too.
        found = compress(range(start, end), map(eq, map(_ARGS, window), repeat(args_hash)))
        hits = [index for index in found if records[index].tool_name == tool]
        hits.reverse()
        self.hits = hits
        failures: list[int] = []
        if newest >= 0:
            found = compress(range(start, end), map(eq, map(_TOOL, window), repeat(tool)))
            for index in reversed(list(found)):
                record = records[index]
                if record.transparent or record.result_hash is None:
                    continue
                if not record.failed:
                    break
                failures.append(index)
        self.failures = failures
        self.quiet = not hits and not failures and (newest < 0 or not records[newest].failed)


def summarise(
    records: Sequence[AdaptiveRecord],
    start: int,
    tool: str,
    args_hash: str,
    config: AdaptiveConfig,
    *,
    shortcut: bool = True,
) -> WindowSummary | None:
    """The window's :class:`WindowSummary`, or ``None`` when it would be quiet.

    Most calls end here, after a look at the newest record and one C-level search: the
    call has no earlier record in the window, and the newest record is a success of its
    tool (which clears every earlier failure of it) or there is none. Without ``shortcut``
    the summary is always built (for a detector without a screen, which always runs).
    """
    newest = len(records) - 1
    while newest >= start and records[newest].transparent:
        newest -= 1
    if not shortcut:
        newest = newest if newest >= start else -1
        return WindowSummary(records, start, tool, args_hash, config, newest)
    if newest < start:
        newest = -1
    else:
        last = records[newest]
        cleared = last.tool_name == tool and last.result_hash is not None and not last.failed
        if not cleared:
            return WindowSummary(records, start, tool, args_hash, config, newest)
    if args_hash in map(_ARGS, records[start:] if start else records):
        return WindowSummary(records, start, tool, args_hash, config, newest)
    return None


#: A screen: ``False`` when its detector cannot fire on the summarised window.
Screen = Callable[[WindowSummary], bool]


def screen_repeated_failure(summary: WindowSummary) -> bool:
    """Failures of this call since its newest success there, enough for a level."""
    thresholds = summary.config.repeated_failure
    if not thresholds.enabled or not summary.hits:
        return False
    records = summary.records
    count = 0
    for index in summary.hits:
        record = records[index]
        if record.transparent or record.result_hash is None:
            continue
        if not record.failed:
            break
        count += 1
    return count >= 1 and _reaches(count + 1, thresholds)


def screen_unchanged_write(summary: WindowSummary) -> bool:
    """Records of this call that reported no change, enough for a level."""
    thresholds = summary.config.unchanged_write
    if not thresholds.enabled or not summary.hits:
        return False
    records = summary.records
    count = sum(1 for index in summary.hits if records[index].unchanged)
    return count >= 1 and _reaches(count + 1, thresholds)


def _newest_is_call(summary: WindowSummary) -> AdaptiveRecord | None:
    """The newest record that is not transparent, when it is a finished one of this call."""
    newest = summary.newest
    if newest < 0 or not summary.hits:
        return None
    record = summary.records[newest]
    if (
        record.tool_name != summary.tool
        or record.args_hash != summary.args_hash
        or record.result_hash is None
    ):
        return None
    return record


def screen_identical_streak(summary: WindowSummary) -> bool:
    """The newest record is this call (not a poll), and the call occurs often enough."""
    thresholds = summary.config.identical_streak
    if not thresholds.enabled:
        return False
    record = _newest_is_call(summary)
    return record is not None and not record.polling and _reaches(len(summary.hits) + 1, thresholds)


def screen_poll_no_progress(summary: WindowSummary) -> bool:
    """The newest record is this call as a poll, and the call occurs often enough."""
    thresholds = summary.config.poll_no_progress
    if not thresholds.enabled:
        return False
    record = _newest_is_call(summary)
    return record is not None and record.polling and _reaches(len(summary.hits) + 1, thresholds)


def _extend_sequence(
    records: Sequence[AdaptiveRecord], start: int, seq: list[int], cursor: int, size: int
) -> int:
    """Grow ``seq`` (``_cycles``' sequence, newest first) to ``size`` entries if it has them.

    ``cursor`` is the next index to look at; returns the next one, or ``start - 1`` once the
    sequence has ended (a pending record or a poll ends it, transparent ones are skipped).
    """
    while cursor >= start and len(seq) < size:
        record = records[cursor]
        cursor -= 1
        if record.transparent:
            continue
        if record.result_hash is None or record.polling:
            return start - 1
        seq.append(cursor + 1)
    return cursor


def _same_outcome(first: AdaptiveRecord, second: AdaptiveRecord) -> bool:
    """Same call with the same outcome (``_cycles``' ``_call_key``)."""
    return (
        first.tool_name == second.tool_name
        and first.args_hash == second.args_hash
        and first.result_hash == second.result_hash
    )


def screen_cycle(summary: WindowSummary) -> bool:
    """This call heads a unit of a period looked at, repeated often enough for a level.

    A cycle of period ``p`` gets a level once its run has ``laps * p`` calls (``laps`` the
    lower of the two lap counts): the newest ``(laps - 1) * p`` calls of the sequence each
    equal the call ``p`` before them.
    """
    settings = summary.config.cycle
    if not settings.enabled or not summary.hits:
        return False
    records = summary.records
    start = summary.start
    tool = summary.tool
    args_hash = summary.args_hash
    seq: list[int] = []
    cursor = _extend_sequence(records, start, seq, len(records) - 1, settings.max_period)
    laps = min(settings.warn_laps, settings.block_laps)
    for period in range(max(2, settings.min_period), settings.max_period + 1):
        if len(seq) < period:
            return False
        head = records[seq[period - 1]]
        if head.tool_name != tool or head.args_hash != args_hash:
            continue
        needed = (laps - 1) * period
        cursor = _extend_sequence(records, start, seq, cursor, period + needed)
        repeats = 0
        while (
            repeats < needed
            and repeats + period < len(seq)
            and _same_outcome(records[seq[repeats]], records[seq[repeats + period]])
        ):
            repeats += 1
        if repeats >= needed:
            return True
    return False


def screen_terminal_failure(summary: WindowSummary) -> bool:
    """The newest records are failed commands with one identity, enough for a level."""
    config = summary.config
    thresholds = config.terminal_failure
    shells = config.all_shell_tools
    if not thresholds.enabled or summary.tool not in shells or summary.newest < 0:
        return False
    records = summary.records
    identity: str | None = None
    count = 0
    for index in range(summary.newest, summary.start - 1, -1):
        record = records[index]
        if record.transparent:
            continue
        if (
            record.tool_name not in shells
            or not record.failed
            or record.error_class is None
            or (identity is not None and record.failure_hash != identity)
        ):
            break
        identity = record.failure_hash
        count += 1
    return count >= 2 and _reaches(count + 1, thresholds)


def _same_failure(summary: WindowSummary, field: attrgetter[str | None]) -> list[int]:
    """The uncleared failures sharing the newest one's ``field`` (none when it is ``None``)."""
    failures = summary.failures
    if not failures:
        return []
    records = summary.records
    reference = field(records[failures[0]])
    if reference is None:
        return []
    return [index for index in failures if field(records[index]) == reference]


_ERROR_CLASS: Final = attrgetter("error_class")
_ERROR_CODE: Final = attrgetter("error_code")


def _varied(summary: WindowSummary, indices: list[int], thresholds: DetectorThresholds) -> bool:
    records = summary.records
    return (
        len(indices) >= 2
        and _reaches(len(indices) + 1, thresholds)
        and len({records[index].args_hash for index in indices}) >= 2
    )


def screen_same_error(summary: WindowSummary) -> bool:
    """Uncleared failures of this tool with the newest one's class, over varied arguments."""
    thresholds = summary.config.same_error
    if not thresholds.enabled or not summary.failures:
        return False
    return _varied(summary, _same_failure(summary, _ERROR_CLASS), thresholds)


def screen_typed_error(summary: WindowSummary) -> bool:
    """Uncleared failures of this tool with the newest one's code, over varied arguments."""
    thresholds = summary.config.typed_error
    if not thresholds.enabled or not summary.failures:
        return False
    return _varied(summary, _same_failure(summary, _ERROR_CODE), thresholds)


def _churn_outcome(record: AdaptiveRecord) -> str | None:
    # As ``stalls._churn_outcome`` (imported there from here would be a cycle).
    if record.failed:
        return record.error_class
    if record.unchanged:
        return "unchanged"
    return None if record.mutating else f"ok:{record.result_hash}"


def screen_argument_churn(summary: WindowSummary) -> bool:
    """The newest records are this tool with one shared outcome, enough of them for a level."""
    thresholds = summary.config.argument_churn
    if not thresholds.enabled or not summary.hits:
        return False
    records = summary.records
    tool = summary.tool
    shared: str | None = None
    count = 0
    for index in range(len(records) - 1, summary.start - 1, -1):
        record = records[index]
        if record.transparent:
            continue
        if record.tool_name != tool or record.result_hash is None:
            break
        outcome = _churn_outcome(record)
        if outcome is None or (shared is not None and outcome != shared):
            break
        shared = outcome
        count += 1
    return count >= 2 and _reaches(count + 1, thresholds)


#: The screen of each detector, by name (:data:`~loopwatch.detectors.adaptive.ADAPTIVE_DETECTORS`).
SCREENS: Final[Mapping[str, Screen]] = {
    "repeated_failure": screen_repeated_failure,
    "unchanged_write": screen_unchanged_write,
    "identical_streak": screen_identical_streak,
    "poll_no_progress": screen_poll_no_progress,
    "cycle": screen_cycle,
    "terminal_failure": screen_terminal_failure,
    "same_error": screen_same_error,
    "typed_error": screen_typed_error,
    "argument_churn": screen_argument_churn,
}
