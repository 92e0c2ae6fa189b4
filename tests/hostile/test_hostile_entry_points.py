"""Hostile values at call time, through every public entry point (SPEC §5.1, §5.6, §8.5).

The guards here are strict (the suite's mode): a value of the host's follows the fail-open
policy, so anything raised is a loopwatch bug. What each value must give:

* a value loopwatch can hash (cycles, bytes, NaN, sets, numpy values, str subclasses,
  lone surrogates, odd keys) is detected like any other: the loop is blocked;
* a value it cannot hash (a failing ``__hash__`` on a key, nesting past the supported
  depth) makes the call allowed, unrecorded, with one log line saying why;
* an id that is a ``str`` subclass whose methods raise (``__hash__``, ``__eq__``,
  ``__str__``, ``__format__``, ``strip``, ``__bool__`` …) is read as its characters.

Hashing is deterministic: the same values give the same digests in processes with
different ``PYTHONHASHSEED`` (set and frozenset order, dict key order).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import math
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from loopwatch import LoopGuard, MemoryStore, PostCompactionLoopPersistedError, Store
from loopwatch.calls import ToolCall
from loopwatch.integrations._guarded import TextTranslator, aguarded_call, guarded_call
from loopwatch.stores.sqlite import SqliteStore

CONFIG = {
    "enabled": True,
    "warningThreshold": 2,
    "criticalThreshold": 3,
    "globalCircuitBreakerThreshold": 4,
}
ROOT = Path(__file__).resolve().parents[2]


class HostileStr(str):
    """A ``str`` subclass of the host's whose every method of its own raises."""

    def __str__(self) -> str:
        raise RuntimeError("__str__")

    def __repr__(self) -> str:
        raise RuntimeError("__repr__")

    def __hash__(self) -> int:
        raise RuntimeError("__hash__")

    def __eq__(self, other: object) -> bool:
        raise RuntimeError("__eq__")

    def __ne__(self, other: object) -> bool:
        raise RuntimeError("__ne__")

    def __format__(self, spec: str) -> str:
        raise RuntimeError("__format__")

    def __bool__(self) -> bool:
        raise RuntimeError("__bool__")

    def __len__(self) -> int:
        raise RuntimeError("__len__")

    def __iter__(self) -> Iterator[str]:
        raise RuntimeError("__iter__")

    def __getitem__(self, index: object) -> str:
        raise RuntimeError("__getitem__")

    def __add__(self, other: object) -> str:
        raise RuntimeError("__add__")

    def strip(self, chars: str | None = None) -> str:
        raise RuntimeError("strip")

    def lower(self) -> str:
        raise RuntimeError("lower")

    def encode(self, encoding: str = "utf-8", errors: str = "strict") -> bytes:
        raise RuntimeError("encode")


class FailingRepr:
    def __repr__(self) -> str:
        raise RuntimeError("__repr__")

    __str__ = __repr__


class FailingEq:
    """Compares and hashes with errors (a value, not a key: never hashed by loopwatch)."""

    def __eq__(self, other: object) -> bool:
        raise RuntimeError("__eq__")

    def __hash__(self) -> int:
        raise RuntimeError("__hash__")


class FailingKey:
    """A mapping key whose text conversion raises (keys that are not ``str`` are read
    with ``str``, SPEC §8.4)."""

    def __hash__(self) -> int:
        return 7

    def __str__(self) -> str:
        raise RuntimeError("__str__")


class KeyStr(HostileStr):
    """A ``str`` subclass that can be a key (it hashes) but whose other methods raise."""

    __hash__ = str.__hash__


def _cyclic_list() -> list[Any]:
    value: list[Any] = [1]
    value.append(value)
    return value


def _cyclic_dict() -> dict[str, Any]:
    value: dict[str, Any] = {"a": 1}
    value["self"] = value
    return value


def _nested(depth: int) -> list[Any]:
    root: list[Any] = []
    node = root
    for _ in range(depth - 1):
        child: list[Any] = []
        node.append(child)
        node = child
    return root


def _generator() -> Iterator[int]:
    yield 1


def _numpy_values() -> dict[str, Callable[[], object]]:
    try:
        import numpy as np
    except ImportError:  # pragma: no cover - numpy is in the dev extra
        return {}
    return {
        "np-array": lambda: np.arange(5),
        "np-float-nan": lambda: np.float64("nan"),
        "np-int": lambda: np.int64(3),
        "np-str": lambda: np.str_("text"),
        "np-object-array": lambda: np.array([object()], dtype=object),
    }


#: Values loopwatch hashes: the loop must be seen (blocked by the 4th identical call).
HASHABLE: dict[str, Callable[[], object]] = {
    "cyclic-list": _cyclic_list,
    "cyclic-dict": _cyclic_dict,
    "failing-repr": FailingRepr,
    "failing-eq-value": lambda: {"v": FailingEq()},
    "bytes": lambda: b"\x00\xff",
    "bytearray": lambda: bytearray(b"abc"),
    "memoryview": lambda: memoryview(b"xyz"),
    "nan": lambda: math.nan,
    "inf": lambda: -math.inf,
    "negative-zero": lambda: -0.0,
    "deep-10000": lambda: _nested(10_000),
    "tuple-none-int-keys": lambda: {(1, 2): 1, None: 2, 3: 3, "a": 4},
    "set": lambda: {1, "a", None, 2.5},
    "frozenset": lambda: frozenset({"x", "y"}),
    "generator": _generator,
    "str-subclass-value": lambda: {"p": HostileStr("abc")},
    "str-subclass-bare": lambda: HostileStr("make test"),
    "str-subclass-key": lambda: {KeyStr("k"): HostileStr("v"), "a": 1},
    "lone-surrogates": lambda: {"\udfff": "\ud800", "k": "a\ud800b"},
    **_numpy_values(),
}
#: Values loopwatch cannot hash: the call is allowed, unrecorded, and logged once.
UNHASHABLE: dict[str, Callable[[], object]] = {
    "deep-past-the-limit": lambda: _nested(100_001),
    "key-with-failing-str": lambda: {FailingKey(): 1},
    "colliding-keys": lambda: {1: "a", "1": "b"},
}


@pytest.fixture(params=["memory", "sqlite"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    made: Store = MemoryStore() if request.param == "memory" else SqliteStore(tmp_path / "s.db")
    yield made
    made.close()


def _loop(guard: LoopGuard, tool: object, value: object, session: str, **ids: Any) -> list[str]:
    actions = []
    for _ in range(5):
        decision = guard.before_call(tool, value, session_key=session, **ids)
        actions.append(decision.action)
        result = decision.tool_result if decision.tool_result is not None else value
        with contextlib.suppress(PostCompactionLoopPersistedError):
            guard.after_call(tool, value, session_key=session, result=result, **ids)
    return actions


@pytest.mark.parametrize("name", sorted(HASHABLE))
def test_a_hashable_hostile_value_is_detected_on_every_entry_point(
    name: str, store: Store, caplog: pytest.LogCaptureFixture
) -> None:
    guard = LoopGuard(CONFIG, store=store, strict=True)
    caplog.set_level(logging.WARNING, logger="loopwatch.tools")
    value = HASHABLE[name]()
    assert _loop(guard, "read", value, "direct")[-2:] == ["block", "block"]

    with_call = []
    for _ in range(5):
        with guard.call("read", value, session_key="call") as c:
            if not c.blocked:
                c.result(value)
        with_call.append(c.blocked)
    assert with_call[-1] is True

    @guard.tool(session_key="decorated")
    def tool(x: object) -> object:
        return x

    shown = [tool(value) for _ in range(5)]
    assert isinstance(shown[-1], str) and "CRITICAL" in shown[-1]

    async def through_async() -> list[bool]:
        blocked = []
        for _ in range(5):
            async with guard.call("read", value, session_key="async-call") as c:
                if not c.blocked:
                    c.result(value)
            blocked.append(c.blocked)
        return blocked

    assert asyncio.run(through_async())[-1] is True
    assert not [r for r in caplog.records if "failed" in r.getMessage()]


@pytest.mark.parametrize("name", sorted(UNHASHABLE))
def test_an_unhashable_value_allows_the_call_and_says_why(
    name: str, store: Store, caplog: pytest.LogCaptureFixture
) -> None:
    guard = LoopGuard(CONFIG, store=store, strict=True)
    caplog.set_level(logging.WARNING, logger="loopwatch.tools")
    assert _loop(guard, "read", UNHASHABLE[name](), "s") == ["allow"] * 5
    assert guard.history(session_key="s") == ()
    texts = [r.getMessage() for r in caplog.records]
    detection = [t for t in texts if t.startswith("tool loop detection failed: tool=read error=")]
    outcome = [t for t in texts if t.startswith("tool loop outcome tracking failed: tool=read ")]
    assert len(detection) == 1 and len(outcome) == 1  # once per tool name, saying why
    assert "TypeError" in detection[0]
    # The result alone unhashable: the call is recorded, its outcome is not.
    assert guard.before_call("exec", {}, session_key="r").action == "allow"
    result = {"content": [{"type": "text", "text": "t"}], "details": {"x": UNHASHABLE[name]()}}
    assert guard.after_call("exec", {}, session_key="r", result=result) is None
    (pending,) = guard.history(session_key="r")
    assert pending.result_hash is None


IDS = ("tool", "session_key", "run_id", "tool_call_id", "agent_id")


@pytest.mark.parametrize("where", IDS)
@pytest.mark.parametrize("profile", ["reference", "adaptive"])
def test_a_hostile_str_subclass_id_is_read_as_its_characters(
    where: str, profile: str, store: Store
) -> None:
    """Frameworks hand over ``str`` subclasses (``numpy.str_``, enums, lazy strings); the
    guard reads their characters, never their methods: a run id whose ``__format__``
    raised failed the warning's bucket; a tool-call id was stored as the host's object (a
    store comparing it raised); an agent id was looked up by its ``__hash__``."""
    override = {"criticalThreshold": 4, "globalCircuitBreakerThreshold": 5}
    openclaw = {
        "tools": {"loopDetection": CONFIG},
        "agents": {"list": [{"id": "agent-x", "tools": {"loopDetection": override}}]},
    }
    plain = {
        "tool": "read",
        "session_key": "s",
        "run_id": "r",
        "tool_call_id": "c1",
        "agent_id": "agent-x",
    }
    hostile: dict[str, Any] = {**plain, where: HostileStr(plain[where])}
    guard = LoopGuard(openclaw_config=openclaw, store=store, profile=profile, strict=True)  # type: ignore[arg-type]
    reference = LoopGuard(openclaw_config=openclaw, profile=profile, strict=True)  # type: ignore[arg-type]

    def run(g: LoopGuard, ids: dict[str, Any]) -> list[tuple[str, str | None, int]]:
        tool = ids.get("tool", "read")
        rest = {k: v for k, v in ids.items() if k != "tool"}
        seen = []
        for _ in range(5):
            decision = g.before_call(tool, {"a": 1}, **rest)
            seen.append((decision.action, decision.verdict.detector, decision.verdict.count))
            g.after_call(tool, {"a": 1}, result=decision.tool_result or "same", **rest)
        g.before_batch([(tool, {"b": 1}, rest.get("tool_call_id"))] * 2, **_batch_ids(rest))
        g.compaction_retry(**_batch_ids(rest))
        g.critical_strike(session_key=rest["session_key"], run_id=rest.get("run_id"))
        return seen

    expected = run(reference, plain)
    assert run(guard, hostile) == expected
    assert expected[-1][0] == "block"
    records = guard.history(session_key="s")
    assert records and all(type(r.tool_call_id) in (str, type(None)) for r in records)
    assert all(type(r.run_id) in (str, type(None)) and type(r.tool_name) is str for r in records)
    assert [r.tool_name for r in records][:1] == ["read"]


def _batch_ids(ids: dict[str, Any]) -> dict[str, Any]:
    return {k: ids[k] for k in ("session_key", "run_id", "agent_id") if k in ids}


@pytest.mark.parametrize("twin", ["sync", "async"])
def test_a_str_subclass_call_id_counts_once_when_reported_twice(twin: str) -> None:
    """Dedupe by tool-call id treats a ``str`` subclass id as its characters, like a
    ``str``: a second ``before_call`` of a call in flight and a second outcome report
    record nothing (they recorded a second call before)."""

    class CallId(str):
        pass

    guard = LoopGuard(CONFIG, strict=True)

    async def pair() -> None:
        for _ in range(2):
            await guard.abefore_call("read", {"a": 1}, session_key="s", tool_call_id=CallId("c"))
        for _ in range(2):
            await guard.aafter_call(
                "read", {"a": 1}, session_key="s", tool_call_id=CallId("c"), result="r"
            )

    if twin == "async":
        asyncio.run(pair())
    else:
        for _ in range(2):
            guard.before_call("read", {"a": 1}, session_key="s", tool_call_id=CallId("c"))
        for _ in range(2):
            guard.after_call(
                "read", {"a": 1}, session_key="s", tool_call_id=CallId("c"), result="r"
            )
    (record,) = guard.history(session_key="s")
    assert type(record.tool_call_id) is str and record.tool_call_id == "c"
    assert record.result_hash is not None


class UnprintableError(Exception):
    """A tool's exception whose text cannot be read."""

    def __str__(self) -> str:
        raise RuntimeError("__str__")


NAMES = st.one_of(
    st.none(),
    st.integers(),
    st.sampled_from(["", " ", "x" * 100_000, "\ud800", "READ", "bash", b"exec", 0, 1.5]),
    st.text(max_size=8),
)
VALUES = st.sampled_from(sorted(HASHABLE) + sorted(UNHASHABLE))


@settings(max_examples=60, suppress_health_check=list(HealthCheck), deadline=None)
@given(tool=NAMES, params=VALUES, result=VALUES, error=VALUES, fail=st.booleans())
def test_any_value_anywhere_never_raises_in_strict_mode(
    tool: object, params: str, result: str, error: str, fail: bool
) -> None:
    makers = {**HASHABLE, **UNHASHABLE}
    guard = LoopGuard(CONFIG, strict=True, profile="adaptive")
    tc = ToolCall(guard, tool, makers[params](), session_key="s", tool_call_id="c1")  # type: ignore[arg-type]
    guarded_call(tc, lambda: makers[result](), TextTranslator())  # type: ignore[arg-type]
    tc2 = ToolCall(guard, tool, makers[params](), session_key="s", tool_call_id="c2")  # type: ignore[arg-type]

    async def run_async() -> object:
        if fail:
            raise UnprintableError("the tool failed")
        return makers[result]()

    with contextlib.suppress(UnprintableError):  # the tool's own error propagates
        asyncio.run(aguarded_call(tc2, run_async, TextTranslator()))  # type: ignore[arg-type]
    decision = guard.before_call(tool, makers[params](), session_key="s")
    guard.after_call(tool, makers[params](), session_key="s", error=makers[error]())
    assert decision.action in ("allow", "warn", "block")


# --- deterministic hashing across processes -----------------------------------------------

_DIGESTS = r"""
import json, sys
from loopwatch.core.fingerprint import hash_tool_call
from loopwatch.core.outcomes import hash_tool_outcome

class Obj:
    def __init__(self):
        self.b = {"z", "y", "x"}
        self.a = frozenset({("t", 1), ("t", 2), "s"})

values = [
    {"set": {"alpha", "beta", "gamma", "delta", "\ud800", "é", "😀"}},
    frozenset({"one", "two", "three", 1, 2.5, None, True}),
    {(1, 2): "tuple key", None: "none key", 3: "int", "b": "str", 2.0: "float"},
    [float("nan"), float("inf"), -0.0, 1e21, 5e-324, 2**60],
    {"bytes": b"\x00\xff" * 3, "ba": bytearray(b"xy"), "nested": [[{"k": {"q", "r"}}]]},
    Obj(),
    {frozenset({"a", "b"}), frozenset({"c"}), ("x", "y")},
]
print(json.dumps([
    [hash_tool_call("exec", v), hash_tool_outcome("exec", v, result=v).result_hash]
    for v in values
]))
"""


def _digests(seed: str) -> list[list[str]]:
    env = {**os.environ, "PYTHONHASHSEED": seed, "PYTHONPATH": str(ROOT / "src")}
    done = subprocess.run(
        [sys.executable, "-c", _DIGESTS],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=True,
    )
    digests: list[list[str]] = json.loads(done.stdout)
    return digests


def test_digests_do_not_depend_on_the_hash_seed() -> None:
    first = _digests("0")
    assert len({args for args, _result in first}) == len(first)  # distinct values, digests
    for seed in ("1", "12345", "4294967295", "random"):
        assert _digests(seed) == first


@pytest.mark.parametrize(
    "arguments",
    [_cyclic_list(), {1: "a", "b": 2}, {"x": FailingRepr()}, _nested(100_001)],
    ids=["cyclic", "mixed-keys", "failing-repr", "deep"],
)
def test_queued_call_ids_never_raise_on_arguments_json_cannot_write(arguments: object) -> None:
    """The id queue of the adapters whose tool step gets no call id (smolagents, CrewAI,
    LlamaIndex) keyed calls by their JSON text: a cycle or keys of mixed types raised out
    of the adapter into the agent. Such a call now gets no id and is decided alone."""
    from loopwatch.integrations._guarded import QueuedIds

    ids = QueuedIds()
    ids.queue([("t", arguments, "c1"), ("t", {"ok": 1}, "c2")])
    assert ids.take("t", arguments) is None
    assert ids.take("t", {"ok": 1}) == "c2"


def test_fifty_megabyte_values_are_hashed_and_not_kept(caplog: pytest.LogCaptureFixture) -> None:
    guard = LoopGuard(CONFIG, strict=True)
    caplog.set_level(logging.WARNING, logger="loopwatch.tools")
    big = "x" * 50_000_000
    assert _loop(guard, "read", {"text": big}, "s")[-1] == "block"
    assert _loop(guard, "write", big.encode(), "b")[-1] == "block"
    assert not [r for r in caplog.records if "failed" in r.getMessage()]
    assert guard._calls._chars < 1_000_000  # the memo of args keeps no huge string alive


def test_turn_admission_never_raises_on_ids_it_cannot_read() -> None:
    """The adapters' turn admission read ids with ``__format__``, ``__hash__`` and
    ``__eq__``: a ``str`` subclass of the host's (or an object) raised into the agent."""
    from loopwatch.integrations._guarded import Admissions

    guard = LoopGuard(CONFIG, strict=True)
    admissions = Admissions()
    for session, ids in [
        (HostileStr("s"), [HostileStr("c0"), HostileStr("c1")]),
        ("s", [HostileStr("c0"), HostileStr("c1")]),
        (FailingRepr(), [FailingRepr(), FailingRepr()]),
    ]:
        calls = [
            ToolCall(guard, "read", {"a": 1}, session_key=session, tool_call_id=i) for i in ids
        ]
        assert admissions.admit(guard, calls) is False  # decided call by call instead
        for tc in calls:
            assert admissions.take(tc) is tc
            tc.start()
            if not tc.blocked:
                tc.result("r")
                tc.finish()
    assert len(guard.history(session_key="s")) == 3  # the fourth identical call is blocked
