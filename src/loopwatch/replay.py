"""Replay a recorded run through a fresh ``LoopGuard``: where would loopwatch have stepped in?

This is the pure core of ``loopwatch scan`` and ``--sweep``: the same run and the same
settings always give the same decisions (the guard gets a fixed clock and its own session),
so a sweep can replay one parsed transcript under many configs.

The replay plays the host's part exactly as SPEC §5 and §9.3 describe it:

- ``before_call`` for every recorded call, with the transcript's tool-call id (or a
  synthesised ``call-<n>``, so outcomes match their own call) and run id;
- on a block the tool is *not* run: ``decision.tool_result`` is passed to ``after_call`` as
  the result (a no-op by the veto rule), and the recorded outcome is ignored;
- otherwise the recorded ``result`` / ``error`` go to ``after_call`` (``UNDEFINED`` error
  means "did not fail");
- a compaction marker calls ``compaction_retry``, arming the run's post-compaction guard;
- ``PostCompactionLoopPersistedError`` ends the run, as it would end a live one: it is
  recorded as an abort on that call, and the calls after it are not replayed;
- calls that share a ``batch`` (one assistant message's parallel calls) get every
  ``before_call`` first, then their outcomes in order, as a host running them in parallel
  does; a call the transcript says was cancelled or never ran has no outcome, so nothing is
  recorded for it (a sibling's cancellation is not a failure).

After a block the recorded run goes on as the agent really continued; under loopwatch the
model would have seen the block message instead, so everything after the first block or
abort is what loopwatch would have saved: the *wasted* calls.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Final, Literal

from loopwatch.config import Profile
from loopwatch.core._undefined import UNDEFINED
from loopwatch.core.fingerprint import hash_tool_call
from loopwatch.core.naming import normalize_tool_name
from loopwatch.detectors.adaptive import AdaptiveConfig
from loopwatch.detectors.compaction import PostCompactionLoopPersistedError
from loopwatch.guard import Decision, LoopGuard
from loopwatch.settings import GuardSettings
from loopwatch.transcripts.model import Compaction, ReplayCall, Run

ReplayAction = Literal["allow", "warn", "block", "abort", "not-replayed"]

#: What ``loopwatch scan`` runs without ``--config``: the reference defaults, switched on.
#: The library default (``enabled`` unset, so off) would find nothing.
DEFAULT_SCAN_BLOCK: Final[Mapping[str, Any]] = MappingProxyType({"enabled": True})

_FIXED_CLOCK_S: Final = 0.0


def _fixed_clock() -> float:
    # Replays must be deterministic; no detector reads time, and a constant clock never
    # expires the run's session.
    return _FIXED_CLOCK_S


@dataclass(frozen=True)
class ReplaySettings:
    """How to build the guard each run is replayed through.

    Attributes:
        config: a ``tools.loopDetection`` block (used when ``openclaw_config`` is ``None``).
        openclaw_config: a whole OpenClaw config, merged per call for ``agent_id``.
        agent_id: the agent whose override applies (with ``openclaw_config``).
        profile: the loopwatch profile, or ``None`` for the config's own.
        adaptive: the adaptive profile's settings, or ``None`` for the config's own.
    """

    config: Mapping[str, Any] | None = field(default_factory=lambda: DEFAULT_SCAN_BLOCK)
    openclaw_config: Mapping[str, Any] | None = None
    agent_id: str | None = None
    profile: Profile | None = None
    adaptive: AdaptiveConfig | None = None

    def guard_settings(self) -> GuardSettings:
        """What each run's guard runs with (config, agent overrides, profile, adaptive
        settings), resolved and validated without building a guard.

        Raises:
            ConfigError: the config is rejected by the schema.
            ValueError: an unknown profile.
        """
        if self.openclaw_config is not None:
            return GuardSettings.resolve(
                openclaw_config=self.openclaw_config, profile=self.profile, adaptive=self.adaptive
            )
        return GuardSettings.resolve(self.config, profile=self.profile, adaptive=self.adaptive)

    def new_guard(self) -> LoopGuard:
        """A fresh guard for one run, on :meth:`guard_settings` and a fixed clock.

        Raises:
            ConfigError: the config is rejected by the schema.
            ValueError: an unknown profile.
        """
        return LoopGuard(settings=self.guard_settings(), clock=_fixed_clock)


@dataclass(frozen=True, slots=True)
class CallDecision:
    """What the guard decided about one recorded call.

    Attributes:
        index: the 1-based position of the call in its run.
        tool: the tool name as recorded.
        call_id: the tool-call id used (the transcript's, or a synthesised one).
        signature: the call signature (``tool:sha256``) that repeats in a loop, or ``None``
            when the args cannot be hashed.
        action: ``allow``, ``warn``, ``block``, ``abort`` (the call ran, then the
            post-compaction guard ended the run) or ``not-replayed`` (after an abort).
        emitted: whether the warning or block was logged and emitted (warnings below 10
            repeats are bucketed away, SPEC §5.3).
        level: ``warning`` / ``critical`` / ``None``.
        detector: the detector that fired, or ``None``.
        count: the detector's count (0 when nothing fired).
        message: the model-facing message, or ``None``.
        tokens: the tokens the transcript attributes to the call.
        line: the call's source line.
    """

    index: int
    tool: str
    call_id: str
    signature: str | None
    action: ReplayAction
    emitted: bool = False
    level: str | None = None
    detector: str | None = None
    count: int = 0
    message: str | None = None
    tokens: int | None = None
    line: int | None = None


@dataclass(frozen=True, slots=True)
class RunReplay:
    """The decisions of one replayed run, and what they add up to.

    Attributes:
        run: the run that was replayed.
        decisions: one per recorded call, in order.
    """

    run: Run
    decisions: tuple[CallDecision, ...]

    @property
    def calls(self) -> int:
        """The number of recorded calls."""
        return len(self.decisions)

    @property
    def first_warning(self) -> CallDecision | None:
        """The first call that got a warning verdict (emitted or not)."""
        return next((d for d in self.decisions if d.action == "warn"), None)

    @property
    def first_stop(self) -> CallDecision | None:
        """The first call that was blocked, or whose outcome aborted the run."""
        return next((d for d in self.decisions if d.action in ("block", "abort")), None)

    @property
    def warned(self) -> bool:
        """Whether any call got a warning verdict."""
        return any(d.action == "warn" for d in self.decisions)

    @property
    def blocked(self) -> bool:
        """Whether any call was blocked."""
        return any(d.action == "block" for d in self.decisions)

    @property
    def aborted(self) -> bool:
        """Whether the post-compaction guard ended the run."""
        return any(d.action == "abort" for d in self.decisions)

    @property
    def calls_warned(self) -> int:
        """How many calls got a warning verdict."""
        return sum(1 for d in self.decisions if d.action == "warn")

    @property
    def calls_blocked(self) -> int:
        """How many calls were blocked or aborted the run."""
        return sum(1 for d in self.decisions if d.action in ("block", "abort"))

    @property
    def detector(self) -> str | None:
        """The detector of the first block or abort, else of the first warning."""
        decisive = self.first_stop or self.first_warning
        return decisive.detector if decisive is not None else None

    def _wasted(self) -> tuple[CallDecision, ...]:
        stop = self.first_stop
        if stop is None:
            return ()
        # A blocked call never runs under loopwatch, so it is saved too; an aborting call
        # did run (the guard decides on its outcome), so saving starts after it.
        start = stop.index - 1 if stop.action == "block" else stop.index
        return self.decisions[start:]

    @property
    def wasted_calls(self) -> int:
        """Calls the transcript made from the first block on (after an abort): the ones
        loopwatch would have saved."""
        return len(self._wasted())

    @property
    def wasted_tokens(self) -> int | None:
        """Tokens of the wasted calls, or ``None`` when the transcript records no usage."""
        if all(d.tokens is None for d in self.decisions):
            return None
        return sum(d.tokens or 0 for d in self._wasted())


def _signature(guard: LoopGuard, tool: str, args: object) -> str | None:
    try:
        return hash_tool_call(normalize_tool_name(tool), args, normalizers=guard.normalizers)
    except (TypeError, ValueError, RecursionError):
        return None


def _from_decision(base: CallDecision, decision: Decision) -> CallDecision:
    verdict = decision.verdict
    return CallDecision(
        index=base.index,
        tool=base.tool,
        call_id=base.call_id,
        signature=base.signature,
        action=decision.action,
        emitted=decision.emitted,
        level=verdict.level,
        detector=verdict.detector,
        count=verdict.count,
        message=verdict.message,
        tokens=base.tokens,
        line=base.line,
    )


def _aborted(base: CallDecision, exc: PostCompactionLoopPersistedError) -> CallDecision:
    return CallDecision(
        index=base.index,
        tool=base.tool,
        call_id=base.call_id,
        signature=base.signature,
        action="abort",
        emitted=True,
        level="critical",
        detector=exc.detector,
        count=exc.count,
        message=exc.message,
        tokens=base.tokens,
        line=base.line,
    )


def replay_run(
    run: Run, settings: ReplaySettings | None = None, *, session_key: str = "replay"
) -> RunReplay:
    """Replay one run through a fresh guard and collect its decisions.

    Args:
        run: the run.
        settings: the guard to build (default: the reference defaults with
            ``enabled: true``).
        session_key: the session the run is replayed in (the guard is fresh either way;
            the key shows up in the guard's logs).

    Returns:
        One decision per recorded call.

    Raises:
        ConfigError: the settings' config is rejected by the schema.
        ValueError: the settings ask for a profile this release does not have.
    """
    settings = settings or ReplaySettings()
    guard = settings.new_guard()
    agent = settings.agent_id
    decisions: list[CallDecision] = []
    ended = False
    events = run.events
    position = 0
    while position < len(events):
        event = events[position]
        position += 1
        if isinstance(event, Compaction):
            if not ended:
                guard.compaction_retry(session_key=session_key, run_id=run.run_id, agent_id=agent)
            continue
        group = [event]
        while (
            event.batch is not None
            and position < len(events)
            and isinstance(events[position], ReplayCall)
            and events[position].batch == event.batch  # type: ignore[union-attr]
        ):
            group.append(events[position])  # type: ignore[arg-type]
            position += 1
        # A batch is replayed as the host ran it: every call is decided before any outcome.
        issued: list[tuple[ReplayCall, CallDecision, Decision | None]] = []
        for call in group:
            index = len(decisions) + len(issued) + 1
            base = CallDecision(
                index=index,
                tool=call.tool,
                call_id=call.call_id or f"call-{index}",
                signature=_signature(guard, call.tool, call.args),
                action="not-replayed",
                tokens=call.tokens,
                line=call.line,
            )
            decision = None
            if not ended:
                decision = guard.before_call(
                    call.tool,
                    call.args,
                    session_key=session_key,
                    run_id=run.run_id,
                    tool_call_id=base.call_id,
                    agent_id=agent,
                )
            issued.append((call, base, decision))
        for call, base, decision in issued:
            if decision is None:
                decisions.append(base)
                continue
            if ended:
                # Issued alongside the call that ended the run: decided, never finished.
                decisions.append(_from_decision(base, decision))
                continue
            blocked = decision.tool_result is not None
            try:
                guard.after_call(
                    call.tool,
                    call.args,
                    session_key=session_key,
                    run_id=run.run_id,
                    tool_call_id=base.call_id,
                    result=decision.tool_result if blocked else call.result,
                    error=UNDEFINED if blocked else call.error,
                    agent_id=agent,
                )
            except PostCompactionLoopPersistedError as exc:
                decisions.append(_aborted(base, exc))
                ended = True
                continue
            decisions.append(_from_decision(base, decision))
    return RunReplay(run=run, decisions=tuple(decisions))


__all__ = [
    "DEFAULT_SCAN_BLOCK",
    "CallDecision",
    "ReplayAction",
    "ReplaySettings",
    "RunReplay",
    "replay_run",
]
