"""Per-session state of adapters that see the model's messages (SPEC §5.7, §11.1).

A long-lived process serves many conversations; what an adapter keeps per conversation
(a stream guard, the last summary seen, decisions of a batch waiting for their tool step)
lives in a bounded LRU map, so memory does not grow with every conversation served.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from typing import Generic, TypeVar

from loopwatch.core.jsstr import js_trim
from loopwatch.detectors.streamguard import UnknownToolStreamGuard
from loopwatch.integrations._shared import GuardLike

V = TypeVar("V")


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

    def __init__(self, guard: GuardLike, *, max_sessions: int = 4096) -> None:
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

    def streak(self, session_key: object) -> tuple[str | None, int]:
        """The missing tool the session keeps calling, and how many messages in a row."""
        stream = self._sessions.get(session_key) if isinstance(session_key, str) else None
        return (None, 0) if stream is None else (stream.last_name, stream.count)


__all__ = ["SessionCache", "StreamGuards"]
