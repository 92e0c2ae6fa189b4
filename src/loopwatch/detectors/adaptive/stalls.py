"""The adaptive detectors for stalls OpenClaw 9 describes (REFERENCE-NOTES §1.4), in our form.

* **argument_churn** — one tool alternating between a few argument variants, every call
  with one shared outcome: the same error class, "changed nothing", or the same result.
* **terminal_failure** — consecutive shell failures, whatever the command, with one failure
  identity once timestamps, clock times, retry counts, durations and pids are masked.
* **typed_error** — one tool failing with the same error code (errno, HTTP status,
  ``code=…``) while its arguments change.
* **unchanged_write** — the same write again after it reported that it changed nothing.
* **poll_no_progress** — the same poll (a waiting tool, ``sleep N && …``) in a row with
  unchanged output.

Each has warn/block thresholds and an ``enabled`` toggle in ``loopwatch.adaptive`` and its
own model-facing message; all are pure functions of the records.
"""

from __future__ import annotations

from typing import Final

from loopwatch.detectors.adaptive.facts import AdaptiveRecord
from loopwatch.detectors.adaptive.verdicts import (
    AdaptiveVerdict,
    DetectionContext,
    streak_verdict,
)

ARGUMENT_CHURN: Final = "argument_churn"
TERMINAL_FAILURE: Final = "terminal_failure"
TYPED_ERROR: Final = "typed_error"
UNCHANGED_WRITE: Final = "unchanged_write"
POLL_NO_PROGRESS: Final = "poll_no_progress"

#: Most argument variants a churn may alternate between (more is exploration).
MAX_CHURN_VARIANTS: Final = 3

# --- model-facing messages -----------------------------------------------------------------

MSG_ARGUMENT_CHURN_WARNING: Final = (
    "WARNING: {tool} has alternated between {variants} argument variants for {prior} calls, "
    "with the same outcome every time. Switching between them is not making progress: find "
    "out why they all fail or change nothing, then try a different approach."
)
MSG_ARGUMENT_CHURN_CRITICAL: Final = (
    "CRITICAL: Blocked {tool}: it has alternated between {variants} argument variants for "
    "{prior} calls with the same outcome every time. Stop alternating: address the cause, use "
    "a different approach, or report that the task cannot be completed."
)
MSG_TERMINAL_FAILURE_WARNING: Final = (
    "WARNING: The last {prior} commands failed with the same output (timestamps, durations "
    "and process ids aside). Another variant will fail the same way: read the output, fix "
    "the cause it names, then run the command again."
)
MSG_TERMINAL_FAILURE_CRITICAL: Final = (
    "CRITICAL: Blocked {tool}: the last {prior} commands failed with the same output "
    "(timestamps, durations and process ids aside). Fix the cause the output names before "
    "running more commands, or report that the task cannot be completed."
)
MSG_TYPED_ERROR_WARNING: Final = (
    "WARNING: {tool} has failed {prior} times with the same error code although its "
    "arguments changed. The code names the cause (a missing resource, a permission, a "
    "limit): deal with it instead of varying the arguments."
)
MSG_TYPED_ERROR_CRITICAL: Final = (
    "CRITICAL: Blocked {tool}: it failed {prior} times with the same error code across "
    "different arguments. Address what the code means, use a different approach, or report "
    "that the task cannot be completed."
)
MSG_UNCHANGED_WRITE_WARNING: Final = (
    "WARNING: This {tool} call already reported {prior} times that it changed nothing. "
    "Writing it again will not change anything either: check what the target already "
    "contains and what actually needs to change."
)
MSG_UNCHANGED_WRITE_CRITICAL: Final = (
    "CRITICAL: Blocked {tool}: the same write already reported {prior} times that it "
    "changed nothing. The content is in place: verify the result and move on to the next "
    "step."
)
MSG_POLL_NO_PROGRESS_WARNING: Final = (
    "WARNING: {tool} has polled {prior} times in a row with unchanged output. Waiting longer "
    "is not changing anything: check whether what you wait for is stuck, read its logs, or "
    "do something else meanwhile."
)
MSG_POLL_NO_PROGRESS_CRITICAL: Final = (
    "CRITICAL: Blocked {tool}: {prior} polls in a row returned unchanged output. Stop "
    "waiting on it: inspect or restart what you are waiting for, or report that the task "
    "cannot be completed."
)

# --- what would have reset each count (operator-facing) ------------------------------------

RESETS_ARGUMENT_CHURN: Final = (
    "another tool in between, a new argument variant, or a call with a different outcome"
)
RESETS_TERMINAL_FAILURE: Final = (
    "a successful command, a different failure output, or a successful state-changing call"
)
RESETS_TYPED_ERROR: Final = "a success of this tool, or a successful state-changing call"
RESETS_UNCHANGED_WRITE: Final = "a write that changes something, or a successful state change"
RESETS_POLL_NO_PROGRESS: Final = "a change in the poll's output, or another call in between"


def _churn_outcome(record: AdaptiveRecord) -> str | None:
    """What every call of a churn shares: an error class, "changed nothing", or a result.

    A success counts with its result hash, so only variants whose output is one and the
    same (the variation changed nothing) churn; a mutating success is progress instead.
    """
    if record.failed:
        return record.error_class
    if record.unchanged:
        return "unchanged"
    return None if record.mutating else f"ok:{record.result_hash}"


def detect_argument_churn(ctx: DetectionContext) -> AdaptiveVerdict | None:
    """The newest run of this tool's calls alternating between 2-3 variants, no progress."""
    thresholds = ctx.config.argument_churn
    if not thresholds.enabled:
        return None
    indices: list[int] = []
    outcome_of: dict[str, str | None] = {}
    shared: str | None = None
    for index in range(len(ctx.records) - 1, ctx.segment - 1, -1):
        record = ctx.records[index]
        if record.transparent:
            continue
        if record.tool_name != ctx.tool or record.result_hash is None:
            break
        outcome = _churn_outcome(record)
        if outcome is None or (shared is not None and outcome != shared):
            break
        if outcome_of.setdefault(record.args_hash, record.result_hash) != record.result_hash:
            break  # one variant, two outcomes: something changes
        if len(outcome_of) > MAX_CHURN_VARIANTS:
            break
        shared = outcome
        indices.append(index)
    if len(outcome_of) > MAX_CHURN_VARIANTS:
        kept = set(list(outcome_of)[:MAX_CHURN_VARIANTS])
        indices = [i for i in indices if ctx.records[i].args_hash in kept]
    variants = {ctx.records[i].args_hash for i in indices}
    if len(variants) < 2 or ctx.args_hash not in variants:
        return None
    indices.reverse()
    return streak_verdict(
        ARGUMENT_CHURN,
        indices,
        thresholds,
        MSG_ARGUMENT_CHURN_WARNING,
        MSG_ARGUMENT_CHURN_CRITICAL,
        ctx.tool,
        f"{shared}",
        RESETS_ARGUMENT_CHURN,
        variants=len(variants),
    )


def detect_terminal_failure(ctx: DetectionContext) -> AdaptiveVerdict | None:
    """Consecutive failed shell commands, any arguments, with one masked failure identity."""
    thresholds = ctx.config.terminal_failure
    shells = ctx.config.all_shell_tools
    if not thresholds.enabled or ctx.tool not in shells:
        return None
    indices: list[int] = []
    identity: str | None = None
    for index in range(len(ctx.records) - 1, ctx.segment - 1, -1):
        record = ctx.records[index]
        if record.transparent:
            continue
        if (
            record.tool_name not in shells
            or not record.failed
            or record.error_class is None  # a bare exit status is no identity
            or (identity is not None and record.failure_hash != identity)
        ):
            break
        identity = record.failure_hash
        indices.append(index)
    if len({ctx.records[i].args_hash for i in indices}) < 2:
        return None  # one command failing again is repeated_failure's case
    indices.reverse()
    return streak_verdict(
        TERMINAL_FAILURE,
        indices,
        thresholds,
        MSG_TERMINAL_FAILURE_WARNING,
        MSG_TERMINAL_FAILURE_CRITICAL,
        ctx.tool,
        str(identity),
        RESETS_TERMINAL_FAILURE,
    )


def detect_typed_error(ctx: DetectionContext) -> AdaptiveVerdict | None:
    """This tool's failures since the last progress sharing the newest failure's error code.

    Any success of the tool ends the run of failures, as for ``same_error``.
    """
    thresholds = ctx.config.typed_error
    if not thresholds.enabled:
        return None
    failures: list[int] = []
    for index in range(ctx.segment, len(ctx.records)):
        record = ctx.records[index]
        if record.transparent or record.tool_name != ctx.tool or record.result_hash is None:
            continue
        if record.failed:
            failures.append(index)
        else:
            failures.clear()
    if not failures:
        return None
    code = ctx.records[failures[-1]].error_code
    if code is None:
        return None
    indices = [i for i in failures if ctx.records[i].error_code == code]
    if len({ctx.records[i].args_hash for i in indices}) < 2:
        return None
    return streak_verdict(
        TYPED_ERROR,
        indices,
        thresholds,
        MSG_TYPED_ERROR_WARNING,
        MSG_TYPED_ERROR_CRITICAL,
        ctx.tool,
        code,
        RESETS_TYPED_ERROR,
    )


def detect_unchanged_write(ctx: DetectionContext) -> AdaptiveVerdict | None:
    """Earlier calls of this exact write that reported no change, since the last progress."""
    thresholds = ctx.config.unchanged_write
    if not thresholds.enabled:
        return None
    indices = [
        index
        for index in range(ctx.segment, len(ctx.records))
        if ctx.records[index].unchanged
        and ctx.records[index].tool_name == ctx.tool
        and ctx.records[index].args_hash == ctx.args_hash
    ]
    if not indices:
        return None
    return streak_verdict(
        UNCHANGED_WRITE,
        indices,
        thresholds,
        MSG_UNCHANGED_WRITE_WARNING,
        MSG_UNCHANGED_WRITE_CRITICAL,
        ctx.tool,
        ctx.args_hash,
        RESETS_UNCHANGED_WRITE,
    )


def detect_poll_no_progress(ctx: DetectionContext) -> AdaptiveVerdict | None:
    """The newest run of this exact poll with one unchanged output (thinking skipped)."""
    thresholds = ctx.config.poll_no_progress
    if not thresholds.enabled:
        return None
    indices: list[int] = []
    reference: str | None = None
    for index in range(len(ctx.records) - 1, ctx.start - 1, -1):
        record = ctx.records[index]
        if record.transparent:
            continue
        if (
            not record.polling
            or record.tool_name != ctx.tool
            or record.args_hash != ctx.args_hash
            or record.result_hash is None
            or (reference is not None and record.result_hash != reference)
        ):
            break
        reference = record.result_hash
        indices.append(index)
    if not indices:
        return None
    indices.reverse()
    return streak_verdict(
        POLL_NO_PROGRESS,
        indices,
        thresholds,
        MSG_POLL_NO_PROGRESS_WARNING,
        MSG_POLL_NO_PROGRESS_CRITICAL,
        ctx.tool,
        f"{ctx.args_hash}:{reference}",
        RESETS_POLL_NO_PROGRESS,
    )
