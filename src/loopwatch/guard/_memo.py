"""The measured hot-path helpers of the session engine, in one labelled place.

This is the fast path. What it computes is defined by the plain code it short-cuts: an args
hash is ``hash_tool_call(tool, params)`` (SPEC §3.2), a tool name is
``normalize_tool_name(name)`` (SPEC §5.1). Each helper here only avoids repeating that work
when it can prove the answer is the same, and each is bounded in memory.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Final

#: How many ``before_call`` args hashes wait for their ``after_call`` at most.
ARGS_MEMO_SIZE: Final = 1024
#: How many characters of argument strings the memos may keep alive together: calls whose
#: ``after_call`` never comes must not pin gigabytes of arguments (issue 17).
ARGS_MEMO_CHARS: Final = 8 * 1024 * 1024
#: How many raw tool names the guard remembers the normalised form of.
TOOL_NAME_CACHE_SIZE: Final = 1024

_MISSING: Final = object()
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

    def __init__(
        self,
        tool: str,
        params: object,
        items: tuple[tuple[str, object], ...] | None,
        args_hash: str,
        chars: int,
    ) -> None:
        self.tool = tool
        self.params = params
        self.items = items
        self.args_hash = args_hash
        self.chars = chars
        #: ``(run_id, agent_id, plan)``: the call's raw run and agent ids as given to
        #: ``before_call``, and what the guard derived from them (see :meth:`context_for`).
        self.context: tuple[object, object, object] | None = None

    @classmethod
    def of(cls, tool: str, params: object, args_hash: str) -> ArgsMemo | None:
        """A memo for these params, or ``None`` when their content cannot be pinned."""
        kind = type(params)
        if kind in _IMMUTABLE_SCALARS:
            chars = len(params) if isinstance(params, str) else 0
            return cls(tool, params, None, args_hash, chars)
        if kind is not dict:
            return None
        assert isinstance(params, dict)
        try:
            items = tuple(params.items())
        except RuntimeError:  # changed by another thread meanwhile
            return None
        chars = 0
        for key, value in items:
            if type(key) is not str or type(value) not in _IMMUTABLE_SCALARS:
                return None
            if isinstance(value, str):
                chars += len(value)
        return cls(tool, params, items, args_hash, chars)

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
        the id as given, ``None`` or a plain ``str``, which normalises to itself), the
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


class ArgsMemos:
    """The pending calls' memos, keyed by (session, call id as given), bounded twice: in
    count and in the characters of argument strings they keep alive."""

    __slots__ = ("_chars", "_lock", "_memos")

    def __init__(self) -> None:
        self._memos: dict[tuple[str, str | None], ArgsMemo] = {}
        self._chars = 0
        self._lock = threading.Lock()

    def remember(
        self,
        session_key: str,
        call_id: object,
        tool: str,
        params: object,
        args_hash: str,
        context: tuple[object, object, object] | None = None,
    ) -> None:
        """Keep ``before_call``'s args hash (and its call context, see
        :meth:`ArgsMemo.context_for`) for the ``after_call`` of the same call."""
        if call_id is not None and type(call_id) is not str:
            return  # keyed by the id as given (see take)
        memo = ArgsMemo.of(tool, params, args_hash)
        if memo is None or memo.chars > ARGS_MEMO_CHARS:
            return
        memo.context = context
        memos = self._memos
        with self._lock:
            old = memos.pop((session_key, call_id), None)
            if old is not None:
                self._chars -= old.chars
            memos[session_key, call_id] = memo
            self._chars += memo.chars
            # Calls whose after_call never came: drop the oldest.
            while len(memos) > ARGS_MEMO_SIZE or self._chars > ARGS_MEMO_CHARS:
                dropped = memos.pop(next(iter(memos)))
                self._chars -= dropped.chars

    def take(self, session_key: str, call_id: object) -> ArgsMemo | None:
        """The memo of the call's ``before_call``, if any (:meth:`ArgsMemo.hash_of` says
        whether its hash still holds). Keyed by the id as given, ``None`` or a plain
        ``str``: normalising any other id may fail, and must fail where it always did."""
        if call_id is not None and type(call_id) is not str:
            return None
        with self._lock:
            memo = self._memos.pop((session_key, call_id), None)
            if memo is not None:
                self._chars -= memo.chars
        return memo

    def __len__(self) -> int:
        return len(self._memos)

    def keys(self) -> list[tuple[str, str | None]]:
        """The (session, call id) of each memo, oldest first."""
        return list(self._memos)

    @property
    def chars(self) -> int:
        """The characters of argument strings the memos keep alive."""
        return self._chars


class ToolNames:
    """Normalised tool names, remembered for plain ``str`` names (cleared when full)."""

    __slots__ = ("_names", "_normalize")

    def __init__(self, normalize: Callable[[object], str]) -> None:
        self._names: dict[str, str] = {}
        self._normalize = normalize

    def __call__(self, tool_name: object) -> str:
        if type(tool_name) is not str:
            return self._normalize(tool_name)
        names = self._names
        name = names.get(tool_name)
        if name is None:
            name = self._normalize(tool_name)
            if len(names) >= TOOL_NAME_CACHE_SIZE:
                names.clear()
            names[tool_name] = name
        return name


class BoundedMap:
    """A thread-safe insertion-ordered map that forgets its oldest entries beyond ``limit``."""

    __slots__ = ("_items", "_lock", "limit")

    def __init__(self, limit: int) -> None:
        self._items: dict[object, object] = {}
        self._lock = threading.Lock()
        self.limit = limit

    def get(self, key: object) -> object | None:
        return self._items.get(key)

    def __contains__(self, key: object) -> bool:
        return key in self._items

    def __len__(self) -> int:
        return len(self._items)

    def put(self, key: object, value: object) -> None:
        items = self._items
        with self._lock:
            items.pop(key, None)
            items[key] = value
            if len(items) > self.limit:
                del items[next(iter(items))]

    def pop(self, key: object, default: object = None) -> object:
        with self._lock:
            return self._items.pop(key, default)


__all__ = [
    "ARGS_MEMO_CHARS",
    "ARGS_MEMO_SIZE",
    "TOOL_NAME_CACHE_SIZE",
    "ArgsMemo",
    "ArgsMemos",
    "BoundedMap",
    "ToolNames",
]
