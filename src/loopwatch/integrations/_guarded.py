"""The helpers adapters wrap a framework's "run the tool" step with (SPEC §11).

* :func:`guarded_call` / :func:`aguarded_call`: one call through the guard, translated
  to and from the framework's idiom by a :class:`Translator`;
* :class:`Admissions`: the decisions of a whole assistant turn taken at once by
  ``guard.before_batch`` where the adapter sees the model's message, waiting for each
  call's own tool step;
* :func:`record_unknown` / :func:`stream_stopped`: calls of tools the framework does not
  know, recorded as failed calls, and the stop of the stream-level guard made visible
  (a log line, and :class:`LoopDetectedError` under ``on_critical="end_run"``).

Nothing here imports a framework.
"""

from __future__ import annotations

import json
import logging
import threading
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from typing import Final, Protocol, TypeVar, cast

from loopwatch.calls import Batch, ToolCall
from loopwatch.core.jsstr import js_trim
from loopwatch.core.naming import plain_str
from loopwatch.detectors.reference import LoopVerdict
from loopwatch.errors import LoopDetectedError
from loopwatch.integrations._sessions import SessionCache
from loopwatch.integrations._shared import (
    AdapterOptions,
    BatchCall,
    DecisionLike,
    Outcome,
    append_warning,
    batch_admission,
    note_warned,
)

T = TypeVar("T")

logger = logging.getLogger("loopwatch.tools")

#: Operator-facing log line when the stream-level unknown-tool guard replaces a message.
STREAM_STOP_LOG: Final = (
    "unknown-tool stream guard: replaced a model message calling missing tool {name!r} "
    "({count} times in a row) in session {session}"
)
#: Operator-facing log line when ``before_batch`` failed and the calls are decided alone.
BATCH_FAILED_LOG: Final = "before_batch failed ({error}); deciding each call on its own"


class Translator(Protocol[T]):
    """How one framework shows a tool call's answer to the model.

    ``T`` is the framework's answer object (a ``ToolMessage``, a string, an MCP result).
    """

    def blocked(self, message: str) -> T:
        """The answer for a blocked call, carrying the blocked message."""
        ...

    def outcome(self, answer: T) -> Outcome:
        """What the model is shown in ``answer``, as a result or an error (SPEC §11.1)."""
        ...

    def add_warning(self, answer: T, warning: str) -> T:
        """``answer`` with an emitted warning appended (SPEC §11.2)."""
        ...


# A translator may also have two optional methods (looked up with getattr, so translators
# written before them keep working):
#
# * ``failed(error, warning) -> Exception``: the exception to raise for a failed call whose
#   attempt emitted a warning, one the framework shows the model with the warning appended
#   (a retry prompt, an error text); without it, or when it returns ``error``, the error
#   is raised unchanged;
# * ``passes(error) -> bool``: True for a framework's control-flow exception (a deferral,
#   an approval request, an interrupt), which is not an outcome of the call: the call
#   stays pending until it really runs.


def _passes(translator: object, error: Exception) -> bool:
    passes = getattr(translator, "passes", None)
    return bool(passes(error)) if passes is not None else False


def _failed(translator: object, error: Exception, warning: str) -> Exception:
    failed = getattr(translator, "failed", None)
    shown = failed(error, warning) if failed is not None else error
    return shown if isinstance(shown, Exception) else error


def _warned(tc: ToolCall, translator: Translator[T], answer: T) -> T:
    """The answer for the model: ``answer`` with the call's emitted warning appended (and
    noted, for an outer layer of another guard to record ``answer`` without it)."""
    warning = tc.warning
    if warning is None:
        return answer
    warned = translator.add_warning(answer, warning)
    note_warned(warned, tc.inner_original(answer))
    return warned


class TextTranslator:
    """The translator of plain values: the answer is what the model is shown.

    A blocked call answers with its message; a warning goes through :func:`append_warning`.
    """

    def blocked(self, message: str) -> object:
        """The blocked message itself."""
        return message

    def outcome(self, answer: object) -> Outcome:
        """The answer is the result."""
        return Outcome(result=answer)

    def add_warning(self, answer: object, warning: str) -> object:
        """See :func:`append_warning`."""
        return append_warning(answer, warning)

    def failed(self, error: Exception, warning: str) -> Exception:
        """The error itself: the host renders exceptions its own way."""
        return error

    def passes(self, error: Exception) -> bool:
        """Every exception of a plain function is a failure."""
        return False


def guarded_call(tc: ToolCall, run: Callable[[], T], translator: Translator[T]) -> T:
    """Run one tool call through the guard, the SPEC §11 way.

    While ``run`` runs, inner layers on the same guard and session pass the call through
    (see :func:`loopwatch.integrations._shared.guarding`), so the call counts once.

    Args:
        tc: the call, not yet started (its guard, tool, arguments, ids and options).
        run: runs the tool and returns the framework's answer for the model.
        translator: the framework's :class:`Translator`.

    Returns:
        The answer for the model: ``run()``'s, with an emitted warning appended after the
        original was recorded, or ``translator.blocked(message)`` without running the tool.

    Raises:
        LoopDetectedError: a block under ``on_critical="end_run"`` (or a second one under
            ``"recover"``).
        PostCompactionLoopPersistedError: the loop survived a compaction.
        Exception: whatever ``run`` raised (recorded first as the call's error), or the
            translator's form of it carrying an emitted warning.
    """
    tc.start()
    if tc.blocked:
        return translator.blocked(cast(str, tc.message))
    try:
        with tc.scope():
            answer = run()
    except Exception as exc:
        if _passes(translator, exc):
            raise
        tc.error(tc.inner_original(exc))
        tc.finish()
        warning = tc.warning
        if warning is None:
            raise
        shown = _failed(translator, exc, warning)
        note_warned(shown, tc.inner_original(exc))
        if shown is exc:
            raise
        raise shown from exc
    tc.outcome(translator.outcome(tc.inner_original(answer)))
    tc.finish()
    return _warned(tc, translator, answer)


async def aguarded_call(
    tc: ToolCall, run: Callable[[], Awaitable[T]], translator: Translator[T]
) -> T:
    """Async twin of :func:`guarded_call` (``run`` returns an awaitable)."""
    await tc.astart()
    if tc.blocked:
        return translator.blocked(cast(str, tc.message))
    try:
        with tc.scope():
            answer = await run()
    except Exception as exc:
        if _passes(translator, exc):
            raise
        tc.error(tc.inner_original(exc))
        await tc.afinish()
        warning = tc.warning
        if warning is None:
            raise
        shown = _failed(translator, exc, warning)
        note_warned(shown, tc.inner_original(exc))
        if shown is exc:
            raise
        raise shown from exc
    tc.outcome(translator.outcome(tc.inner_original(answer)))
    await tc.afinish()
    return _warned(tc, translator, answer)


# --- batch admission --------------------------------------------------------------------------


def _batchable(calls: Sequence[ToolCall]) -> bool:
    """Two or more calls of one session, each with its own id, none already guarded.

    The ids are the host's objects: ids that cannot even be compared (a ``str`` subclass
    whose ``__eq__`` raises) make the turn decided call by call, never an exception.
    """
    try:
        return _one_session(calls)
    except Exception:
        return False


def _one_session(calls: Sequence[ToolCall]) -> bool:
    if len(calls) < 2:
        return False
    session = calls[0].session_key
    if not isinstance(session, str) or not js_trim(session):
        return False
    ids = [c.tool_call_id for c in calls]
    if any(not isinstance(i, str) or not i for i in ids) or len(set(ids)) != len(ids):
        return False
    return all(c.session_key == session and c.run_id == calls[0].run_id for c in calls)


class Admissions:
    """Decisions of whole assistant turns, waiting for each call's own tool step.

    An adapter that sees the model's message calls :meth:`admit` with one
    :class:`ToolCall` per tool call of the message; when the guard has ``before_batch``
    (OpenClaw 8.1 admits a turn atomically), the turn is decided against the history as
    it would be after it, so identical calls of one turn count as the repeats they are,
    and one critical blocks them all. The tool step then builds its :class:`ToolCall`
    and :meth:`take` hands it the decision. Without ``before_batch`` nothing is stored
    and each call is decided on its own, as before.
    """

    def __init__(self, max_pending: int = 4096) -> None:
        self._pending: SessionCache[tuple[DecisionLike, Batch]] = SessionCache(max_pending)

    @staticmethod
    def _key(session_key: object, tool_call_id: object) -> str | None:
        """Where a call's decision waits; ``None`` for ids a turn is never admitted with
        (:func:`_batchable` admits ``str`` ids only), read as their characters (a
        subclass's ``__format__`` is the host's code)."""
        if not isinstance(session_key, str) or not isinstance(tool_call_id, str):
            return None
        return f"{plain_str(session_key)}\x00{plain_str(tool_call_id)}"

    def _store(self, calls: Sequence[ToolCall], decisions: object) -> None:
        if not isinstance(decisions, (list, tuple)) or len(decisions) != len(calls):
            return
        batch = Batch()
        for tc, decision in zip(calls, decisions, strict=True):
            key = self._key(tc.session_key, tc.tool_call_id)
            if key is not None:
                self._pending.put(key, (decision, batch))

    @staticmethod
    def _request(calls: Sequence[ToolCall]) -> tuple[list[BatchCall], dict[str, object]]:
        first = calls[0]
        ids = {
            "session_key": first.session_key,
            "run_id": first.run_id,
            "agent_id": first.agent_id,
        }
        return [(c.tool_name, c.params, c.tool_call_id) for c in calls], ids

    def admit(self, guard: object, calls: Sequence[ToolCall]) -> bool:
        """Decide ``calls`` (one assistant turn) together; True when they were."""
        before_batch, _ = batch_admission(guard)
        if before_batch is None or not _batchable(calls):
            return False
        batch, ids = self._request(calls)
        try:
            decisions = before_batch(batch, **ids)
        except Exception as exc:
            logger.warning(BATCH_FAILED_LOG.format(error=type(exc).__name__))
            return False
        self._store(calls, decisions)
        return True

    async def aadmit(self, guard: object, calls: Sequence[ToolCall]) -> bool:
        """Async twin of :meth:`admit` (uses ``abefore_batch`` when the guard has it)."""
        before_batch, abefore_batch = batch_admission(guard)
        if abefore_batch is None:
            return self.admit(guard, calls) if before_batch is not None else False
        if not _batchable(calls):
            return False
        batch, ids = self._request(calls)
        try:
            decisions = await abefore_batch(batch, **ids)
        except Exception as exc:
            logger.warning(BATCH_FAILED_LOG.format(error=type(exc).__name__))
            return False
        self._store(calls, decisions)
        return True

    def take(self, tc: ToolCall) -> ToolCall:
        """Give ``tc`` the decision its turn was admitted with, if any; returns ``tc``."""
        key = self._key(tc.session_key, tc.tool_call_id)
        pending = None if key is None else self._pending.pop(key)
        if pending is not None:
            tc.admit(*pending)
        return tc


class QueuedIds:
    """Call ids of one assistant turn, for a framework whose tool step gets no id.

    Where the adapter sees the model's message it queues each call's id under the call's
    signature (tool name and arguments); the tool step, which only knows the name and the
    arguments, takes the first id queued under them. Calls with the same signature are
    interchangeable, so which of them gets which id does not matter. Thread-safe (the
    frameworks may run a turn's calls in threads).
    """

    def __init__(self) -> None:
        self._queued: dict[str, deque[str]] = {}
        self._lock = threading.Lock()

    @staticmethod
    def _signature(tool_name: str, arguments: object) -> str | None:
        """The call's signature, or ``None`` for arguments JSON cannot write (a cycle, keys
        of mixed types, a ``__repr__`` that raises): such a call gets no queued id and is
        decided on its own, rather than the adapter raising into the agent."""
        try:
            return f"{tool_name}\x00{json.dumps(arguments, sort_keys=True, default=repr)}"
        except Exception:
            return None

    def queue(self, calls: Sequence[tuple[str, object, str]], *, replace: bool = True) -> None:
        """Queue ``(tool name, arguments, id)`` calls; ``replace`` drops any ids left unused
        by an earlier turn."""
        with self._lock:
            if replace:
                self._queued.clear()
            for name, arguments, call_id in calls:
                signature = self._signature(name, arguments)
                if signature is not None:
                    self._queued.setdefault(signature, deque()).append(call_id)

    def take(self, tool_name: str, arguments: object) -> str | None:
        """The id of a queued call with this name and these arguments, or ``None``."""
        signature = self._signature(tool_name, arguments)
        if signature is None:
            return None
        with self._lock:
            queued = self._queued.get(signature)
            return queued.popleft() if queued else None


# --- unknown tools ------------------------------------------------------------------------------


def record_unknown(tc: ToolCall, error: str) -> None:
    """Record a call of a tool the framework does not know as a failed call (SPEC §11.1).

    Raises:
        LoopDetectedError: the guard blocks it and ``on_critical`` ends the run.
    """
    tc.start()
    if not tc.blocked:
        tc.error(error)
        tc.finish()


async def arecord_unknown(tc: ToolCall, error: str) -> None:
    """Async twin of :func:`record_unknown`."""
    await tc.astart()
    if not tc.blocked:
        tc.error(error)
        await tc.afinish()


def stream_stopped(
    text: str,
    *,
    name: str,
    count: int,
    session_key: object,
    options: AdapterOptions,
) -> None:
    """Make the stream guard's replacement of a model message visible (SPEC §5.7).

    Logs it, and ends the run under ``on_critical="end_run"`` (the guard's own block of
    the same calls normally ends it first; this covers a stream guard that fires when the
    history does not, for example with the detection disabled). Under ``"recover"`` the
    replaced message, which calls no tool, already ends the turn.

    Raises:
        LoopDetectedError: under ``"end_run"``.
    """
    logger.warning(STREAM_STOP_LOG.format(name=name, count=count, session=session_key))
    if options.on_critical == "end_run":
        raise LoopDetectedError(
            LoopVerdict(
                stuck=True,
                level="critical",
                detector="unknown_tool_repeat",
                count=count,
                message=text,
            )
        )


__all__ = [
    "BATCH_FAILED_LOG",
    "STREAM_STOP_LOG",
    "Admissions",
    "QueuedIds",
    "TextTranslator",
    "Translator",
    "aguarded_call",
    "arecord_unknown",
    "guarded_call",
    "record_unknown",
    "stream_stopped",
]
