"""Replay semantics: the host's part played exactly as SPEC §5 / §9.3 describe it."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from loopwatch import UNDEFINED, ConfigError, LoopGuard
from loopwatch.replay import ReplaySettings, RunReplay, replay_run
from loopwatch.transcripts import Compaction, ReplayCall, Run, read_transcript


class SpyGuard(LoopGuard):
    """A real guard that remembers what the replay handed it."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.after: list[dict[str, Any]] = []
        self.before: list[dict[str, Any]] = []
        self.compactions: list[dict[str, Any]] = []

    def before_call(self, tool_name: object, params: object, **kwargs: Any) -> Any:
        self.before.append({"tool": tool_name, **kwargs})
        return super().before_call(tool_name, params, **kwargs)

    def after_call(self, tool_name: object, params: object, **kwargs: Any) -> Any:
        self.after.append({"tool": tool_name, **kwargs})
        return super().after_call(tool_name, params, **kwargs)

    def compaction_retry(self, **kwargs: Any) -> None:
        self.compactions.append(kwargs)
        super().compaction_retry(**kwargs)


@dataclass(frozen=True)
class SpySettings(ReplaySettings):
    """Settings whose guard is a :class:`SpyGuard`, kept for inspection."""

    guards: list[SpyGuard] | None = None

    def new_guard(self) -> LoopGuard:
        guard = SpyGuard(self.config)
        assert self.guards is not None
        self.guards.append(guard)
        return guard


def _replay(run: Run, **config: Any) -> tuple[RunReplay, SpyGuard]:
    guards: list[SpyGuard] = []
    block = {"enabled": True, **config}
    replay = replay_run(run, SpySettings(config=block, guards=guards), session_key="s")
    return replay, guards[0]


def _loop(n: int, **fields: Any) -> Run:
    return Run(None, "", tuple(ReplayCall("read", {"path": "x"}, **fields) for _ in range(n)))


def test_a_loop_warns_then_blocks_with_a_sticky_count(data: Path) -> None:
    (run,) = read_transcript(data / "loopwatch" / "loop.jsonl").runs
    replay, _guard = _replay(run)
    actions = [d.action for d in replay.decisions]
    assert actions == ["allow"] * 10 + ["warn"] * 10 + ["block"] * 5
    assert [d.count for d in replay.decisions[10:20]] == list(range(10, 20))
    # Blocked calls are never recorded: the count stays at the critical threshold (#127701).
    assert {d.count for d in replay.decisions[20:]} == {20}
    assert {d.detector for d in replay.decisions[10:]} == {"generic_repeat"}
    # Warnings are bucketed (SPEC §5.3): only the tenth repeat is emitted.
    assert [d.emitted for d in replay.decisions[10:20]] == [True] + [False] * 9
    assert replay.first_warning is not None and replay.first_warning.index == 11
    assert replay.first_stop is not None and replay.first_stop.index == 21
    assert replay.first_stop.message is not None
    assert replay.first_stop.message.startswith("CRITICAL: Called read with identical")
    assert replay.wasted_calls == 5
    assert replay.wasted_tokens is None
    assert (replay.warned, replay.blocked, replay.aborted) == (True, True, False)
    assert (replay.calls_warned, replay.calls_blocked) == (10, 5)
    assert replay.detector == "generic_repeat"


def test_a_blocked_call_is_not_run_its_blocked_result_goes_to_after_call() -> None:
    replay, guard = _replay(_loop(22, result="same"), criticalThreshold=20)
    blocked = [d for d in replay.decisions if d.action == "block"]
    assert [d.index for d in blocked] == [21, 22]
    for decision in blocked:
        after = guard.after[decision.index - 1]
        assert after["error"] is UNDEFINED
        assert after["result"]["details"]["deniedReason"] == "tool-loop"
        assert after["result"]["details"]["status"] == "blocked"
    assert guard.after[0]["result"] == "same"


def test_recorded_null_error_is_not_an_error_and_null_result_is_a_result() -> None:
    # 25 identical calls with error UNDEFINED and result None: identical outcomes, so the
    # generic critical fires. (Had error been None, every outcome would be an error: the
    # same hash too, but via "error:". The spy proves what was passed.)
    replay, guard = _replay(_loop(21, result=None))
    assert guard.after[0]["error"] is UNDEFINED
    assert guard.after[0]["result"] is None
    assert replay.decisions[-1].action == "block"


def test_no_outcome_means_nothing_recorded_so_no_block() -> None:
    replay, _guard = _replay(_loop(30))  # result UNDEFINED: no outcome hashes at all
    assert {d.action for d in replay.decisions[10:]} == {"warn"}  # warnings need no outcomes


def test_call_ids_come_from_the_transcript_or_are_synthesised() -> None:
    run = Run("r", "r", (ReplayCall("a", {}, call_id="own"), ReplayCall("b", {})))
    replay, guard = _replay(run)
    assert [d.call_id for d in replay.decisions] == ["own", "call-2"]
    assert [b["tool_call_id"] for b in guard.before] == ["own", "call-2"]
    assert {b["run_id"] for b in guard.before} == {"r"}
    assert {b["session_key"] for b in guard.before} == {"s"}


def test_post_compaction_loop_aborts_and_the_rest_is_not_replayed(data: Path) -> None:
    _r1, r2 = read_transcript(data / "loopwatch" / "runs_and_compaction.jsonl").runs
    replay, guard = _replay(r2)
    assert guard.compactions == [{"session_key": "s", "run_id": "r2", "agent_id": None}]
    assert [d.action for d in replay.decisions] == [
        "allow",
        "allow",
        "allow",
        "abort",
        "not-replayed",
    ]
    abort = replay.decisions[3]
    assert abort.detector == "compaction_loop_persisted"
    assert abort.count == 3
    assert abort.message is not None and "after auto-compaction" in abort.message
    assert len(guard.before) == 4  # the fifth call was never shown to the guard
    # The aborting call ran; only what came after it was saved.
    assert replay.wasted_calls == 1
    assert replay.wasted_tokens == 200
    assert replay.aborted and not replay.blocked
    assert replay.first_stop is abort


def test_changing_results_after_compaction_never_abort() -> None:
    calls = [ReplayCall("exec", {"c": 1}, result=str(i)) for i in range(5)]
    run = Run(None, "", (calls[0], Compaction(), *calls[1:]))
    replay, _guard = _replay(run)
    assert {d.action for d in replay.decisions} == {"allow"}


def test_replay_is_deterministic_and_uses_a_fresh_guard_each_time(data: Path) -> None:
    (run,) = read_transcript(data / "loopwatch" / "loop.jsonl").runs
    settings = ReplaySettings()
    assert replay_run(run, settings) == replay_run(run, settings)


def test_default_settings_run_the_reference_defaults_switched_on(data: Path) -> None:
    (run,) = read_transcript(data / "loopwatch" / "loop.jsonl").runs
    assert replay_run(run).blocked
    off = replay_run(run, ReplaySettings(config=None))  # the library default: detection off
    assert not off.warned and not off.blocked


def test_openclaw_config_and_agent_override() -> None:
    config = {
        "tools": {"loopDetection": {"enabled": True, "warningThreshold": 3}},
        "agents": {"list": [{"id": "slow", "tools": {"loopDetection": {"enabled": False}}}]},
    }
    run = _loop(5, result="x")
    fast = replay_run(run, ReplaySettings(config=None, openclaw_config=config))
    assert fast.first_warning is not None and fast.first_warning.index == 4
    slow = replay_run(run, ReplaySettings(config=None, openclaw_config=config, agent_id="slow"))
    assert not slow.warned


def test_invalid_settings_raise_config_error() -> None:
    with pytest.raises(ConfigError):
        replay_run(_loop(1), ReplaySettings(config={"enabled": "yes"}))


def test_tokens_and_unhashable_args() -> None:
    colliding = {1: "a", "1": "b"}  # keys that serialise alike cannot be hashed (SPEC §8.4)
    run = Run(None, "", (ReplayCall("a", colliding, tokens=5), ReplayCall("b", {}, tokens=7)))
    replay = replay_run(run)
    assert replay.decisions[0].signature is None  # drawn in the shared lane
    assert replay.decisions[0].action == "allow"  # the guard fails open
    assert replay.wasted_tokens == 0
    assert replay.decisions[1].signature is not None
    assert replay.decisions[1].signature.startswith("b:")
