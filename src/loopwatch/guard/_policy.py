"""The one failure policy of the session engine (SPEC §5.6).

A guard never raises into the agent, except the deliberate post-compaction abort. What goes
wrong inside a call falls into three kinds, each decided here and nowhere else:

* **a value loopwatch cannot hash** (SPEC §8.5: unserialisable, cyclic, too large, or a
  ``__str__`` that raises), or a reading of the host's ``clock`` that fails
  (:class:`ClockError`): the call is allowed, logged once per tool name;
* **a store failure** (:class:`~loopwatch.errors.StoreError`): allowed (fail-open, the
  default) or blocked (a store with ``fail_open = False``), with a ``store.error`` event
  every time and a log line at a bounded rate;
* **anything else is a bug of loopwatch's**: allowed and logged like an unhashable value —
  unless the guard is *strict* (``LoopGuard(strict=True)``, or ``LOOPWATCH_STRICT=1`` in the
  environment, which the test suite sets), where it is raised, so that a bug never hides as
  an allowed call.

Formatting an exception can itself fail (a ``__str__`` that raises, a huge message):
:func:`error_text` never raises and bounds what it returns.

The engine catches; the functions at the end of this module (:func:`internal_error`,
:func:`detection_failed`, :func:`store_failed`, :func:`store_failed_before`) say what a
caught failure becomes, for every entry point (single calls, batches, strikes, retries).
"""

from __future__ import annotations

import logging
import os
import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import TYPE_CHECKING, Final

from loopwatch import messages
from loopwatch.detectors.reference import LoopVerdict
from loopwatch.errors import StoreError
from loopwatch.guard.decision import Decision, blocked_result

if TYPE_CHECKING:
    from loopwatch.guard.loopguard import LoopGuard

tools_logger = logging.getLogger("loopwatch.tools")
store_logger = logging.getLogger("loopwatch.store")

#: The detector name of the block a fail-closed store's failure gives (SPEC §5.6).
STORE_UNAVAILABLE: Final = "store_unavailable"

#: How many tool names each fail-open text remembers before it may repeat (SPEC §5.6).
FAILURE_LOG_MEMORY: Final = 1000
#: At most one store-failure log line per this many seconds of the guard's clock.
STORE_ERROR_LOG_INTERVAL_S: Final = 30.0
#: The longest exception text a log line or event carries (a 60 MiB message is cut).
MAX_ERROR_TEXT: Final = 1000
#: The environment variable that makes every guard strict (the test suite sets it).
STRICT_ENV: Final = "LOOPWATCH_STRICT"


class UnhashableValueError(Exception):
    """A value of the host's could not be read or hashed: a documented degradation.

    Covers the arguments, result and error (SPEC §8.5), the ids the host passes (run,
    tool call), whose conversion runs the host's own code, and the reading of the host's
    ``clock`` (:class:`ClockError`).

    The guard wraps whatever hashing raised in it, so the policy can tell the host's values
    from loopwatch's own bugs; ``__cause__`` is the original exception.
    """


class ClockError(UnhashableValueError):
    """The host's ``clock`` raised, or returned something that is not epoch seconds."""


#: The largest epoch seconds a clock reading may be (either sign): JavaScript's ``Date``
#: range, in which the reference's millisecond timestamps live; it also keeps them within
#: the 64-bit integers of SQLite and Redis. NaN, infinities and 1e300 are clock bugs.
MAX_CLOCK_S: Final = 8.64e12


def clock_failed(exc: Exception) -> ClockError:
    """The :class:`ClockError` of a clock that raised (``exc`` is its cause)."""
    error = ClockError(error_text(exc))
    error.__cause__ = exc
    return error


def bad_reading(now: float) -> ClockError:
    """The :class:`ClockError` of a reading out of :data:`MAX_CLOCK_S` (or NaN)."""
    return ClockError(f"clock returned {now!r}, not epoch seconds")


def read_clock(clock: Callable[[], float]) -> float:
    """The clock's reading as ``float`` epoch seconds.

    Raises:
        ClockError: the clock raised, or returned something that is not epoch seconds.
    """
    try:
        now = float(clock())
    except Exception as exc:
        raise clock_failed(exc) from exc
    if not abs(now) <= MAX_CLOCK_S:  # NaN fails it too
        raise bad_reading(now)
    return now


def strict_from_env() -> bool:
    """Whether ``LOOPWATCH_STRICT`` asks every guard to raise its internal errors."""
    return os.environ.get(STRICT_ENV, "").strip().lower() in ("1", "true", "yes", "on")


def _bounded(text: str) -> str:
    if len(text) <= MAX_ERROR_TEXT:
        return text
    return f"{text[:MAX_ERROR_TEXT]}… ({len(text)} characters)"


def error_text(exc: BaseException) -> str:
    """``"Type: message"`` of an exception, bounded; never raises.

    The message of an :class:`UnhashableValueError` is its cause's, so the log line names
    what the host passed, as before the wrapping.
    """
    if isinstance(exc, UnhashableValueError) and exc.__cause__ is not None:
        exc = exc.__cause__
    try:
        name = type(exc).__name__
        if not isinstance(name, str):
            name = "Exception"
    except Exception:
        name = "Exception"
    try:
        message = str(exc)
        if type(message) is not str:
            message = str.__str__(message)
    except Exception:
        message = "<unprintable exception>"
    return _bounded(f"{name}: {message}")


class OnceLog:
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
        tools_logger.warning(self._template.format(tool=tool, error=error_text(exc)))


class StoreErrorRate:
    """Whether a store failure is logged now: at most once per interval of the guard clock."""

    __slots__ = ("_last",)

    def __init__(self) -> None:
        self._last: float | None = None

    def due(self, now: float | None) -> bool:
        """``now`` is ``None`` when the clock failed: due only if nothing was logged yet."""
        last = self._last
        if now is None:
            if last is None:
                self._last = float("-inf")
                return True
            return False
        if last is None or now - last >= STORE_ERROR_LOG_INTERVAL_S or now < last:
            self._last = now
            return True
        return False


def internal_error(guard: LoopGuard, log: OnceLog, tool: str, exc: Exception) -> None:
    """Everything but the store: log once per tool, or raise in strict mode when it is
    loopwatch's own bug (not a value of the host's)."""
    if guard.strict and not isinstance(exc, UnhashableValueError):
        raise exc
    log.log(tool, exc)


def detection_failed(guard: LoopGuard, tool: str, exc: Exception) -> Decision:
    """A ``before_call`` that failed outside the store: the call is allowed."""
    internal_error(guard, guard._detection_failed, tool, exc)
    return guard._allow


def store_failed(
    guard: LoopGuard, session_key: str, tool: str, operation: str, exc: StoreError
) -> None:
    """Report a store failure: an event every time, a log line at a bounded rate."""
    from loopwatch.events import StoreErrorEvent

    fail_open = guard._store.fail_open
    text = error_text(exc)
    try:
        now: float | None = guard._now()
    except Exception:
        # The host's clock failed too: this handler must not raise into the agent.
        now = None
    if guard._store_error_rate.due(now):
        store_logger.warning(
            messages.LOG_STORE_ERROR.format(
                operation=operation,
                error=text,
                policy="fail-open" if fail_open else "fail-closed",
            )
        )
    guard._emit(
        StoreErrorEvent(
            session_key=session_key,
            operation=operation,
            error=text,
            fail_open=fail_open,
            tool_name=tool,
        )
    )


def store_failed_before(guard: LoopGuard, session_key: str, tool: str, exc: StoreError) -> Decision:
    """A ``before_call`` whose store failed: allowed when the store fails open (the
    default) or the guard does not enforce, else blocked as ``store_unavailable``."""
    store_failed(guard, session_key, tool, "before_call", exc)
    if guard._store.fail_open or not guard.enforce:
        return guard._allow
    message = messages.STORE_UNAVAILABLE_CRITICAL.format(tool=tool)
    verdict = LoopVerdict(stuck=True, level="critical", detector=STORE_UNAVAILABLE, message=message)
    return Decision("block", verdict, True, blocked_result(message), True)


__all__ = [
    "FAILURE_LOG_MEMORY",
    "MAX_CLOCK_S",
    "MAX_ERROR_TEXT",
    "STORE_ERROR_LOG_INTERVAL_S",
    "STORE_UNAVAILABLE",
    "STRICT_ENV",
    "ClockError",
    "OnceLog",
    "StoreErrorRate",
    "UnhashableValueError",
    "bad_reading",
    "clock_failed",
    "detection_failed",
    "error_text",
    "internal_error",
    "read_clock",
    "store_failed",
    "store_failed_before",
    "strict_from_env",
]
