"""The in-process store (SPEC §1): ``MemoryStore`` and its measured fast path.

``store`` holds the store (LRU, idle expiry, the lock, the postponed append); ``_history``
the packed records and the per-run index that answers the detectors without rescanning.
This is the fast path: :class:`loopwatch.testing.ReferenceStore` is the meaning, and the
contract suite and property tests hold the two equal.
"""

from loopwatch.stores.memory.store import MAX_WARNING_KEYS, MemoryStore

__all__ = ["MAX_WARNING_KEYS", "MemoryStore"]
