"""Batch admission (issue 16): a whole assistant turn of tool calls decided at once.

``LoopGuard.before_batch`` and its async twin are these functions. Each call of the turn
is judged against the run's history as it would be after the calls before it (OpenClaw
2026.8 admits a batch atomically): identical calls in one turn count as the repeats they
are, and one critical blocks the turn before anything runs or is recorded.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from loopwatch import messages
from loopwatch.core.records import ToolCallRecord
from loopwatch.detectors.reference import LoopVerdict, RunHistory
from loopwatch.errors import StoreError
from loopwatch.guard import _policy
from loopwatch.guard._ops import BeginCall, Steps, adrive, drive
from loopwatch.guard._planning import BeforePlan, plan_before
from loopwatch.guard._verdicts import blocked, conclude, warn_step

if TYPE_CHECKING:
    from loopwatch.guard.decision import Decision
    from loopwatch.guard.loopguard import BatchCall, LoopGuard


def batch_steps(guard: LoopGuard, plans: list[BeforePlan]) -> Steps[list[tuple[LoopVerdict, bool]]]:
    """Decide a batch against the history as it would be after its calls.

    Each call is judged against the run's records plus the batch's earlier calls,
    projected with the latest outcome already known for the same call signature (an
    identical call repeats its outcome until it shows otherwise). A critical anywhere
    blocks the whole batch before anything is recorded; otherwise every call is
    recorded, in order, as ``before_call`` would have.
    """
    first = plans[0]
    scoped = yield BeginCall(
        first.session_key, first.call.run_id, None, first.resolved.history_size, first.now
    )
    source = scoped.fields() if isinstance(scoped, RunHistory) else scoped
    projected: list[Any] = list(source)
    verdicts: list[LoopVerdict] = []
    for plan in plans:
        verdict = guard.detector_profile.detect(projected, plan.call, plan.resolved)
        verdicts.append(verdict)
        if verdict.level == "critical" and guard.enforce:
            # The whole batch is refused before anything runs or is recorded.
            return [(v, False) for v in verdicts]
        projected.append(projected_record(projected, plan))
    results: list[tuple[LoopVerdict, bool]] = []
    for plan, verdict in zip(plans, verdicts, strict=True):
        yield BeginCall(
            plan.session_key,
            plan.call.run_id,
            plan.pending,
            plan.resolved.history_size,
            plan.now,
        )
        emitted = False
        if verdict.stuck and verdict.level != "critical":
            emitted = yield warn_step(guard, plan, verdict)
        results.append((verdict, emitted))
    return results


def conclude_batch(
    guard: LoopGuard,
    plans: list[BeforePlan],
    found: list[tuple[LoopVerdict, bool]],
    ids: list[object],
    agent_id: object,
) -> list[Decision]:
    critical = next((v for v, _ in found if v.level == "critical"), None)
    if critical is None or not guard.enforce:
        return [
            guard._start(plan, call_id, agent_id, conclude(guard, plan, verdict, emitted))
            for call_id, plan, (verdict, emitted) in zip(ids, plans, found, strict=True)
        ]
    sibling = replace(critical, message=messages.BATCH_SIBLING_BLOCKED)
    decisions = []
    for index, plan in enumerate(plans):
        if index == len(found) - 1:  # the call whose verdict is the critical one
            decision = conclude(guard, plan, critical, True)
        else:
            decision = blocked(guard, plan, sibling, messages.BATCH_SIBLING_BLOCKED)
        decisions.append(guard._start(plan, ids[index], agent_id, decision))
    return decisions


def batch_plans(
    guard: LoopGuard, calls: Sequence[BatchCall], key: str, run_id: object, agent_id: object
) -> list[BeforePlan]:
    return [
        plan_before(guard, guard._tool_name(tool), params, key, run_id, call_id, agent_id)
        for tool, params, call_id in calls
    ]


def read_calls(guard: LoopGuard, calls: object) -> tuple[list[BatchCall], list[Decision] | None]:
    """The calls of a batch as ``(tool_name, params, tool_call_id)`` tuples.

    A batch that cannot be read that way (``None``, a call that is not a triple, an
    iterator that raises) is the host's mistake: it is answered by the failure policy,
    like any value that cannot be hashed, so ``before_batch`` never raises.

    Returns:
        ``(calls, None)``, or ``([], decisions)`` for a batch that cannot be read: an
        allowed call for each of its items (none when it cannot even be listed).
    """
    try:
        items = list(calls)  # type: ignore[call-overload]
    except Exception as exc:
        return [], unreadable_batch(guard, exc, 0)
    try:
        return [_triple(item) for item in items], None
    except Exception as exc:
        return [], unreadable_batch(guard, exc, len(items))


def _triple(item: Any) -> BatchCall:
    tool: object
    params: object
    call_id: object
    tool, params, call_id = item
    return tool, params, call_id


def unreadable_batch(guard: LoopGuard, exc: Exception, count: int) -> list[Decision]:
    decision = _policy.detection_failed(guard, "tool", exc)
    return [decision] * count


def before_batch(
    guard: LoopGuard,
    calls: Sequence[BatchCall],
    *,
    session_key: object,
    run_id: object = None,
    agent_id: object = None,
) -> list[Decision]:
    """Decide a whole assistant turn of tool calls at once; never raises.

    ``calls`` are ``(tool_name, params, tool_call_id)`` tuples in the model's order.
    Identical calls in one batch count as the repeats they are, and one critical blocks
    the batch (as OpenClaw 2026.8 admits a batch atomically): every call then gets a
    ``tool_result``, the critical one its verdict's message, its siblings a note that
    they were not run. A batch of one is exactly :meth:`before_call`.

    Returns:
        One :class:`Decision` per call, in order.
    """
    listed, unreadable = read_calls(guard, calls)
    if unreadable is not None:
        return unreadable
    if len(listed) == 1:
        tool, params, call_id = listed[0]
        return [
            guard.before_call(
                tool,
                params,
                session_key=session_key,
                run_id=run_id,
                tool_call_id=call_id,
                agent_id=agent_id,
            )
        ]
    key = guard._accepts(session_key)
    if key is None or not listed:
        return [guard._allow] * len(listed)
    try:
        plans = batch_plans(guard, listed, key, run_id, agent_id)
        found = drive(guard._store, key, batch_steps(guard, plans))
        return conclude_batch(guard, plans, found, [c[2] for c in listed], agent_id)
    except StoreError as exc:
        decision = _policy.store_failed_before(guard, key, "tool", exc)
        return [decision] * len(listed)
    except Exception as exc:
        decision = _policy.detection_failed(guard, "tool", exc)
        return [decision] * len(listed)


async def abefore_batch(
    guard: LoopGuard,
    calls: Sequence[BatchCall],
    *,
    session_key: object,
    run_id: object = None,
    agent_id: object = None,
) -> list[Decision]:
    """Async twin of :meth:`before_batch`."""
    listed, unreadable = read_calls(guard, calls)
    if unreadable is not None:
        return unreadable
    if len(listed) == 1:
        tool, params, call_id = listed[0]
        return [
            await guard.abefore_call(
                tool,
                params,
                session_key=session_key,
                run_id=run_id,
                tool_call_id=call_id,
                agent_id=agent_id,
            )
        ]
    key = guard._accepts(session_key)
    if key is None or not listed:
        return [guard._allow] * len(listed)
    try:
        plans = batch_plans(guard, listed, key, run_id, agent_id)
        found = await adrive(guard._store, key, batch_steps(guard, plans))
        return conclude_batch(guard, plans, found, [c[2] for c in listed], agent_id)
    except StoreError as exc:
        decision = _policy.store_failed_before(guard, key, "tool", exc)
        return [decision] * len(listed)
    except Exception as exc:
        decision = _policy.detection_failed(guard, "tool", exc)
        return [decision] * len(listed)


def projected_record(records: Sequence[Any], plan: BeforePlan) -> ToolCallRecord:
    """A batch call as the history would hold it: its outcome is the latest known outcome
    of the same call signature (``None`` when there is none yet)."""
    call = plan.call
    result_hash: str | None = None
    unknown: str | None = None
    for record in reversed(records):
        if record.tool_name == call.tool_name and record.args_hash == call.args_hash:
            result_hash = record.result_hash
            unknown = record.unknown_tool_name
            break
    facts = plan.pending.facts if plan.pending is not None else None
    return ToolCallRecord(
        call.tool_name,
        call.args_hash,
        plan.call_id,
        call.run_id,
        result_hash,
        unknown,
        int(plan.now * 1000),
        facts,
    )


__all__ = ["abefore_batch", "before_batch", "projected_record"]
