"""One tool call under a guard: decide, (run), record, show (SPEC §5.2, §11).

:class:`ToolCall` is what every adapter drives around one tool call, and what a
hand-written agent loop uses directly through :func:`call` (``with guard.call(...) as
c:``), modelled on tenacity's ``AttemptManager``: the ``with`` block is one attempt at the
tool, ``c.result(value)`` reports what the model will be shown, and everything is recorded
when the block exits::

    with guard.call("read_file", args, session_key=thread_id, tool_call_id=call_id) as c:
        if not c.blocked:
            c.result(read_file(**args))
    messages.append({"role": "tool", "tool_call_id": call_id, "content": c.shown})

The rules that must not drift between adapters live here: the original result is recorded
first and an emitted warning appended after (SPEC §11.2); a blocked call is not run, its
blocked result is passed to ``after_call`` (a no-op by the veto rule), and
``on_critical`` applies (SPEC §11.4); a call already guarded by an outer layer on the same
guard and session passes through (issue 16).
"""

from __future__ import annotations

import contextlib
import contextvars
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from types import TracebackType
from typing import TYPE_CHECKING, Any, Final, Literal, TypeVar

from loopwatch.core._undefined import UNDEFINED
from loopwatch.detectors.reference import NOT_STUCK, LoopVerdict
from loopwatch.errors import LoopDetectedError
from loopwatch.host_outcome import as_outcome
from loopwatch.integrations._shared import (
    DEFAULT_OPTIONS,
    AdapterOptions,
    DecisionLike,
    GuardLike,
    OnCritical,
    Outcome,
    WarnedAnswers,
    acritical_strike,
    append_warning,
    claim_guarded,
    collect_warned,
    critical_strike,
    enter_guarding,
    guarding,
    leave_guarding,
    recovery_message,
    stop_collecting,
    unwarned,
)
from loopwatch.messages import BLOCKED_CALL_RAN, NO_OUTCOME_REPORTED

if TYPE_CHECKING:
    from typing_extensions import Self

    from loopwatch.core.records import ToolCallRecord

_V = TypeVar("_V")


@dataclass(frozen=True, slots=True)
class PassThrough:
    """The decision of a call an outer layer already guards: allow, nothing emitted."""

    action: str = "allow"
    verdict: LoopVerdict = NOT_STUCK
    emitted: bool = False
    tool_result: dict[str, Any] | None = None
    enforced: bool = True


PASS_THROUGH: Final = PassThrough()


class Batch:
    """The calls of one assistant turn admitted together (``guard.before_batch``).

    Under ``on_critical="recover"`` one turn is one strike, however many of its calls the
    batch blocked: the first blocked call takes the strike, the others share its number.
    """

    __slots__ = ("_claimed", "_lock", "strike")

    def __init__(self) -> None:
        self.strike: int | None = None
        self._claimed = False
        self._lock = threading.Lock()

    def claim(self) -> bool:
        """True for the one call that takes the turn's strike (calls may run in threads)."""
        with self._lock:
            first, self._claimed = not self._claimed, True
            return first


_State = Literal["new", "started", "reported", "done"]


class ToolCall:
    """One tool call under a :class:`LoopGuard`: decide, (run), record, show.

    Used directly by adapters (``start`` / ``finish`` and their async twins) and, as a
    context manager, by hand-written agent loops (see :func:`call`). The life cycle is
    fixed: ``start`` once, then, unless the call was blocked, report one outcome with
    :meth:`result` or :meth:`error`, then ``finish`` once. After ``finish`` (or a block),
    :attr:`shown` is what to give the model.

    Args:
        guard: the guard deciding on the call.
        tool_name: the tool's name as the model called it.
        params: the call's arguments as the model sent them.
        session_key: the conversation (SPEC §5.1); ``None`` skips the guard.
        run_id: the agent run, scoping detection and the post-compaction guard.
        tool_call_id: the framework's id of this call, matching outcome to call.
        agent_id: the agent, for per-agent config blocks (``openclaw_config``).
        options: :class:`AdapterOptions`.
    """

    __slots__ = (
        "_any_tool",
        "_batch",
        "_block_message",
        "_decision",
        "_guard",
        "_ids",
        "_outcome",
        "_passthrough",
        "_preset",
        "_record",
        "_scope",
        "_seen",
        "_shown",
        "_state",
        "_warned_scope",
        "options",
        "params",
        "tool_name",
    )

    def __init__(
        self,
        guard: GuardLike,
        tool_name: str,
        params: object,
        *,
        session_key: object,
        run_id: object = None,
        tool_call_id: object = None,
        agent_id: object = None,
        options: AdapterOptions = DEFAULT_OPTIONS,
        pass_through_any: bool = False,
    ) -> None:
        self._guard = guard
        # A guard.tool function or guard.call block passes through the call of an outer
        # layer on its guard and session whatever the tool is called there; a framework
        # adapter's call, only that of the same tool (else it is a sub-agent's own call).
        self._any_tool = pass_through_any
        self.tool_name = tool_name
        self.params = params
        self.options = options
        self._ids: dict[str, object] = {
            "session_key": session_key,
            "run_id": run_id,
            "tool_call_id": tool_call_id,
            "agent_id": agent_id,
        }
        self._state: _State = "new"
        self._decision: DecisionLike | None = None
        self._preset: DecisionLike | None = None
        self._batch: Batch | None = None
        self._passthrough = False
        self._block_message: str | None = None
        self._scope: contextvars.Token[Any] | None = None
        # What inner layers of another guard warned while the tool ran (see scope()).
        self._seen: WarnedAnswers = {}
        self._warned_scope: contextvars.Token[Any] | None = None
        self._outcome: Outcome | None = None
        self._record: ToolCallRecord | None = None
        self._shown: object = None

    # --- state -----------------------------------------------------------------------

    @property
    def decision(self) -> DecisionLike:
        """The guard's decision; available once the call has started."""
        if self._decision is None:
            raise RuntimeError(f"the call of {self.tool_name!r} has not started")
        return self._decision

    @property
    def blocked(self) -> bool:
        """True when the host must not run the tool (an enforced critical loop)."""
        return self.decision.tool_result is not None

    @property
    def message(self) -> str | None:
        """The blocked message to give the model instead of running the tool, or ``None``."""
        decision = self.decision
        if decision.tool_result is None:
            return None
        return self._block_message or decision.verdict.message

    @property
    def passthrough(self) -> bool:
        """True when an outer layer already guards this call (same guard and session, the
        first such call inside it): this one neither decides nor records, and shows the
        outcome unchanged."""
        return self._passthrough

    @property
    def session_key(self) -> object:
        """The call's session key."""
        return self._ids["session_key"]

    @property
    def run_id(self) -> object:
        """The call's run id."""
        return self._ids["run_id"]

    @property
    def agent_id(self) -> object:
        """The call's agent id."""
        return self._ids["agent_id"]

    @property
    def tool_call_id(self) -> object:
        """The framework's id of the call."""
        return self._ids["tool_call_id"]

    def admit(self, decision: DecisionLike, batch: Batch | None = None) -> None:
        """Use a decision already taken for this call (``guard.before_batch``): ``start``
        then records and shows it without asking the guard again."""
        if self._state != "new":
            raise RuntimeError(f"the call of {self.tool_name!r} was already started")
        self._preset, self._batch = decision, batch

    @property
    def warning(self) -> str | None:
        """The warning to append to what the model sees, or ``None``.

        Set only for an *emitted* warning (SPEC §5.3) with ``warn_model`` on. A would-be
        block in shadow mode is never shown: shadow mode must not change the run.
        """
        decision = self.decision
        if self._passthrough:
            return None
        if self.options.warn_model and decision.action == "warn" and decision.emitted:
            return decision.verdict.message
        return None

    @property
    def record(self) -> ToolCallRecord | None:
        """The history record ``after_call`` returned (``None`` when nothing was recorded)."""
        return self._record

    @property
    def shown(self) -> object:
        """What to give the model, once the call is finished (or blocked).

        The blocked message; or the reported result with an emitted warning appended
        (:func:`append_warning`); or, for a reported error, the error when it is text
        (with the warning appended) and ``None`` when it is an exception: render it as you
        always do and append :attr:`warning` yourself.
        """
        if self._state != "done":
            raise RuntimeError(f"the call of {self.tool_name!r} is not finished")
        return self._shown

    def _report(self, outcome: Outcome) -> None:
        if self._state == "new":
            raise RuntimeError(f"the call of {self.tool_name!r} has not started")
        if self.blocked:
            raise RuntimeError(BLOCKED_CALL_RAN.format(tool=self.tool_name))
        if self._state != "started":
            raise RuntimeError(f"an outcome of {self.tool_name!r} was already reported")
        if self._seen:
            # An inner layer of another guard (a shadow guard inside, a guard.tool function
            # of another guard) appended its warning: record what the tool answered.
            outcome = Outcome(
                result=unwarned(outcome.result, self._seen),
                error=unwarned(outcome.error, self._seen),
            )
        self._outcome = outcome
        self._state = "reported"

    def result(self, value: object) -> None:
        """Report the call's result: exactly what the model is shown (SPEC §11.1).

        A tool that returns nothing is reported as what the model sees for it (``""``,
        ``None``), never as ``UNDEFINED``, which would record no outcome at all.
        """
        self._report(Outcome(result=value))

    def error(self, error: object) -> None:
        """Report that the call failed: the exception, or the error text the model sees."""
        if error is UNDEFINED:
            raise ValueError("UNDEFINED means 'no error'; report a result instead")
        self._report(Outcome(error=error))

    def outcome(self, outcome: Outcome) -> None:
        """Report an :class:`Outcome` (the form adapters use)."""
        if (outcome.result is UNDEFINED) == (outcome.error is UNDEFINED):
            raise ValueError("an outcome has exactly one of result and error")
        self._report(outcome)

    # --- life cycle: the sync and async twins share everything but the I/O -------------

    def _begin(self) -> DecisionLike | None:
        """Check the state; the decision already known (pass-through or admitted), if any."""
        if self._state != "new":
            raise RuntimeError(f"the call of {self.tool_name!r} was already started")
        if claim_guarded(
            self._guard, self._ids["session_key"], self.tool_name, any_tool=self._any_tool
        ):
            self._passthrough = True
            return PASS_THROUGH
        return self._preset

    def _started(self, decision: DecisionLike) -> bool:
        """Store the decision; True when the blocked result must be recorded."""
        self._decision = decision
        self._state = "started"
        return decision.tool_result is not None and not self._passthrough

    def _needs_strike(self) -> bool:
        """True when this block must record a critical strike (``"recover"``): once per
        call, or once per admitted turn."""
        if self.options.on_critical != "recover":
            return False
        return self._batch is None or self._batch.claim()

    def _after_block(self, strike: int | None) -> None:
        """Apply ``on_critical`` to an enforced block (SPEC §11.4, issue 15's recovery)."""
        self._state = "done"
        mode = self.options.on_critical
        if mode == "recover":
            if self._batch is not None:
                # One assistant turn is one strike, however many of its calls it blocks:
                # the claimant records it, the others share its number (or, still being
                # recorded by a concurrent call, count as a first strike).
                if strike is not None:
                    self._batch.strike = strike
                strike = self._batch.strike or 1
            if strike is not None and strike >= 2:
                self._shown = self.message
                raise LoopDetectedError(self.decision.verdict)
            self._block_message = recovery_message(self.decision.verdict.message)
        self._shown = self.message
        if mode == "end_run":
            raise LoopDetectedError(self.decision.verdict)

    def _pending_outcome(self) -> Outcome:
        if self._state == "done":
            raise RuntimeError(f"the call of {self.tool_name!r} is already finished")
        if self._state != "reported" or self._outcome is None:
            raise RuntimeError(NO_OUTCOME_REPORTED.format(tool=self.tool_name))
        return self._outcome

    def _finished(self, outcome: Outcome, record: ToolCallRecord | None) -> object:
        self._record = record
        self._state = "done"
        if outcome.error is UNDEFINED:
            shown = outcome.result
        elif isinstance(outcome.error, (str, list, tuple)):
            shown = outcome.error
        else:
            # An exception: only the host knows how it renders it for the model.
            self._shown = None
            return None
        warning = self.warning
        self._shown = shown if warning is None else append_warning(shown, warning)
        return self._shown

    def start(self) -> DecisionLike:
        """Ask the guard about the call (SPEC §5.2).

        A blocked call is recorded right away with its blocked result (a no-op by the veto
        rule, as in the reference), so :attr:`shown` is ready.

        Raises:
            LoopDetectedError: the call is blocked and ``on_critical="end_run"``.
        """
        decision = self._begin() or self._guard.before_call(
            self.tool_name, self.params, **self._ids
        )
        if self._started(decision):
            self._guard.after_call(
                self.tool_name, self.params, result=decision.tool_result, **self._ids
            )
            strike = None
            if self._needs_strike():
                strike = critical_strike(
                    self._guard, session_key=self.session_key, run_id=self.run_id
                )
            self._after_block(strike)
        return decision

    async def astart(self) -> DecisionLike:
        """Async twin of :meth:`start`."""
        decision = self._begin() or await self._guard.abefore_call(
            self.tool_name, self.params, **self._ids
        )
        if self._started(decision):
            await self._guard.aafter_call(
                self.tool_name, self.params, result=decision.tool_result, **self._ids
            )
            strike = None
            if self._needs_strike():
                strike = await acritical_strike(
                    self._guard, session_key=self.session_key, run_id=self.run_id
                )
            self._after_block(strike)
        return decision

    def finish(self) -> object:
        """Record the reported outcome, then compute what the model is shown (SPEC §11.2).

        Returns:
            :attr:`shown`.

        Raises:
            PostCompactionLoopPersistedError: the loop survived a compaction; end the run.
        """
        outcome = self._pending_outcome()
        record = None
        if not self._passthrough:
            record = self._guard.after_call(
                self.tool_name,
                self.params,
                result=as_outcome(outcome.result),
                error=outcome.error,
                **self._ids,
            )
        return self._finished(outcome, record)

    async def afinish(self) -> object:
        """Async twin of :meth:`finish`."""
        outcome = self._pending_outcome()
        record = None
        if not self._passthrough:
            record = await self._guard.aafter_call(
                self.tool_name,
                self.params,
                result=as_outcome(outcome.result),
                error=outcome.error,
                **self._ids,
            )
        return self._finished(outcome, record)

    # --- the ``with`` face --------------------------------------------------------------

    def _exit_plan(self, exc: BaseException | None) -> bool:
        """True when ``__exit__`` must record an outcome."""
        if self._state == "done":
            return False
        if exc is not None:
            if not isinstance(exc, Exception):
                # Cancellation and interpreter exits say nothing about the tool: the call
                # stays pending, as a call whose outcome never arrived.
                return False
            if self._state == "started":
                self.error(exc)
        return True

    @contextlib.contextmanager
    def scope(self) -> Iterator[None]:
        """While the tool runs: inner layers on the same guard and session pass through,
        and the answers inner layers of another guard warn are noted, so the outcome
        reported is recorded without their warnings."""
        token = collect_warned(self._seen)
        try:
            with guarding(self._guard, self._ids["session_key"], self.tool_name):
                yield
        finally:
            stop_collecting(token)

    def inner_original(self, value: _V) -> _V:
        """``value`` (the tool's answer, or its error) as it was before an inner layer of
        another guard appended its warning, while or after the tool ran in :meth:`scope`."""
        return unwarned(value, self._seen)

    def _enter_scope(self) -> None:
        if self._state == "started" and not self.blocked:
            self._scope = enter_guarding(self._guard, self._ids["session_key"], self.tool_name)
            self._warned_scope = collect_warned(self._seen)

    def _leave_scope(self) -> None:
        if self._warned_scope is not None:
            stop_collecting(self._warned_scope)
            self._warned_scope = None
        if self._scope is not None:
            leave_guarding(self._scope)
            self._scope = None

    def __enter__(self) -> Self:
        self.start()
        self._enter_scope()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._leave_scope()
        if self._exit_plan(exc):
            self.finish()

    async def __aenter__(self) -> Self:
        await self.astart()
        self._enter_scope()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._leave_scope()
        if self._exit_plan(exc):
            await self.afinish()

    def __repr__(self) -> str:
        return f"<ToolCall {self.tool_name!r} {self._state}>"


def call(
    guard: GuardLike,
    tool_name: str,
    params: object,
    *,
    session_key: object,
    run_id: object = None,
    tool_call_id: object = None,
    agent_id: object = None,
    warn_model: bool = True,
    on_critical: OnCritical = "block_call",
) -> ToolCall:
    """Guard one tool call of a hand-written agent loop, as a ``with`` block.

    ::

        with guard.call("read_file", args, session_key=thread_id, tool_call_id=call.id) as c:
            if not c.blocked:
                c.result(read_file(**args))    # what the model is shown
        reply = c.shown                         # the result (+ warning) or the blocked message

    Entering asks the guard (``before_call``); a blocked call is recorded at once and
    ``c.shown`` holds its message. Leaving records the reported outcome (``after_call``)
    and computes ``c.shown``. An exception escaping the block is recorded as the call's
    error and propagates. ``async with`` works the same way with the async twins.

    Args:
        guard: the guard.
        tool_name: the tool's name as the model called it.
        params: the arguments as the model sent them.
        session_key: the conversation; ``None`` skips the guard (SPEC §5.1).
        run_id: the agent run.
        tool_call_id: the model's id for this call.
        agent_id: the agent, for ``openclaw_config`` per-agent blocks.
        warn_model: append an emitted warning to ``c.shown``.
        on_critical: ``"block_call"``, ``"end_run"`` (entering raises
            :class:`LoopDetectedError`; the block never runs) or ``"recover"`` (the first
            critical of the run shows a recovery message, the second raises).

    Returns:
        A :class:`ToolCall`, not yet started.

    Raises:
        LoopDetectedError: on entering, for a block under ``on_critical="end_run"``.
        PostCompactionLoopPersistedError: on leaving, when the loop survived a compaction.
        RuntimeError: on leaving, when no outcome was reported for a call that ran.
    """
    return ToolCall(
        guard,
        tool_name,
        params,
        session_key=session_key,
        run_id=run_id,
        tool_call_id=tool_call_id,
        agent_id=agent_id,
        options=AdapterOptions(warn_model=warn_model, on_critical=on_critical),
        pass_through_any=True,
    )


__all__ = ["PASS_THROUGH", "Batch", "PassThrough", "ToolCall", "call"]
