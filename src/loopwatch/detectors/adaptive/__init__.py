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
* the stall detectors of :mod:`~loopwatch.detectors.adaptive.stalls` — **unchanged_write**,
  **poll_no_progress**, **terminal_failure**, **typed_error**, **argument_churn**.

**Progress resets.** A successful call that could have changed the outcome (a mutating tool,
a shell command that is not read-only, the read a "read it first" error asks for) starts a
new *segment*: the failure counts only look at the calls since the last progress, so "edit,
then re-run the test" and "git config, then commit again" are never loops. Repeating the very
same write (same arguments, same outcome) within a segment is not new progress. Calls of
thinking tools (``think``) and calls the user rejected, interrupted or cancelled are
transparent: they never break a streak and are never part of a loop.

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
        repeatedFailure: { enabled: true, warn: 3, block: 3 },  // warn == block: no warning
        sameError:       { enabled: true, warn: 4, block: 6 },
        identicalStreak: { enabled: true, warn: 3, block: 3 },
        cycle: { enabled: true, minPeriod: 2, maxPeriod: 5, warnLaps: 2, blockLaps: 3 },
        unchangedWrite:  { enabled: true, warn: 2, block: 3 },
        pollNoProgress:  { enabled: true, warn: 8, block: 12 },
        terminalFailure: { enabled: true, warn: 3, block: 5 },
        typedError:      { enabled: true, warn: 4, block: 6 },
        argumentChurn:   { enabled: true, warn: 6, block: 9 },
        mutatingTools: ["book_reservation"],         // added to the built-in list
        thinkingTools: ["scratchpad"],               // added to ["think"]
        shellTools: ["run"],                         // added to the built-in list
        pollTools: ["wait_for_job"],                 // added to the built-in list
        readOnlyCommands: ["kubectl"],               // added to READ_ONLY_COMMANDS
      },
    }

Every count includes the upcoming call: ``repeatedFailure.block: 3`` blocks the third attempt
of a call that failed twice with the same error.

The package, one concept per module (each under ``loopwatch.detectors.adaptive``):
:mod:`~loopwatch.detectors.adaptive.settings` (the validated ``loopwatch.adaptive`` block),
:mod:`~loopwatch.detectors.adaptive.progress` (which calls change state),
:mod:`~loopwatch.detectors.adaptive.failures` (failure texts, error classes),
:mod:`~loopwatch.detectors.adaptive.facts` (the per-call record),
:mod:`~loopwatch.detectors.adaptive.verdicts` (what detectors share),
:mod:`~loopwatch.detectors.adaptive.screens` (what lets a detector be skipped),
:mod:`~loopwatch.detectors.adaptive.stalls` (the stall detectors) and
:mod:`~loopwatch.detectors.adaptive.detectors` (the first four and the one table of all of
them).
"""

from __future__ import annotations

from loopwatch.detectors.adaptive.detectors import (
    ADAPTIVE_DETECTORS,
    CYCLE,
    DETECTOR_TABLE,
    IDENTICAL_STREAK,
    REPEATED_FAILURE,
    SAME_ERROR,
    evaluate_adaptive,
)
from loopwatch.detectors.adaptive.facts import (
    AdaptiveRecord,
    build_adaptive_record,
    encode_facts,
    record_from_history,
)
from loopwatch.detectors.adaptive.failures import (
    classify_error,
    error_code,
    is_dismissal,
    mask_volatile,
    normalize_error_text,
    result_failure_text,
)
from loopwatch.detectors.adaptive.progress import (
    DEFAULT_MUTATING_TOOLS,
    DEFAULT_POLL_TOOLS,
    DEFAULT_SHELL_TOOLS,
    DEFAULT_THINKING_TOOLS,
    READ_ONLY_ACTIONS,
    is_mutating_call,
    is_poll_call,
)
from loopwatch.detectors.adaptive.settings import (
    CONFIG_PATH,
    DEFAULT_ADAPTIVE_CONFIG,
    AdaptiveConfig,
    CycleSettings,
    DetectorThresholds,
)
from loopwatch.detectors.adaptive.shell_text import (
    READ_ONLY_COMMANDS,
    READ_ONLY_GIT,
    shell_command_is_read_only,
    shell_command_mutates,
)
from loopwatch.detectors.adaptive.stalls import (
    ARGUMENT_CHURN,
    MSG_ARGUMENT_CHURN_CRITICAL,
    MSG_ARGUMENT_CHURN_WARNING,
    MSG_POLL_NO_PROGRESS_CRITICAL,
    MSG_POLL_NO_PROGRESS_WARNING,
    MSG_TERMINAL_FAILURE_CRITICAL,
    MSG_TERMINAL_FAILURE_WARNING,
    MSG_TYPED_ERROR_CRITICAL,
    MSG_TYPED_ERROR_WARNING,
    MSG_UNCHANGED_WRITE_CRITICAL,
    MSG_UNCHANGED_WRITE_WARNING,
    POLL_NO_PROGRESS,
    TERMINAL_FAILURE,
    TYPED_ERROR,
    UNCHANGED_WRITE,
)
from loopwatch.detectors.adaptive.verdicts import (
    AdaptiveLevel,
    AdaptiveVerdict,
    DetectionContext,
    Detector,
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
    "ARGUMENT_CHURN",
    "CONFIG_PATH",
    "CYCLE",
    "DEFAULT_ADAPTIVE_CONFIG",
    "DEFAULT_MUTATING_TOOLS",
    "DEFAULT_POLL_TOOLS",
    "DEFAULT_SHELL_TOOLS",
    "DEFAULT_THINKING_TOOLS",
    "DETECTOR_TABLE",
    "IDENTICAL_STREAK",
    "MSG_ARGUMENT_CHURN_CRITICAL",
    "MSG_ARGUMENT_CHURN_WARNING",
    "MSG_CYCLE_CRITICAL",
    "MSG_CYCLE_WARNING",
    "MSG_IDENTICAL_STREAK_CRITICAL",
    "MSG_IDENTICAL_STREAK_WARNING",
    "MSG_POLL_NO_PROGRESS_CRITICAL",
    "MSG_POLL_NO_PROGRESS_WARNING",
    "MSG_REPEATED_FAILURE_CRITICAL",
    "MSG_REPEATED_FAILURE_WARNING",
    "MSG_SAME_ERROR_CRITICAL",
    "MSG_SAME_ERROR_WARNING",
    "MSG_TERMINAL_FAILURE_CRITICAL",
    "MSG_TERMINAL_FAILURE_WARNING",
    "MSG_TYPED_ERROR_CRITICAL",
    "MSG_TYPED_ERROR_WARNING",
    "MSG_UNCHANGED_WRITE_CRITICAL",
    "MSG_UNCHANGED_WRITE_WARNING",
    "POLL_NO_PROGRESS",
    "READ_ONLY_ACTIONS",
    "READ_ONLY_COMMANDS",
    "READ_ONLY_GIT",
    "REPEATED_FAILURE",
    "SAME_ERROR",
    "TERMINAL_FAILURE",
    "TYPED_ERROR",
    "UNCHANGED_WRITE",
    "AdaptiveConfig",
    "AdaptiveLevel",
    "AdaptiveRecord",
    "AdaptiveVerdict",
    "CycleSettings",
    "DetectionContext",
    "Detector",
    "DetectorThresholds",
    "build_adaptive_record",
    "classify_error",
    "encode_facts",
    "error_code",
    "evaluate_adaptive",
    "is_dismissal",
    "is_mutating_call",
    "is_poll_call",
    "mask_volatile",
    "normalize_error_text",
    "record_from_history",
    "result_failure_text",
    "shell_command_is_read_only",
    "shell_command_mutates",
]
