"""What ``LoopGuard``'s constructor checks before it keeps anything.

Each argument is checked once, at construction, with a ``TypeError`` or ``ValueError``
that names it: a wrong type that reached the calls would be caught by the failure policy
on every call instead (the guard would allow everything, detect nothing, and say so once
per tool name in a log).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Collection, Iterable

from loopwatch._event_base import LoopEvent
from loopwatch.settings import GuardSettings
from loopwatch.stores.base import Store

Listener = Callable[[LoopEvent], object]


def check_arguments(
    store: object,
    clock: object,
    settings: object,
    detectors: tuple[object, ...],
    enforce: object,
    strict: object,
    send_tools: object,
) -> None:
    """Reject, at construction, arguments every call would fail on or silently misread.

    Each of the first kind would otherwise be caught by the failure policy on every call:
    the guard would allow everything, detect nothing, and say so once per tool name in a
    log. The flags must be real ``bool``s: ``enforce="false"`` (a value read from the
    environment) would be true.
    """
    if store is not None and not isinstance(store, Store):
        hint = " (build one from a URL with store_from_url)" if isinstance(store, str) else ""
        raise TypeError(f"store must be a loopwatch Store, not {type(store).__name__}{hint}")
    if store is not None and not isinstance(store.fail_open, bool):
        raise TypeError(f"store.fail_open must be a bool, not {type(store.fail_open).__name__}")
    if not isinstance(enforce, bool):
        raise TypeError(f"enforce must be a bool, not {type(enforce).__name__}")
    if strict is not None and not isinstance(strict, bool):
        raise TypeError(f"strict must be a bool or None, not {type(strict).__name__}")
    if isinstance(send_tools, (bytes, bytearray, memoryview)):
        raise TypeError("send_tools must be tool names (a str or a collection of str), not bytes")
    if clock is not None and not callable(clock):
        raise TypeError(f"clock must be a callable returning epoch seconds, not {clock!r}")
    if settings is not None and not isinstance(settings, GuardSettings):
        raise TypeError(f"settings must be GuardSettings, not {type(settings).__name__}")
    for detector in detectors:
        if not callable(detector):
            raise TypeError(f"detector {detector!r} is not callable")


def send_tool_names(send_tools: Collection[str]) -> tuple[str, ...]:
    """The send tool names, read once (a generator is read once too).

    A plain ``str`` is one name, as for ``normalizers``: iterating ``"telegram"`` would
    silently make its letters the send tools.
    """
    names = (send_tools,) if isinstance(send_tools, str) else tuple(send_tools)
    for name in names:
        if not isinstance(name, str):
            raise TypeError(f"send_tools entries must be str, not {type(name).__name__}")
    return names


def checked_listeners(listeners: Iterable[Listener]) -> tuple[Listener, ...]:
    """The listeners, read once; each a plain callable (an event is emitted synchronously,
    so a coroutine function's events would be coroutines never awaited)."""
    checked = tuple(listeners)
    for listener in checked:
        if inspect.iscoroutinefunction(listener):
            raise TypeError("listeners must be plain callables, not coroutine functions")
        if not callable(listener):
            raise TypeError(f"listener {listener!r} is not callable")
    return checked


__all__ = ["Listener", "check_arguments", "checked_listeners", "send_tool_names"]
