"""The drafts the guard builds its per-call objects with are those objects, exactly.

``plan_before`` writes its ``UpcomingCall`` and pending ``ToolCallRecord`` as writable
drafts (``UpcomingCallDraft``, ``RecordDraft``) and then assigns their class: what comes out must
be indistinguishable from the ``__init__``-built object.
"""

from __future__ import annotations

import dataclasses
import pickle
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from loopwatch import LoopGuard
from loopwatch.core.naming import normalize_run_id
from loopwatch.core.records import RecordDraft, ToolCallRecord
from loopwatch.detectors.profiles import UpcomingCall, UpcomingCallDraft
from loopwatch.guard._planning import plan_before

TEXT = st.one_of(st.none(), st.text(max_size=6))


def test_the_drafts_have_the_very_slots_of_what_they_stand_for() -> None:
    # (__class__ assignment needs the same layout; a new field must reach the draft too)
    assert RecordDraft.__slots__ == ToolCallRecord.__slots__
    assert RecordDraft.__slots__ == tuple(f.name for f in dataclasses.fields(ToolCallRecord))
    assert UpcomingCallDraft.__slots__ == UpcomingCall.__slots__
    assert UpcomingCallDraft.__slots__ == tuple(f.name for f in dataclasses.fields(UpcomingCall))


def _same(built: Any, plain: Any) -> None:
    assert type(built) is type(plain)
    assert built == plain
    assert hash(built) == hash(plain)
    assert repr(built) == repr(plain)
    assert pickle.loads(pickle.dumps(built)) == plain
    with pytest.raises(dataclasses.FrozenInstanceError):
        built.tool_name = "other"


@given(
    tool=st.sampled_from(["read", "exec", "process", "command_status"]),
    params=st.one_of(
        st.dictionaries(st.text(max_size=3), st.one_of(st.integers(), st.text(max_size=3))),
        st.fixed_dictionaries({"action": st.sampled_from(["poll", "log", "kill"])}),
    ),
    run_id=TEXT,
    call_id=TEXT,
    enabled=st.booleans(),
)
def test_plan_before_builds_what_the_constructors_build(
    tool: str, params: dict[str, Any], run_id: str | None, call_id: str | None, enabled: bool
) -> None:
    guard = LoopGuard({"enabled": enabled}, clock=lambda: 1234.5678)
    plan = plan_before(guard, tool, params, "s", run_id, call_id, None)
    call = plan.call
    _same(call, UpcomingCall(call.tool_name, call.args_hash, call.run_id, call.known_poll))
    run = normalize_run_id(run_id)
    assert (call.tool_name, call.run_id) == (tool, run)
    pending = plan.pending
    if not enabled:  # (the block turns recording off)
        assert pending is None
        return
    assert pending is not None
    _same(pending, ToolCallRecord(tool, call.args_hash, call_id, run, None, None, 1234567))
