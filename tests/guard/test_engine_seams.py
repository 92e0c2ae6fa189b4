"""The engine's seams (issue 12, 16, 17): profiles, user detectors, batches, call ids,
critical strikes, first warnings, the failure policy and its strict mode."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from loopwatch import LoopGuard, LoopVerdict, ToolCallRecord
from loopwatch.detectors.profiles import DetectorProfile, UpcomingCall
from loopwatch.guard._memo import ARGS_MEMO_SIZE, CALL_ID_MEMORY
from loopwatch.guard._policy import MAX_ERROR_TEXT, error_text

S = "session"
ON: dict[str, Any] = {"enabled": True}


# --- a third profile, plugged in from outside the package ---------------------------------


class CapProfile(DetectorProfile):
    """A test-only profile: at most ``cap`` calls of one tool per run, then a block."""

    name = "cap"  # type: ignore[assignment]
    detection_by_default = True  # type: ignore[assignment]

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self.facts_seen: list[str | None] = []

    def call_facts(self, call: UpcomingCall) -> str | None:
        return f"cap1|{call.tool_name}"

    def outcome_facts(
        self, call: UpcomingCall, params: object, outcome: Any, result: object, error: object
    ) -> str | None:
        return "cap1|done"

    def detect(self, history: Any, call: UpcomingCall, config: Any) -> LoopVerdict:
        records = history.fields() if hasattr(history, "fields") else history
        self.facts_seen = [r.facts for r in records]
        count = sum(1 for r in records if r.tool_name == call.tool_name) + 1
        if count > self.cap:
            return LoopVerdict(
                stuck=True,
                level="critical",
                detector="call_cap",
                count=count,
                message=f"{call.tool_name} called {count} times",
                warning_key=f"cap:{call.tool_name}",
            )
        return LoopVerdict(stuck=False)


def test_a_profile_from_outside_the_package_decides_and_owns_its_facts() -> None:
    profile = CapProfile(cap=3)
    guard = LoopGuard(profile=profile)
    assert guard.profile == "cap"
    actions = []
    for index in range(5):
        decision = guard.before_call("read", {"n": index}, session_key=S)
        actions.append(decision.action)
        guard.after_call("read", {"n": index}, session_key=S, result=decision.tool_result or "ok")
    assert actions == ["allow", "allow", "allow", "block", "block"]
    # The facts slot is the profile's: written at before_call, replaced at after_call.
    assert profile.facts_seen == ["cap1|done"] * 3
    assert [r.facts for r in guard.history(session_key=S)] == ["cap1|done"] * 3


class PerToolCap:
    """The worked example of docs/architecture.md: a per-tool call cap."""

    name = "per_tool_cap"

    def __init__(self, tool: str, warn: int, block: int) -> None:
        self.tool, self.warn, self.block = tool, warn, block

    def __call__(self, history: Sequence[Any], call: UpcomingCall) -> LoopVerdict | None:
        if call.tool_name != self.tool:
            return None
        count = sum(1 for record in history if record.tool_name == self.tool) + 1
        if count < self.warn:
            return None
        level = "critical" if count >= self.block else "warning"
        return LoopVerdict(
            stuck=True,
            level=level,
            detector=self.name,
            count=count,
            message=f"{self.tool} was called {count} times in this run",
            warning_key=f"{self.name}:{self.tool}",
        )


def test_a_user_detector_warns_once_then_blocks() -> None:
    guard = LoopGuard(ON, detectors=[PerToolCap("search", warn=3, block=5)])
    seen = []
    for index in range(6):
        decision = guard.before_call("search", {"q": index}, session_key=S)
        seen.append((decision.action, decision.emitted))
        guard.after_call("search", {"q": index}, session_key=S, result=f"r{index}")
    assert seen == [
        ("allow", False),
        ("allow", False),
        ("warn", True),
        ("warn", False),
        ("block", True),
        ("block", True),
    ]
    # Other tools are untouched.
    assert guard.before_call("read", {}, session_key=S).action == "allow"


def test_user_detectors_do_not_run_with_detection_off() -> None:
    guard = LoopGuard(detectors=[PerToolCap("search", warn=1, block=1)])
    assert guard.before_call("search", {}, session_key=S).action == "allow"


# --- batches -----------------------------------------------------------------------------


def _identical_batch(n: int, start: int = 0) -> list[tuple[object, object, object]]:
    return [("read", {"path": "a"}, f"b{start + i}") for i in range(n)]


def test_identical_calls_in_one_batch_count_as_repeats_and_one_critical_blocks_all() -> None:
    guard = LoopGuard(ON)
    for index in range(15):  # fifteen identical calls with one outcome
        guard.before_call("read", {"path": "a"}, session_key=S, tool_call_id=f"c{index}")
        guard.after_call("read", {"path": "a"}, session_key=S, tool_call_id=f"c{index}", result="x")
    batch = [*_identical_batch(8), ("ls", {}, "other")]
    decisions = guard.before_batch(batch, session_key=S)
    assert [d.action for d in decisions] == ["block"] * len(batch)
    assert all(d.tool_result is not None for d in decisions)
    criticals = [d for d in decisions if d.verdict.detector == "generic_repeat"]
    assert criticals and criticals[-1].verdict.count == 20
    # Nothing of the refused batch was recorded.
    assert len(guard.history(session_key=S)) == 15


def _play_identical(guard: LoopGuard, history: int) -> None:
    for index in range(history):
        guard.before_call("read", {"path": "a"}, session_key=S, tool_call_id=f"c{index}")
        guard.after_call("read", {"path": "a"}, session_key=S, tool_call_id=f"c{index}", result="x")


@settings(max_examples=40, deadline=None)
@given(st.integers(min_value=0, max_value=22), st.integers(min_value=2, max_value=6))
def test_a_refused_batch_changes_nothing_for_the_calls_after_it(history: int, size: int) -> None:
    # A refused batch records nothing: the same batch again is refused again (sticky), and
    # the same call alone is decided exactly as on the recorded history alone, so after a
    # batch of three is refused at 18 identical calls, the call alone is the 19th and runs.
    guard, alone = LoopGuard(ON), LoopGuard(ON)
    _play_identical(guard, history)
    _play_identical(alone, history)
    first = [d.action for d in guard.before_batch(_identical_batch(size, 100), session_key=S)]
    if "block" not in first:
        return  # an admitted batch is recorded: another history (the healthy-batch test)
    again = guard.before_batch(_identical_batch(size, 200), session_key=S)
    assert [d.action for d in again] == ["block"] * size
    assert len(guard.history(session_key=S)) == history
    single = guard.before_call("read", {"path": "a"}, session_key=S, tool_call_id="s")
    expected = alone.before_call("read", {"path": "a"}, session_key=S, tool_call_id="s")
    assert (single.action, single.verdict.count) == (expected.action, expected.verdict.count)
    assert (single.action == "block") == (history >= 20)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(min_value=1, max_value=5), min_size=1, max_size=40))
def test_no_way_of_batching_an_identical_call_runs_it_past_the_threshold(
    sizes: list[int],
) -> None:
    # Batches refused early (before the threshold's last call would run) never let a loop
    # run further than the calls one at a time would: at most 20 identical runs, and once
    # there, every batch is refused.
    guard = LoopGuard(ON)
    runs = 0
    for turn, size in enumerate(sizes):
        batch = _identical_batch(size, 10 * turn)
        decisions = guard.before_batch(batch, session_key=S)
        if runs >= 20:
            assert all(d.action == "block" for d in decisions)
        for (tool, params, call_id), decision in zip(batch, decisions, strict=True):
            if decision.tool_result is None:
                runs += 1
                guard.after_call(tool, params, session_key=S, tool_call_id=call_id, result="x")
        assert runs <= 20


def test_a_healthy_batch_is_recorded_like_sequential_calls() -> None:
    batch: list[tuple[object, object, object]] = [
        ("read", {"path": "a"}, "1"),
        ("read", {"path": "b"}, "2"),
        ("ls", {}, "3"),
    ]
    guard = LoopGuard(ON)
    decisions = guard.before_batch(batch, session_key=S)
    assert [d.action for d in decisions] == ["allow"] * 3
    sequential = LoopGuard(ON)
    for tool, params, call_id in batch:
        sequential.before_call(tool, params, session_key=S, tool_call_id=call_id)
    strip = [(r.tool_name, r.args_hash, r.tool_call_id) for r in guard.history(session_key=S)]
    assert strip == [
        (r.tool_name, r.args_hash, r.tool_call_id) for r in sequential.history(session_key=S)
    ]


def test_a_batch_of_one_is_before_call() -> None:
    guard = LoopGuard(ON)
    [decision] = guard.before_batch([("read", {}, "x")], session_key=S)
    assert decision.action == "allow"
    assert len(guard.history(session_key=S)) == 1


async def test_abefore_batch_matches_before_batch() -> None:
    sync_guard, async_guard = LoopGuard(ON), LoopGuard(ON)
    for guard in (sync_guard, async_guard):
        for _index in range(19):
            guard.before_call("read", {"path": "a"}, session_key=S)
            guard.after_call("read", {"path": "a"}, session_key=S, result="x")
    batch = _identical_batch(3)
    expected = [d.action for d in sync_guard.before_batch(batch, session_key=S)]
    got = [d.action for d in await async_guard.abefore_batch(batch, session_key=S)]
    assert got == expected == ["block"] * 3


# --- one call, two layers ------------------------------------------------------------------


def test_a_call_seen_by_two_layers_counts_once() -> None:
    guard = LoopGuard(ON)
    executions = 0
    for index in range(60):
        call_id = f"call-{index}"
        outer = guard.before_call("read", {"path": "a"}, session_key=S, tool_call_id=call_id)
        inner = guard.before_call("read", {"path": "a"}, session_key=S, tool_call_id=call_id)
        assert inner is outer
        if outer.tool_result is None:
            executions += 1
            result: object = "same"
        else:
            result = outer.tool_result
        for _layer in range(2):
            guard.after_call(
                "read", {"path": "a"}, session_key=S, tool_call_id=call_id, result=result
            )
    assert executions == 20


def test_a_reused_call_id_after_its_outcome_is_a_new_call() -> None:
    guard = LoopGuard(ON)
    for _ in range(3):
        guard.before_call("read", {}, session_key=S, tool_call_id="same")
        guard.after_call("read", {}, session_key=S, tool_call_id="same", result="x")
    assert len(guard.history(session_key=S)) == 3


def test_the_newest_finished_call_ids_are_remembered_oldest_forgotten_first() -> None:
    """A second report of a finished id records nothing, for the newest CALL_ID_MEMORY
    finished ids (a second report does not make an id newer)."""
    guard = LoopGuard({"enabled": False})

    def report(call_id: str) -> ToolCallRecord | None:
        return guard.after_call("read", {}, session_key=S, tool_call_id=call_id, result="x")

    assert report("first") is not None
    assert report("kept") is not None
    assert report("first") is None  # finished already
    for index in range(CALL_ID_MEMORY - 2):
        assert report(f"c{index}") is not None
    assert report("first") is None  # the oldest of CALL_ID_MEMORY: still remembered
    assert report("extra") is not None
    assert report("first") is not None  # forgotten: recorded again, and "kept" forgotten
    assert report("kept") is not None  # and c0 forgotten
    assert report("c1") is None
    assert report("c0") is not None


def test_a_reused_call_id_on_another_call_in_flight_is_decided_afresh() -> None:
    # A host that reuses tool-call ids ("call_0" every turn) and lost one after_call: the
    # next call under that id is another call, not a second layer asking about the first.
    guard = LoopGuard({"enabled": True, "unknownToolThreshold": 1})
    guard.before_call("grep", {"q": "x"}, session_key=S, tool_call_id="call_0")
    guard.after_call(
        "grep", {"q": "x"}, session_key=S, tool_call_id="call_0", error="Unknown tool: grep"
    )
    blocked = guard.before_call("grep", {"q": "x"}, session_key=S, tool_call_id="call_0")
    assert blocked.action == "block"  # the host never reports it: in flight under call_0
    other = guard.before_call("read", {"path": "a"}, session_key=S, tool_call_id="call_0")
    assert other.action == "allow" and other is not blocked
    guard.after_call("read", {"path": "a"}, session_key=S, tool_call_id="call_0", result="ok")
    assert [r.tool_name for r in guard.history(session_key=S)] == ["grep", "read"]
    same_args = guard.before_call("read", {"path": "a"}, session_key=S, tool_call_id="call_1")
    assert (
        guard.before_call("read", {"path": "a"}, session_key=S, tool_call_id="call_1") is same_args
    )


# --- critical strikes ------------------------------------------------------------------------


def test_critical_strikes_are_counted_per_run() -> None:
    guard = LoopGuard(ON)
    assert guard.critical_strike(session_key=S, run_id="r1") == 1
    assert guard.critical_strike(session_key=S, run_id="r1") == 2
    assert guard.critical_strike(session_key=S, run_id="r2") == 1
    assert guard.critical_strike(session_key="", run_id="r1") == 1
    assert asyncio.run(guard.acritical_strike(session_key=S, run_id="r3")) == 1


# --- first warning -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("mode", "expected"),
    [("reference", [11, 21]), ("immediate", [9, 11, 21])],
)
def test_first_warning_modes(mode: Any, expected: list[int]) -> None:
    guard = LoopGuard(
        {"enabled": True, "warningThreshold": 8, "criticalThreshold": 40}, first_warning=mode
    )
    emitted = []
    for index in range(1, 25):
        decision = guard.before_call("read", {"path": "a"}, session_key=S)
        if decision.emitted:
            emitted.append(index)
        guard.after_call("read", {"path": "a"}, session_key=S, result=f"r{index}")
    assert emitted == expected


def test_first_warning_must_be_known() -> None:
    with pytest.raises(ValueError, match="first_warning"):
        LoopGuard(first_warning="soon")  # type: ignore[arg-type]


# --- failure policy ------------------------------------------------------------------------


class Hostile(Exception):
    def __str__(self) -> str:
        raise RuntimeError("no text for you")


class HostileValue:
    def __str__(self) -> str:
        raise Hostile()

    __repr__ = __str__


def test_error_text_never_raises_and_is_bounded() -> None:
    assert error_text(Hostile()) == "Hostile: <unprintable exception>"
    huge = error_text(ValueError("x" * 10_000_000))
    assert len(huge) < MAX_ERROR_TEXT + 100


@given(st.text(max_size=50))
@settings(max_examples=50, deadline=None)
def test_error_text_of_any_message_is_bounded(text: str) -> None:
    out = error_text(ValueError(text * 100))
    assert out.startswith("ValueError: ")
    assert len(out) <= MAX_ERROR_TEXT + 40


def test_hostile_values_never_escape(caplog: pytest.LogCaptureFixture) -> None:
    guard = LoopGuard(ON, strict=False, listeners=[lambda event: (_ for _ in ()).throw(Hostile())])
    caplog.set_level(logging.WARNING)
    value = HostileValue()
    decision = guard.before_call("read", {"v": value}, session_key=S, tool_call_id=value)
    assert decision.action == "allow"
    assert guard.after_call("read", {}, session_key=S, error=Hostile()) is None
    guard.after_call("read", {"v": value}, session_key=S, error=value, tool_call_id=value)
    guard.compaction_retry(session_key=S, run_id=value)


class SneakyKey(str):
    def strip(self, *args: Any) -> str:  # the trim the guard may use
        raise Hostile()

    def __hash__(self) -> int:
        raise Hostile()


def test_a_str_subclass_session_key_is_read_as_plain_text() -> None:
    guard = LoopGuard(ON)
    key = SneakyKey("chat")
    assert guard.before_call("read", {}, session_key=key).action == "allow"
    assert guard.after_call("read", {}, session_key=key, result="x") is not None
    assert len(guard.history(session_key="chat")) == 1


def test_strict_mode_raises_internal_bugs_but_not_host_values(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    strict = LoopGuard(ON, strict=True)
    # A value the host passed that cannot be hashed is a documented degradation.
    cyclic: dict[str, Any] = {}
    cyclic["self"] = cyclic
    assert strict.before_call("read", cyclic, session_key=S).action == "allow"

    # A bug of loopwatch's own is raised in strict mode, allowed otherwise.
    def broken(*args: Any, **kwargs: Any) -> Any:
        raise KeyError("a bug")

    monkeypatch.setattr(strict.detector_profile, "detect", broken)
    with pytest.raises(KeyError):
        strict.before_call("read", {}, session_key=S)
    lenient = LoopGuard(ON, strict=False)
    monkeypatch.setattr(lenient.detector_profile, "detect", broken)
    assert lenient.before_call("read", {}, session_key=S).action == "allow"


def test_strict_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LOOPWATCH_STRICT", "1")
    assert LoopGuard().strict is True
    monkeypatch.setenv("LOOPWATCH_STRICT", "0")
    assert LoopGuard().strict is False


def test_history_records_are_public_records() -> None:
    guard = LoopGuard(ON)
    guard.before_call("read", {}, session_key=S)
    assert all(isinstance(r, ToolCallRecord) for r in guard.history(session_key=S))


# --- GuardSettings -------------------------------------------------------------------------


def test_guard_settings_resolve_without_a_guard(tmp_path: Any) -> None:
    from loopwatch.settings import GuardSettings

    path = tmp_path / "openclaw.json5"
    path.write_text(
        "{tools: {loopDetection: {warningThreshold: 5}},"
        " agents: {list: [{id: 'a', tools: {loopDetection: {enabled: false}}}]},"
        " loopwatch: {profile: 'adaptive'}}"
    )
    settings = GuardSettings.resolve(config_file=path)
    assert settings.profile == "adaptive" and settings.adaptive is not None
    _block, resolved = settings.block_for(None)
    assert resolved.enabled  # the adaptive profile is its own opt-in
    assert resolved.warning_threshold == 5
    _block, agent = settings.block_for("a")
    assert not agent.enabled  # ... unless enabled is false
    explicit = GuardSettings.resolve(config_file=path, profile="reference")
    assert explicit.adaptive is None and not explicit.block_for(None)[1].enabled
    guard = LoopGuard(settings=settings)
    assert guard.profile == "adaptive" and guard.settings is settings


def test_guard_settings_reject_two_sources() -> None:
    from loopwatch.settings import GuardSettings

    with pytest.raises(TypeError):
        GuardSettings.resolve({"enabled": True}, openclaw_config={})
    with pytest.raises(TypeError):
        LoopGuard({"enabled": True}, settings=GuardSettings.resolve())


def test_an_adaptive_verdict_explains_itself_in_the_decision_and_the_event() -> None:
    events: list[Any] = []
    guard = LoopGuard(profile="adaptive", listeners=[events.append])
    decision = None
    for _ in range(4):
        decision = guard.before_call("exec", {"command": "make"}, session_key=S)
        guard.after_call(
            "exec", {"command": "make"}, session_key=S, error="make: *** [all] Error 2"
        )
    assert decision is not None and decision.verdict.stuck
    assert decision.verdict.explanation and "reset by" in decision.verdict.explanation
    loops = [e.to_dict() for e in events if e.type == "tool.loop"]
    assert loops and loops[-1]["explanation"] == decision.verdict.explanation


def test_the_newest_calls_in_flight_are_remembered_oldest_forgotten_first() -> None:
    """A host whose after_calls never come: a second layer asking about one of the newest
    CALL_ID_MEMORY calls in flight gets its decision without a new record; the oldest is
    forgotten first, and asked again it is a new call."""
    guard = LoopGuard({"enabled": True, "historySize": 2 * CALL_ID_MEMORY})

    def ask(call_id: str) -> None:
        guard.before_call("read", {"path": call_id}, session_key=S, tool_call_id=call_id)

    def recorded() -> int:
        return len(guard.history(session_key=S))

    ask("first")
    ask("kept")
    ask("first")  # in flight: counts once
    assert recorded() == 2
    for index in range(CALL_ID_MEMORY - 2):
        ask(f"c{index}")
    before = recorded()
    ask("first")  # the oldest of CALL_ID_MEMORY in flight: still remembered
    assert recorded() == before
    ask("extra")  # "first" goes
    ask("first")  # a new call now, which pushes "kept" out
    assert recorded() == before + 2
    ask("c0")  # still in flight
    assert recorded() == before + 2
    ask("kept")
    assert recorded() == before + 3


def test_the_args_memos_keep_the_newest_oldest_dropped_first() -> None:
    guard = LoopGuard({"enabled": True})
    for index in range(ARGS_MEMO_SIZE + 3):
        guard.before_call("read", {"n": index}, session_key=S, tool_call_id=f"m{index}")
    keys = guard._calls.keys()
    assert keys == [(S, f"m{index}") for index in range(3, ARGS_MEMO_SIZE + 3)]
