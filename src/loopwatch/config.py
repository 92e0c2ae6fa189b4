"""Loop-detection configuration: strict loading, lenient resolution, per-agent merge.

Two readers of the same ``tools.loopDetection`` block live here, on purpose:

* **Strict** (SPEC §7): what a user writes — ``LoopDetectionConfig(...)``, ``from_mapping``,
  files, the ``config`` / ``openclaw_config`` of ``LoopGuard``. Every problem is reported at
  once, with its camelCase path, so a config is fixed in one round instead of one error per run.
* **Lenient** (SPEC §2): what the detectors do on every tool call with whatever block they are
  handed. It never raises and silently falls back to defaults, exactly as the reference does,
  so detection verdicts match OpenClaw's even for configs the schema would reject.

``resolve_config`` runs on every call, so it only reads plain values and builds one small frozen
``ResolvedConfig``; the hot path reads its attributes and never re-validates.
"""

from __future__ import annotations

import functools
import json
import numbers
import os
import re
import stat
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, fields
from typing import Any, Final, Literal

from loopwatch.core._undefined import UNDEFINED
from loopwatch.core.jsstr import js_lower, js_trim
from loopwatch.errors import ConfigError, ConfigIssue

Profile = Literal["reference", "adaptive"]

#: Valid values of ``loopwatch.profile`` and of the ``profile`` arguments, default first.
PROFILES: Final[tuple[Profile, ...]] = ("reference", "adaptive")

#: The keys allowed in a whole config's top-level ``loopwatch`` block. The adaptive profile
#: (issue 06) adds its settings here; everything else in that block is an ``unknown key``.
LOOPWATCH_BLOCK_KEYS: Final[frozenset[str]] = frozenset({"profile", "adaptive"})

#: JavaScript's ``Number.MAX_SAFE_INTEGER``: the reference's schema bound for integers.
MAX_SAFE_INTEGER: Final = 2**53 - 1

# Readable reasons of strict loading (SPEC §7.2). Only the two cross-field messages are
# normative; they say ``tools.loopDetection.`` even for an agent's block, as the reference does.
MSG_UNKNOWN_KEY: Final = "unknown key"
MSG_DUPLICATE_KEY: Final = "duplicate key"
MSG_EXPECTED_BOOLEAN: Final = "expected a boolean"
MSG_EXPECTED_POSITIVE_INTEGER: Final = "expected an integer > 0"
MSG_INTEGER_TOO_LARGE: Final = f"expected an integer <= {MAX_SAFE_INTEGER}"
MSG_EXPECTED_OBJECT: Final = "expected an object"
MSG_EXPECTED_LIST: Final = "expected a list"
MSG_EXPECTED_STRING: Final = "expected a string"
MSG_MISSING_KEY: Final = "required key missing"
MSG_EXPECTED_PROFILE: Final = 'expected "reference" or "adaptive"'
MSG_WARNING_NOT_BELOW_CRITICAL: Final = (
    "tools.loopDetection.warningThreshold must be lower than criticalThreshold."
)
MSG_CRITICAL_NOT_BELOW_GLOBAL: Final = (
    "tools.loopDetection.criticalThreshold must be lower than globalCircuitBreakerThreshold."
)


# --------------------------------------------------------------------------------------------
# Field metadata: the one table that names, defaults and documents every setting.
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ConfigField:
    """One leaf setting of a ``tools.loopDetection`` block.

    Kept in one table so the validators, ``to_mapping``, the docs and ``config check`` can
    never disagree about a name or a default.

    Attributes:
        name: camelCase key inside its object (``pingPong``).
        attr: snake_case attribute on the config dataclass (``ping_pong``).
        kind: ``"bool"`` or ``"int"`` (an integer > 0).
        default: the value ``resolve_config`` uses when the field is unset.
        help: one-line help text (SPEC §7.1), informative only.
        group: ``None`` for a top-level field, else the nested object (``detectors``).
    """

    name: str
    attr: str
    kind: Literal["bool", "int"]
    default: bool | int
    help: str
    group: Literal["detectors", "postCompactionGuard"] | None = None

    @property
    def path(self) -> str:
        """The dotted camelCase path relative to the block (``detectors.pingPong``)."""
        return f"{self.group}.{self.name}" if self.group else self.name


#: The six scalar fields of a block, in constructor order (the order issues are reported in).
BLOCK_FIELDS: Final[tuple[ConfigField, ...]] = (
    ConfigField(
        "enabled",
        "enabled",
        "bool",
        False,
        "Enable repetitive tool-call loop detection and backoff safety checks (default: false)",
    ),
    ConfigField(
        "historySize",
        "history_size",
        "int",
        30,
        "Tool history window size for loop detection (default: 30)",
    ),
    ConfigField(
        "warningThreshold",
        "warning_threshold",
        "int",
        10,
        "Repeated no-progress calls before a pattern is reported as a warning (default: 10)",
    ),
    ConfigField(
        "criticalThreshold",
        "critical_threshold",
        "int",
        20,
        "Repeated no-progress calls before a looping pattern is blocked (default: 20)",
    ),
    ConfigField(
        "unknownToolThreshold",
        "unknown_tool_threshold",
        "int",
        10,
        "Block repeated calls to the same unavailable tool after this many misses (default: 10)",
    ),
    ConfigField(
        "globalCircuitBreakerThreshold",
        "global_circuit_breaker_threshold",
        "int",
        30,
        "No-progress calls across all detectors that trip the global circuit breaker (default: 30)",
    ),
)

#: The three flags of the strict ``detectors`` object.
DETECTOR_FIELDS: Final[tuple[ConfigField, ...]] = (
    ConfigField(
        "genericRepeat",
        "generic_repeat",
        "bool",
        True,
        "Warn on repeated same-tool same-params calls; block when results are identical too "
        "(default: true)",
        "detectors",
    ),
    ConfigField(
        "knownPollNoProgress",
        "known_poll_no_progress",
        "bool",
        True,
        "Detect known polling tools that keep returning the same state (default: true)",
        "detectors",
    ),
    ConfigField(
        "pingPong",
        "ping_pong",
        "bool",
        True,
        "Detect alternating ping-pong call patterns (default: true)",
        "detectors",
    ),
)

#: The only field of the strict ``postCompactionGuard`` object.
GUARD_FIELDS: Final[tuple[ConfigField, ...]] = (
    ConfigField(
        "windowSize",
        "window_size",
        "int",
        3,
        "Number of post-compaction attempts during which the guard stays armed (default: 3)",
        "postCompactionGuard",
    ),
)

#: Every leaf setting (scalars in constructor order, then the nested ones), for docs and
#: ``config check``.
CONFIG_FIELDS: Final[tuple[ConfigField, ...]] = BLOCK_FIELDS + DETECTOR_FIELDS + GUARD_FIELDS

#: The eight keys a block may hold.
BLOCK_KEYS: Final[frozenset[str]] = frozenset(
    [f.name for f in BLOCK_FIELDS] + ["detectors", "postCompactionGuard"]
)

_BLOCK_FIELD_BY_NAME: Final = {f.name: f for f in BLOCK_FIELDS}
_DEFAULT_WINDOW_SIZE: Final = GUARD_FIELDS[0].default


# --------------------------------------------------------------------------------------------
# Shared value rules
# --------------------------------------------------------------------------------------------


def js_truthy(value: object) -> bool:
    """JavaScript truthiness of a config value (SPEC §2.4).

    Python's ``bool()`` would make ``[]`` and ``{}`` false; the reference treats every object as
    true, so only ``False``, ``None`` (``null``), ``UNDEFINED``, numbers equal to 0 (``-0.0``
    too), NaN and ``""`` are falsy here.

    Args:
        value: any value.

    Returns:
        Whether JavaScript would treat ``value`` as true.
    """
    if value is None or value is False or value is UNDEFINED:
        return False
    if isinstance(value, str):
        return value != ""
    if isinstance(value, numbers.Number) and not isinstance(value, bool):
        number: Any = value
        try:
            return not (number == 0 or number != number)
        except ArithmeticError:  # Decimal("sNaN") refuses to compare: it is a NaN.
            return False
    return True


def _positive_int(value: object, default: int) -> int:
    """The lenient number rule of SPEC §2: a positive integral value, else ``default``."""
    if type(value) is int:
        return value if value > 0 else default
    if value is None or isinstance(value, bool):
        return default
    if isinstance(value, float):
        # ``is_integer`` is false for NaN and the infinities.
        return int(value) if value > 0 and value.is_integer() else default
    if isinstance(value, numbers.Integral):
        number = int(value)
        return number if number > 0 else default
    return default


def resolve_window_size(value: object) -> int:
    """Resolve ``postCompactionGuard.windowSize`` leniently (SPEC §6.1).

    Args:
        value: the raw setting (any type).

    Returns:
        ``value`` as an ``int`` when it is a positive integral number (``2.0`` → 2, so logs
        print ``2``), else the default 3.
    """
    return _positive_int(value, _DEFAULT_WINDOW_SIZE)


def _strict_bool(value: object) -> tuple[bool | None, str | None]:
    if isinstance(value, bool):
        return value, None
    return None, MSG_EXPECTED_BOOLEAN


def _strict_int(value: object) -> tuple[int | None, str | None]:
    """The strict number rule of SPEC §7.2: ``(int value, None)`` or ``(None, reason)``."""
    integral = isinstance(value, numbers.Integral) or (
        isinstance(value, float) and value.is_integer()
    )
    if not integral or isinstance(value, bool):
        return None, MSG_EXPECTED_POSITIVE_INTEGER
    number = int(value)  # type: ignore[call-overload]
    if number <= 0:
        return None, MSG_EXPECTED_POSITIVE_INTEGER
    if number > MAX_SAFE_INTEGER:
        return None, MSG_INTEGER_TOO_LARGE
    return number, None


def _check_field(spec: ConfigField, value: object) -> tuple[bool | int | None, str | None]:
    return _strict_bool(value) if spec.kind == "bool" else _strict_int(value)


def _join(prefix: str, key: object) -> str:
    return f"{prefix}.{key}" if prefix else str(key)


# Duplicate keys survive JSON5 parsing only through ``object_pairs_hook``. Objects that had a
# duplicate are remembered by id together with the object itself (which keeps it alive, so the
# id cannot be reused) and their original pairs; every other object is a plain dict.
_Duplicates = Mapping[int, tuple[Mapping[Any, Any], list[tuple[Any, Any]]]]
_NO_DUPLICATES: Final[_Duplicates] = {}


def _pairs(obj: Mapping[Any, Any], dups: _Duplicates) -> Iterable[tuple[Any, Any]]:
    """The key/value pairs of ``obj`` as written, duplicates included."""
    if dups:
        entry = dups.get(id(obj))
        if entry is not None and entry[0] is obj:
            return entry[1]
    return obj.items()


def _validate_object(
    value: object,
    path: str,
    specs: tuple[ConfigField, ...],
    issues: list[ConfigIssue],
    dups: _Duplicates,
) -> dict[str, Any] | None:
    """Validate a strict nested object (``detectors``, ``postCompactionGuard``).

    Returns:
        The valid fields, coerced (``5.0`` → 5), or ``None`` when ``value`` is not a mapping.
    """
    if not isinstance(value, Mapping):
        issues.append(ConfigIssue(path, MSG_EXPECTED_OBJECT))
        return None
    by_name = {spec.name: spec for spec in specs}
    valid: dict[str, Any] = {}
    seen: set[Any] = set()
    for key, item in _pairs(value, dups):
        item_path = _join(path, key)
        if key in seen:
            issues.append(ConfigIssue(item_path, MSG_DUPLICATE_KEY))
        seen.add(key)
        spec = by_name.get(key) if isinstance(key, str) else None
        if spec is None:
            issues.append(ConfigIssue(item_path, MSG_UNKNOWN_KEY))
            continue
        coerced, message = _check_field(spec, item)
        if message is None:
            valid[spec.name] = coerced
        else:
            valid.pop(spec.name, None)
            issues.append(ConfigIssue(item_path, message))
    return valid


def _cross_field_issues(valid: Mapping[str, Any], prefix: str, issues: list[ConfigIssue]) -> None:
    """The two ordering checks of SPEC §7.1, only between fields that are both set and valid."""
    warning = valid.get("warningThreshold")
    critical = valid.get("criticalThreshold")
    breaker = valid.get("globalCircuitBreakerThreshold")
    if warning is not None and critical is not None and warning >= critical:
        issues.append(
            ConfigIssue(_join(prefix, "criticalThreshold"), MSG_WARNING_NOT_BELOW_CRITICAL)
        )
    if critical is not None and breaker is not None and critical >= breaker:
        issues.append(
            ConfigIssue(
                _join(prefix, "globalCircuitBreakerThreshold"), MSG_CRITICAL_NOT_BELOW_GLOBAL
            )
        )


def _validate_block(
    block: object,
    prefix: str,
    issues: list[ConfigIssue],
    dups: _Duplicates = _NO_DUPLICATES,
) -> dict[str, Any] | None:
    """Validate one ``tools.loopDetection`` block strictly, appending issues in document order.

    Returns:
        The valid fields as a camelCase dict (integers coerced, nested objects as dicts), or
        ``None`` when ``block`` is not a mapping.
    """
    if not isinstance(block, Mapping):
        issues.append(ConfigIssue(prefix, MSG_EXPECTED_OBJECT))
        return None
    valid: dict[str, Any] = {}
    seen: set[Any] = set()
    for key, value in _pairs(block, dups):
        path = _join(prefix, key)
        if key in seen:
            issues.append(ConfigIssue(path, MSG_DUPLICATE_KEY))
        seen.add(key)
        nested: dict[str, Any] | None
        if key == "detectors":
            nested = _validate_object(value, path, DETECTOR_FIELDS, issues, dups)
        elif key == "postCompactionGuard":
            nested = _validate_object(value, path, GUARD_FIELDS, issues, dups)
        else:
            spec = _BLOCK_FIELD_BY_NAME.get(key) if isinstance(key, str) else None
            if spec is None:
                issues.append(ConfigIssue(path, MSG_UNKNOWN_KEY))
                continue
            coerced, message = _check_field(spec, value)
            if message is None:
                valid[key] = coerced
            else:
                valid.pop(key, None)
                issues.append(ConfigIssue(path, message))
            continue
        if nested is None:
            valid.pop(key, None)
        else:
            valid[key] = nested
    _cross_field_issues(valid, prefix, issues)
    return valid


# --------------------------------------------------------------------------------------------
# Config objects
# --------------------------------------------------------------------------------------------


def _validate_attrs(
    obj: object, specs: tuple[ConfigField, ...], issues: list[ConfigIssue]
) -> dict[str, Any]:
    """Check the set attributes of a config dataclass, storing coerced integers in place.

    Returns:
        The valid set fields by camelCase name, for the cross-field checks.
    """
    valid: dict[str, Any] = {}
    for spec in specs:
        value = getattr(obj, spec.attr)
        if value is None:
            continue
        coerced, message = _check_field(spec, value)
        if message is not None:
            issues.append(ConfigIssue(spec.name, message))
            continue
        if coerced is not value:
            object.__setattr__(obj, spec.attr, coerced)
        valid[spec.name] = coerced
    return valid


def _set_fields(obj: object, specs: tuple[ConfigField, ...]) -> dict[str, Any]:
    return {spec.name: value for spec in specs if (value := getattr(obj, spec.attr)) is not None}


@dataclass(frozen=True, kw_only=True)
class Detectors:
    """The ``detectors`` object: which detectors run (``None`` = unset, resolved as on).

    Raises:
        ConfigError: a set flag is not a ``bool``.
    """

    generic_repeat: bool | None = None
    known_poll_no_progress: bool | None = None
    ping_pong: bool | None = None

    def __post_init__(self) -> None:
        issues: list[ConfigIssue] = []
        _validate_attrs(self, DETECTOR_FIELDS, issues)
        if issues:
            raise ConfigError(issues)

    def to_mapping(self) -> dict[str, Any]:
        """The set flags as a camelCase dict."""
        return _set_fields(self, DETECTOR_FIELDS)


@dataclass(frozen=True, kw_only=True)
class PostCompactionGuardConfig:
    """The ``postCompactionGuard`` object (``None`` = unset, resolved as 3).

    Raises:
        ConfigError: ``window_size`` is set and is not an integer in 1 … 2^53 − 1.
    """

    window_size: int | None = None

    def __post_init__(self) -> None:
        issues: list[ConfigIssue] = []
        _validate_attrs(self, GUARD_FIELDS, issues)
        if issues:
            raise ConfigError(issues)

    def to_mapping(self) -> dict[str, Any]:
        """The set field as a camelCase dict."""
        return _set_fields(self, GUARD_FIELDS)


def _check_profile(value: object, path: str, issues: list[ConfigIssue]) -> None:
    if not (isinstance(value, str) and value in PROFILES):
        issues.append(ConfigIssue(path, MSG_EXPECTED_PROFILE))


@dataclass(frozen=True, kw_only=True)
class LoopDetectionConfig:
    """A validated ``tools.loopDetection`` block.

    ``None`` means "not set": the defaults belong to ``resolve_config``, never to this object,
    so an agent block's ``to_mapping()`` never overrides global values it did not set.

    Args:
        enabled: master switch; ``False`` also disables recording and the post-compaction guard.
        history_size: records kept per session.
        warning_threshold: count at which a pattern warns.
        critical_threshold: count at which a pattern blocks.
        unknown_tool_threshold: misses of one unavailable tool before it is blocked.
        global_circuit_breaker_threshold: no-progress count that blocks whatever the detector.
        detectors: a ``Detectors`` or a camelCase mapping (converted).
        post_compaction_guard: a ``PostCompactionGuardConfig`` or a camelCase mapping.
        profile: ``"reference"`` (OpenClaw's behaviour) or ``"adaptive"``; not part of the block.

    Raises:
        ConfigError: with every issue (SPEC §7.2), including the cross-field ones when both
            fields are set.
    """

    enabled: bool | None = None
    history_size: int | None = None
    warning_threshold: int | None = None
    critical_threshold: int | None = None
    unknown_tool_threshold: int | None = None
    global_circuit_breaker_threshold: int | None = None
    detectors: Detectors | None = None
    post_compaction_guard: PostCompactionGuardConfig | None = None
    profile: Profile = "reference"

    def __post_init__(self) -> None:
        issues: list[ConfigIssue] = []
        valid = _validate_attrs(self, BLOCK_FIELDS, issues)
        self._convert_nested("detectors", "detectors", Detectors, DETECTOR_FIELDS, issues)
        self._convert_nested(
            "post_compaction_guard",
            "postCompactionGuard",
            PostCompactionGuardConfig,
            GUARD_FIELDS,
            issues,
        )
        _check_profile(self.profile, "profile", issues)
        _cross_field_issues(valid, "", issues)
        if issues:
            raise ConfigError(issues)

    def _convert_nested(
        self,
        attr: str,
        name: str,
        cls: type[Detectors] | type[PostCompactionGuardConfig],
        specs: tuple[ConfigField, ...],
        issues: list[ConfigIssue],
    ) -> None:
        value = getattr(self, attr)
        if value is None or isinstance(value, cls):
            return
        valid = _validate_object(value, name, specs, issues, _NO_DUPLICATES)
        if valid is not None:
            object.__setattr__(self, attr, _nested_from_valid(cls, specs, valid))

    @classmethod
    def from_mapping(cls, block: object, *, profile: Profile = "reference") -> LoopDetectionConfig:
        """Load a camelCase block strictly (SPEC §7.2).

        Args:
            block: a ``tools.loopDetection`` mapping. ``None`` values are issues: omit a key to
                leave it unset.
            profile: the profile to attach (it is never a key of the block).

        Returns:
            The validated config.

        Raises:
            ConfigError: every issue, paths relative to the block (``detectors.pingPong``).
        """
        issues: list[ConfigIssue] = []
        valid = _validate_block(block, "", issues)
        _check_profile(profile, "profile", issues)
        if issues or valid is None:
            raise ConfigError(issues)
        return cls._from_valid(valid, profile)

    @classmethod
    def from_file(
        cls, path: str | os.PathLike[str], *, agent_id: str | None = None
    ) -> LoopDetectionConfig:
        """Load a whole OpenClaw config file (JSON5 or JSON) and merge it for one agent.

        Each block in the file is validated on its own; the merged result is not re-checked,
        because OpenClaw accepts a threshold order that only the merge creates and clamps it
        at runtime (SPEC §2, §7.2).

        Args:
            path: the file to read (UTF-8, an optional BOM is ignored).
            agent_id: the agent whose block overrides the global one; ``None`` or ``""`` → the
                global block only.

        Returns:
            The merged block (every field unset when the file has none), with ``profile`` from
            the top-level ``loopwatch.profile``.

        Raises:
            ConfigError: the file cannot be read or parsed, or any block is invalid.
        """
        config = load_config_file(path)
        merged = merge_agent_config(config, agent_id) or {}
        return cls._from_valid(merged, profile_of_openclaw_config(config), cross_checked=False)

    @classmethod
    def _from_valid(
        cls, valid: Mapping[str, Any], profile: Profile, *, cross_checked: bool = True
    ) -> LoopDetectionConfig:
        """Build from a block whose fields were already validated one by one."""
        kwargs: dict[str, Any] = {}
        for spec in BLOCK_FIELDS:
            value = valid.get(spec.name)
            if value is not None:
                kwargs[spec.attr] = _check_field(spec, value)[0]
        detectors = valid.get("detectors")
        if isinstance(detectors, Mapping):
            kwargs["detectors"] = _nested_from_valid(Detectors, DETECTOR_FIELDS, detectors)
        guard = valid.get("postCompactionGuard")
        if isinstance(guard, Mapping):
            kwargs["post_compaction_guard"] = _nested_from_valid(
                PostCompactionGuardConfig, GUARD_FIELDS, guard
            )
        if cross_checked:
            return cls(profile=profile, **kwargs)
        # A merged block may order thresholds in a way the constructor would refuse; its
        # fields are already valid, so set them without the cross-field checks.
        obj = cls.__new__(cls)
        for field in fields(cls):
            object.__setattr__(obj, field.name, kwargs.get(field.name, field.default))
        object.__setattr__(obj, "profile", profile)
        return obj

    def to_mapping(self) -> dict[str, Any]:
        """The set fields as a camelCase block (``profile`` is not part of it).

        Returns:
            A new dict; ``detectors`` / ``postCompactionGuard`` appear only when set, with
            their set fields only.
        """
        out = _set_fields(self, BLOCK_FIELDS)
        if self.detectors is not None:
            out["detectors"] = self.detectors.to_mapping()
        if self.post_compaction_guard is not None:
            out["postCompactionGuard"] = self.post_compaction_guard.to_mapping()
        return out


def _nested_from_valid(
    cls: type[Detectors] | type[PostCompactionGuardConfig],
    specs: tuple[ConfigField, ...],
    valid: Mapping[str, Any],
) -> Any:
    kwargs = {spec.attr: valid[spec.name] for spec in specs if valid.get(spec.name) is not None}
    return cls(**kwargs)


# --------------------------------------------------------------------------------------------
# Lenient resolution (hot path)
# --------------------------------------------------------------------------------------------


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
    warning = _positive_int(get("warningThreshold"), 10)
    critical = _positive_int(get("criticalThreshold"), 20)
    if critical <= warning:
        critical = warning + 1
    breaker = _positive_int(get("globalCircuitBreakerThreshold"), 30)
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
        history_size=_positive_int(get("historySize"), 30),
        warning_threshold=warning,
        critical_threshold=critical,
        unknown_tool_threshold=_positive_int(get("unknownToolThreshold"), 10),
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


# --------------------------------------------------------------------------------------------
# Per-agent merge
# --------------------------------------------------------------------------------------------

_AGENT_ID_VALID: Final = re.compile(r"[a-z0-9][a-z0-9_-]{0,63}", re.IGNORECASE | re.ASCII)
_AGENT_ID_INVALID_RUN: Final = re.compile(r"[^a-z0-9_-]+")
_AGENT_ID_MAX_LENGTH: Final = 64
DEFAULT_AGENT_ID: Final = "main"


@functools.lru_cache(maxsize=1024)
def _normalize_agent_id_str(value: str) -> str:
    trimmed = js_trim(value)
    if not trimmed:
        return DEFAULT_AGENT_ID
    if _AGENT_ID_VALID.fullmatch(trimmed):
        return js_lower(trimmed)
    cleaned = _AGENT_ID_INVALID_RUN.sub("-", js_lower(trimmed))
    cleaned = cleaned.lstrip("-").rstrip("-")[:_AGENT_ID_MAX_LENGTH]
    return cleaned or DEFAULT_AGENT_ID


def normalize_agent_id(value: object) -> str:
    """Normalise an agent id as OpenClaw does (SPEC §7.3).

    Examples: ``"  "`` → ``main``, ``"-lead-"`` → ``lead``, ``"agent a"`` → ``agent-a``,
    ``"MAIN"`` → ``main``, ``"\\u212aelvin"`` → ``kelvin``.

    Args:
        value: an id; anything that is not a ``str`` counts as ``""`` (so ``main``).

    Returns:
        A non-empty id of at most 64 characters from ``[a-z0-9_-]``.
    """
    return _normalize_agent_id_str(value if isinstance(value, str) else "")


def _present_block(value: object) -> Mapping[Any, Any] | None:
    """A block slot as the merge sees it: absent/falsy → ``None``, non-mapping → ``{}``."""
    if not js_truthy(value):
        return None
    return value if isinstance(value, Mapping) else {}


def _loop_detection_of(tools: object) -> Mapping[Any, Any] | None:
    if not isinstance(tools, Mapping):
        return None
    return _present_block(tools.get("loopDetection"))


def _is_skipped_entry(entry: object) -> bool:
    """Entries that are JavaScript primitives have no properties to read: skip them."""
    return entry is None or entry is UNDEFINED or isinstance(entry, (str, bytes, numbers.Number))


def _agent_block(config: Mapping[Any, Any], agent_id: str) -> Mapping[Any, Any] | None:
    agents = config.get("agents")
    entries = agents.get("list") if isinstance(agents, Mapping) else None
    if not isinstance(entries, (list, tuple)):
        return None
    want = normalize_agent_id(agent_id)
    for entry in entries:
        if _is_skipped_entry(entry):
            continue
        # A list (or other non-mapping object) is an entry with no ``id`` and no ``tools``.
        entry_id = entry.get("id") if isinstance(entry, Mapping) else None
        if entry_id is UNDEFINED:
            entry_id = None
        if entry_id is not None and not isinstance(entry_id, str):
            continue
        if normalize_agent_id(entry_id) != want:
            continue
        # First match wins, even when it has no block: later entries are not consulted.
        return _loop_detection_of(entry.get("tools")) if isinstance(entry, Mapping) else None
    return None


def _copy_block(block: Mapping[Any, Any]) -> dict[Any, Any]:
    """A new dict, nested objects copied too, so callers can never mutate the input."""
    return {
        key: dict(value) if isinstance(value, Mapping) else value for key, value in block.items()
    }


def _mapping_or_empty(value: object) -> Mapping[Any, Any]:
    return value if isinstance(value, Mapping) else {}


def merge_agent_config(openclaw_config: object, agent_id: object) -> dict[str, Any] | None:
    """Merge the global block with one agent's block, as OpenClaw does (SPEC §7.3).

    Lenient on purpose: it runs per tool call and must behave like the reference for any input.

    Args:
        openclaw_config: a whole OpenClaw config (anything; non-mappings have no blocks).
        agent_id: the agent to look up; ``None``, ``""`` or a non-string → no agent block.

    Returns:
        A new dict (the input is never mutated), or ``None`` when neither block exists. With
        both blocks, ``detectors`` and ``postCompactionGuard`` are merged one level deep and
        always present.
    """
    if not isinstance(openclaw_config, Mapping):
        return None
    glob = _loop_detection_of(openclaw_config.get("tools"))
    agent = (
        _agent_block(openclaw_config, agent_id)
        if isinstance(agent_id, str) and agent_id != ""
        else None
    )
    if agent is None:
        return None if glob is None else _copy_block(glob)
    if glob is None:
        return _copy_block(agent)
    return {
        **glob,
        **agent,
        "detectors": {
            **_mapping_or_empty(glob.get("detectors")),
            **_mapping_or_empty(agent.get("detectors")),
        },
        "postCompactionGuard": {
            **_mapping_or_empty(glob.get("postCompactionGuard")),
            **_mapping_or_empty(agent.get("postCompactionGuard")),
        },
    }


# --------------------------------------------------------------------------------------------
# Whole configs and files
# --------------------------------------------------------------------------------------------


def _validate_loopwatch_block(value: object, issues: list[ConfigIssue], dups: _Duplicates) -> None:
    if not isinstance(value, Mapping):
        issues.append(ConfigIssue("loopwatch", MSG_EXPECTED_OBJECT))
        return
    seen: set[Any] = set()
    for key, item in _pairs(value, dups):
        path = _join("loopwatch", key)
        if key in seen:
            issues.append(ConfigIssue(path, MSG_DUPLICATE_KEY))
        seen.add(key)
        if not (isinstance(key, str) and key in LOOPWATCH_BLOCK_KEYS):
            issues.append(ConfigIssue(path, MSG_UNKNOWN_KEY))
        elif key == "profile":
            _check_profile(item, path, issues)
        elif key == "adaptive":
            issues.extend(_adaptive_issues(item, path))


def _adaptive_issues(value: object, path: str) -> tuple[ConfigIssue, ...]:
    # Imported here, only for a file that has a loopwatch.adaptive block: the reference
    # profile never loads the adaptive package (its settings import no config, so there is
    # no cycle either way).
    from loopwatch.adaptive.settings import AdaptiveConfig

    try:
        AdaptiveConfig.from_mapping(value, path=path)
    except ConfigError as err:
        return err.issues
    return ()


def _duplicated_keys(
    obj: Mapping[Any, Any],
    keys: frozenset[str],
    path: str,
    issues: list[ConfigIssue],
    dups: _Duplicates,
) -> None:
    """Note a duplicate of a key on the way to a validated subtree (a second ``tools``).

    SPEC §7.2 keeps OpenClaw's rule, the last value wins, so this is no issue of the load;
    the notes go to :data:`_SHADOWED` for ``config check`` to show as warnings, since the
    earlier block is silently ignored.
    """
    seen: set[object] = set()
    for key, _value in _pairs(obj, dups):
        if key in keys:
            if key in seen:
                _SHADOWED.append(ConfigIssue(_join(path, key), MSG_SHADOWED_KEY))
            seen.add(key)


#: Shadowed keys found by the latest validation of a parsed file (see config_warnings).
_SHADOWED: list[ConfigIssue] = []
MSG_SHADOWED_KEY: Final = "duplicate key: the last value wins, an earlier block is ignored"


_TOP_KEYS_CHECKED: Final = frozenset({"tools", "agents", "loopwatch"})
_TOOLS_KEYS_CHECKED: Final = frozenset({"loopDetection"})
_AGENTS_KEYS_CHECKED: Final = frozenset({"list"})
_AGENT_KEYS_CHECKED: Final = frozenset({"id", "tools"})


def _validate_tools(value: object, path: str, issues: list[ConfigIssue], dups: _Duplicates) -> None:
    if isinstance(value, Mapping):
        _duplicated_keys(value, _TOOLS_KEYS_CHECKED, path, issues, dups)
    if not isinstance(value, Mapping):
        issues.append(ConfigIssue(path, MSG_EXPECTED_OBJECT))
    elif "loopDetection" in value:
        _validate_block(value["loopDetection"], f"{path}.loopDetection", issues, dups)


def _validate_agents(value: object, issues: list[ConfigIssue], dups: _Duplicates) -> None:
    if not isinstance(value, Mapping):
        issues.append(ConfigIssue("agents", MSG_EXPECTED_OBJECT))
        return
    _duplicated_keys(value, _AGENTS_KEYS_CHECKED, "agents", issues, dups)
    if "list" not in value:
        return
    entries = value["list"]
    if not isinstance(entries, (list, tuple)):
        issues.append(ConfigIssue("agents.list", MSG_EXPECTED_LIST))
        return
    for index, entry in enumerate(entries):
        path = f"agents.list[{index}]"
        if not isinstance(entry, Mapping):
            issues.append(ConfigIssue(path, MSG_EXPECTED_OBJECT))
            continue
        _duplicated_keys(entry, _AGENT_KEYS_CHECKED, path, issues, dups)
        for key, item in entry.items():
            if key == "id" and not isinstance(item, str):
                issues.append(ConfigIssue(f"{path}.id", MSG_EXPECTED_STRING))
            elif key == "tools":
                _validate_tools(item, f"{path}.tools", issues, dups)
        if "id" not in entry:
            issues.append(ConfigIssue(f"{path}.id", MSG_MISSING_KEY))


def _validate_whole(config: object, issues: list[ConfigIssue], dups: _Duplicates) -> None:
    if not isinstance(config, Mapping):
        issues.append(ConfigIssue("", MSG_EXPECTED_OBJECT))
        return
    _duplicated_keys(config, _TOP_KEYS_CHECKED, "", issues, dups)
    # Outside the validated subtrees the last duplicate wins, so the plain items are read.
    for key, value in config.items():
        if key == "tools":
            _validate_tools(value, "tools", issues, dups)
        elif key == "agents":
            _validate_agents(value, issues, dups)
        elif key == "loopwatch":
            _validate_loopwatch_block(value, issues, dups)


def validate_openclaw_config(config: Mapping[str, Any]) -> None:
    """Validate a whole OpenClaw config strictly (SPEC §7.2 "Whole configs").

    Only ``tools.loopDetection``, every ``agents.list[i].tools.loopDetection`` (all agents, not
    only one) and the ``loopwatch`` block are checked; every other key is ignored so a real
    OpenClaw config loads as it is.

    Args:
        config: the parsed config.

    Raises:
        ConfigError: every issue, with paths such as ``tools.loopDetection.historySize``.
    """
    issues: list[ConfigIssue] = []
    _validate_whole(config, issues, _NO_DUPLICATES)
    if issues:
        raise ConfigError(issues)


def profile_of_openclaw_config(config: Mapping[str, Any]) -> Profile:
    """The ``loopwatch.profile`` of a whole config, ``"reference"`` when absent or invalid.

    Args:
        config: a whole config (normally already validated).

    Returns:
        The profile.
    """
    block = config.get("loopwatch") if isinstance(config, Mapping) else None
    value = block.get("profile") if isinstance(block, Mapping) else None
    if isinstance(value, str) and value == "adaptive":
        return "adaptive"
    return "reference"


_JSON5_POSITION: Final = re.compile(r"^<string>:(\d+) (.*) at column (\d+)$", re.DOTALL)
_LINE_BREAKING: Final = re.compile("[\x00-\x1f\x7f\x85\u2028\u2029]")


def _one_line(text: str) -> str:
    """Escape control characters so an issue stays on one line (``Unexpected "\\n"``)."""
    return _LINE_BREAKING.sub(lambda found: found[0].encode("unicode_escape").decode(), text)


def _end_position(text: str) -> tuple[int, int]:
    lines = text.split("\n")
    return len(lines), len(lines[-1]) + 1


def _syntax_issue(exc: ValueError, text: str) -> ConfigIssue:
    """One issue at path ``""`` naming the 1-based line and column of a JSON5 syntax error."""
    found = _JSON5_POSITION.match(str(exc))
    if found:
        line, column, reason = int(found[1]), int(found[3]), found[2]
    else:
        # The parser reports no position only for input that ends too early (an empty file).
        (line, column), reason = _end_position(text), str(exc)
    return ConfigIssue(
        "", _one_line(f"JSON5 syntax error at line {line}, column {column}: {reason}")
    )


#: The largest config file loopwatch reads: OpenClaw configs are kilobytes, and a path to a
#: device or a runaway file must fail at once rather than fill the memory.
MAX_CONFIG_BYTES: Final = 2 * 1024 * 1024


def _read_config_bytes(path: str | os.PathLike[str]) -> bytes:
    """The bytes of a config file: a regular file of at most :data:`MAX_CONFIG_BYTES`.

    A FIFO, a device (``/dev/zero``), a folder or a socket is refused before it is opened
    for reading, so nothing can hang or grow without bound; the file is then read with the
    limit again, in case it changed in between.
    """
    shown = os.fspath(path)
    try:
        info = os.stat(path)
    except (OSError, ValueError) as exc:
        raise ConfigError([ConfigIssue("", _one_line(f"cannot read {shown!s}: {exc}"))]) from exc
    if not stat.S_ISREG(info.st_mode):
        raise ConfigError([ConfigIssue("", f"{shown!s} is not a regular file")])
    if info.st_size > MAX_CONFIG_BYTES:
        raise ConfigError([ConfigIssue("", f"{shown!s} is larger than {MAX_CONFIG_BYTES} bytes")])
    try:
        flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0)
        descriptor = os.open(path, flags)
        with os.fdopen(descriptor, "rb") as handle:
            raw = handle.read(MAX_CONFIG_BYTES + 1)
    except OSError as exc:
        raise ConfigError([ConfigIssue("", _one_line(f"cannot read {shown!s}: {exc}"))]) from exc
    if len(raw) > MAX_CONFIG_BYTES:
        raise ConfigError([ConfigIssue("", f"{shown!s} is larger than {MAX_CONFIG_BYTES} bytes")])
    return raw


def config_warnings(path: str | os.PathLike[str]) -> tuple[ConfigIssue, ...]:
    """What a valid file silently loses: duplicated keys on the way to a block (a second
    ``tools``, ``agents``, ``loopwatch``, ``loopDetection``), whose earlier value is ignored.

    Raises:
        ConfigError: as :func:`load_config_file`.
    """
    with _SHADOWED_LOCK:
        _SHADOWED.clear()
        try:
            load_config_file(path)
            return tuple(_SHADOWED)
        finally:
            _SHADOWED.clear()


_SHADOWED_LOCK: Final = threading.Lock()


def load_config_file(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Read, parse (JSON5) and validate a whole OpenClaw config file.

    Duplicate keys are issues inside the validated subtrees (``tools.loopDetection``,
    ``agents.list[i].tools.loopDetection``, ``loopwatch``); elsewhere the last value wins, as
    in OpenClaw.

    Args:
        path: the file (UTF-8; a BOM is ignored; JSON is a subset of JSON5).

    Returns:
        The parsed config as plain dicts and lists.

    Raises:
        ConfigError: the file cannot be read, is not UTF-8, does not parse (one issue with line
            and column), or fails validation (every issue).
    """
    raw = _read_config_bytes(path)
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        message = _one_line(f"{os.fspath(path)!s} is not valid UTF-8 (byte {exc.start})")
        raise ConfigError([ConfigIssue("", message)]) from exc

    duplicates: dict[int, tuple[Mapping[Any, Any], list[tuple[Any, Any]]]] = {}

    def keep_pairs(pairs: Iterable[tuple[Any, Any]]) -> dict[Any, Any]:
        items = list(pairs)
        obj = dict(items)
        if len(obj) != len(items):
            duplicates[id(obj)] = (obj, items)
        return obj

    try:
        try:
            # Most configs are plain JSON: the C parser reads them a thousand times faster
            # than the JSON5 one, with the same values and the same duplicate hook.
            config = json.loads(text, object_pairs_hook=keep_pairs)
        except ValueError:
            duplicates.clear()
            # Imported here: a hook process with no config file (or a plain JSON one)
            # never pays for it, and ``python -S`` hooks may not see site-packages.
            import json5

            config = json5.loads(text, object_pairs_hook=keep_pairs)
    except RecursionError as exc:
        raise ConfigError([ConfigIssue("", "JSON5 nesting too deep")]) from exc
    except ValueError as exc:
        raise ConfigError([_syntax_issue(exc, text)]) from exc
    issues: list[ConfigIssue] = []
    _validate_whole(config, issues, duplicates)
    if issues:
        raise ConfigError(issues)
    result: dict[str, Any] = config
    return result


__all__ = [
    "BLOCK_FIELDS",
    "BLOCK_KEYS",
    "CONFIG_FIELDS",
    "DEFAULT_RESOLVED_CONFIG",
    "DETECTOR_FIELDS",
    "GUARD_FIELDS",
    "LOOPWATCH_BLOCK_KEYS",
    "MAX_CONFIG_BYTES",
    "MAX_SAFE_INTEGER",
    "PROFILES",
    "ConfigError",
    "ConfigField",
    "ConfigIssue",
    "Detectors",
    "LoopDetectionConfig",
    "PostCompactionGuardConfig",
    "Profile",
    "ResolvedConfig",
    "config_warnings",
    "js_truthy",
    "load_config_file",
    "merge_agent_config",
    "normalize_agent_id",
    "profile_of_openclaw_config",
    "resolve_config",
    "resolve_window_size",
    "validate_openclaw_config",
]
