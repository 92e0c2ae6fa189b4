"""Lenient resolution (SPEC §2): any block to the plain ``ResolvedConfig`` the detectors read.

``resolve_config`` runs on every call, so it only reads plain values and builds one small
frozen object; it never raises and never re-validates, exactly as the reference falls back
to defaults, so verdicts match OpenClaw's even for configs the schema would reject.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from loopwatch.config._values import js_truthy, positive_int, resolve_window_size
from loopwatch.config.block import LoopDetectionConfig
from loopwatch.core._undefined import UNDEFINED


@dataclass(frozen=True, slots=True)
class ResolvedConfig:
    """A block resolved with the lenient rules of SPEC §2: what the detectors read.

    Every field is a plain ``bool`` / ``int``; the thresholds are already clamped so that
    ``warning < critical < global``. The defaults are those of SPEC §2.
    """

    enabled: bool = False
    history_size: int = 30
    warning_threshold: int = 10
    critical_threshold: int = 20
    unknown_tool_threshold: int = 10
    global_circuit_breaker_threshold: int = 30
    generic_repeat: bool = True
    known_poll_no_progress: bool = True
    ping_pong: bool = True
    guard_enabled: bool = True
    guard_window_size: int = 3


#: What ``resolve_config`` returns for no block (``None`` or any non-mapping).
DEFAULT_RESOLVED_CONFIG: Final = ResolvedConfig()


def _flag(value: object) -> bool:
    """A detector flag: unset (``None`` / ``UNDEFINED``) means on."""
    if value is None or value is UNDEFINED:
        return True
    return js_truthy(value)


def _resolve_mapping(block: Mapping[Any, Any]) -> ResolvedConfig:
    get = block.get
    warning = positive_int(get("warningThreshold"), 10)
    critical = positive_int(get("criticalThreshold"), 20)
    if critical <= warning:
        critical = warning + 1
    breaker = positive_int(get("globalCircuitBreakerThreshold"), 30)
    if breaker <= critical:
        breaker = critical + 1
    detectors = get("detectors")
    if isinstance(detectors, Mapping):
        generic = _flag(detectors.get("genericRepeat"))
        poll = _flag(detectors.get("knownPollNoProgress"))
        ping_pong = _flag(detectors.get("pingPong"))
    else:
        generic = poll = ping_pong = True
    guard = get("postCompactionGuard")
    window = resolve_window_size(guard.get("windowSize")) if isinstance(guard, Mapping) else 3
    enabled = get("enabled")
    return ResolvedConfig(
        enabled=js_truthy(enabled),
        history_size=positive_int(get("historySize"), 30),
        warning_threshold=warning,
        critical_threshold=critical,
        unknown_tool_threshold=positive_int(get("unknownToolThreshold"), 10),
        global_circuit_breaker_threshold=breaker,
        generic_repeat=generic,
        known_poll_no_progress=poll,
        ping_pong=ping_pong,
        guard_enabled=enabled is not False,
        guard_window_size=window,
    )


@functools.lru_cache(maxsize=256)
def _resolve_loop_detection_config(config: LoopDetectionConfig) -> ResolvedConfig:
    # Safe to cache: the object is frozen and hashed by value.
    return _resolve_mapping(config.to_mapping())


def resolve_config(block: object) -> ResolvedConfig:
    """Resolve any block leniently (SPEC §2), as the detectors do on every call.

    Args:
        block: a camelCase mapping (already agent-merged), a ``LoopDetectionConfig``, a
            ``ResolvedConfig`` (returned as it is), or anything else (no block: defaults,
            detection off).

    Returns:
        The resolved config. Bad values silently become defaults; this never raises.
    """
    if isinstance(block, ResolvedConfig):
        return block
    if isinstance(block, (dict, Mapping)):  # dict first: the common case skips the ABC check
        return _resolve_mapping(block)
    if isinstance(block, LoopDetectionConfig):
        return _resolve_loop_detection_config(block)
    return DEFAULT_RESOLVED_CONFIG
