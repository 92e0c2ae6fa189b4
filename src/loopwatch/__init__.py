"""loopwatch: detect and stop tool-call loops in LLM agents.

Three lines guard an agent::

    from loopwatch import LoopGuard
    guard = LoopGuard({"enabled": True})
    decision = guard.before_call("exec", {"command": "ls"}, session_key="s1")

Everything public is importable from here; the submodules are implementation detail.
"""

import logging as _logging
from typing import TYPE_CHECKING

from loopwatch.adapter import AdapterOptions, ToolCall
from loopwatch.config import (
    ConfigError,
    ConfigIssue,
    Detectors,
    LoopDetectionConfig,
    PostCompactionGuardConfig,
    ResolvedConfig,
    merge_agent_config,
    resolve_config,
)
from loopwatch.core._undefined import UNDEFINED
from loopwatch.core.records import (
    SessionState,
    ToolCallRecord,
    record_tool_call,
    record_tool_call_outcome,
)
from loopwatch.detectors.compaction import (
    GuardSnapshot,
    GuardVerdict,
    PostCompactionGuard,
    PostCompactionLoopPersistedError,
)
from loopwatch.detectors.reference import LoopVerdict, detect_tool_call_loop
from loopwatch.detectors.streamguard import UnknownToolStreamGuard
from loopwatch.errors import LoopDetectedError, LoopwatchError
from loopwatch.events import (
    CompactionLoopPersistedEvent,
    GuardArmedEvent,
    LoopEvent,
    StoreErrorEvent,
    ToolExecutionBlockedEvent,
    ToolLoopEvent,
)
from loopwatch.fingerprint import hash_tool_call, stable_stringify
from loopwatch.guard import Decision, LoopGuard
from loopwatch.outcomes import OutcomeHash, hash_tool_outcome
from loopwatch.stores import MemoryStore, Store, StoreError

if TYPE_CHECKING:
    from loopwatch.stores.redis import RedisStore
    from loopwatch.stores.url import store_from_url

__version__ = "0.1.0"

# A library never configures logging; without a handler of the host's, lines are dropped
# rather than printed by logging's last-resort handler.
_logging.getLogger("loopwatch").addHandler(_logging.NullHandler())

__all__ = [
    "UNDEFINED",
    "AdapterOptions",
    "CompactionLoopPersistedEvent",
    "ConfigError",
    "ConfigIssue",
    "Decision",
    "Detectors",
    "GuardArmedEvent",
    "GuardSnapshot",
    "GuardVerdict",
    "LoopDetectedError",
    "LoopDetectionConfig",
    "LoopEvent",
    "LoopGuard",
    "LoopVerdict",
    "LoopwatchError",
    "MemoryStore",
    "OutcomeHash",
    "PostCompactionGuard",
    "PostCompactionGuardConfig",
    "PostCompactionLoopPersistedError",
    "RedisStore",
    "ResolvedConfig",
    "SessionState",
    "Store",
    "StoreError",
    "StoreErrorEvent",
    "ToolCall",
    "ToolCallRecord",
    "ToolExecutionBlockedEvent",
    "ToolLoopEvent",
    "UnknownToolStreamGuard",
    "__version__",
    "detect_tool_call_loop",
    "hash_tool_call",
    "hash_tool_outcome",
    "merge_agent_config",
    "record_tool_call",
    "record_tool_call_outcome",
    "resolve_config",
    "stable_stringify",
    "store_from_url",
]


def __getattr__(name: str) -> object:
    # Lazy: ``import loopwatch`` never imports redis; the names resolve on first use.
    if name in ("RedisStore", "store_from_url"):
        from loopwatch import stores

        return getattr(stores, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
