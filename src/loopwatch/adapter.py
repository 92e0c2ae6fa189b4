"""What every adapter does around one tool call, once (SPEC §11).

A framework adapter only translates: the framework's tool call into ``before_call`` /
``after_call``, and the :class:`~loopwatch.Decision` back into the framework's idiom (an
error tool message, a guardrail rejection, an ``isError`` result). The rules that must not
drift between adapters live here:

* record what the model is shown, and map "no error" to ``UNDEFINED`` (SPEC §11.1);
* record the **original** result first, then append an emitted warning (SPEC §11.2), since
  a warning carries a count and would otherwise change every recorded outcome;
* a blocked call is not run; its blocked result is passed to ``after_call`` (a no-op by the
  veto rule) and, under ``on_critical="end_run"``, :class:`LoopDetectedError` ends the run
  (SPEC §11.4);
* a call of a tool the framework does not know is recorded as a failed call whose error
  names the tool, so the ``unknown_tool_repeat`` detector can see it (SPEC §3.5, §11.1).

Hand-written agent loops use the same machinery through two faces:

* the decorator :func:`tool` (``guard.tool(session_key=...)``) on a sync or async function;
* the explicit form :func:`call` (``with guard.call(...) as c:``), modelled on tenacity's
  ``AttemptManager``: the ``with`` block is one attempt at the tool, ``c.result(value)``
  reports what the model will be shown, and everything is recorded when the block exits::

      with guard.call("read_file", args, session_key=thread_id, tool_call_id=call_id) as c:
          if not c.blocked:
              c.result(read_file(**args))
      messages.append({"role": "tool", "tool_call_id": call_id, "content": c.shown})

Nothing here imports a framework.
"""

from __future__ import annotations

import functools
import inspect
import json
import threading
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import (
    TYPE_CHECKING,
    Any,
    Final,
    Generic,
    Literal,
    Protocol,
    TypeAlias,
    TypeVar,
    cast,
    overload,
)

from loopwatch.core._undefined import UNDEFINED
from loopwatch.core.jsstr import js_trim
from loopwatch.detectors.streamguard import UnknownToolStreamGuard
from loopwatch.errors import LoopDetectedError
from loopwatch.messages import (
    BLOCKED_CALL_RAN,
    NO_OUTCOME_REPORTED,
    UNKNOWN_TOOL_ERROR,
    WARNING_SEPARATOR,
)
from loopwatch.outcomes import hash_tool_outcome

if TYPE_CHECKING:
    from typing_extensions import ParamSpec, Self

    from loopwatch.core.records import ToolCallRecord
    from loopwatch.guard import Decision, LoopGuard

    P = ParamSpec("P")

T = TypeVar("T")
R = TypeVar("R")
V = TypeVar("V")

OnCritical = Literal["block_call", "end_run"]

_ON_CRITICAL: Final = ("block_call", "end_run")


@dataclass(frozen=True, slots=True, kw_only=True)
class AdapterOptions:
    """Behaviour shared by every adapter, validated once.

    Attributes:
        warn_model: when a warning is emitted (SPEC §5.3: the first time a count reaches
            10, 20, ...), append its message to the tool result the model sees. The core
            never injects anything (the reference behaviour); most models only change
            course when they read the warning, so adapters default to on.
        on_critical: ``"block_call"`` (the reference): a critical loop blocks that call,
            the model is told why and the run goes on. ``"end_run"``: the adapter raises
            :class:`LoopDetectedError` so the framework ends the run with a clear error,
            for unattended agents that should stop rather than keep trying.
    """

    warn_model: bool = True
    on_critical: OnCritical = "block_call"

    def __post_init__(self) -> None:
        if not isinstance(self.warn_model, bool):
            raise TypeError(f"warn_model must be a bool, not {type(self.warn_model).__name__}")
        if self.on_critical not in _ON_CRITICAL:
            raise ValueError(
                f"on_critical must be 'block_call' or 'end_run', not {self.on_critical!r}"
            )


DEFAULT_OPTIONS: Final = AdapterOptions()


@dataclass(frozen=True, slots=True)
class Outcome:
    """What a finished call showed the model: a result or an error (never both).

    ``UNDEFINED`` means "not this one", as in ``after_call``; ``error=None`` is a real error.
    """

    result: object = UNDEFINED
    error: object = UNDEFINED


def unknown_tool_error(name: str, message: str | None = None) -> str:
    """The error to record for a call of a tool the framework does not know (SPEC §11.1).

    The framework's own message is kept when SPEC §3.5 extracts this tool's name from it;
    otherwise (no message, or a wording such as ``"X is not a valid tool"`` or
    ``"Unknown tool name: 'X'"`` that the reference patterns miss or misread) the call is
    recorded as ``Unknown tool: {name}``, so the ``unknown_tool_repeat`` detector works
    whatever the framework says.
    """
    if message:
        extracted = hash_tool_outcome(name, None, error=message).unknown_tool_name
        if extracted is not None and extracted == js_trim(name).lower():
            return message
    return UNKNOWN_TOOL_ERROR.format(name=name)


def render_for_model(value: object) -> str:
    """Text for a value the model is shown as text: JSON where possible, else ``str``."""
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        return str(value)


def _text_part(text: str) -> dict[str, str]:
    return {"type": "text", "text": text}


def append_warning(shown: object, warning: str) -> object:
    """``shown`` with ``warning`` appended, keeping its shape where the shape allows.

    A string gets the warning after a blank line; a list of content parts (LangChain, MCP,
    OpenAI) gets one more text part; a ``{"content": [...], ...}`` result (OpenClaw, MCP)
    gets a text part in its content; anything else is rendered as text first.
    """
    if isinstance(shown, str):
        return f"{shown}{WARNING_SEPARATOR}{warning}" if shown else warning
    if shown is None:
        return warning
    if isinstance(shown, (list, tuple)):
        return [*shown, _text_part(warning)]
    if isinstance(shown, Mapping) and isinstance(shown.get("content"), (list, tuple)):
        return {**shown, "content": [*shown["content"], _text_part(warning)]}
    return f"{render_for_model(shown)}{WARNING_SEPARATOR}{warning}"


_State = Literal["new", "started", "reported", "done"]


class ToolCall:
    """One tool call under a :class:`LoopGuard`: decide, (run), record, show.

    Used directly by adapters (``start`` / ``finish`` and their async twins) and, as a
    context manager, by hand-written agent loops (see :func:`call`). The life cycle is
    fixed: ``start`` once, then, unless the call was blocked, report one outcome with
    :meth:`result` or :meth:`error`, then ``finish`` once. After ``finish`` (or a block),
    :attr:`shown` is what to give the model.

    Args:
        guard: the guard deciding on the call.
        tool_name: the tool's name as the model called it.
        params: the call's arguments as the model sent them.
        session_key: the conversation (SPEC §5.1); ``None`` skips the guard.
        run_id: the agent run, scoping detection and the post-compaction guard.
        tool_call_id: the framework's id of this call, matching outcome to call.
        agent_id: the agent, for per-agent config blocks (``openclaw_config``).
        options: :class:`AdapterOptions`.
    """

    __slots__ = (
        "_decision",
        "_guard",
        "_ids",
        "_outcome",
        "_record",
        "_shown",
        "_state",
        "options",
        "params",
        "tool_name",
    )

    def __init__(
        self,
        guard: LoopGuard,
        tool_name: str,
        params: object,
        *,
        session_key: object,
        run_id: object = None,
        tool_call_id: object = None,
        agent_id: object = None,
        options: AdapterOptions = DEFAULT_OPTIONS,
    ) -> None:
        self._guard = guard
        self.tool_name = tool_name
        self.params = params
        self.options = options
        self._ids: dict[str, object] = {
            "session_key": session_key,
            "run_id": run_id,
            "tool_call_id": tool_call_id,
            "agent_id": agent_id,
        }
        self._state: _State = "new"
        self._decision: Decision | None = None
        self._outcome: Outcome | None = None
        self._record: ToolCallRecord | None = None
        self._shown: object = None

    # --- state -----------------------------------------------------------------------

    @property
    def decision(self) -> Decision:
        """The guard's decision; available once the call has started."""
        if self._decision is None:
            raise RuntimeError(f"the call of {self.tool_name!r} has not started")
        return self._decision

    @property
    def blocked(self) -> bool:
        """True when the host must not run the tool (an enforced critical loop)."""
        return self.decision.tool_result is not None

    @property
    def message(self) -> str | None:
        """The blocked message to give the model instead of running the tool, or ``None``."""
        decision = self.decision
        return decision.verdict.message if decision.tool_result is not None else None

    @property
    def warning(self) -> str | None:
        """The warning to append to what the model sees, or ``None``.

        Set only for an *emitted* warning (SPEC §5.3) with ``warn_model`` on. A would-be
        block in shadow mode is never shown: shadow mode must not change the run.
        """
        decision = self.decision
        if self.options.warn_model and decision.action == "warn" and decision.emitted:
            return decision.verdict.message
        return None

    @property
    def record(self) -> ToolCallRecord | None:
        """The history record ``after_call`` returned (``None`` when nothing was recorded)."""
        return self._record

    @property
    def shown(self) -> object:
        """What to give the model, once the call is finished (or blocked).

        The blocked message; or the reported result with an emitted warning appended
        (:func:`append_warning`); or, for a reported error, the error when it is text
        (with the warning appended) and ``None`` when it is an exception: render it as you
        always do and append :attr:`warning` yourself.
        """
        if self._state != "done":
            raise RuntimeError(f"the call of {self.tool_name!r} is not finished")
        return self._shown

    def _report(self, outcome: Outcome) -> None:
        if self._state == "new":
            raise RuntimeError(f"the call of {self.tool_name!r} has not started")
        if self.blocked:
            raise RuntimeError(BLOCKED_CALL_RAN.format(tool=self.tool_name))
        if self._state != "started":
            raise RuntimeError(f"an outcome of {self.tool_name!r} was already reported")
        self._outcome = outcome
        self._state = "reported"

    def result(self, value: object) -> None:
        """Report the call's result: exactly what the model is shown (SPEC §11.1).

        A tool that returns nothing is reported as what the model sees for it (``""``,
        ``None``), never as ``UNDEFINED``, which would record no outcome at all.
        """
        self._report(Outcome(result=value))

    def error(self, error: object) -> None:
        """Report that the call failed: the exception, or the error text the model sees."""
        if error is UNDEFINED:
            raise ValueError("UNDEFINED means 'no error'; report a result instead")
        self._report(Outcome(error=error))

    def outcome(self, outcome: Outcome) -> None:
        """Report an :class:`Outcome` (the form adapters use)."""
        if (outcome.result is UNDEFINED) == (outcome.error is UNDEFINED):
            raise ValueError("an outcome has exactly one of result and error")
        self._report(outcome)

    # --- life cycle: the sync and async twins share everything but the I/O -------------

    def _begin(self) -> None:
        if self._state != "new":
            raise RuntimeError(f"the call of {self.tool_name!r} was already started")

    def _started(self, decision: Decision) -> bool:
        """Store the decision; True when the blocked result must be recorded."""
        self._decision = decision
        self._state = "started"
        return decision.tool_result is not None

    def _after_block(self) -> None:
        self._shown = self.message
        self._state = "done"
        if self.options.on_critical == "end_run":
            raise LoopDetectedError(self.decision.verdict)

    def _pending_outcome(self) -> Outcome:
        if self._state == "done":
            raise RuntimeError(f"the call of {self.tool_name!r} is already finished")
        if self._state != "reported" or self._outcome is None:
            raise RuntimeError(NO_OUTCOME_REPORTED.format(tool=self.tool_name))
        return self._outcome

    def _finished(self, outcome: Outcome, record: ToolCallRecord | None) -> object:
        self._record = record
        self._state = "done"
        if outcome.error is UNDEFINED:
            shown = outcome.result
        elif isinstance(outcome.error, (str, list, tuple)):
            shown = outcome.error
        else:
            # An exception: only the host knows how it renders it for the model.
            self._shown = None
            return None
        warning = self.warning
        self._shown = shown if warning is None else append_warning(shown, warning)
        return self._shown

    def start(self) -> Decision:
        """Ask the guard about the call (SPEC §5.2).

        A blocked call is recorded right away with its blocked result (a no-op by the veto
        rule, as in the reference), so :attr:`shown` is ready.

        Raises:
            LoopDetectedError: the call is blocked and ``on_critical="end_run"``.
        """
        self._begin()
        decision = self._guard.before_call(self.tool_name, self.params, **self._ids)
        if self._started(decision):
            self._guard.after_call(
                self.tool_name, self.params, result=decision.tool_result, **self._ids
            )
            self._after_block()
        return decision

    async def astart(self) -> Decision:
        """Async twin of :meth:`start`."""
        self._begin()
        decision = await self._guard.abefore_call(self.tool_name, self.params, **self._ids)
        if self._started(decision):
            await self._guard.aafter_call(
                self.tool_name, self.params, result=decision.tool_result, **self._ids
            )
            self._after_block()
        return decision

    def finish(self) -> object:
        """Record the reported outcome, then compute what the model is shown (SPEC §11.2).

        Returns:
            :attr:`shown`.

        Raises:
            PostCompactionLoopPersistedError: the loop survived a compaction; end the run.
        """
        outcome = self._pending_outcome()
        record = self._guard.after_call(
            self.tool_name, self.params, result=outcome.result, error=outcome.error, **self._ids
        )
        return self._finished(outcome, record)

    async def afinish(self) -> object:
        """Async twin of :meth:`finish`."""
        outcome = self._pending_outcome()
        record = await self._guard.aafter_call(
            self.tool_name, self.params, result=outcome.result, error=outcome.error, **self._ids
        )
        return self._finished(outcome, record)

    # --- the ``with`` face --------------------------------------------------------------

    def _exit_plan(self, exc: BaseException | None) -> bool:
        """True when ``__exit__`` must record an outcome."""
        if self._state == "done":
            return False
        if exc is not None:
            if not isinstance(exc, Exception):
                # Cancellation and interpreter exits say nothing about the tool: the call
                # stays pending, as a call whose outcome never arrived.
                return False
            if self._state == "started":
                self.error(exc)
        return True

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._exit_plan(exc):
            self.finish()

    async def __aenter__(self) -> Self:
        await self.astart()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._exit_plan(exc):
            await self.afinish()

    def __repr__(self) -> str:
        return f"<ToolCall {self.tool_name!r} {self._state}>"


def call(
    guard: LoopGuard,
    tool_name: str,
    params: object,
    *,
    session_key: object,
    run_id: object = None,
    tool_call_id: object = None,
    agent_id: object = None,
    warn_model: bool = True,
    on_critical: OnCritical = "block_call",
) -> ToolCall:
    """Guard one tool call of a hand-written agent loop, as a ``with`` block.

    ::

        with guard.call("read_file", args, session_key=thread_id, tool_call_id=call.id) as c:
            if not c.blocked:
                c.result(read_file(**args))    # what the model is shown
        reply = c.shown                         # the result (+ warning) or the blocked message

    Entering asks the guard (``before_call``); a blocked call is recorded at once and
    ``c.shown`` holds its message. Leaving records the reported outcome (``after_call``)
    and computes ``c.shown``. An exception escaping the block is recorded as the call's
    error and propagates. ``async with`` works the same way with the async twins.

    Args:
        guard: the guard.
        tool_name: the tool's name as the model called it.
        params: the arguments as the model sent them.
        session_key: the conversation; ``None`` skips the guard (SPEC §5.1).
        run_id: the agent run.
        tool_call_id: the model's id for this call.
        agent_id: the agent, for ``openclaw_config`` per-agent blocks.
        warn_model: append an emitted warning to ``c.shown``.
        on_critical: ``"block_call"`` or ``"end_run"`` (entering raises
            :class:`LoopDetectedError`; the block never runs).

    Returns:
        A :class:`ToolCall`, not yet started.

    Raises:
        LoopDetectedError: on entering, for a block under ``on_critical="end_run"``.
        PostCompactionLoopPersistedError: on leaving, when the loop survived a compaction.
        RuntimeError: on leaving, when no outcome was reported for a call that ran.
    """
    return ToolCall(
        guard,
        tool_name,
        params,
        session_key=session_key,
        run_id=run_id,
        tool_call_id=tool_call_id,
        agent_id=agent_id,
        options=AdapterOptions(warn_model=warn_model, on_critical=on_critical),
    )


# --- the helper adapters wrap a framework's "run the tool" callback with -------------------


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


def guarded_call(tc: ToolCall, run: Callable[[], T], translator: Translator[T]) -> T:
    """Run one tool call through the guard, the SPEC §11 way.

    Args:
        tc: the call, not yet started (its guard, tool, arguments, ids and options).
        run: runs the tool and returns the framework's answer for the model.
        translator: the framework's :class:`Translator`.

    Returns:
        The answer for the model: ``run()``'s, with an emitted warning appended after the
        original was recorded, or ``translator.blocked(message)`` without running the tool.

    Raises:
        LoopDetectedError: a block under ``on_critical="end_run"``.
        PostCompactionLoopPersistedError: the loop survived a compaction.
        Exception: whatever ``run`` raised, after recording it as the call's error.
    """
    tc.start()
    if tc.blocked:
        return translator.blocked(cast(str, tc.message))
    try:
        answer = run()
    except Exception as exc:
        tc.error(exc)
        tc.finish()
        raise
    tc.outcome(translator.outcome(answer))
    tc.finish()
    warning = tc.warning
    return answer if warning is None else translator.add_warning(answer, warning)


async def aguarded_call(
    tc: ToolCall, run: Callable[[], Awaitable[T]], translator: Translator[T]
) -> T:
    """Async twin of :func:`guarded_call` (``run`` returns an awaitable)."""
    await tc.astart()
    if tc.blocked:
        return translator.blocked(cast(str, tc.message))
    try:
        answer = await run()
    except Exception as exc:
        tc.error(exc)
        await tc.afinish()
        raise
    tc.outcome(translator.outcome(answer))
    await tc.afinish()
    warning = tc.warning
    return answer if warning is None else translator.add_warning(answer, warning)


# --- the decorator -------------------------------------------------------------------------

#: A session key or run id: fixed, or read on every call (one function, many conversations).
IdSource: TypeAlias = "str | Callable[[], object] | None"


def _resolve(source: IdSource) -> object:
    return source() if callable(source) else source


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
    guard: LoopGuard,
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
    guard: LoopGuard,
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
    guard: LoopGuard,
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
    guard: LoopGuard,
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

    Args:
        guard: the guard.
        func: the tool function; omit it to use ``tool(...)`` as a decorator factory.
        session_key: the conversation: a string, or a callable evaluated on every call
            (a context variable's ``get``), since one function serves many conversations.
        run_id: the agent run, a string or a callable, like ``session_key``.
        agent_id: the agent, for ``openclaw_config`` per-agent blocks.
        name: the tool's name as the model knows it (default: the function's name).
        warn_model: append an emitted warning to the returned value.
        on_critical: ``"block_call"`` (return the blocked message) or ``"end_run"`` (raise
            :class:`LoopDetectedError`).

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
    guard: LoopGuard,
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
            session_key=_resolve(session_key),
            run_id=_resolve(run_id),
            agent_id=agent_id,
            options=options,
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


# --- per-session state for adapters that see the model's messages ----------------------------


class SessionCache(Generic[V]):
    """A small thread-safe LRU map of per-session adapter state.

    Adapters keep a little state per conversation (a stream guard, the last summary seen);
    bounding it keeps a long-lived process from growing with every conversation it served.
    """

    def __init__(self, max_sessions: int = 4096) -> None:
        self._items: OrderedDict[str, V] = OrderedDict()
        self._max = max_sessions
        self._lock = threading.Lock()

    def get(self, key: str) -> V | None:
        """The session's value (marking it recently used), or ``None``."""
        with self._lock:
            value = self._items.get(key)
            if value is not None:
                self._items.move_to_end(key)
            return value

    def pop(self, key: str) -> V | None:
        """Remove and return the session's value, or ``None``."""
        with self._lock:
            return self._items.pop(key, None)

    def put(self, key: str, value: V) -> None:
        """Set the session's value, dropping the least recently used session if full."""
        with self._lock:
            self._items[key] = value
            self._items.move_to_end(key)
            while len(self._items) > self._max:
                self._items.popitem(last=False)

    def __len__(self) -> int:
        return len(self._items)


class StreamGuards:
    """One :class:`UnknownToolStreamGuard` per session, for adapters that see the model's
    messages (SPEC §5.7, §11.1).

    The threshold is the session's raw ``unknownToolThreshold`` (the stream guard resolves
    it itself). When the agent's tool set changes between messages, the session's guard is
    rebuilt for the new set and keeps its streak.
    """

    def __init__(self, guard: LoopGuard, *, max_sessions: int = 4096) -> None:
        self._guard = guard
        self._sessions: SessionCache[UnknownToolStreamGuard] = SessionCache(max_sessions)

    def observe(
        self,
        session_key: object,
        tool_names: Sequence[object],
        allowed_tools: Iterable[str],
        *,
        agent_id: object = None,
    ) -> str | None:
        """Classify one complete assistant message by the names of its tool calls.

        Returns:
            The text that replaces the message (its tool calls dropped), or ``None``.
        """
        if not isinstance(session_key, str) or not js_trim(session_key):
            return None
        allowed = tuple(allowed_tools)
        stream = self._sessions.get(session_key)
        if stream is None or stream.allowed_tools != allowed:
            block, _resolved = self._guard.block_for(agent_id)
            threshold = block.get("unknownToolThreshold") if block is not None else None
            fresh = UnknownToolStreamGuard(allowed, threshold)
            if stream is not None:
                fresh.last_name, fresh.count = stream.last_name, stream.count
            stream = fresh
            self._sessions.put(session_key, stream)
        return stream.observe(list(tool_names))


__all__ = [
    "BLOCKED_CALL_RAN",
    "DEFAULT_OPTIONS",
    "NO_OUTCOME_REPORTED",
    "UNKNOWN_TOOL_ERROR",
    "WARNING_SEPARATOR",
    "AdapterOptions",
    "IdSource",
    "OnCritical",
    "Outcome",
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
    "render_for_model",
    "tool",
    "unknown_tool_error",
]
