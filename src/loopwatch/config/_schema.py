"""The one table of loop-detection settings: names, defaults, help, and strict-loading reasons.

Every other module of the package reads names and defaults from here, so the validators,
``to_mapping``, the docs and ``config check`` can never disagree about a setting.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal

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
#: Logged by ``LoopDetectionConfig.from_file``: a block object has no room for them.
MSG_ADAPTIVE_NOT_CARRIED: Final = (
    "loopwatch.adaptive in {path}: not carried by LoopDetectionConfig.from_file (one "
    "tools.loopDetection block); read the file with LoopGuard(openclaw_config="
    "load_config_file(path)) or GuardSettings.resolve(config_file=path) to use it"
)
#: OpenClaw's ``agents.defaults`` is a strict object without ``tools`` (2026.6.10): it
#: refuses the whole config, so loopwatch does too rather than ignore the block.
MSG_DEFAULTS_TOOLS: Final = (
    "unknown key: OpenClaw's agents.defaults has no tools; put loopDetection in "
    "tools.loopDetection (every agent) or agents.list[].tools.loopDetection (one agent)"
)
#: A ``$include`` left in a mapping handed over as it is (files resolve theirs when loaded).
MSG_UNRESOLVED_INCLUDE: Final = (
    "not resolved: $include is read when a config file is loaded (load_config_file, "
    "--config); a config passed as a mapping must have its includes merged already"
)
MSG_EXPECTED_PROFILE: Final = 'expected "reference" or "adaptive"'
#: A warning of ``config check``, not an issue: OpenClaw keeps the last of duplicated keys.
MSG_SHADOWED_KEY: Final = "duplicate key: the last value wins, an earlier block is ignored"
#: Warnings, not issues: valid adaptive settings that the chosen profile does not use. The
#: block is validated all the same, so it is ready the day the profile is switched.
MSG_ADAPTIVE_UNUSED_UNSET: Final = (
    'not used: loopwatch.profile is not set, so the "reference" profile runs and ignores '
    'these settings; set loopwatch.profile: "adaptive" to use them (loopwatch hook, whose '
    "default profile is adaptive, uses them)"
)
MSG_ADAPTIVE_UNUSED_REFERENCE: Final = (
    'not used: loopwatch.profile is "reference"; set it to "adaptive" to use these settings'
)
MSG_ADAPTIVE_UNUSED_CHOSEN: Final = (
    'not used: the "reference" profile was chosen (a profile argument or --profile); '
    'choose "adaptive" to use these settings'
)
MSG_ADAPTIVE_UNUSED_ARGUMENT: Final = (
    'not used: the profile is "reference"; pass profile="adaptive" to use these settings'
)
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

BLOCK_FIELD_BY_NAME: Final = {f.name: f for f in BLOCK_FIELDS}
DEFAULT_WINDOW_SIZE: Final = GUARD_FIELDS[0].default
