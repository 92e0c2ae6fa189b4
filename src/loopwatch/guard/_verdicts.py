"""From a verdict to the host's :class:`Decision`: logs, events and the store follow-up.

A healthy call (:data:`~loopwatch.detectors.reference.NOT_STUCK`) gets the guard's shared
allow decision and nothing else. A warning bumps its bucket in the store
(:func:`warn_step`) and is logged and announced only when the bucket grew; a critical is
logged, announced and, when enforced, cancelled in the store and answered with the
blocked tool result. Both drivers (the sync ``before_call`` and the generator steps for
asynchronous stores) and the batch driver share these functions.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from loopwatch import messages
from loopwatch.core.naming import plain_str
from loopwatch.detectors.reference import LoopVerdict
from loopwatch.guard._ops import BeginCall, CancelCall, Steps, UpdateBucket
from loopwatch.guard._planning import BeforePlan
from loopwatch.guard.decision import Decision, blocked_result

if TYPE_CHECKING:
    from loopwatch.guard.loopguard import LoopGuard

tools_logger = logging.getLogger("loopwatch.tools")
diagnostics_logger = logging.getLogger("loopwatch.diagnostics")


def bucket_key(plan: BeforePlan, verdict: LoopVerdict) -> str:
    """The warning bucket of a verdict: its own key, else detector and tool, per run."""
    base = verdict.warning_key or f"{verdict.detector}:{plan.call.tool_name}"
    raw = plan.run_id_raw
    if not isinstance(raw, str):
        return base
    raw = plain_str(raw)  # (a str subclass is read as its characters: its methods may raise)
    return f"{raw}:{base}" if raw else base


def announce(guard: LoopGuard, plan: BeforePlan, verdict: LoopVerdict, action: str) -> None:
    """The diagnostic line and the ``tool.loop`` event of a block or emitted warning."""
    from loopwatch.events import ToolLoopEvent

    level = verdict.level or "warning"
    paired = (
        messages.LOG_DIAGNOSTIC_PAIRED.format(paired_tool=verdict.paired_tool_name)
        if verdict.paired_tool_name is not None
        else ""
    )
    tool = plan.call.tool_name
    diagnostics_logger.debug(
        messages.LOG_DIAGNOSTIC.format(
            session_key=plan.session_key,
            tool=tool,
            level=level,
            action=action,
            detector=verdict.detector,
            count=verdict.count,
            paired=paired,
            message=verdict.message,
        )
    )
    guard._emit(
        ToolLoopEvent(
            session_key=plan.session_key,
            tool_name=tool,
            level=level,
            action=action,
            detector=verdict.detector,
            count=verdict.count,
            message=verdict.message,
            paired_tool_name=verdict.paired_tool_name,
            indices=verdict.indices,
            explanation=verdict.explanation,
        )
    )


def blocked(guard: LoopGuard, plan: BeforePlan, verdict: LoopVerdict, message: str) -> Decision:
    """The enforced block: its ``tool.blocked`` event, and the result that replaces the tool's."""
    from loopwatch.events import ToolExecutionBlockedEvent, params_summary

    raw_run = plan.run_id_raw
    if isinstance(raw_run, str):
        raw_run = plain_str(raw_run)
    guard._emit(
        ToolExecutionBlockedEvent(
            session_key=plan.session_key,
            tool_name=plan.call.tool_name,
            params_summary=params_summary(plan.params),
            reason=message,
            run_id=raw_run if isinstance(raw_run, str) and raw_run else None,
            tool_call_id=plan.call_id or None,
        )
    )
    return Decision("block", verdict, True, blocked_result(message), True)


def conclude(guard: LoopGuard, plan: BeforePlan, verdict: LoopVerdict, emitted: bool) -> Decision:
    """The decision on a detected verdict (``emitted``: its warning bucket grew)."""
    tool = plan.call.tool_name
    if verdict.level == "critical":
        message = verdict.message or ""
        tools_logger.error(messages.LOG_BLOCKING.format(tool=tool, message=message))
        announce(guard, plan, verdict, "block")
        if not guard.enforce:
            return Decision("block", verdict, True, None, False)
        return blocked(guard, plan, verdict, message)
    if verdict.stuck:
        if emitted:
            tools_logger.warning(
                messages.LOG_LOOP_WARNING.format(tool=tool, message=verdict.message)
            )
            announce(guard, plan, verdict, "warn")
        return Decision("warn", verdict, emitted, None, guard.enforce)
    return guard._allow


def warn_step(guard: LoopGuard, plan: BeforePlan, verdict: LoopVerdict) -> UpdateBucket:
    """The store write of a warning: its bucket raised to the verdict's (SPEC §5.3)."""
    bucket = guard.detector_profile.warning_bucket(verdict, guard.first_warning)
    return UpdateBucket(plan.session_key, bucket_key(plan, verdict), bucket, plan.now)


def follow_up(
    guard: LoopGuard, plan: BeforePlan, verdict: LoopVerdict
) -> CancelCall | UpdateBucket | None:
    """The store write a verdict needs after detection, if any (both drivers use it)."""
    if verdict.level == "critical":
        if guard.enforce and plan.pending is not None:
            # Blocked calls are not recorded (the reference's sticky block).
            return CancelCall(plan.session_key, plan.pending, plan.now)
        return None
    if verdict.stuck:
        return warn_step(guard, plan, verdict)
    return None


def run_follow_up(guard: LoopGuard, plan: BeforePlan, verdict: LoopVerdict) -> bool:
    """Run the store write a detected verdict needs (:func:`follow_up`), under the
    session lock right after detection; ``True`` when its warning bucket grew.

    ``LoopGuard.before_call`` is :func:`before_steps` without the generator:
    ``BeginCall.run`` inlined, detection, then this, which a healthy call
    (:data:`~loopwatch.detectors.reference.NOT_STUCK`) skips.
    """
    follow = follow_up(guard, plan, verdict)
    if follow is None:
        return False
    store = guard.store
    if isinstance(follow, CancelCall):
        follow.run(store)
        return False
    return follow.run(store)


def before_steps(guard: LoopGuard, plan: BeforePlan) -> Steps[tuple[LoopVerdict, bool]]:
    """``before_call``'s detection step for stores with real asynchronous I/O (driven by
    ``adrive``): the verdict, and whether its warning bucket grew."""
    call = plan.call
    scoped = yield BeginCall(
        plan.session_key, call.run_id, plan.pending, plan.resolved.history_size, plan.now
    )
    verdict = guard.detector_profile.detect(scoped, call, plan.resolved)
    follow = follow_up(guard, plan, verdict)
    if follow is None:
        return verdict, False
    reply = yield follow
    return verdict, False if isinstance(follow, CancelCall) else reply


__all__ = [
    "announce",
    "before_steps",
    "blocked",
    "bucket_key",
    "conclude",
    "follow_up",
    "run_follow_up",
    "warn_step",
]
