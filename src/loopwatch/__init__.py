"""loopwatch: detect and stop tool-call loops in LLM agents.

Three lines guard an agent::

    from loopwatch import LoopGuard
    guard = LoopGuard({"enabled": True})
    decision = guard.before_call("exec", {"command": "ls"}, session_key="s1")

Everything public is importable from here; the submodules are implementation detail.
"""

import logging as _logging
from importlib import import_module as _import_module
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from loopwatch.adapter import AdapterOptions, ToolCall
    from loopwatch.config.block import Detectors, LoopDetectionConfig, PostCompactionGuardConfig
    from loopwatch.config.merge import merge_agent_config
    from loopwatch.config.resolve import ResolvedConfig, resolve_config
    from loopwatch.core._undefined import UNDEFINED
    from loopwatch.core.fingerprint import hash_tool_call, stable_stringify
    from loopwatch.core.outcomes import OutcomeHash, hash_tool_outcome
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
    from loopwatch.errors import ConfigError, ConfigIssue, LoopDetectedError, LoopwatchError
    from loopwatch.events import (
        CompactionLoopPersistedEvent,
        GuardArmedEvent,
        LoopEvent,
        StoreErrorEvent,
        ToolExecutionBlockedEvent,
        ToolLoopEvent,
    )
    from loopwatch.guard import Decision, LoopGuard
    from loopwatch.stores import MemoryStore, Store, StoreError
    from loopwatch.stores.redis import RedisStore
    from loopwatch.stores.sqlite import SqliteStore
    from loopwatch.stores.url import store_from_url

__version__ = "0.1.0"

# A library never configures logging; without a handler of the host's, lines are dropped
# rather than printed by logging's last-resort handler.
_logging.getLogger("loopwatch").addHandler(_logging.NullHandler())

#: Where each public name lives. ``import loopwatch`` imports none of them: a name's module
#: is imported on first use (PEP 562), so a hook process or a CLI command pays only for
#: what it touches, and ``import loopwatch`` never loads redis, asyncio or the adaptive
#: profile.
_LAZY: dict[str, str] = {
    "AdapterOptions": "loopwatch.adapter",
    "CompactionLoopPersistedEvent": "loopwatch.events",
    "ConfigError": "loopwatch.errors",
    "ConfigIssue": "loopwatch.errors",
    "Decision": "loopwatch.guard",
    "Detectors": "loopwatch.config.block",
    "GuardArmedEvent": "loopwatch.events",
    "GuardSnapshot": "loopwatch.detectors.compaction",
    "GuardVerdict": "loopwatch.detectors.compaction",
    "LoopDetectedError": "loopwatch.errors",
    "LoopDetectionConfig": "loopwatch.config.block",
    "LoopEvent": "loopwatch.events",
    "LoopGuard": "loopwatch.guard",
    "LoopVerdict": "loopwatch.detectors.reference",
    "LoopwatchError": "loopwatch.errors",
    "MemoryStore": "loopwatch.stores",
    "OutcomeHash": "loopwatch.core.outcomes",
    "PostCompactionGuard": "loopwatch.detectors.compaction",
    "PostCompactionGuardConfig": "loopwatch.config.block",
    "PostCompactionLoopPersistedError": "loopwatch.detectors.compaction",
    "RedisStore": "loopwatch.stores",
    "ResolvedConfig": "loopwatch.config.resolve",
    "SessionState": "loopwatch.core.records",
    "SqliteStore": "loopwatch.stores",
    "Store": "loopwatch.stores",
    "StoreError": "loopwatch.stores",
    "StoreErrorEvent": "loopwatch.events",
    "ToolCall": "loopwatch.adapter",
    "ToolCallRecord": "loopwatch.core.records",
    "ToolExecutionBlockedEvent": "loopwatch.events",
    "ToolLoopEvent": "loopwatch.events",
    "UNDEFINED": "loopwatch.core._undefined",
    "UnknownToolStreamGuard": "loopwatch.detectors.streamguard",
    "detect_tool_call_loop": "loopwatch.detectors.reference",
    "hash_tool_call": "loopwatch.core.fingerprint",
    "hash_tool_outcome": "loopwatch.core.outcomes",
    "merge_agent_config": "loopwatch.config.merge",
    "record_tool_call": "loopwatch.core.records",
    "record_tool_call_outcome": "loopwatch.core.records",
    "resolve_config": "loopwatch.config.resolve",
    "stable_stringify": "loopwatch.core.fingerprint",
    "store_from_url": "loopwatch.stores",
}

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
    "SqliteStore",
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
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(_import_module(module), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
