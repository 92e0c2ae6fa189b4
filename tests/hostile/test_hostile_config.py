"""Hostile configs at construction (SPEC §7.2): a clear ``ConfigError`` naming the field, or
the config loads; never a raw ``TypeError`` / ``RecursionError`` from loopwatch's own work.
"""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from loopwatch import ConfigError, LoopGuard, MemoryStore, merge_agent_config, store_from_url
from loopwatch.config.openclaw import loopwatch_parts
from loopwatch.settings import GuardSettings

SRC = Path(__file__).resolve().parents[2] / "src"

KEYS = st.sampled_from(
    [
        "enabled",
        "historySize",
        "warningThreshold",
        "criticalThreshold",
        "detectors",
        "postCompactionGuard",
        "pingPong",
        "windowSize",
        "tools",
        "loopDetection",
        "agents",
        "list",
        "id",
        "loopwatch",
        "profile",
        "x",
    ]
)
LEAVES = (
    st.none()
    | st.booleans()
    | st.integers(-(2**60), 2**60)
    | st.floats(allow_nan=True)
    | st.sampled_from(["", " main ", "MAIN", "a", "reference"])
)
TREES = st.recursive(
    LEAVES, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(KEYS, inner, max_size=4)
)
BLOCKS = st.dictionaries(
    st.sampled_from(["enabled", "historySize", "warningThreshold", "detectors"]),
    st.booleans() | st.integers(1, 50) | st.just({"pingPong": False}),
    max_size=3,
)
AGENTS = st.fixed_dictionaries(
    {"id": st.sampled_from(["", "a", " A ", "main", "b c"])},
    optional={"tools": st.fixed_dictionaries({"loopDetection": BLOCKS}) | st.just({})},
)
WHOLE = st.fixed_dictionaries(
    {},
    optional={
        "tools": st.fixed_dictionaries({"loopDetection": BLOCKS}, optional={"other": TREES}),
        "agents": st.fixed_dictionaries({"list": st.lists(AGENTS, max_size=4)}),
        "loopwatch": st.just({"profile": "reference"}),
        "gateway": TREES,
    },
)


def nested_lists(depth: int) -> list[Any]:
    root: list[Any] = []
    node = root
    for _ in range(depth):
        node.append([])
        node = node[0]
    return root


@pytest.mark.parametrize(
    "ignored",
    [threading.Lock(), (n for n in range(3)), sys, nested_lists(5_000)],
    ids=["lock", "generator", "module", "deep"],
)
def test_keys_loopwatch_ignores_are_never_copied(ignored: object) -> None:
    """SPEC §7.2: every other key is ignored, so a real config loads as it is (values that
    cannot be deep-copied, nesting deeper than a copy can walk)."""
    config = {"gateway": {"x": ignored}, "tools": {"loopDetection": {"enabled": True}}}
    guard = LoopGuard(openclaw_config=config, strict=True)
    assert guard.settings.block_for(None)[1].enabled


def test_a_valid_file_with_deep_nesting_elsewhere_builds_a_guard(tmp_path: Path) -> None:
    """``config check`` calls it valid, so the guard, ``scan`` and the hooks must load it."""
    depth = 600  # within the JSON parser's limit, beyond what ``copy.deepcopy`` can walk
    path = tmp_path / "openclaw.json"
    path.write_text(
        '{"gateway": ' + "[" * depth + "]" * depth + ', "tools": {"loopDetection": '
        '{"enabled": true, "historySize": 7}}}'
    )
    settings_ = GuardSettings.resolve(config_file=path)
    assert settings_.block_for(None)[1].history_size == 7
    trajectory = tmp_path / "run.jsonl"
    trajectory.write_text('{"tool": "exec", "params": {"command": "ls"}, "result": "a"}\n')
    done = subprocess.run(
        [sys.executable, "-m", "loopwatch", "scan", "--config", str(path), str(trajectory)],
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(SRC), "PATH": "/usr/bin:/bin"},
        check=False,
    )
    assert "Traceback" not in done.stderr, done.stderr
    assert "RecursionError" not in done.stdout + done.stderr


@settings(max_examples=300)
@given(WHOLE, st.none() | st.sampled_from(["", "a", "A", "main", "b-c", "zz"]))
def test_the_copy_merges_like_the_config(config: dict[str, Any], agent: str | None) -> None:
    try:
        GuardSettings.resolve(openclaw_config=config)
    except ConfigError:
        return
    parts = loopwatch_parts(config)
    assert merge_agent_config(parts, agent) == merge_agent_config(config, agent)


def test_the_copy_is_private() -> None:
    block = {"enabled": True, "detectors": {"pingPong": True}}
    config = {"tools": {"loopDetection": block}, "agents": {"list": [{"id": "a"}]}}
    guard = LoopGuard(openclaw_config=config, strict=True)
    block["enabled"] = False
    block["detectors"]["pingPong"] = False
    config["agents"]["list"].append({"id": "b", "tools": {"loopDetection": {"enabled": False}}})
    assert guard.settings.block_for("b")[1].enabled
    assert guard.settings.block_for(None)[1].ping_pong


@pytest.mark.parametrize(
    ("kwargs", "says"),
    [
        ({"store": "redis://localhost:6379"}, "store_from_url"),
        ({"store": {}}, "store must be a loopwatch Store"),
        ({"clock": 1_700_000_000.0}, "clock must be a callable"),
        ({"settings": {"enabled": True}}, "settings must be GuardSettings"),
        ({"detectors": [None]}, "is not callable"),
    ],
)
def test_arguments_every_call_would_fail_on_are_refused_at_construction(
    kwargs: dict[str, Any], says: str
) -> None:
    """Without the check, each of these fails open on every call: the guard allows
    everything and detects nothing, and only a log line per tool name says why."""
    with pytest.raises(TypeError, match=says):
        LoopGuard({"enabled": True}, strict=False, **kwargs)


class _StringlyStore(MemoryStore):
    fail_open = "false"  # type: ignore[assignment]


@pytest.mark.parametrize(
    ("kwargs", "says"),
    [
        ({"enforce": "false"}, "enforce must be a bool, not str"),
        ({"enforce": None}, "enforce must be a bool, not NoneType"),
        ({"enforce": 0}, "enforce must be a bool, not int"),
        ({"strict": "no"}, "strict must be a bool or None, not str"),
        ({"send_tools": b"telegram"}, "send_tools must be tool names"),
        ({"send_tools": [1]}, "send_tools entries must be str, not int"),
        ({"send_tools": ["telegram", b"sms"]}, "send_tools entries must be str, not bytes"),
        ({"store": _StringlyStore()}, "store.fail_open must be a bool, not str"),
    ],
)
def test_flags_and_names_that_would_be_misread_are_refused_at_construction(
    kwargs: dict[str, Any], says: str
) -> None:
    """Without the check, ``enforce="false"`` is true (shadow mode silently off), bytes
    send tools are their byte values ("116", "101", ...), and a store's ``"false"``
    ``fail_open`` fails open."""
    with pytest.raises(TypeError, match=says):
        LoopGuard({"enabled": True}, **kwargs)


@given(
    flag=st.one_of(
        st.text(max_size=5), st.integers(), st.none(), st.floats(), st.lists(st.booleans())
    )
)
def test_only_a_bool_is_a_fail_open_flag_of_a_store(flag: object, tmp_path_factory: Any) -> None:
    from loopwatch.stores.sqlite import SqliteStore

    folder = tmp_path_factory.mktemp("store")
    with pytest.raises(TypeError, match="fail_open must be a bool"):
        SqliteStore(folder / "x.db", fail_open=flag)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="fail_open must be a bool"):
        store_from_url(f"sqlite://{folder}/y.db", fail_open=flag)


def test_only_a_bool_is_a_fail_open_flag_of_the_redis_store() -> None:
    pytest.importorskip("redis")
    from loopwatch.stores.redis import RedisStore

    with pytest.raises(TypeError, match="fail_open must be a bool, not str"):
        store_from_url("redis://localhost:6379/0", fail_open="false")
    with pytest.raises(TypeError, match="fail_open must be a bool, not int"):
        RedisStore(object(), fail_open=0)  # type: ignore[arg-type]


@pytest.mark.parametrize("adaptive", [3, "identicalStreak", [1], {"bogus": 1}])
def test_a_bad_adaptive_block_is_refused_whatever_the_profile(adaptive: object) -> None:
    # Unused by the reference profile, but a wrong block must not wait, unnoticed, for
    # the day the profile is switched.
    for profile in ("reference", "adaptive"):
        with pytest.raises(ConfigError, match=r"^loopwatch\.adaptive"):
            LoopGuard({"enabled": True}, profile=profile, adaptive=adaptive)  # type: ignore[arg-type]
    LoopGuard({"enabled": True}, adaptive={"identicalStreak": {"warn": 3, "block": 4}})


def test_send_tools_from_a_generator_are_read_once() -> None:
    guard = LoopGuard({"enabled": True}, send_tools=(t for t in ["Telegram", "sms"]))
    assert guard.send_tools == frozenset({"telegram", "sms"})


def test_one_send_tool_given_as_a_string_is_one_name() -> None:
    guard = LoopGuard({"enabled": True}, send_tools="Telegram")
    assert guard.send_tools == frozenset({"telegram"})


def test_detectors_from_a_generator_are_kept() -> None:
    def never(records: object, call: object) -> None:
        return None

    guard = LoopGuard({"enabled": True}, detectors=(d for d in [never]))
    assert guard.detector_profile.detectors == (never,)  # type: ignore[attr-defined]


@pytest.mark.parametrize("ttl", ["1800", b"1", [1], True, float("nan"), -1.0, 0])
def test_a_memory_store_idle_ttl_that_is_no_positive_number_is_a_value_error(ttl: object) -> None:
    with pytest.raises(ValueError, match="idle_ttl_s must be a positive number"):
        MemoryStore(idle_ttl_s=ttl)  # type: ignore[arg-type]
