"""Per-run post-compaction guards are bounded in every in-process store (issue 17)."""

from __future__ import annotations

import pytest

from loopwatch import LoopGuard, MemoryStore
from loopwatch.stores.base import MAX_RUN_GUARDS, Store
from loopwatch.testing import ReferenceStore


@pytest.mark.parametrize("make", [MemoryStore, ReferenceStore], ids=["memory", "reference"])
def test_only_the_latest_runs_keep_a_guard(make: type[Store]) -> None:
    guard = LoopGuard({"enabled": True}, store=make())
    runs = MAX_RUN_GUARDS + 44
    for index in range(runs):
        guard.compaction_retry(session_key="s", run_id=f"run-{index}")
    assert not guard.guard_snapshot(session_key="s", run_id="run-0").armed
    assert not guard.guard_snapshot(session_key="s", run_id="run-43").armed
    assert guard.guard_snapshot(session_key="s", run_id="run-44").armed
    assert guard.guard_snapshot(session_key="s", run_id=f"run-{runs - 1}").armed
