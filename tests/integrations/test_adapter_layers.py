"""The adapter layer without a framework: pass-through, recovery, batches (issue 16)."""

from __future__ import annotations

import ast
import asyncio
from pathlib import Path
from typing import Any

import pytest
from integration_support import ARGS, CONFIG, CRITICAL, RESULT, TOOL
from matrix_support import BATCH_BLOCKED, BatchGuard

from loopwatch import LoopDetectedError, LoopGuard
from loopwatch.adapter import (
    RECOVERY_MESSAGE,
    AdapterOptions,
    Admissions,
    ToolCall,
    call,
    guarded_call,
    recovery_message,
)
from loopwatch.integrations._guarded import TextTranslator, stream_stopped
from loopwatch.integrations._shared import guarding, is_guarding

S = "session-1"
SRC = Path(__file__).resolve().parents[2] / "src" / "loopwatch"


class Runs:
    def __init__(self) -> None:
        self.count = 0

    def __call__(self, path: str) -> str:
        self.count += 1
        return RESULT


# --- one call, two layers -------------------------------------------------------------------


def test_a_decorated_tool_inside_a_guarded_call_counts_once() -> None:
    guard = LoopGuard({"enabled": True})
    runs = Runs()
    read_file = guard.tool(runs, session_key=S, name=TOOL)
    shown = []
    for _ in range(60):
        with guard.call(TOOL, dict(ARGS), session_key=S) as c:
            if not c.blocked:
                c.result(read_file(**ARGS))
        shown.append(c.shown)
    assert runs.count == 20
    assert len(guard.history(session_key=S)) == 20
    assert sum("CRITICAL" in str(s) for s in shown) == 40


async def test_async_layers_count_once() -> None:
    guard = LoopGuard({"enabled": True})
    runs = Runs()

    @guard.tool(session_key=S, name=TOOL)
    async def read_file(path: str) -> str:
        return runs(path)

    for _ in range(30):
        async with guard.call(TOOL, dict(ARGS), session_key=S) as c:
            if not c.blocked:
                c.result(await read_file(**ARGS))
    assert runs.count == 20


def test_another_session_or_guard_is_guarded_on_its_own() -> None:
    guard, other = LoopGuard({"enabled": True}), LoopGuard({"enabled": True})
    inner_same = guard.tool(Runs(), session_key="elsewhere", name=TOOL)
    inner_other = other.tool(Runs(), session_key=S, name=TOOL)
    with guard.call(TOOL, dict(ARGS), session_key=S) as c:
        c.result([inner_same(**ARGS), inner_other(**ARGS)])
    assert len(guard.history(session_key=S)) == 1
    assert len(guard.history(session_key="elsewhere")) == 1
    assert len(other.history(session_key=S)) == 1


@pytest.mark.parametrize("outer_layer", ["guard.tool", "guard.call"])
@pytest.mark.parametrize("asynchronous", [False, True])
async def test_a_shadow_guard_inside_does_not_keep_the_outer_guard_from_blocking(
    outer_layer: str, asynchronous: bool
) -> None:
    # The inner guard.tool function of another guard appends its warning at the 11th
    # call: the outer layer recorded that text as another outcome and never blocked.
    inner = LoopGuard(CONFIG, enforce=False)
    outer = LoopGuard(CONFIG)
    runs = Runs()
    if asynchronous:

        async def aread(path: str) -> str:
            return runs(path)

        tool: Any = inner.tool(aread, session_key=S, name=TOOL)
    else:
        tool = inner.tool(runs, session_key=S, name=TOOL)

    async def once(i: int) -> object:
        if outer_layer == "guard.tool":
            wrapped = outer.tool(tool, session_key=S, name=TOOL)
            shown = wrapped(**ARGS)
            return await shown if asynchronous else shown
        with outer.call(TOOL, ARGS, session_key=S, tool_call_id=f"c-{i}") as c:
            if not c.blocked:
                answer = tool(**ARGS)
                c.result(await answer if asynchronous else answer)
        return c.shown

    shown = [await once(i) for i in range(14)]
    assert shown[12] == CRITICAL
    assert runs.count == 12
    history = outer.history(session_key=S)
    assert len(history) == 12
    assert len({record.result_hash for record in history}) == 1


def test_only_the_first_inner_call_passes_through() -> None:
    # A tool that calls a guarded helper twice (or a sub-agent sharing the session): the
    # first inner call is the outer call itself; the second is a call of its own.
    guard = LoopGuard({"enabled": True})
    helper = guard.tool(Runs(), session_key=S, name="helper")
    with guard.call(TOOL, dict(ARGS), session_key=S) as c:
        c.result([helper(**ARGS), helper(**ARGS)])
    assert [r.tool_name for r in guard.history(session_key=S)] == [TOOL, "helper"]


def test_the_scope_ends_with_the_call() -> None:
    guard = LoopGuard({"enabled": True})
    with guard.call(TOOL, dict(ARGS), session_key=S) as c:
        assert is_guarding(guard, S)
        c.result(RESULT)
    assert not is_guarding(guard, S)
    tc = ToolCall(guard, TOOL, dict(ARGS), session_key=S)
    guarded_call(tc, lambda: is_guarding(guard, S), TextTranslator())
    assert tc.shown is True
    assert not is_guarding(guard, S)


def test_a_pass_through_call_records_nothing_and_shows_the_outcome() -> None:
    guard = LoopGuard({"enabled": True})
    with guarding(guard, S):
        tc = ToolCall(guard, TOOL, dict(ARGS), session_key=S)
        tc.start()
        tc.result(RESULT)
        assert tc.finish() == RESULT
    assert tc.passthrough and tc.record is None
    assert guard.history(session_key=S) == ()


class Paused(Exception):
    """A framework's control-flow exception (a deferral, an interrupt)."""


class PausingTranslator(TextTranslator):
    def passes(self, error: Exception) -> bool:
        return isinstance(error, Paused)


def test_a_control_flow_exception_is_not_an_outcome() -> None:
    guard = LoopGuard({"enabled": True})

    def pause() -> str:
        raise Paused

    tc = ToolCall(guard, TOOL, dict(ARGS), session_key=S)
    with pytest.raises(Paused):
        guarded_call(tc, pause, PausingTranslator())
    (record,) = guard.history(session_key=S)
    assert record.result_hash is None  # still pending: no outcome was recorded
    with pytest.raises(Paused):
        guarded_call(ToolCall(guard, TOOL, {}, session_key=S), pause, TextTranslator())
    assert guard.history(session_key=S)[-1].result_hash is not None  # a plain failure


# --- the stream guard's stop is visible -------------------------------------------------------


def test_a_stream_stop_is_logged_and_ends_the_run_under_end_run(caplog: Any) -> None:
    text = "replaced"
    stream_stopped(text, name="open_file", count=11, session_key=S, options=AdapterOptions())
    assert "open_file" in caplog.text and "11 times" in caplog.text
    with pytest.raises(LoopDetectedError) as caught:
        stream_stopped(
            text,
            name="open_file",
            count=11,
            session_key=S,
            options=AdapterOptions(on_critical="end_run"),
        )
    assert caught.value.verdict.detector == "unknown_tool_repeat"
    assert str(caught.value) == text


# --- end_run is not a RuntimeError ------------------------------------------------------------


def test_except_runtime_error_does_not_swallow_end_run() -> None:
    guard = LoopGuard(CONFIG)
    read_file = guard.tool(Runs(), session_key=S, name=TOOL, on_critical="end_run")
    with pytest.raises(LoopDetectedError):
        for _ in range(20):
            try:
                read_file(**ARGS)
            except RuntimeError:  # an agent loop's own error handling
                continue


# --- on_critical="recover" --------------------------------------------------------------------


def test_recover_blocks_once_with_the_recovery_message_then_ends_the_run() -> None:
    guard = LoopGuard(CONFIG)
    runs = Runs()
    read_file = guard.tool(runs, session_key=S, name=TOOL, on_critical="recover")
    shown = [read_file(**ARGS) for _ in range(13)]
    assert runs.count == 12
    assert shown[-1] == recovery_message(CRITICAL)
    assert shown[-1].startswith(CRITICAL) and "different" in shown[-1]
    with pytest.raises(LoopDetectedError) as caught:
        read_file(**ARGS)
    assert str(caught.value) == CRITICAL
    assert runs.count == 12


def test_recover_counts_strikes_per_run() -> None:
    guard = LoopGuard(CONFIG)
    outcomes = []
    for run in ("run-1", "run-2"):
        for _ in range(13):
            with call(
                guard, TOOL, dict(ARGS), session_key=S, run_id=run, on_critical="recover"
            ) as c:
                if not c.blocked:
                    c.result(RESULT)
        outcomes.append(c.shown)
    # Each run's first critical is its first strike: no run ended.
    assert outcomes == [recovery_message(CRITICAL)] * 2


class StrikeGuard(LoopGuard):
    """A stand-in for the lead's ``LoopGuard.critical_strike`` (strikes in the store)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.strikes: list[tuple[object, object]] = []

    def critical_strike(self, *, session_key: object, run_id: object = None) -> int:
        self.strikes.append((session_key, run_id))
        return 2  # as if another process had struck already

    async def acritical_strike(self, *, session_key: object, run_id: object = None) -> int:
        return self.critical_strike(session_key=session_key, run_id=run_id)


def test_recover_uses_the_guards_strike_count_when_it_has_one() -> None:
    guard = StrikeGuard(CONFIG)
    read_file = guard.tool(Runs(), session_key=S, name=TOOL, on_critical="recover")
    for _ in range(12):
        read_file(**ARGS)
    with pytest.raises(LoopDetectedError):
        read_file(**ARGS)
    assert guard.strikes == [(S, None)]


async def test_async_recover_uses_the_async_strike() -> None:
    guard = StrikeGuard(CONFIG)

    @guard.tool(session_key=S, name=TOOL, on_critical="recover")
    async def read_file(path: str) -> str:
        return RESULT

    for _ in range(12):
        await read_file(**ARGS)
    with pytest.raises(LoopDetectedError):
        await read_file(**ARGS)
    assert guard.strikes == [(S, None)]


def test_recover_is_a_valid_option_and_its_message_a_constant() -> None:
    assert AdapterOptions(on_critical="recover").on_critical == "recover"
    with pytest.raises(ValueError, match="recover"):
        AdapterOptions(on_critical="retry")  # type: ignore[arg-type]
    assert "{reason}" in RECOVERY_MESSAGE


# --- batch admission --------------------------------------------------------------------------


def _turn(guard: LoopGuard, n: int, **kw: Any) -> list[ToolCall]:
    return [
        ToolCall(guard, TOOL, dict(ARGS), session_key=S, tool_call_id=f"c{i}", **kw)
        for i in range(n)
    ]


def test_a_turn_is_admitted_once_and_its_calls_take_their_decisions() -> None:
    guard = BatchGuard(CONFIG)
    admissions = Admissions()
    assert admissions.admit(guard, _turn(guard, 5))
    assert [len(b) for b in guard.batches] == [5]
    runs = Runs()
    for tc in _turn(guard, 5):
        shown = guarded_call(admissions.take(tc), lambda: runs(""), TextTranslator())
        assert shown == BATCH_BLOCKED
    assert runs.count == 0


def test_a_blocked_turn_is_one_strike_under_recover() -> None:
    guard = BatchGuard(CONFIG)
    admissions = Admissions()
    options = AdapterOptions(on_critical="recover")
    admissions.admit(guard, _turn(guard, 5, options=options))
    shown = [
        guarded_call(admissions.take(tc), lambda: RESULT, TextTranslator())
        for tc in _turn(guard, 5, options=options)
    ]
    assert shown == [recovery_message(BATCH_BLOCKED)] * 5
    # The next blocked turn is the run's second strike: it ends the run.
    admissions.admit(guard, _turn(guard, 5, options=options))
    with pytest.raises(LoopDetectedError):
        guarded_call(
            admissions.take(_turn(guard, 1, options=options)[0]), lambda: RESULT, TextTranslator()
        )


class _NoBatch:
    """A guard of an older loopwatch: no ``before_batch``."""

    def __init__(self, guard: LoopGuard) -> None:
        self._guard = guard

    def __getattr__(self, name: str) -> Any:
        if name in ("before_batch", "abefore_batch"):
            raise AttributeError(name)
        return getattr(self._guard, name)


def test_without_before_batch_each_call_is_decided_alone() -> None:
    guard: Any = _NoBatch(LoopGuard(CONFIG))
    admissions = Admissions()
    assert not admissions.admit(guard, _turn(guard, 5))
    runs = Runs()
    for tc in _turn(guard, 5):
        guarded_call(admissions.take(tc), lambda: runs(""), TextTranslator())
    assert runs.count == 5
    assert len(guard.history(session_key=S)) == 5


def test_a_single_call_or_calls_without_ids_are_not_a_batch() -> None:
    guard = BatchGuard(CONFIG)
    admissions = Admissions()
    assert not admissions.admit(guard, _turn(guard, 1))
    no_ids = [ToolCall(guard, TOOL, dict(ARGS), session_key=S) for _ in range(3)]
    assert not admissions.admit(guard, no_ids)
    assert guard.batches == []


def test_async_admission() -> None:
    guard = BatchGuard(CONFIG)
    admissions = Admissions()
    assert asyncio.run(admissions.aadmit(guard, _turn(guard, 3)))
    assert [len(b) for b in guard.batches] == [3]


class BrokenBatchGuard(LoopGuard):
    def before_batch(self, calls: Any, **kw: Any) -> Any:
        raise RuntimeError("store down")


def test_a_failing_before_batch_falls_back_to_single_calls(caplog: Any) -> None:
    guard = BrokenBatchGuard(CONFIG)
    admissions = Admissions()
    assert not admissions.admit(guard, _turn(guard, 3))
    assert "before_batch failed" in caplog.text


# --- no import cycle --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "module",
    [
        "adapter.py",
        "calls.py",
        "integrations/_shared.py",
        "integrations/_guarded.py",
        "integrations/_sessions.py",
    ],
)
def test_the_adapter_layer_never_imports_the_guard(module: str) -> None:
    tree = ast.parse((SRC / module).read_text(encoding="utf-8"))
    imported = {
        node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module
    } | {a.name for node in ast.walk(tree) if isinstance(node, ast.Import) for a in node.names}
    assert not any(
        name == "loopwatch.guard" or name.startswith("loopwatch.guard.") for name in imported
    )
    assert not any(
        isinstance(node, ast.ImportFrom)
        and node.module == "loopwatch"
        and any(a.name == "guard" for a in node.names)
        for node in ast.walk(tree)
    )


def test_a_failing_tool_reads_its_warning_through_guard_call_not_guard_tool() -> None:
    # What the README says of a failing tool in a hand-written loop: guard.tool raises the
    # exception on unchanged (no warning in it); guard.call gives the warning to append.
    guard = LoopGuard(CONFIG)
    failure = RuntimeError("disk on fire")

    @guard.tool(session_key="tool", name=TOOL)
    def read_file(path: str) -> str:
        raise failure

    raised = []
    for _ in range(11):
        with pytest.raises(RuntimeError) as info:
            read_file(**ARGS)
        raised.append(info.value)
    assert all(exc is failure for exc in raised)
    assert str(raised[-1]) == "disk on fire"

    warnings = []
    for i in range(11):
        with guard.call(TOOL, ARGS, session_key="call", tool_call_id=f"c-{i}") as c:
            c.error(failure)
        assert c.shown is None
        warnings.append(c.warning)
    assert warnings[:10] == [None] * 10
    assert warnings[10] is not None and warnings[10].startswith("WARNING: You have called")
