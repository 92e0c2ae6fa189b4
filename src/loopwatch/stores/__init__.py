"""Storage backends for ``LoopGuard``: one interface, chosen by URL scheme."""

from __future__ import annotations

from loopwatch.stores.base import GuardSpec, OutcomeWrite, Store, StoreError
from loopwatch.stores.memory import MemoryStore

__all__ = ["GuardSpec", "MemoryStore", "OutcomeWrite", "Store", "StoreError"]
