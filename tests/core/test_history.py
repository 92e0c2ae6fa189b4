"""History writes (SPEC §1 state model, §3.6, §9.1 record functions).

Expected ``args_hash`` / ``result_hash`` values are built here with ``hashlib`` from
hand-written canonical strings.
"""

from __future__ import annotations

import hashlib
import inspect
import math
import time
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from loopwatch import (
    UNDEFINED,
    LoopDetectionConfig,
    SessionState,
    ToolCallRecord,
    record_tool_call,
    record_tool_call_outcome,
    resolve_config,
)


def sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def args_hash(tool: str, canonical_params: str) -> str:
    return f"{tool}:{sha(canonical_params)}"


OK = {"content": [{"type": "text", "text": "ok"}]}
OK_HASH = sha('{"details":{},"text":"ok"}')
OTHER = {"content": [{"type": "text", "text": "other"}]}
OTHER_HASH = sha('{"details":{},"text":"other"}')
VETO = {"details": {"status": "blocked", "deniedReason": "tool-loop"}}


def pending(state: SessionState) -> list[ToolCallRecord]:
    return [r for r in state.history if r.result_hash is None]


# =============================================================================================
# State model (§1) and the record shape
# =============================================================================================


def test_session_state_starts_empty_and_instances_share_nothing() -> None:
    a, b = SessionState(), SessionState()
    assert a.history == [] and a.warning_buckets == {}
    assert isinstance(a.history, list) and isinstance(a.warning_buckets, dict)
    a.history.append(ToolCallRecord(tool_name="t", args_hash="t:x"))
    a.warning_buckets["k"] = 1
    assert b.history == [] and b.warning_buckets == {}


def test_record_has_the_fields_of_the_spec() -> None:
    record = ToolCallRecord(
        tool_name="t",
        args_hash="t:h",
        tool_call_id="",
        run_id="r",
        result_hash="x",
        unknown_tool_name="u",
        timestamp=5,
    )
    assert (
        record.tool_name,
        record.args_hash,
        record.tool_call_id,
        record.run_id,
        record.result_hash,
        record.unknown_tool_name,
        record.timestamp,
    ) == ("t", "t:h", "", "r", "x", "u", 5)
    assert record == ToolCallRecord("t", "t:h", "", "r", "x", "u", 5)


def test_record_tool_call_positional_order_and_outcome_keywords_only() -> None:
    state = SessionState()
    # tool_call_id and config are positional, in this order.
    record_tool_call(state, "read", {}, "call-1", {"historySize": 1})
    record_tool_call(state, "read", {}, "call-2", {"historySize": 1})
    assert [r.tool_call_id for r in state.history] == ["call-2"]
    params = inspect.signature(record_tool_call_outcome).parameters
    assert [p for p in params if params[p].kind is inspect.Parameter.KEYWORD_ONLY] == [
        "tool_call_id",
        "result",
        "error",
        "config",
        "run_id",
        "send_tools",
        "normalizers",
    ]
    with pytest.raises(TypeError):
        record_tool_call_outcome(state, "read", {}, "call-1")  # type: ignore[misc]


# =============================================================================================
# record call
# =============================================================================================


def test_record_call_appends_a_pending_record() -> None:
    state = SessionState()
    assert record_tool_call(state, "read", {"path": "a", "n": 1}, "c1") is None
    (record,) = state.history
    assert record == ToolCallRecord(
        tool_name="read",
        args_hash=args_hash("read", '{"n":1,"path":"a"}'),
        tool_call_id="c1",
        run_id=None,
        result_hash=None,
        unknown_tool_name=None,
        timestamp=record.timestamp,
    )


@pytest.mark.parametrize(
    ("params", "canonical"),
    [("x", '"x"'), (123, "123"), (None, "null"), ([1, {"b": 2, "a": 1}], '[1,{"a":1,"b":2}]')],
)
def test_record_call_params_of_any_type(params: object, canonical: str) -> None:
    state = SessionState()
    record_tool_call(state, "t", params)
    assert state.history[0].args_hash == args_hash("t", canonical)


@pytest.mark.parametrize("tool", [" Bash ", "BASH", "Read", "", "apply-patch"])
def test_record_call_uses_the_tool_name_verbatim(tool: str) -> None:
    state = SessionState()
    record_tool_call(state, tool, {})
    assert state.history[0].tool_name == tool
    assert state.history[0].args_hash == args_hash(tool, "{}")


@pytest.mark.parametrize("tool_call_id", [None, "", "c1", " c1 "])
def test_record_call_stores_tool_call_id_as_given(tool_call_id: str | None) -> None:
    state = SessionState()
    record_tool_call(state, "t", {}, tool_call_id)
    assert state.history[0].tool_call_id == tool_call_id


RUN_IDS = [
    (None, None),
    ("", None),
    ("   ", None),
    ("\u3000\ufeff", None),
    (" run-1 ", "run-1"),
    ("run-1", "run-1"),
    ("\u00a0r\u2028", "r"),
    ("\x1cr\x85", "\x1cr\x85"),
    (5, None),
    (True, None),
    (b"r", None),
    (["r"], None),
]


@pytest.mark.parametrize(("run_id", "stored"), RUN_IDS)
def test_record_call_trims_run_id(run_id: object, stored: str | None) -> None:
    state = SessionState()
    record_tool_call(state, "t", {}, run_id=run_id)
    assert state.history[0].run_id == stored


def test_timestamp_is_int_epoch_milliseconds(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(time, "time", lambda: 1_700_000_000.1239)
    state = SessionState()
    record_tool_call(state, "t", {})
    record_tool_call_outcome(state, "u", {}, result=OK)
    assert [r.timestamp for r in state.history] == [1_700_000_000_123, 1_700_000_000_123]
    assert all(type(r.timestamp) is int for r in state.history)


def test_timestamp_follows_the_real_clock() -> None:
    before = int(time.time() * 1000)
    state = SessionState()
    record_tool_call(state, "t", {})
    after = int(time.time() * 1000)
    assert before <= state.history[0].timestamp <= after


@pytest.mark.parametrize(
    ("config", "kept"),
    [
        (None, 30),
        ({}, 30),
        ({"historySize": 3}, 3),
        ({"historySize": 3.0}, 3),
        ({"historySize": 1}, 1),
        ({"historySize": 0}, 30),
        ({"historySize": -1}, 30),
        ({"historySize": 2.5}, 30),
        ({"historySize": "3"}, 30),
        ({"historySize": True}, 30),
        ({"historySize": math.nan}, 30),
        ({"historySize": None}, 30),
        ({"historySize": 3, "enabled": False}, 3),
        (LoopDetectionConfig(history_size=4), 4),
        (resolve_config({"historySize": 5}), 5),
        ("not a block", 30),
    ],
)
def test_record_call_trims_to_history_size(config: object, kept: int) -> None:
    state = SessionState()
    for i in range(35):
        record_tool_call(state, "t", {"i": i}, None, config)
    assert len(state.history) == kept
    # The newest records are kept, oldest first.
    assert state.history[-1].args_hash == args_hash("t", '{"i":34}')
    assert state.history[0].args_hash == args_hash("t", f'{{"i":{35 - kept}}}')


def test_history_size_is_not_clamped_by_thresholds() -> None:
    state = SessionState()
    config = {"historySize": 2, "warningThreshold": 10, "enabled": True}
    for _ in range(5):
        record_tool_call(state, "t", {}, None, config)
    assert len(state.history) == 2


def test_trimming_is_across_runs() -> None:
    state = SessionState()
    config = {"historySize": 3}
    for i, run in enumerate(["a", "b", "a", "b", "a"]):
        record_tool_call(state, "t", {"i": i}, None, config, run_id=run)
    assert [(r.run_id, r.args_hash) for r in state.history] == [
        ("a", args_hash("t", '{"i":2}')),
        ("b", args_hash("t", '{"i":3}')),
        ("a", args_hash("t", '{"i":4}')),
    ]


def test_record_call_with_the_update_plan_normaliser_reduces_args() -> None:
    state = SessionState()
    on = {"update_plan"}
    record_tool_call(state, "update_plan", {"plan": [{"step": "a", "status": "x"}]}, normalizers=on)
    record_tool_call(state, "update_plan", {"plan": [{"step": "b", "status": "x"}]}, normalizers=on)
    expected = args_hash(
        "update_plan",
        '{"hasExplanation":false,"planLength":1,"statuses":["x"],"stepPresence":[true]}',
    )
    assert [r.args_hash for r in state.history] == [expected, expected]


def test_record_call_unserialisable_params_raise_type_error() -> None:
    state = SessionState()
    with pytest.raises(TypeError):
        record_tool_call(state, "t", {1: "a", "1": "b"})
    assert state.history == []


# =============================================================================================
# record outcome: matching
# =============================================================================================


def test_outcome_fills_the_pending_record() -> None:
    state = SessionState()
    record_tool_call(state, "read", {"p": 1}, "c1", run_id="r")
    returned = record_tool_call_outcome(
        state, "read", {"p": 1}, tool_call_id="c1", result=OK, run_id="r"
    )
    assert len(state.history) == 1
    assert returned is state.history[0]
    assert returned == ToolCallRecord(
        tool_name="read",
        args_hash=args_hash("read", '{"p":1}'),
        tool_call_id="c1",
        run_id="r",
        result_hash=OK_HASH,
        unknown_tool_name=None,
        timestamp=returned.timestamp,
    )


def test_outcome_fills_newest_pending_first_then_older() -> None:
    state = SessionState()
    record_tool_call(state, "t", {}, "old")
    record_tool_call(state, "t", {}, "new")
    first = record_tool_call_outcome(state, "t", {}, result=OK)
    assert first is state.history[1] and first.tool_call_id == "new"
    assert state.history[0].result_hash is None
    second = record_tool_call_outcome(state, "t", {}, result=OTHER)
    assert second is state.history[0] and second.tool_call_id == "old"
    assert [r.result_hash for r in state.history] == [OTHER_HASH, OK_HASH]
    third = record_tool_call_outcome(state, "t", {}, result=OK)
    assert len(state.history) == 3 and third is state.history[2]


def test_outcome_skips_records_that_already_have_a_result() -> None:
    state = SessionState()
    record_tool_call(state, "t", {}, "old")
    record_tool_call(state, "t", {}, "new")
    record_tool_call_outcome(state, "t", {}, tool_call_id="new", result=OK)
    record_tool_call(state, "u", {})
    # The newest "t" record is filled already, so the older pending one is the match.
    returned = record_tool_call_outcome(state, "t", {}, result=OTHER)
    assert returned is state.history[0]
    assert [(r.tool_call_id, r.result_hash) for r in state.history] == [
        ("old", OTHER_HASH),
        ("new", OK_HASH),
        (None, None),
    ]


@pytest.mark.parametrize(
    ("pending_id", "outcome_id", "matches"),
    [
        ("c1", "c1", True),
        ("c1", "c2", False),
        ("c1", "", True),
        ("c1", None, True),
        (None, "c1", False),
        ("", "c1", False),
        (None, None, True),
        ("", None, True),
        (None, "", True),
    ],
)
def test_outcome_matches_tool_call_id_only_when_truthy(
    pending_id: str | None, outcome_id: str | None, matches: bool
) -> None:
    state = SessionState()
    record_tool_call(state, "t", {}, pending_id)
    returned = record_tool_call_outcome(state, "t", {}, tool_call_id=outcome_id, result=OK)
    assert returned is not None
    if matches:
        assert len(state.history) == 1
        assert returned is state.history[0]
        assert returned.tool_call_id == pending_id
    else:
        assert len(state.history) == 2
        assert state.history[0].result_hash is None
        assert returned is state.history[1]
        assert returned.tool_call_id == outcome_id


@pytest.mark.parametrize(
    ("pending_run", "outcome_run", "matches"),
    [
        ("r1", "r1", True),
        ("r1", " r1 ", True),
        (" r1", "r1\u3000", True),
        ("r1", "r2", False),
        ("r1", None, False),
        (None, "r1", False),
        (None, None, True),
        (None, "  ", True),
        ("", 5, True),
        (None, ["r1"], True),
    ],
)
def test_outcome_matches_run_id_after_trimming(
    pending_run: object, outcome_run: object, matches: bool
) -> None:
    state = SessionState()
    record_tool_call(state, "t", {}, run_id=pending_run)
    returned = record_tool_call_outcome(state, "t", {}, result=OK, run_id=outcome_run)
    assert len(state.history) == (1 if matches else 2)
    assert returned is state.history[-1]
    assert state.history[0].result_hash == (OK_HASH if matches else None)


def test_outcome_needs_the_same_tool_name_and_args() -> None:
    state = SessionState()
    record_tool_call(state, "read", {"p": 1})
    record_tool_call_outcome(state, "Read", {"p": 1}, result=OK)
    record_tool_call_outcome(state, "read", {"p": 2}, result=OK)
    assert len(state.history) == 3
    assert state.history[0].result_hash is None
    record_tool_call_outcome(state, "read", {"p": 1}, result=OK)
    assert len(state.history) == 3
    assert state.history[0].result_hash == OK_HASH


def test_outcome_args_key_order_does_not_matter() -> None:
    state = SessionState()
    record_tool_call(state, "t", {"a": 1, "b": 2})
    record_tool_call_outcome(state, "t", {"b": 2, "a": 1}, result=OK)
    assert len(state.history) == 1 and state.history[0].result_hash == OK_HASH


def test_outcome_with_normaliser_matches_a_reworded_pending_call() -> None:
    state = SessionState()
    on = {"update_plan"}
    record_tool_call(state, "update_plan", {"plan": [{"step": "a"}]}, normalizers=on)
    record_tool_call_outcome(
        state, "update_plan", {"plan": [{"step": "b"}]}, result=OK, normalizers=on
    )
    assert len(state.history) == 1 and state.history[0].result_hash is not None


# =============================================================================================
# record outcome: appending, nothing-to-record, trimming
# =============================================================================================


@pytest.mark.parametrize("tool_call_id", [None, "", "c9"])
def test_unmatched_outcome_appends_a_complete_record(tool_call_id: str | None) -> None:
    state = SessionState()
    returned = record_tool_call_outcome(
        state,
        "t",
        {"q": "x"},
        tool_call_id=tool_call_id,
        error="Unknown tool: Foo",
        run_id=" r ",
    )
    assert state.history == [returned]
    assert returned is state.history[0]
    assert returned == ToolCallRecord(
        tool_name="t",
        args_hash=args_hash("t", '{"q":"x"}'),
        tool_call_id=tool_call_id,
        run_id="r",
        result_hash="error:" + sha('"Unknown tool: Foo"'),
        unknown_tool_name="foo",
        timestamp=returned.timestamp,
    )
    assert type(returned.timestamp) is int


def test_outcome_fills_unknown_tool_name_of_a_pending_record() -> None:
    state = SessionState()
    record_tool_call(state, "t", {})
    record_tool_call_outcome(state, "t", {}, error=ValueError("Tool zap not found"))
    assert state.history[0].unknown_tool_name == "zap"
    assert state.history[0].result_hash == "error:" + sha('"Tool zap not found"')


@pytest.mark.parametrize(
    "kwargs",
    [
        pytest.param({}, id="result-default-undefined"),
        pytest.param({"result": UNDEFINED}, id="result-undefined"),
        pytest.param({"result": VETO}, id="loop-veto"),
        pytest.param({"result": {**VETO, "content": [{"type": "text", "text": "x"}]}}, id="veto2"),
    ],
)
def test_outcome_without_hash_changes_nothing(kwargs: dict[str, Any]) -> None:
    state = SessionState()
    record_tool_call(state, "t", {})
    before = list(state.history)
    assert record_tool_call_outcome(state, "t", {}, **kwargs) is None
    assert state.history == before
    empty = SessionState()
    assert record_tool_call_outcome(empty, "t", {}, **kwargs) is None
    assert empty.history == []


def test_outcome_none_result_and_none_error_are_recorded() -> None:
    state = SessionState()
    assert record_tool_call_outcome(state, "t", {}, result=None).result_hash == sha("null")
    assert record_tool_call_outcome(state, "t", {}, error=None).result_hash == (
        "error:" + sha('"null"')
    )


def test_outcome_uses_send_tools() -> None:
    state = SessionState()
    result = {"content": [{"type": "text", "text": "sent 1"}], "details": {"messageId": "m1"}}
    record = record_tool_call_outcome(state, "telegram", {}, result=result, send_tools={"telegram"})
    assert record is not None and record.result_hash == sha("{}")


def test_appended_outcome_trims_and_returns_the_record_in_history() -> None:
    state = SessionState()
    config = {"historySize": 2}
    for i in range(2):
        record_tool_call(state, "t", {"i": i}, None, config)
    returned = record_tool_call_outcome(state, "u", {}, result=OK, config=config)
    assert len(state.history) == 2
    assert returned is state.history[-1]
    assert state.history[0].args_hash == args_hash("t", '{"i":1}')


def test_filled_outcome_also_trims() -> None:
    state = SessionState()
    for i in range(3):
        record_tool_call(state, "t", {"i": i})
    returned = record_tool_call_outcome(state, "t", {"i": 2}, result=OK, config={"historySize": 1})
    assert state.history == [returned]
    assert returned is state.history[0]


def test_outcome_only_matches_its_own_run_while_trimming_spans_runs() -> None:
    state = SessionState()
    config = {"historySize": 4}
    record_tool_call(state, "t", {}, None, config, run_id="a")
    record_tool_call(state, "t", {}, None, config, run_id="b")
    returned = record_tool_call_outcome(state, "t", {}, result=OK, config=config, run_id="a")
    assert returned is state.history[0]
    assert state.history[1].result_hash is None


def test_outcome_unserialisable_result_raises_type_error() -> None:
    state = SessionState()
    record_tool_call(state, "t", {})
    with pytest.raises(TypeError):
        record_tool_call_outcome(state, "t", {}, result={"details": {1: 1, "1": 2}})
    assert state.history[0].result_hash is None


# =============================================================================================
# Properties
# =============================================================================================

TOOLS = ["a", "b"]
PARAMS = [{}, {"x": 1}]
RESULTS = [OK, OTHER, UNDEFINED, VETO]
op_strategy = st.tuples(
    st.sampled_from(["call", "outcome"]),
    st.sampled_from(TOOLS),
    st.sampled_from(range(len(PARAMS))),
    st.sampled_from([None, "", "c1", "c2"]),
    st.sampled_from([None, "r", " r "]),
    st.sampled_from(range(len(RESULTS))),
)


@settings(max_examples=80, deadline=None)
@given(ops=st.lists(op_strategy, max_size=25), size=st.integers(min_value=1, max_value=6))
def test_history_invariants(ops: list[tuple[Any, ...]], size: int) -> None:
    state = SessionState()
    config = {"historySize": size}
    for kind, tool, p, call_id, run, r in ops:
        params = PARAMS[p]
        if kind == "call":
            record_tool_call(state, tool, params, call_id, config, run_id=run)
            assert state.history[-1].result_hash is None
        else:
            pending_before = len(pending(state))
            length_before = len(state.history)
            returned = record_tool_call_outcome(
                state,
                tool,
                params,
                tool_call_id=call_id,
                result=RESULTS[r],
                config=config,
                run_id=run,
            )
            if RESULTS[r] is UNDEFINED or RESULTS[r] is VETO:
                assert returned is None
                assert len(state.history) == length_before
            else:
                assert returned is not None
                assert any(record is returned for record in state.history)
                assert returned.result_hash in (OK_HASH, OTHER_HASH)
                assert returned.run_id == (run.strip() if run else None)
                assert len(pending(state)) <= pending_before
        assert len(state.history) <= size


# --- ToolCallRecord's hand-written __init__ (it sets the fields in one C-level pass) ------


def test_tool_call_record_init_sets_every_field_in_declaration_order() -> None:
    import dataclasses
    import pickle

    from loopwatch.core import records

    names = tuple(f.name for f in dataclasses.fields(ToolCallRecord))
    assert names == records._RECORD_FIELDS
    values = [f"v{i}" for i in range(len(names))]
    record = ToolCallRecord(*values)  # type: ignore[arg-type]
    assert [getattr(record, name) for name in names] == values
    assert ToolCallRecord(**dict(zip(names, values, strict=True))) == record  # type: ignore[arg-type]
    assert ToolCallRecord("t", "t:h") == ToolCallRecord("t", "t:h", None, None, None, None, 0, None)
    assert dataclasses.replace(record, result_hash="r").result_hash == "r"
    assert pickle.loads(pickle.dumps(record)) == record
    with pytest.raises(dataclasses.FrozenInstanceError):
        record.tool_name = "other"  # type: ignore[misc]
