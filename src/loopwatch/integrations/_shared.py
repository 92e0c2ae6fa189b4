"""The pieces every adapter shares, below :class:`~loopwatch.ToolCall` (SPEC §11).

* :class:`GuardLike`: what an adapter needs of a guard, as a protocol, so that this layer
  never imports :mod:`loopwatch.guard` (which itself imports the adapter layer for
  ``guard.tool`` / ``guard.call``);
* :class:`AdapterOptions`: ``warn_model`` and ``on_critical``, validated once;
* text helpers: what the model is shown for a value, a warning appended to it, the error
  of an unknown tool, the recovery message;
* :func:`resolve_id`: the one way adapters read a fixed-or-computed session key / run id;
* the *guarding scope*: a context variable naming the (guard, session) pairs whose call is
  being guarded right now, so that a second layer on the same guard and session (a
  ``guard.tool`` function used as the tool of a guarded framework agent) passes the call
  through instead of recording it twice (issue 16);
* critical strikes for ``on_critical="recover"`` (OpenClaw 8.1's two-strike rule).

Nothing here imports a framework.
"""

from __future__ import annotations

import contextlib
import contextvars
import json
import threading
import weakref
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, Literal, Protocol, TypeAlias, TypeVar

from loopwatch.core._undefined import UNDEFINED
from loopwatch.core.jsstr import js_trim
from loopwatch.core.outcomes import hash_tool_outcome
from loopwatch.detectors.reference import LoopVerdict
from loopwatch.messages import UNKNOWN_TOOL_ERROR, WARNING_SEPARATOR

if TYPE_CHECKING:
    from loopwatch.core.records import ToolCallRecord

_T = TypeVar("_T")

OnCritical = Literal["block_call", "end_run", "recover"]

_ON_CRITICAL: Final = ("block_call", "end_run", "recover")

# --- model-facing texts of this layer ---------------------------------------------------------

#: What the model reads for the first critical of a run under ``on_critical="recover"``:
#: the detector's reason, then a way out that is not "try again".
RECOVERY_MESSAGE: Final = (
    "{reason}\n\n"
    "This exact tool call will not run again. Step back and reconsider the task: answer "
    "the user with what you have, ask them for what is missing, or take a different "
    "approach (another tool, or different arguments). Repeating this call will end the run."
)


class DecisionLike(Protocol):
    """What an adapter reads of a guard's decision (``loopwatch.Decision``)."""

    @property
    def action(self) -> str: ...

    @property
    def verdict(self) -> LoopVerdict: ...

    @property
    def emitted(self) -> bool: ...

    @property
    def tool_result(self) -> dict[str, Any] | None: ...

    @property
    def enforced(self) -> bool: ...


class GuardLike(Protocol):
    """What adapters call on a guard (:class:`loopwatch.LoopGuard` is one).

    Optional newer methods (``before_batch``, ``critical_strike`` and their async twins)
    are looked up with ``getattr``, so a guard without them still works.
    """

    def before_call(
        self,
        tool_name: object,
        params: object,
        *,
        session_key: object,
        run_id: object = ...,
        tool_call_id: object = ...,
        agent_id: object = ...,
    ) -> DecisionLike: ...

    async def abefore_call(
        self,
        tool_name: object,
        params: object,
        *,
        session_key: object,
        run_id: object = ...,
        tool_call_id: object = ...,
        agent_id: object = ...,
    ) -> DecisionLike: ...

    def after_call(
        self,
        tool_name: object,
        params: object,
        *,
        session_key: object,
        run_id: object = ...,
        tool_call_id: object = ...,
        result: object = ...,
        error: object = ...,
        agent_id: object = ...,
    ) -> ToolCallRecord | None: ...

    async def aafter_call(
        self,
        tool_name: object,
        params: object,
        *,
        session_key: object,
        run_id: object = ...,
        tool_call_id: object = ...,
        result: object = ...,
        error: object = ...,
        agent_id: object = ...,
    ) -> ToolCallRecord | None: ...

    def block_for(self, agent_id: object = ...) -> tuple[dict[str, Any] | None, Any]: ...


@dataclass(frozen=True, slots=True, kw_only=True)
class AdapterOptions:
    """Behaviour shared by every adapter, validated once.

    Attributes:
        warn_model: when a warning is emitted (SPEC §5.3: the first time a count reaches
            10, 20, ...), append its message to what the model sees, whatever the form
            (a result, an error text, a retry prompt). The core never injects anything
            (the reference behaviour); most models only change course when they read the
            warning, so adapters default to on.
        on_critical: ``"block_call"`` (the reference): a critical loop blocks that call,
            the model is told why and the run goes on. ``"end_run"``: the adapter raises
            :class:`LoopDetectedError` so the framework ends the run with a clear error,
            for unattended agents that should stop rather than keep trying.
            ``"recover"``: the first critical of a run blocks the call with a message
            asking the model to change course (:data:`RECOVERY_MESSAGE`); a second
            critical in the same run ends it, as ``"end_run"`` (OpenClaw 8.1's two-strike
            rule: runs that retried blocked calls for hours now stop).
    """

    warn_model: bool = True
    on_critical: OnCritical = "block_call"

    def __post_init__(self) -> None:
        if not isinstance(self.warn_model, bool):
            raise TypeError(f"warn_model must be a bool, not {type(self.warn_model).__name__}")
        if self.on_critical not in _ON_CRITICAL:
            raise ValueError(
                "on_critical must be 'block_call', 'end_run' or 'recover', "
                f"not {self.on_critical!r}"
            )


DEFAULT_OPTIONS: Final = AdapterOptions()


@dataclass(frozen=True, slots=True)
class Outcome:
    """What a finished call showed the model: a result or an error (never both).

    ``UNDEFINED`` means "not this one", as in ``after_call``; ``error=None`` is a real error.
    """

    result: object = UNDEFINED
    error: object = UNDEFINED


# --- texts -------------------------------------------------------------------------------------


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
    """Text for a value the model is shown as text: JSON where possible, else ``str``.

    Never raises: it runs inside the host's tool call (a warning appended to a result), on
    values of the host's. A value that neither JSON nor its own ``__str__`` can render (a
    failing ``__str__``, nesting deeper than the recursion limit) is named by its type.
    """
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, ensure_ascii=False, default=str)
    except Exception:
        pass
    try:
        return str(value)
    except Exception:
        return f"<{type(value).__name__} object>"


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
    try:
        if isinstance(shown, (list, tuple)):
            return [*shown, _text_part(warning)]
        if isinstance(shown, Mapping) and isinstance(shown.get("content"), (list, tuple)):
            return {**shown, "content": [*shown["content"], _text_part(warning)]}
    except Exception:
        pass  # a container of the host's that cannot be read: shown as text instead
    return f"{render_for_model(shown)}{WARNING_SEPARATOR}{warning}"


def append_warning_text(text: str, warning: str | None) -> str:
    """``text`` with ``warning`` after a blank line (``text`` alone without a warning)."""
    if warning is None:
        return text
    return f"{text}{WARNING_SEPARATOR}{warning}" if text else warning


def recovery_message(reason: str | None) -> str:
    """What the model reads for the first critical of a run under ``"recover"``."""
    return RECOVERY_MESSAGE.format(reason=reason or "")


# --- construction checks -------------------------------------------------------------------------

#: The methods every adapter calls on its guard (:class:`GuardLike`).
_GUARD_METHODS: Final = ("before_call", "abefore_call", "after_call", "aafter_call")


def check_adapter_arguments(
    guard: object, *, agent_id: object = None, **id_sources: object
) -> None:
    """Reject, when an adapter is built, a guard or an id setting every call would fail on.

    Without it the mistake surfaces inside the agent's first tool call (``guard=None``: an
    ``AttributeError`` the framework reports as the tool's failure), or never
    (``session_key=3``: every call has no session, so nothing is guarded, and one log
    line says so).

    Args:
        guard: the adapter's guard: a :class:`~loopwatch.LoopGuard` or anything with the
            methods of :class:`GuardLike`.
        agent_id: the adapter's ``agent_id``: a ``str`` or ``None`` (only a ``str`` selects
            an ``openclaw_config`` per-agent block; ``3`` would silently select none).
        id_sources: the adapter's ``session_key`` / ``run_id`` settings by name: each a
            ``str``, a callable or ``None``.

    Raises:
        TypeError: naming the argument.
    """
    if isinstance(guard, type):  # LoopGuard itself: its methods are there, unbound
        raise TypeError(
            f"guard must be a LoopGuard, not the class {guard.__name__} (build one: "
            f"{guard.__name__}(...))"
        )
    missing = [name for name in _GUARD_METHODS if not callable(getattr(guard, name, None))]
    if missing:
        raise TypeError(
            f"guard must be a LoopGuard, not {type(guard).__name__} (no {', '.join(missing)})"
        )
    if agent_id is not None and not isinstance(agent_id, str):
        raise TypeError(f"agent_id must be a str or None, not {type(agent_id).__name__}")
    for name, source in id_sources.items():
        if source is not None and not isinstance(source, str) and not callable(source):
            raise TypeError(
                f"{name} must be a str, a callable or None, not {type(source).__name__}"
            )


def check_capacity(name: str, value: object) -> None:
    """An adapter's bound on remembered calls or sessions: an ``int`` >= 1.

    Raises:
        ValueError: naming the argument (``0`` would forget every call at once).
    """
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be an integer >= 1, not {value!r}")


# --- ids ---------------------------------------------------------------------------------------


def resolve_id(source: object, *context: object, default: object = None) -> object:
    """A session key or run id from an adapter's setting.

    Args:
        source: ``None`` (use ``default``), a fixed value, or a callable receiving
            ``context`` (the framework's request or context object, or nothing).
        context: what a callable ``source`` is called with.
        default: the framework's own id, used when ``source`` is or returns ``None``.
    """
    value = source(*context) if callable(source) else source
    return default if value is None else value


# --- the guarding scope --------------------------------------------------------------------------


class _Scope:
    """One call an outer layer is guarding: its guard, session and tool (``None``: not
    known), and whether an inner layer has already passed it through."""

    __slots__ = ("claimed", "guard", "session_key", "tool_name")

    def __init__(self, guard: object, session_key: object, tool_name: str | None) -> None:
        self.guard = guard
        self.session_key = session_key
        self.tool_name = tool_name
        self.claimed = False

    def claimable(self, tool_name: str | None, any_tool: bool) -> bool:
        return any_tool or self.tool_name is None or self.tool_name == tool_name

    def matches(self, guard: object, session_key: object) -> bool:
        return self.guard is guard and self.session_key == session_key


_GUARDING: contextvars.ContextVar[tuple[_Scope, ...]] = contextvars.ContextVar(
    "loopwatch_guarding", default=()
)


def is_guarding(guard: object, session_key: object) -> bool:
    """True while an outer layer guards a call with this guard for this session.

    Compared by identity of the guard and equality of the session key: another guard, or
    the same guard for another conversation, is an independent history and guards on.
    """
    return any(scope.matches(guard, session_key) for scope in _GUARDING.get())


def claim_guarded(
    guard: object, session_key: object, tool_name: str | None = None, *, any_tool: bool = True
) -> bool:
    """True when this call is the one an outer layer already guards: pass it through.

    The first inner call on the same guard and session claims the outer call; any further
    one inside it (a tool that calls guarded helpers several times) is a call of its own
    and is guarded as usual. With ``any_tool=False`` (a framework adapter's call, not a
    ``guard.tool`` function's or a ``guard.call`` block's) only a call of the outer call's
    tool claims it: a sub-agent's call of another tool, run inside the outer call's tool
    on the same guard and session, is a call of its own (it used to pass through, its
    first call of each run unguarded and unrecorded).
    """
    for scope in reversed(_GUARDING.get()):
        if (
            scope.matches(guard, session_key)
            and not scope.claimed
            and scope.claimable(tool_name, any_tool)
        ):
            scope.claimed = True
            return True
    return False


def enter_guarding(
    guard: object, session_key: object, tool_name: str | None = None
) -> contextvars.Token[Any]:
    """Mark ``(guard, session_key)`` as guarding a call of ``tool_name`` in the current
    context; see :func:`guarding`. Returns the token for :func:`leave_guarding`."""
    return _GUARDING.set((*_GUARDING.get(), _Scope(guard, session_key, tool_name)))


def leave_guarding(token: contextvars.Token[Any]) -> None:
    """Undo :func:`enter_guarding` (a token from another context is ignored)."""
    with contextlib.suppress(ValueError, RuntimeError):
        _GUARDING.reset(token)


@contextlib.contextmanager
def guarding(guard: object, session_key: object, tool_name: str | None = None) -> Iterator[None]:
    """While the block runs, the first inner call on this guard and session passes
    through (:func:`claim_guarded`).

    An adapter wraps the framework's "run the tool" step in this, so that a
    ``guard.tool``-decorated function (or a ``guard.call`` block) inside it does not guard
    and record the same call a second time.
    """
    token = enter_guarding(guard, session_key, tool_name)
    try:
        yield
    finally:
        leave_guarding(token)


#: The answers (and raised errors) that inner loopwatch layers of *another* guard warned
#: while the current layer's tool ran, by ``id``: ``(warned, original)``. The outer layer
#: records the original: one guard's warning (a changed text) must not read as another
#: outcome to the other guard, whose no-progress count would start over at each warning
#: and never reach the block (a shadow guard inside an enforcing one).
WarnedAnswers: TypeAlias = "dict[int, tuple[object, object]]"
_WARNED: contextvars.ContextVar[WarnedAnswers | None] = contextvars.ContextVar(
    "loopwatch_warned", default=None
)


def note_warned(warned: object, original: object) -> None:
    """Tell the layer around this one, if any, that ``warned`` is ``original`` with a
    warning appended."""
    seen = _WARNED.get()
    if seen is not None and warned is not original:
        seen[id(warned)] = (warned, original)


def unwarned(value: _T, seen: WarnedAnswers | None) -> _T:
    """``value`` as it was before an inner layer appended its warning (``value`` itself
    when none did)."""
    entry = seen.get(id(value)) if seen else None
    if entry is None or entry[0] is not value:
        return value
    return entry[1]  # type: ignore[return-value]


def collect_warned(seen: WarnedAnswers) -> contextvars.Token[Any]:
    """Collect the answers inner layers warn into ``seen``, in the current context, until
    :func:`stop_collecting`."""
    return _WARNED.set(seen)


def stop_collecting(token: contextvars.Token[Any]) -> None:
    """Undo :func:`collect_warned` (a token from another context is ignored)."""
    with contextlib.suppress(ValueError, RuntimeError):
        _WARNED.reset(token)


# --- critical strikes (on_critical="recover") -------------------------------------------------


class _LocalStrikes:
    """In-process strike counts, for guards without ``critical_strike``: per guard (by
    weak reference), per session and run, bounded."""

    _MAX: Final = 4096

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: weakref.WeakKeyDictionary[object, dict[tuple[object, object], int]] = (
            weakref.WeakKeyDictionary()
        )

    def strike(self, guard: object, session_key: object, run_id: object) -> int:
        with self._lock:
            try:
                counts = self._counts.setdefault(guard, {})
            except TypeError:  # not weak-referenceable: count without keeping it
                counts = {}
            key = (session_key, run_id)
            counts[key] = counts.pop(key, 0) + 1
            while len(counts) > self._MAX:
                counts.pop(next(iter(counts)))
            return counts[key]


_LOCAL_STRIKES: Final = _LocalStrikes()


def critical_strike(guard: object, *, session_key: object, run_id: object = None) -> int:
    """Record one critical of this run and return its number (1 for the first).

    Uses the guard's store (``guard.critical_strike``) when the guard has it, so hooks in
    separate processes share the count; otherwise an in-process count.
    """
    method: Callable[..., int] | None = getattr(guard, "critical_strike", None)
    if method is not None:
        return method(session_key=session_key, run_id=run_id)
    return _LOCAL_STRIKES.strike(guard, session_key, run_id)


async def acritical_strike(guard: object, *, session_key: object, run_id: object = None) -> int:
    """Async twin of :func:`critical_strike`."""
    method: Callable[..., Any] | None = getattr(guard, "acritical_strike", None)
    if method is not None:
        return int(await method(session_key=session_key, run_id=run_id))
    return critical_strike(guard, session_key=session_key, run_id=run_id)


#: One call of a batch for ``before_batch``: tool name, arguments, tool-call id.
BatchCall = tuple[str, object, object]


def batch_admission(guard: object) -> tuple[Callable[..., Any] | None, Callable[..., Any] | None]:
    """The guard's ``before_batch`` and ``abefore_batch`` (``None`` when it has none)."""
    return getattr(guard, "before_batch", None), getattr(guard, "abefore_batch", None)


__all__ = [
    "DEFAULT_OPTIONS",
    "RECOVERY_MESSAGE",
    "AdapterOptions",
    "BatchCall",
    "DecisionLike",
    "GuardLike",
    "OnCritical",
    "Outcome",
    "acritical_strike",
    "append_warning",
    "append_warning_text",
    "batch_admission",
    "check_adapter_arguments",
    "check_capacity",
    "claim_guarded",
    "critical_strike",
    "guarding",
    "is_guarding",
    "recovery_message",
    "render_for_model",
    "resolve_id",
    "unknown_tool_error",
]
