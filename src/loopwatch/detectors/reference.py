"""The reference detectors (SPEC §4): pure functions of (history, upcoming call, config).

``evaluate`` holds the logic and does no I/O, so the session engine, the replay tools and
every store share it; ``detect_tool_call_loop`` is the reference-shaped entry point that
also writes the detector's log line, as OpenClaw does on every detection.
"""

from __future__ import annotations

import logging
from abc import ABC, abstractmethod
from collections.abc import Collection, Hashable, Mapping, Sequence, Set
from dataclasses import dataclass
from typing import Final, Literal, Protocol

from loopwatch import messages
from loopwatch.config import ResolvedConfig, resolve_config
from loopwatch.core.fingerprint import hash_tool_call
from loopwatch.core.jsstr import utf16_key
from loopwatch.core.naming import normalize_run_id
from loopwatch.core.normalizers import validate_normalizers
from loopwatch.core.records import SessionState, ToolCallRecord

logger = logging.getLogger("loopwatch.detection")

Level = Literal["warning", "critical"]

UNKNOWN_TOOL_REPEAT: Final = "unknown_tool_repeat"
GLOBAL_CIRCUIT_BREAKER: Final = "global_circuit_breaker"
KNOWN_POLL_NO_PROGRESS: Final = "known_poll_no_progress"
PING_PONG: Final = "ping_pong"
GENERIC_REPEAT: Final = "generic_repeat"


@dataclass(frozen=True, slots=True)
class LoopVerdict:
    """What detection concluded about the upcoming call.

    A verdict that is not stuck has ``count == 0`` and every other field ``None``.
    """

    stuck: bool
    level: Level | None = None
    detector: str | None = None
    count: int = 0
    message: str | None = None
    warning_key: str | None = None
    paired_tool_name: str | None = None
    #: The calls forming the loop (indices into the run's history as the detector saw it);
    #: set by the adaptive profile's detectors, ``None`` for the reference ones.
    indices: tuple[int, ...] | None = None
    #: Why the verdict fired and what would have reset it (operator-facing; the adaptive
    #: profile's detectors set it, ``None`` for the reference ones).
    explanation: str | None = None


NOT_STUCK: Final = LoopVerdict(stuck=False)


def is_known_poll(tool_name: str, params: object) -> bool:
    """Tools whose repeated calls are polls: the no-progress detector applies instead."""
    if tool_name == "command_status":
        return True
    if tool_name != "process" or not isinstance(params, Mapping):
        return False
    action = params.get("action")
    return isinstance(action, str) and action in ("poll", "log")


@dataclass(frozen=True, slots=True)
class PingPong:
    """What the ping-pong detector found (SPEC §4): the count, the no-progress evidence and
    the pair (``last``'s tool name and args hash)."""

    count: int
    no_progress: bool
    paired_tool_name: str | None
    paired_signature: str | None


NO_PING_PONG: Final = PingPong(0, False, None, None)


class RecordFields(Protocol):
    """What is read from a record: a :class:`ToolCallRecord`, or a store's own record."""

    @property
    def tool_name(self) -> str: ...

    @property
    def args_hash(self) -> str: ...

    @property
    def result_hash(self) -> str | None: ...

    @property
    def unknown_tool_name(self) -> str | None: ...

    @property
    def facts(self) -> str | None: ...


class RunHistory(ABC):
    """The questions detection asks about the history of the upcoming call's run (SPEC §4).

    :func:`evaluate` takes either a plain sequence of records, which :class:`ScannedRun`
    answers by walking it, or a store's own ``RunHistory`` that answers from an index
    maintained as records come and go (the memory store's, see
    :mod:`loopwatch.stores.memory._runs`). Every implementation must give exactly the answers of
    :class:`ScannedRun`; ``tests/core/test_incremental.py`` checks this on generated
    histories. They only read: the history does not change while they are asked.
    """

    __slots__ = ()

    @abstractmethod
    def unknown_tool_streak(self, tool_name: str) -> tuple[int, str | None]:
        """(streak, unknown name): newest records of ``tool_name`` that failed as unknown."""

    @abstractmethod
    def no_progress(self, tool_name: str, args_hash: str) -> tuple[int, str | None, int]:
        """(no-progress streak, latest result hash, recent count) of one call signature."""

    @abstractmethod
    def ping_pong(self, tool_name: str, current_hash: str) -> PingPong:
        """The alternation the upcoming call ``(tool_name, current_hash)`` would continue."""

    @abstractmethod
    def fields(self) -> Sequence[RecordFields]:
        """The run's records, oldest first, for detectors that read them one by one (the
        adaptive profile's); cheaper than public records for a store that keeps its own."""

    def repeat_bound(self, tool_name: str, current_hash: str) -> int | None:
        """An upper bound ``n`` on the run's records of the call, proven together with the
        rest: :meth:`unknown_tool_streak` would be ``(0, None)``, :meth:`ping_pong`
        :data:`NO_PING_PONG`, and :meth:`no_progress`'s streak and recent count at most
        ``n``. ``None`` says nothing (the default). A history with an index may prove it in
        one step (``0``: a run without the call), and :func:`evaluate` then answers at once
        when ``n`` is below every threshold (most calls of a healthy run, repeats
        included)."""
        return None

    def content_keys(self, start: int) -> Sequence[Hashable] | None:
        """For each record of ``fields()[start:]``, a hashable value that determines all
        its fields (equal keys, equal records), so a profile may memoise what it derives
        from a record; ``None`` when this history has none (the default)."""
        return None


class ScannedRun(RunHistory):
    """A run's records as a plain sequence, oldest first, answered by walking them.

    What the Redis store, the module-level functions and replays use: each answer costs
    one walk over the records (the unknown-tool streak and ping-pong stop early).
    """

    __slots__ = ("records",)

    def __init__(self, records: Sequence[ToolCallRecord]) -> None:
        self.records = records

    def fields(self) -> Sequence[ToolCallRecord]:
        return self.records

    def unknown_tool_streak(self, tool_name: str) -> tuple[int, str | None]:
        name: str | None = None
        count = 0
        for record in reversed(self.records):
            if record.tool_name != tool_name or record.unknown_tool_name is None:
                break
            if name is None:
                name = record.unknown_tool_name
            elif record.unknown_tool_name != name:
                break
            count += 1
        return count, name

    def no_progress(self, tool_name: str, args_hash: str) -> tuple[int, str | None, int]:
        streak = 0
        latest: str | None = None
        recent = 0
        streak_open = True
        for record in reversed(self.records):
            if record.args_hash != args_hash or record.tool_name != tool_name:
                continue
            recent += 1
            if not streak_open or record.result_hash is None:
                continue
            if latest is None:
                latest = record.result_hash
                streak = 1
            elif record.result_hash == latest:
                streak += 1
            else:
                streak_open = False
        return streak, latest, recent

    def ping_pong(self, tool_name: str, current_hash: str) -> PingPong:
        records = self.records
        newest = len(records) - 1
        if newest < 1:
            return NO_PING_PONG
        last, other = records[newest], records[newest - 1]
        # "other" is the newest earlier record with other args than the newest; the tail is
        # at least 2 long only when that is the record right before it: else nothing to find.
        if other.args_hash == last.args_hash or other.tool_name == "":
            return NO_PING_PONG
        if current_hash != other.args_hash:
            return NO_PING_PONG  # the upcoming call would not continue the alternation
        expected = (last.args_hash, other.args_hash)
        tail = 2
        while tail <= newest and records[newest - tail].args_hash == expected[tail % 2]:
            tail += 1
        last_side = {records[newest - i].result_hash for i in range(0, tail, 2)}
        other_side = {records[newest - i].result_hash for i in range(1, tail, 2)}
        return PingPong(
            tail + 1, no_progress_evidence(last_side, other_side), last.tool_name, last.args_hash
        )


def no_progress_evidence(last_side: Set[object], other_side: Set[object]) -> bool:
    """Ping-pong evidence from the outcomes of each side of the tail (``None``: pending).

    True when every record of the tail has an outcome and each side always had the same.
    """
    return (
        None not in last_side
        and None not in other_side
        and len(last_side) == 1
        and len(other_side) == 1
    )


def _ping_pong_key(tool_name: str, current_hash: str, paired_signature: str | None) -> str:
    if paired_signature is None:
        return f"pingpong:{tool_name}:{current_hash}"
    first, second = sorted((current_hash, paired_signature), key=utf16_key)
    return f"pingpong:{first}|{second}"


#: Whether a history type answers the detectors itself (a :class:`RunHistory`), by type.
_ANSWERS: dict[type, bool] = {}


def answers_itself(history: object) -> bool:
    """``isinstance(history, RunHistory)``, decided once per type: the ABC check costs a
    Python call each time, and the detectors ask it on every guarded call."""
    kind = type(history)
    answers = _ANSWERS.get(kind)
    if answers is None:
        answers = _ANSWERS[kind] = issubclass(kind, RunHistory)
    return answers


def evaluate(
    records: Sequence[ToolCallRecord] | RunHistory,
    tool_name: str,
    current_hash: str,
    known_poll: bool,
    config: ResolvedConfig,
) -> LoopVerdict:
    """Decide on the upcoming call from its run-scoped history (SPEC §4 decision order).

    Args:
        records: the history of the call's run, oldest first, or a :class:`RunHistory`
            that answers for it (a store's index).
        tool_name: the tool name as hashed.
        current_hash: the upcoming call's ``argsHash``.
        known_poll: whether the call is a known poll (:func:`is_known_poll`).
        config: the resolved config; detection is off unless ``config.enabled``.
    """
    if not config.enabled:
        return NOT_STUCK
    run: RunHistory = (
        records  # type: ignore[assignment]
        if answers_itself(records)
        else ScannedRun(records)  # type: ignore[arg-type]
    )
    if config.unknown_tool_threshold > 0:
        bound = run.repeat_bound(tool_name, current_hash)
        if (
            bound is not None
            and bound < config.warning_threshold
            and bound < config.critical_threshold
            and bound < config.global_circuit_breaker_threshold
        ):
            # No unknown-tool streak (0, below its threshold), no alternation (a count of
            # 0, below the warning threshold), and a streak and a recent count of at most
            # ``bound``, below every threshold they are compared with: as below.
            return NOT_STUCK
    unknown_streak, unknown_name = run.unknown_tool_streak(tool_name)
    if unknown_streak >= config.unknown_tool_threshold:
        shown = unknown_name or tool_name
        return LoopVerdict(
            stuck=True,
            level="critical",
            detector=UNKNOWN_TOOL_REPEAT,
            count=unknown_streak,
            message=messages.UNKNOWN_TOOL_CRITICAL.format(name=shown, count=unknown_streak),
            warning_key=f"unknown-tool:{tool_name}:{unknown_name or 'unknown'}",
        )

    streak, latest, recent = run.no_progress(tool_name, current_hash)
    result_part = latest or "none"
    if streak >= config.global_circuit_breaker_threshold:
        return LoopVerdict(
            stuck=True,
            level="critical",
            detector=GLOBAL_CIRCUIT_BREAKER,
            count=streak,
            message=messages.GLOBAL_CRITICAL.format(tool=tool_name, count=streak),
            warning_key=f"global:{tool_name}:{current_hash}:{result_part}",
        )

    if known_poll and config.known_poll_no_progress:
        if streak >= config.critical_threshold:
            template, level = messages.POLL_CRITICAL, "critical"
        elif streak >= config.warning_threshold:
            template, level = messages.POLL_WARNING, "warning"
        else:
            template = ""
        if template:
            return LoopVerdict(
                stuck=True,
                level=level,  # type: ignore[arg-type]
                detector=KNOWN_POLL_NO_PROGRESS,
                count=streak,
                message=template.format(tool=tool_name, count=streak),
                warning_key=f"poll:{tool_name}:{current_hash}:{result_part}",
            )

    if config.ping_pong:
        pp = run.ping_pong(tool_name, current_hash)
        critical = pp.count >= config.critical_threshold and pp.no_progress
        if critical or pp.count >= config.warning_threshold:
            template = messages.PING_PONG_CRITICAL if critical else messages.PING_PONG_WARNING
            return LoopVerdict(
                stuck=True,
                level="critical" if critical else "warning",
                detector=PING_PONG,
                count=pp.count,
                message=template.format(count=pp.count),
                warning_key=_ping_pong_key(tool_name, current_hash, pp.paired_signature),
                paired_tool_name=pp.paired_tool_name,
            )

    if not known_poll and config.generic_repeat:
        if streak >= config.critical_threshold:
            return LoopVerdict(
                stuck=True,
                level="critical",
                detector=GENERIC_REPEAT,
                count=streak,
                message=messages.GENERIC_CRITICAL.format(tool=tool_name, count=streak),
                warning_key=f"generic:{tool_name}:{current_hash}:{result_part}",
            )
        if recent >= config.warning_threshold:
            return LoopVerdict(
                stuck=True,
                level="warning",
                detector=GENERIC_REPEAT,
                count=recent,
                message=messages.GENERIC_WARNING.format(tool=tool_name, count=recent),
                warning_key=f"generic:{tool_name}:{current_hash}",
            )
    return NOT_STUCK


_LOG_LINES: Final[dict[tuple[str, str], tuple[int, str]]] = {
    (GLOBAL_CIRCUIT_BREAKER, "critical"): (logging.ERROR, messages.LOG_GLOBAL_CRITICAL),
    (KNOWN_POLL_NO_PROGRESS, "critical"): (logging.ERROR, messages.LOG_POLL_CRITICAL),
    (KNOWN_POLL_NO_PROGRESS, "warning"): (logging.WARNING, messages.LOG_POLL_WARNING),
    (PING_PONG, "critical"): (logging.ERROR, messages.LOG_PING_PONG_CRITICAL),
    (PING_PONG, "warning"): (logging.WARNING, messages.LOG_PING_PONG_WARNING),
    (GENERIC_REPEAT, "critical"): (logging.ERROR, messages.LOG_GENERIC_CRITICAL),
    (GENERIC_REPEAT, "warning"): (logging.WARNING, messages.LOG_GENERIC_WARNING),
}


def log_verdict(verdict: LoopVerdict, tool_name: str) -> None:
    """Write the reference's detector log line for a stuck verdict (none for unknown tools)."""
    if not verdict.stuck or verdict.detector is None or verdict.level is None:
        return
    line = _LOG_LINES.get((verdict.detector, verdict.level))
    if line is not None:
        level, template = line
        logger.log(level, template.format(tool=tool_name, count=verdict.count))


def run_scoped(history: Sequence[ToolCallRecord], run_id: str | None) -> list[ToolCallRecord]:
    """The records of one run; ``None`` matches only records without a run id."""
    return [record for record in history if record.run_id == run_id]


def detect_tool_call_loop(
    state: SessionState,
    tool_name: str,
    params: object,
    config: object = None,
    *,
    run_id: object = None,
    normalizers: Collection[str] = (),
) -> LoopVerdict:
    """Evaluate the upcoming call against the session history and log the detection.

    Raises:
        TypeError: the params cannot be serialised (SPEC §8.5).
        ValueError: an unknown normaliser name.
    """
    normalizers = validate_normalizers(normalizers)
    resolved = resolve_config(config)
    if not resolved.enabled:
        return NOT_STUCK
    current_hash = hash_tool_call(tool_name, params, normalizers=normalizers)
    verdict = evaluate(
        run_scoped(state.history, normalize_run_id(run_id)),
        tool_name,
        current_hash,
        is_known_poll(tool_name, params),
        resolved,
    )
    log_verdict(verdict, tool_name)
    return verdict


__all__ = [
    "GENERIC_REPEAT",
    "GLOBAL_CIRCUIT_BREAKER",
    "KNOWN_POLL_NO_PROGRESS",
    "NOT_STUCK",
    "NO_PING_PONG",
    "PING_PONG",
    "UNKNOWN_TOOL_REPEAT",
    "LoopVerdict",
    "PingPong",
    "RecordFields",
    "RunHistory",
    "ScannedRun",
    "answers_itself",
    "detect_tool_call_loop",
    "evaluate",
    "is_known_poll",
    "log_verdict",
    "no_progress_evidence",
    "run_scoped",
]
