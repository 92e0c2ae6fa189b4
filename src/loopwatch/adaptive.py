"""The adaptive profile's detectors (issue #7): stop the short loops real agents fall into.

The reference detectors (SPEC §4) warn at 10 and block at 20 identical calls. Real agents get
stuck for 3–10 calls instead: the same failing call repeated with "thinking" calls in between,
the same error coming back while the arguments vary slightly, a call repeated with identical
results, or a short sequence of calls going round in circles. This module detects those shapes
early, and is built so that a run making progress is never stopped:

* **repeated_failure** — the same call (tool + args) failing again with the same error,
  counted across interleaved calls of other tools.
* **same_error** — one tool returning the same *normalised* error for calls whose arguments
  differ ("same error, slightly different args").
* **identical_streak** — the same call with the same outcome, consecutively.
* **cycle** — a sequence of 2–5 calls repeating with identical outcomes, lap after lap
  (blocked after 3 laps).

**Progress resets.** A successful call of a mutating tool (an edit, a write, a shell command
that writes a file, …) starts a new *segment*: the failure counts only look at the calls since
the last progress, so "edit, then re-run the test" is never a loop. Repeating the very same
write (same arguments, same outcome) within a segment is not new progress. Calls of thinking
tools (``think``) are transparent: they never break a streak and are never part of a loop.

Everything here is pure: records in, verdict out, no I/O, no clock, no logging. The session
engine builds one :class:`AdaptiveRecord` per call (:func:`build_adaptive_record`, at
``after_call`` time, from the raw params/result/error) and calls :func:`evaluate_adaptive`
before each call, alongside the reference detectors.

Configuration lives in the top-level ``loopwatch`` block of a config file, never inside
``tools.loopDetection``::

    loopwatch: {
      profile: "adaptive",
      adaptive: {
        window: 30,                                  // newest records considered
        repeatedFailure: { enabled: true, warn: 2, block: 3 },
        sameError:       { enabled: true, warn: 4, block: 6 },
        identicalStreak: { enabled: true, warn: 3, block: 4 },
        cycle: { enabled: true, minPeriod: 2, maxPeriod: 5, warnLaps: 2, blockLaps: 3 },
        mutatingTools: ["book_reservation"],         // added to the built-in list
        thinkingTools: ["scratchpad"],               // added to ["think"]
        shellTools: ["run"],                         // added to the built-in list
      },
    }

Every count includes the upcoming call: ``repeatedFailure.block: 3`` blocks the third attempt
of a call that failed twice with the same error.
"""

from __future__ import annotations

import json
import numbers
import re
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from loopwatch.config import (
    MSG_EXPECTED_BOOLEAN,
    MSG_EXPECTED_LIST,
    MSG_EXPECTED_OBJECT,
    MSG_EXPECTED_POSITIVE_INTEGER,
    MSG_EXPECTED_STRING,
    MSG_UNKNOWN_KEY,
    ConfigError,
    ConfigIssue,
)
from loopwatch.core._undefined import UNDEFINED
from loopwatch.core.naming import normalize_tool_name
from loopwatch.detectors.reference import is_known_poll
from loopwatch.fingerprint import digest, hash_tool_call, sha256_hex
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
from loopwatch.outcomes import error_text, hash_tool_outcome

AdaptiveLevel = Literal["warning", "critical"]

# --- detector names ------------------------------------------------------------------------

REPEATED_FAILURE: Final = "repeated_failure"
SAME_ERROR: Final = "same_error"
IDENTICAL_STREAK: Final = "identical_streak"
CYCLE: Final = "cycle"

#: Detectors in the order they win a tie (same level): the most specific evidence first.
ADAPTIVE_DETECTORS: Final[tuple[str, ...]] = (REPEATED_FAILURE, IDENTICAL_STREAK, CYCLE, SAME_ERROR)

# --- built-in tool sets (normalised names, SPEC §5.1) ---------------------------------------

#: Tools whose successful call changes files or state: progress that resets the counts.
DEFAULT_MUTATING_TOOLS: Final[frozenset[str]] = frozenset(
    {
        "apply_patch",
        "create",
        "create_file",
        "delete_file",
        "edit",
        "edit_file",
        "insert",
        "move_file",
        "multi_edit",
        "multiedit",
        "notebook_edit",
        "patch",
        "remove_file",
        "rename_file",
        "replace_in_file",
        "search_replace",
        "str_replace",
        "str_replace_based_edit_tool",
        "str_replace_editor",
        "write",
        "write_file",
        "write_to_file",
    }
)

#: Tools that only think (scratch notes): transparent to every detector.
DEFAULT_THINKING_TOOLS: Final[frozenset[str]] = frozenset({"think"})

#: Shell tools: a successful call is progress when its command text writes (see
#: :func:`shell_command_mutates`). ``bash`` is normalised to ``exec`` (SPEC §5.1).
DEFAULT_SHELL_TOOLS: Final[frozenset[str]] = frozenset(
    {
        "bash",
        "exec",
        "execute_bash",
        "execute_command",
        "run_command",
        "run_shell_command",
        "run_terminal_cmd",
        "shell",
        "terminal",
    }
)

#: ``command`` / ``action`` values that make an editor-style tool call read-only
#: (``str_replace_editor`` with ``command: "view"``).
READ_ONLY_ACTIONS: Final[frozenset[str]] = frozenset(
    {"cat", "find", "get", "list", "ls", "read", "search", "show", "view"}
)

# --- configuration --------------------------------------------------------------------------

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
MSG_BLOCK_NOT_ABOVE_WARN: Final = "must be greater than warn ({warn})"
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
        warn: count at which the call gets a warning (``2 <= warn < block``).
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
    if warn_ok and block_ok and int(value.block) <= int(value.warn):
        _issue(issues, f"{path}.block", MSG_BLOCK_NOT_ABOVE_WARN.format(warn=int(value.warn)))
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
    return DetectorThresholds(warn=2, block=3)


def _default_same_error() -> DetectorThresholds:
    return DetectorThresholds(warn=4, block=6)


def _default_identical_streak() -> DetectorThresholds:
    return DetectorThresholds(warn=3, block=4)


@dataclass(frozen=True, kw_only=True)
class AdaptiveConfig:
    """Settings of the adaptive detectors: the ``loopwatch.adaptive`` block of a config file.

    Immutable and validated once; the detectors read plain attributes.

    Args:
        window: how many of the newest records the detectors look at (default 30, the
            reference ``historySize``).
        repeated_failure: the same call failing with the same error (default warn 2, block 3).
        same_error: one tool, the same normalised error, differing arguments (default warn 4,
            block 6; at least two distinct argument sets are required).
        identical_streak: the same call with the same outcome in a row (default warn 3,
            block 4).
        cycle: repeating sequences of 2–5 calls (default: warn after 2 identical laps, block
            the call that would start a fourth lap after 3).
        mutating_tools: tool names whose successful calls count as progress, in addition to
            :data:`DEFAULT_MUTATING_TOOLS` (the host's own writers, e.g. ``book_reservation``).
        thinking_tools: scratch tools, in addition to :data:`DEFAULT_THINKING_TOOLS`.
        shell_tools: shell tools whose command text is inspected for writes, in addition to
            :data:`DEFAULT_SHELL_TOOLS`.

    Raises:
        ConfigError: every invalid field at once, with paths such as
            ``loopwatch.adaptive.repeatedFailure.block``.
    """

    window: int = 30
    repeated_failure: DetectorThresholds = field(default_factory=_default_repeated_failure)
    same_error: DetectorThresholds = field(default_factory=_default_same_error)
    identical_streak: DetectorThresholds = field(default_factory=_default_identical_streak)
    cycle: CycleSettings = field(default_factory=CycleSettings)
    mutating_tools: tuple[str, ...] = ()
    thinking_tools: tuple[str, ...] = ()
    shell_tools: tuple[str, ...] = ()
    # Resolved sets (built-in ∪ extra names); computed once, read on every call.
    all_mutating_tools: frozenset[str] = field(init=False, repr=False, compare=False)
    all_thinking_tools: frozenset[str] = field(init=False, repr=False, compare=False)
    all_shell_tools: frozenset[str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        issues: list[ConfigIssue] = []
        _check_int(self.window, f"{CONFIG_PATH}.window", 2, issues)
        checked: dict[str, object] = {
            "repeated_failure": _checked_thresholds(
                self.repeated_failure, f"{CONFIG_PATH}.repeatedFailure", issues
            ),
            "same_error": _checked_thresholds(self.same_error, f"{CONFIG_PATH}.sameError", issues),
            "identical_streak": _checked_thresholds(
                self.identical_streak, f"{CONFIG_PATH}.identicalStreak", issues
            ),
            "cycle": _checked_cycle(self.cycle, f"{CONFIG_PATH}.cycle", issues),
        }
        for attr, key in (
            ("mutating_tools", "mutatingTools"),
            ("thinking_tools", "thinkingTools"),
            ("shell_tools", "shellTools"),
        ):
            checked[attr] = _normalise_names(getattr(self, attr), f"{CONFIG_PATH}.{key}", issues)
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
        return {
            "window": self.window,
            "repeatedFailure": self.repeated_failure.to_mapping(),
            "sameError": self.same_error.to_mapping(),
            "identicalStreak": self.identical_streak.to_mapping(),
            "cycle": self.cycle.to_mapping(),
            "mutatingTools": list(self.mutating_tools),
            "thinkingTools": list(self.thinking_tools),
            "shellTools": list(self.shell_tools),
        }


_TOP_KEYS: Final = frozenset(
    {
        "window",
        "repeatedFailure",
        "sameError",
        "identicalStreak",
        "cycle",
        "mutatingTools",
        "thinkingTools",
        "shellTools",
    }
)
_ATTR_OF: Final = {
    "window": "window",
    "repeatedFailure": "repeated_failure",
    "sameError": "same_error",
    "identicalStreak": "identical_streak",
    "mutatingTools": "mutating_tools",
    "thinkingTools": "thinking_tools",
    "shellTools": "shell_tools",
}
_THRESHOLD_DEFAULTS: Final = {
    "repeatedFailure": _default_repeated_failure,
    "sameError": _default_same_error,
    "identicalStreak": _default_identical_streak,
}
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

# --- records --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class AdaptiveRecord:
    """What the adaptive detectors know about one call: digests and flags, never raw data.

    Attributes:
        tool_name: the normalised tool name (SPEC §5.1).
        args_hash: the call signature ``tool:sha256`` (SPEC §3.2).
        result_hash: the reference outcome hash (SPEC §3.3; errors are ``"error:" + …``), or
            ``None`` while the call is pending or when nothing was hashed.
        error_class: a digest of the *normalised* error text (echoed arguments, numbers,
            hex ids, paths and quoted strings removed), so "the same error with slightly
            different arguments" collides; ``None`` when the call did not fail or its error
            says nothing beyond an exit status.
        failure_hash: for a failed call, a digest of everything the model saw of the failure
            (the error text *and* the result's text); ``None`` otherwise. "The same error
            again" compares these: a shell tool's error is often only ``returncode 1`` while
            the output that comes with it differs from one run to the next.
        failed: the call failed: an error was raised, or the result itself reports a
            failure (``ERROR: …``, a non-zero exit, ``isError``; see :func:`result_failure_text`).
        mutating: a successful call that changes state (a mutating tool, or a shell command
            that writes); a candidate progress reset.
        thinking: a call of a thinking/scratch tool; transparent to every detector.
        polling: a known poll (SPEC §4 ``knownPoll``); left to the reference's poll detector.
    """

    tool_name: str
    args_hash: str
    result_hash: str | None = None
    error_class: str | None = None
    failure_hash: str | None = None
    failed: bool = False
    mutating: bool = False
    thinking: bool = False
    polling: bool = False


# --- failure text and error classes ---------------------------------------------------------

_SOFT_FAILURE_PREFIX: Final = re.compile(r"\A\s*(?:ERROR|Error|error)\s*[:!]")
_SOFT_FAILURE_MARKERS: Final = (
    # SWE-agent's edit command: the edit was rejected and not applied.
    re.compile(r"Your proposed edit has introduced new syntax error"),
    # mini-swe-agent: a non-zero exit wrapped into the observation.
    re.compile(r"\A\s*<returncode>\s*[1-9]\d*\s*</returncode>"),
    # OpenClaw exec: the exit status appended to the output.
    re.compile(r"\(Command exited with code [1-9]\d*\)\s*\Z"),
)
_FAILED_STATUSES: Final = frozenset({"error", "failed", "failure"})


def _result_text(result: object) -> str | None:
    """The text a result shows the model: a string, or the text parts of ``content``."""
    if isinstance(result, str):
        return result
    if not isinstance(result, Mapping):
        return None
    content = result.get("content")
    parts: list[str] = []
    if isinstance(content, str):
        parts.append(content)
    elif isinstance(content, (list, tuple)):
        for entry in content:
            if isinstance(entry, Mapping) and isinstance(entry.get("text"), str):
                parts.append(entry["text"])
    return "\n".join(parts) if parts else None


def result_failure_text(result: object) -> str | None:
    """The failure a *result* reports, when the tool signalled it in-band instead of raising.

    Recognised (conservative, every rule documented): a result text starting with
    ``ERROR:`` / ``Error:`` (OpenHands' editor and many MCP servers), SWE-agent's rejected
    edit, a non-zero ``<returncode>``, OpenClaw exec's ``(Command exited with code N)``,
    ``isError: true`` (MCP), ``details.status`` of ``error`` / ``failed`` and a non-zero
    ``details.exitCode`` (OpenClaw exec).

    Returns:
        The failure's text (possibly ``""``), or ``None`` when the result reports success.
    """
    text = _result_text(result)
    if isinstance(result, Mapping):
        details = result.get("details")
        details = details if isinstance(details, Mapping) else {}
        status = details.get("status")
        exit_code = details.get("exitCode")
        if (
            result.get("isError") is True
            or (isinstance(status, str) and status in _FAILED_STATUSES)
            or (isinstance(exit_code, int) and not isinstance(exit_code, bool) and exit_code != 0)
        ):
            return text or ""
    if text is None:
        return None
    if _SOFT_FAILURE_PREFIX.match(text) or any(p.search(text) for p in _SOFT_FAILURE_MARKERS):
        return text
    return None


_QUOTED: Final = re.compile(r"'[^'\n]{0,400}'|\"[^\"\n]{0,400}\"|`[^`\n]{0,400}`")
_UUID: Final = re.compile(
    r"\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b"
)
_HEX: Final = re.compile(
    r"\b0x[0-9a-fA-F]+\b|\b(?=[0-9a-fA-F]*\d)(?=[0-9a-fA-F]*[a-fA-F])[0-9a-fA-F]{8,}\b"
)
_PATH: Final = re.compile(r"(?:[A-Za-z]:)?[\w.~…-]*(?:[\\/](?:[\w.~…-]*[\w~…-])?)+")
_NUMBER: Final = re.compile(r"[-+]?\d+(?:\.\d+)?")
_SPACES: Final = re.compile(r"\s+")
_BARE_STATUS: Final = re.compile(
    r"(?:(?:command )?(?:return ?code|exit(?:ed with)? (?:code|status)|status|code)\s*:?\s*)?"
    r"(?:<n>)?|(?:timeout|timed out|error|failed|failure|aborted)"
)
#: Longest normalised error text kept for the digest (tracebacks differ only further down).
_ERROR_CLASS_CHARS: Final = 400
#: Longest error text normalised (a traceback's head names the error).
_ERROR_SCAN_CHARS: Final = 4_000
_MIN_ECHO_CHARS: Final = 3
_MAX_ECHO_VALUES: Final = 64


def _arg_strings(params: object) -> list[str]:
    """String values of the params (nested), longest first: the candidates for echoes."""
    found: list[str] = []
    stack: list[tuple[object, int]] = [(params, 0)]
    while stack and len(found) < _MAX_ECHO_VALUES:
        value, depth = stack.pop()
        if isinstance(value, str):
            if len(value) >= _MIN_ECHO_CHARS:
                found.append(value)
        elif depth < 4 and isinstance(value, Mapping):
            stack.extend((item, depth + 1) for item in value.values())
        elif depth < 4 and isinstance(value, (list, tuple)):
            stack.extend((item, depth + 1) for item in value)
    return sorted(set(found), key=len, reverse=True)


def _echo_placeholder(value: str) -> str:
    """What an echoed argument becomes: the placeholder its own shape would get anyway."""
    if _PATH.fullmatch(value):
        return "<path>"
    if _NUMBER.fullmatch(value):
        return "<n>"
    return "<arg>"


def _unwrap_json_error(text: str) -> str:
    """``{"status": "error", "error": "File not found: …"}`` → ``File not found: …``."""
    stripped = text.strip()
    if not stripped.startswith("{"):
        return text
    try:
        value = json.loads(stripped)
    except ValueError:
        return text
    if isinstance(value, dict):
        for key in ("error", "message", "detail"):
            inner = value.get(key)
            if isinstance(inner, str) and inner.strip():
                return inner
    return text


def normalize_error_text(text: str, params: object = None) -> str:
    """The error with everything call-specific removed, lower-cased, whitespace collapsed.

    Steps, in order: unwrap a JSON error object; replace echoed argument strings by
    ``<arg>``; quoted strings by ``<q>``; UUIDs by ``<id>``; hex ids by ``<hex>``; paths
    by ``<path>``; numbers by ``<n>``; a final full stop is dropped.

    Args:
        text: the error text (SPEC §3.3 step 1) or a result's failure text.
        params: the call's params, whose string values are removed where echoed.

    Returns:
        The normalised text (at most 400 characters).
    """
    text = _unwrap_json_error(text[:_ERROR_SCAN_CHARS])
    for value in _arg_strings(params):
        if value in text:
            text = text.replace(value, _echo_placeholder(value))
    text = _QUOTED.sub("<q>", text)
    text = _UUID.sub("<id>", text)
    text = _HEX.sub("<hex>", text)
    text = _PATH.sub("<path>", text)
    text = _NUMBER.sub("<n>", text)
    text = _SPACES.sub(" ", text).strip().rstrip(".").lower()
    return text[:_ERROR_CLASS_CHARS]


def classify_error(text: str, params: object = None) -> str | None:
    """The ``error_class`` digest of a failure text, or ``None`` when it is uninformative.

    A bare exit status (``returncode 1``, ``exit code 2``, ``timeout``) says nothing about
    *which* error happened: two unrelated failing shell commands must not look like "the
    same error", so such texts get no class.
    """
    normalised = normalize_error_text(text, params)
    if _BARE_STATUS.fullmatch(normalised):
        return None
    return "errclass:" + sha256_hex(normalised)[:32]


# --- progress: which calls change state -----------------------------------------------------

_COMMAND_KEYS: Final = ("command", "cmd", "script")
_HEREDOC_START: Final = re.compile(r"<<-?\s*(['\"]?)([A-Za-z_][A-Za-z0-9_]*)\1")

_CMD_POS: Final = (
    r"(?:^|[\n;&|(`]|\$\(|\b(?:sudo|xargs|then|do|else|nohup|time|command)\b)[ \t]*"
    r"(?:[A-Za-z_][A-Za-z0-9_]*=\S{0,200}[ \t]+){0,8}"
)
#: In-place editors, judged per simple command: ``sed … -i`` / ``--in-place``, ``perl … -i``
#: (regular expressions over whole commands would be quadratic on adversarial input).
_IN_PLACE: Final = {
    "sed": re.compile(r"-[A-Za-z]*i[\w.]*|--in-place(?:=\S*)?"),
    "perl": re.compile(r"-[A-Za-z0-9]*i\S*"),
}
_SIMPLE_COMMANDS: Final = re.compile(r"[^\n;|&]+")
_SHELL_WRITES: Final = (
    # output redirection to a file (not a descriptor, not /dev/null)
    re.compile(r"(?<![<>&\-=\d])(?:\d|&)?>>?(?![>&=(|])[ \t]*(?!/dev/null\b)[^\s|&;<>()]"),
    # file system verbs at a command position
    re.compile(
        _CMD_POS + r"(?:rm|rmdir|mv|cp|mkdir|touch|ln|chmod|chown|truncate|install|patch|dd|rsync"
        r"|unzip(?!\s+-[lvtZ]))(?=\s|$)",
        re.MULTILINE,
    ),
    re.compile(_CMD_POS + r"tar\s+-?[A-Za-z]*x", re.MULTILINE),
    re.compile(r"\bfind\b[^\n;|&]{0,400}?\s-(?:delete|exec\s+(?:rm|mv|sed|chmod))\b"),
    # version control that rewrites the working tree
    re.compile(
        r"\bgit\s+(?:-C\s+\S+\s+)?(?:apply|am|checkout|restore|reset|stash|commit|merge|rebase"
        r"|cherry-pick|revert|mv|rm|switch|pull|clean)\b"
    ),
    # package installs change the environment
    re.compile(
        r"\b(?:pip3?|uv\s+pip|python3?\s+-m\s+pip|conda|mamba|apt(?:-get)?|yum|dnf|apk|brew)"
        r"\s+(?:-\S{0,100}\s+){0,6}(?:install|add|uninstall|remove)\b"
    ),
    re.compile(r"\b(?:npm|pnpm|yarn|bun)\s+(?:install|i|ci|add|remove|uninstall)\b"),
    re.compile(r"\b(?:cargo|poetry|uv)\s+(?:add|install|remove)\b"),
)
_CODE_WRITES: Final = (
    re.compile(r"\bopen\([^)\n]{0,300},\s*(?:mode\s*=\s*)?['\"](?:[wax]|r\+)[bt+]*['\"]"),
    re.compile(r"\.write_(?:text|bytes)\("),
    re.compile(r"(?<!stdout)(?<!stderr)(?<!sys)\.(?:write|writelines)\("),
    re.compile(r"\bshutil\.(?:copy\w*|move|rmtree)\("),
    re.compile(r"\bos\.(?:remove|unlink|rename|replace|makedirs|mkdir|rmdir|truncate)\("),
    re.compile(r"\.(?:unlink|mkdir|rename|touch|rmdir)\("),
    re.compile(r"\bjson\.dump\("),
    re.compile(r"\bfs\.(?:writeFile|appendFile|writeFileSync|appendFileSync|rmSync|unlinkSync)\b"),
)


#: Longest command text inspected: the writes that matter come first, and the regular
#: expressions stay fast on huge heredocs.
_MAX_SCAN_CHARS: Final = 50_000
_INLINE_SHELL: Final = re.compile(
    r"\b(?:ba|z|da)?sh\s+-[A-Za-z]*c\s+(['\"])((?:\\.|(?!\1).)*)\1", re.DOTALL
)


def _strip_quotes(shell: str) -> str:
    """Shell text with every quoted string replaced by ``Q``, in one pass.

    ``echo "a > b"`` writes nothing; what is inside quotes is an argument, not syntax. An
    unterminated quote runs to the end, as it would for the shell.
    """
    out: list[str] = []
    quote = ""
    index = 0
    while index < len(shell):
        char = shell[index]
        if quote:
            if char == "\\" and quote == '"':
                index += 1  # an escaped character inside double quotes
            elif char == quote:
                quote = ""
                out.append("Q")
        elif char in "'\"":
            quote = char
        else:
            out.append(char)
        index += 1
    if quote:
        out.append("Q")
    return "".join(out)


def _split_heredocs(command: str) -> tuple[str, str]:
    """(shell text, heredoc bodies): a heredoc's body is data, not shell syntax."""
    shell: list[str] = []
    bodies: list[str] = []
    lines = command.split("\n")
    index = 0
    while index < len(lines):
        line = lines[index]
        shell.append(line)
        delimiters = [m.group(2) for m in _HEREDOC_START.finditer(_strip_quotes(line))]
        if not delimiters:
            delimiters = [m.group(2) for m in _HEREDOC_START.finditer(line)]
        index += 1
        for delimiter in delimiters:
            while index < len(lines) and lines[index].strip() != delimiter:
                bodies.append(lines[index])
                index += 1
            index += 1  # the delimiter line
    return "\n".join(shell), "\n".join(bodies)


def shell_command_mutates(command: str) -> bool:
    """Whether a shell command visibly writes files or changes the environment.

    A deliberately generous heuristic (every write it misses can turn "edit, then re-run the
    test" into an apparent loop, while an extra reset only delays detection): in-place
    ``sed``/``perl``, output redirection to a file, ``tee``, file system verbs (``rm``,
    ``mv``, ``cp``, ``mkdir``, ``touch``, ``patch``, …), ``find -delete``, git commands that
    rewrite the working tree (``apply``, ``checkout``, ``restore``, ``stash``, …), package
    installs, and inline code (``python -c``, heredocs) that opens a file for writing or
    calls ``write_text`` / ``os.remove`` / ``shutil.move`` and the like. Running a script
    file that writes (``python fix.py``) is not visible in the command text.

    Args:
        command: the command text.

    Returns:
        ``True`` when the command writes.
    """
    shell, bodies = _split_heredocs(command[:_MAX_SCAN_CHARS])
    unquoted = _strip_quotes(shell)
    if _edits_in_place(unquoted) or any(pattern.search(unquoted) for pattern in _SHELL_WRITES):
        return True
    code = shell + "\n" + bodies
    if any(pattern.search(code) for pattern in _CODE_WRITES):
        return True
    # ``bash -c "…"``: the quoted script is shell syntax too.
    return any(
        shell_command_mutates(_unescape_inline(match.group(2)))
        for match in _INLINE_SHELL.finditer(shell)
        if len(match.group(2)) < len(command)
    )


def _edits_in_place(shell: str) -> bool:
    """``sed -i``, ``perl -pi``, ``tee FILE``: one linear pass over the simple commands."""
    for segment in _SIMPLE_COMMANDS.finditer(shell):
        after: set[str] = set()  # editors whose in-place option occurs later in the segment
        file_after = False  # a later word names a file (not an option, not /dev/null)
        for word in reversed(segment.group().split()):
            if (word in _IN_PLACE and word in after) or (word == "tee" and file_after):
                return True
            after.update(editor for editor, option in _IN_PLACE.items() if option.fullmatch(word))
            file_after = file_after or not (word.startswith("-") or word == "/dev/null")
    return False


def _unescape_inline(script: str) -> str:
    return script.replace("\\n", "\n").replace('\\"', '"')


def _command_text(params: object) -> str | None:
    if isinstance(params, str):
        return params
    if isinstance(params, Mapping):
        for key in _COMMAND_KEYS:
            value = params.get(key)
            if isinstance(value, str):
                return value
    return None


def _action_of(params: object) -> str | None:
    if isinstance(params, Mapping):
        for key in ("command", "action"):
            value = params.get(key)
            if isinstance(value, str):
                return value.strip().lower()
    return None


def is_mutating_call(tool_name: str, params: object, config: AdaptiveConfig) -> bool:
    """Whether a *successful* call of ``tool_name`` with ``params`` changes state.

    A tool of ``config.all_mutating_tools`` mutates unless its ``command``/``action`` is a
    read (``view``, ``read``, ``list``…); a shell tool mutates when its command text writes
    (:func:`shell_command_mutates`).
    """
    if tool_name in config.all_mutating_tools:
        action = _action_of(params)
        return action is None or action not in READ_ONLY_ACTIONS
    if tool_name in config.all_shell_tools:
        command = _command_text(params)
        return command is not None and shell_command_mutates(command)
    return False


# --- building records -----------------------------------------------------------------------


def build_adaptive_record(
    tool_name: str,
    params: object,
    *,
    result: object = UNDEFINED,
    error: object = UNDEFINED,
    config: AdaptiveConfig = DEFAULT_ADAPTIVE_CONFIG,
    send_tools: Collection[str] = (),
    normalizers: Collection[str] = (),
) -> AdaptiveRecord:
    """Build the record of one call from its raw params, result and error.

    This is the only place that sees raw data: the record keeps digests and flags. Call it
    at ``after_call`` time (the error's text is needed for ``error_class``); with neither
    ``result`` nor ``error`` it gives the pending record of a call that has not finished.

    Args:
        tool_name: the *normalised* tool name, as ``LoopGuard`` uses it (SPEC §5.1).
        params: the call's params.
        result: what the model was shown (``UNDEFINED``: no outcome).
        error: the failure (``UNDEFINED``: the call did not fail; ``None`` is an error,
            SPEC §9.1).
        config: the adaptive settings (tool sets).
        send_tools: as for :func:`loopwatch.hash_tool_outcome`.
        normalizers: as for :func:`loopwatch.hash_tool_call`.

    Returns:
        The record.

    Raises:
        TypeError: params, result or error cannot be serialised (SPEC §8.5), as for the
            reference hashes; ``LoopGuard`` fails open on it.
    """
    args_hash = hash_tool_call(tool_name, params, normalizers=normalizers)
    outcome = hash_tool_outcome(
        tool_name,
        params,
        result=result,
        error=error,
        send_tools=send_tools,
        normalizers=normalizers,
    )
    thinking = tool_name in config.all_thinking_tools
    polling = is_known_poll(tool_name, params)
    if outcome.result_hash is None:
        return AdaptiveRecord(tool_name, args_hash, thinking=thinking, polling=polling)
    failure = error_text(error) if error is not UNDEFINED else result_failure_text(result)
    failed = failure is not None
    failure_hash: str | None = None
    if failed:
        failure_hash = digest({"error": failure, "result": _result_text(result)})[:32]
    return AdaptiveRecord(
        tool_name=tool_name,
        args_hash=args_hash,
        result_hash=outcome.result_hash,
        error_class=classify_error(failure, params) if failure is not None else None,
        failure_hash=failure_hash,
        failed=failed,
        mutating=not failed and is_mutating_call(tool_name, params, config),
        thinking=thinking,
        polling=polling,
    )


# --- stored form -----------------------------------------------------------------------------

_FACTS_SEP: Final = "|"


def encode_facts(record: AdaptiveRecord) -> str:
    """The compact form kept on a history record (``ToolCallRecord.adaptive_facts``).

    Four flag characters (failed, mutating, thinking, polling), the error class and the
    failure hash: digests and flags only, so every store can keep it as one short string.
    """
    flags = "".join(
        "1" if flag else "0"
        for flag in (record.failed, record.mutating, record.thinking, record.polling)
    )
    return _FACTS_SEP.join((flags, record.error_class or "", record.failure_hash or ""))


def record_from_history(
    tool_name: str,
    args_hash: str,
    result_hash: str | None,
    facts: str | None,
    config: AdaptiveConfig = DEFAULT_ADAPTIVE_CONFIG,
) -> AdaptiveRecord:
    """Rebuild the adaptive view of a stored history record.

    A record written without facts (by a reference-profile guard sharing the store) is
    read conservatively: failed when its outcome is an error, never mutating.
    """
    if facts is None:
        return AdaptiveRecord(
            tool_name,
            args_hash,
            result_hash,
            failed=result_hash is not None and result_hash.startswith("error:"),
            thinking=tool_name in config.all_thinking_tools,
        )
    flags, error_class, failure_hash = facts.split(_FACTS_SEP, 2)
    return AdaptiveRecord(
        tool_name=tool_name,
        args_hash=args_hash,
        result_hash=result_hash,
        error_class=error_class or None,
        failure_hash=failure_hash or None,
        failed=flags[0] == "1",
        mutating=flags[1] == "1",
        thinking=flags[2] == "1",
        polling=flags[3] == "1",
    )


# --- verdicts -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class AdaptiveVerdict:
    """What an adaptive detector saw.

    Attributes:
        detector: ``repeated_failure``, ``same_error``, ``identical_streak`` or ``cycle``.
        level: ``warning`` or ``critical`` (block).
        count: the detector's count, the upcoming call included.
        indices: the calls that form the loop, as indices into the ``records`` passed to
            :func:`evaluate_adaptive`, oldest first.
        message: the model-facing text: which call repeats and what to do instead.
        tool_name: the upcoming call's tool.
        warning_key: identifies the loop, so a host emits its first warning once
            (``adaptive:<detector>:<tool>:…``).
    """

    detector: str
    level: AdaptiveLevel
    count: int
    indices: tuple[int, ...]
    message: str
    tool_name: str
    warning_key: str


def _level(count: int, warn: int, block: int) -> AdaptiveLevel | None:
    if count >= block:
        return "critical"
    if count >= warn:
        return "warning"
    return None


def _segment_start(records: Sequence[AdaptiveRecord], start: int) -> int:
    """Index of the newest progress record in ``records[start:]`` (``start`` if none).

    A mutating record is progress unless the same call with the same outcome already
    occurred since the previous progress: rewriting identical content is not progress.
    """
    segment = start
    seen: set[tuple[str, str | None]] = set()
    for index in range(start, len(records)):
        record = records[index]
        if not record.mutating:
            continue
        key = (record.args_hash, record.result_hash)
        if key in seen:
            continue
        segment = index
        seen = {key}
    return segment


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
        if record.thinking or record.tool_name != tool or record.args_hash != args_hash:
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
        if record.thinking or record.tool_name != tool or record.result_hash is None:
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
        if record.thinking:
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
        if record.thinking:
            continue
        if record.result_hash is None or record.polling:
            break
        seq.append(index)
    seq.reverse()
    for period in range(2, max_period + 1):
        if len(seq) < period:
            break
        unit = tuple(records[i] for i in seq[-period:])
        if unit[0].tool_name != tool or unit[0].args_hash != args_hash:
            continue
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


def _verdict(
    detector: str,
    level: AdaptiveLevel,
    count: int,
    indices: Iterable[int],
    template: str,
    tool: str,
    key: str,
    **extra: object,
) -> AdaptiveVerdict:
    message = template.format(tool=tool, count=count, prior=count - 1, **extra)
    return AdaptiveVerdict(
        detector=detector,
        level=level,
        count=count,
        indices=tuple(indices),
        message=message,
        tool_name=tool,
        warning_key=f"adaptive:{detector}:{tool}:{key}",
    )


def _candidates(
    records: Sequence[AdaptiveRecord],
    upcoming_tool: str,
    upcoming_args_hash: str,
    config: AdaptiveConfig,
) -> Iterator[AdaptiveVerdict]:
    start = max(0, len(records) - config.window)
    segment = _segment_start(records, start)

    thresholds = config.repeated_failure
    if thresholds.enabled:
        indices, failure_hash = _repeated_failure(
            records, segment, upcoming_tool, upcoming_args_hash
        )
        count = len(indices) + 1
        level = _level(count, thresholds.warn, thresholds.block) if indices else None
        if level is not None:
            template = (
                MSG_REPEATED_FAILURE_CRITICAL
                if level == "critical"
                else MSG_REPEATED_FAILURE_WARNING
            )
            key = f"{upcoming_args_hash}:{failure_hash}"
            yield _verdict(REPEATED_FAILURE, level, count, indices, template, upcoming_tool, key)

    thresholds = config.identical_streak
    if thresholds.enabled:
        indices = _identical_streak(records, start, upcoming_tool, upcoming_args_hash)
        count = len(indices) + 1
        level = _level(count, thresholds.warn, thresholds.block) if indices else None
        if level is not None:
            template = (
                MSG_IDENTICAL_STREAK_CRITICAL
                if level == "critical"
                else MSG_IDENTICAL_STREAK_WARNING
            )
            key = f"{upcoming_args_hash}:{records[indices[-1]].result_hash}"
            yield _verdict(IDENTICAL_STREAK, level, count, indices, template, upcoming_tool, key)

    settings = config.cycle
    if settings.enabled:
        found: list[tuple[int, float, _Cycle, AdaptiveLevel]] = []
        for cycle in _cycles(
            records, start, upcoming_tool, upcoming_args_hash, settings.max_period
        ):
            if cycle.period < settings.min_period:
                continue
            period = cycle.period
            # ``count - 1`` calls ran in the cycle; ``laps`` full laps of them are identical.
            level = _level(
                cycle.count, settings.warn_laps * period + 1, settings.block_laps * period + 1
            )
            if level is not None:
                found.append((level == "critical", cycle.count / period, cycle, level))
        if found:
            _, _, cycle, level = max(found, key=lambda item: (item[0], item[1]))
            period = cycle.period
            template = MSG_CYCLE_CRITICAL if level == "critical" else MSG_CYCLE_WARNING
            yield _verdict(
                CYCLE,
                level,
                cycle.count,
                cycle.indices,
                template,
                upcoming_tool,
                "|".join(sorted({r.args_hash for r in cycle.unit})),
                period=period,
                laps=(cycle.count - 1) // period,
                tools=" -> ".join(record.tool_name for record in cycle.unit),
            )

    thresholds = config.same_error
    if thresholds.enabled:
        indices, error_class, distinct = _same_error(records, segment, upcoming_tool)
        count = len(indices) + 1
        level = _level(count, thresholds.warn, thresholds.block) if distinct >= 2 else None
        if level is not None:
            template = MSG_SAME_ERROR_CRITICAL if level == "critical" else MSG_SAME_ERROR_WARNING
            yield _verdict(
                SAME_ERROR, level, count, indices, template, upcoming_tool, str(error_class)
            )


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
    if upcoming_tool in config.all_thinking_tools:
        return None  # scratch notes are never a loop
    best: AdaptiveVerdict | None = None
    for verdict in _candidates(records, upcoming_tool, upcoming_args_hash, config):
        if verdict.level == "critical":
            return verdict
        if best is None:
            best = verdict
    return best


__all__ = [
    "ADAPTIVE_DETECTORS",
    "CONFIG_PATH",
    "CYCLE",
    "DEFAULT_ADAPTIVE_CONFIG",
    "DEFAULT_MUTATING_TOOLS",
    "DEFAULT_SHELL_TOOLS",
    "DEFAULT_THINKING_TOOLS",
    "IDENTICAL_STREAK",
    "MSG_CYCLE_CRITICAL",
    "MSG_CYCLE_WARNING",
    "MSG_IDENTICAL_STREAK_CRITICAL",
    "MSG_IDENTICAL_STREAK_WARNING",
    "MSG_REPEATED_FAILURE_CRITICAL",
    "MSG_REPEATED_FAILURE_WARNING",
    "MSG_SAME_ERROR_CRITICAL",
    "MSG_SAME_ERROR_WARNING",
    "READ_ONLY_ACTIONS",
    "REPEATED_FAILURE",
    "SAME_ERROR",
    "AdaptiveConfig",
    "AdaptiveLevel",
    "AdaptiveRecord",
    "AdaptiveVerdict",
    "CycleSettings",
    "DetectorThresholds",
    "build_adaptive_record",
    "classify_error",
    "encode_facts",
    "evaluate_adaptive",
    "is_mutating_call",
    "normalize_error_text",
    "record_from_history",
    "result_failure_text",
    "shell_command_mutates",
]
