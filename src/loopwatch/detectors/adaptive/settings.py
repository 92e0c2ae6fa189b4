"""Settings of the adaptive detectors: the ``loopwatch.adaptive`` block, strictly validated.

A leaf of the configuration layer: it imports only the exception tree, the naming rules and
the tool-set constants (``progress``, standard library only), never :mod:`loopwatch.config`,
so the config module can validate the ``adaptive`` block without an import cycle.
"""

from __future__ import annotations

import numbers
from collections.abc import Collection, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from loopwatch.core.naming import normalize_tool_name
from loopwatch.detectors.adaptive.progress import (
    DEFAULT_MUTATING_TOOLS,
    DEFAULT_POLL_TOOLS,
    DEFAULT_SHELL_TOOLS,
    DEFAULT_THINKING_TOOLS,
)
from loopwatch.detectors.adaptive.shell_text import READ_ONLY_COMMANDS
from loopwatch.errors import ConfigError, ConfigIssue

# The readable reasons of strict loading, worded as loopwatch.config words them (SPEC §7.2);
# kept here so this module stays a leaf.
MSG_UNKNOWN_KEY: Final = "unknown key"
MSG_EXPECTED_BOOLEAN: Final = "expected a boolean"
MSG_EXPECTED_POSITIVE_INTEGER: Final = "expected an integer > 0"
MSG_EXPECTED_OBJECT: Final = "expected an object"
MSG_EXPECTED_LIST: Final = "expected a list"
MSG_EXPECTED_STRING: Final = "expected a string"


CONFIG_PATH: Final = "loopwatch.adaptive"

#: Upper bound of every integer setting: detection cost is linear in the window, and no
#: sensible threshold comes near it.
MAX_SETTING: Final = 10_000
#: Longest cycle period searched for (the cost of the cycle detector is period × window).
MAX_CYCLE_PERIOD: Final = 10

MSG_AT_LEAST_TWO: Final = "expected an integer >= 2"
MSG_TOO_LARGE: Final = f"expected an integer <= {MAX_SETTING}"
MSG_PERIOD_TOO_LARGE: Final = f"expected an integer <= {MAX_CYCLE_PERIOD}"
MSG_NON_BLANK: Final = "expected a non-blank string"
MSG_BLOCK_BELOW_WARN: Final = "must not be lower than warn ({warn})"
MSG_BLOCK_LAPS_NOT_ABOVE_WARN: Final = "must be greater than warnLaps ({warn})"
MSG_MAX_BELOW_MIN: Final = "must not be lower than minPeriod ({minimum})"


def _issue(issues: list[ConfigIssue], path: str, message: str) -> None:
    issues.append(ConfigIssue(path, message))


def _check_int(value: object, path: str, minimum: int, issues: list[ConfigIssue]) -> bool:
    """An integer ``>= minimum`` (``bool`` is not an integer here; ``3.0`` is ``3``)."""
    number: int | None = None
    integral = isinstance(value, numbers.Integral) and not isinstance(value, bool)
    if integral or (isinstance(value, float) and value.is_integer()):
        number = int(value)  # type: ignore[call-overload]
    if number is None or number < 1:
        _issue(issues, path, MSG_EXPECTED_POSITIVE_INTEGER)
        return False
    if number < minimum:
        _issue(issues, path, MSG_AT_LEAST_TWO)
        return False
    if number > MAX_SETTING:
        _issue(issues, path, MSG_TOO_LARGE)
        return False
    return True


def _check_bool(value: object, path: str, issues: list[ConfigIssue]) -> bool:
    if isinstance(value, bool):
        return True
    _issue(issues, path, MSG_EXPECTED_BOOLEAN)
    return False


def _normalise_names(value: object, path: str, issues: list[ConfigIssue]) -> tuple[str, ...]:
    """Tool names as ``LoopGuard`` sees them (SPEC §5.1), in order, without duplicates."""
    if isinstance(value, (str, bytes)) or not isinstance(value, Collection):
        _issue(issues, path, MSG_EXPECTED_LIST)
        return ()
    names: list[str] = []
    for index, item in enumerate(value):
        if not isinstance(item, str):
            _issue(issues, f"{path}[{index}]", MSG_EXPECTED_STRING)
            continue
        name = normalize_tool_name(item)
        if not name:
            _issue(issues, f"{path}[{index}]", MSG_NON_BLANK)
            continue
        if name not in names:
            names.append(name)
    return tuple(names)


@dataclass(frozen=True, slots=True, kw_only=True)
class DetectorThresholds:
    """Warn and block counts of one adaptive detector (the upcoming call included).

    Validated by the :class:`AdaptiveConfig` that holds it, which knows its path.

    Attributes:
        enabled: whether the detector runs at all.
        warn: count at which the call gets a warning (``2 <= warn <= block``; equal to
            ``block``: the detector never warns, its first evidence blocks).
        block: count at which the call is blocked.
    """

    enabled: bool = True
    warn: int
    block: int

    def to_mapping(self) -> dict[str, Any]:
        """The camelCase form (every field)."""
        return {"enabled": self.enabled, "warn": self.warn, "block": self.block}


@dataclass(frozen=True, slots=True, kw_only=True)
class CycleSettings:
    """The cycle detector: a sequence of ``min_period``–``max_period`` calls repeating.

    A lap is one pass through the sequence. Once ``warn_laps`` identical laps have run in a
    row, the call that would start the next lap gets a warning; once ``block_laps`` have run,
    it is blocked. Validated by the :class:`AdaptiveConfig` that holds it.
    """

    enabled: bool = True
    min_period: int = 2
    max_period: int = 5
    warn_laps: int = 2
    block_laps: int = 3

    def to_mapping(self) -> dict[str, Any]:
        """The camelCase form (every field)."""
        return {
            "enabled": self.enabled,
            "minPeriod": self.min_period,
            "maxPeriod": self.max_period,
            "warnLaps": self.warn_laps,
            "blockLaps": self.block_laps,
        }


def _checked_thresholds(
    value: object, path: str, issues: list[ConfigIssue]
) -> DetectorThresholds | None:
    """``value`` with integral floats made ``int``, or ``None`` after recording its issues."""
    if not isinstance(value, DetectorThresholds):
        _issue(issues, path, MSG_EXPECTED_OBJECT)
        return None
    count = len(issues)
    _check_bool(value.enabled, f"{path}.enabled", issues)
    warn_ok = _check_int(value.warn, f"{path}.warn", 2, issues)
    block_ok = _check_int(value.block, f"{path}.block", 2, issues)
    if warn_ok and block_ok and int(value.block) < int(value.warn):
        _issue(issues, f"{path}.block", MSG_BLOCK_BELOW_WARN.format(warn=int(value.warn)))
    if len(issues) > count:
        return None
    return DetectorThresholds(enabled=value.enabled, warn=int(value.warn), block=int(value.block))


def _checked_cycle(value: object, path: str, issues: list[ConfigIssue]) -> CycleSettings | None:
    """``value`` with integral floats made ``int``, or ``None`` after recording its issues."""
    if not isinstance(value, CycleSettings):
        _issue(issues, path, MSG_EXPECTED_OBJECT)
        return None
    count = len(issues)
    _check_bool(value.enabled, f"{path}.enabled", issues)
    min_ok = _check_int(value.min_period, f"{path}.minPeriod", 2, issues)
    max_ok = _check_int(value.max_period, f"{path}.maxPeriod", 2, issues)
    if max_ok and int(value.max_period) > MAX_CYCLE_PERIOD:
        _issue(issues, f"{path}.maxPeriod", MSG_PERIOD_TOO_LARGE)
        max_ok = False
    if min_ok and max_ok and int(value.max_period) < int(value.min_period):
        minimum = int(value.min_period)
        _issue(issues, f"{path}.maxPeriod", MSG_MAX_BELOW_MIN.format(minimum=minimum))
    warn_ok = _check_int(value.warn_laps, f"{path}.warnLaps", 2, issues)
    block_ok = _check_int(value.block_laps, f"{path}.blockLaps", 2, issues)
    if warn_ok and block_ok and int(value.block_laps) <= int(value.warn_laps):
        warn = int(value.warn_laps)
        _issue(issues, f"{path}.blockLaps", MSG_BLOCK_LAPS_NOT_ABOVE_WARN.format(warn=warn))
    if len(issues) > count:
        return None
    return CycleSettings(
        enabled=value.enabled,
        min_period=int(value.min_period),
        max_period=int(value.max_period),
        warn_laps=int(value.warn_laps),
        block_laps=int(value.block_laps),
    )


def _default_repeated_failure() -> DetectorThresholds:
    # No warning before the block: one retry of a failed call is healthy (a transient error,
    # a double check), and a warning injected before it tells the model not to do it.
    return DetectorThresholds(warn=3, block=3)


def _default_same_error() -> DetectorThresholds:
    return DetectorThresholds(warn=4, block=6)


def _default_identical_streak() -> DetectorThresholds:
    # One re-check of a result is healthy; a third identical call in a row with the same
    # outcome is strong evidence (polls are judged by the poll detector instead).
    return DetectorThresholds(warn=3, block=3)


def _default_argument_churn() -> DetectorThresholds:
    return DetectorThresholds(warn=6, block=9)


def _default_terminal_failure() -> DetectorThresholds:
    return DetectorThresholds(warn=3, block=5)


def _default_typed_error() -> DetectorThresholds:
    return DetectorThresholds(warn=4, block=6)


def _default_unchanged_write() -> DetectorThresholds:
    return DetectorThresholds(warn=2, block=3)


def _default_poll_no_progress() -> DetectorThresholds:
    return DetectorThresholds(warn=8, block=12)


#: The threshold-style detectors: attribute, camelCase key, default. One entry per detector.
_THRESHOLD_FIELDS: Final = (
    ("repeated_failure", "repeatedFailure", _default_repeated_failure),
    ("same_error", "sameError", _default_same_error),
    ("identical_streak", "identicalStreak", _default_identical_streak),
    ("argument_churn", "argumentChurn", _default_argument_churn),
    ("terminal_failure", "terminalFailure", _default_terminal_failure),
    ("typed_error", "typedError", _default_typed_error),
    ("unchanged_write", "unchangedWrite", _default_unchanged_write),
    ("poll_no_progress", "pollNoProgress", _default_poll_no_progress),
)
#: The tool-name lists: attribute, camelCase key.
_NAME_FIELDS: Final = (
    ("mutating_tools", "mutatingTools"),
    ("thinking_tools", "thinkingTools"),
    ("shell_tools", "shellTools"),
    ("poll_tools", "pollTools"),
)
MSG_COMMAND_NAME: Final = "expected a command name (no whitespace)"


def _command_names(value: object, path: str, issues: list[ConfigIssue]) -> tuple[str, ...]:
    """Shell command names (``make``, ``kubectl``), in order, without duplicates."""
    if isinstance(value, (str, bytes)) or not isinstance(value, Collection):
        _issue(issues, path, MSG_EXPECTED_LIST)
        return ()
    names: list[str] = []
    for index, item in enumerate(value):
        if not isinstance(item, str):
            _issue(issues, f"{path}[{index}]", MSG_EXPECTED_STRING)
        elif not item.strip() or len(item.split()) != 1:
            _issue(issues, f"{path}[{index}]", MSG_COMMAND_NAME)
        elif item.strip() not in names:
            names.append(item.strip())
    return tuple(names)


@dataclass(frozen=True, kw_only=True)
class AdaptiveConfig:
    """Settings of the adaptive detectors: the ``loopwatch.adaptive`` block of a config file.

    Immutable and validated once; the detectors read plain attributes.

    Args:
        window: how many of the newest records the detectors look at (default 30, the
            reference ``historySize``).
        repeated_failure: the same call failing with the same error (default: block the
            third attempt, no warning before it: one retry of a failed call is healthy).
        same_error: one tool, the same normalised error, differing arguments (default warn 4,
            block 6; at least two distinct argument sets are required).
        identical_streak: the same call with the same outcome in a row (default: block the
            third, no warning before it).
        cycle: repeating sequences of 2–5 calls (default: warn after 2 identical laps, block
            the call that would start a fourth lap after 3).
        argument_churn: one tool cycling through a few argument variants (at most 3), each
            with one stable outcome, all failing or changing nothing (default warn 6,
            block 9, the upcoming call included).
        terminal_failure: consecutive shell failures, any command, with one failure
            identity once timestamps, clock times, retry counts, durations and pids are
            masked (default warn 3, block 5).
        typed_error: one tool failing with the same error code (errno, HTTP status,
            ``code=…``) across at least two argument sets (default warn 4, block 6).
        unchanged_write: the same write again after it reported that it changed nothing
            (default warn 2, block 3).
        poll_no_progress: the same poll (a waiting tool, ``sleep N && …``) in a row with an
            unchanged output (default warn 8, block 12: waiting is often
            legitimate, and the reference's poll detector also runs).
        mutating_tools: tool names whose successful calls count as progress, in addition to
            :data:`DEFAULT_MUTATING_TOOLS` (the host's own writers, e.g. ``book_reservation``).
        thinking_tools: scratch tools, in addition to :data:`DEFAULT_THINKING_TOOLS`.
        shell_tools: shell tools whose command text is inspected for writes, in addition to
            :data:`DEFAULT_SHELL_TOOLS`.
        poll_tools: waiting/polling tools, in addition to :data:`DEFAULT_POLL_TOOLS`.
        read_only_commands: shell command names that only read, in addition to
            :data:`READ_ONLY_COMMANDS` (a successful read-only command is no progress).

    Raises:
        ConfigError: every invalid field at once, with paths such as
            ``loopwatch.adaptive.repeatedFailure.block``.
    """

    window: int = 30
    repeated_failure: DetectorThresholds = field(default_factory=_default_repeated_failure)
    same_error: DetectorThresholds = field(default_factory=_default_same_error)
    identical_streak: DetectorThresholds = field(default_factory=_default_identical_streak)
    cycle: CycleSettings = field(default_factory=CycleSettings)
    argument_churn: DetectorThresholds = field(default_factory=_default_argument_churn)
    terminal_failure: DetectorThresholds = field(default_factory=_default_terminal_failure)
    typed_error: DetectorThresholds = field(default_factory=_default_typed_error)
    unchanged_write: DetectorThresholds = field(default_factory=_default_unchanged_write)
    poll_no_progress: DetectorThresholds = field(default_factory=_default_poll_no_progress)
    mutating_tools: tuple[str, ...] = ()
    thinking_tools: tuple[str, ...] = ()
    shell_tools: tuple[str, ...] = ()
    poll_tools: tuple[str, ...] = ()
    read_only_commands: tuple[str, ...] = ()
    # Resolved sets (built-in ∪ extra names); computed once, read on every call.
    all_mutating_tools: frozenset[str] = field(init=False, repr=False, compare=False)
    all_thinking_tools: frozenset[str] = field(init=False, repr=False, compare=False)
    all_shell_tools: frozenset[str] = field(init=False, repr=False, compare=False)
    all_poll_tools: frozenset[str] = field(init=False, repr=False, compare=False)
    all_read_only_commands: frozenset[str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        issues: list[ConfigIssue] = []
        _check_int(self.window, f"{CONFIG_PATH}.window", 2, issues)
        checked: dict[str, object] = {
            attr: _checked_thresholds(getattr(self, attr), f"{CONFIG_PATH}.{key}", issues)
            for attr, key, _default in _THRESHOLD_FIELDS
        }
        checked["cycle"] = _checked_cycle(self.cycle, f"{CONFIG_PATH}.cycle", issues)
        for attr, key in _NAME_FIELDS:
            checked[attr] = _normalise_names(getattr(self, attr), f"{CONFIG_PATH}.{key}", issues)
        checked["read_only_commands"] = _command_names(
            self.read_only_commands, f"{CONFIG_PATH}.readOnlyCommands", issues
        )
        if issues:
            raise ConfigError(issues)
        object.__setattr__(self, "window", int(self.window))
        for attr, value in checked.items():
            object.__setattr__(self, attr, value)
        object.__setattr__(
            self, "all_mutating_tools", DEFAULT_MUTATING_TOOLS | frozenset(self.mutating_tools)
        )
        object.__setattr__(
            self, "all_thinking_tools", DEFAULT_THINKING_TOOLS | frozenset(self.thinking_tools)
        )
        object.__setattr__(
            self, "all_shell_tools", DEFAULT_SHELL_TOOLS | frozenset(self.shell_tools)
        )
        object.__setattr__(self, "all_poll_tools", DEFAULT_POLL_TOOLS | frozenset(self.poll_tools))
        object.__setattr__(
            self,
            "all_read_only_commands",
            READ_ONLY_COMMANDS | frozenset(self.read_only_commands),
        )

    @classmethod
    def from_mapping(cls, block: object, *, path: str = CONFIG_PATH) -> AdaptiveConfig:
        """Load the camelCase ``adaptive`` block strictly (unknown keys are errors).

        Args:
            block: the parsed ``loopwatch.adaptive`` object; ``None`` means all defaults.
            path: the dotted path of ``block`` in issue messages.

        Returns:
            The validated config.

        Raises:
            ConfigError: every issue at once.
        """
        if block is None:
            return cls()
        if not isinstance(block, Mapping):
            raise ConfigError([ConfigIssue(path, MSG_EXPECTED_OBJECT)])
        issues: list[ConfigIssue] = []
        kwargs: dict[str, Any] = {}
        for key, value in _items(block, path, _TOP_KEYS, issues):
            if key in _THRESHOLD_DEFAULTS:
                kwargs[_ATTR_OF[key]] = _thresholds_from(
                    value, f"{path}.{key}", _THRESHOLD_DEFAULTS[key](), issues
                )
            elif key == "cycle":
                kwargs["cycle"] = _cycle_from(value, f"{path}.cycle", issues)
            else:
                kwargs[_ATTR_OF[key]] = value
        try:
            config = cls(**{k: v for k, v in kwargs.items() if v is not None})
        except ConfigError as exc:
            # The constructor reports paths under ``loopwatch.adaptive``; re-anchor them.
            issues.extend(
                ConfigIssue(path + issue.path[len(CONFIG_PATH) :], issue.message)
                for issue in exc.issues
            )
        if issues:
            raise ConfigError(issues)
        return config

    def to_mapping(self) -> dict[str, Any]:
        """The camelCase ``adaptive`` block (every field; tool lists are the extra names)."""
        block: dict[str, Any] = {"window": self.window}
        for attr, key, _default in _THRESHOLD_FIELDS:
            block[key] = getattr(self, attr).to_mapping()
        block["cycle"] = self.cycle.to_mapping()
        for attr, key in _NAME_FIELDS:
            block[key] = list(getattr(self, attr))
        block["readOnlyCommands"] = list(self.read_only_commands)
        return block


_ATTR_OF: Final = {
    "window": "window",
    "readOnlyCommands": "read_only_commands",
    **{key: attr for attr, key, _default in _THRESHOLD_FIELDS},
    **{key: attr for attr, key in _NAME_FIELDS},
}
_THRESHOLD_DEFAULTS: Final = {key: default for _attr, key, default in _THRESHOLD_FIELDS}
_TOP_KEYS: Final = frozenset({*_ATTR_OF, "cycle"})
_THRESHOLD_KEYS: Final = frozenset({"enabled", "warn", "block"})
_CYCLE_KEYS: Final = {
    "enabled": "enabled",
    "minPeriod": "min_period",
    "maxPeriod": "max_period",
    "warnLaps": "warn_laps",
    "blockLaps": "block_laps",
}


def _items(
    block: Mapping[Any, Any], path: str, allowed: Collection[str], issues: list[ConfigIssue]
) -> Iterator[tuple[str, Any]]:
    """The known keys of an object; unknown (or non-string) keys become issues."""
    for key, value in block.items():
        if isinstance(key, str) and key in allowed:
            yield key, value
        else:
            _issue(issues, f"{path}.{key}", MSG_UNKNOWN_KEY)


def _thresholds_from(
    value: object, path: str, default: DetectorThresholds, issues: list[ConfigIssue]
) -> DetectorThresholds | None:
    """An unvalidated ``DetectorThresholds`` from a camelCase object (defaults filled in)."""
    if not isinstance(value, Mapping):
        _issue(issues, path, MSG_EXPECTED_OBJECT)
        return None
    fields_: dict[str, Any] = default.to_mapping()
    fields_.update(_items(value, path, _THRESHOLD_KEYS, issues))
    return DetectorThresholds(**fields_)


def _cycle_from(value: object, path: str, issues: list[ConfigIssue]) -> CycleSettings | None:
    """An unvalidated ``CycleSettings`` from a camelCase object (defaults filled in)."""
    if not isinstance(value, Mapping):
        _issue(issues, path, MSG_EXPECTED_OBJECT)
        return None
    return CycleSettings(
        **{_CYCLE_KEYS[key]: item for key, item in _items(value, path, _CYCLE_KEYS, issues)}
    )


#: The configuration with every default; what ``profile="adaptive"`` uses when the config
#: file has no ``loopwatch.adaptive`` block.
DEFAULT_ADAPTIVE_CONFIG: Final = AdaptiveConfig()
