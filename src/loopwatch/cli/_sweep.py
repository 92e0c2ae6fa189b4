"""``loopwatch scan --sweep``: the same runs under a grid of thresholds.

``--sweep warningThreshold=5:20:5,criticalThreshold=10:40:10`` replays every run under each
combination and counts the runs and calls each setting would warn on and block: the table
a user reads to pick thresholds. Transcripts are parsed once; each combination only
replays (:func:`loopwatch.replay.replay_run` is pure, so the runs are reused as they are).

A combination the schema rejects (``warningThreshold >= criticalThreshold``,
``criticalThreshold >= globalCircuitBreakerThreshold``, both set in the same block) is not
replayed and is listed as skipped with the schema's reason. A threshold set alone is
accepted, as OpenClaw accepts it, and clamped at runtime (SPEC §2): the table shows the
effective values so a clamp is never hidden.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from loopwatch.config import Profile
from loopwatch.config.block import LoopDetectionConfig
from loopwatch.config.resolve import ResolvedConfig, resolve_config
from loopwatch.detectors.adaptive import AdaptiveConfig
from loopwatch.errors import ConfigError
from loopwatch.replay import ReplaySettings, replay_run
from loopwatch.transcripts import Run

from ._progress import Progress
from ._text import table

#: Sweepable settings: their name on the command line → their path in a block.
SWEEP_FIELDS: Final[Mapping[str, tuple[str, ...]]] = {
    "historySize": ("historySize",),
    "warningThreshold": ("warningThreshold",),
    "criticalThreshold": ("criticalThreshold",),
    "unknownToolThreshold": ("unknownToolThreshold",),
    "globalCircuitBreakerThreshold": ("globalCircuitBreakerThreshold",),
    "windowSize": ("postCompactionGuard", "windowSize"),
    "postCompactionGuard.windowSize": ("postCompactionGuard", "windowSize"),
}

#: More combinations than this is almost certainly a typo (``1:1000`` for ``1:10``).
MAX_COMBINATIONS: Final = 1000


@dataclass(frozen=True)
class SweepAxis:
    """One swept setting and its values."""

    name: str
    values: tuple[int, ...]


def _int(text: str, spec: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise ValueError(f"{spec}: {text!r} is not an integer") from None
    if value <= 0:
        raise ValueError(f"{spec}: values must be integers > 0")
    return value


def _values(text: str, spec: str) -> tuple[int, ...]:
    parts = text.split(":")
    if len(parts) == 1:
        return (_int(parts[0], spec),)
    if len(parts) not in (2, 3):
        raise ValueError(f"{spec}: expected VALUE or START:STOP[:STEP]")
    start, stop = _int(parts[0], spec), _int(parts[1], spec)
    step = _int(parts[2], spec) if len(parts) == 3 else 1
    if stop < start:
        raise ValueError(f"{spec}: STOP is below START")
    return tuple(range(start, stop + 1, step))


def parse_sweep(spec: str) -> tuple[SweepAxis, ...]:
    """Parse ``name=START:STOP[:STEP]`` (stop included) or ``name=VALUE``, comma-separated.

    Args:
        spec: the ``--sweep`` argument.

    Returns:
        The axes, in the order given.

    Raises:
        ValueError: an unknown or repeated setting, a bad range, or too many combinations.
    """
    axes: list[SweepAxis] = []
    seen: set[tuple[str, ...]] = set()
    for item in spec.split(","):
        item = item.strip()
        if not item:
            continue
        name, sep, values = item.partition("=")
        name = name.strip()
        if not sep:
            raise ValueError(f"{item}: expected NAME=START:STOP[:STEP]")
        if name not in SWEEP_FIELDS:
            known = ", ".join(sorted(SWEEP_FIELDS))
            raise ValueError(f"{item}: unknown setting {name!r} (one of: {known})")
        if SWEEP_FIELDS[name] in seen:
            raise ValueError(f"{item}: {name} is swept twice")
        seen.add(SWEEP_FIELDS[name])
        axes.append(SweepAxis(name, _values(values.strip(), item)))
    if not axes:
        raise ValueError("--sweep needs at least one NAME=START:STOP[:STEP]")
    count = 1
    for axis in axes:
        count *= len(axis.values)
    if count > MAX_COMBINATIONS:
        raise ValueError(f"{count} combinations is more than {MAX_COMBINATIONS}")
    return tuple(axes)


def combinations(axes: Sequence[SweepAxis]) -> Iterator[tuple[tuple[str, int], ...]]:
    """Every combination of the axes' values, the last axis varying fastest."""
    for values in itertools.product(*(axis.values for axis in axes)):
        yield tuple(zip((axis.name for axis in axes), values, strict=True))


def apply_setting(block: Mapping[str, Any], setting: Sequence[tuple[str, int]]) -> dict[str, Any]:
    """A copy of ``block`` with the swept values set (nested objects copied, not shared)."""
    out: dict[str, Any] = {
        key: dict(value) if isinstance(value, Mapping) else value for key, value in block.items()
    }
    for name, value in setting:
        path = SWEEP_FIELDS[name]
        if len(path) == 1:
            out[path[0]] = value
        else:
            nested = out.get(path[0])
            out[path[0]] = {**(nested if isinstance(nested, Mapping) else {}), path[1]: value}
    return out


@dataclass(frozen=True)
class SweepRow:
    """What one combination would have done to the scanned runs.

    ``skipped`` holds the schema's reason when the combination was not replayed; the counts
    are then 0 and ``resolved`` is ``None``.
    """

    setting: tuple[tuple[str, int], ...]
    skipped: str | None
    resolved: ResolvedConfig | None
    runs: int = 0
    calls: int = 0
    runs_warned: int = 0
    calls_warned: int = 0
    runs_blocked: int = 0
    calls_blocked: int = 0
    wasted_calls: int = 0


def sweep_one(
    runs: Sequence[Run],
    base_block: Mapping[str, Any],
    setting: tuple[tuple[str, int], ...],
    profile: Profile | None,
    adaptive: AdaptiveConfig | None = None,
) -> SweepRow:
    """Replay every run under one combination and add up its decisions."""
    block = apply_setting(base_block, setting)
    try:
        LoopDetectionConfig.from_mapping(block)
    except ConfigError as exc:
        reason = "; ".join(issue.message for issue in exc.issues)
        return SweepRow(setting=setting, skipped=reason, resolved=None)
    settings = ReplaySettings(config=block, profile=profile, adaptive=adaptive)
    replays = [replay_run(run, settings) for run in runs]
    return SweepRow(
        setting=setting,
        skipped=None,
        resolved=resolve_config(block),
        runs=len(replays),
        calls=sum(r.calls for r in replays),
        runs_warned=sum(1 for r in replays if r.warned),
        calls_warned=sum(r.calls_warned for r in replays),
        runs_blocked=sum(1 for r in replays if r.blocked or r.aborted),
        calls_blocked=sum(r.calls_blocked for r in replays),
        wasted_calls=sum(r.wasted_calls for r in replays),
    )


def run_sweep(
    runs: Sequence[Run],
    base_block: Mapping[str, Any],
    axes: Sequence[SweepAxis],
    *,
    profile: Profile | None = None,
    adaptive: AdaptiveConfig | None = None,
    progress: Progress | None = None,
) -> tuple[SweepRow, ...]:
    """Replay ``runs`` under every combination of ``axes`` over ``base_block``.

    Args:
        runs: the parsed runs (replayed as they are, once per combination).
        base_block: the ``tools.loopDetection`` block the settings are applied to.
        axes: the swept settings.
        profile: the loopwatch profile.
        adaptive: the adaptive profile's settings (default: its defaults).
        progress: advanced once per combination.

    Returns:
        One row per combination, in :func:`combinations` order.
    """
    rows: list[SweepRow] = []
    for setting in combinations(axes):
        rows.append(sweep_one(runs, base_block, setting, profile, adaptive))
        if progress is not None:
            progress.advance()
    return tuple(rows)


def render_sweep(rows: Sequence[SweepRow], axes: Sequence[SweepAxis]) -> str:
    """The sweep table: one line per replayed combination, then the skipped ones."""
    names = [axis.name for axis in axes]
    header = [
        *names,
        "effective w/c/g",
        "runs warned",
        "calls warned",
        "runs blocked",
        "calls blocked",
        "wasted",
    ]
    body: list[list[str]] = []
    for row in rows:
        if row.skipped is not None or row.resolved is None:
            continue
        r = row.resolved
        effective = (
            f"{r.warning_threshold}/{r.critical_threshold}/{r.global_circuit_breaker_threshold}"
        )
        body.append(
            [
                *(str(value) for _name, value in row.setting),
                effective,
                f"{row.runs_warned}/{row.runs}",
                str(row.calls_warned),
                f"{row.runs_blocked}/{row.runs}",
                str(row.calls_blocked),
                str(row.wasted_calls),
            ]
        )
    right = frozenset(range(len(header)))
    lines = [table(header, body, right=right) if body else "(every combination was skipped)"]
    skipped = [row for row in rows if row.skipped is not None]
    if skipped:
        noun = "combination" if len(skipped) == 1 else "combinations"
        lines += ["", f"skipped {len(skipped)} {noun} the schema rejects:"]
        lines += [
            "  " + ", ".join(f"{name}={value}" for name, value in row.setting) + f": {row.skipped}"
            for row in skipped
        ]
    return "\n".join(lines) + "\n"


def sweep_json(rows: Sequence[SweepRow]) -> list[dict[str, Any]]:
    """The sweep rows as ``--json`` reports them."""
    out: list[dict[str, Any]] = []
    for row in rows:
        entry: dict[str, Any] = {"setting": dict(row.setting), "skipped": row.skipped}
        if row.resolved is not None:
            entry.update(
                effective={
                    "warningThreshold": row.resolved.warning_threshold,
                    "criticalThreshold": row.resolved.critical_threshold,
                    "globalCircuitBreakerThreshold": (
                        row.resolved.global_circuit_breaker_threshold
                    ),
                },
                runs=row.runs,
                calls=row.calls,
                runs_warned=row.runs_warned,
                calls_warned=row.calls_warned,
                runs_blocked=row.runs_blocked,
                calls_blocked=row.calls_blocked,
                wasted_calls=row.wasted_calls,
            )
        out.append(entry)
    return out


__all__ = [
    "MAX_COMBINATIONS",
    "SWEEP_FIELDS",
    "SweepAxis",
    "SweepRow",
    "apply_setting",
    "combinations",
    "parse_sweep",
    "render_sweep",
    "run_sweep",
    "sweep_json",
    "sweep_one",
]
