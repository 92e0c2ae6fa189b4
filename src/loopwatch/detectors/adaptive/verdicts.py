"""What every adaptive detector shares: its input, its verdict, and where progress resets.

Every detector has one signature, ``(DetectionContext) -> AdaptiveVerdict | None``; the
context carries the records, the upcoming call and the settings, plus the two indices the
detectors start from (the window, and the newest progress).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

from loopwatch.detectors.adaptive.facts import AdaptiveRecord
from loopwatch.detectors.adaptive.settings import AdaptiveConfig, DetectorThresholds

AdaptiveLevel = Literal["warning", "critical"]


@dataclass(frozen=True, slots=True)
class AdaptiveVerdict:
    """What an adaptive detector saw, and why.

    Attributes:
        detector: the detector's name (:data:`loopwatch.adaptive.ADAPTIVE_DETECTORS`).
        level: ``warning`` or ``critical`` (block).
        count: the detector's count, the upcoming call included.
        indices: the calls it counted, as indices into the ``records`` passed to
            :func:`evaluate_adaptive`, oldest first.
        message: the model-facing text: which call repeats and what to do instead.
        tool_name: the upcoming call's tool.
        warning_key: identifies the loop, so a host emits its first warning once
            (``adaptive:<detector>:<tool>:…``).
        resets: what would have reset the count (operator-facing, one short phrase).
    """

    detector: str
    level: AdaptiveLevel
    count: int
    indices: tuple[int, ...]
    message: str
    tool_name: str
    warning_key: str
    resets: str = ""

    @property
    def explanation(self) -> str:
        """One line for logs and reports: the calls counted and what would have reset them."""
        calls = ", ".join(f"#{index}" for index in self.indices)
        return (
            f"{self.detector} counted calls {calls} and this {self.tool_name} call "
            f"({self.count}); reset by {self.resets or 'a different call'}"
        )


@dataclass(frozen=True, slots=True)
class DetectionContext:
    """What every detector reads: the records, the upcoming call, the settings.

    Attributes:
        records: the run's records, oldest first.
        tool: the upcoming call's normalised tool name.
        args_hash: the upcoming call's signature.
        config: the adaptive settings.
        start: the first index inside the window.
        segment: the first index since the newest progress (see :func:`segment_start`).
    """

    records: Sequence[AdaptiveRecord]
    tool: str
    args_hash: str
    config: AdaptiveConfig
    start: int
    segment: int


#: The one signature of a detector.
Detector = Callable[[DetectionContext], "AdaptiveVerdict | None"]


def level_of(count: int, warn: int, block: int) -> AdaptiveLevel | None:
    """``critical`` from ``block`` on, ``warning`` from ``warn`` on, else ``None``."""
    if count >= block:
        return "critical"
    if count >= warn:
        return "warning"
    return None


def make_verdict(
    detector: str,
    level: AdaptiveLevel,
    count: int,
    indices: Iterable[int],
    template: str,
    tool: str,
    key: str,
    resets: str,
    **extra: object,
) -> AdaptiveVerdict:
    """A verdict whose message is ``template`` filled with the tool, the counts and ``extra``."""
    message = template.format(tool=tool, count=count, prior=count - 1, **extra)
    return AdaptiveVerdict(
        detector=detector,
        level=level,
        count=count,
        indices=tuple(indices),
        message=message,
        tool_name=tool,
        warning_key=f"adaptive:{detector}:{tool}:{key}",
        resets=resets,
    )


def streak_verdict(
    detector: str,
    indices: Sequence[int],
    thresholds: DetectorThresholds,
    warning: str,
    critical: str,
    tool: str,
    key: str,
    resets: str,
    **extra: object,
) -> AdaptiveVerdict | None:
    """The verdict on the upcoming call extending the streak of earlier calls ``indices``.

    The upcoming call is the streak's ``len(indices) + 1``-th: a warning from
    ``thresholds.warn`` on, a critical from ``thresholds.block`` on (with the matching
    template, see :func:`make_verdict`), else ``None``. Most adaptive detectors end here.
    """
    count = len(indices) + 1
    level = level_of(count, thresholds.warn, thresholds.block)
    if level is None:
        return None
    template = critical if level == "critical" else warning
    return make_verdict(detector, level, count, indices, template, tool, key, resets, **extra)


def segment_start(records: Sequence[AdaptiveRecord], start: int) -> int:
    """Index of the newest progress record in ``records[start:]`` (``start`` if none).

    Progress is a successful call that could have changed the outcome of what failed before
    it: a mutating record (an edit, a write, a shell command that is not read-only), unless
    the same call with the same outcome already occurred since the previous progress
    (rewriting identical content is not progress); and the successful read of a file that a
    failure since the previous progress asked to be read first ("File has not been read
    yet. Read it first").
    """
    segment = start
    seen: set[tuple[str, str | None]] = set()
    wanted: set[str] = set()
    for index in range(start, len(records)):
        record = records[index]
        if record.failed:
            if record.needs_read is not None:
                wanted.add(record.needs_read)
            continue
        if record.mutating:
            key = (record.args_hash, record.result_hash)
            if key in seen:
                continue
            segment, seen, wanted = index, {key}, set()
        elif record.read_key is not None and record.read_key in wanted:
            segment, seen, wanted = index, set(), set()
    return segment
