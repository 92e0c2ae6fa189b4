"""What every ``loopwatch hook <agent>`` shares: the event model, the guard calls, notes.

An agent module turns the host's JSON into a :class:`HookEvent` and a :class:`Outcome`
back into the host's answer; everything between is here, the same for every agent:

- ``before``: ``LoopGuard.before_call``. A block is answered at once (and, as a host
  does, the blocked result goes to ``after_call``, which records nothing). An emitted
  warning is *not* answered here: the tool still runs, its ``after_call`` must record the
  original result, and the model should read the warning next to that result. So the
  warning is left as a note for the call's post event, in the store's side table (each
  event is a new process).
- ``after``: ``LoopGuard.after_call`` with the host's result (or error), then the note of
  that call's warning, if any; a loop that survived a compaction ends the run.
- ``compaction``: ``LoopGuard.compaction_retry`` (arms the post-compaction guard).
- ``maybe_compaction``: a host event that comes before a compaction *may* run, with no
  word of whether one did (Gemini CLI's ``PreCompress`` fires before every model request,
  and compresses only past a token threshold). The agent's :class:`CompactionCheck` marks
  where its transcript stands; the session's next event asks the transcript whether the
  compaction happened since, and arms the guard only then. Arming on every such event
  would restart the guard's window before every model request, so a loop that outlived a
  compaction would never fill it. When the transcript cannot tell, the event arms a guard
  that is not armed already (never cutting short a window under way).

Notes hold the guard's own model-facing texts (tool names and counts, never arguments or
results), keyed by the call's id; the alternative, recomputing the warning in the post
event, would need the history as it was before the call, which is gone by then.
"""

from __future__ import annotations

import logging
import threading
import time
import weakref
from collections import OrderedDict
from collections.abc import Callable
from contextlib import suppress
from typing import TYPE_CHECKING, Any, Final, Literal, NamedTuple, Protocol

from loopwatch.core._undefined import UNDEFINED
from loopwatch.host_outcome import as_outcome

if TYPE_CHECKING:
    from loopwatch.guard import LoopGuard
    from loopwatch.stores.base import Store

logger = logging.getLogger("loopwatch.hooks")

EventKind = Literal["before", "after", "compaction", "maybe_compaction", "ignore"]

#: Said in a deny when the guard blocked without a message (it always has one today).
FALLBACK_BLOCK_REASON: Final = "loopwatch blocked this call: it repeats a loop with no progress."
#: Note keys: the run of a session (for events without a run id), a call's warning.
RUN_NOTE: Final = "run"
#: The run note of a session whose pre events carry no run (see :func:`_run_of`).
NO_RUN: Final = "\x00"
WARNING_NOTE: Final = "warn:"
#: The note of a ``maybe_compaction`` event whose outcome the next event settles.
PENDING_COMPACTION_NOTE: Final = "compaction?"
#: Notes kept by the in-process note book (``memory://`` stores, ``loopwatch serve``).
MAX_MEMORY_NOTES: Final = 4096


# The three value types are named tuples, not frozen dataclasses: a hook process builds
# each class once, and a dataclass costs it about a millisecond of generated code.


class HookResult(NamedTuple):
    """What the hook command prints and returns to the agent."""

    stdout: str
    exit_code: int
    stderr: str = ""


class HookEvent(NamedTuple):
    """One host event, in loopwatch's terms.

    ``name`` is the host's own event name (answers echo it as ``hookEventName``);
    ``result`` / ``error`` are ``UNDEFINED`` when the host did not send one. ``agent`` is
    the sub-agent that made the call (Claude Code's and Codex's ``agent_id``), ``None`` for
    the main agent. ``transcript`` is the host's ``transcript_path``, when it sent one.
    """

    kind: EventKind
    name: str
    session: str | None = None
    run: str | None = None
    tool: str | None = None
    params: object = None
    call_id: str | None = None
    result: object = UNDEFINED
    error: object = UNDEFINED
    agent: str | None = None
    transcript: str | None = None


class CompactionCheck(NamedTuple):
    """How an agent's transcript tells whether a compaction ran (``maybe_compaction``).

    ``mark(event)``: where the transcript stands now, as a note's text (``None``: it cannot
    be read). ``happened(mark)``: whether the transcript shows a compaction since ``mark``
    (``None``: it cannot tell). Neither raises.
    """

    mark: Callable[[HookEvent], str | None]
    happened: Callable[[str], bool | None]


class Outcome(NamedTuple):
    """What loopwatch decided: block the call, tell the model, or end the run."""

    block: str | None = None
    warning: str | None = None
    end_run: str | None = None


IGNORED: Final = Outcome()


class NoteBook(Protocol):
    """Where a hook leaves notes for the next event of the same session."""

    def put_note(self, session_key: str, key: str, value: str, now: float) -> None: ...

    def take_note(
        self, session_key: str, key: str, now: float, *, keep: bool = False
    ) -> str | None: ...


class MemoryNotes:
    """Notes in this process, for in-process stores (tests, ``loopwatch serve``)."""

    def __init__(self) -> None:
        self._notes: OrderedDict[tuple[str, str], str] = OrderedDict()
        self._lock = threading.Lock()

    def put_note(self, session_key: str, key: str, value: str, now: float) -> None:
        with self._lock:
            self._notes[(session_key, key)] = value
            self._notes.move_to_end((session_key, key))
            while len(self._notes) > MAX_MEMORY_NOTES:
                self._notes.popitem(last=False)

    def take_note(
        self, session_key: str, key: str, now: float, *, keep: bool = False
    ) -> str | None:
        with self._lock:
            if keep:
                return self._notes.get((session_key, key))
            return self._notes.pop((session_key, key), None)


_memory_notes: weakref.WeakKeyDictionary[object, MemoryNotes] = weakref.WeakKeyDictionary()
_side_notes: dict[str, NoteBook] = {}
_notes_lock = threading.Lock()


def notes_for(store: Store) -> NoteBook:
    """The note book that goes with ``store``.

    A :class:`~loopwatch.stores.sqlite.SqliteStore` keeps notes in its own file. A store
    in this process's memory gets notes in memory too. Any other store (Redis) gets a
    SQLite side file in the state folder: the pre and post events of one tool call run
    on the same machine, so notes need not travel further.
    """
    put = getattr(store, "put_note", None)
    if callable(put) and callable(getattr(store, "take_note", None)):
        return store  # type: ignore[return-value]
    from loopwatch.stores.memory.store import MemoryStore

    with _notes_lock:
        if isinstance(store, MemoryStore):
            notes = _memory_notes.get(store)
            if notes is None:
                notes = _memory_notes[store] = MemoryNotes()
            return notes
        from loopwatch.hooks._paths import make_state_dir, notes_path
        from loopwatch.stores.sqlite import SqliteStore

        path = notes_path()
        book = _side_notes.get(path)
        if book is None:
            with suppress(OSError):  # the hooks' own folder (the store never creates one)
                make_state_dir()
            book = _side_notes[path] = SqliteStore(path)
        return book


def _session_key(agent: str, event: HookEvent) -> str | None:
    """``<agent>:<session>``, and ``<agent>:<session>/<sub-agent>`` for a sub-agent's call.

    Sub-agents share their parent's session id, and parallel ones send their tool events
    interleaved (Claude Code's hook input types say so of ``agent_id``): in one history,
    two sub-agents each running the tests once would look like one agent running them
    twice, and their calls would break each other's streaks. Each sub-agent is an agent
    loop of its own, so it gets a history of its own.
    """
    if not isinstance(event.session, str) or not event.session.strip():
        return None
    if event.agent:
        return f"{agent}:{event.session}/{event.agent}"
    return f"{agent}:{event.session}"


def _warning_key(event: HookEvent) -> str:
    if event.call_id:
        return WARNING_NOTE + event.call_id
    from loopwatch.core.fingerprint import hash_tool_call

    return WARNING_NOTE + hash_tool_call(event.tool or "", event.params)


def _note(book: NoteBook, op: str, *args: Any, **kwargs: Any) -> str | None:
    """A note operation that never fails the hook (a lost note loses a warning only)."""
    try:
        value: str | None = getattr(book, op)(*args, **kwargs)
        return value
    except Exception as exc:
        logger.warning("hook note %s failed: %s: %s", op, type(exc).__name__, exc)
        return None


def _run_of(
    book: NoteBook, session_key: str, event: HookEvent, now: float, remember: bool
) -> str | None:
    """The run of an event: as its call's pre event said.

    Hosts whose every event carries a turn id need no note (``remember=False``). Else
    (``True``) the session's pre events leave their run in a note (when it changes),
    and the other events follow it: one without a run takes the latest (Claude Code's
    ``prompt_id`` may come with tool events only, not ``PreCompact``), and while the pre
    events come without one, the others drop theirs (Codex releases whose
    ``PreToolUse`` had no ``turn_id`` yet still sent it with ``PostToolUse``: a call's pre
    under no run and its post under a turn would be two records that never meet).
    """
    if not remember:
        return event.run
    known = _note(book, "take_note", session_key, RUN_NOTE, now, keep=True)
    if event.kind == "before":
        marker = event.run or NO_RUN
        if known != marker:
            _note(book, "put_note", session_key, RUN_NOTE, marker, now)
        return event.run
    if known == NO_RUN:
        return None
    return event.run or known


def process(
    agent: str,
    event: HookEvent,
    guard: LoopGuard,
    *,
    remember_run: bool,
    compaction_check: CompactionCheck | None = None,
) -> Outcome:
    """Run one event through the guard (see the module docstring); never raises.

    Args:
        agent: the agent's name, the first part of every session key (sessions of two
            agents never mix).
        event: the parsed host event.
        guard: the guard (its store is shared by every hook process).
        remember_run: keep the session's run id in a note (see :func:`_run_of`).
        compaction_check: how the agent's transcript tells whether a ``maybe_compaction``
            event was followed by a compaction (agents that send such events).
    """
    session_key = _session_key(agent, event)
    if session_key is None or event.kind == "ignore":
        return IGNORED
    try:
        return _process(agent, session_key, event, guard, remember_run, compaction_check)
    except Exception as exc:
        logger.warning(
            "hook %s %s failed: %s: %s", agent, event.name, type(exc).__name__, exc, exc_info=True
        )
        return IGNORED


def _arm_unless_armed(guard: LoopGuard, session_key: str, run: str | None) -> bool:
    """Arm the run's guard when it is not armed; whether it armed it."""
    if guard.guard_snapshot(session_key=session_key, run_id=run).armed:
        return False
    guard.compaction_retry(session_key=session_key, run_id=run)
    return True


def _settle_compaction(
    book: NoteBook,
    guard: LoopGuard,
    session_key: str,
    run: str | None,
    check: CompactionCheck,
    now: float,
) -> None:
    """Arm the guard when the session's last ``maybe_compaction`` was a compaction."""
    mark = _note(book, "take_note", session_key, PENDING_COMPACTION_NOTE, now)
    if mark is None:
        return
    happened = check.happened(mark)
    if happened is True:
        logger.info("hook %s: the transcript shows a compaction; arming", session_key)
        guard.compaction_retry(session_key=session_key, run_id=run)
    elif happened is None:
        armed = _arm_unless_armed(guard, session_key, run)
        logger.info(
            "hook %s: the transcript cannot tell whether a compaction ran; %s",
            session_key,
            "arming" if armed else "the guard is armed already",
        )


def _process(
    agent: str,
    session_key: str,
    event: HookEvent,
    guard: LoopGuard,
    remember_run: bool,
    check: CompactionCheck | None = None,
) -> Outcome:
    from loopwatch.detectors.compaction import PostCompactionLoopPersistedError

    book = notes_for(guard.store)
    now = time.time()
    run = _run_of(book, session_key, event, now, remember_run)
    common: dict[str, Any] = {
        "session_key": session_key,
        "run_id": run,
        "tool_call_id": event.call_id,
    }
    if check is not None:
        # The compaction, if any, ran before this event: arm first, then handle it.
        _settle_compaction(book, guard, session_key, run, check, now)
    if event.kind == "compaction":
        guard.compaction_retry(session_key=session_key, run_id=run)
        return IGNORED
    if event.kind == "maybe_compaction":
        mark = check.mark(event) if check is not None else None
        if mark is not None:
            _note(book, "put_note", session_key, PENDING_COMPACTION_NOTE, mark, now)
        elif _arm_unless_armed(guard, session_key, run):
            logger.info(
                "hook %s %s: no transcript to tell whether a compaction runs; arming",
                agent,
                event.name,
            )
        return IGNORED
    if not event.tool:
        return IGNORED
    if event.kind == "before":
        decision = guard.before_call(event.tool, event.params, **common)
        if decision.tool_result is not None:
            guard.after_call(event.tool, event.params, result=decision.tool_result, **common)
            return Outcome(block=decision.verdict.message or FALLBACK_BLOCK_REASON)
        message = decision.verdict.message
        if decision.action == "warn" and decision.emitted and message:
            _note(book, "put_note", session_key, _warning_key(event), message, now)
        return IGNORED
    # after: record what the tool really returned, then bring the call's warning.
    end_run = None
    result = as_outcome(event.result)
    try:
        guard.after_call(event.tool, event.params, result=result, error=event.error, **common)
    except PostCompactionLoopPersistedError as exc:
        end_run = exc.message
    warning = _note(book, "take_note", session_key, _warning_key(event), now)
    return Outcome(warning=warning, end_run=end_run)


# --- payload helpers for the agent modules ------------------------------------------------


def text(payload: dict[str, Any], *keys: str) -> str | None:
    """The first of ``keys`` whose value is a non-empty string."""
    for key in keys:
        value = payload.get(key)
        if isinstance(value, str) and value:
            return value
    return None


__all__ = [
    "FALLBACK_BLOCK_REASON",
    "IGNORED",
    "CompactionCheck",
    "EventKind",
    "HookEvent",
    "HookResult",
    "MemoryNotes",
    "NoteBook",
    "Outcome",
    "notes_for",
    "process",
    "text",
]
