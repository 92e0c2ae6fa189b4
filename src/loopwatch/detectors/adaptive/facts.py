"""Facts: the adaptive view of one call (digests and flags), built once and stored compactly.

:func:`build_adaptive_record` is the only place that sees a call's raw params, result and
error; what it keeps (:class:`AdaptiveRecord`) is digests and flags, encoded on the history
record as one short string (:func:`encode_facts`) and read back by
:func:`record_from_history`.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from typing import Final

from loopwatch.core._undefined import UNDEFINED
from loopwatch.core.fingerprint import digest, hash_tool_call, raw_text_digest
from loopwatch.core.outcomes import OutcomeHash, error_text, hash_tool_outcome
from loopwatch.detectors.adaptive.failures import (
    _result_text,
    asks_for_read,
    classify_error,
    error_code,
    failure_text_in,
    is_dismissal,
    mask_volatile,
)
from loopwatch.detectors.adaptive.progress import (
    is_mutating_call,
    is_poll_call,
    read_target,
    reports_unchanged,
    target_path,
)
from loopwatch.detectors.adaptive.settings import DEFAULT_ADAPTIVE_CONFIG, AdaptiveConfig


@dataclass(frozen=True, slots=True, init=False)
class AdaptiveRecord:
    """What the adaptive detectors know about one call: digests and flags, never raw data.

    Attributes:
        tool_name: the normalised tool name (SPEC §5.1).
        args_hash: the call signature ``tool:sha256`` (SPEC §3.2).
        result_hash: the reference outcome hash (SPEC §3.3; errors are ``"error:" + …``), or
            ``None`` while the call is pending or when nothing was hashed.
        error_class: a digest of the *normalised* error text (echoed arguments, numbers,
            hex ids, paths and quoted strings removed), so "the same error with slightly
            different arguments" collides; ``None`` when the call did not fail or its error
            says nothing beyond an exit status.
        failure_hash: for a failed call, a digest of everything the model saw of the failure
            (the error text *and* the result's text) with timestamps, clock times, retry
            counts, durations and pids masked; ``None`` otherwise. "The same error again"
            compares these: a shell tool's error is often only ``returncode 1`` while the
            output that comes with it differs from one run to the next.
        failed: the call failed: an error was raised, or the result itself reports a
            failure (``ERROR: …``, a non-zero exit, ``isError``; see :func:`result_failure_text`).
        mutating: a successful call that could change state (a mutating tool, or a shell
            command that is not read-only); a candidate progress reset.
        thinking: a call of a thinking/scratch tool; transparent to every detector.
        polling: a poll (SPEC §4 ``knownPoll``, a waiting tool, ``sleep N && …``); judged
            by the poll detector only.
        dismissed: the user rejected, cancelled or interrupted the call (or it was cancelled
            with a failed sibling of its batch): not a failure, transparent to every detector.
        unchanged: a write that reported it changed nothing: no progress.
        error_code: a digest of the typed error a failure names (errno, HTTP status,
            ``code=…``), or ``None``.
        needs_read: for a failure that asks for the file to be read first, a digest of that
            file's path; a later successful read of it (``read_key``) is progress.
        read_key: for a successful read of one file, a digest of its path.
    """

    tool_name: str
    args_hash: str
    result_hash: str | None = None
    error_class: str | None = None
    failure_hash: str | None = None
    failed: bool = False
    mutating: bool = False
    thinking: bool = False
    polling: bool = False
    dismissed: bool = False
    unchanged: bool = False
    error_code: str | None = None
    needs_read: str | None = None
    read_key: str | None = None
    #: Invisible to every detector: a thinking call, or one the user dismissed. Derived
    #: (``thinking or dismissed``) once, when the record is built: the detectors ask it of
    #: every record of the window on every call.
    transparent: bool = field(init=False, repr=False, compare=False)

    def __init__(
        self,
        tool_name: str,
        args_hash: str,
        result_hash: str | None = None,
        error_class: str | None = None,
        failure_hash: str | None = None,
        failed: bool = False,
        mutating: bool = False,
        thinking: bool = False,
        polling: bool = False,
        dismissed: bool = False,
        unchanged: bool = False,
        error_code: str | None = None,
        needs_read: str | None = None,
        read_key: str | None = None,
    ) -> None:
        # What the generated __init__ of a frozen dataclass does (one ``object.__setattr__``
        # per field), each slot written through its own descriptor: twice as fast, and a
        # record is built on every call.
        _set_tool_name(self, tool_name)
        _set_args_hash(self, args_hash)
        _set_result_hash(self, result_hash)
        _set_error_class(self, error_class)
        _set_failure_hash(self, failure_hash)
        _set_failed(self, failed)
        _set_mutating(self, mutating)
        _set_thinking(self, thinking)
        _set_polling(self, polling)
        _set_dismissed(self, dismissed)
        _set_unchanged(self, unchanged)
        _set_error_code(self, error_code)
        _set_needs_read(self, needs_read)
        _set_read_key(self, read_key)
        _set_transparent(self, thinking or dismissed)


#: The fields of :class:`AdaptiveRecord` in the order its ``__init__`` sets them.
_RECORD_FIELDS: Final = (
    "tool_name",
    "args_hash",
    "result_hash",
    "error_class",
    "failure_hash",
    "failed",
    "mutating",
    "thinking",
    "polling",
    "dismissed",
    "unchanged",
    "error_code",
    "needs_read",
    "read_key",
    "transparent",
)
# The slot descriptors' setters (the frozen class's __setattr__ refuses every write).
(
    _set_tool_name,
    _set_args_hash,
    _set_result_hash,
    _set_error_class,
    _set_failure_hash,
    _set_failed,
    _set_mutating,
    _set_thinking,
    _set_polling,
    _set_dismissed,
    _set_unchanged,
    _set_error_code,
    _set_needs_read,
    _set_read_key,
    _set_transparent,
) = (vars(AdaptiveRecord)[name].__set__ for name in _RECORD_FIELDS)


# --- building records -----------------------------------------------------------------------

#: Digest length kept for paths and error codes: enough to tell them apart within a window.
_SHORT_DIGEST: Final = 16


def _short(kind: str, value: str) -> str:
    return kind + raw_text_digest(value)[:_SHORT_DIGEST]


def build_adaptive_record(
    tool_name: str,
    params: object,
    *,
    result: object = UNDEFINED,
    error: object = UNDEFINED,
    config: AdaptiveConfig = DEFAULT_ADAPTIVE_CONFIG,
    send_tools: Collection[str] = (),
    normalizers: Collection[str] = (),
    args_hash: str | None = None,
    outcome: OutcomeHash | None = None,
    reads: Callable[[str], bool] | None = None,
) -> AdaptiveRecord:
    """Build the record of one call from its raw params, result and error.

    This is the only place that sees raw data: the record keeps digests and flags. Call it
    at ``after_call`` time (the error's text is needed for ``error_class``); with neither
    ``result`` nor ``error`` it gives the pending record of a call that has not finished.

    Args:
        tool_name: the *normalised* tool name, as ``LoopGuard`` uses it (SPEC §5.1).
        params: the call's params.
        result: what the model was shown (``UNDEFINED``: no outcome).
        error: the failure (``UNDEFINED``: the call did not fail; ``None`` is an error,
            SPEC §9.1).
        config: the adaptive settings (tool sets).
        send_tools: as for :func:`loopwatch.hash_tool_outcome`.
        normalizers: as for :func:`loopwatch.hash_tool_call`.
        args_hash: the call signature when the host already computed it (hashed once).
        outcome: the outcome hash when the host already computed it (hashed once).
        reads: the read-only test of a shell command, when the caller keeps one that
            answers as ``shell_command_is_read_only(command,
            config.all_read_only_commands)`` does (the adaptive profile's
            :class:`~loopwatch.detectors.adaptive.progress.ReadOnlyMemo`).

    Returns:
        The record.

    Raises:
        TypeError: params, result or error cannot be serialised (SPEC §8.5), as for the
            reference hashes; ``LoopGuard`` fails open on it.
    """
    if args_hash is None:
        args_hash = hash_tool_call(tool_name, params, normalizers=normalizers)
    if outcome is None:
        outcome = hash_tool_outcome(
            tool_name,
            params,
            result=result,
            error=error,
            send_tools=send_tools,
            normalizers=normalizers,
        )
    thinking = tool_name in config.all_thinking_tools
    polling = is_poll_call(tool_name, params, config, reads=reads)
    if outcome.result_hash is None:
        return AdaptiveRecord(tool_name, args_hash, thinking=thinking, polling=polling)
    text = _result_text(result)
    failure = error_text(error) if error is not UNDEFINED else failure_text_in(result, text)
    if failure is not None and is_dismissal(failure):
        return AdaptiveRecord(
            tool_name, args_hash, outcome.result_hash, thinking=thinking, dismissed=True
        )
    if failure is None:
        unchanged = reports_unchanged(result, text)
        read = read_target(tool_name, params, config)
        return AdaptiveRecord(
            tool_name=tool_name,
            args_hash=args_hash,
            result_hash=outcome.result_hash,
            mutating=not unchanged and is_mutating_call(tool_name, params, config, reads=reads),
            thinking=thinking,
            polling=polling,
            unchanged=unchanged,
            read_key=_short("path:", read) if read is not None else None,
        )
    masked_failure = mask_volatile(failure)
    # A failure the result reports in-band is usually the result's whole text: masking is a
    # function of the text, so equal texts are masked once (the slowest step of a failure).
    masked = {
        "error": masked_failure,
        "result": (
            None if text is None else masked_failure if text == failure else mask_volatile(text)
        ),
    }
    code = error_code(failure)
    path = target_path(params) if asks_for_read(failure) else None
    return AdaptiveRecord(
        tool_name=tool_name,
        args_hash=args_hash,
        result_hash=outcome.result_hash,
        error_class=classify_error(failure, params),
        failure_hash=digest(masked)[:32],
        failed=True,
        thinking=thinking,
        polling=polling,
        error_code=_short("code:", code) if code is not None else None,
        needs_read=_short("path:", path) if path is not None else None,
    )


# --- stored form -----------------------------------------------------------------------------

_FACTS_SEP: Final = "|"
_FLAG_FIELDS: Final = ("failed", "mutating", "thinking", "polling", "dismissed", "unchanged")


def encode_facts(record: AdaptiveRecord) -> str:
    """The compact form kept on a history record (``ToolCallRecord.facts``).

    Six flag characters (failed, mutating, thinking, polling, dismissed, unchanged), then
    the error class, the failure hash, the error code, and the two path digests: digests and
    flags only, so every store can keep it as one short string. Facts written by an earlier
    version (four flags, two digests) still read back.
    """
    # Spelled out (one per field of _FLAG_FIELDS, in order): it runs once per call.
    return "".join(
        (
            "1" if record.failed else "0",
            "1" if record.mutating else "0",
            "1" if record.thinking else "0",
            "1" if record.polling else "0",
            "1" if record.dismissed else "0",
            "1" if record.unchanged else "0",
            _FACTS_SEP,
            record.error_class or "",
            _FACTS_SEP,
            record.failure_hash or "",
            _FACTS_SEP,
            record.error_code or "",
            _FACTS_SEP,
            record.needs_read or "",
            _FACTS_SEP,
            record.read_key or "",
        )
    )


def record_from_history(
    tool_name: str,
    args_hash: str,
    result_hash: str | None,
    facts: str | None,
    config: AdaptiveConfig = DEFAULT_ADAPTIVE_CONFIG,
) -> AdaptiveRecord:
    """Rebuild the adaptive view of a stored history record.

    A record written without facts (by a reference-profile guard sharing the store) is
    read conservatively: failed when its outcome is an error, never mutating.
    """
    if facts is None:
        return AdaptiveRecord(
            tool_name,
            args_hash,
            result_hash,
            failed=result_hash is not None and result_hash.startswith("error:"),
            thinking=tool_name in config.all_thinking_tools,
        )
    parts = facts.split(_FACTS_SEP, 5)
    parts.extend([""] * (6 - len(parts)))
    flags = parts[0].ljust(len(_FLAG_FIELDS), "0")
    return AdaptiveRecord(
        tool_name=tool_name,
        args_hash=args_hash,
        result_hash=result_hash,
        error_class=parts[1] or None,
        failure_hash=parts[2] or None,
        failed=flags[0] == "1",
        mutating=flags[1] == "1",
        thinking=flags[2] == "1",
        polling=flags[3] == "1",
        dismissed=flags[4] == "1",
        unchanged=flags[5] == "1",
        error_code=parts[3] or None,
        needs_read=parts[4] or None,
        read_key=parts[5] or None,
    )
