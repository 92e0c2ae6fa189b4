"""Hostile call-time input (SPEC §5.6): the guard never raises into the agent, never blocks a
healthy call by accident, and its strict mode raises what the lenient one logs.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest

from loopwatch import LoopGuard

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
