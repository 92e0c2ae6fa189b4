"""Hostile call-time input (SPEC §5.6): the guard never raises into the agent, never blocks a
healthy call by accident, and its strict mode raises what the lenient one logs.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest

from loopwatch import LoopGuard, MemoryStore, StoreError

MALFORMED_BATCHES: list[tuple[Any, int]] = [
    (None, 0),
    (5, 0),
    ([("exec", {})], 1),
    ([("exec", {}, "c1", "extra")], 1),
    ([None], 1),
    ([("exec", {}, "c1"), ("read",)], 2),
]


@pytest.mark.parametrize(("calls", "count"), MALFORMED_BATCHES)
def test_a_batch_that_is_not_triples_fails_open(
    calls: Any, count: int, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="loopwatch")
    guard = LoopGuard({"enabled": True}, strict=False)
    decisions = guard.before_batch(calls, session_key="s")
    assert [d.action for d in decisions] == ["allow"] * count
    assert guard.history(session_key="s") == ()
    assert any("tool loop detection failed" in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize(("calls", "count"), MALFORMED_BATCHES)
def test_the_async_batch_fails_open_alike(calls: Any, count: int) -> None:
    guard = LoopGuard({"enabled": True}, strict=False)
    decisions = asyncio.run(guard.abefore_batch(calls, session_key="s"))
    assert [d.action for d in decisions] == ["allow"] * count


def test_a_malformed_batch_raises_in_strict_mode() -> None:
    guard = LoopGuard({"enabled": True}, strict=True)
    with pytest.raises(ValueError, match="unpack"):
        guard.before_batch([("exec", {})], session_key="s")


def test_a_batch_from_a_generator_is_read_once() -> None:
    guard = LoopGuard({"enabled": True}, strict=True)
    calls = ((name, {"n": 1}, f"c{i}") for i, name in enumerate(["exec", "read"]))
    decisions = guard.before_batch(calls, session_key="s")  # type: ignore[arg-type]
    assert [d.action for d in decisions] == ["allow", "allow"]
    assert [r.tool_name for r in guard.history(session_key="s")] == ["exec", "read"]


class DownStore(MemoryStore):
    """A store whose every call fails as an unreachable backend does."""

    def begin_call(self, *args: Any, **kwargs: Any) -> Any:
        raise StoreError("down")


@pytest.mark.parametrize("twin", ["sync", "async"])
def test_a_generator_batch_on_a_failing_store_gets_one_decision_a_call(twin: str) -> None:
    guard = LoopGuard({"enabled": True}, store=DownStore(), strict=False)
    calls = ((name, {"n": 1}, f"c{i}") for i, name in enumerate(["exec", "read"]))
    if twin == "sync":
        decisions = guard.before_batch(calls, session_key="s")  # type: ignore[arg-type]
    else:
        decisions = asyncio.run(guard.abefore_batch(calls, session_key="s"))  # type: ignore[arg-type]
    assert [d.action for d in decisions] == ["allow", "allow"]  # fail-open by default


class GarbageStore(MemoryStore):
    """A host's store that answers its writes with something else than the contract says."""

    def __init__(self, answer: object, *, native_async: bool = False) -> None:
        super().__init__()
        self.answer = answer
        self.native_async = native_async

    def record_outcome(self, *args: Any, **kwargs: Any) -> Any:
        super().record_outcome(*args, **kwargs)
        return self.answer

    def arm_guard(self, *args: Any, **kwargs: Any) -> Any:
        super().arm_guard(*args, **kwargs)
        return self.answer


GARBAGE = [None, True, 5, "x", (), (None,), (None, None), {}, object()]


@pytest.mark.parametrize("native_async", [False, True], ids=["sync-store", "async-store"])
@pytest.mark.parametrize("answer", GARBAGE, ids=lambda a: type(a).__name__)
def test_a_store_answering_garbage_fails_open(answer: object, native_async: bool) -> None:
    guard = LoopGuard({"enabled": True}, store=GarbageStore(answer, native_async=native_async))
    guard.strict = False
    assert guard.after_call("exec", {}, session_key="s", result="r") is None
    guard.compaction_retry(session_key="s")

    async def twins() -> None:
        assert await guard.aafter_call("exec", {}, session_key="s", result="r") is None
        await guard.acompaction_retry(session_key="s")

    asyncio.run(twins())


def test_a_store_answering_garbage_raises_in_strict_mode() -> None:
    guard = LoopGuard({"enabled": True}, store=GarbageStore(None), strict=True)
    # (after_call reads the reply as the contract's pair: a store that breaks it fails
    # there, with Python's own TypeError, at no cost to the hot path of a good store)
    with pytest.raises(TypeError, match="NoneType"):
        guard.after_call("exec", {}, session_key="s", result="r")
    with pytest.raises(TypeError, match="arm_guard returned NoneType"):
        guard.compaction_retry(session_key="s")


class Unprintable:
    """A tool result of the host's whose text conversion raises."""

    def __str__(self) -> str:
        raise RuntimeError("no text")

    __repr__ = __str__


def nested_dicts(depth: int) -> dict[str, Any]:
    root: dict[str, Any] = {}
    node = root
    for _ in range(depth):
        node["k"] = {}
        node = node["k"]
    return root


class UnreadableList(list[Any]):
    def __iter__(self) -> Any:
        raise RuntimeError("no items")


@pytest.mark.parametrize(
    "value",
    [Unprintable(), nested_dicts(5_000), UnreadableList([1])],
    ids=["failing-str", "deep", "unreadable-list"],
)
def test_a_warning_is_appended_to_any_tool_result(value: object) -> None:
    """The 11th identical call gets the warning appended to its result (SPEC §11.2); a
    result that cannot be rendered as text must not make the guarded tool raise."""
    guard = LoopGuard({"enabled": True}, strict=False)

    @guard.tool(session_key="s")
    def tool(x: int) -> object:
        return value

    shown = [tool(1) for _ in range(11)]
    assert shown[9] is value
    assert isinstance(shown[10], str)
    assert shown[10].endswith("stop retrying and report the task as failed.")


@pytest.mark.parametrize(
    ("tool", "params", "error"),
    [
        ("read", {"path": "/tmp/caf\udce9"}, "No such file or directory: /tmp/caf\udce9"),
        ("exec", {"command": "cat /tmp/caf\udce9"}, "cat: /tmp/caf\udce9: No such file"),
        ("edit", {"file_path": "\ud800"}, "\ud800\udfff\udc00"),
    ],
    ids=["read", "exec", "edit"],
)
def test_the_adaptive_profile_reads_texts_with_lone_surrogates(
    tool: str, params: dict[str, str], error: str
) -> None:
    """A file name that is not UTF-8 reaches a host as a lone surrogate (``os.fsdecode``).
    The adaptive facts digested it with a strict UTF-8 encode: every such call failed
    open, unrecorded (strict mode: ``UnicodeEncodeError``), so its loop was never seen."""
    guard = LoopGuard({"enabled": True}, profile="adaptive", strict=True)
    actions = []
    for _ in range(4):
        decision = guard.before_call(tool, params, session_key="s")
        actions.append(decision.action)
        if decision.tool_result is None:
            guard.after_call(tool, params, session_key="s", error=error)
        else:  # blocked: the host passes the blocked result on (a no-op, SPEC §5.2)
            guard.after_call(tool, params, session_key="s", result=decision.tool_result)
    history = guard.history(session_key="s")
    assert history and all(r.result_hash for r in history)
    assert "block" in actions  # the same failure again and again: repeated_failure
