"""The measured hot-path helpers of the session engine, in one labelled place.

This is the fast path. What it computes is defined by the plain code it short-cuts: an args
hash is ``hash_tool_call(tool, params)`` (SPEC §3.2), a tool name is
``normalize_tool_name(name)`` (SPEC §5.1). Each helper here only avoids repeating that work
when it can prove the answer is the same, and each is bounded in memory.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Final

from loopwatch.core.fingerprint import hash_tool_call
from loopwatch.core.naming import plain_str
from loopwatch.guard.decision import Decision

#: How many ``before_call`` args hashes wait for their ``after_call`` at most.
ARGS_MEMO_SIZE: Final = 1024
#: How many characters of argument strings the memos may keep alive together: calls whose
#: ``after_call`` never comes must not pin gigabytes of arguments (issue 17).
ARGS_MEMO_CHARS: Final = 8 * 1024 * 1024
#: How many raw tool names the guard remembers the normalised form of.
TOOL_NAME_CACHE_SIZE: Final = 1024

_MISSING: Final = object()
_new_object: Final = object.__new__
#: Types whose instances cannot change: a params value of one of these is pinned by its
#: identity (``type()`` is compared exactly, so subclasses are not trusted).
_IMMUTABLE_SCALARS: Final = frozenset({str, int, float, bool, type(None)})
#: The id types whose normalised form is a function of the object's identity.
_IDS: Final = frozenset({str, type(None)})


class ArgsMemo:
    """The args hash ``before_call`` computed, kept for the ``after_call`` of that call.

    ``after_call`` hashes the params it is given (SPEC §5.4), and a tool may change its
    params while it runs. The hash is reused only when the params provably did not
    change: the very same object, and either an immutable scalar, or a plain ``dict`` with
    ``str`` keys and immutable scalar values that still holds the very same value objects
    under the same keys (key order never matters to the hash). Anything else (nested
    containers, other types) is hashed again. This saves a third of the hashing of a
    guarded call with large arguments.
    """

    __slots__ = ("args_hash", "chars", "context", "items", "params", "tool")

    # Built by :meth:`of` only, which writes every slot.
    tool: str
    params: object
    #: The dict's items when the params are a dict, else ``None``.
    items: tuple[tuple[str, object], ...] | None
    args_hash: str
    #: The characters of argument strings the memo keeps alive.
    chars: int
    #: ``(run_id, agent_id, plan)``: the call's raw run and agent ids as given to
    #: ``before_call``, and what the guard derived from them (see :meth:`context_for`).
    context: tuple[object, object, object] | None

    @classmethod
    def of(cls, tool: str, params: object, args_hash: str) -> ArgsMemo | None:
        """A memo for these params, or ``None`` when their content cannot be pinned."""
        kind = type(params)
        items: tuple[tuple[str, object], ...] | None
        if kind is dict:  # the usual params
            assert isinstance(params, dict)
            try:
                items = tuple(params.items())
            except RuntimeError:  # changed by another thread meanwhile
                return None
            chars = 0
            for key, value in items:
                if type(key) is not str:
                    return None
                if type(value) is str:
                    chars += len(value)
                elif type(value) not in _IMMUTABLE_SCALARS:
                    return None
        elif kind in _IMMUTABLE_SCALARS:
            items = None
            chars = len(params) if isinstance(params, str) else 0
        else:
            return None
        # Built without an __init__ frame: one memo is built on every guarded call.
        memo = _new_object(cls)
        memo.tool = tool
        memo.params = params
        memo.items = items
        memo.args_hash = args_hash
        memo.chars = chars
        memo.context = None
        return memo

    def hash_of(self, tool: str, params: object) -> str | None:
        """The remembered hash when ``params`` are still what was hashed, else ``None``."""
        if params is not self.params or tool != self.tool:
            return None
        items = self.items
        if items is not None:
            assert isinstance(params, dict)
            if len(params) != len(items):
                return None
            for key, value in items:
                if params.get(key, _MISSING) is not value:
                    return None
        return self.args_hash

    def context_for(self, tool: str, params: object, run_id: object, agent_id: object) -> object:
        """The plan ``before_call`` made for this call, when ``after_call`` provably has
        the same inputs; else ``None``.

        It stands for deriving them again: ``block_for(agent_id)``,
        ``normalize_run_id(run_id)``, ``normalize_tool_call_id(call_id)`` (the memo's key is
        the id's characters, ``None`` or a plain ``str``, which is what it normalises to), the
        args hash (:meth:`hash_of`) and ``is_known_poll(tool, params)`` (which reads only
        the params :meth:`hash_of` proves unchanged). The ids must be the very objects
        given to ``before_call``, of exact types ``str`` or ``None`` (whose normalised
        forms cannot change); the settings behind ``block_for`` are immutable.
        """
        context = self.context
        if context is None or context[0] is not run_id or context[1] is not agent_id:
            return None
        if type(run_id) not in _IDS or type(agent_id) not in _IDS:
            return None
        return context[2] if self.hash_of(tool, params) is not None else None


#: A call in flight: its decision (a ``Decision``), normalised tool name and args hash.
InFlight = tuple[Decision, str, str]


def same_call(in_flight: InFlight, tool: str, params: object, normalizers: frozenset[str]) -> bool:
    """Whether the call in flight under this call's id is this call (same tool and args):
    a second layer of the host asking again. A reused id on another call is a new call.
    Reached only when the id is in flight, so the hash is rarely paid twice."""
    if in_flight[1] != tool:
        return False
    try:
        return in_flight[2] == hash_tool_call(tool, params, normalizers=normalizers)
    except Exception:
        return False  # plan_before raises it again, under the failure policy


#: How many tool-call ids the guard remembers as in flight, and as finished.
CALL_ID_MEMORY: Final = 4096


class CallBook:
    """The calls between their ``before_call`` and their ``after_call``, by (session, id).

    Three bounded maps behind one lock, each touched once per guarded call:

    - in flight: the decision of each call whose ``before_call`` came and ``after_call``
      did not, with its tool name and args hash, by tool-call id (a non-empty ``str``): a
      second layer of the host asking about the same call (same id, tool and args) gets
      the same decision, and counts once; another call under a reused id is a new call;
    - finished: the ids whose outcome was recorded: a second report of it records nothing;
    - memos: each call's :class:`ArgsMemo` (its args hash and call context), keyed by the
      id as given (``None`` or a ``str``), bounded in count (:data:`ARGS_MEMO_SIZE`) and in
      the characters of argument strings they keep alive (:data:`ARGS_MEMO_CHARS`).
    """

    __slots__ = ("_chars", "_finished", "_in_flight", "_lock", "_memos")

    def __init__(self) -> None:
        # OrderedDicts, all three: the oldest entry goes in O(1) (``next(iter())`` of a
        # ``dict`` walks the holes its deleted oldest entries leave, a microsecond a call
        # once it is full, as it stays when a host's after_calls never come).
        self._in_flight: OrderedDict[tuple[str, str | None], InFlight] = OrderedDict()
        self._finished: OrderedDict[tuple[str, str | None], bool] = OrderedDict()
        self._memos: OrderedDict[tuple[str, str | None], ArgsMemo] = OrderedDict()
        self._chars = 0
        self._lock = threading.Lock()

    def seen(self, session_key: str, call_id: object) -> InFlight | None:
        """The call in flight under this id, if any: (its decision, tool name, args hash)."""
        if type(call_id) is not str:
            if not isinstance(call_id, str):
                return None
            call_id = plain_str(call_id)  # a str subclass: keyed by its characters
        if not call_id:
            return None
        return self._in_flight.get((session_key, call_id))

    def start(
        self, session_key: str, call_id: object, decided: InFlight, memo: ArgsMemo | None
    ) -> None:
        """A call was decided: ``decided`` (its decision, tool name and args hash) is in
        flight under its id, ``memo`` (if any) waits for its ``after_call``."""
        if call_id is not None and type(call_id) is not str:
            if not isinstance(call_id, str):
                return  # keyed by the id as given: any other id is derived again
            call_id = plain_str(call_id)  # a str subclass: keyed by its characters
        ident: str | None = call_id  # (checked just above)
        key = (session_key, ident)
        lock = self._lock
        lock.acquire()  # (not ``with``: its __enter__ and __exit__ cost 70 ns more)
        try:
            if memo is not None and memo.chars <= ARGS_MEMO_CHARS:
                memos = self._memos
                old = memos.pop(key, None)
                if old is not None:
                    self._chars -= old.chars
                memos[key] = memo
                self._chars += memo.chars
                # Calls whose after_call never came: drop the oldest.
                while len(memos) > ARGS_MEMO_SIZE or self._chars > ARGS_MEMO_CHARS:
                    self._chars -= memos.popitem(last=False)[1].chars
            if ident:
                self._finished.pop(key, None)
                in_flight = self._in_flight
                in_flight.pop(key, None)
                in_flight[key] = decided
                if len(in_flight) > CALL_ID_MEMORY:
                    in_flight.popitem(last=False)  # the oldest
        finally:
            lock.release()

    def finish(self, session_key: str, call_id: object) -> tuple[bool, ArgsMemo | None]:
        """An outcome is reported: (whether this id's outcome was recorded already, the
        call's memo if any)."""
        if call_id is not None and type(call_id) is not str:
            if not isinstance(call_id, str):
                return False, None
            call_id = plain_str(call_id)  # a str subclass: keyed by its characters
        ident: str | None = call_id  # (checked just above)
        key = (session_key, ident)
        lock = self._lock
        lock.acquire()  # (not ``with``, as in start)
        try:
            memo = self._memos.pop(key, None)
            if memo is not None:
                self._chars -= memo.chars
            if not ident:
                return False, memo
            finished = self._finished
            if self._in_flight.pop(key, None) is None and key in finished:
                return True, None
            finished.pop(key, None)
            finished[key] = True
            if len(finished) > CALL_ID_MEMORY:
                finished.popitem(last=False)  # the oldest
            return False, memo
        finally:
            lock.release()

    def __len__(self) -> int:
        """How many memos wait for their ``after_call``."""
        return len(self._memos)

    def keys(self) -> list[tuple[str, str | None]]:
        """The (session, call id) of each memo, oldest first."""
        return list(self._memos)

    @property
    def chars(self) -> int:
        """The characters of argument strings the memos keep alive."""
        return self._chars


class ToolNames(dict[str, str]):
    """Normalised tool names, remembered for plain ``str`` names (cleared when full).

    A ``dict`` of the names seen: ``names[name]`` is a C-speed lookup for a plain ``str``
    name seen before (the usual call), and normalises and remembers any other ``str``
    (:meth:`__missing__`). Names of other types go through the call, never remembered.
    """

    __slots__ = ("_normalize",)

    def __init__(self, normalize: Callable[[object], str]) -> None:
        super().__init__()
        self._normalize = normalize

    def __missing__(self, tool_name: str) -> str:
        name = self._normalize(tool_name)
        if type(tool_name) is str:  # (a str subclass is looked up, never remembered)
            if len(self) >= TOOL_NAME_CACHE_SIZE:
                self.clear()
            self[tool_name] = name
        return name

    def __call__(self, tool_name: object) -> str:
        if type(tool_name) is not str:
            return self._normalize(tool_name)
        return self[tool_name]


__all__ = [
    "ARGS_MEMO_CHARS",
    "ARGS_MEMO_SIZE",
    "CALL_ID_MEMORY",
    "TOOL_NAME_CACHE_SIZE",
    "ArgsMemo",
    "CallBook",
    "InFlight",
    "ToolNames",
    "same_call",
]
