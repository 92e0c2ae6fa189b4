"""Strict validation primitives (SPEC §7.2): one block, every issue with its camelCase path.

Shared by the config objects (``block``) and whole configs (``openclaw``): a field is checked
by the same function whichever way it arrives, and duplicates survive parsing as
:data:`Duplicates` so they can be reported where they were written.
"""

from __future__ import annotations

import numbers
from collections.abc import Iterable, Mapping
from typing import Any, Final

from loopwatch.config._schema import (
    BLOCK_FIELD_BY_NAME,
    DETECTOR_FIELDS,
    GUARD_FIELDS,
    MAX_SAFE_INTEGER,
    MSG_CRITICAL_NOT_BELOW_GLOBAL,
    MSG_DUPLICATE_KEY,
    MSG_EXPECTED_BOOLEAN,
    MSG_EXPECTED_OBJECT,
    MSG_EXPECTED_POSITIVE_INTEGER,
    MSG_EXPECTED_PROFILE,
    MSG_INTEGER_TOO_LARGE,
    MSG_UNKNOWN_KEY,
    MSG_WARNING_NOT_BELOW_CRITICAL,
    PROFILES,
    ConfigField,
)
from loopwatch.errors import ConfigIssue


def strict_bool(value: object) -> tuple[bool | None, str | None]:
    if isinstance(value, bool):
        return value, None
    return None, MSG_EXPECTED_BOOLEAN


def strict_int(value: object) -> tuple[int | None, str | None]:
    """The strict number rule of SPEC §7.2: ``(int value, None)`` or ``(None, reason)``."""
    integral = isinstance(value, numbers.Integral) or (
        isinstance(value, float) and value.is_integer()
    )
    if not integral or isinstance(value, bool):
        return None, MSG_EXPECTED_POSITIVE_INTEGER
    number = int(value)  # type: ignore[call-overload]
    if number <= 0:
        return None, MSG_EXPECTED_POSITIVE_INTEGER
    if number > MAX_SAFE_INTEGER:
        return None, MSG_INTEGER_TOO_LARGE
    return number, None


def check_field(spec: ConfigField, value: object) -> tuple[bool | int | None, str | None]:
    return strict_bool(value) if spec.kind == "bool" else strict_int(value)


def join_path(prefix: str, key: object) -> str:
    return f"{prefix}.{key}" if prefix else str(key)


# Duplicate keys survive JSON5 parsing only through ``object_pairs_hook``. Objects that had a
# duplicate are remembered by id together with the object itself (which keeps it alive, so the
# id cannot be reused) and their original pairs; every other object is a plain dict.
Duplicates = Mapping[int, tuple[Mapping[Any, Any], list[tuple[Any, Any]]]]
NO_DUPLICATES: Final[Duplicates] = {}


def pairs(obj: Mapping[Any, Any], dups: Duplicates) -> Iterable[tuple[Any, Any]]:
    """The key/value pairs of ``obj`` as written, duplicates included."""
    if dups:
        entry = dups.get(id(obj))
        if entry is not None and entry[0] is obj:
            return entry[1]
    return obj.items()


def validate_object(
    value: object,
    path: str,
    specs: tuple[ConfigField, ...],
    issues: list[ConfigIssue],
    dups: Duplicates,
) -> dict[str, Any] | None:
    """Validate a strict nested object (``detectors``, ``postCompactionGuard``).

    Returns:
        The valid fields, coerced (``5.0`` → 5), or ``None`` when ``value`` is not a mapping.
    """
    if not isinstance(value, Mapping):
        issues.append(ConfigIssue(path, MSG_EXPECTED_OBJECT))
        return None
    by_name = {spec.name: spec for spec in specs}
    valid: dict[str, Any] = {}
    seen: set[Any] = set()
    for key, item in pairs(value, dups):
        item_path = join_path(path, key)
        if key in seen:
            issues.append(ConfigIssue(item_path, MSG_DUPLICATE_KEY))
        seen.add(key)
        spec = by_name.get(key) if isinstance(key, str) else None
        if spec is None:
            issues.append(ConfigIssue(item_path, MSG_UNKNOWN_KEY))
            continue
        coerced, message = check_field(spec, item)
        if message is None:
            valid[spec.name] = coerced
        else:
            valid.pop(spec.name, None)
            issues.append(ConfigIssue(item_path, message))
    return valid


def cross_field_issues(valid: Mapping[str, Any], prefix: str, issues: list[ConfigIssue]) -> None:
    """The two ordering checks of SPEC §7.1, only between fields that are both set and valid."""
    warning = valid.get("warningThreshold")
    critical = valid.get("criticalThreshold")
    breaker = valid.get("globalCircuitBreakerThreshold")
    if warning is not None and critical is not None and warning >= critical:
        issues.append(
            ConfigIssue(join_path(prefix, "criticalThreshold"), MSG_WARNING_NOT_BELOW_CRITICAL)
        )
    if critical is not None and breaker is not None and critical >= breaker:
        issues.append(
            ConfigIssue(
                join_path(prefix, "globalCircuitBreakerThreshold"), MSG_CRITICAL_NOT_BELOW_GLOBAL
            )
        )


def validate_block(
    block: object,
    prefix: str,
    issues: list[ConfigIssue],
    dups: Duplicates = NO_DUPLICATES,
) -> dict[str, Any] | None:
    """Validate one ``tools.loopDetection`` block strictly, appending issues in document order.

    Returns:
        The valid fields as a camelCase dict (integers coerced, nested objects as dicts), or
        ``None`` when ``block`` is not a mapping.
    """
    if not isinstance(block, Mapping):
        issues.append(ConfigIssue(prefix, MSG_EXPECTED_OBJECT))
        return None
    valid: dict[str, Any] = {}
    seen: set[Any] = set()
    for key, value in pairs(block, dups):
        path = join_path(prefix, key)
        if key in seen:
            issues.append(ConfigIssue(path, MSG_DUPLICATE_KEY))
        seen.add(key)
        nested: dict[str, Any] | None
        if key == "detectors":
            nested = validate_object(value, path, DETECTOR_FIELDS, issues, dups)
        elif key == "postCompactionGuard":
            nested = validate_object(value, path, GUARD_FIELDS, issues, dups)
        else:
            spec = BLOCK_FIELD_BY_NAME.get(key) if isinstance(key, str) else None
            if spec is None:
                issues.append(ConfigIssue(path, MSG_UNKNOWN_KEY))
                continue
            coerced, message = check_field(spec, value)
            if message is None:
                valid[key] = coerced
            else:
                valid.pop(key, None)
                issues.append(ConfigIssue(path, message))
            continue
        if nested is None:
            valid.pop(key, None)
        else:
            valid[key] = nested
    cross_field_issues(valid, prefix, issues)
    return valid


def check_profile(value: object, path: str, issues: list[ConfigIssue]) -> None:
    if not (isinstance(value, str) and value in PROFILES):
        issues.append(ConfigIssue(path, MSG_EXPECTED_PROFILE))
