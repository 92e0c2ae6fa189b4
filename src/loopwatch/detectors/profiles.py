"""Detector profiles: what a guard records per call, how it judges the history, how it warns.

A profile is the one seam between the session engine and the detectors. ``LoopGuard`` asks
its profile three things and knows nothing else about detection:

* **facts** — an opaque string kept on each history record (``ToolCallRecord.facts``),
  written when the call is recorded (:meth:`DetectorProfile.call_facts`) and replaced
  when its outcome is known (:meth:`DetectorProfile.outcome_facts`). Stores and Lua scripts
  keep it verbatim and never read it: a profile versions its own encoding.
* **a verdict** — :meth:`DetectorProfile.detect`, a function of the run's history and the
  upcoming call (it may log the reference's detector lines, SPEC §4, and nothing else).
* **a warning bucket** — :meth:`DetectorProfile.warning_bucket`: a warning is emitted when its
  bucket grows (SPEC §5.3).

``reference`` (SPEC §4, OpenClaw's detectors) and ``adaptive`` (the reference detectors
plus :mod:`loopwatch.detectors.adaptive`) are the built-in profiles, listed in
:data:`PROFILES`. A user adds a detector of their own without writing a profile: any
object with a ``name`` and the :class:`Detector` call signature, passed as
``LoopGuard(detectors=[...])``, runs after the profile's detectors (see
``docs/architecture.md`` for a worked per-tool call cap).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Hashable, Mapping, Sequence
from dataclasses import dataclass
from itertools import compress
from operator import not_
from typing import TYPE_CHECKING, Any, ClassVar, Final, Literal, Protocol

from loopwatch import messages
from loopwatch.core.naming import normalize_tool_name
from loopwatch.core.records import ToolCallRecord
from loopwatch.detectors.reference import (
    NOT_STUCK,
    UNKNOWN_TOOL_REPEAT,
    LoopVerdict,
    RecordFields,
    RunHistory,
    answers_itself,
    evaluate,
    log_verdict,
)

if TYPE_CHECKING:
    from loopwatch.config import ResolvedConfig
    from loopwatch.core.outcomes import OutcomeHash
    from loopwatch.detectors.adaptive import AdaptiveConfig

detection_logger = logging.getLogger("loopwatch.detection")

#: How the first warning of a reference detector is emitted (SPEC §5.3): ``"reference"``
#: emits when ``count // 10`` grows (so a threshold below 10 first warns at 10, as
#: OpenClaw does); ``"immediate"`` adds one to every bucket, so the first warning comes at
#: the threshold itself and the later ones at the same multiples of 10.
FirstWarning = Literal["reference", "immediate"]
FIRST_WARNING_MODES: Final[tuple[str, ...]] = ("reference", "immediate")

#: The reference detectors' ids: their warnings follow the bucket rule of SPEC §5.3.
_REFERENCE_DETECTORS: Final = frozenset(
    {
        "unknown_tool_repeat",
        "global_circuit_breaker",
        "known_poll_no_progress",
        "ping_pong",
        "generic_repeat",
    }
)


#: How many decoded history records the adaptive profile remembers (cleared when full):
#: a few windows of a few hundred sessions.
DECODED_MEMO_SIZE: Final = 8192


@dataclass(frozen=True, slots=True, init=False)
class UpcomingCall:
    """The call about to run, as detectors see it: its normalised name, no raw values.

    Attributes:
        tool_name: the normalised tool name (SPEC §5.1).
        args_hash: its call signature (SPEC §3.2).
        run_id: the trimmed run id, or ``None``.
        known_poll: whether the reference treats it as a poll (SPEC §4).
    """

    tool_name: str
    args_hash: str
    run_id: str | None
    known_poll: bool

    def __init__(
        self, tool_name: str, args_hash: str, run_id: str | None, known_poll: bool
    ) -> None:
        # The generated __init__ of a frozen dataclass, with each slot written through
        # its descriptor (a third of the cost: one is built on every guarded call).
        _set_call_tool_name(self, tool_name)
        _set_call_args_hash(self, args_hash)
        _set_call_run_id(self, run_id)
        _set_call_known_poll(self, known_poll)


# The slot descriptors' setters (the frozen class's __setattr__ refuses every write).
_set_call_tool_name, _set_call_args_hash, _set_call_run_id, _set_call_known_poll = (
    vars(UpcomingCall)[name].__set__ for name in ("tool_name", "args_hash", "run_id", "known_poll")
)


class UpcomingCallDraft:
    """An :class:`UpcomingCall` being built: the same slots, writable (as
    :class:`~loopwatch.core.records.RecordDraft` for records: plain attribute writes, then
    ``__class__ = UpcomingCall``). Every field must be written."""

    __slots__ = UpcomingCall.__slots__

    tool_name: str
    args_hash: str
    run_id: str | None
    known_poll: bool


class Detector(Protocol):
    """A detector of your own, run after the profile's (``LoopGuard(detectors=[...])``).

    It is called before every call with detection on, with the run's records (oldest first;
    each has ``tool_name``, ``args_hash``, ``result_hash``, ``unknown_tool_name``) and the
    upcoming call, and returns a :class:`LoopVerdict` with ``stuck=True`` and a ``level`` to
    warn or block, or ``None``. It must be pure and fast: no I/O, no clock. Its warnings are
    emitted once per ``warning_key``; a critical blocks like any other.
    """

    name: str

    def __call__(
        self, history: Sequence[RecordFields], call: UpcomingCall
    ) -> LoopVerdict | None: ...


def _severity(verdict: LoopVerdict) -> int:
    return 2 if verdict.level == "critical" else 1 if verdict.stuck else 0


def more_severe(current: LoopVerdict, candidate: LoopVerdict | None) -> LoopVerdict:
    """The verdict to act on: a critical beats a warning; on a tie ``current`` stands."""
    if candidate is None or _severity(candidate) <= _severity(current):
        return current
    return candidate


class DetectorProfile:
    """The reference profile (SPEC §4); subclasses add detectors and facts.

    Instances are immutable and shared by every session of a guard.
    """

    #: The name under which :data:`PROFILES` lists the profile.
    name: ClassVar[str] = "reference"
    #: True when choosing the profile is itself the opt-in to detection: detection then
    #: runs unless the block says ``enabled: false`` explicitly.
    detection_by_default: ClassVar[bool] = False

    def call_facts(self, call: UpcomingCall) -> str | None:
        """The facts of a call's pending record (``None``: none)."""
        return None

    def outcome_facts(
        self,
        call: UpcomingCall,
        params: object,
        outcome: OutcomeHash,
        result: object,
        error: object,
    ) -> str | None:
        """The facts of a call's record once its outcome is known (``None``: none).

        The only point where a profile sees the raw params, result and error: it keeps
        digests and flags, never raw text.
        """
        return None

    def detect(
        self,
        history: Sequence[Any] | RunHistory,
        call: UpcomingCall,
        config: ResolvedConfig,
    ) -> LoopVerdict:
        """The verdict on the upcoming call from its run's history (SPEC §4); logs it."""
        verdict = evaluate(history, call.tool_name, call.args_hash, call.known_poll, config)
        if verdict.stuck:  # (log_verdict writes nothing for the others)
            log_verdict(verdict, call.tool_name)
        return verdict

    def warning_bucket(self, verdict: LoopVerdict, first_warning: FirstWarning) -> int:
        """The bucket of a warning (SPEC §5.3): emitted when it exceeds the last one.

        The reference detectors use ``count // 10``; any other detector (the adaptive ones,
        a user's) warns once per warning key.
        """
        if verdict.detector in _REFERENCE_DETECTORS:
            return verdict.count // 10 + (1 if first_warning == "immediate" else 0)
        return 1


REFERENCE_PROFILE: Final = DetectorProfile()


class AdaptiveProfile(DetectorProfile):
    """The reference detectors plus the adaptive ones (:mod:`loopwatch.detectors.adaptive`).

    The adaptive module is imported when this profile is built, never by ``import
    loopwatch``: the reference profile never pays for its regexes.
    """

    name: ClassVar[str] = "adaptive"
    detection_by_default: ClassVar[bool] = True

    def __init__(
        self,
        config: AdaptiveConfig | None = None,
        *,
        send_tools: Collection[str] = (),
        normalizers: Collection[str] = (),
    ) -> None:
        from loopwatch.detectors import adaptive

        self._adaptive = adaptive
        self.config: AdaptiveConfig = config if config is not None else adaptive.AdaptiveConfig()
        self._send_tools = send_tools
        self._normalizers = normalizers
        self._thinking = self.config.all_thinking_tools
        #: This guard's read-only judgements of shell commands, by command text.
        self._reads = adaptive.shell_text.ReadOnlyMemo(self.config.all_read_only_commands)
        #: Decoded adaptive records by record content key (see :meth:`_decoded`).
        self._decoded_memo: dict[Hashable, Any] = {}
        #: The newest record :meth:`outcome_facts` built, with its facts: the history record
        #: decoded next is nearly always that call's (see :meth:`_decoded`).
        self._built: tuple[str, Any] | None = None
        #: The facts of a pending record by (thinking, polling): its other fields are empty.
        self._pending_facts: dict[tuple[bool, bool], str] = {
            (thinking, polling): adaptive.encode_facts(
                adaptive.AdaptiveRecord("", "", thinking=thinking, polling=polling)
            )
            for thinking in (False, True)
            for polling in (False, True)
        }

    def call_facts(self, call: UpcomingCall) -> str | None:
        # A pending record's facts depend on two flags only: encoded once, in __init__.
        return self._pending_facts[call.tool_name in self._thinking, bool(call.known_poll)]

    def outcome_facts(
        self,
        call: UpcomingCall,
        params: object,
        outcome: OutcomeHash,
        result: object,
        error: object,
    ) -> str | None:
        adaptive = self._adaptive
        # The guard hashed the args and the outcome already: each value is hashed once.
        record = adaptive.build_adaptive_record(
            call.tool_name,
            params,
            result=result,
            error=error,
            config=self.config,
            send_tools=self._send_tools,
            normalizers=self._normalizers,
            args_hash=call.args_hash,
            outcome=outcome,
            reads=self._reads,
        )
        facts: str = adaptive.encode_facts(record)
        self._built = (facts, record)
        return facts

    def detect(
        self,
        history: Sequence[Any] | RunHistory,
        call: UpcomingCall,
        config: ResolvedConfig,
    ) -> LoopVerdict:
        verdict = super().detect(history, call, config)
        if verdict.detector == UNKNOWN_TOOL_REPEAT and not _own_name_missing(history, call):
            # An existing tool whose error names another missing tool ("tool 'jq' not
            # found") is not an unknown-tool loop here (issue 17): the adaptive detectors
            # judge it as the failing call it is.
            verdict = NOT_STUCK
        if verdict.level == "critical" or not config.enabled:
            return verdict
        return more_severe(verdict, self._detect_adaptive(history, call))

    def _decoded(self, window: Sequence[Any], keys: Sequence[Hashable] | None) -> list[Any]:
        """The adaptive records of a window of history records.

        Each is ``adaptive.record_from_history(tool_name, args_hash, result_hash,
        facts, config)``, a pure function of the record (and of this profile's
        fixed config), memoised by the record's content key (``RunHistory.content_keys``,
        or the record itself for a :class:`ToolCallRecord`): a window moves by one record
        a call, so all but one are decoded already. That one is usually the call whose
        outcome this profile encoded last: a record with the same tool, args hash, result
        hash and facts decodes to the record built then (the facts keep every field of it),
        which is used as it is.
        """
        memo = self._decoded_memo
        if keys is None:
            keys = [record if type(record) is ToolCallRecord else None for record in window]
        # Looked up all at once, at C speed; only the misses are decoded, one by one.
        records: list[Any] = list(map(memo.get, keys))
        if all(records):  # (a decoded record is always true, a miss is ``None``)
            return records
        for index in list(compress(range(len(records)), map(not_, records))):
            records[index] = self._decode(window[index], keys[index])
        return records

    def _decode(self, record: Any, key: Hashable) -> Any:
        """The adaptive record of one history record the memo misses, remembered under
        ``key`` (unless ``None``): :meth:`_decoded`'s step for each miss."""
        tool_name = record.tool_name
        args_hash = record.args_hash
        result_hash = record.result_hash
        facts = record.facts
        built = self._built
        decoded = built[1] if built is not None and built[0] == facts else None
        if (
            decoded is None
            or decoded.result_hash != result_hash
            or decoded.args_hash != args_hash
            or decoded.tool_name != tool_name
        ):
            decoded = self._adaptive.record_from_history(
                tool_name, args_hash, result_hash, facts, self.config
            )
        if key is not None:
            memo = self._decoded_memo
            if len(memo) >= DECODED_MEMO_SIZE:
                memo.clear()
            memo[key] = decoded
        return decoded

    def _cleared_and_new(self, run: RunHistory, source: Sequence[Any], call: UpcomingCall) -> bool:
        """Whether the adaptive detectors are sure to find nothing, from two cheap facts.

        ``evaluate_adaptive`` ends at its first step on most calls: the newest record of the
        window is a finished success of the upcoming call's tool (which clears every earlier
        failure of it) and no record of the window has the call's args hash (see
        ``screens.summarise``). The first fact needs the newest record decoded, not the
        window (its content key and the memo of :meth:`_decoded`); the second follows from
        ``run.no_progress``, whose count of the run's records of this very call (tool and
        args hash, SPEC §4) is 0. A record with the args hash of another tool would only
        make ``summarise`` look further, at a window as quiet (no record of the call, and the
        newest record of the tool a success). ``False`` says nothing: the detectors run.
        What this saves is the window's content keys and their lookups, the larger part of
        a quiet call's detection.
        """
        if source[-1].tool_name != call.tool_name:
            return False  # (read from the stored record: the common miss, undecoded)
        keys = run.content_keys(len(source) - 1)
        if keys is None:
            return False
        # (_decoded of the one record, without its machinery for a window)
        record = self._decoded_memo.get(keys[0]) or self._decode(source[-1], keys[0])
        if record.transparent or record.result_hash is None or record.failed:
            return False
        return run.no_progress(call.tool_name, call.args_hash)[2] == 0

    def _detect_adaptive(
        self, history: Sequence[Any] | RunHistory, call: UpcomingCall
    ) -> LoopVerdict | None:
        # The adaptive detectors read only the newest ``window`` records: convert those, and
        # turn the verdict's indices back into indices into the whole run.
        if call.tool_name in self._thinking:
            return None  # as evaluate_adaptive decides, without decoding the window
        config = self.config
        if answers_itself(history):
            run: RunHistory = history  # type: ignore[assignment]  # (checked just above)
            source: Sequence[Any] = run.fields()
            end = len(source)
            start = max(0, end - config.window)
            # (Only while every detector has a screen: a quiet window is then one no
            # detector fires on, as evaluate_adaptive decides.)
            if (
                start < end
                and self._adaptive.detectors._ALL_SCREENED
                and self._cleared_and_new(run, source, call)
            ):
                return None
            keys = run.content_keys(start)
        else:
            source = history  # type: ignore[assignment]  # (not a RunHistory: a sequence)
            start = max(0, len(source) - config.window)
            keys = None
        records = self._decoded(source[start:], keys)
        found = self._adaptive.evaluate_adaptive(records, call.tool_name, call.args_hash, config)
        if found is None:
            return None
        critical = found.level == "critical"
        template = messages.LOG_ADAPTIVE_CRITICAL if critical else messages.LOG_ADAPTIVE_WARNING
        detection_logger.log(
            logging.ERROR if critical else logging.WARNING,
            template.format(detector=found.detector, tool=call.tool_name, count=found.count),
        )
        return LoopVerdict(
            stuck=True,
            level=found.level,
            detector=found.detector,
            count=found.count,
            message=found.message,
            warning_key=found.warning_key,
            indices=tuple(start + index for index in found.indices),
            explanation=found.explanation,
        )


def _own_name_missing(history: Sequence[Any] | RunHistory, call: UpcomingCall) -> bool:
    """Whether the newest unknown-tool failure of this tool names the tool itself."""
    source = history.fields() if isinstance(history, RunHistory) else history
    for record in reversed(source):
        if record.tool_name != call.tool_name:
            continue
        name = record.unknown_tool_name
        if name is None:
            return False
        try:
            return normalize_tool_name(name) == call.tool_name
        except Exception:  # a name the normaliser rejects is not the tool's own
            return False
    return False


class WithDetectors(DetectorProfile):
    """A profile followed by user detectors (``LoopGuard(detectors=[...])``).

    A detector that raises is a bug of the host's: the call is decided without it and the
    guard's failure policy reports it (it never blocks by accident).
    """

    def __init__(self, base: DetectorProfile, detectors: Sequence[Detector]) -> None:
        self.base = base
        self.detectors: tuple[Detector, ...] = tuple(detectors)
        self.name = base.name  # type: ignore[misc]
        self.detection_by_default = base.detection_by_default  # type: ignore[misc]

    def call_facts(self, call: UpcomingCall) -> str | None:
        return self.base.call_facts(call)

    def outcome_facts(
        self,
        call: UpcomingCall,
        params: object,
        outcome: OutcomeHash,
        result: object,
        error: object,
    ) -> str | None:
        return self.base.outcome_facts(call, params, outcome, result, error)

    def detect(
        self,
        history: Sequence[Any] | RunHistory,
        call: UpcomingCall,
        config: ResolvedConfig,
    ) -> LoopVerdict:
        verdict = self.base.detect(history, call, config)
        if verdict.level == "critical" or not config.enabled:
            return verdict
        records = history.fields() if isinstance(history, RunHistory) else history
        for detector in self.detectors:
            found = detector(records, call)
            if found is not None and found.stuck:
                verdict = more_severe(verdict, found)
                if verdict.level == "critical":
                    break
        return verdict

    def warning_bucket(self, verdict: LoopVerdict, first_warning: FirstWarning) -> int:
        return self.base.warning_bucket(verdict, first_warning)


#: The built-in profiles by name: a new one is one class and one entry here.
PROFILES: Final[Mapping[str, Callable[..., DetectorProfile]]] = {
    "reference": lambda **_settings: REFERENCE_PROFILE,
    "adaptive": lambda **settings: AdaptiveProfile(**settings),
}


__all__ = [
    "FIRST_WARNING_MODES",
    "PROFILES",
    "REFERENCE_PROFILE",
    "AdaptiveProfile",
    "Detector",
    "DetectorProfile",
    "FirstWarning",
    "UpcomingCall",
    "WithDetectors",
    "more_severe",
]
