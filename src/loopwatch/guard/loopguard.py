"""``LoopGuard``: the session engine around every tool call (SPEC §5, §6.2, §9.3, §11.3).

The host calls ``before_call`` before a tool runs and ``after_call`` after it ran; the
guard keeps each session's history in its store, runs the pure detectors, applies the
warning buckets, blocks criticals, feeds the post-compaction guards and emits events.
It never raises into the agent, except the deliberate post-compaction abort.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Collection, Generator, Iterable, Mapping, Sequence
from copy import deepcopy
from dataclasses import dataclass, replace
from typing import Any, Final, Literal, TypeVar

from loopwatch import adapter, messages
from loopwatch._undefined import UNDEFINED
from loopwatch.adaptive import (
    ADAPTIVE_DETECTORS,
    AdaptiveConfig,
    AdaptiveRecord,
    build_adaptive_record,
    encode_facts,
    evaluate_adaptive,
    record_from_history,
)
from loopwatch.compaction import (
    GuardSnapshot,
    GuardVerdict,
    PostCompactionLoopPersistedError,
    log_abort,
    log_armed,
)
from loopwatch.config import (
    LoopDetectionConfig,
    Profile,
    ResolvedConfig,
    merge_agent_config,
    profile_of_openclaw_config,
    resolve_config,
    validate_openclaw_config,
)
from loopwatch.detectors import (
    NOT_STUCK,
    LoopVerdict,
    RunHistory,
    evaluate,
    is_known_poll,
    log_verdict,
)
from loopwatch.events import (
    CompactionLoopPersistedEvent,
    GuardArmedEvent,
    LoopEvent,
    StoreErrorEvent,
    ToolExecutionBlockedEvent,
    ToolLoopEvent,
    params_summary,
)
from loopwatch.fingerprint import hash_tool_call
from loopwatch.history import ToolCallRecord
from loopwatch.jsstr import is_blank
from loopwatch.naming import normalize_run_id, normalize_tool_call_id, normalize_tool_name
from loopwatch.normalizers import validate_normalizers
from loopwatch.outcomes import hash_tool_outcome
from loopwatch.stores.base import GuardSpec, OutcomeWrite, Store, StoreError
from loopwatch.stores.memory import MemoryStore

tools_logger = logging.getLogger("loopwatch.tools")
diagnostics_logger = logging.getLogger("loopwatch.diagnostics")
events_logger = logging.getLogger("loopwatch")
detection_logger = logging.getLogger("loopwatch.detection")
store_logger = logging.getLogger("loopwatch.store")

Action = Literal["allow", "warn", "block"]
Listener = Callable[[LoopEvent], object]

#: How many tool names each fail-open text remembers before it may repeat (SPEC §5.6).
FAILURE_LOG_MEMORY: Final = 1000
_MAX_CACHED_AGENTS: Final = 1024
#: At most one store-failure log line per this many seconds of the guard's clock.
STORE_ERROR_LOG_INTERVAL_S: Final = 30.0
STORE_UNAVAILABLE: Final = "store_unavailable"
#: How many ``before_call`` args hashes wait for their ``after_call`` (see ``_ArgsMemo``).
ARGS_MEMO_SIZE: Final = 1024
#: How many raw tool names the guard remembers the normalised form of.
_TOOL_NAME_CACHE_SIZE: Final = 1024


@dataclass(frozen=True, slots=True)
class Decision:
    """What the host does with the upcoming call.

    ``tool_result`` is not ``None`` exactly when the host must not run the tool: it is the
    blocked result to give the model (and to pass to ``after_call``).
    """

    action: Action
    verdict: LoopVerdict
    emitted: bool
    tool_result: dict[str, Any] | None
    enforced: bool


def blocked_result(message: str) -> dict[str, Any]:
    """The tool result of a loop block; a new dict every time (hosts may mutate it)."""
    return {
        "content": [{"type": "text", "text": message}],
        "details": {
            "status": "blocked",
            "deniedReason": messages.DENIED_REASON_TOOL_LOOP,
            "reason": message,
        },
    }


def _valid_session_key(session_key: object) -> bool:
    return isinstance(session_key, str) and not is_blank(session_key)


def _safe_tool_name(tool_name: object) -> str:
    try:
        return normalize_tool_name(tool_name)
    except Exception:
        return "tool"


def _error_text(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


_T = TypeVar("_T")


#: One store call an operation needs, as (method name, arguments); the sync and async
#: drivers perform it. Operations are written once, as generators that yield these (or as
#: a single op), so ``before_call`` and ``abefore_call`` (and the other twins) share every
#: line of logic (sans-I/O style). Plain tuples: one is built per store call.
_StoreOp = tuple[str, tuple[Any, ...]]
_Steps = Generator[_StoreOp, Any, _T]


@dataclass(slots=True)
class _BeforePlan:
    """Everything ``before_call`` derives from its inputs before touching the store.

    Internal and never shared, so not frozen: a frozen dataclass costs a microsecond more
    to build, on every call.
    """

    tool: str
    session_key: str
    run_id_raw: object
    run: str | None
    call_id: str | None
    params: object
    args_hash: str
    known_poll: bool
    resolved: ResolvedConfig
    pending: ToolCallRecord | None
    now: float


_MISSING: Final = object()
#: Types whose instances cannot change: a params value of one of these is pinned by its
#: identity (``type()`` is compared exactly, so subclasses are not trusted).
_IMMUTABLE_SCALARS: Final = frozenset({str, int, float, bool, type(None)})


class _ArgsMemo:
    """The args hash ``before_call`` computed, kept for the ``after_call`` of that call.

    ``after_call`` hashes the params it is given (SPEC §5.4), and a tool may change its
    params while it runs. The hash is reused only when the params provably did not
    change: the very same object, and either an immutable scalar, or a plain ``dict`` with
    ``str`` keys and immutable scalar values that still holds the very same value objects
    under the same keys (key order never matters to the hash). Anything else (nested
    containers, other types) is hashed again. This saves a third of the hashing of a
    guarded call with large arguments.
    """

    __slots__ = ("args_hash", "items", "params", "tool")

    def __init__(
        self,
        tool: str,
        params: object,
        items: tuple[tuple[str, object], ...] | None,
        args_hash: str,
    ) -> None:
        self.tool = tool
        self.params = params
        self.items = items
        self.args_hash = args_hash

    @classmethod
    def of(cls, tool: str, params: object, args_hash: str) -> _ArgsMemo | None:
        """A memo for these params, or ``None`` when their content cannot be pinned."""
        kind = type(params)
        if kind in _IMMUTABLE_SCALARS:
            return cls(tool, params, None, args_hash)
        if kind is not dict:
            return None
        assert isinstance(params, dict)
        try:
            items = tuple(params.items())
        except RuntimeError:  # changed by another thread meanwhile
            return None
        for key, value in items:
            if type(key) is not str or type(value) not in _IMMUTABLE_SCALARS:
                return None
        return cls(tool, params, items, args_hash)

    def hash_of(self, tool: str, params: object) -> str | None:
        """The remembered hash when ``params`` are still what was hashed, else ``None``."""
        if params is not self.params or tool != self.tool:
            return None
        items = self.items
        if items is not None:
            assert isinstance(params, dict)
            if len(params) != len(items):
                return None
            for key, value in items:
                if params.get(key, _MISSING) is not value:
                    return None
        return self.args_hash


class _OnceLog:
    """Logs a text once per tool name, remembering a bounded number of names."""

    def __init__(self, template: str) -> None:
        self._template = template
        self._seen: OrderedDict[str, None] = OrderedDict()
        self._lock = threading.Lock()

    def log(self, tool: str, exc: BaseException) -> None:
        with self._lock:
            if tool in self._seen:
                return
            self._seen[tool] = None
            if len(self._seen) > FAILURE_LOG_MEMORY:
                self._seen.popitem(last=False)
        tools_logger.warning(self._template.format(tool=tool, error=_error_text(exc)))


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
        profile: ``"reference"`` (default) or ``"adaptive"``: the reference detectors plus
            the adaptive ones, which stop short real-world loops early (and in which
            detection is on unless ``enabled`` is explicitly ``false``: choosing the
            profile is the opt-in).
        adaptive: the adaptive profile's settings (an :class:`AdaptiveConfig` or the
            camelCase ``loopwatch.adaptive`` mapping); default: those of
            ``openclaw_config``'s ``loopwatch.adaptive`` block, else the defaults.

    Raises:
        ConfigError: a config the schema rejects.
        TypeError: both configs, a config of another type, a ``ResolvedConfig``, or a
            coroutine function as listener.
        ValueError: an unknown normaliser.
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
        profile: Profile | None = None,
        adaptive: AdaptiveConfig | Mapping[str, Any] | None = None,
    ) -> None:
        if config is not None and openclaw_config is not None:
            raise TypeError("pass either config or openclaw_config, not both")
        self._openclaw_config: dict[str, Any] | None = None
        self._block: dict[str, Any] | None = None
        config_profile: Profile = "reference"
        if isinstance(config, ResolvedConfig):
            raise TypeError(
                "LoopGuard needs a LoopDetectionConfig or a mapping, not a ResolvedConfig "
                "(it no longer knows whether 'enabled' was unset)"
            )
        if isinstance(config, LoopDetectionConfig):
            self._block = config.to_mapping()
            config_profile = config.profile
        elif isinstance(config, Mapping):
            self._block = LoopDetectionConfig.from_mapping(config).to_mapping()
        elif config is not None:
            raise TypeError(
                f"config must be a LoopDetectionConfig, a mapping or None, "
                f"not {type(config).__name__}"
            )
        if openclaw_config is not None:
            if not isinstance(openclaw_config, Mapping):
                raise TypeError("openclaw_config must be a mapping")
            validate_openclaw_config(openclaw_config)
            self._openclaw_config = deepcopy(dict(openclaw_config))
            config_profile = profile_of_openclaw_config(self._openclaw_config)
        self._resolved = resolve_config(self._block)
        self._agent_cache: OrderedDict[str | None, tuple[dict[str, Any] | None, ResolvedConfig]]
        self._agent_cache = OrderedDict()
        self._agent_lock = threading.Lock()

        chosen = profile if profile is not None else config_profile
        if chosen not in ("reference", "adaptive"):
            raise ValueError(f"profile must be 'reference' or 'adaptive', not {chosen!r}")
        self.profile: Profile = chosen
        if isinstance(adaptive, AdaptiveConfig):
            adaptive_config = adaptive
        elif adaptive is not None:
            adaptive_config = AdaptiveConfig.from_mapping(adaptive)
        else:
            settings = (self._openclaw_config or {}).get("loopwatch")
            block = settings.get("adaptive") if isinstance(settings, Mapping) else None
            adaptive_config = AdaptiveConfig.from_mapping(block)
        #: The adaptive settings, or ``None`` in the reference profile.
        self.adaptive: AdaptiveConfig | None = adaptive_config if chosen == "adaptive" else None
        self._resolved = self._profile_resolved(self._block, self._resolved)

        self._listeners: tuple[Listener, ...] = tuple(listeners)
        for listener in self._listeners:
            if inspect.iscoroutinefunction(listener) or asyncio.iscoroutinefunction(listener):
                raise TypeError("listeners must be plain callables, not coroutine functions")
            if not callable(listener):
                raise TypeError(f"listener {listener!r} is not callable")
        self._store: Store = store if store is not None else MemoryStore()
        self._clock: Callable[[], float] = clock if clock is not None else time.time
        self.send_tools: frozenset[str] = frozenset(normalize_tool_name(t) for t in send_tools)
        self.normalizers: frozenset[str] = validate_normalizers(normalizers)
        self.enforce: bool = bool(enforce)

        self._detection_failed = _OnceLog(messages.LOG_DETECTION_FAILED)
        self._outcome_failed = _OnceLog(messages.LOG_OUTCOME_FAILED)
        self._warned_no_session = False
        self._store_error_logged_at: float | None = None
        self._allow = Decision("allow", NOT_STUCK, False, None, self.enforce)
        # Per-call work done once: normalised tool names, guard specs, and the args hash
        # of each call between its before_call and its after_call.
        self._tool_names: dict[str, str] = {}
        self._guard_specs: dict[tuple[int, bool], GuardSpec] = {}
        self._args_memos: dict[tuple[str, str | None], _ArgsMemo] = {}

    # --- configuration ---------------------------------------------------------------

    @property
    def store(self) -> Store:
        """The store holding this guard's sessions."""
        return self._store

    def block_for(self, agent_id: object = None) -> tuple[dict[str, Any] | None, ResolvedConfig]:
        """The merged block of a call and its resolved config (SPEC §5.1)."""
        if self._openclaw_config is None:
            return self._block, self._resolved
        agent = agent_id if isinstance(agent_id, str) else None
        cached = self._agent_cache.get(agent)
        if cached is None:
            block = merge_agent_config(self._openclaw_config, agent)
            cached = (block, self._profile_resolved(block, resolve_config(block)))
            with self._agent_lock:
                self._agent_cache[agent] = cached
                if len(self._agent_cache) > _MAX_CACHED_AGENTS:
                    self._agent_cache.popitem(last=False)
        return cached

    def _guard_spec(self, resolved: ResolvedConfig) -> GuardSpec:
        """The post-compaction guard spec of a resolved config (SPEC §6.2), shared."""
        key = (resolved.guard_window_size, resolved.guard_enabled)
        spec = self._guard_specs.get(key)
        if spec is None:
            spec = self._guard_specs[key] = GuardSpec(*key)
        return spec

    def _profile_resolved(
        self, block: Mapping[str, Any] | None, resolved: ResolvedConfig
    ) -> ResolvedConfig:
        """The adaptive profile is its own opt-in: detection runs unless ``enabled: false``."""
        if self.adaptive is None or resolved.enabled:
            return resolved
        if block is not None and block.get("enabled") is False:
            return resolved
        return replace(resolved, enabled=True)

    # --- plumbing --------------------------------------------------------------------

    def _now(self) -> float:
        return float(self._clock())

    def _tool_name(self, tool_name: object) -> str:
        """The normalised tool name (SPEC §5.1), remembered for plain ``str`` names."""
        if type(tool_name) is not str:
            return _safe_tool_name(tool_name)
        names = self._tool_names
        name = names.get(tool_name)
        if name is None:
            name = _safe_tool_name(tool_name)
            if len(names) >= _TOOL_NAME_CACHE_SIZE:
                names.clear()
            names[tool_name] = name
        return name

    def _remember_args(
        self, session_key: str, call_id: object, tool: str, params: object, args_hash: str
    ) -> None:
        """Keep ``before_call``'s args hash for the ``after_call`` of the same call."""
        if call_id is not None and type(call_id) is not str:
            return  # the memo is keyed by the id as given (see _take_args_memo)
        memo = _ArgsMemo.of(tool, params, args_hash)
        if memo is None:
            return
        memos = self._args_memos
        memos[session_key, call_id] = memo
        if len(memos) > ARGS_MEMO_SIZE:  # calls whose after_call never came: drop the oldest
            with contextlib.suppress(RuntimeError, KeyError, StopIteration):  # a race: skip
                del memos[next(iter(memos))]

    def _take_args_memo(self, session_key: str, call_id: object) -> _ArgsMemo | None:
        """The memo of the call's ``before_call``, if any (:meth:`_ArgsMemo.hash_of` says
        whether its hash still holds). Keyed by the id as given, ``None`` or a plain
        ``str``: normalising any other id may fail, and must fail where it always did."""
        if call_id is not None and type(call_id) is not str:
            return None
        return self._args_memos.pop((session_key, call_id), None)

    def _emit(self, event: LoopEvent) -> None:
        for listener in self._listeners:
            try:
                listener(event)
            except Exception as exc:
                events_logger.warning(
                    messages.LOG_LISTENER_FAILED.format(type=event.type, error=_error_text(exc))
                )

    def _accepts(self, session_key: object) -> bool:
        """False for "no session" (SPEC §5.1), logged once per guard."""
        if _valid_session_key(session_key):
            return True
        if not self._warned_no_session:
            self._warned_no_session = True
            tools_logger.warning(messages.LOG_NO_SESSION_KEY)
        return False

    def _drive(self, session_key: str, steps: _Steps[_T]) -> _T:
        """Run an operation's store steps synchronously, atomically for the session."""
        store = self._store
        with store.session_lock(session_key):
            try:
                name, args = next(steps)
                while True:
                    name, args = steps.send(getattr(store, name)(*args))
            except StopIteration as done:
                result: _T = done.value
                return result

    async def _adrive(self, session_key: str, steps: _Steps[_T]) -> _T:
        """The async twin of :meth:`_drive`; in-process stores run synchronously."""
        store = self._store
        if not store.native_async:
            return self._drive(session_key, steps)
        try:
            name, args = next(steps)
            while True:
                name, args = steps.send(await getattr(store, "a" + name)(*args))
        except StopIteration as done:
            result: _T = done.value
            return result

    def _drive_one(self, session_key: str, op: _StoreOp) -> Any:
        """Perform an operation that is a single store call."""
        store = self._store
        name, args = op
        with store.session_lock(session_key):
            return getattr(store, name)(*args)

    async def _adrive_one(self, session_key: str, op: _StoreOp) -> Any:
        """The async twin of :meth:`_drive_one`."""
        store = self._store
        if not store.native_async:
            return self._drive_one(session_key, op)
        name, args = op
        return await getattr(store, "a" + name)(*args)

    def _store_failed(self, session_key: str, tool: str, operation: str, exc: StoreError) -> None:
        """Report a store failure: an event every time, a log line at a bounded rate."""
        fail_open = self._store.fail_open
        now = self._now()
        last = self._store_error_logged_at
        if last is None or now - last >= STORE_ERROR_LOG_INTERVAL_S or now < last:
            self._store_error_logged_at = now
            store_logger.warning(
                messages.LOG_STORE_ERROR.format(
                    operation=operation,
                    error=_error_text(exc),
                    policy="fail-open" if fail_open else "fail-closed",
                )
            )
        self._emit(
            StoreErrorEvent(
                session_key=session_key,
                operation=operation,
                error=_error_text(exc),
                fail_open=fail_open,
                tool_name=tool,
            )
        )

    def _before_store_failed(self, session_key: str, tool: str, exc: StoreError) -> Decision:
        """The one place the store failure policy is applied (fail-open by default)."""
        self._store_failed(session_key, tool, "before_call", exc)
        if self._store.fail_open or not self.enforce:
            return self._allow
        message = messages.STORE_UNAVAILABLE_CRITICAL.format(tool=tool)
        verdict = LoopVerdict(
            stuck=True, level="critical", detector=STORE_UNAVAILABLE, message=message
        )
        return Decision("block", verdict, True, blocked_result(message), True)

    # --- before_call -----------------------------------------------------------------

    def _plan_before(
        self,
        tool: str,
        params: object,
        session_key: str,
        run_id: object,
        tool_call_id: object,
        agent_id: object,
    ) -> _BeforePlan:
        block, resolved = self.block_for(agent_id)
        run = normalize_run_id(run_id)
        call_id = normalize_tool_call_id(tool_call_id)
        args_hash = hash_tool_call(tool, params, normalizers=self.normalizers)
        self._remember_args(session_key, tool_call_id, tool, params, args_hash)
        now = self._now()
        records = block is None or block.get("enabled") is not False
        known_poll = is_known_poll(tool, params)
        facts = None
        if self.adaptive is not None:
            thinking = tool in self.adaptive.all_thinking_tools
            facts = encode_facts(
                AdaptiveRecord(tool, args_hash, thinking=thinking, polling=known_poll)
            )
        pending = None
        if records:  # positional: the fields in order, a quarter cheaper than keywords
            pending = ToolCallRecord(
                tool, args_hash, call_id, run, None, None, int(now * 1000), facts
            )
        return _BeforePlan(
            tool=tool,
            session_key=session_key,
            run_id_raw=run_id,
            run=run,
            call_id=call_id,
            params=params,
            args_hash=args_hash,
            known_poll=known_poll,
            resolved=resolved,
            pending=pending,
            now=now,
        )

    def _detect(self, plan: _BeforePlan, scoped: Sequence[ToolCallRecord]) -> LoopVerdict:
        verdict = evaluate(scoped, plan.tool, plan.args_hash, plan.known_poll, plan.resolved)
        log_verdict(verdict, plan.tool)
        if self.adaptive is None or verdict.level == "critical" or not plan.resolved.enabled:
            return verdict
        adaptive = self._detect_adaptive(plan, scoped, self.adaptive)
        if adaptive is None or (verdict.stuck and adaptive.level != "critical"):
            return verdict  # the more severe wins; on a tie the reference verdict stands
        return adaptive

    @staticmethod
    def _detect_adaptive(
        plan: _BeforePlan, scoped: Sequence[ToolCallRecord], config: AdaptiveConfig
    ) -> LoopVerdict | None:
        # The adaptive detectors read only the newest ``window`` records: convert those, and
        # turn the verdict's indices back into indices into the whole run.
        source = scoped.fields() if isinstance(scoped, RunHistory) else scoped
        start = max(0, len(source) - config.window)
        records = [
            record_from_history(r.tool_name, r.args_hash, r.result_hash, r.adaptive_facts, config)
            for r in source[start:]
        ]
        found = evaluate_adaptive(records, plan.tool, plan.args_hash, config)
        if found is None:
            return None
        template = (
            messages.LOG_ADAPTIVE_CRITICAL
            if found.level == "critical"
            else messages.LOG_ADAPTIVE_WARNING
        )
        detection_logger.log(
            logging.ERROR if found.level == "critical" else logging.WARNING,
            template.format(detector=found.detector, tool=plan.tool, count=found.count),
        )
        return LoopVerdict(
            stuck=True,
            level=found.level,
            detector=found.detector,
            count=found.count,
            message=found.message,
            warning_key=found.warning_key,
            indices=tuple(start + index for index in found.indices),
        )

    @staticmethod
    def _bucket_key(plan: _BeforePlan, verdict: LoopVerdict) -> str:
        base = verdict.warning_key or f"{verdict.detector}:{plan.tool}"
        raw = plan.run_id_raw
        return f"{raw}:{base}" if isinstance(raw, str) and raw else base

    def _announce(self, plan: _BeforePlan, verdict: LoopVerdict, action: str) -> None:
        """The diagnostic line and the ``tool.loop`` event of a block or emitted warning."""
        level = verdict.level or "warning"
        paired = (
            messages.LOG_DIAGNOSTIC_PAIRED.format(paired_tool=verdict.paired_tool_name)
            if verdict.paired_tool_name is not None
            else ""
        )
        diagnostics_logger.debug(
            messages.LOG_DIAGNOSTIC.format(
                session_key=plan.session_key,
                tool=plan.tool,
                level=level,
                action=action,
                detector=verdict.detector,
                count=verdict.count,
                paired=paired,
                message=verdict.message,
            )
        )
        self._emit(
            ToolLoopEvent(
                session_key=plan.session_key,
                tool_name=plan.tool,
                level=level,
                action=action,
                detector=verdict.detector,
                count=verdict.count,
                message=verdict.message,
                paired_tool_name=verdict.paired_tool_name,
                indices=verdict.indices,
            )
        )

    def _conclude(self, plan: _BeforePlan, verdict: LoopVerdict, emitted: bool) -> Decision:
        if verdict.level == "critical":
            message = verdict.message or ""
            tools_logger.error(messages.LOG_BLOCKING.format(tool=plan.tool, message=message))
            self._announce(plan, verdict, "block")
            if not self.enforce:
                return Decision("block", verdict, True, None, False)
            raw_run = plan.run_id_raw
            self._emit(
                ToolExecutionBlockedEvent(
                    session_key=plan.session_key,
                    tool_name=plan.tool,
                    params_summary=params_summary(plan.params),
                    reason=message,
                    run_id=raw_run if isinstance(raw_run, str) and raw_run else None,
                    tool_call_id=plan.call_id or None,
                )
            )
            return Decision("block", verdict, True, blocked_result(message), True)
        if verdict.stuck:
            if emitted:
                tools_logger.warning(
                    messages.LOG_LOOP_WARNING.format(tool=plan.tool, message=verdict.message)
                )
                self._announce(plan, verdict, "warn")
            return Decision("warn", verdict, emitted, None, self.enforce)
        return self._allow

    def _before_failed(self, tool: str, exc: BaseException) -> Decision:
        self._detection_failed.log(tool, exc)
        return self._allow

    def _before_steps(self, plan: _BeforePlan) -> _Steps[tuple[LoopVerdict, bool]]:
        """Detection between the store reads and writes it needs (one atomic step)."""
        now = plan.now
        key = plan.session_key
        scoped = yield (
            "begin_call",
            (key, plan.run, plan.pending, plan.resolved.history_size, now),
        )
        verdict = self._detect(plan, scoped)
        emitted = False
        if verdict.level == "critical":
            if self.enforce and plan.pending is not None:
                # Blocked calls are not recorded (the reference's sticky block).
                yield ("cancel_call", (key, plan.pending, now))
        elif verdict.stuck:
            bucket_key = self._bucket_key(plan, verdict)
            # Adaptive warnings are emitted at once, then once per loop (its warning key).
            adaptive = verdict.detector in ADAPTIVE_DETECTORS
            bucket = 1 if adaptive else verdict.count // 10
            emitted = yield ("update_warning_bucket", (key, bucket_key, bucket, now))
        return verdict, emitted

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

        Returns:
            A :class:`Decision`. When ``decision.tool_result`` is set, do not run the tool:
            give that result to the model and pass it to :meth:`after_call`.
        """
        tool = self._tool_name(tool_name)
        if not self._accepts(session_key):
            return self._allow
        assert isinstance(session_key, str)
        try:
            plan = self._plan_before(tool, params, session_key, run_id, tool_call_id, agent_id)
            verdict, emitted = self._drive(session_key, self._before_steps(plan))
            return self._conclude(plan, verdict, emitted)
        except StoreError as exc:
            return self._before_store_failed(session_key, tool, exc)
        except Exception as exc:
            return self._before_failed(tool, exc)

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
        tool = self._tool_name(tool_name)
        if not self._accepts(session_key):
            return self._allow
        assert isinstance(session_key, str)
        try:
            plan = self._plan_before(tool, params, session_key, run_id, tool_call_id, agent_id)
            verdict, emitted = await self._adrive(session_key, self._before_steps(plan))
            return self._conclude(plan, verdict, emitted)
        except StoreError as exc:
            return self._before_store_failed(session_key, tool, exc)
        except Exception as exc:
            return self._before_failed(tool, exc)

    # --- after_call ------------------------------------------------------------------

    def _plan_after(
        self,
        tool: str,
        params: object,
        session_key: str,
        run_id: object,
        tool_call_id: object,
        result: object,
        error: object,
        agent_id: object,
    ) -> _StoreOp | None:
        """Hash the outcome outside any lock; ``None`` when there is nothing to record."""
        _block, resolved = self.block_for(agent_id)
        # Taken first, so that a vetoed or failed outcome does not leave it behind.
        memo = self._take_args_memo(session_key, tool_call_id)
        outcome = hash_tool_outcome(
            tool,
            params,
            result=result,
            error=error,
            send_tools=self.send_tools,
            normalizers=self.normalizers,
        )
        if outcome.result_hash is None:
            return None  # no result, or the loop veto: nothing changes
        facts = None
        if self.adaptive is not None:
            # The only point that sees the raw outcome: keep what adaptive detection needs.
            facts = encode_facts(
                build_adaptive_record(
                    tool,
                    params,
                    result=result,
                    error=error,
                    config=self.adaptive,
                    send_tools=self.send_tools,
                    normalizers=self.normalizers,
                )
            )
        now = self._now()
        args_hash = memo.hash_of(tool, params) if memo is not None else None
        if args_hash is None:
            args_hash = hash_tool_call(tool, params, normalizers=self.normalizers)
        write = OutcomeWrite(
            tool_name=tool,
            args_hash=args_hash,
            tool_call_id=normalize_tool_call_id(tool_call_id),
            run_id=normalize_run_id(run_id),
            outcome=outcome,
            history_size=resolved.history_size,
            timestamp=int(now * 1000),
            adaptive_facts=facts,
        )
        spec = self._guard_spec(resolved)
        return ("record_outcome", (session_key, write, spec, now))

    def _finish_after(
        self,
        session_key: str,
        written: tuple[ToolCallRecord, GuardVerdict] | None,
    ) -> ToolCallRecord | None:
        if written is None:
            return None
        record, verdict = written
        if verdict.should_abort:
            log_abort(verdict)
            error = PostCompactionLoopPersistedError.from_verdict(verdict, record)
            self._emit(
                CompactionLoopPersistedEvent(
                    session_key=session_key,
                    tool_name=error.tool_name,
                    count=error.count,
                    message=error.message,
                    run_id=record.run_id,
                )
            )
            raise error
        return record

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
        real error. A blocked call passes ``decision.tool_result`` as ``result``.

        Returns:
            The record now in the history, or ``None`` when nothing was recorded.

        Raises:
            PostCompactionLoopPersistedError: the loop survived a compaction; end the run.
        """
        tool = self._tool_name(tool_name)
        if not self._accepts(session_key):
            return None
        assert isinstance(session_key, str)
        try:
            op = self._plan_after(
                tool, params, session_key, run_id, tool_call_id, result, error, agent_id
            )
            written = None if op is None else self._drive_one(session_key, op)
        except StoreError as exc:
            self._store_failed(session_key, tool, "after_call", exc)
            return None
        except Exception as exc:
            self._outcome_failed.log(tool, exc)
            return None
        return self._finish_after(session_key, written)

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
        tool = self._tool_name(tool_name)
        if not self._accepts(session_key):
            return None
        assert isinstance(session_key, str)
        try:
            op = self._plan_after(
                tool, params, session_key, run_id, tool_call_id, result, error, agent_id
            )
            written = None if op is None else await self._adrive_one(session_key, op)
        except StoreError as exc:
            self._store_failed(session_key, tool, "after_call", exc)
            return None
        except Exception as exc:
            self._outcome_failed.log(tool, exc)
            return None
        return self._finish_after(session_key, written)

    # --- compaction ------------------------------------------------------------------

    def _arm_op(self, session_key: str, run: str | None, agent_id: object) -> _StoreOp:
        _block, resolved = self.block_for(agent_id)
        return ("arm_guard", (session_key, run, self._guard_spec(resolved), self._now()))

    def _armed(self, session_key: str, run: str | None, actual: GuardSpec | None) -> None:
        if actual is None:
            return
        if actual.enabled:
            log_armed(actual.window_size)
        self._emit(
            GuardArmedEvent(
                session_key=session_key,
                window_size=actual.window_size,
                enabled=actual.enabled,
                run_id=run,
            )
        )

    def _arm_failed(self, session_key: str, exc: Exception) -> None:
        if isinstance(exc, StoreError):
            self._store_failed(session_key, "", "compaction_retry", exc)
        else:
            tools_logger.warning(
                messages.LOG_COMPACTION_RETRY_FAILED.format(error=_error_text(exc))
            )

    def compaction_retry(
        self, *, session_key: object, run_id: object = None, agent_id: object = None
    ) -> None:
        """Arm the run's post-compaction guard: call it on every retry after a compaction."""
        if not self._accepts(session_key):
            return
        assert isinstance(session_key, str)
        run = normalize_run_id(run_id)
        actual: GuardSpec | None = None
        try:
            actual = self._drive_one(session_key, self._arm_op(session_key, run, agent_id))
        except Exception as exc:
            self._arm_failed(session_key, exc)
        self._armed(session_key, run, actual)

    async def acompaction_retry(
        self, *, session_key: object, run_id: object = None, agent_id: object = None
    ) -> None:
        """Async twin of :meth:`compaction_retry`."""
        if not self._accepts(session_key):
            return
        assert isinstance(session_key, str)
        run = normalize_run_id(run_id)
        actual: GuardSpec | None = None
        try:
            actual = await self._adrive_one(session_key, self._arm_op(session_key, run, agent_id))
        except Exception as exc:
            self._arm_failed(session_key, exc)
        self._armed(session_key, run, actual)

    # --- adapters for hand-written agent loops (issue 03) -------------------------------

    #: ``@guard.tool(session_key=...)``: guard every call of a tool function (sync or
    #: async); see :func:`loopwatch.adapter.tool`.
    tool = adapter.tool
    #: ``with guard.call(name, args, session_key=...) as c: ...``: guard one call
    #: explicitly; see :func:`loopwatch.adapter.call`.
    call = adapter.call

    # --- accessors (SPEC §9.4): never touch or create a session -------------------------

    def history(self, *, session_key: object) -> tuple[ToolCallRecord, ...]:
        """A copy of the session's history, all runs, oldest first."""
        if not _valid_session_key(session_key):
            return ()
        assert isinstance(session_key, str)
        return self._store.history(session_key, self._now())

    def guard_snapshot(
        self, *, session_key: object, run_id: object = None, agent_id: object = None
    ) -> GuardSnapshot:
        """The run's guard state; unarmed with 0 attempts when it has no guard yet."""
        if not _valid_session_key(session_key):
            return GuardSnapshot(armed=False, remaining_attempts=0)
        assert isinstance(session_key, str)
        return self._store.guard_snapshot(session_key, normalize_run_id(run_id), self._now())

    def last_guard_verdict(
        self, *, session_key: object, run_id: object = None
    ) -> GuardVerdict | None:
        """The verdict of the run guard's latest observation, or ``None``."""
        if not _valid_session_key(session_key):
            return None
        assert isinstance(session_key, str)
        return self._store.last_guard_verdict(session_key, normalize_run_id(run_id), self._now())

    async def ahistory(self, *, session_key: object) -> tuple[ToolCallRecord, ...]:
        """Async twin of :meth:`history`."""
        if not _valid_session_key(session_key):
            return ()
        assert isinstance(session_key, str)
        return await self._store.ahistory(session_key, self._now())

    async def aguard_snapshot(
        self, *, session_key: object, run_id: object = None, agent_id: object = None
    ) -> GuardSnapshot:
        """Async twin of :meth:`guard_snapshot`."""
        if not _valid_session_key(session_key):
            return GuardSnapshot(armed=False, remaining_attempts=0)
        assert isinstance(session_key, str)
        return await self._store.aguard_snapshot(session_key, normalize_run_id(run_id), self._now())

    async def alast_guard_verdict(
        self, *, session_key: object, run_id: object = None
    ) -> GuardVerdict | None:
        """Async twin of :meth:`last_guard_verdict`."""
        if not _valid_session_key(session_key):
            return None
        assert isinstance(session_key, str)
        return await self._store.alast_guard_verdict(
            session_key, normalize_run_id(run_id), self._now()
        )


__all__ = ["Decision", "LoopGuard", "blocked_result"]
