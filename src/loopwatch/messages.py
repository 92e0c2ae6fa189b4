"""Every model-facing message and operator-facing log template, defined once.

The texts are part of the contract (SPEC §4, §5, §6, §10): tests assert them exactly and
the reference implementation prints the same words, so nothing else in loopwatch spells
them out. Templates use ``str.format`` fields.
"""

from __future__ import annotations

from typing import Final

# --- Detector verdict messages (SPEC §4), model-facing -------------------------------------

UNKNOWN_TOOL_CRITICAL: Final = (
    "CRITICAL: attempted unavailable tool {name} {count} times. "
    "Stop retrying that missing tool and answer without it."
)
GLOBAL_CRITICAL: Final = (
    "CRITICAL: {tool} has repeated identical no-progress outcomes {count} times. "
    "Session execution blocked by global circuit breaker to prevent runaway loops."
)
POLL_CRITICAL: Final = (
    "CRITICAL: Called {tool} with identical arguments and no progress {count} times. "
    "This appears to be a stuck polling loop. Session execution blocked to prevent "
    "resource waste."
)
POLL_WARNING: Final = (
    "WARNING: You have called {tool} {count} times with identical arguments and no "
    "progress. Stop polling and either (1) increase wait time between checks, or (2) "
    "report the task as failed if the process is stuck."
)
PING_PONG_CRITICAL: Final = (
    "CRITICAL: You are alternating between repeated tool-call patterns ({count} "
    "consecutive calls) with no progress. This appears to be a stuck ping-pong loop. "
    "Session execution blocked to prevent resource waste."
)
PING_PONG_WARNING: Final = (
    "WARNING: You are alternating between repeated tool-call patterns ({count} "
    "consecutive calls). This looks like a ping-pong loop; stop retrying and report the "
    "task as failed."
)
GENERIC_CRITICAL: Final = (
    "CRITICAL: Called {tool} with identical arguments and identical outcomes {count} "
    "times. Session execution blocked to prevent runaway loops."
)
GENERIC_WARNING: Final = (
    "WARNING: You have called {tool} {count} times with identical arguments. If this is "
    "not making progress, stop retrying and report the task as failed."
)

# --- Detector log lines (SPEC §4), logger ``loopwatch.detection`` --------------------------

LOG_GLOBAL_CRITICAL: Final = (
    "Global circuit breaker triggered: {tool} repeated {count} times with no progress"
)
LOG_POLL_CRITICAL: Final = "Critical polling loop detected: {tool} repeated {count} times"
LOG_POLL_WARNING: Final = "Polling loop warning: {tool} repeated {count} times"
LOG_PING_PONG_CRITICAL: Final = (
    "Critical ping-pong loop detected: alternating calls count={count} currentTool={tool}"
)
LOG_PING_PONG_WARNING: Final = (
    "Ping-pong loop warning: alternating calls count={count} currentTool={tool}"
)
LOG_GENERIC_CRITICAL: Final = "Critical generic loop detected: {tool} repeated {count} times"
LOG_GENERIC_WARNING: Final = "Loop warning: {tool} called {count} times with identical arguments"

# --- Post-compaction guard (SPEC §6), logger ``loopwatch.guard`` ---------------------------

COMPACTION_LOOP_PERSISTED: Final = (
    "CRITICAL: tool {tool} repeated {count} times with identical arguments and identical "
    "results within {window_size} attempts after auto-compaction. The compaction did not "
    "break the loop. Aborting to prevent runaway resource use."
)
LOG_GUARD_ARMED: Final = "post-compaction guard armed for {attempts} attempts"
LOG_GUARD_ABORT: Final = (
    "post-compaction loop persisted: tool={tool} repeated {count} times with identical "
    "args+result post-compaction"
)

# --- Stream-level unknown-tool guard (SPEC §5.7), model-facing -----------------------------

UNKNOWN_TOOL_STREAM: Final = (
    "I can't use the tool \"{name}\" here because it isn't available. I need to stop "
    "retrying it and answer without that tool."
)
BLANK_TOOL_NAME: Final = "blank tool name"

# --- Session engine (SPEC §5, §10), loggers ``loopwatch.tools`` / ``.diagnostics`` ---------

LOG_BLOCKING: Final = "Blocking {tool} due to critical loop: {message}"
LOG_LOOP_WARNING: Final = "Loop warning for {tool}: {message}"
LOG_DIAGNOSTIC: Final = (
    "tool loop: sessionId=unknown sessionKey={session_key} tool={tool} level={level} "
    'action={action} detector={detector} count={count}{paired} message="{message}"'
)
LOG_DIAGNOSTIC_PAIRED: Final = " pairedTool={paired_tool}"
LOG_DETECTION_FAILED: Final = "tool loop detection failed: tool={tool} error={error}"
LOG_OUTCOME_FAILED: Final = "tool loop outcome tracking failed: tool={tool} error={error}"
LOG_NO_SESSION_KEY: Final = "tool loop detection skipped: no session key"
LOG_LISTENER_FAILED: Final = "event listener failed: type={type} error={error}"

#: ``deniedReason`` of a loop block; the veto rule (SPEC §3.3 step 4) keys on it.
DENIED_REASON_TOOL_LOOP: Final = "tool-loop"
#: The result of a batch call that was not run because another call of its batch was
#: blocked (``LoopGuard.before_batch``): the whole batch is refused before anything runs.
BATCH_SIBLING_BLOCKED: Final = (
    "This tool was not executed because another call in the same batch was blocked as a "
    "repeated loop. Reassess the task before choosing the next action."
)
LOG_COMPACTION_RETRY_FAILED: Final = "post-compaction guard arm failed: error={error}"

# --- Store failures (fail-open / fail-closed policy), logger ``loopwatch.store`` ---------

LOG_STORE_ERROR: Final = (
    "loop detection store failed: operation={operation} error={error} policy={policy}"
)
#: The :class:`~loopwatch.errors.StoreError` a read-only accessor (``LoopGuard.history``,
#: ...) raises when the store or the clock failed in a way that is not a ``StoreError``.
ACCESSOR_FAILED: Final = "{accessor} failed: {error}"
STORE_UNAVAILABLE_CRITICAL: Final = (
    "CRITICAL: loop detection is unavailable (its state store failed), so {tool} was not "
    "run. Try again shortly or continue without it."
)

# --- Adapters (SPEC §11) -------------------------------------------------------------------

#: Put between what the model is shown and an appended warning.
WARNING_SEPARATOR: Final = "\n\n"
#: Error recorded for a call of an unknown tool when the framework's own message does not
#: name the tool in a form SPEC §3.5 recognises.
UNKNOWN_TOOL_ERROR: Final = "Unknown tool: {name}"
#: Raised by the explicit form when a ``with`` block ends without reporting an outcome.
NO_OUTCOME_REPORTED: Final = (
    "guarded call of {tool!r} ended without c.result(...) or c.error(...): report what the "
    "model is shown, or the loop detector never sees this call's outcome"
)
#: Raised when a host reports an outcome for a call loopwatch blocked.
BLOCKED_CALL_RAN: Final = "the call of {tool!r} was blocked: do not run the tool, show c.shown"

# --- MCP proxy, logger ``loopwatch.mcp_proxy`` (stderr only) ---------------------------------

MCP_LOG_STARTED: Final = "mcp-proxy: started {command} (session {session})"
MCP_LOG_CANNOT_START: Final = "mcp-proxy: cannot start {command}: {error}"
MCP_LOG_SERVER_EXITED: Final = "mcp-proxy: server exited with code {code}"
MCP_LOG_CLIENT_GONE: Final = "mcp-proxy: the client closed the connection"
MCP_LOG_RELAY_FAILED: Final = "mcp-proxy: relaying the client's messages failed: {error}"
MCP_LOG_DETECTION_OFF: Final = (
    "mcp-proxy: loop detection is off in {path}: set tools.loopDetection.enabled to true"
)

# --- Adaptive profile detector lines, logger ``loopwatch.detection`` ------------------------

LOG_ADAPTIVE_CRITICAL: Final = "Adaptive loop detected: {detector} {tool} count={count}"
LOG_ADAPTIVE_WARNING: Final = "Adaptive loop warning: {detector} {tool} count={count}"

# --- Adaptive profile verdicts (issue 06), model-facing ----------------------------------
# ``{tool}`` is the normalised tool name, ``{count}`` the detector's count (the upcoming call
# included), ``{prior}`` = count - 1, ``{period}`` / ``{laps}`` / ``{tools}`` describe a cycle.
# Parameter values never appear: loopwatch keeps only digests of them.

MSG_REPEATED_FAILURE_WARNING: Final = (
    "WARNING: This would be attempt {count} of the same {tool} call, which has failed every "
    "time with the same error. Do not repeat it unchanged: read the error message, then change "
    "the arguments or try a different approach."
)
MSG_REPEATED_FAILURE_CRITICAL: Final = (
    "CRITICAL: Blocked attempt {count} of the same {tool} call, which failed {prior} times with "
    "the same error. Repeating it will not help: fix what the error reports, change the "
    "arguments or the approach, or report that the task cannot be completed."
)
MSG_SAME_ERROR_WARNING: Final = (
    "WARNING: {tool} has returned the same error {prior} times although its arguments changed. "
    "Varying the arguments is not fixing it: read the error, deal with its cause (a missing "
    "prerequisite, a wrong assumption about the environment), or try a different approach."
)
MSG_SAME_ERROR_CRITICAL: Final = (
    "CRITICAL: Blocked {tool}: it returned the same error {prior} times with different "
    "arguments. Stop varying the arguments: address the cause the error names, use a "
    "different tool or approach, or report that the task cannot be completed."
)
MSG_IDENTICAL_STREAK_WARNING: Final = (
    "WARNING: This would be call {count} in a row of {tool} with identical arguments, and the "
    "previous {prior} returned identical results. Calling it again will return the same "
    "result: use the result you already have and move on to the next step."
)
MSG_IDENTICAL_STREAK_CRITICAL: Final = (
    "CRITICAL: Blocked call {count} in a row of {tool} with identical arguments; the previous "
    "{prior} returned identical results. Use the result you already have and continue with a "
    "different step, or report that the task cannot be completed."
)
MSG_CYCLE_WARNING: Final = (
    "WARNING: The same sequence of {period} calls ({tools}) has run {laps} times in a row with "
    "identical results, and {tool} would start it again. The cycle is making no progress: "
    "change an argument, try a different approach, or report that the task cannot be completed."
)
MSG_CYCLE_CRITICAL: Final = (
    "CRITICAL: Blocked {tool}: the same sequence of {period} calls ({tools}) has already run "
    "{laps} times in a row with identical results. Stop cycling: change the approach or report "
    "that the task cannot be completed."
)
