"""Facts: the adaptive view of one call (digests and flags), built once and stored compactly.

:func:`build_adaptive_record` is the only place that sees a call's raw params, result and
error; what it keeps (:class:`AdaptiveRecord`) is digests and flags, encoded on the history
record as one short string (:func:`encode_facts`) and read back by
:func:`record_from_history`.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from typing import Final

from loopwatch._undefined import UNDEFINED
from loopwatch.adaptive.failures import _result_text, classify_error, result_failure_text
from loopwatch.adaptive.progress import is_mutating_call
from loopwatch.adaptive.settings import DEFAULT_ADAPTIVE_CONFIG, AdaptiveConfig
from loopwatch.fingerprint import digest, hash_tool_call
from loopwatch.outcomes import error_text, hash_tool_outcome


@dataclass(frozen=True, slots=True)
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
            (the error text *and* the result's text); ``None`` otherwise. "The same error
            again" compares these: a shell tool's error is often only ``returncode 1`` while
            the output that comes with it differs from one run to the next.
        failed: the call failed: an error was raised, or the result itself reports a
            failure (``ERROR: …``, a non-zero exit, ``isError``; see :func:`result_failure_text`).
        mutating: a successful call that changes state (a mutating tool, or a shell command
            that writes); a candidate progress reset.
        thinking: a call of a thinking/scratch tool; transparent to every detector.
        polling: a known poll (SPEC §4 ``knownPoll``); left to the reference's poll detector.
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


# --- building records -----------------------------------------------------------------------


def build_adaptive_record(
    tool_name: str,
    params: object,
    *,
    result: object = UNDEFINED,
    error: object = UNDEFINED,
    config: AdaptiveConfig = DEFAULT_ADAPTIVE_CONFIG,
    send_tools: Collection[str] = (),
    normalizers: Collection[str] = (),
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

    Returns:
        The record.

    Raises:
        TypeError: params, result or error cannot be serialised (SPEC §8.5), as for the
            reference hashes; ``LoopGuard`` fails open on it.
    """
    args_hash = hash_tool_call(tool_name, params, normalizers=normalizers)
    outcome = hash_tool_outcome(
        tool_name,
        params,
        result=result,
        error=error,
        send_tools=send_tools,
        normalizers=normalizers,
    )
    # Imported here: loopwatch.detectors builds on loopwatch.config, which imports this
    # package's settings (a module-level import would be a cycle).
    from loopwatch.detectors import is_known_poll

    thinking = tool_name in config.all_thinking_tools
    polling = is_known_poll(tool_name, params)
    if outcome.result_hash is None:
        return AdaptiveRecord(tool_name, args_hash, thinking=thinking, polling=polling)
    failure = error_text(error) if error is not UNDEFINED else result_failure_text(result)
    failed = failure is not None
    failure_hash: str | None = None
    if failed:
        failure_hash = digest({"error": failure, "result": _result_text(result)})[:32]
    return AdaptiveRecord(
        tool_name=tool_name,
        args_hash=args_hash,
        result_hash=outcome.result_hash,
        error_class=classify_error(failure, params) if failure is not None else None,
        failure_hash=failure_hash,
        failed=failed,
        mutating=not failed and is_mutating_call(tool_name, params, config),
        thinking=thinking,
        polling=polling,
    )


# --- stored form -----------------------------------------------------------------------------

_FACTS_SEP: Final = "|"


def encode_facts(record: AdaptiveRecord) -> str:
    """The compact form kept on a history record (``ToolCallRecord.adaptive_facts``).

    Four flag characters (failed, mutating, thinking, polling), the error class and the
    failure hash: digests and flags only, so every store can keep it as one short string.
    """
    flags = "".join(
        "1" if flag else "0"
        for flag in (record.failed, record.mutating, record.thinking, record.polling)
    )
    return _FACTS_SEP.join((flags, record.error_class or "", record.failure_hash or ""))


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
    flags, error_class, failure_hash = facts.split(_FACTS_SEP, 2)
    return AdaptiveRecord(
        tool_name=tool_name,
        args_hash=args_hash,
        result_hash=result_hash,
        error_class=error_class or None,
        failure_hash=failure_hash or None,
        failed=flags[0] == "1",
        mutating=flags[1] == "1",
        thinking=flags[2] == "1",
        polling=flags[3] == "1",
    )
