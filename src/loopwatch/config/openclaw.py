"""Whole OpenClaw configs: strict validation of every block inside one, and its profile.

Only ``tools.loopDetection``, each ``agents.list[i].tools.loopDetection`` and the
``loopwatch`` block are checked; every other key is ignored so a real OpenClaw config loads
as it is.
"""

from __future__ import annotations

from collections.abc import Mapping
from copy import deepcopy
from typing import Any, Final

from loopwatch.config._schema import (
    LOOPWATCH_BLOCK_KEYS,
    MSG_ADAPTIVE_UNUSED_CHOSEN,
    MSG_ADAPTIVE_UNUSED_REFERENCE,
    MSG_ADAPTIVE_UNUSED_UNSET,
    MSG_DEFAULTS_TOOLS,
    MSG_DUPLICATE_KEY,
    MSG_EXPECTED_LIST,
    MSG_EXPECTED_OBJECT,
    MSG_EXPECTED_STRING,
    MSG_MISSING_KEY,
    MSG_SHADOWED_KEY,
    MSG_UNKNOWN_KEY,
    MSG_UNRESOLVED_INCLUDE,
    Profile,
)
from loopwatch.config._strict import (
    NO_DUPLICATES,
    Duplicates,
    check_profile,
    join_path,
    pairs,
    validate_block,
)
from loopwatch.config.merge import is_skipped_entry
from loopwatch.errors import ConfigError, ConfigIssue


def _validate_loopwatch_block(value: object, issues: list[ConfigIssue], dups: Duplicates) -> None:
    if not isinstance(value, Mapping):
        issues.append(ConfigIssue("loopwatch", MSG_EXPECTED_OBJECT))
        return
    seen: set[Any] = set()
    for key, item in pairs(value, dups):
        path = join_path("loopwatch", key)
        if key in seen:
            issues.append(ConfigIssue(path, MSG_DUPLICATE_KEY))
        seen.add(key)
        if not (isinstance(key, str) and key in LOOPWATCH_BLOCK_KEYS):
            issues.append(ConfigIssue(path, MSG_UNKNOWN_KEY))
        elif key == "profile":
            check_profile(item, path, issues)
        elif key == "adaptive":
            issues.extend(_adaptive_issues(item, path))


def _adaptive_issues(value: object, path: str) -> tuple[ConfigIssue, ...]:
    # Imported here, only for a file that has a loopwatch.adaptive block: the reference
    # profile never loads the adaptive package (its settings import no config, so there is
    # no cycle either way).
    from loopwatch.detectors.adaptive.settings import AdaptiveConfig

    try:
        AdaptiveConfig.from_mapping(value, path=path)
    except ConfigError as err:
        return err.issues
    return ()


def _duplicated_keys(
    obj: Mapping[Any, Any],
    keys: frozenset[str],
    path: str,
    shadowed: list[ConfigIssue],
    dups: Duplicates,
) -> None:
    """Note a duplicate of a key on the way to a validated subtree (a second ``tools``).

    SPEC §7.2 keeps OpenClaw's rule, the last value wins, so this is no issue of the load;
    the notes go to ``shadowed`` for ``config check`` to show as warnings, since the earlier
    block is silently ignored.
    """
    seen: set[object] = set()
    for key, _value in pairs(obj, dups):
        if key in keys:
            if key in seen:
                shadowed.append(ConfigIssue(join_path(path, key), MSG_SHADOWED_KEY))
            seen.add(key)


def _unresolved_include(value: object, path: str, issues: list[ConfigIssue]) -> None:
    """A ``$include`` on the way to a block: a file's are merged when it is loaded, so one
    left here came in a mapping, and would silently hide the blocks it holds."""
    if isinstance(value, Mapping) and "$include" in value:
        issues.append(ConfigIssue(join_path(path, "$include"), MSG_UNRESOLVED_INCLUDE))


_TOP_KEYS_CHECKED: Final = frozenset({"tools", "agents", "loopwatch"})
_TOOLS_KEYS_CHECKED: Final = frozenset({"loopDetection"})
_AGENTS_KEYS_CHECKED: Final = frozenset({"list"})
_AGENT_KEYS_CHECKED: Final = frozenset({"id", "tools"})


def _validate_tools(
    value: object,
    path: str,
    issues: list[ConfigIssue],
    dups: Duplicates,
    shadowed: list[ConfigIssue],
) -> None:
    if isinstance(value, Mapping):
        _duplicated_keys(value, _TOOLS_KEYS_CHECKED, path, shadowed, dups)
    _unresolved_include(value, path, issues)
    if not isinstance(value, Mapping):
        issues.append(ConfigIssue(path, MSG_EXPECTED_OBJECT))
    elif "loopDetection" in value:
        validate_block(value["loopDetection"], f"{path}.loopDetection", issues, dups)


def _validate_agents(
    value: object, issues: list[ConfigIssue], dups: Duplicates, shadowed: list[ConfigIssue]
) -> None:
    if not isinstance(value, Mapping):
        issues.append(ConfigIssue("agents", MSG_EXPECTED_OBJECT))
        return
    _duplicated_keys(value, _AGENTS_KEYS_CHECKED, "agents", shadowed, dups)
    _unresolved_include(value, "agents", issues)
    defaults = value.get("defaults")
    if isinstance(defaults, Mapping) and "tools" in defaults:
        issues.append(ConfigIssue("agents.defaults.tools", MSG_DEFAULTS_TOOLS))
    if "list" not in value:
        return
    entries = value["list"]
    if not isinstance(entries, (list, tuple)):
        issues.append(ConfigIssue("agents.list", MSG_EXPECTED_LIST))
        return
    for index, entry in enumerate(entries):
        path = f"agents.list[{index}]"
        if not isinstance(entry, Mapping):
            issues.append(ConfigIssue(path, MSG_EXPECTED_OBJECT))
            continue
        _duplicated_keys(entry, _AGENT_KEYS_CHECKED, path, shadowed, dups)
        _unresolved_include(entry, path, issues)
        for key, item in entry.items():
            if key == "id" and not isinstance(item, str):
                issues.append(ConfigIssue(f"{path}.id", MSG_EXPECTED_STRING))
            elif key == "tools":
                _validate_tools(item, f"{path}.tools", issues, dups, shadowed)
        if "id" not in entry:
            issues.append(ConfigIssue(f"{path}.id", MSG_MISSING_KEY))


def validate_whole(
    config: object,
    issues: list[ConfigIssue],
    dups: Duplicates,
    shadowed: list[ConfigIssue],
) -> None:
    """Validate a parsed whole config, appending issues and shadowed-key notes in order.

    Args:
        config: the parsed config.
        issues: where the problems of the load go.
        dups: the objects that had duplicate keys, as the parser kept them.
        shadowed: where the notes of duplicated keys on the way to a block go (warnings).
    """
    if not isinstance(config, Mapping):
        issues.append(ConfigIssue("", MSG_EXPECTED_OBJECT))
        return
    _duplicated_keys(config, _TOP_KEYS_CHECKED, "", shadowed, dups)
    _unresolved_include(config, "", issues)
    # Outside the validated subtrees the last duplicate wins, so the plain items are read.
    for key, value in config.items():
        if key == "tools":
            _validate_tools(value, "tools", issues, dups, shadowed)
        elif key == "agents":
            _validate_agents(value, issues, dups, shadowed)
        elif key == "loopwatch":
            _validate_loopwatch_block(value, issues, dups)


def validate_openclaw_config(config: Mapping[str, Any]) -> None:
    """Validate a whole OpenClaw config strictly (SPEC §7.2 "Whole configs").

    Only ``tools.loopDetection``, every ``agents.list[i].tools.loopDetection`` (all agents, not
    only one) and the ``loopwatch`` block are checked; every other key is ignored so a real
    OpenClaw config loads as it is.

    Args:
        config: the parsed config.

    Raises:
        ConfigError: every issue, with paths such as ``tools.loopDetection.historySize``.
    """
    issues: list[ConfigIssue] = []
    validate_whole(config, issues, NO_DUPLICATES, [])
    if issues:
        raise ConfigError(issues)


def loopwatch_parts(config: Mapping[str, Any]) -> dict[str, Any]:
    """A private copy of the parts of a whole config that loopwatch reads, and only those.

    The global block, each agent entry's ``id`` and block (every entry is kept, in order:
    the first match wins, even without a block) and the ``loopwatch`` block. Everything else
    is left behind rather than copied: SPEC §7.2 ignores it, and a real config may hold
    values ``deepcopy`` cannot copy (a lock, a module) or nesting deeper than it can walk.

    Args:
        config: a whole config, validated by :func:`validate_openclaw_config`.

    Returns:
        A new dict that :func:`~loopwatch.config.merge.merge_agent_config` reads exactly as
        it reads ``config``; later changes to ``config`` never reach it.
    """
    parts: dict[str, Any] = {}
    tools = config.get("tools")
    if isinstance(tools, Mapping) and "loopDetection" in tools:
        parts["tools"] = {"loopDetection": deepcopy(tools["loopDetection"])}
    agents = config.get("agents")
    entries = agents.get("list") if isinstance(agents, Mapping) else None
    if isinstance(entries, (list, tuple)):
        parts["agents"] = {"list": [_agent_parts(entry) for entry in entries]}
    if "loopwatch" in config:
        parts["loopwatch"] = deepcopy(config["loopwatch"])
    return parts


def _agent_parts(entry: object) -> object:
    if not isinstance(entry, Mapping):
        # The merge skips primitives and reads any other object as an entry with no id.
        return None if is_skipped_entry(entry) else []
    kept: dict[str, Any] = {}
    if "id" in entry:
        kept["id"] = entry["id"]
    tools = entry.get("tools")
    if isinstance(tools, Mapping) and "loopDetection" in tools:
        kept["tools"] = {"loopDetection": deepcopy(tools["loopDetection"])}
    return kept


def named_profile(config: Mapping[str, Any]) -> Profile | None:
    """The ``loopwatch.profile`` a whole config names, or ``None`` when it names none.

    For callers whose default profile is not ``reference`` (``loopwatch hook``).

    Args:
        config: a whole config (normally already validated).

    Returns:
        The profile named, or ``None`` when it is absent or not a profile's name.
    """
    block = config.get("loopwatch") if isinstance(config, Mapping) else None
    value = block.get("profile") if isinstance(block, Mapping) else None
    if isinstance(value, str) and value in ("reference", "adaptive"):
        return "adaptive" if value == "adaptive" else "reference"
    return None


def profile_of_openclaw_config(config: Mapping[str, Any]) -> Profile:
    """The ``loopwatch.profile`` of a whole config, ``"reference"`` when absent or invalid.

    Args:
        config: a whole config (normally already validated).

    Returns:
        The profile.
    """
    return named_profile(config) or "reference"


def unused_adaptive_warning(
    config: Mapping[str, Any], chosen: str | None = None
) -> ConfigIssue | None:
    """The warning for a ``loopwatch.adaptive`` block that the profile which runs ignores.

    The block is valid (it was validated with the rest), but only the ``adaptive`` profile
    reads it: under ``reference`` it would otherwise be dropped without a word.

    Args:
        config: a whole config, already validated.
        chosen: the profile chosen over ``loopwatch.profile`` (an argument, ``--profile``),
            or ``None`` when the config's own applies.

    Returns:
        A warning at path ``loopwatch.adaptive`` saying how to enable the settings, or
        ``None`` when there is no such block or the adaptive profile runs.
    """
    block = config.get("loopwatch") if isinstance(config, Mapping) else None
    if not isinstance(block, Mapping) or "adaptive" not in block:
        return None
    running = chosen if chosen is not None else profile_of_openclaw_config(config)
    if running != "reference":
        return None
    if chosen is not None:
        message = MSG_ADAPTIVE_UNUSED_CHOSEN
    elif block.get("profile") == "reference":
        message = MSG_ADAPTIVE_UNUSED_REFERENCE
    else:
        message = MSG_ADAPTIVE_UNUSED_UNSET
    return ConfigIssue("loopwatch.adaptive", message)
