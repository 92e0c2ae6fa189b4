"""The reference detectors (SPEC §4): pure functions of (history, upcoming call, config).

``evaluate`` holds the logic and does no I/O, so the session engine, the replay tools and
every store share it; ``detect_tool_call_loop`` is the reference-shaped entry point that
also writes the detector's log line, as OpenClaw does on every detection.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Final, Literal

from loopwatch import messages
from loopwatch.config import ResolvedConfig, resolve_config
from loopwatch.fingerprint import hash_tool_call
from loopwatch.history import SessionState, ToolCallRecord
from loopwatch.jsstr import utf16_key
from loopwatch.naming import normalize_run_id
from loopwatch.normalizers import validate_normalizers

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


NOT_STUCK: Final = LoopVerdict(stuck=False)


def is_known_poll(tool_name: str, params: object) -> bool:
    """Tools whose repeated calls are polls: the no-progress detector applies instead."""
    if tool_name == "command_status":
        return True
    if tool_name != "process" or not isinstance(params, Mapping):
        return False
    action = params.get("action")
    return isinstance(action, str) and action in ("poll", "log")


def _unknown_tool_streak(
    records: Sequence[ToolCallRecord], tool_name: str
) -> tuple[int, str | None]:
    name: str | None = None
    count = 0
    for record in reversed(records):
        if record.tool_name != tool_name or record.unknown_tool_name is None:
            break
        if name is None:
            name = record.unknown_tool_name
        elif record.unknown_tool_name != name:
            break
        count += 1
    return count, name


def _no_progress(
    records: Sequence[ToolCallRecord], tool_name: str, args_hash: str
) -> tuple[int, str | None, int]:
    """(no-progress streak, latest result hash, recent count) of one call signature."""
    streak = 0
    latest: str | None = None
    recent = 0
    streak_open = True
    for record in reversed(records):
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


@dataclass(frozen=True, slots=True)
class _PingPong:
    count: int
    no_progress: bool
    paired_tool_name: str | None
    paired_signature: str | None


_NO_PING_PONG: Final = _PingPong(0, False, None, None)


def _ping_pong(records: Sequence[ToolCallRecord], current_hash: str) -> _PingPong:
    if not records:
        return _NO_PING_PONG
    last = records[-1]
    other: ToolCallRecord | None = None
    for record in reversed(records[:-1]):
        if record.args_hash != last.args_hash:
            other = record
            break
    if other is None or other.tool_name == "":
        return _NO_PING_PONG
    expected = (last.args_hash, other.args_hash)
    tail = 0
    for record in reversed(records):
        if record.args_hash != expected[tail % 2]:
            break
        tail += 1
    if tail < 2 or current_hash != other.args_hash:
        return _NO_PING_PONG
    tail_records = records[len(records) - tail :]
    last_side = {r.result_hash for r in tail_records[len(tail_records) - 1 :: -2]}
    other_side = {r.result_hash for r in tail_records[len(tail_records) - 2 :: -2]}
    no_progress = (
        None not in last_side
        and None not in other_side
        and len(last_side) == 1
        and len(other_side) == 1
    )
    return _PingPong(tail + 1, no_progress, last.tool_name, last.args_hash)


def _ping_pong_key(tool_name: str, current_hash: str, paired_signature: str | None) -> str:
    if paired_signature is None:
        return f"pingpong:{tool_name}:{current_hash}"
    first, second = sorted((current_hash, paired_signature), key=utf16_key)
    return f"pingpong:{first}|{second}"


def evaluate(
    records: Sequence[ToolCallRecord],
    tool_name: str,
    current_hash: str,
    known_poll: bool,
    config: ResolvedConfig,
) -> LoopVerdict:
    """Decide on the upcoming call from its run-scoped history (SPEC §4 decision order).

    Args:
        records: the history of the call's run, oldest first.
        tool_name: the tool name as hashed.
        current_hash: the upcoming call's ``argsHash``.
        known_poll: whether the call is a known poll (:func:`is_known_poll`).
        config: the resolved config; detection is off unless ``config.enabled``.
    """
    if not config.enabled:
        return NOT_STUCK
    unknown_streak, unknown_name = _unknown_tool_streak(records, tool_name)
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

    streak, latest, recent = _no_progress(records, tool_name, current_hash)
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
        pp = _ping_pong(records, current_hash)
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
    "PING_PONG",
    "UNKNOWN_TOOL_REPEAT",
    "LoopVerdict",
    "detect_tool_call_loop",
    "evaluate",
    "is_known_poll",
    "log_verdict",
    "run_scoped",
]
