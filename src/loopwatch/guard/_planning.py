"""What a guarded call derives from its inputs before it touches the store.

``before_call`` hashes the args, normalises the ids, reads the config and builds the
pending record (:func:`plan_before`); ``after_call`` hashes the outcome and builds the
store write (:func:`plan_after`), reusing the ``before_call`` plan when it can prove the
inputs are the same. Both run outside any lock, and both are pure of the store: the
guard's drivers (``loopguard``, ``_batch``) pass what they return to the store.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from loopwatch.config import ResolvedConfig
from loopwatch.core.fingerprint import hash_tool_call
from loopwatch.core.naming import normalize_run_id, normalize_tool_call_id
from loopwatch.core.outcomes import hash_tool_outcome
from loopwatch.core.records import RecordDraft, ToolCallRecord
from loopwatch.detectors.profiles import UpcomingCall, UpcomingCallDraft
from loopwatch.detectors.reference import is_known_poll
from loopwatch.guard._memo import ArgsMemo
from loopwatch.guard._ops import RecordOutcome
from loopwatch.guard._policy import UnhashableValueError, error_text, read_clock
from loopwatch.stores.base import GuardSpec, OutcomeWrite

if TYPE_CHECKING:
    from loopwatch.guard.loopguard import LoopGuard

#: ``tuple.__new__``: what a named tuple's generated ``__new__`` calls.
_new_tuple: Final = tuple.__new__
_new_object: Final = object.__new__


@dataclass(slots=True)
class BeforePlan:
    """Everything ``before_call`` derives from its inputs before touching the store.

    Internal and never shared, so not frozen: a frozen dataclass costs a microsecond more
    to build, on every call.
    """

    call: UpcomingCall
    session_key: str
    run_id_raw: object
    call_id: str | None
    params: object
    resolved: ResolvedConfig
    pending: ToolCallRecord | None
    now: float
    #: The post-compaction guard spec of ``resolved``, for this call's ``after_call``.
    guard_spec: GuardSpec


def plan_before(
    guard: LoopGuard,
    tool: str,
    params: object,
    session_key: str,
    run_id: object,
    tool_call_id: object,
    agent_id: object,
) -> BeforePlan:
    """The call's plan: its config, normalised ids, args hash and pending record.

    The pending record is ``None`` when the call's block turns recording off.

    Raises:
        UnhashableValueError: the host's params or ids cannot be read or hashed.
    """
    # (the usual call's config, as _config_for remembers it; else derived there)
    found = guard._default_config if agent_id is None else None
    block, resolved, spec = found if found is not None else guard._config_for(agent_id)
    try:  # the host's values: reading or hashing them may fail (SPEC §8.5)
        # None (the usual ids) normalises to itself: the calls are skipped for it.
        run = None if run_id is None else normalize_run_id(run_id)
        call_id = (
            tool_call_id
            if tool_call_id is None or type(tool_call_id) is str
            else normalize_tool_call_id(tool_call_id)
        )
        args_hash = hash_tool_call(tool, params, normalizers=guard.normalizers)
        # Only two tool names can be polls (is_known_poll): the call is skipped for others.
        known_poll = (tool == "process" or tool == "command_status") and is_known_poll(tool, params)
    except Exception as exc:
        raise UnhashableValueError(error_text(exc)) from exc
    now = read_clock(guard._clock)
    # The three objects below are built without their __init__ (each is built on every
    # guarded call): UpcomingCall(tool, args_hash, run, known_poll), written as a draft of
    # the same slots, then made the call it stands for (see UpcomingCallDraft),
    draft = _new_object(UpcomingCallDraft)
    draft.tool_name = tool
    draft.args_hash = args_hash
    draft.run_id = run
    draft.known_poll = known_poll
    draft.__class__ = UpcomingCall  # type: ignore[assignment]
    call: UpcomingCall = draft  # type: ignore[assignment]  # (an UpcomingCall now)
    pending: ToolCallRecord | None = None
    if block is None or block.get("enabled") is not False:
        # ToolCallRecord(tool, args_hash, call_id, run, None, None, timestamp, facts),
        # written as a draft too (see RecordDraft),
        record = _new_object(RecordDraft)
        record.tool_name = tool
        record.args_hash = args_hash
        record.tool_call_id = call_id
        record.run_id = run
        record.result_hash = None
        record.unknown_tool_name = None
        record.timestamp = int(now * 1000)
        record.facts = None if guard._no_call_facts else guard.detector_profile.call_facts(call)
        record.__class__ = ToolCallRecord  # type: ignore[assignment]
        pending = record  # type: ignore[assignment]  # (a ToolCallRecord now)
    # and BeforePlan(call, session_key, run_id, call_id, params, resolved, pending, now, spec).
    plan = _new_object(BeforePlan)
    plan.call = call
    plan.session_key = session_key
    plan.run_id_raw = run_id
    plan.call_id = call_id
    plan.params = params
    plan.resolved = resolved
    plan.pending = pending
    plan.now = now
    plan.guard_spec = spec
    return plan


def plan_after(
    guard: LoopGuard,
    tool: str,
    params: object,
    session_key: str,
    run_id: object,
    tool_call_id: object,
    result: object,
    error: object,
    agent_id: object,
    memo: ArgsMemo | None,
    context: object,
) -> RecordOutcome | None:
    """Hash the outcome outside any lock; ``None`` when there is nothing to record.

    When the call is provably the one ``before_call`` planned (the same params, run id
    and agent id objects: ``context`` is ``memo.context_for(...)``, the plan, else
    ``None``), its plan supplies what would otherwise be derived again: the args hash,
    the config, the ids, the post-compaction guard spec. Otherwise every input is read
    afresh.
    """
    if context is None:
        _block, resolved, spec = guard._config_for(agent_id)
    try:
        outcome = hash_tool_outcome(
            tool,
            params,
            result=result,
            error=error,
            send_tools=guard.send_tools,
            normalizers=guard.normalizers,
        )
        if outcome.result_hash is None:
            return None  # no result, or the loop veto: nothing changes
        if context is None:
            args_hash = memo.hash_of(tool, params) if memo is not None else None
            if args_hash is None:
                args_hash = hash_tool_call(tool, params, normalizers=guard.normalizers)
            call = UpcomingCall(
                tool, args_hash, normalize_run_id(run_id), is_known_poll(tool, params)
            )
            call_id = normalize_tool_call_id(tool_call_id)
    except Exception as exc:
        raise UnhashableValueError(error_text(exc)) from exc
    if context is not None:
        plan = context
        assert isinstance(plan, BeforePlan)
        call, call_id, resolved, spec = plan.call, plan.call_id, plan.resolved, plan.guard_spec
    facts = (
        None
        if guard._no_outcome_facts
        else guard.detector_profile.outcome_facts(call, params, outcome, result, error)
    )
    now = read_clock(guard._clock)
    # Both named tuples built as their generated __new__ builds them, without its frame.
    write = _new_tuple(
        OutcomeWrite,
        (
            tool,
            call.args_hash,
            call_id,
            call.run_id,
            outcome,
            resolved.history_size,
            int(now * 1000),
            facts,
        ),
    )
    return _new_tuple(RecordOutcome, (session_key, write, spec, now))


__all__ = ["BeforePlan", "plan_after", "plan_before"]
