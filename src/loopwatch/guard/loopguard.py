"""``LoopGuard``: the session engine around every tool call (SPEC §5, §6.2, §9.3, §11.3).

The host calls ``before_call`` before a tool runs and ``after_call`` after it ran; the
guard keeps each session's history in its store, asks its detector profile for a verdict,
applies the warning buckets, blocks criticals, feeds the post-compaction guards and emits
events. It never raises into the agent, except the deliberate post-compaction abort.

The class holds the public methods and their async twins. What they are made of lives
beside it: what the constructor checks (``_arguments``), what a call derives before it
touches the store (``_planning``), the path from a verdict to a
:class:`~loopwatch.guard.decision.Decision` and its store follow-up (``_verdicts``), the
typed store operations and their drivers (``_ops``), the failure policy (``_policy``),
the measured hot-path helpers (``_memo``), batches (``_batch``), strikes, compaction
retries and the abort (``_lifecycle``), the read-only accessors (``_accessors``) and,
one layer down, the detector profiles (:mod:`loopwatch.detectors.profiles`).
``before_call`` and ``after_call`` keep their usual path inline (measured: each frame
is a few percent of a call), with comments naming the function each inlined step is.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from loopwatch import messages
from loopwatch._event_base import LoopEvent  # the events themselves: where they are built
from loopwatch.config import (
    LoopDetectionConfig,
    Profile,
    ResolvedConfig,
)
from loopwatch.core._undefined import UNDEFINED
from loopwatch.core.naming import normalize_tool_name
from loopwatch.core.normalizers import validate_normalizers
from loopwatch.core.outcomes import OutcomeHash, outcome_fields
from loopwatch.core.records import ToolCallRecord
from loopwatch.detectors.compaction import GuardSnapshot, GuardVerdict
from loopwatch.detectors.profiles import (
    FIRST_WARNING_MODES,
    PROFILES,
    Detector,
    DetectorProfile,
    FirstWarning,
    WithDetectors,
)
from loopwatch.detectors.reference import NOT_STUCK
from loopwatch.errors import StoreError
from loopwatch.guard import _accessors, _batch, _lifecycle, _policy
from loopwatch.guard._arguments import (
    Listener,
    check_arguments,
    checked_listeners,
    send_tool_names,
)
from loopwatch.guard._keys import WHITESPACE, plain_session_key, safe_tool_name
from loopwatch.guard._memo import ArgsMemo, CallBook, ToolNames, same_call
from loopwatch.guard._ops import adrive, adrive_one
from loopwatch.guard._planning import BeforePlan, plan_after, plan_before
from loopwatch.guard._policy import (
    OnceLog,
    StoreErrorRate,
    UnhashableValueError,
    error_text,
    read_clock,
    strict_from_env,
)
from loopwatch.guard._verdicts import before_steps, conclude, run_follow_up
from loopwatch.guard.decision import Decision, blocked_result
from loopwatch.settings import GuardSettings
from loopwatch.stores.base import GuardSpec, Store
from loopwatch.stores.memory.store import MemoryStore

if TYPE_CHECKING:
    from loopwatch.detectors.adaptive import AdaptiveConfig

tools_logger = logging.getLogger("loopwatch.tools")
events_logger = logging.getLogger("loopwatch")
config_logger = logging.getLogger("loopwatch.config")

#: One call of a batch: (tool name, params, tool call id).
BatchCall = tuple[object, object, object]


class LoopGuard:
    """Watches every tool call of every session and blocks loops (SPEC §5).

    Args:
        config: the ``tools.loopDetection`` block for every call: a
            :class:`LoopDetectionConfig` or a camelCase mapping (validated strictly).
            ``None`` leaves everything unset: detection off, recording and the
            post-compaction guard on, as in the reference.
        openclaw_config: a whole OpenClaw config instead; the block of each call is the
            global block merged with the agent's override (``agent_id``).
        store: where session state lives (default: a new :class:`MemoryStore`).
        listeners: callables receiving every :class:`LoopEvent`, in order.
        clock: epoch seconds (default ``time.time``); used for timestamps and expiry.
        send_tools: tool names whose every call sends a message (volatile ids ignored).
        normalizers: opt-in outcome normalisers (``{"update_plan"}``).
        enforce: ``False`` is shadow mode: decide, log and emit, but never block.
        profile: ``"reference"`` (default), ``"adaptive"`` (the reference detectors plus
            the adaptive ones, which stop short real-world loops early, and in which
            detection is on unless ``enabled`` is explicitly ``false``: choosing the
            profile is the opt-in), or a :class:`~loopwatch.detectors.profiles.DetectorProfile`.
        adaptive: the adaptive profile's settings (an :class:`AdaptiveConfig` or the
            camelCase ``loopwatch.adaptive`` mapping); default: those of
            ``openclaw_config``'s ``loopwatch.adaptive`` block, else the defaults.
        settings: settings resolved beforehand (:meth:`GuardSettings.resolve`), instead of
            ``config`` / ``openclaw_config`` / ``adaptive``.
        detectors: detectors of your own (:class:`~loopwatch.detectors.profiles.Detector`), run
            after the profile's.
        first_warning: ``"reference"`` (SPEC §5.3: warnings when ``count // 10`` grows, so
            a warning threshold below 10 first warns at 10) or ``"immediate"`` (the first
            warning at the threshold itself, then at the same multiples of 10).
        strict: raise loopwatch's own internal errors instead of allowing the call (for
            tests); default: the ``LOOPWATCH_STRICT`` environment variable.

    Raises:
        ConfigError: a config the schema rejects.
        TypeError: both configs, a config of another type, a ``ResolvedConfig``, a
            coroutine function as listener, a ``store`` that is not a :class:`Store` (a URL
            goes through :func:`~loopwatch.stores.url.store_from_url`) or whose
            ``fail_open`` is not a ``bool``, a ``clock`` or a detector that is not callable,
            ``settings`` that are not ``GuardSettings``, an ``enforce`` or ``strict`` that
            is not a ``bool``, or a send tool name that is not a ``str``.
        ValueError: an unknown normaliser, profile or ``first_warning``.
    """

    def __init__(
        self,
        config: LoopDetectionConfig | Mapping[str, Any] | None = None,
        *,
        openclaw_config: Mapping[str, Any] | None = None,
        store: Store | None = None,
        listeners: Iterable[Listener] = (),
        clock: Callable[[], float] | None = None,
        send_tools: Collection[str] = (),
        normalizers: Collection[str] = (),
        enforce: bool = True,
        profile: Profile | DetectorProfile | None = None,
        adaptive: AdaptiveConfig | Mapping[str, Any] | None = None,
        settings: GuardSettings | None = None,
        detectors: Sequence[Detector] = (),
        first_warning: FirstWarning = "reference",
        strict: bool | None = None,
    ) -> None:
        detectors = tuple(detectors or ())
        check_arguments(store, clock, settings, detectors, enforce, strict, send_tools)
        if settings is None:
            settings = GuardSettings.resolve(
                config,
                openclaw_config=openclaw_config,
                profile="reference" if isinstance(profile, DetectorProfile) else profile,
                adaptive=adaptive,
            )
            # Settings resolved beforehand (a scan's, one per run) are the caller's to report.
            for warning in settings.warnings:
                config_logger.warning("loopwatch config: %s", warning)
        elif config is not None or openclaw_config is not None:
            raise TypeError("pass either settings or a config, not both")
        if first_warning not in FIRST_WARNING_MODES:
            raise ValueError(
                f"first_warning must be 'reference' or 'immediate', not {first_warning!r}"
            )
        self.first_warning: FirstWarning = first_warning
        self._listeners: tuple[Listener, ...] = checked_listeners(listeners)
        self._store: Store = store if store is not None else MemoryStore()
        self._clock: Callable[[], float] = clock if clock is not None else time.time
        names = send_tool_names(send_tools)
        self.send_tools: frozenset[str] = frozenset(normalize_tool_name(t) for t in names)
        self.normalizers: frozenset[str] = validate_normalizers(normalizers)
        self.enforce: bool = bool(enforce)
        self.strict: bool = strict_from_env() if strict is None else bool(strict)

        chosen = self._detector_profile(profile, settings)
        if detectors:
            chosen = WithDetectors(chosen, detectors)
        self.detector_profile: DetectorProfile = chosen
        #: The profile records no facts before a call, nor after (the reference's
        #: ``call_facts`` and ``outcome_facts``): the calls are skipped.
        self._no_call_facts = type(chosen).call_facts is DetectorProfile.call_facts
        self._no_outcome_facts = type(chosen).outcome_facts is DetectorProfile.outcome_facts
        #: The profile's name (``"reference"``, ``"adaptive"``, or a custom profile's).
        self.profile: str = chosen.name
        if (settings.profile, settings.detection_by_default) != (
            chosen.name,
            chosen.detection_by_default,
        ):
            settings = replace(
                settings, profile=chosen.name, detection_by_default=chosen.detection_by_default
            )
        #: The resolved settings (config, agent overrides, profile) this guard runs with.
        self.settings: GuardSettings = settings

        self._detection_failed = OnceLog(messages.LOG_DETECTION_FAILED)
        self._outcome_failed = OnceLog(messages.LOG_OUTCOME_FAILED)
        self._warned_no_session = False
        self._store_error_rate = StoreErrorRate()
        self._allow = Decision("allow", NOT_STUCK, False, None, self.enforce)
        # Per-call work done once: normalised tool names, guard specs, the args hash of
        # each call between its before_call and its after_call, and the calls in flight.
        self._tool_name = ToolNames(safe_tool_name)
        self._guard_specs: dict[tuple[int, bool], GuardSpec] = {}
        #: The calls between their before_call and their after_call (see CallBook).
        self._calls = CallBook()
        self._default_config: tuple[dict[str, Any] | None, ResolvedConfig, GuardSpec] | None = None

    def _detector_profile(
        self, profile: Profile | DetectorProfile | None, settings: GuardSettings
    ) -> DetectorProfile:
        """The detector profile: an explicit instance, else the settings' (SPEC §9.3)."""
        if isinstance(profile, DetectorProfile):
            return profile
        factory = PROFILES.get(settings.profile)
        if factory is None:
            names = " or ".join(repr(name) for name in PROFILES)
            raise ValueError(f"profile must be {names}, not {settings.profile!r}")
        # Every built-in profile takes the same settings; those it has no use for it ignores.
        return factory(
            config=settings.adaptive, send_tools=self.send_tools, normalizers=self.normalizers
        )

    # --- configuration ---------------------------------------------------------------

    @property
    def store(self) -> Store:
        """The store holding this guard's sessions."""
        return self._store

    @property
    def adaptive(self) -> AdaptiveConfig | None:
        """The adaptive settings, or ``None`` when the profile is not adaptive."""
        profile = self.detector_profile
        if isinstance(profile, WithDetectors):
            profile = profile.base
        config = getattr(profile, "config", None)
        return config if self.profile == "adaptive" else None

    def block_for(self, agent_id: object = None) -> tuple[dict[str, Any] | None, ResolvedConfig]:
        """The merged block of a call and its resolved config (SPEC §5.1)."""
        block, resolved, _guard = self._config_for(agent_id)
        return block, resolved

    def _config_for(
        self, agent_id: object
    ) -> tuple[dict[str, Any] | None, ResolvedConfig, GuardSpec]:
        """:meth:`block_for` and the :meth:`_guard_spec` of its config, as a call needs them."""
        if agent_id is None:  # the usual call: its answer never changes (settings are frozen)
            found = self._default_config
            if found is None:
                block, resolved = self.settings.block_for(None)
                found = self._default_config = (block, resolved, self._guard_spec(resolved))
            return found
        block, resolved = self.settings.block_for(agent_id)
        return block, resolved, self._guard_spec(resolved)

    def _guard_spec(self, resolved: ResolvedConfig) -> GuardSpec:
        """The post-compaction guard spec of a resolved config (SPEC §6.2), shared."""
        key = (resolved.guard_window_size, resolved.guard_enabled)
        spec = self._guard_specs.get(key)
        if spec is None:
            spec = self._guard_specs[key] = GuardSpec(*key)
        return spec

    # --- plumbing --------------------------------------------------------------------

    def _now(self) -> float:
        return read_clock(self._clock)

    def _emit(self, event: LoopEvent) -> None:
        for listener in self._listeners:
            try:
                listener(event)
            except Exception as exc:
                events_logger.warning(
                    messages.LOG_LISTENER_FAILED.format(type=event.type, error=error_text(exc))
                )

    def _accepts(self, session_key: object) -> str | None:
        """The session key, or ``None`` for "no session" (SPEC §5.1), logged once."""
        key = plain_session_key(session_key)
        if key is None and not self._warned_no_session:
            self._warned_no_session = True
            tools_logger.warning(messages.LOG_NO_SESSION_KEY)
        return key

    # --- before_call -----------------------------------------------------------------

    def _start(
        self, plan: BeforePlan, tool_call_id: object, agent_id: object, decision: Decision
    ) -> Decision:
        """Put the decided call in flight, with its call context for its ``after_call``
        (see :meth:`ArgsMemo.context_for`)."""
        call = plan.call
        memo = ArgsMemo.of(call.tool_name, plan.params, call.args_hash)
        if memo is not None:
            memo.context = (plan.run_id_raw, agent_id, plan)
        self._calls.start(
            plan.session_key, tool_call_id, (decision, call.tool_name, call.args_hash), memo
        )
        return decision

    def before_call(
        self,
        tool_name: object,
        params: object,
        *,
        session_key: object,
        run_id: object = None,
        tool_call_id: object = None,
        agent_id: object = None,
    ) -> Decision:
        """Decide on a call before the tool runs (SPEC §5.2); never raises.

        A second ``before_call`` with the tool-call id of a call still in flight (seen by
        two layers of the host) returns the first decision and records nothing.

        Returns:
            A :class:`Decision`. When ``decision.tool_result`` is set, do not run the tool:
            give that result to the model and pass it to :meth:`after_call`.
        """
        names = self._tool_name  # ToolNames(tool_name), at C speed for a known str name
        tool = names[tool_name] if type(tool_name) is str else names(tool_name)
        if type(session_key) is str and session_key and session_key[0] not in WHITESPACE:
            key = session_key  # the usual key (_accepts would return it as is)
        else:
            accepted = self._accepts(session_key)
            if accepted is None:
                return self._allow
            key = accepted
        try:
            seen = self._calls.seen(key, tool_call_id)
            if seen is not None and same_call(seen, tool, params, self.normalizers):
                return seen[0]  # a call in flight counts once
            plan = plan_before(self, tool, params, key, run_id, tool_call_id, agent_id)
            # Detection between the store reads and writes it needs, in one atomic step:
            # the store's methods called directly under its session lock.
            store = self._store
            call = plan.call
            resolved = plan.resolved
            with store.session_lock(key):
                scoped = store.begin_call(
                    key, call.run_id, plan.pending, resolved.history_size, plan.now
                )
                verdict = self.detector_profile.detect(scoped, call, resolved)
                healthy = verdict is NOT_STUCK
                emitted = False if healthy else run_follow_up(self, plan, verdict)
            # (conclude gives a healthy call the shared allow decision)
            decision = self._allow if healthy else conclude(self, plan, verdict, emitted)
            return self._start(plan, tool_call_id, agent_id, decision)
        except StoreError as exc:
            return _policy.store_failed_before(self, key, tool, exc)
        except Exception as exc:
            return _policy.detection_failed(self, tool, exc)

    async def abefore_call(
        self,
        tool_name: object,
        params: object,
        *,
        session_key: object,
        run_id: object = None,
        tool_call_id: object = None,
        agent_id: object = None,
    ) -> Decision:
        """Async twin of :meth:`before_call`."""
        if not self._store.native_async:  # an in-process store: the sync path, as it is
            return self.before_call(
                tool_name,
                params,
                session_key=session_key,
                run_id=run_id,
                tool_call_id=tool_call_id,
                agent_id=agent_id,
            )
        tool = self._tool_name(tool_name)
        key = self._accepts(session_key)
        if key is None:
            return self._allow
        try:
            seen = self._calls.seen(key, tool_call_id)
            if seen is not None and same_call(seen, tool, params, self.normalizers):
                return seen[0]  # a call in flight counts once
            plan = plan_before(self, tool, params, key, run_id, tool_call_id, agent_id)
            verdict, emitted = await adrive(self._store, key, before_steps(self, plan))
            return self._start(plan, tool_call_id, agent_id, conclude(self, plan, verdict, emitted))
        except StoreError as exc:
            return _policy.store_failed_before(self, key, tool, exc)
        except Exception as exc:
            return _policy.detection_failed(self, tool, exc)

    # --- batches (see _batch) -------------------------------------------------------------

    def before_batch(
        self,
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
        return _batch.before_batch(
            self, calls, session_key=session_key, run_id=run_id, agent_id=agent_id
        )

    async def abefore_batch(
        self,
        calls: Sequence[BatchCall],
        *,
        session_key: object,
        run_id: object = None,
        agent_id: object = None,
    ) -> list[Decision]:
        """Async twin of :meth:`before_batch`."""
        return await _batch.abefore_batch(
            self, calls, session_key=session_key, run_id=run_id, agent_id=agent_id
        )

    # --- after_call ------------------------------------------------------------------

    def after_call(
        self,
        tool_name: object,
        params: object,
        *,
        session_key: object,
        run_id: object = None,
        tool_call_id: object = None,
        result: object = UNDEFINED,
        error: object = UNDEFINED,
        agent_id: object = None,
    ) -> ToolCallRecord | None:
        """Record a call's outcome after it ran, failed or was blocked (SPEC §5.4).

        ``error`` left as ``UNDEFINED`` means the call did not fail; ``error=None`` is a
        real error. A blocked call passes ``decision.tool_result`` as ``result``. A second
        report of the same tool-call id records nothing.

        Returns:
            The record now in the history, or ``None`` when nothing was recorded.

        Raises:
            PostCompactionLoopPersistedError: the loop survived a compaction; end the run.
        """
        names = self._tool_name  # ToolNames(tool_name), at C speed for a known str name
        tool = names[tool_name] if type(tool_name) is str else names(tool_name)
        if type(session_key) is str and session_key and session_key[0] not in WHITESPACE:
            key = session_key  # the usual key (_accepts would return it as is)
        else:
            accepted = self._accepts(session_key)
            if accepted is None:
                return None
            key = accepted
        try:
            # Taken first, so that a vetoed or failed outcome does not leave its memo behind.
            done, memo = self._calls.finish(key, tool_call_id)
            if done:
                return None
            plan = None if memo is None else memo.context_for(tool, params, run_id, agent_id)
            store = self._store
            if plan is None:
                op = plan_after(
                    self,
                    tool,
                    params,
                    key,
                    run_id,
                    tool_call_id,
                    result,
                    error,
                    agent_id,
                    memo,
                    None,  # (no plan: every input is read afresh)
                )
                if op is None:
                    return None
                with store.session_lock(key):
                    written = store.record_outcome(*op)  # RecordOutcome.run, inlined
            else:
                # The usual outcome: plan_after with before_call's plan, then RecordOutcome
                # run, inlined. The store takes the write's fields as they are (the memory
                # store builds no OutcomeHash, OutcomeWrite or RecordOutcome), under its
                # session lock (Store.record_outcome_fields).
                assert isinstance(plan, BeforePlan)
                try:
                    result_hash, unknown = outcome_fields(
                        tool, params, result, error, self.send_tools, self.normalizers
                    )
                except Exception as exc:
                    raise UnhashableValueError(error_text(exc)) from exc
                if result_hash is None:
                    return None  # no result, or the loop veto: nothing changes
                call = plan.call
                facts = (
                    None
                    if self._no_outcome_facts
                    else self.detector_profile.outcome_facts(
                        call, params, OutcomeHash(result_hash, unknown), result, error
                    )
                )
                now = read_clock(self._clock)
                written = store.record_outcome_fields(
                    key,
                    tool,
                    call.args_hash,
                    plan.call_id,
                    call.run_id,
                    result_hash,
                    unknown,
                    plan.resolved.history_size,
                    int(now * 1000),
                    facts,
                    plan.guard_spec,
                    now,
                )
            # The store's reply is read here, where the failure policy still applies (a
            # store of the host's may return something else than the contract's tuple).
            record, verdict = written
            abort = verdict.should_abort
        except StoreError as exc:
            _policy.store_failed(self, key, tool, "after_call", exc)
            return None
        except Exception as exc:
            _policy.internal_error(self, self._outcome_failed, tool, exc)
            return None
        if abort:
            _lifecycle.abort_after(self, key, record, verdict)
        return record

    async def aafter_call(
        self,
        tool_name: object,
        params: object,
        *,
        session_key: object,
        run_id: object = None,
        tool_call_id: object = None,
        result: object = UNDEFINED,
        error: object = UNDEFINED,
        agent_id: object = None,
    ) -> ToolCallRecord | None:
        """Async twin of :meth:`after_call`."""
        if not self._store.native_async:  # an in-process store: the sync path, as it is
            return self.after_call(
                tool_name,
                params,
                session_key=session_key,
                run_id=run_id,
                tool_call_id=tool_call_id,
                result=result,
                error=error,
                agent_id=agent_id,
            )
        tool = self._tool_name(tool_name)
        key = self._accepts(session_key)
        if key is None:
            return None
        try:
            # Taken first, so that a vetoed or failed outcome does not leave its memo behind.
            done, memo = self._calls.finish(key, tool_call_id)
            if done:
                return None
            plan = None if memo is None else memo.context_for(tool, params, run_id, agent_id)
            op = plan_after(
                self, tool, params, key, run_id, tool_call_id, result, error, agent_id, memo, plan
            )
            if op is None:
                return None
            written: tuple[ToolCallRecord, GuardVerdict] = await adrive_one(self._store, key, op)
            record, verdict = written  # (read here, as in after_call)
            abort = verdict.should_abort
        except StoreError as exc:
            _policy.store_failed(self, key, tool, "after_call", exc)
            return None
        except Exception as exc:
            _policy.internal_error(self, self._outcome_failed, tool, exc)
            return None
        if abort:
            _lifecycle.abort_after(self, key, record, verdict)
        return record

    # --- critical strikes and compaction retries (see _lifecycle) ---------------------------

    def critical_strike(self, *, session_key: object, run_id: object = None) -> int:
        """Count one critical block of a run; returns 1 for its first, 2 for any later.

        The count lives in the store (a warning-bucket key per run), so processes that
        share a store (hooks) share it. On a store failure it answers 1: a broken store
        never ends a run by accident.
        """
        return _lifecycle.critical_strike(self, session_key=session_key, run_id=run_id)

    async def acritical_strike(self, *, session_key: object, run_id: object = None) -> int:
        """Async twin of :meth:`critical_strike`."""
        return await _lifecycle.acritical_strike(self, session_key=session_key, run_id=run_id)

    def compaction_retry(
        self, *, session_key: object, run_id: object = None, agent_id: object = None
    ) -> None:
        """Arm the run's post-compaction guard: call it on every retry after a compaction."""
        _lifecycle.compaction_retry(self, session_key=session_key, run_id=run_id, agent_id=agent_id)

    async def acompaction_retry(
        self, *, session_key: object, run_id: object = None, agent_id: object = None
    ) -> None:
        """Async twin of :meth:`compaction_retry`."""
        await _lifecycle.acompaction_retry(
            self, session_key=session_key, run_id=run_id, agent_id=agent_id
        )

    # --- adapters for hand-written agent loops (issue 03) -------------------------------

    def tool(self, *args: Any, **kwargs: Any) -> Any:
        """``@guard.tool(session_key=...)``: guard every call of a tool function (sync or
        async); see :func:`loopwatch.adapter.tool`.

        Raises:
            TypeError: without ``session_key=`` (saying how to pass it; a bare
                ``@guard.tool`` too).
        """
        from loopwatch import adapter

        if "session_key" not in kwargs:
            bare = len(args) == 1 and callable(args[0])
            raise TypeError(
                "guard.tool needs session_key=, the conversation its calls belong to: "
                '@guard.tool(session_key="thread-1"), or a callable evaluated on every call '
                "(session_key=current_thread.get)" + (", not a bare @guard.tool" if bare else "")
            )
        return adapter.tool(self, *args, **kwargs)

    def call(self, *args: Any, **kwargs: Any) -> Any:
        """``with guard.call(name, args, session_key=...) as c: ...``: guard one call
        explicitly; see :func:`loopwatch.adapter.call`.

        Raises:
            TypeError: without ``session_key=`` (saying how to pass it).
        """
        from loopwatch import adapter

        if "session_key" not in kwargs:
            raise TypeError(
                "guard.call needs session_key=, the conversation the call belongs to: "
                'with guard.call(name, args, session_key="thread-1") as c: ...'
            )
        return adapter.call(self, *args, **kwargs)

    # --- accessors (SPEC §9.4, see _accessors): never touch or create a session ----------

    def history(self, *, session_key: object) -> tuple[ToolCallRecord, ...]:
        """A copy of the session's history, all runs, oldest first.

        The accessors are for inspection, not the agent's path: they do not fail open.

        Raises:
            StoreError: the store or the clock failed (any other exception of theirs is
                wrapped in one, as its ``__cause__``).
        """
        return _accessors.history(self, session_key=session_key)

    def guard_snapshot(
        self, *, session_key: object, run_id: object = None, agent_id: object = None
    ) -> GuardSnapshot:
        """The run's guard state; unarmed with 0 attempts when it has no guard yet.

        Raises:
            StoreError: the store or the clock failed, as for :meth:`history`.
        """
        return _accessors.guard_snapshot(self, session_key=session_key, run_id=run_id)

    def last_guard_verdict(
        self, *, session_key: object, run_id: object = None
    ) -> GuardVerdict | None:
        """The verdict of the run guard's latest observation, or ``None``.

        Raises:
            StoreError: the store or the clock failed, as for :meth:`history`.
        """
        return _accessors.last_guard_verdict(self, session_key=session_key, run_id=run_id)

    async def ahistory(self, *, session_key: object) -> tuple[ToolCallRecord, ...]:
        """Async twin of :meth:`history`."""
        return await _accessors.ahistory(self, session_key=session_key)

    async def aguard_snapshot(
        self, *, session_key: object, run_id: object = None, agent_id: object = None
    ) -> GuardSnapshot:
        """Async twin of :meth:`guard_snapshot`."""
        return await _accessors.aguard_snapshot(self, session_key=session_key, run_id=run_id)

    async def alast_guard_verdict(
        self, *, session_key: object, run_id: object = None
    ) -> GuardVerdict | None:
        """Async twin of :meth:`last_guard_verdict`."""
        return await _accessors.alast_guard_verdict(self, session_key=session_key, run_id=run_id)


__all__ = ["BatchCall", "Decision", "LoopGuard", "blocked_result"]
