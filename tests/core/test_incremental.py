"""The memory store's incremental history against a plain list (issue #6).

``MemoryStore`` keeps compact records, per-run lists and a call index, and answers the
detectors from them (``loopwatch.stores.memory._runs``); every other store hands
``evaluate`` a plain sequence. These tests prove both give the same answers:

- ``ReferenceStore`` below is the straightforward store of SPEC §1/§3.6/§6.2: one list
  per session (``history.append_call`` / ``apply_outcome``), a copy of the run's records
  for each ``begin_call``, an eager guard per run. Generated operation sequences run on
  both stores; every returned value, every detector answer and every verdict must agree.
- Generated call sequences (run ids, trimming, pending records, blocked calls that are
  cancelled, outcomes with and without ``tool_call_id``, unknown tools, ping-pong, shadow
  mode, compaction retries, the adaptive profile, params changed by the tool) run through
  a ``LoopGuard`` on each store: decisions, records, events, log lines and guard state
  must agree.

Each runs with the call index built from the first record, from the third, and at its
default size, so both the scanning and the indexed paths are covered.
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any
from unittest import mock

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from loopwatch import UNDEFINED, LoopGuard, MemoryStore, resolve_config
from loopwatch.core.fingerprint import hash_tool_call
from loopwatch.core.outcomes import OutcomeHash, hash_tool_outcome
from loopwatch.core.records import ToolCallRecord
from loopwatch.detectors.compaction import GuardSnapshot, GuardVerdict
from loopwatch.detectors.reference import NO_PING_PONG, RunHistory, ScannedRun, evaluate
from loopwatch.stores.base import GuardSpec, OutcomeWrite, Store
from loopwatch.stores.memory import _compact, _runs
from loopwatch.stores.memory._compact import call_key, result_key
from loopwatch.stores.memory._history import SessionHistory
from loopwatch.testing import ReferenceStore
from memory_index import index_from

INDEX_SIZES = [0, 2, _runs.INDEX_FROM]
_NO_GUARD = GuardSnapshot(armed=False, remaining_attempts=0)


# --- keys ---------------------------------------------------------------------------------

HEX = st.text("0123456789abcdefABCDEF ", min_size=62, max_size=66)
DIGESTS = [hashlib.sha256(str(i).encode()).hexdigest() for i in range(4)]
TOOL_NAMES = st.sampled_from(["read", "exec", "", "re", "read:"])


@st.composite
def hash_strings(draw: st.DrawFn) -> str:
    """Args or result hashes: mostly well-formed, sometimes nearly so, sometimes anything."""
    prefix = draw(st.sampled_from(["", "read:", "exec:", "error:", "re", "read:read:"]))
    body = draw(st.one_of(st.sampled_from(DIGESTS), HEX, st.text(max_size=8)))
    return prefix + body


@given(TOOL_NAMES, hash_strings(), hash_strings())
def test_call_keys_are_equal_exactly_when_hashes_are(tool: str, a: str, b: str) -> None:
    assert (call_key(tool, a) == call_key(tool, b)) == (a == b)
    key = call_key(tool, a)
    if isinstance(key, bytes):
        assert a == f"{tool}:{key.hex()}"


@given(hash_strings(), hash_strings())
def test_result_keys_are_equal_exactly_when_hashes_are(a: str, b: str) -> None:
    assert (result_key(a) == result_key(b)) == (a == b)


@given(hash_strings())
def test_a_filled_record_packs_the_result_key_of_its_hash(result_hash: str) -> None:
    """``CompactRecord.filled`` packs a record in one step: its result key is ``result_key``'s."""
    args_hash = f"read:{DIGESTS[1]}"
    record = ToolCallRecord("read", args_hash, None, None, result_hash, None, 7, None)
    compact = _compact.CompactRecord.filled(record, call_key("read", args_hash))
    assert compact.result == result_key(result_hash)
    assert compact.public() == record


@given(
    st.text(max_size=20),
    st.booleans(),
    st.sampled_from([None, "ghost"]),
    st.sampled_from([None, "1000||"]),
    st.integers(-(2**64), 2**64),
)
def test_a_fresh_outcome_is_packed_as_the_plain_record_is(
    text: str, failed: bool, unknown: str | None, facts: str | None, timestamp: int
) -> None:
    """The record ``CompactRecord.filled`` packs from the digest bytes of the result hash
    just made (alone, and as ``add_filled`` appends it) is the plain constructor's, byte
    for byte."""
    args_hash = f"read:{DIGESTS[1]}"
    key = call_key("read", args_hash)
    outcome = hash_tool_outcome("read", None, **{"error" if failed else "result": text})
    assert outcome.result_hash is not None
    record = ToolCallRecord("read", args_hash, "c1", None, outcome.result_hash, unknown, 0, facts)
    record = dataclasses.replace(record, timestamp=timestamp)
    history = SessionHistory()
    first = ToolCallRecord("exec", f"exec:{DIGESTS[2]}", None, None, DIGESTS[3], None, 1, None)
    history.add_filled(first, call_key("exec", first.args_hash))  # the run's first
    history.add_filled(record, key)  # then the usual record: of the only run
    made = [history.records[-1], _compact.CompactRecord.filled(record, key)]
    plain = _compact.CompactRecord(record, key)
    for compact in made:
        assert (compact.tool_name, compact.call_id, compact.run_id) == ("read", "c1", None)
        assert (compact.packed, compact.extra) == (plain.packed, plain.extra)
        assert compact.public() == record


@pytest.mark.parametrize(
    "threshold",
    [
        "warning_threshold",
        "critical_threshold",
        "unknown_tool_threshold",
        "global_circuit_breaker_threshold",
    ],
)
def test_a_quiet_run_is_judged_in_full_when_a_threshold_is_not_positive(threshold: str) -> None:
    """evaluate's shortcut for a run without the call (a repeat bound of 0) holds only
    while every threshold is above the bound: a threshold of 0 is reached by a count of 0,
    as on a list."""
    config = dataclasses.replace(resolve_config({"enabled": True}), **{threshold: 0})
    view = SessionHistory().view(None)
    tool, args = CALLS[0]
    assert view.repeat_bound(tool, args) == 0
    for known_poll in (False, True):
        plain = evaluate([], tool, args, known_poll, config)
        assert plain.stuck
        assert evaluate(view, tool, args, known_poll, config) == plain


def test_an_alternation_runs_through_another_tools_record() -> None:
    """ping_pong's tail takes any record with the call's args hash, whatever its tool:
    the memory store's walk compares one of another tool (kept whole) as a string."""
    read, other = f"read:{DIGESTS[0]}", f"read:{DIGESTS[1]}"
    calls = [("exec", read), ("read", other), ("read", read), ("read", other)]
    memory, reference = MemoryStore(), ReferenceStore()
    for step, (tool, args) in enumerate(calls):
        write = OutcomeWrite(tool, args, f"c{step}", None, OutcomeHash(RESULTS[0]), 30, 1)
        for store in (memory, reference):
            store.record_outcome("s", write, GuardSpec(3, True), 1.0)
    view = memory.begin_call("s", None, None, 30, 1.0)
    assert view.fields()[0].packed is None and view.ping_pong("read", read).count == 5
    assert detection(view) == detection(reference.begin_call("s", None, None, 30, 1.0))


class _BoundedScan(ScannedRun):
    """A history of another store that bounds an empty run's repeats by 0."""

    def repeat_bound(self, tool_name: str, current_hash: str) -> int | None:
        return 0 if not self.records else None


def test_the_default_repeat_bound_says_nothing() -> None:
    tool, args = CALLS[0]
    assert ScannedRun([]).repeat_bound(tool, args) is None
    config = resolve_config({"enabled": True})
    for history in ([], [ToolCallRecord(tool, args, None, None, DIGESTS[1], None, 1)] * 3):
        plain = evaluate(history, tool, args, False, config)
        assert evaluate(_BoundedScan(history), tool, args, False, config) == plain


def test_a_run_is_not_quiet_when_the_record_before_the_newest_is_unpacked() -> None:
    """Ping-pong compares an unpacked record's args hash as a string, whatever its tool: a
    record of another tool with the upcoming call's args hash may start an alternation
    that the scan for the call's own records does not see."""
    args = f"read:{DIGESTS[0]}"
    history = SessionHistory()
    calls = [("read", f"read:{DIGESTS[1]}"), ("exec", args)] * 2 + [("read", f"read:{DIGESTS[1]}")]
    for tool, args_hash in calls:
        # (another tool's record of "read:..." keeps its hash whole: its key is no digest)
        record = ToolCallRecord(tool, args_hash, None, None, DIGESTS[2], None, 1)
        history.add_filled(record, call_key(tool, args_hash))
    view = history.view(None)
    assert view.fields()[-2].packed is None and view.fields()[-1].extra is None
    assert view.repeat_bound("read", args) is None
    assert view.ping_pong("read", args).count == 6
    config = resolve_config({"enabled": True, "warningThreshold": 5})
    plain = evaluate(list(view), "read", args, False, config)
    assert plain.detector == "ping_pong"
    assert evaluate(view, "read", args, False, config) == plain


def test_records_whose_key_only_starts_alike_are_other_calls() -> None:
    """no_progress scans the run's ``heads`` for the call's first byte, then compares the
    records found: one of the same tool whose digest only shares that byte is another
    call, which the repeat bound counts (a bound, not the count) and the verdict ignores."""
    digests = [hashlib.sha256(str(i).encode()).hexdigest() for i in range(600)]
    first = digests[0][:2]
    other = next(d for d in digests[1:] if d[:2] == first)
    history = SessionHistory()
    for digest in (digests[0], digests[1], digests[0]):
        record = ToolCallRecord("read", f"read:{digest}", None, None, DIGESTS[2], None, 1)
        history.add_filled(record, call_key("read", record.args_hash))
    view = history.view(None)
    config = resolve_config({"enabled": True, "warningThreshold": 2})
    for digest, own in ((other, 0), (digests[0], 2)):
        args = f"read:{digest}"
        assert view.no_progress("read", args)[2] == own
        assert view.repeat_bound("read", args) == 2 + (digests[1][:2] == first)
        for known_poll in (False, True):
            plain = evaluate(list(view), "read", args, known_poll, config)
            assert evaluate(view, "read", args, known_poll, config) == plain


def test_keys_of_well_formed_hashes_are_digests() -> None:
    digest = DIGESTS[0]
    assert call_key("read", f"read:{digest}") == bytes.fromhex(digest)
    assert call_key("read", f"exec:{digest}") == f"exec:{digest}"
    assert call_key("read", f"read:{digest.upper()}") == f"read:{digest.upper()}"
    assert result_key(digest) == bytes.fromhex(digest) + b"\x01"
    assert result_key("error:" + digest) == bytes.fromhex(digest) + b"\x02"
    assert result_key("x" + digest[1:]) == "x" + digest[1:]


# --- store operations ---------------------------------------------------------------------

CALLS = [
    ("read", f"read:{DIGESTS[0]}"),
    ("read", f"read:{DIGESTS[1]}"),
    ("exec", f"exec:{DIGESTS[0]}"),  # the same digest under another tool
    ("exec", f"exec:{DIGESTS[2]}"),
    ("read", "read:a"),  # hashes of another shape
    ("exec", "read:a"),
    ("", f":{DIGESTS[3]}"),
    ("read", f"read:{DIGESTS[2].upper()}"),
]
RESULTS = [DIGESTS[1], DIGESTS[2], "error:" + DIGESTS[1], "error:" + DIGESTS[3], "odd", "r1"]
#: Outcomes hashed just before their write: the memory store reads the digest bytes of
#: the newest result hash as they are (``result_digest``), every other hash it parses.
FRESH: list[dict[str, Any]] = [{"result": "same"}, {"result": "other"}, {"error": "boom"}]


def result_hash_at(index: int) -> str:
    """``RESULTS[index]``, or (past its end) a hash of ``FRESH`` made now."""
    if index < len(RESULTS):
        return RESULTS[index]
    fresh = hash_tool_outcome("read", None, **FRESH[index - len(RESULTS)]).result_hash
    assert fresh is not None
    return fresh


RUNS = st.sampled_from([None, None, "a", "b"])
CALL_IDS = st.sampled_from([None, "", "c1", "c2", "c3"])
SIZES = st.sampled_from([1, 2, 3, 5, 8, 30])


@dataclass(frozen=True)
class Begin:
    session: str
    call: int
    run: str | None
    call_id: str | None
    size: int
    pending: bool
    cancel: bool  # cancelled at once, as LoopGuard does for an enforced block
    odd_timestamp: bool  # a bool: kept as it is, outside the packed form


@dataclass(frozen=True)
class Outcome:
    session: str
    call: int
    run: str | None
    call_id: str | None
    result: int
    unknown: str | None
    facts: str | None
    size: int


@dataclass(frozen=True)
class CancelOlder:
    session: str
    back: int


@dataclass(frozen=True)
class Arm:
    session: str
    run: str | None
    window: int
    enabled: bool


@dataclass(frozen=True)
class Bucket:
    session: str
    key: str
    bucket: int


SESSIONS = st.sampled_from(["s", "s", "s", "t"])
OPS = st.lists(
    st.one_of(
        st.builds(
            Begin,
            SESSIONS,
            st.integers(0, len(CALLS) - 1),
            RUNS,
            CALL_IDS,
            SIZES,
            st.booleans(),
            st.booleans(),
            st.sampled_from([False, False, False, True]),
        ),
        st.builds(
            Outcome,
            SESSIONS,
            st.integers(0, len(CALLS) - 1),
            RUNS,
            CALL_IDS,
            st.integers(0, len(RESULTS) + len(FRESH) - 1),
            st.sampled_from([None, None, "ghost"]),
            st.sampled_from([None, None, "1000||"]),
            SIZES,
        ),
        st.builds(CancelOlder, SESSIONS, st.integers(0, 6)),
        st.builds(Arm, SESSIONS, RUNS, st.integers(1, 3), st.booleans()),
        st.builds(Bucket, SESSIONS, st.sampled_from(["k1", "k2"]), st.integers(0, 3)),
    ),
    max_size=60,
)
CONFIGS = [
    resolve_config({"enabled": True, "warningThreshold": 2, "criticalThreshold": 3}),
    resolve_config({"enabled": True}),  # (repeats up to 9 below every threshold)
    resolve_config(
        {
            "enabled": True,
            "warningThreshold": 2,
            "criticalThreshold": 4,
            "globalCircuitBreakerThreshold": 5,
            "unknownToolThreshold": 2,
        }
    ),
]


def fields_of(records: Sequence[Any]) -> list[tuple[Any, ...]]:
    return [
        (r.tool_name, r.args_hash, r.result_hash, r.unknown_tool_name, r.facts) for r in records
    ]


def detection(records: Sequence[ToolCallRecord] | RunHistory) -> list[object]:
    """What ``begin_call`` returned, as records and as every answer detection may ask for."""
    run = records if isinstance(records, RunHistory) else ScannedRun(records)
    seen: list[object] = [list(run.records if isinstance(run, ScannedRun) else records)]
    seen.append(fields_of(run.fields()))
    for tool, args in CALLS:
        seen.append(run.unknown_tool_streak(tool))
        seen.append(run.no_progress(tool, args))
        seen.append(run.ping_pong(tool, args))
        bound = run.repeat_bound(tool, args)
        if bound is not None:
            # (evaluate's shortcut: what it stands for, with the counts at most the bound)
            streak, _latest, recent = run.no_progress(tool, args)
            assert seen[-3] == (0, None) and seen[-1] == NO_PING_PONG
            assert streak <= recent <= bound
        for config in CONFIGS:
            for known_poll in (False, True):
                seen.append(evaluate(records, tool, args, known_poll, config))
    return seen


def run_op(store: Store, op: object, begun: dict[str, list[ToolCallRecord]], now: float) -> object:
    """One operation; ``begun`` holds the records ``begin_call`` got, shared by both stores
    (``cancel_call`` goes by identity)."""
    if isinstance(op, Begin):
        pending = begun[op.session][-1] if op.pending else None
        seen = detection(store.begin_call(op.session, op.run, pending, op.size, now))
        if pending is not None and op.cancel:
            store.cancel_call(op.session, pending, now)
        return seen
    if isinstance(op, Outcome):
        tool, args = CALLS[op.call]
        write = OutcomeWrite(
            tool_name=tool,
            args_hash=args,
            tool_call_id=op.call_id,
            run_id=op.run,
            outcome=OutcomeHash(result_hash_at(op.result), op.unknown),
            history_size=op.size,
            timestamp=99,
            facts=op.facts,
        )
        return store.record_outcome(op.session, write, GuardSpec(2, True), now)
    if isinstance(op, CancelOlder):
        older = begun.get(op.session, [])
        if op.back < len(older):
            store.cancel_call(op.session, older[-1 - op.back], now)
        return None
    if isinstance(op, Arm):
        return store.arm_guard(op.session, op.run, GuardSpec(op.window, op.enabled), now)
    assert isinstance(op, Bucket)
    return store.update_warning_bucket(op.session, op.key, op.bucket, now)


def state_of(store: Any, now: float) -> list[object]:
    state: list[object] = []
    for session in ("s", "t"):
        state.append(store.history(session, now))
        state.append(store.warning_buckets(session, now))
        for run in (None, "a", "b"):
            state.append(store.guard_snapshot(session, run, now))
            state.append(store.last_guard_verdict(session, run, now))
    return state


@pytest.mark.parametrize("index_size", INDEX_SIZES)
@settings(max_examples=150, deadline=None)
@given(OPS)
def test_store_operations_match_the_plain_store(index_size: int, ops: list[object]) -> None:
    with index_from(index_size):
        memory, reference = MemoryStore(), ReferenceStore()
        begun: dict[str, list[ToolCallRecord]] = {}
        for step, op in enumerate(ops):
            if isinstance(op, Begin) and op.pending:
                tool, args = CALLS[op.call]
                timestamp = True if op.odd_timestamp else step
                record = ToolCallRecord(tool, args, op.call_id, op.run, None, None, timestamp)
                begun.setdefault(op.session, []).append(record)
            now = 1000.0 + step
            assert run_op(memory, op, begun, now) == run_op(reference, op, begun, now), op
            assert state_of(memory, now) == state_of(reference, now)


@pytest.mark.parametrize("index_size", INDEX_SIZES)
@settings(max_examples=40, deadline=None)
@given(
    st.integers(1, 12),
    st.lists(st.tuples(st.integers(0, 3), st.sampled_from([0, 1, 2, 6, 7, 8])), max_size=80),
)
def test_long_runs_match_the_plain_store(
    index_size: int, size: int, calls: list[tuple[int, int]]
) -> None:
    """Repeats, alternations and trimming in one run, with the index built mid-run."""
    with index_from(index_size):
        memory, reference = MemoryStore(), ReferenceStore()
        for step, (call, result) in enumerate(calls):
            tool, args = CALLS[call]
            pending = ToolCallRecord(tool, args, f"c{step}", None, None, None, step)
            write = OutcomeWrite(
                tool, args, f"c{step}", None, OutcomeHash(result_hash_at(result)), size * 3, 1
            )
            seen = []
            for store in (memory, reference):
                seen.append(detection(store.begin_call("s", None, pending, size * 3, 1.0)))
                seen.append(store.record_outcome("s", write, GuardSpec(3, True), 1.0))
            assert seen[:2] == seen[2:]
            assert memory.history("s", 1.0) == reference.history("s", 1.0)


@pytest.mark.parametrize("index_size", INDEX_SIZES)
@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from([0, 1, 1, 2, 7]),  # read, read, exec with read's digest, upper case
            st.integers(0, len(RESULTS) + len(FRESH) - 1),
            st.sampled_from([False, False, False, True]),  # an odd (unpacked) timestamp
            st.sampled_from([False, False, False, True]),  # left pending
        ),
        max_size=40,
    ),
)
def test_alternations_over_unpacked_records_match_the_plain_store(
    index_size: int, calls: list[tuple[int, int, bool, bool]]
) -> None:
    """Ping-pong tails and repeats that run through records kept unpacked (odd result
    hashes, odd timestamps, hashes of another shape) and pending records: the memory
    store's walks compare those as strings, the packed ones as digests."""
    with index_from(index_size):
        memory, reference = MemoryStore(), ReferenceStore()
        for step, (call, result, odd_timestamp, pending_only) in enumerate(calls):
            tool, args = CALLS[call]
            timestamp = True if odd_timestamp else step
            pending = ToolCallRecord(tool, args, f"c{step}", None, None, None, timestamp)
            write = OutcomeWrite(
                tool, args, f"c{step}", None, OutcomeHash(result_hash_at(result)), 30, 1
            )
            seen = []
            for store in (memory, reference):
                seen.append(detection(store.begin_call("s", None, pending, 30, 1.0)))
                if not pending_only:
                    seen.append(store.record_outcome("s", write, GuardSpec(3, True), 1.0))
            assert seen[: len(seen) // 2] == seen[len(seen) // 2 :]
            assert memory.history("s", 1.0) == reference.history("s", 1.0)


# --- through LoopGuard ----------------------------------------------------------------------

GUARD_TOOLS = ["read", "exec", "Bash", "process", "command_status", "", " READ "]


class Unserialisable:
    def __str__(self) -> str:
        raise RuntimeError("no text")


GUARD_ARGS: list[Any] = [
    {"path": "a"},
    {"path": "b"},
    {"action": "poll", "sessionId": "s1"},
    {"n": 1, "deep": [1, 2]},
    "text",
    None,
    {"bad": Unserialisable()},
]
GUARD_RESULTS: list[Any] = [
    "same",
    "other",
    {"content": [{"type": "text", "text": "r"}], "details": {}},
    {"details": {"status": "running"}},
    None,
    UNDEFINED,
    Unserialisable(),
]
GUARD_ERRORS: list[Any] = [UNDEFINED, UNDEFINED, UNDEFINED, "boom", "Unknown tool: ghost"]


@dataclass(frozen=True)
class Call:
    session: str
    tool: str
    args: int
    result: int
    error: int
    run: object
    call_id: object
    skip_before: bool
    skip_after: bool
    change: str | None  # what the tool does to its params while it runs
    honour_block: bool
    agent: str | None  # the agent's block has another history size and guard window


@dataclass(frozen=True)
class Retry:
    session: str
    run: object


GUARD_STEPS = st.lists(
    st.one_of(
        st.builds(
            Call,
            st.sampled_from(["s", "s", "s", "t"]),
            st.sampled_from(GUARD_TOOLS),
            st.integers(0, len(GUARD_ARGS) - 1),
            st.integers(0, len(GUARD_RESULTS) - 1),
            st.integers(0, len(GUARD_ERRORS) - 1),
            st.sampled_from([None, None, "r", " r ", "", "q"]),
            st.sampled_from([None, "", "c1", "c2", 7]),
            st.sampled_from([False, False, False, True]),
            st.sampled_from([False, False, False, True]),
            st.sampled_from([None, None, None, "add", "replace", "copy"]),
            st.sampled_from([True, True, False]),
            st.sampled_from([None, None, "other"]),
        ),
        st.builds(Retry, st.sampled_from(["s", "t"]), st.sampled_from([None, "r", "q"])),
    ),
    min_size=10,
    max_size=80,
)
BLOCKS = st.fixed_dictionaries(
    {
        "enabled": st.sampled_from([True, True, False]),
        "historySize": st.sampled_from([1, 2, 3, 5, 8, 30, 40]),
        "warningThreshold": st.sampled_from([2, 3]),
        "criticalThreshold": st.sampled_from([4, 5]),
        "globalCircuitBreakerThreshold": st.sampled_from([6, 7]),
        "unknownToolThreshold": st.sampled_from([2, 10]),
        "postCompactionGuard": st.fixed_dictionaries({"windowSize": st.sampled_from([1, 2, 3])}),
    }
)
OPENCLAW_CONFIGS = st.builds(
    lambda block, other: {
        "tools": {"loopDetection": block},
        "agents": {"list": [{"id": "other", "tools": {"loopDetection": other}}]},
    },
    BLOCKS,
    st.fixed_dictionaries(
        {
            "historySize": st.sampled_from([1, 2, 4, 40]),
            "postCompactionGuard": st.fixed_dictionaries({"windowSize": st.sampled_from([1, 4])}),
        }
    ),
)


class _Capture(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[tuple[str, int, str]] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append((record.name, record.levelno, record.getMessage()))


def play(
    store: Store, config: dict[str, Any], steps: list[object], enforce: bool, profile: str
) -> list[object]:
    capture = _Capture()
    logger = logging.getLogger("loopwatch")
    logger.addHandler(capture)
    old_level = logger.level
    logger.setLevel(logging.DEBUG)
    events: list[object] = []
    clock = [1_700_000_000.0]
    guard = LoopGuard(
        openclaw_config=config,
        store=store,
        clock=lambda: clock[0],
        listeners=[lambda e: events.append(e.to_dict())],
        enforce=enforce,
        profile=profile,  # type: ignore[arg-type]
    )
    seen: list[object] = []
    try:
        for index, step in enumerate(steps):
            clock[0] += 1
            if isinstance(step, Retry):
                guard.compaction_retry(session_key=step.session, run_id=step.run, agent_id="other")
                continue
            assert isinstance(step, Call)
            args = copy.deepcopy(GUARD_ARGS[step.args])
            call_id = f"{step.call_id}-{index}" if step.call_id == "c2" else step.call_id
            kwargs: dict[str, Any] = {
                "session_key": step.session,
                "run_id": step.run,
                "tool_call_id": call_id,
                "agent_id": step.agent,
            }
            decision = None
            if not step.skip_before:
                decision = guard.before_call(step.tool, args, **kwargs)
                seen.append(("before", decision))
            if step.change == "add" and isinstance(args, dict):
                args["added"] = 1
            elif step.change == "replace" and isinstance(args, dict) and args:
                args[next(iter(args))] = "changed"
            elif step.change == "copy" and isinstance(args, dict):
                args = copy.deepcopy(args)  # equal values, new objects: same hash
            if step.skip_after:
                continue
            result, error = GUARD_RESULTS[step.result], GUARD_ERRORS[step.error]
            if decision is not None and decision.tool_result is not None and step.honour_block:
                result, error = decision.tool_result, UNDEFINED
            try:
                record = guard.after_call(step.tool, args, result=result, error=error, **kwargs)
            except Exception as exc:
                seen.append(("raised", type(exc).__name__, str(exc), getattr(exc, "record", None)))
            else:
                seen.append(("after", record))
                if record is not None:
                    # after_call hashed the params as they are now (reused only if unchanged).
                    assert record.args_hash == hash_tool_call(record.tool_name, args)
            seen.append(guard.history(session_key=step.session))
        for session in ("s", "t"):
            seen.append(guard.history(session_key=session))
            for run in (None, "r", "q"):
                seen.append(guard.guard_snapshot(session_key=session, run_id=run))
                seen.append(guard.last_guard_verdict(session_key=session, run_id=run))
    finally:
        logger.removeHandler(capture)
        logger.setLevel(old_level)
    return [seen, events, capture.lines]


@pytest.mark.parametrize("index_size", INDEX_SIZES)
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(OPENCLAW_CONFIGS, GUARD_STEPS, st.booleans(), st.sampled_from(["reference", "adaptive"]))
def test_guard_on_generated_calls_matches_the_plain_store(
    index_size: int, config: dict[str, Any], steps: list[object], enforce: bool, profile: str
) -> None:
    with index_from(index_size):
        got = play(MemoryStore(max_sessions=2, idle_ttl_s=30.0), config, steps, enforce, profile)
        want = play(
            ReferenceStore(max_sessions=2, idle_ttl_s=30.0), config, steps, enforce, profile
        )
    assert got == want


# --- the pieces -----------------------------------------------------------------------------

S = "session"
GUARD_HASH = "loopwatch.guard._planning.hash_tool_call"


def test_begin_call_returns_the_run_as_it_was_until_the_next_operation() -> None:
    store = MemoryStore()
    first = ToolCallRecord("read", f"read:{DIGESTS[0]}", "1", None, None, None, 1)
    second = ToolCallRecord("read", f"read:{DIGESTS[1]}", "2", None, None, None, 2)
    assert list(store.begin_call(S, None, first, 30, 1.0)) == []
    view = store.begin_call(S, None, second, 30, 1.0)
    assert list(view) == [first]  # its own record is not in it
    assert store.history(S, 1.0) == (first, second)  # any operation applies the append


def test_cancelling_the_latest_begin_leaves_a_full_history_as_it_was() -> None:
    store = MemoryStore()
    records = [ToolCallRecord("read", f"read:{d}", None, None, None, None, 1) for d in DIGESTS]
    for record in records[:3]:
        store.begin_call(S, None, record, 3, 1.0)
    store.begin_call(S, None, records[3], 3, 1.0)
    store.cancel_call(S, records[3], 1.0)
    # A blocked call is not recorded (SPEC §5.2): the record its append would have trimmed
    # to make room stays.
    assert store.history(S, 1.0) == tuple(records[:3])


def test_the_index_keeps_a_lone_record_bare_and_a_repeated_call_in_a_list() -> None:
    # A signature seen once is indexed as its record (no list: 88 bytes less per distinct
    # call in a long run); a repeat turns it into a list, trimming turns it back.
    store = MemoryStore()
    a, b = (f"read:{d}" for d in DIGESTS[:2])
    sequence = [a, b, a]
    with index_from(0):
        for i, args_hash in enumerate(sequence):
            record = ToolCallRecord("read", args_hash, str(i), None, None, None, i)
            store.begin_call(S, None, record, 3, 1.0)
        history = store._sessions[S].history
        store.history(S, 1.0)  # applies the last append
        (run,) = history.runs.values()
        assert run.calls is not None
        by_key = run.calls["read"]
        assert isinstance(by_key[call_key("read", b)], _compact.CompactRecord)
        assert [r.call_id for r in by_key[call_key("read", a)]] == ["0", "2"]
        assert [r.call_id for r in run.same_call("read", call_key("read", b))] == ["1"]
        record = ToolCallRecord("read", b, "3", None, None, None, 3)
        store.begin_call(S, None, record, 3, 1.0)  # trims the first call of a
        store.history(S, 1.0)
        assert isinstance(by_key[call_key("read", a)], _compact.CompactRecord)
        assert [r.call_id for r in run.same_call("read", call_key("read", a))] == ["2"]
        assert [r.call_id for r in run.same_call("read", call_key("read", b))] == ["1", "3"]


def test_an_unarmed_guard_keeps_only_its_spec_and_answers_idle() -> None:
    guard = LoopGuard({"enabled": True, "postCompactionGuard": {"windowSize": 2}})
    guard.after_call("read", {"p": 1}, session_key=S, result="x")
    verdict = guard.last_guard_verdict(session_key=S)
    assert verdict == GuardVerdict(should_abort=False, armed=False, remaining_attempts=0)
    assert guard.guard_snapshot(session_key=S) == _NO_GUARD
    guard.compaction_retry(session_key=S)
    assert guard.guard_snapshot(session_key=S) == GuardSnapshot(armed=True, remaining_attempts=2)
    assert guard.last_guard_verdict(session_key=S) == verdict  # arming does not change it


def test_the_guard_keeps_the_window_of_the_call_that_created_it() -> None:
    openclaw = {
        "tools": {"loopDetection": {"postCompactionGuard": {"windowSize": 2}}},
        "agents": {
            "list": [
                {
                    "id": "wide",
                    "tools": {"loopDetection": {"postCompactionGuard": {"windowSize": 4}}},
                }
            ]
        },
    }
    guard = LoopGuard(openclaw_config=openclaw)
    guard.after_call("read", {"p": 1}, session_key=S, result="x", agent_id="wide")
    guard.compaction_retry(session_key=S)  # the global block says 2; the guard has 4
    assert guard.guard_snapshot(session_key=S) == GuardSnapshot(armed=True, remaining_attempts=4)


@pytest.mark.parametrize(
    ("change", "reused"),
    [
        (None, True),
        ("copy-values", False),  # equal values, new objects: hashed again, same hash
        ("add", False),
        ("replace", False),
        ("delete", False),
    ],
)
def test_after_call_hashes_the_params_it_is_given(change: str | None, reused: bool) -> None:
    guard = LoopGuard({"enabled": True})
    params: dict[str, Any] = {"path": "a.txt", "offset": 3}
    before = hash_tool_call("read", params)
    guard.before_call("read", params, session_key=S, tool_call_id="c")
    if change == "copy-values":
        params["path"] = "".join(["a.", "txt"])
    elif change == "add":
        params["extra"] = True
    elif change == "replace":
        params["offset"] = 4
    elif change == "delete":
        del params["offset"]
    with mock.patch(GUARD_HASH, side_effect=hash_tool_call) as hashed:
        record = guard.after_call("read", params, session_key=S, tool_call_id="c", result="ok")
    assert record is not None
    assert record.args_hash == hash_tool_call("read", params)
    assert (record.args_hash == before) == (change in (None, "copy-values"))
    assert hashed.called != reused


@pytest.mark.parametrize(
    "params",
    [{"nested": {"a": 1}}, {"items": [1, 2]}, {1: "non-str key"}, ("a", "b"), [1, 2]],
)
def test_params_with_mutable_parts_are_always_hashed_again(params: Any) -> None:
    guard = LoopGuard({"enabled": True})
    guard.before_call("read", params, session_key=S, tool_call_id="c")
    with mock.patch(GUARD_HASH, side_effect=hash_tool_call) as hashed:
        guard.after_call("read", params, session_key=S, tool_call_id="c", result="ok")
    assert hashed.called


def test_records_of_any_shape_round_trip() -> None:
    store = MemoryStore()
    odd = [
        ToolCallRecord("read", "READ:" + DIGESTS[0], "", "r\ud800", None, None, 2**63),
        ToolCallRecord("read", f"read:{DIGESTS[0]}", None, None, "error:x", "ghost", True, "f"),
        ToolCallRecord("x", f"x:{DIGESTS[1]}", "c", None, DIGESTS[2], None, -(2**63), None),
    ]
    for record in odd:
        store.begin_call(S, record.run_id, record, 30, 1.0)
    assert store.history(S, 1.0) == tuple(odd)
    assert [type(r.timestamp) for r in store.history(S, 1.0)] == [int, bool, int]


def test_args_hashes_waiting_for_an_after_call_are_bounded() -> None:
    guard = LoopGuard({"enabled": True})
    with mock.patch("loopwatch.guard._memo.ARGS_MEMO_SIZE", 3):
        for index in range(10):
            guard.before_call("read", {"n": index}, session_key=S, tool_call_id=f"c{index}")
    memos = guard._calls  # the after_calls never came
    assert memos.keys() == [(S, "c7"), (S, "c8"), (S, "c9")]


def test_args_memos_keep_a_bounded_amount_of_argument_text_alive() -> None:
    """Calls whose after_call never comes must not pin their (large) arguments (issue 17)."""
    guard = LoopGuard({"enabled": True})
    big = "x" * (1024 * 1024)
    with mock.patch("loopwatch.guard._memo.ARGS_MEMO_CHARS", 3 * len(big)):
        for index in range(10):
            guard.before_call(
                "write", {"n": index, "text": big}, session_key=S, tool_call_id=f"c{index}"
            )
        memos = guard._calls
        assert memos.chars <= 3 * len(big)
        assert memos.keys() == [(S, "c7"), (S, "c8"), (S, "c9")]
