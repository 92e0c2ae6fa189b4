"""Guarding tool calls of hand-written agent loops, and the adapter layer's public names.

Framework adapters only translate: the framework's tool call into ``before_call`` /
``after_call``, and the decision back into the framework's idiom. The shared machinery
(SPEC §11) lives in three modules this one re-exports:

* :mod:`loopwatch.calls`: :class:`ToolCall`, one call under a guard, and :func:`call`
  (``with guard.call(...) as c:``);
* :mod:`loopwatch.integrations._shared`: :class:`AdapterOptions`, :class:`Outcome`, the
  text helpers, id resolution, the guarding scope and critical strikes;
* :mod:`loopwatch.integrations._guarded`: :func:`guarded_call` and its
  :class:`Translator`, batch admission, unknown tools;
* :mod:`loopwatch.integrations._sessions`: :class:`SessionCache`, :class:`StreamGuards`.

Here: the decorator :func:`tool` (``guard.tool(session_key=...)``) on a sync or async
function. Nothing here imports a framework, nor :mod:`loopwatch.guard` (which imports this
module for ``guard.tool`` / ``guard.call``): the guard is typed as :class:`GuardLike`.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final, TypeAlias, TypeVar, overload

from loopwatch.calls import ToolCall, call
from loopwatch.integrations._guarded import (
    Admissions,
    QueuedIds,
    TextTranslator,
    Translator,
    aguarded_call,
    guarded_call,
)
from loopwatch.integrations._sessions import SessionCache, StreamGuards
from loopwatch.integrations._shared import (
    DEFAULT_OPTIONS,
    RECOVERY_MESSAGE,
    AdapterOptions,
    GuardLike,
    OnCritical,
    Outcome,
    append_warning,
    recovery_message,
    render_for_model,
    resolve_id,
    unknown_tool_error,
)
from loopwatch.messages import (
    BLOCKED_CALL_RAN,
    NO_OUTCOME_REPORTED,
    UNKNOWN_TOOL_ERROR,
    WARNING_SEPARATOR,
)

if TYPE_CHECKING:
    from typing_extensions import ParamSpec

    P = ParamSpec("P")

R = TypeVar("R")


# --- the decorator -------------------------------------------------------------------------

#: A session key or run id: fixed, or read on every call (one function, many conversations).
IdSource: TypeAlias = "str | Callable[[], object] | None"


def call_params(
    signature: inspect.Signature, args: Sequence[Any], kwargs: Mapping[str, Any]
) -> dict[str, Any]:
    """The arguments of a call by parameter name, as a model would have sent them.

    Positional arguments are named, ``**kwargs`` are merged in, defaults are *not* applied
    (the model did not send them). Arguments that do not bind are kept as given, so the
    call still hashes (and then fails as the function would).
    """
    try:
        bound = signature.bind(*args, **kwargs)
    except TypeError:
        params: dict[str, Any] = dict(kwargs)
        if args:
            params["args"] = list(args)
        return params
    params = {}
    for name, value in bound.arguments.items():
        kind = signature.parameters[name].kind
        if kind is inspect.Parameter.VAR_KEYWORD:
            params.update(value)
        elif kind is inspect.Parameter.VAR_POSITIONAL:
            params[name] = list(value)
        else:
            params[name] = value
    return params


_TEXT: Final = TextTranslator()


class ToolDecorator:
    """What ``tool(guard, session_key=...)`` returns without a function: a decorator that
    guards the function it is applied to, with those settings."""

    __slots__ = ("_kwargs",)

    def __init__(self, kwargs: dict[str, Any]) -> None:
        self._kwargs = kwargs

    @overload
    def __call__(self, func: Callable[P, Awaitable[R]]) -> Callable[P, Awaitable[R | str]]: ...

    @overload
    def __call__(self, func: Callable[P, R]) -> Callable[P, R | str]: ...

    def __call__(self, func: Callable[..., Any]) -> Callable[..., Any]:
        return _decorate(func, **self._kwargs)


@overload
def tool(
    guard: GuardLike,
    func: Callable[P, Awaitable[R]],
    *,
    session_key: IdSource,
    run_id: IdSource = None,
    agent_id: str | None = None,
    name: str | None = None,
    warn_model: bool = True,
    on_critical: OnCritical = "block_call",
) -> Callable[P, Awaitable[R | str]]: ...


@overload
def tool(
    guard: GuardLike,
    func: Callable[P, R],
    *,
    session_key: IdSource,
    run_id: IdSource = None,
    agent_id: str | None = None,
    name: str | None = None,
    warn_model: bool = True,
    on_critical: OnCritical = "block_call",
) -> Callable[P, R | str]: ...


@overload
def tool(
    guard: GuardLike,
    func: None = None,
    *,
    session_key: IdSource,
    run_id: IdSource = None,
    agent_id: str | None = None,
    name: str | None = None,
    warn_model: bool = True,
    on_critical: OnCritical = "block_call",
) -> ToolDecorator: ...


def tool(
    guard: GuardLike,
    func: Callable[..., Any] | None = None,
    *,
    session_key: IdSource,
    run_id: IdSource = None,
    agent_id: str | None = None,
    name: str | None = None,
    warn_model: bool = True,
    on_critical: OnCritical = "block_call",
) -> Any:
    """Guard every call of a tool function of a hand-written agent loop.

    ::

        @guard.tool(session_key=lambda: current_thread.get())
        def read_file(path: str) -> str: ...

        content = read_file(**call.args)   # the file, + a warning, or the blocked message

    The wrapped function (sync or async) is called with the model's arguments. It returns
    the function's value unchanged, or a ``str`` when loopwatch has something to tell the
    model: the blocked message (the function is not called), or the value rendered as
    text followed by an emitted warning (:func:`append_warning`). An exception from the
    function is recorded as the call's error and propagates.

    Used as the tool of a framework agent already guarded by the same guard for the same
    session (LangChain's middleware, pydantic-ai's capability, ...), the decorator passes
    the call through: the outer layer guards and records it, once.

    Args:
        guard: the guard.
        func: the tool function; omit it to use ``tool(...)`` as a decorator factory.
        session_key: the conversation: a string, or a callable evaluated on every call
            (a context variable's ``get``), since one function serves many conversations.
        run_id: the agent run, a string or a callable, like ``session_key``.
        agent_id: the agent, for ``openclaw_config`` per-agent blocks.
        name: the tool's name as the model knows it (default: the function's name).
        warn_model: append an emitted warning to the returned value.
        on_critical: ``"block_call"`` (return the blocked message), ``"end_run"`` (raise
            :class:`LoopDetectedError`) or ``"recover"`` (a recovery message for the first
            critical of the run, :class:`LoopDetectedError` for the second).

    Returns:
        The wrapped function, or a decorator when ``func`` is omitted.
    """
    kwargs: dict[str, Any] = {
        "guard": guard,
        "session_key": session_key,
        "run_id": run_id,
        "agent_id": agent_id,
        "name": name,
        "options": AdapterOptions(warn_model=warn_model, on_critical=on_critical),
    }
    if func is None:
        return ToolDecorator(kwargs)
    return _decorate(func, **kwargs)


def _decorate(
    func: Callable[..., Any],
    *,
    guard: GuardLike,
    session_key: IdSource,
    run_id: IdSource,
    agent_id: str | None,
    name: str | None,
    options: AdapterOptions,
) -> Callable[..., Any]:
    tool_name = name or getattr(func, "__name__", None) or "tool"
    signature = inspect.signature(func)

    def new_call(args: Sequence[Any], kwargs: Mapping[str, Any]) -> ToolCall:
        return ToolCall(
            guard,
            tool_name,
            call_params(signature, args, kwargs),
            session_key=resolve_id(session_key),
            run_id=resolve_id(run_id),
            agent_id=agent_id,
            options=options,
            pass_through_any=True,
        )

    if inspect.iscoroutinefunction(func):

        @functools.wraps(func)
        async def async_wrapper(*args: Any, **kwargs: Any) -> Any:
            tc = new_call(args, kwargs)
            return await aguarded_call(tc, lambda: func(*args, **kwargs), _TEXT)

        return async_wrapper

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        return guarded_call(new_call(args, kwargs), lambda: func(*args, **kwargs), _TEXT)

    return wrapper


__all__ = [
    "BLOCKED_CALL_RAN",
    "DEFAULT_OPTIONS",
    "NO_OUTCOME_REPORTED",
    "RECOVERY_MESSAGE",
    "UNKNOWN_TOOL_ERROR",
    "WARNING_SEPARATOR",
    "AdapterOptions",
    "Admissions",
    "GuardLike",
    "IdSource",
    "OnCritical",
    "Outcome",
    "QueuedIds",
    "SessionCache",
    "StreamGuards",
    "TextTranslator",
    "ToolCall",
    "ToolDecorator",
    "Translator",
    "aguarded_call",
    "append_warning",
    "call",
    "call_params",
    "guarded_call",
    "recovery_message",
    "render_for_model",
    "resolve_id",
    "tool",
    "unknown_tool_error",
]
