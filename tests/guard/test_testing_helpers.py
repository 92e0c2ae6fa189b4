"""The user-facing test helpers in ``loopwatch.testing``."""

from __future__ import annotations

from loopwatch import LoopGuard, MemoryStore
from loopwatch.testing import FakeClock, ScriptedCall, drive


def test_drive_blocks_a_loop_and_never_runs_blocked_calls() -> None:
    guard = LoopGuard({"enabled": True, "warningThreshold": 2, "criticalThreshold": 3})
    calls = [ScriptedCall("read", {"p": 1}, result="same")] * 6
    decisions = drive(guard, calls, session_key="s")
    assert [d.action for d in decisions] == ["allow", "allow", "warn", "block", "block", "block"]
    assert len(guard.history(session_key="s")) == 3


def test_fake_clock_drives_expiry() -> None:
    clock = FakeClock()
    guard = LoopGuard(store=MemoryStore(idle_ttl_s=10), clock=clock)
    drive(guard, [ScriptedCall("read", {}, result=1)], session_key="s")
    clock.advance(10)
    assert len(guard.history(session_key="s")) == 1
    clock.advance(0.5)
    assert guard.history(session_key="s") == ()
