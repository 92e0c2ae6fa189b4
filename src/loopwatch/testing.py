"""Helpers for testing code that uses loopwatch (a fake clock, a scripted session, a store).

Shipped with the library so users' own tests can drive a ``LoopGuard`` deterministically:
expiry and timestamps follow :class:`FakeClock`, and :func:`drive` plays a list of calls
the way a well-behaved host does (a blocked call is not run; its result is the block).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from loopwatch.core._undefined import UNDEFINED
from loopwatch.guard import Decision, LoopGuard
from loopwatch.stores.reference import ReferenceStore


class FakeClock:
    """A clock for ``LoopGuard(clock=...)`` that only moves when told to."""

    def __init__(self, start: float = 1_700_000_000.0) -> None:
        self.now = float(start)

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        """Move the clock forward (idle expiry, timestamps)."""
        self.now += seconds


@dataclass(frozen=True)
class ScriptedCall:
    """One call of a scripted session: what the tool returns, or raises."""

    tool: str
    args: Any = None
    result: Any = UNDEFINED
    error: Any = UNDEFINED


def drive(
    guard: LoopGuard,
    calls: Iterable[ScriptedCall],
    *,
    session_key: str = "test-session",
    run_id: str | None = None,
    on_decision: Callable[[int, Decision], None] | None = None,
) -> list[Decision]:
    """Play ``calls`` through ``guard`` as a host would and return every decision.

    A blocked call is not "run": its blocked result is passed to ``after_call``.
    ``PostCompactionLoopPersistedError`` propagates, as it would end a real run.
    """
    decisions: list[Decision] = []
    for index, call in enumerate(calls):
        call_id = f"call-{index}"
        decision = guard.before_call(
            call.tool, call.args, session_key=session_key, run_id=run_id, tool_call_id=call_id
        )
        decisions.append(decision)
        if on_decision is not None:
            on_decision(index, decision)
        if decision.tool_result is not None:
            guard.after_call(
                call.tool,
                call.args,
                session_key=session_key,
                run_id=run_id,
                tool_call_id=call_id,
                result=decision.tool_result,
            )
        else:
            guard.after_call(
                call.tool,
                call.args,
                session_key=session_key,
                run_id=run_id,
                tool_call_id=call_id,
                result=call.result,
                error=call.error,
            )
    return decisions


__all__ = ["FakeClock", "ReferenceStore", "ScriptedCall", "drive"]
