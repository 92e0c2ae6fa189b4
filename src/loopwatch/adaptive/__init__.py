"""The adaptive profile's detectors (issue #7): stop the short loops real agents fall into.

The reference detectors (SPEC §4) warn at 10 and block at 20 identical calls. Real agents get
stuck for 3–10 calls instead: the same failing call repeated with "thinking" calls in between,
the same error coming back while the arguments vary slightly, a call repeated with identical
results, or a short sequence of calls going round in circles. This module detects those shapes
early, and is built so that a run making progress is never stopped:

* **repeated_failure** — the same call (tool + args) failing again with the same error,
  counted across interleaved calls of other tools.
* **same_error** — one tool returning the same *normalised* error for calls whose arguments
  differ ("same error, slightly different args").
* **identical_streak** — the same call with the same outcome, consecutively.
* **cycle** — a sequence of 2–5 calls repeating with identical outcomes, lap after lap
  (blocked after 3 laps).

**Progress resets.** A successful call of a mutating tool (an edit, a write, a shell command
that writes a file, …) starts a new *segment*: the failure counts only look at the calls since
the last progress, so "edit, then re-run the test" is never a loop. Repeating the very same
write (same arguments, same outcome) within a segment is not new progress. Calls of thinking
tools (``think``) are transparent: they never break a streak and are never part of a loop.

Everything here is pure: records in, verdict out, no I/O, no clock, no logging. The session
engine builds one :class:`AdaptiveRecord` per call (:func:`build_adaptive_record`, at
``after_call`` time, from the raw params/result/error) and calls :func:`evaluate_adaptive`
before each call, alongside the reference detectors.

Configuration lives in the top-level ``loopwatch`` block of a config file, never inside
``tools.loopDetection``::

    loopwatch: {
      profile: "adaptive",
      adaptive: {
        window: 30,                                  // newest records considered
        repeatedFailure: { enabled: true, warn: 2, block: 3 },
        sameError:       { enabled: true, warn: 4, block: 6 },
        identicalStreak: { enabled: true, warn: 3, block: 4 },
        cycle: { enabled: true, minPeriod: 2, maxPeriod: 5, warnLaps: 2, blockLaps: 3 },
        mutatingTools: ["book_reservation"],         // added to the built-in list
        thinkingTools: ["scratchpad"],               // added to ["think"]
        shellTools: ["run"],                         // added to the built-in list
      },
    }

Every count includes the upcoming call: ``repeatedFailure.block: 3`` blocks the third attempt
of a call that failed twice with the same error.

The package, one concept per module: :mod:`~loopwatch.adaptive.settings` (the validated
``loopwatch.adaptive`` block), :mod:`~loopwatch.adaptive.progress` (which calls change state),
:mod:`~loopwatch.adaptive.failures` (failure texts, error classes),
:mod:`~loopwatch.adaptive.facts` (the per-call record) and
:mod:`~loopwatch.adaptive.detectors` (the detectors and their table).
"""

from __future__ import annotations

from loopwatch.adaptive.detectors import (
    ADAPTIVE_DETECTORS,
    CYCLE,
    IDENTICAL_STREAK,
    REPEATED_FAILURE,
    SAME_ERROR,
    AdaptiveLevel,
    AdaptiveVerdict,
    evaluate_adaptive,
)
from loopwatch.adaptive.facts import (
    AdaptiveRecord,
    build_adaptive_record,
    encode_facts,
    record_from_history,
)
from loopwatch.adaptive.failures import classify_error, normalize_error_text, result_failure_text
from loopwatch.adaptive.progress import (
    DEFAULT_MUTATING_TOOLS,
    DEFAULT_SHELL_TOOLS,
    DEFAULT_THINKING_TOOLS,
    READ_ONLY_ACTIONS,
    is_mutating_call,
    shell_command_mutates,
)
from loopwatch.adaptive.settings import (
    CONFIG_PATH,
    DEFAULT_ADAPTIVE_CONFIG,
    AdaptiveConfig,
    CycleSettings,
    DetectorThresholds,
)
from loopwatch.messages import (
    MSG_CYCLE_CRITICAL,
    MSG_CYCLE_WARNING,
    MSG_IDENTICAL_STREAK_CRITICAL,
    MSG_IDENTICAL_STREAK_WARNING,
    MSG_REPEATED_FAILURE_CRITICAL,
    MSG_REPEATED_FAILURE_WARNING,
    MSG_SAME_ERROR_CRITICAL,
    MSG_SAME_ERROR_WARNING,
)

__all__ = [
    "ADAPTIVE_DETECTORS",
    "CONFIG_PATH",
    "CYCLE",
    "DEFAULT_ADAPTIVE_CONFIG",
    "DEFAULT_MUTATING_TOOLS",
    "DEFAULT_SHELL_TOOLS",
    "DEFAULT_THINKING_TOOLS",
    "IDENTICAL_STREAK",
    "MSG_CYCLE_CRITICAL",
    "MSG_CYCLE_WARNING",
    "MSG_IDENTICAL_STREAK_CRITICAL",
    "MSG_IDENTICAL_STREAK_WARNING",
    "MSG_REPEATED_FAILURE_CRITICAL",
    "MSG_REPEATED_FAILURE_WARNING",
    "MSG_SAME_ERROR_CRITICAL",
    "MSG_SAME_ERROR_WARNING",
    "READ_ONLY_ACTIONS",
    "REPEATED_FAILURE",
    "SAME_ERROR",
    "AdaptiveConfig",
    "AdaptiveLevel",
    "AdaptiveRecord",
    "AdaptiveVerdict",
    "CycleSettings",
    "DetectorThresholds",
    "build_adaptive_record",
    "classify_error",
    "encode_facts",
    "evaluate_adaptive",
    "is_mutating_call",
    "normalize_error_text",
    "record_from_history",
    "result_failure_text",
    "shell_command_mutates",
]
