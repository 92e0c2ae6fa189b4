"""The per-agent merge of OpenClaw (SPEC §7.3): agent ids and global + agent blocks.

Lenient on purpose, like resolution: it runs per tool call and must behave like the
reference for any input.
"""

from __future__ import annotations

import functools
import numbers
import re
from collections.abc import Mapping
from typing import Any, Final

from loopwatch.config._values import js_truthy
from loopwatch.core._undefined import UNDEFINED
from loopwatch.core.jsstr import js_lower, js_trim

_AGENT_ID_VALID: Final = re.compile(r"[a-z0-9][a-z0-9_-]{0,63}", re.IGNORECASE | re.ASCII)
_AGENT_ID_INVALID_RUN: Final = re.compile(r"[^a-z0-9_-]+")
_AGENT_ID_MAX_LENGTH: Final = 64
DEFAULT_AGENT_ID: Final = "main"


@functools.lru_cache(maxsize=1024)
def _normalize_agent_id_str(value: str) -> str:
    trimmed = js_trim(value)
    if not trimmed:
        return DEFAULT_AGENT_ID
    if _AGENT_ID_VALID.fullmatch(trimmed):
        return js_lower(trimmed)
    cleaned = _AGENT_ID_INVALID_RUN.sub("-", js_lower(trimmed))
    cleaned = cleaned.lstrip("-").rstrip("-")[:_AGENT_ID_MAX_LENGTH]
    return cleaned or DEFAULT_AGENT_ID


def normalize_agent_id(value: object) -> str:
    """Normalise an agent id as OpenClaw does (SPEC §7.3).

    Examples: ``"  "`` → ``main``, ``"-lead-"`` → ``lead``, ``"agent a"`` → ``agent-a``,
    ``"MAIN"`` → ``main``, ``"\\u212aelvin"`` → ``kelvin``.

    Args:
        value: an id; anything that is not a ``str`` counts as ``""`` (so ``main``).

    Returns:
        A non-empty id of at most 64 characters from ``[a-z0-9_-]``.
    """
    return _normalize_agent_id_str(value if isinstance(value, str) else "")


def _present_block(value: object) -> Mapping[Any, Any] | None:
    """A block slot as the merge sees it: absent/falsy → ``None``, non-mapping → ``{}``."""
    if not js_truthy(value):
        return None
    return value if isinstance(value, Mapping) else {}


def _loop_detection_of(tools: object) -> Mapping[Any, Any] | None:
    if not isinstance(tools, Mapping):
        return None
    return _present_block(tools.get("loopDetection"))


def is_skipped_entry(entry: object) -> bool:
    """Entries that are JavaScript primitives have no properties to read: skip them."""
    return entry is None or entry is UNDEFINED or isinstance(entry, (str, bytes, numbers.Number))


def _agent_block(config: Mapping[Any, Any], agent_id: str) -> Mapping[Any, Any] | None:
    agents = config.get("agents")
    entries = agents.get("list") if isinstance(agents, Mapping) else None
    if not isinstance(entries, (list, tuple)):
        return None
    want = normalize_agent_id(agent_id)
    for entry in entries:
        if is_skipped_entry(entry):
            continue
        # A list (or other non-mapping object) is an entry with no ``id`` and no ``tools``.
        entry_id = entry.get("id") if isinstance(entry, Mapping) else None
        if entry_id is UNDEFINED:
            entry_id = None
        if entry_id is not None and not isinstance(entry_id, str):
            continue
        if normalize_agent_id(entry_id) != want:
            continue
        # First match wins, even when it has no block: later entries are not consulted.
        return _loop_detection_of(entry.get("tools")) if isinstance(entry, Mapping) else None
    return None


def _copy_block(block: Mapping[Any, Any]) -> dict[Any, Any]:
    """A new dict, nested objects copied too, so callers can never mutate the input."""
    return {
        key: dict(value) if isinstance(value, Mapping) else value for key, value in block.items()
    }


def _mapping_or_empty(value: object) -> Mapping[Any, Any]:
    return value if isinstance(value, Mapping) else {}


def merge_agent_config(openclaw_config: object, agent_id: object) -> dict[str, Any] | None:
    """Merge the global block with one agent's block, as OpenClaw does (SPEC §7.3).

    Lenient on purpose: it runs per tool call and must behave like the reference for any input.

    Args:
        openclaw_config: a whole OpenClaw config (anything; non-mappings have no blocks).
        agent_id: the agent to look up; ``None``, ``""`` or a non-string → no agent block.

    Returns:
        A new dict (the input is never mutated), or ``None`` when neither block exists. With
        both blocks, ``detectors`` and ``postCompactionGuard`` are merged one level deep and
        always present.
    """
    if not isinstance(openclaw_config, Mapping):
        return None
    glob = _loop_detection_of(openclaw_config.get("tools"))
    agent = (
        _agent_block(openclaw_config, agent_id)
        if isinstance(agent_id, str) and agent_id != ""
        else None
    )
    if agent is None:
        return None if glob is None else _copy_block(glob)
    if glob is None:
        return _copy_block(agent)
    return {
        **glob,
        **agent,
        "detectors": {
            **_mapping_or_empty(glob.get("detectors")),
            **_mapping_or_empty(agent.get("detectors")),
        },
        "postCompactionGuard": {
            **_mapping_or_empty(glob.get("postCompactionGuard")),
            **_mapping_or_empty(agent.get("postCompactionGuard")),
        },
    }
