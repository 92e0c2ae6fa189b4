"""Config: lenient resolution (SPEC §2, §6.1), strict loading (§7.2), agent merge (§7.3)."""

from __future__ import annotations

import copy
import dataclasses
import json
import os
import re
import tempfile
from collections.abc import Callable
from decimal import Decimal
from fractions import Fraction
from pathlib import Path
from types import MappingProxyType
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from loopwatch import LoopGuard
from loopwatch.config import (
    BLOCK_KEYS,
    CONFIG_FIELDS,
    DEFAULT_RESOLVED_CONFIG,
    LOOPWATCH_BLOCK_KEYS,
    MAX_SAFE_INTEGER,
    ConfigError,
    ConfigIssue,
    Detectors,
    LoopDetectionConfig,
    PostCompactionGuardConfig,
    ResolvedConfig,
    js_truthy,
    load_config_file,
    merge_agent_config,
    normalize_agent_id,
    profile_of_openclaw_config,
    resolve_config,
    resolve_window_size,
    validate_openclaw_config,
)
from loopwatch.core._undefined import UNDEFINED

MSG_WC = "tools.loopDetection.warningThreshold must be lower than criticalThreshold."
MSG_CG = "tools.loopDetection.criticalThreshold must be lower than globalCircuitBreakerThreshold."
NAN = float("nan")
INF = float("inf")


class MyInt(int):
    """A ``numbers.Integral`` that is not exactly ``int``."""


def issues_of(fn: Callable[[], object]) -> list[tuple[str, str]]:
    with pytest.raises(ConfigError) as info:
        fn()
    return [(issue.path, issue.message) for issue in info.value.issues]


def write(tmp_path: Path, text: str | bytes, name: str = "openclaw.json5") -> Path:
    path = tmp_path / name
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8")
    return path


# --------------------------------------------------------------------------------------------
# Lenient resolution (SPEC §2)
# --------------------------------------------------------------------------------------------

DEFAULTS = ResolvedConfig(
    enabled=False,
    history_size=30,
    warning_threshold=10,
    critical_threshold=20,
    unknown_tool_threshold=10,
    global_circuit_breaker_threshold=30,
    generic_repeat=True,
    known_poll_no_progress=True,
    ping_pong=True,
    guard_enabled=True,
    guard_window_size=3,
)


def test_defaults_are_those_of_the_spec() -> None:
    assert ResolvedConfig() == DEFAULTS
    assert DEFAULT_RESOLVED_CONFIG == DEFAULTS
    assert {f.path: f.default for f in CONFIG_FIELDS} == {
        "enabled": False,
        "historySize": 30,
        "warningThreshold": 10,
        "criticalThreshold": 20,
        "unknownToolThreshold": 10,
        "globalCircuitBreakerThreshold": 30,
        "detectors.genericRepeat": True,
        "detectors.knownPollNoProgress": True,
        "detectors.pingPong": True,
        "postCompactionGuard.windowSize": 3,
    }


@pytest.mark.parametrize(
    "block",
    [None, UNDEFINED, [], ["enabled", True], "x", 5, True, (("enabled", True),), object()],
    ids=repr,
)
def test_non_mapping_counts_as_no_block(block: object) -> None:
    assert resolve_config(block) == DEFAULTS


@pytest.mark.parametrize(
    "block", [{}, MappingProxyType({}), LoopDetectionConfig()], ids=["dict", "proxy", "config"]
)
def test_empty_block_resolves_to_defaults(block: object) -> None:
    assert resolve_config(block) == DEFAULTS


BAD_NUMBERS = [
    None,
    UNDEFINED,
    0,
    -1,
    0.0,
    -0.0,
    -3.0,
    2.5,
    "10",
    "",
    True,
    False,
    NAN,
    INF,
    -INF,
    [],
    [10],
    {},
    Decimal("10"),
    Fraction(10, 1),
    10j,
]

# Fields that no clamp touches when the others are unset.
UNCLAMPED = [
    ("historySize", "history_size", 30),
    ("unknownToolThreshold", "unknown_tool_threshold", 10),
    ("warningThreshold", "warning_threshold", 10),
    ("criticalThreshold", "critical_threshold", 20),
    ("globalCircuitBreakerThreshold", "global_circuit_breaker_threshold", 30),
]


@pytest.mark.parametrize(("key", "attr", "default"), UNCLAMPED)
@pytest.mark.parametrize("value", BAD_NUMBERS, ids=repr)
def test_bad_numeric_value_becomes_default(
    key: str, attr: str, default: int, value: object
) -> None:
    assert getattr(resolve_config({key: value}), attr) == default


def test_missing_numeric_value_is_default() -> None:
    assert resolve_config({"enabled": True}) == dataclasses.replace(DEFAULTS, enabled=True)


@pytest.mark.parametrize(
    ("value", "expected"),
    [(7, 7), (30.0, 30), (1, 1), (MyInt(12), 12), (10**20, 10**20), (1e20, 10**20)],
    ids=repr,
)
def test_good_numeric_value_is_stored_as_int(value: object, expected: int) -> None:
    resolved = resolve_config({"historySize": value, "unknownToolThreshold": value})
    assert resolved.history_size == expected
    assert type(resolved.history_size) is int
    assert resolved.unknown_tool_threshold == expected
    assert type(resolved.unknown_tool_threshold) is int


@pytest.mark.parametrize(
    ("warning", "critical", "breaker", "expected"),
    [
        (None, None, None, (10, 20, 30)),
        (10, 20, 30, (10, 20, 30)),
        (25, None, None, (25, 26, 30)),
        (29, None, None, (29, 30, 31)),
        (10, 10, None, (10, 11, 30)),
        (5, 3, 4, (5, 6, 7)),
        (None, None, 5, (10, 20, 21)),
        (None, 20, 20, (10, 20, 21)),
        (None, 5, None, (10, 11, 30)),
        (40, 2.0, 2, (40, 41, 42)),
        # The critical used for the global clamp is the clamped one.
        (30, 25, 28, (30, 31, 32)),
        # An invalid value is replaced by its default before clamping.
        ("50", 5, NAN, (10, 11, 30)),
    ],
)
def test_clamps_in_order(
    warning: object, critical: object, breaker: object, expected: tuple[int, int, int]
) -> None:
    block = {
        key: value
        for key, value in [
            ("warningThreshold", warning),
            ("criticalThreshold", critical),
            ("globalCircuitBreakerThreshold", breaker),
        ]
        if value is not None
    }
    resolved = resolve_config(block)
    got = (
        resolved.warning_threshold,
        resolved.critical_threshold,
        resolved.global_circuit_breaker_threshold,
    )
    assert got == expected


def test_history_and_unknown_tool_thresholds_are_not_clamped() -> None:
    resolved = resolve_config({"historySize": 1, "unknownToolThreshold": 1, "warningThreshold": 50})
    assert (resolved.history_size, resolved.unknown_tool_threshold) == (1, 1)


class Weird:
    pass


TRUTHINESS = [
    (False, False),
    (True, True),
    (None, False),
    (UNDEFINED, False),
    (0, False),
    (0.0, False),
    (-0.0, False),
    (NAN, False),
    ("", False),
    (Decimal(0), False),
    (Decimal("NaN"), False),
    (Decimal("sNaN"), False),
    (Fraction(0), False),
    (0j, False),
    ("false", True),
    ("0", True),
    (" ", True),
    ([], True),
    ({}, True),
    ((), True),
    (1, True),
    (-1, True),
    (0.5, True),
    (INF, True),
    (-INF, True),
    (b"", True),
    (Weird(), True),
]


@pytest.mark.parametrize(("value", "expected"), TRUTHINESS, ids=repr)
def test_js_truthy(value: object, expected: bool) -> None:
    assert js_truthy(value) is expected


@pytest.mark.parametrize(("value", "expected"), TRUTHINESS, ids=repr)
def test_enabled_uses_truthiness(value: object, expected: bool) -> None:
    assert resolve_config({"enabled": value}).enabled is expected


def test_enabled_missing_is_off() -> None:
    assert resolve_config({"historySize": 5}).enabled is False


@pytest.mark.parametrize("detectors", [None, UNDEFINED, [], [False], "x", True, False, 0])
def test_non_mapping_detectors_keep_all_flags_on(detectors: object) -> None:
    resolved = resolve_config({"detectors": detectors})
    assert (resolved.generic_repeat, resolved.known_poll_no_progress, resolved.ping_pong) == (
        True,
        True,
        True,
    )


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (None, True),
        (UNDEFINED, True),
        (True, True),
        (False, False),
        (0, False),
        (-0.0, False),
        (NAN, False),
        ("", False),
        ("false", True),
        ([], True),
        ({}, True),
        (1, True),
    ],
    ids=repr,
)
@pytest.mark.parametrize(
    ("key", "attr"),
    [
        ("genericRepeat", "generic_repeat"),
        ("knownPollNoProgress", "known_poll_no_progress"),
        ("pingPong", "ping_pong"),
    ],
)
def test_detector_flags(key: str, attr: str, value: object, expected: bool) -> None:
    resolved = resolve_config({"detectors": {key: value}})
    assert getattr(resolved, attr) is expected
    others = {"generic_repeat", "known_poll_no_progress", "ping_pong"} - {attr}
    assert all(getattr(resolved, other) is True for other in others)


@pytest.mark.parametrize(
    ("block", "expected"),
    [
        ({}, True),
        ({"enabled": True}, True),
        ({"enabled": None}, True),
        ({"enabled": False}, False),
        # Only the bool False disables the guard (SPEC §2.6).
        ({"enabled": 0}, True),
        ({"enabled": ""}, True),
        (None, True),
        ("junk", True),
    ],
    ids=repr,
)
def test_guard_enabled_is_enabled_is_not_false(block: object, expected: bool) -> None:
    assert resolve_config(block).guard_enabled is expected


@pytest.mark.parametrize(
    ("guard", "expected"),
    [
        ({"windowSize": 5}, 5),
        ({"windowSize": 2.0}, 2),
        ({"windowSize": 0}, 3),
        ({"windowSize": -2}, 3),
        ({"windowSize": 2.5}, 3),
        ({"windowSize": True}, 3),
        ({"windowSize": "3"}, 3),
        ({"windowSize": None}, 3),
        ({"windowSize": NAN}, 3),
        ({}, 3),
        (None, 3),
        ([5], 3),
        (5, 3),
        ("windowSize", 3),
    ],
    ids=repr,
)
def test_guard_window_size(guard: object, expected: int) -> None:
    resolved = resolve_config({"postCompactionGuard": guard})
    assert resolved.guard_window_size == expected
    assert type(resolved.guard_window_size) is int


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (1, 1),
        (4, 4),
        (2.0, 2),
        (MyInt(6), 6),
        (0, 3),
        (-2, 3),
        (2.5, 3),
        (True, 3),
        (False, 3),
        ("3", 3),
        (None, 3),
        (UNDEFINED, 3),
        (NAN, 3),
        (INF, 3),
    ],
    ids=repr,
)
def test_resolve_window_size(value: object, expected: int) -> None:
    result = resolve_window_size(value)
    assert result == expected
    assert type(result) is int


def test_resolved_config_is_returned_as_is() -> None:
    resolved = ResolvedConfig(enabled=True, warning_threshold=50, critical_threshold=3)
    assert resolve_config(resolved) is resolved


def test_resolved_config_is_frozen_and_slotted() -> None:
    resolved = ResolvedConfig()
    with pytest.raises(dataclasses.FrozenInstanceError):
        resolved.enabled = True  # type: ignore[misc]
    assert not hasattr(resolved, "__dict__")


def test_loop_detection_config_is_read_as_its_mapping() -> None:
    config = LoopDetectionConfig(
        enabled=True,
        warning_threshold=25,
        detectors=Detectors(ping_pong=False),
        post_compaction_guard=PostCompactionGuardConfig(window_size=2),
    )
    assert resolve_config(config) == resolve_config(config.to_mapping())
    assert resolve_config(config) == dataclasses.replace(
        DEFAULTS,
        enabled=True,
        warning_threshold=25,
        critical_threshold=26,
        ping_pong=False,
        guard_window_size=2,
    )
    assert resolve_config(LoopDetectionConfig(enabled=False)).guard_enabled is False


def test_full_block_resolution() -> None:
    block = {
        "enabled": True,
        "historySize": 12,
        "warningThreshold": 4,
        "criticalThreshold": 8,
        "unknownToolThreshold": 2,
        "globalCircuitBreakerThreshold": 10,
        "detectors": {"genericRepeat": False, "knownPollNoProgress": True, "pingPong": False},
        "postCompactionGuard": {"windowSize": 4},
    }
    assert resolve_config(block) == ResolvedConfig(
        enabled=True,
        history_size=12,
        warning_threshold=4,
        critical_threshold=8,
        unknown_tool_threshold=2,
        global_circuit_breaker_threshold=10,
        generic_repeat=False,
        known_poll_no_progress=True,
        ping_pong=False,
        guard_enabled=True,
        guard_window_size=4,
    )


# --------------------------------------------------------------------------------------------
# Strict loading of a block (SPEC §7.2)
# --------------------------------------------------------------------------------------------

FULL_BLOCK: dict[str, Any] = {
    "enabled": True,
    "historySize": 40,
    "warningThreshold": 5,
    "criticalThreshold": 9,
    "unknownToolThreshold": 4,
    "globalCircuitBreakerThreshold": 12,
    "detectors": {"genericRepeat": False, "knownPollNoProgress": True, "pingPong": False},
    "postCompactionGuard": {"windowSize": 2},
}


def test_from_mapping_full_block() -> None:
    config = LoopDetectionConfig.from_mapping(FULL_BLOCK)
    assert config == LoopDetectionConfig(
        enabled=True,
        history_size=40,
        warning_threshold=5,
        critical_threshold=9,
        unknown_tool_threshold=4,
        global_circuit_breaker_threshold=12,
        detectors=Detectors(generic_repeat=False, known_poll_no_progress=True, ping_pong=False),
        post_compaction_guard=PostCompactionGuardConfig(window_size=2),
    )
    assert config.profile == "reference"
    assert config.to_mapping() == FULL_BLOCK


@pytest.mark.parametrize(
    "block",
    [
        {},
        {"enabled": False},
        {"warningThreshold": 25},
        {"detectors": {}},
        {"postCompactionGuard": {}},
        {"detectors": {"pingPong": False}, "historySize": 3},
        FULL_BLOCK,
    ],
    ids=repr,
)
def test_to_mapping_round_trip(block: dict[str, Any]) -> None:
    config = LoopDetectionConfig.from_mapping(block)
    assert config.to_mapping() == block
    assert LoopDetectionConfig.from_mapping(config.to_mapping()) == config


def test_to_mapping_has_set_fields_only() -> None:
    assert LoopDetectionConfig().to_mapping() == {}
    assert LoopDetectionConfig(profile="adaptive").to_mapping() == {}
    assert LoopDetectionConfig(
        history_size=5, detectors=Detectors(), post_compaction_guard={}
    ).to_mapping() == {"historySize": 5, "detectors": {}, "postCompactionGuard": {}}
    mapping = LoopDetectionConfig(detectors={"pingPong": True}).to_mapping()
    assert mapping == {"detectors": {"pingPong": True}}


def test_integral_floats_are_stored_as_int() -> None:
    config = LoopDetectionConfig.from_mapping(
        {"historySize": 5.0, "postCompactionGuard": {"windowSize": 2.0}, "warningThreshold": 3}
    )
    assert config.history_size == 5
    assert type(config.history_size) is int
    assert config.post_compaction_guard == PostCompactionGuardConfig(window_size=2)
    assert type(config.to_mapping()["postCompactionGuard"]["windowSize"]) is int
    assert type(LoopDetectionConfig(history_size=MyInt(4)).history_size) is int


def test_max_safe_integer_bound() -> None:
    assert MAX_SAFE_INTEGER == 9007199254740991
    ok = LoopDetectionConfig.from_mapping({"historySize": MAX_SAFE_INTEGER})
    assert ok.history_size == MAX_SAFE_INTEGER
    assert LoopDetectionConfig.from_mapping({"historySize": float(MAX_SAFE_INTEGER)}).history_size
    for too_big in (MAX_SAFE_INTEGER + 1, float(MAX_SAFE_INTEGER + 1), 10**30, 1e300):
        got = issues_of(lambda v=too_big: LoopDetectionConfig.from_mapping({"historySize": v}))
        assert got == [("historySize", "expected an integer <= 9007199254740991")]


BOOL = "expected a boolean"
INT = "expected an integer > 0"
OBJ = "expected an object"
UNKNOWN = "unknown key"

SINGLE_ISSUES = [
    ({"enabled": None}, "enabled", BOOL),
    ({"enabled": 1}, "enabled", BOOL),
    ({"enabled": 0}, "enabled", BOOL),
    ({"enabled": "true"}, "enabled", BOOL),
    ({"enabled": UNDEFINED}, "enabled", BOOL),
    *[
        ({key: value}, key, INT)
        for key in (
            "historySize",
            "warningThreshold",
            "criticalThreshold",
            "unknownToolThreshold",
            "globalCircuitBreakerThreshold",
        )
        for value in (None, True, False, 0, -1, 0.0, -0.0, 2.5, "10", NAN, INF, -INF, [], {})
    ],
    ({"historySize": Decimal(5)}, "historySize", INT),
    ({"profile": "adaptive"}, "profile", UNKNOWN),
    ({"foo": 1}, "foo", UNKNOWN),
    ({"HistorySize": 5}, "HistorySize", UNKNOWN),
    ({"history_size": 5}, "history_size", UNKNOWN),
    ({"windowSize": 3}, "windowSize", UNKNOWN),
    ({1: 5}, "1", UNKNOWN),
    ({"detectors": None}, "detectors", OBJ),
    ({"detectors": []}, "detectors", OBJ),
    ({"detectors": True}, "detectors", OBJ),
    ({"detectors": {"pingPong": None}}, "detectors.pingPong", BOOL),
    ({"detectors": {"genericRepeat": 1}}, "detectors.genericRepeat", BOOL),
    ({"detectors": {"knownPollNoProgress": "no"}}, "detectors.knownPollNoProgress", BOOL),
    ({"detectors": {"ping_pong": True}}, "detectors.ping_pong", UNKNOWN),
    ({"detectors": {"windowSize": 3}}, "detectors.windowSize", UNKNOWN),
    ({"postCompactionGuard": None}, "postCompactionGuard", OBJ),
    ({"postCompactionGuard": 3}, "postCompactionGuard", OBJ),
    ({"postCompactionGuard": {"windowSize": 0}}, "postCompactionGuard.windowSize", INT),
    ({"postCompactionGuard": {"windowSize": None}}, "postCompactionGuard.windowSize", INT),
    ({"postCompactionGuard": {"windowSize": 1.5}}, "postCompactionGuard.windowSize", INT),
    ({"postCompactionGuard": {"enabled": True}}, "postCompactionGuard.enabled", UNKNOWN),
]


@pytest.mark.parametrize(("block", "path", "message"), SINGLE_ISSUES, ids=repr)
def test_from_mapping_single_issue(block: dict[Any, Any], path: str, message: str) -> None:
    assert issues_of(lambda: LoopDetectionConfig.from_mapping(block)) == [(path, message)]


@pytest.mark.parametrize("block", [None, [], "x", 5, True, FULL_BLOCK.items()], ids=repr)
def test_from_mapping_rejects_non_mapping(block: object) -> None:
    assert issues_of(lambda: LoopDetectionConfig.from_mapping(block)) == [("", OBJ)]


def test_from_mapping_accepts_any_mapping() -> None:
    config = LoopDetectionConfig.from_mapping(MappingProxyType({"historySize": 3}))
    assert config.history_size == 3


def test_all_issues_at_once_in_document_order() -> None:
    block = {
        "warningThreshold": 5,
        "postCompactionGuard": {"windowSize": "3", "extra": 1},
        "enabled": None,
        "profile": "adaptive",
        "criticalThreshold": 5,
        "detectors": {"pingPong": 1, "bogus": True, "genericRepeat": None},
        "historySize": 2.5,
        "globalCircuitBreakerThreshold": 4,
    }
    assert issues_of(lambda: LoopDetectionConfig.from_mapping(block)) == [
        ("postCompactionGuard.windowSize", INT),
        ("postCompactionGuard.extra", UNKNOWN),
        ("enabled", BOOL),
        ("profile", UNKNOWN),
        ("detectors.pingPong", BOOL),
        ("detectors.bogus", UNKNOWN),
        ("detectors.genericRepeat", BOOL),
        ("historySize", INT),
        ("criticalThreshold", MSG_WC),
        ("globalCircuitBreakerThreshold", MSG_CG),
    ]


@pytest.mark.parametrize(
    ("warning", "critical", "breaker", "expected"),
    [
        (10, 20, 30, []),
        (10, 10, None, [("criticalThreshold", MSG_WC)]),
        (10, 5, None, [("criticalThreshold", MSG_WC)]),
        (None, 20, 20, [("globalCircuitBreakerThreshold", MSG_CG)]),
        (None, 30, 20, [("globalCircuitBreakerThreshold", MSG_CG)]),
        (10, 10, 10, [("criticalThreshold", MSG_WC), ("globalCircuitBreakerThreshold", MSG_CG)]),
        # warning vs global is not a check of its own.
        (50, None, 10, []),
        (25, None, None, []),
        # Only when both fields are present *and* valid.
        ("x", 5, None, [("warningThreshold", INT)]),
        (5, 0, 3, [("criticalThreshold", INT)]),
        (5, 5.0, True, [("globalCircuitBreakerThreshold", INT), ("criticalThreshold", MSG_WC)]),
        (5.0, 5, None, [("criticalThreshold", MSG_WC)]),
    ],
)
def test_cross_field_checks(
    warning: object, critical: object, breaker: object, expected: list[tuple[str, str]]
) -> None:
    block = {
        key: value
        for key, value in [
            ("warningThreshold", warning),
            ("criticalThreshold", critical),
            ("globalCircuitBreakerThreshold", breaker),
        ]
        if value is not None
    }
    if expected:
        assert issues_of(lambda: LoopDetectionConfig.from_mapping(block)) == expected
    else:
        LoopDetectionConfig.from_mapping(block)


def test_cross_field_issues_come_after_field_issues() -> None:
    block = {"criticalThreshold": 5, "warningThreshold": 5, "foo": 1}
    assert issues_of(lambda: LoopDetectionConfig.from_mapping(block)) == [
        ("foo", UNKNOWN),
        ("criticalThreshold", MSG_WC),
    ]


def test_config_error_str_and_type() -> None:
    error = ConfigError([ConfigIssue("historySize", INT), ConfigIssue("", "whole thing bad")])
    assert isinstance(error, ValueError)
    assert str(error) == "historySize: expected an integer > 0\nwhole thing bad"
    assert error.issues == (ConfigIssue("historySize", INT), ConfigIssue("", "whole thing bad"))
    with pytest.raises(ConfigError) as info:
        LoopDetectionConfig.from_mapping({"enabled": None, "detectors": {"pingPong": 0}})
    assert str(info.value) == "enabled: expected a boolean\ndetectors.pingPong: expected a boolean"


def test_config_error_pickles_with_its_issues() -> None:
    import pickle

    error = ConfigError([ConfigIssue("a.b", "c")])
    clone = pickle.loads(pickle.dumps(error))
    assert clone.issues == error.issues
    assert str(clone) == str(error)


def test_from_mapping_profile() -> None:
    assert LoopDetectionConfig.from_mapping({}, profile="adaptive").profile == "adaptive"
    got = issues_of(lambda: LoopDetectionConfig.from_mapping({}, profile="fast"))  # type: ignore[arg-type]
    assert got == [("profile", 'expected "reference" or "adaptive"')]


# Constructors ------------------------------------------------------------------------------


def test_constructor_validates_set_fields_with_camel_case_paths() -> None:
    def build() -> LoopDetectionConfig:
        return LoopDetectionConfig(
            enabled=1,  # type: ignore[arg-type]
            history_size=True,  # type: ignore[arg-type]
            warning_threshold=5,
            critical_threshold=5,
            unknown_tool_threshold="2",  # type: ignore[arg-type]
            global_circuit_breaker_threshold=None,
            detectors={"pingPong": None, "x": 1},  # type: ignore[arg-type]
            post_compaction_guard=[3],  # type: ignore[arg-type]
            profile="other",  # type: ignore[arg-type]
        )

    assert issues_of(build) == [
        ("enabled", BOOL),
        ("historySize", INT),
        ("unknownToolThreshold", INT),
        ("detectors.pingPong", BOOL),
        ("detectors.x", UNKNOWN),
        ("postCompactionGuard", OBJ),
        ("profile", 'expected "reference" or "adaptive"'),
        ("criticalThreshold", MSG_WC),
    ]


def test_constructor_accepts_unpaired_thresholds() -> None:
    config = LoopDetectionConfig(warning_threshold=25)
    assert config.to_mapping() == {"warningThreshold": 25}
    assert resolve_config(config).critical_threshold == 26


def test_constructor_converts_nested_mappings() -> None:
    config = LoopDetectionConfig(
        detectors={"pingPong": False},  # type: ignore[arg-type]
        post_compaction_guard={"windowSize": 4.0},  # type: ignore[arg-type]
    )
    assert config.detectors == Detectors(ping_pong=False)
    assert config.post_compaction_guard == PostCompactionGuardConfig(window_size=4)
    assert LoopDetectionConfig(detectors=MappingProxyType({})).detectors == Detectors()  # type: ignore[arg-type]


def test_constructor_rejects_wrong_nested_type() -> None:
    assert issues_of(
        lambda: LoopDetectionConfig(detectors=PostCompactionGuardConfig())  # type: ignore[arg-type]
    ) == [("detectors", OBJ)]


def test_configs_are_frozen_and_keyword_only() -> None:
    config = LoopDetectionConfig(history_size=3)
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.history_size = 4  # type: ignore[misc]
    with pytest.raises(TypeError):
        LoopDetectionConfig(True)  # type: ignore[misc]
    with pytest.raises(TypeError):
        Detectors(True)  # type: ignore[misc]
    with pytest.raises(TypeError):
        PostCompactionGuardConfig(3)  # type: ignore[misc]
    assert hash(config) == hash(LoopDetectionConfig(history_size=3.0))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("kwargs", "expected"),
    [
        ({"generic_repeat": 1}, [("genericRepeat", BOOL)]),
        ({"ping_pong": None}, []),
        (
            {"known_poll_no_progress": "x", "ping_pong": 0},
            [("knownPollNoProgress", BOOL), ("pingPong", BOOL)],
        ),
    ],
)
def test_detectors_constructor(kwargs: dict[str, Any], expected: list[tuple[str, str]]) -> None:
    if expected:
        assert issues_of(lambda: Detectors(**kwargs)) == expected
    else:
        assert Detectors(**kwargs).to_mapping() == {}


@pytest.mark.parametrize("value", [0, -1, 2.5, True, "3", NAN, MAX_SAFE_INTEGER + 1], ids=repr)
def test_post_compaction_guard_config_constructor(value: object) -> None:
    assert len(issues_of(lambda: PostCompactionGuardConfig(window_size=value))) == 1  # type: ignore[arg-type]


def test_field_metadata_is_complete() -> None:
    expected_keys = {
        "enabled",
        "historySize",
        "warningThreshold",
        "criticalThreshold",
        "unknownToolThreshold",
        "globalCircuitBreakerThreshold",
        "detectors",
        "postCompactionGuard",
    }
    assert expected_keys == BLOCK_KEYS
    attrs = {f.name for f in dataclasses.fields(LoopDetectionConfig)}
    attrs |= {f.name for f in dataclasses.fields(Detectors)}
    attrs |= {f.name for f in dataclasses.fields(PostCompactionGuardConfig)}
    assert {f.attr for f in CONFIG_FIELDS} <= attrs
    assert all(f.help.endswith(f"(default: {str(f.default).lower()})") for f in CONFIG_FIELDS)
    assert set(LOOPWATCH_BLOCK_KEYS) == {"profile", "adaptive"}


# --------------------------------------------------------------------------------------------
# Whole configs (SPEC §7.2)
# --------------------------------------------------------------------------------------------


def test_whole_config_ignores_other_keys() -> None:
    config = {
        "gateway": {"port": "not checked", "x": None},
        "models": [1, None],
        "tools": {"exec": {"anything": None}, "loopDetection": {"enabled": True}},
        "agents": {
            "defaults": {"model": None},
            "list": [{"id": "a", "name": None, "tools": {"exec": None}}, {"id": ""}],
        },
        "loopwatch": {"profile": "adaptive"},
    }
    validate_openclaw_config(config)
    assert profile_of_openclaw_config(config) == "adaptive"


def test_whole_config_issues_in_document_order() -> None:
    config = {
        "loopwatch": {"profile": "fast", "extra": 1},
        "agents": {
            "list": [
                {"id": "ok", "tools": {"loopDetection": {"enabled": True}}},
                "not an entry",
                {
                    "id": "b",
                    "tools": {"loopDetection": {"warningThreshold": 9, "criticalThreshold": 9}},
                },
                {"tools": {"loopDetection": None}},
                {"id": 5, "tools": []},
                {"id": None, "tools": {"loopDetection": {"detectors": {"pingPong": None}}}},
            ]
        },
        "tools": {"loopDetection": {"historySize": 0, "profile": "adaptive"}},
    }
    assert issues_of(lambda: validate_openclaw_config(config)) == [
        ("loopwatch.profile", 'expected "reference" or "adaptive"'),
        ("loopwatch.extra", UNKNOWN),
        ("agents.list[1]", OBJ),
        ("agents.list[2].tools.loopDetection.criticalThreshold", MSG_WC),
        ("agents.list[3].tools.loopDetection", OBJ),
        ("agents.list[3].id", "required key missing"),
        ("agents.list[4].id", "expected a string"),
        ("agents.list[4].tools", OBJ),
        ("agents.list[5].id", "expected a string"),
        ("agents.list[5].tools.loopDetection.detectors.pingPong", BOOL),
        ("tools.loopDetection.historySize", INT),
        ("tools.loopDetection.profile", UNKNOWN),
    ]


@pytest.mark.parametrize(
    ("config", "expected"),
    [
        ({}, []),
        ({"tools": {}}, []),
        ({"agents": {}}, []),
        ({"agents": {"list": []}}, []),
        ({"agents": {"list": ({"id": "a"},)}}, []),
        ({"loopwatch": {}}, []),
        ({"tools": None}, [("tools", OBJ)]),
        ({"tools": []}, [("tools", OBJ)]),
        ({"tools": {"loopDetection": None}}, [("tools.loopDetection", OBJ)]),
        ({"tools": {"loopDetection": False}}, [("tools.loopDetection", OBJ)]),
        ({"agents": None}, [("agents", OBJ)]),
        ({"agents": {"list": None}}, [("agents.list", "expected a list")]),
        ({"agents": {"list": {"0": {"id": "a"}}}}, [("agents.list", "expected a list")]),
        ({"agents": {"list": [None]}}, [("agents.list[0]", OBJ)]),
        ({"agents": {"list": [[]]}}, [("agents.list[0]", OBJ)]),
        ({"agents": {"list": [{}]}}, [("agents.list[0].id", "required key missing")]),
        ({"agents": {"list": [{"id": "a", "tools": None}]}}, [("agents.list[0].tools", OBJ)]),
        ({"loopwatch": None}, [("loopwatch", OBJ)]),
        ({"loopwatch": "adaptive"}, [("loopwatch", OBJ)]),
        (
            {"loopwatch": {"profile": None}},
            [("loopwatch.profile", 'expected "reference" or "adaptive"')],
        ),
        (
            {"loopwatch": {"profile": "Adaptive"}},
            [("loopwatch.profile", 'expected "reference" or "adaptive"')],
        ),
        ({"loopwatch": {"historySize": 3}}, [("loopwatch.historySize", UNKNOWN)]),
    ],
    ids=repr,
)
def test_whole_config_rules(config: dict[str, Any], expected: list[tuple[str, str]]) -> None:
    if expected:
        assert issues_of(lambda: validate_openclaw_config(config)) == expected
    else:
        validate_openclaw_config(config)


@pytest.mark.parametrize("config", [None, [], "x"], ids=repr)
def test_whole_config_must_be_a_mapping(config: Any) -> None:
    assert issues_of(lambda: validate_openclaw_config(config)) == [("", OBJ)]


@pytest.mark.parametrize(
    ("config", "expected"),
    [
        ({}, "reference"),
        ({"loopwatch": {}}, "reference"),
        ({"loopwatch": {"profile": "reference"}}, "reference"),
        ({"loopwatch": {"profile": "adaptive"}}, "adaptive"),
        ({"loopwatch": {"profile": "bogus"}}, "reference"),
        ({"loopwatch": None}, "reference"),
    ],
    ids=repr,
)
def test_profile_of_openclaw_config(config: dict[str, Any], expected: str) -> None:
    assert profile_of_openclaw_config(config) == expected


# --------------------------------------------------------------------------------------------
# Files (SPEC §7.2)
# --------------------------------------------------------------------------------------------

SEED_JSON5 = """\
// OpenClaw config, as in the docs
{
  tools: {
    loopDetection: {
      enabled: true, // master switch
      historySize: 30,
      warningThreshold: 10,
      criticalThreshold: 20,
      unknownToolThreshold: 10,
      globalCircuitBreakerThreshold: 30,
      detectors: {
        genericRepeat: true,
        knownPollNoProgress: true,
        pingPong: false,
      },
      /* block comment */
      postCompactionGuard: {
        windowSize: 3.0,
      },
    },
  },
  agents: {
    list: [
      {
        id: 'safe-runner',
        tools: {
          loopDetection: {
            enabled: true,
            warningThreshold: 8,
            criticalThreshold: 16,
            detectors: { pingPong: true },
          },
        },
      },
    ],
  },
}
"""


def test_from_file_json5_features(tmp_path: Path) -> None:
    path = write(tmp_path, SEED_JSON5)
    config = LoopDetectionConfig.from_file(path)
    assert config.to_mapping() == {
        "enabled": True,
        "historySize": 30,
        "warningThreshold": 10,
        "criticalThreshold": 20,
        "unknownToolThreshold": 10,
        "globalCircuitBreakerThreshold": 30,
        "detectors": {"genericRepeat": True, "knownPollNoProgress": True, "pingPong": False},
        "postCompactionGuard": {"windowSize": 3},
    }
    assert config.profile == "reference"
    assert type(config.post_compaction_guard.window_size) is int  # type: ignore[union-attr]
    # str paths work too.
    assert LoopDetectionConfig.from_file(str(path)) == config


def test_from_file_per_agent_merge(tmp_path: Path) -> None:
    path = write(tmp_path, SEED_JSON5)
    merged = LoopDetectionConfig.from_file(path, agent_id=" Safe-Runner ")
    assert merged.to_mapping() == {
        "enabled": True,
        "historySize": 30,
        "warningThreshold": 8,
        "criticalThreshold": 16,
        "unknownToolThreshold": 10,
        "globalCircuitBreakerThreshold": 30,
        "detectors": {"genericRepeat": True, "knownPollNoProgress": True, "pingPong": True},
        "postCompactionGuard": {"windowSize": 3},
    }
    for agent_id in (None, "", "other"):
        assert LoopDetectionConfig.from_file(path, agent_id=agent_id) == (
            LoopDetectionConfig.from_file(path)
        )


def test_from_file_accepts_an_order_only_the_merge_creates(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """{
          tools: {loopDetection: {warningThreshold: 8, criticalThreshold: 16}},
          agents: {list: [{id: "a", tools: {loopDetection: {warningThreshold: 18}}}]},
        }""",
    )
    merged = LoopDetectionConfig.from_file(path, agent_id="a")
    assert merged.warning_threshold == 18
    assert merged.critical_threshold == 16
    resolved = resolve_config(merged)
    assert (resolved.warning_threshold, resolved.critical_threshold) == (18, 19)
    # The same block given directly is refused.
    assert issues_of(lambda: LoopDetectionConfig.from_mapping(merged.to_mapping())) == [
        ("criticalThreshold", MSG_WC)
    ]


def test_from_file_without_blocks(tmp_path: Path) -> None:
    path = write(tmp_path, "{gateway: {port: 18789}}")
    assert LoopDetectionConfig.from_file(path) == LoopDetectionConfig()
    assert LoopDetectionConfig.from_file(path, agent_id="main") == LoopDetectionConfig()


def test_from_file_agent_only(tmp_path: Path) -> None:
    path = write(
        tmp_path, '{agents: {list: [{id: "main", tools: {loopDetection: {historySize: 7}}}]}}'
    )
    assert LoopDetectionConfig.from_file(path).to_mapping() == {}
    assert LoopDetectionConfig.from_file(path, agent_id="MAIN").to_mapping() == {"historySize": 7}


def test_from_file_profile(tmp_path: Path) -> None:
    path = write(tmp_path, '{loopwatch: {profile: "adaptive"}, tools: {loopDetection: {}}}')
    assert LoopDetectionConfig.from_file(path).profile == "adaptive"
    path = write(tmp_path, '{loopwatch: {profile: "fast"}}')
    assert issues_of(lambda: LoopDetectionConfig.from_file(path)) == [
        ("loopwatch.profile", 'expected "reference" or "adaptive"')
    ]


def test_from_file_bom_and_plain_json(tmp_path: Path) -> None:
    text = json.dumps({"tools": {"loopDetection": {"historySize": 9}}})
    path = write(tmp_path, "\ufeff".encode() + text.encode())
    assert LoopDetectionConfig.from_file(path).history_size == 9
    assert load_config_file(path) == {"tools": {"loopDetection": {"historySize": 9}}}


def test_from_file_validates_every_agent(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """{
          tools: {loopDetection: {enabled: true}},
          agents: {list: [
            {id: "a"},
            {id: "b", tools: {loopDetection: {}}},
            {id: "c", tools: {loopDetection: {
              criticalThreshold: 5, globalCircuitBreakerThreshold: 5,
            }}},
          ]},
        }""",
    )
    assert issues_of(lambda: LoopDetectionConfig.from_file(path, agent_id="a")) == [
        ("agents.list[2].tools.loopDetection.globalCircuitBreakerThreshold", MSG_CG)
    ]


def test_load_config_file_returns_plain_dicts(tmp_path: Path) -> None:
    path = write(tmp_path, SEED_JSON5)
    config = load_config_file(path)

    def check(value: object) -> None:
        if isinstance(value, dict):
            assert type(value) is dict
            for item in value.values():
                check(item)
        elif isinstance(value, list):
            assert type(value) is list
            for item in value:
                check(item)

    check(config)
    assert config["agents"]["list"][0]["id"] == "safe-runner"


@pytest.mark.parametrize(
    ("text", "line", "column"),
    [
        ("{\n  tools: {\n    loopDetection: { historySize: ] }\n  }\n}", 3, 35),
        ("{a: 1,\n  b: ]", 2, 6),
        ('{"tools": {}}\n\n  x', 3, 3),
        ("{\n  tools: {\n    x: tru\n  }\n}", 3, 11),
        ("{\n  tools: 'open\n", 2, 15),
        ("", 1, 1),
        ("   \n  ", 2, 3),
        ("// only a comment\n", 2, 1),
    ],
    ids=repr,
)
def test_syntax_error_has_line_and_column(
    tmp_path: Path, text: str, line: int, column: int
) -> None:
    path = write(tmp_path, text)
    got = issues_of(lambda: load_config_file(path))
    assert len(got) == 1
    assert got[0][0] == ""
    assert f"line {line}, column {column}" in got[0][1]
    assert got[0][1].startswith("JSON5 syntax error at ")
    assert "\n" not in got[0][1]


def test_deep_nesting_is_a_config_error(tmp_path: Path) -> None:
    path = write(tmp_path, "[" * 50_000 + "]" * 50_000)
    got = issues_of(lambda: load_config_file(path))
    assert len(got) == 1
    assert got[0][0] == ""


def test_unreadable_files(tmp_path: Path) -> None:
    missing = tmp_path / "missing.json5"
    for path in (missing, tmp_path):
        got = issues_of(lambda p=path: LoopDetectionConfig.from_file(p))
        assert len(got) == 1
        assert got[0][0] == ""
        assert str(path) in got[0][1]
    latin1 = write(tmp_path, '{tools: {loopDetection: {}}, name: "caf\xe9"}'.encode("latin-1"))
    got = issues_of(lambda: load_config_file(latin1))
    assert len(got) == 1
    assert got[0][0] == ""
    assert "UTF-8" in got[0][1]


def test_top_level_must_be_an_object(tmp_path: Path) -> None:
    path = write(tmp_path, "[1, 2]")
    assert issues_of(lambda: load_config_file(path)) == [("", OBJ)]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "{tools: {loopDetection: {historySize: 5, enabled: true, historySize: 6}}}",
            [("tools.loopDetection.historySize", "duplicate key")],
        ),
        (
            "{tools: {loopDetection: {historySize: 'x', historySize: 6}}}",
            [
                ("tools.loopDetection.historySize", INT),
                ("tools.loopDetection.historySize", "duplicate key"),
            ],
        ),
        (
            "{tools: {loopDetection: {detectors: {pingPong: true, pingPong: false}}}}",
            [("tools.loopDetection.detectors.pingPong", "duplicate key")],
        ),
        (
            "{tools: {loopDetection: {postCompactionGuard: {windowSize: 1, windowSize: 2}}}}",
            [("tools.loopDetection.postCompactionGuard.windowSize", "duplicate key")],
        ),
        (
            "{tools: {loopDetection: {detectors: {}, detectors: {}}}}",
            [("tools.loopDetection.detectors", "duplicate key")],
        ),
        (
            "{agents: {list: [{id: 'a'}, {id: 'b', tools: {loopDetection: "
            "{enabled: true, enabled: false}}}]}}",
            [("agents.list[1].tools.loopDetection.enabled", "duplicate key")],
        ),
        (
            "{loopwatch: {profile: 'reference', profile: 'adaptive'}}",
            [("loopwatch.profile", "duplicate key")],
        ),
        # Outside the validated subtrees the last value wins, silently.
        ("{gateway: {port: 1, port: 2}, gateway: {}}", []),
        ("{agents: {list: [{id: 'a', id: 'b', tools: {}, tools: {}}]}}", []),
        (
            "{tools: {loopDetection: {historySize: 'bad'}}, "
            "tools: {loopDetection: {historySize: 4}}}",
            [],
        ),
        (
            "{tools: {loopDetection: {historySize: 'bad'}, loopDetection: {historySize: 4}}}",
            [],
        ),
    ],
    ids=lambda v: v if isinstance(v, str) else None,
)
def test_duplicate_keys(tmp_path: Path, text: str, expected: list[tuple[str, str]]) -> None:
    path = write(tmp_path, text)
    if expected:
        assert issues_of(lambda: load_config_file(path)) == expected
    else:
        load_config_file(path)


def test_last_duplicate_block_wins(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "{tools: {loopDetection: {historySize: 'bad'}}, tools: {loopDetection: {historySize: 4}}}",
    )
    assert LoopDetectionConfig.from_file(path).to_mapping() == {"historySize": 4}
    path = write(
        tmp_path,
        "{agents: {list: [{id: 'x', tools: {loopDetection: {historySize: 2}}, id: 'a'}]}}",
    )
    assert LoopDetectionConfig.from_file(path, agent_id="a").to_mapping() == {"historySize": 2}
    assert LoopDetectionConfig.from_file(path, agent_id="x").to_mapping() == {}


def test_file_issues_are_all_reported(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """{
          tools: {loopDetection: {enabled: null, historySize: 5, historySize: 0}},
          agents: {list: [
            {id: "a", tools: {loopDetection: {warningThreshold: 3, criticalThreshold: 2}}},
          ]},
          loopwatch: {mode: 1},
        }""",
    )
    assert issues_of(lambda: LoopDetectionConfig.from_file(path)) == [
        ("tools.loopDetection.enabled", BOOL),
        ("tools.loopDetection.historySize", "duplicate key"),
        ("tools.loopDetection.historySize", INT),
        ("agents.list[0].tools.loopDetection.criticalThreshold", MSG_WC),
        ("loopwatch.mode", UNKNOWN),
    ]


# --------------------------------------------------------------------------------------------
# normalize_agent_id and merge_agent_config (SPEC §7.3)
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("  ", "main"),
        ("-lead-", "lead"),
        ("agent a", "agent-a"),
        ("MAIN", "main"),
        ("a" * 70, "a" * 64),
        ("\u00a0main\u00a0", "main"),
        ("\u212aelvin", "kelvin"),
        ("", "main"),
        (None, "main"),
        (UNDEFINED, "main"),
        (5, "main"),
        ("Safe-Runner", "safe-runner"),
        ("a_b-C9", "a_b-c9"),
        ("a" * 64, "a" * 64),
        ("a" * 63 + " b", "a" * 63 + "-"),
        ("agent  !!  b", "agent-b"),
        ("_x", "_x"),
        ("---", "main"),
        ("\u017f", "main"),
        ("\ufeffops\u3000", "ops"),
        ("\x1cops", "ops"),
        ("été", "t"),
        ("ÉTÉ x", "t-x"),
    ],
    ids=repr,
)
def test_normalize_agent_id(value: object, expected: str) -> None:
    assert normalize_agent_id(value) == expected


GLOBAL = {"enabled": True, "historySize": 10, "detectors": {"pingPong": False}}


def oc(global_block: object = None, entries: object = None) -> dict[str, Any]:
    config: dict[str, Any] = {}
    if global_block is not None:
        config["tools"] = {"loopDetection": global_block}
    if entries is not None:
        config["agents"] = {"list": entries}
    return config


def agent(agent_id: object, block: object = None, **extra: object) -> dict[str, Any]:
    entry: dict[str, Any] = {"id": agent_id, **extra}
    if block is not None:
        entry["tools"] = {"loopDetection": block}
    return entry


@pytest.mark.parametrize(
    ("config", "agent_id", "expected"),
    [
        (None, "a", None),
        ([], "a", None),
        ({}, "a", None),
        ({"tools": None}, None, None),
        ({"tools": []}, None, None),
        ({"tools": {"loopDetection": None}}, None, None),
        (oc(GLOBAL), None, GLOBAL),
        (oc(GLOBAL), "", GLOBAL),
        (oc(GLOBAL), "nobody", GLOBAL),
        # An agent id of None or "" never uses an entry, even "main".
        (oc(GLOBAL, [agent("main", {"historySize": 3})]), None, GLOBAL),
        (oc(GLOBAL, [agent("main", {"historySize": 3})]), "", GLOBAL),
        (oc(GLOBAL, [agent("main", {"historySize": 3})]), 7, GLOBAL),
        # A blank agent id is not "": it normalises to main.
        (
            oc(GLOBAL, [agent("main", {"historySize": 3})]),
            "  ",
            {**GLOBAL, "historySize": 3, "postCompactionGuard": {}},
        ),
        # Agent only.
        (oc(None, [agent("a", {"historySize": 3})]), "a", {"historySize": 3}),
        (oc(None, [agent("a", {})]), "a", {}),
        # Both: one level deep, both nested keys always present.
        (
            oc({"historySize": 10}, [agent("a", {"warningThreshold": 3})]),
            "a",
            {"historySize": 10, "warningThreshold": 3, "detectors": {}, "postCompactionGuard": {}},
        ),
        (
            oc(
                {
                    "detectors": {"pingPong": False, "genericRepeat": True},
                    "postCompactionGuard": {"windowSize": 1},
                },
                [agent("a", {"detectors": {"genericRepeat": False}, "postCompactionGuard": {}})],
            ),
            "a",
            {
                "detectors": {"pingPong": False, "genericRepeat": False},
                "postCompactionGuard": {"windowSize": 1},
            },
        ),
        # Non-mapping nested objects count as {}.
        (
            oc({"detectors": None, "postCompactionGuard": 5}, [agent("a", {"detectors": [1]})]),
            "a",
            {"detectors": {}, "postCompactionGuard": {}},
        ),
        # First match wins.
        (
            oc(None, [agent("A", {"historySize": 1}), agent("a", {"historySize": 2})]),
            "a",
            {"historySize": 1},
        ),
        # The first match without a block stops the search.
        (oc(GLOBAL, [agent("a"), agent("a", {"historySize": 2})]), "a", GLOBAL),
        (oc(GLOBAL, [agent("a", None, tools=None), agent("a", {"historySize": 2})]), "a", GLOBAL),
        (oc(GLOBAL, [agent("a", None, tools=[]), agent("a", {"historySize": 2})]), "a", GLOBAL),
        (oc(None, [agent("a", None, tools={}), agent("a", {"historySize": 2})]), "a", None),
        # Falsy agent blocks are absent (and stop the search); truthy non-mappings count as {}.
        *[
            (oc(GLOBAL, [agent("a", falsy), agent("a", {"historySize": 2})]), "a", GLOBAL)
            for falsy in (False, 0, 0.0, NAN, "", UNDEFINED)
        ],
        *[(oc(None, [agent("a", truthy)]), "a", {}) for truthy in (True, 1, "x", [], [1])],
        (
            oc(GLOBAL, [agent("a", True)]),
            "a",
            {**GLOBAL, "postCompactionGuard": {}},
        ),
        # Falsy global blocks are absent, {} is present, truthy non-mappings count as {}.
        *[(oc(falsy, [agent("a")]), "a", None) for falsy in (False, 0, NAN, "", UNDEFINED)],
        (oc({}, [agent("a")]), "a", {}),
        (oc("yes"), None, {}),
        (oc([]), None, {}),
        (
            oc({}, [agent("a", {"historySize": 3})]),
            "a",
            {"historySize": 3, "detectors": {}, "postCompactionGuard": {}},
        ),
        # Skipped entries: None, numbers, strings, booleans.
        (
            oc(None, [None, 5, 2.5, "a", True, False, agent("a", {"historySize": 4})]),
            "a",
            {"historySize": 4},
        ),
        # A list entry has no id (so it is "main") and no tools: it stops a search for main.
        (oc(GLOBAL, [["main"], agent("main", {"historySize": 4})]), "main", GLOBAL),
        (oc(None, [["main"], agent("a", {"historySize": 4})]), "a", {"historySize": 4}),
        # An entry with no id, or id None, is main.
        (oc(None, [{"tools": {"loopDetection": {"historySize": 4}}}]), "Main", {"historySize": 4}),
        (oc(None, [agent(None, {"historySize": 4})]), "main", {"historySize": 4}),
        (oc(None, [agent(UNDEFINED, {"historySize": 4})]), "main", {"historySize": 4}),
        # An id that is neither str nor None never matches, not even main.
        (
            oc(None, [agent(5, {"historySize": 1}), agent("5", {"historySize": 2})]),
            "5",
            {"historySize": 2},
        ),
        (oc(None, [agent(0, {"historySize": 1})]), "main", None),
        (oc(None, [agent(["a"], {"historySize": 1})]), "a", None),
        # Ids are normalised on both sides.
        (oc(None, [agent(" Agent A ", {"historySize": 5})]), "agent-a", {"historySize": 5}),
        (oc(None, [agent("a" * 70, {"historySize": 5})]), "a" * 64, {"historySize": 5}),
        # agents.list must be a list or tuple; agents a mapping.
        (
            oc(None, ({"id": "a", "tools": {"loopDetection": {"historySize": 5}}},)),
            "a",
            {"historySize": 5},
        ),
        ({"agents": {"list": {"a": agent("a", {"historySize": 5})}}}, "a", None),
        ({"agents": [agent("a", {"historySize": 5})]}, "a", None),
    ],
)
def test_merge_agent_config(config: object, agent_id: object, expected: object) -> None:
    before = copy.deepcopy(config)
    assert merge_agent_config(config, agent_id) == expected
    assert config == before


def test_merge_examples_from_the_reference() -> None:
    # rnd-merge-013, rnd-merge-031 and rnd-merge-040 of the reference examples.
    config_013 = {
        "agents": {
            "list": [
                {
                    "tools": {
                        "loopDetection": {
                            "enabled": False,
                            "criticalThreshold": 4,
                            "globalCircuitBreakerThreshold": 9,
                            "unknownToolThreshold": 4,
                            "detectors": {"genericRepeat": False},
                            "postCompactionGuard": {},
                        }
                    },
                    "id": "-lead-",
                },
                {"id": "agent a", "tools": {"loopDetection": {"enabled": True}}},
            ]
        },
        "tools": {
            "loopDetection": {
                "enabled": True,
                "criticalThreshold": 3,
                "unknownToolThreshold": 3,
                "historySize": 39,
                "postCompactionGuard": {"windowSize": 1},
                "detectors": {"knownPollNoProgress": False, "pingPong": True},
            }
        },
    }
    assert merge_agent_config(config_013, "lead") == {
        "enabled": False,
        "criticalThreshold": 4,
        "unknownToolThreshold": 4,
        "historySize": 39,
        "postCompactionGuard": {"windowSize": 1},
        "detectors": {"knownPollNoProgress": False, "pingPong": True, "genericRepeat": False},
        "globalCircuitBreakerThreshold": 9,
    }
    config_031 = {
        "agents": {
            "list": [
                {"id": "MAIN", "tools": {"loopDetection": {"enabled": True}}},
                {
                    "tools": {
                        "loopDetection": {
                            "unknownToolThreshold": 2,
                            "detectors": {"pingPong": False},
                            "postCompactionGuard": {},
                        }
                    },
                    "id": "a" * 64,
                },
            ]
        },
        "tools": {
            "loopDetection": {
                "criticalThreshold": 9,
                "unknownToolThreshold": 4,
                "historySize": 4,
                "postCompactionGuard": {"windowSize": 1},
                "detectors": {"knownPollNoProgress": False, "genericRepeat": True},
            }
        },
    }
    assert merge_agent_config(config_031, "a" * 70) == {
        "criticalThreshold": 9,
        "unknownToolThreshold": 2,
        "historySize": 4,
        "postCompactionGuard": {"windowSize": 1},
        "detectors": {"knownPollNoProgress": False, "genericRepeat": True, "pingPong": False},
    }
    config_040 = {
        "agents": {
            "list": [
                {"id": "agent--a", "tools": {"loopDetection": {"warningThreshold": 5}}},
                {"tools": {"loopDetection": {"postCompactionGuard": {}}}, "id": "agent-a"},
            ]
        },
        "tools": {
            "loopDetection": {"warningThreshold": 4, "postCompactionGuard": {"windowSize": 4}}
        },
    }
    assert merge_agent_config(config_040, "agent-b") == {
        "warningThreshold": 4,
        "postCompactionGuard": {"windowSize": 4},
    }


def test_merge_returns_new_dicts() -> None:
    global_block = {"historySize": 5, "detectors": {"pingPong": False}}
    agent_block = {"postCompactionGuard": {"windowSize": 2}}
    config = oc(global_block, [agent("a", agent_block)])
    before = copy.deepcopy(config)
    for agent_id in (None, "a"):
        merged = merge_agent_config(config, agent_id)
        assert merged is not None
        assert merged is not global_block
        merged["historySize"] = 99
        merged["detectors"]["pingPong"] = True
        merged.setdefault("postCompactionGuard", {})["windowSize"] = 9
    only_agent = oc(None, [agent("a", agent_block)])
    merged = merge_agent_config(only_agent, "a")
    assert merged is not None
    merged["postCompactionGuard"]["windowSize"] = 9
    assert config == before
    assert agent_block == {"postCompactionGuard": {"windowSize": 2}}


def test_merged_block_resolves() -> None:
    config = oc(
        {"enabled": True, "warningThreshold": 8, "criticalThreshold": 16},
        [agent("a", {"warningThreshold": 18, "postCompactionGuard": {"windowSize": 2}})],
    )
    resolved = resolve_config(merge_agent_config(config, "a"))
    assert (resolved.warning_threshold, resolved.critical_threshold) == (18, 19)
    assert resolved.global_circuit_breaker_threshold == 30
    assert resolved.guard_window_size == 2
    assert resolve_config(merge_agent_config({}, "a")) == DEFAULTS


# --------------------------------------------------------------------------------------------
# Properties
# --------------------------------------------------------------------------------------------

KEYS = st.sampled_from(
    [
        *sorted(BLOCK_KEYS),
        "genericRepeat",
        "knownPollNoProgress",
        "pingPong",
        "windowSize",
        "tools",
        "loopDetection",
        "agents",
        "list",
        "id",
        "loopwatch",
        "profile",
    ]
) | st.text(max_size=4)

SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**60), max_value=2**60)
    | st.integers(min_value=-3, max_value=40)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.sampled_from([0.0, -0.0, 2.0, 30.0, float(2**53), NAN])
    | st.text(max_size=6)
    | st.sampled_from(["reference", "adaptive", "main", " A "])
    | st.just(UNDEFINED)
)

JUNK = st.recursive(
    SCALARS,
    lambda children: (
        st.lists(children, max_size=4)
        | st.tuples(children, children)
        | st.dictionaries(KEYS, children, max_size=6)
    ),
    max_leaves=30,
)

JUNK_BLOCKS = st.dictionaries(KEYS, JUNK, max_size=8)


def _well_formed(resolved: ResolvedConfig) -> None:
    ints = [
        resolved.history_size,
        resolved.warning_threshold,
        resolved.critical_threshold,
        resolved.unknown_tool_threshold,
        resolved.global_circuit_breaker_threshold,
        resolved.guard_window_size,
    ]
    assert all(type(n) is int and n > 0 for n in ints)
    flags = [
        resolved.enabled,
        resolved.generic_repeat,
        resolved.known_poll_no_progress,
        resolved.ping_pong,
        resolved.guard_enabled,
    ]
    assert all(type(flag) is bool for flag in flags)
    assert resolved.warning_threshold < resolved.critical_threshold
    assert resolved.critical_threshold < resolved.global_circuit_breaker_threshold


@given(JUNK | JUNK_BLOCKS)
def test_resolve_config_never_raises(block: object) -> None:
    _well_formed(resolve_config(block))


@given(JUNK | JUNK_BLOCKS, JUNK)
def test_merge_never_raises_nor_mutates(config: object, agent_id: object) -> None:
    before = repr(config)
    merged = merge_agent_config(config, agent_id)
    assert merged is None or type(merged) is dict
    assert repr(config) == before
    _well_formed(resolve_config(merged))


@given(JUNK | JUNK_BLOCKS)
def test_from_mapping_returns_or_raises_config_error(block: object) -> None:
    try:
        config = LoopDetectionConfig.from_mapping(block)
    except ConfigError as error:
        assert error.issues
        assert all(isinstance(issue, ConfigIssue) for issue in error.issues)
        return
    # A valid block resolves the same, strict or lenient, and round-trips.
    assert resolve_config(config) == resolve_config(block)
    assert LoopDetectionConfig.from_mapping(config.to_mapping()) == config


ATTRS = st.sampled_from([f.name for f in dataclasses.fields(LoopDetectionConfig)])


@given(st.dictionaries(ATTRS, JUNK, max_size=9))
def test_constructor_returns_or_raises_config_error(kwargs: dict[str, Any]) -> None:
    try:
        LoopDetectionConfig(**kwargs)
    except ConfigError as error:
        assert error.issues


@given(JUNK | JUNK_BLOCKS)
def test_validate_openclaw_config_returns_or_raises_config_error(config: Any) -> None:
    try:
        validate_openclaw_config(config)
    except ConfigError as error:
        assert error.issues


@settings(max_examples=60, suppress_health_check=[HealthCheck.too_slow])
@given(JUNK_BLOCKS, st.sampled_from([None, "main", "a"]))
def test_from_file_returns_or_raises_config_error(block: dict[str, Any], agent_id: Any) -> None:
    def plain(value: object) -> object:
        if value is UNDEFINED:
            return None
        if isinstance(value, (list, tuple)):
            return [plain(item) for item in value]
        if isinstance(value, dict):
            return {key: plain(item) for key, item in value.items()}
        return value

    text = json.dumps({"tools": {"loopDetection": plain(block)}, **plain(block)})  # type: ignore[dict-item]
    with tempfile.TemporaryDirectory() as directory:
        path = os.path.join(directory, "config.json5")
        Path(path).write_text(text, encoding="utf-8")
        try:
            config = LoopDetectionConfig.from_file(path, agent_id=agent_id)
        except ConfigError as error:
            assert error.issues
        else:
            _well_formed(resolve_config(config))


@given(st.text(max_size=80) | JUNK)
def test_normalize_agent_id_shape(value: object) -> None:
    normalized = normalize_agent_id(value)
    assert re.fullmatch(r"[a-z0-9_-]{1,64}", normalized)
    assert normalize_agent_id(normalized) == normalized


@pytest.mark.parametrize("path", ["openclaw.json5", b"openclaw.json5", Path("x.json5")])
def test_a_path_as_openclaw_config_says_how_to_read_the_file(path: Any) -> None:
    with pytest.raises(TypeError, match=r"not (str|bytes|\w*Path).*load_config_file\(path\)"):
        LoopGuard(openclaw_config=path)
    with pytest.raises(TypeError, match=r"not list$"):
        LoopGuard(openclaw_config=[])
