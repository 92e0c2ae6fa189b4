"""The typed config objects: a validated ``tools.loopDetection`` block (SPEC §7).

``None`` everywhere means "not set": defaults belong to lenient resolution (``resolve``), so
an agent block's ``to_mapping()`` never overrides global values it did not set.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

from loopwatch.config._schema import (
    BLOCK_FIELDS,
    DETECTOR_FIELDS,
    GUARD_FIELDS,
    MSG_ADAPTIVE_NOT_CARRIED,
    ConfigField,
    Profile,
)
from loopwatch.config._strict import (
    NO_DUPLICATES,
    check_field,
    check_profile,
    cross_field_issues,
    validate_block,
    validate_object,
)
from loopwatch.config.files import load_config_file
from loopwatch.config.merge import merge_agent_config
from loopwatch.config.openclaw import profile_of_openclaw_config
from loopwatch.errors import ConfigError, ConfigIssue

logger = logging.getLogger("loopwatch.config")


def _validate_attrs(
    obj: object, specs: tuple[ConfigField, ...], issues: list[ConfigIssue]
) -> dict[str, Any]:
    """Check the set attributes of a config dataclass, storing coerced integers in place.

    Returns:
        The valid set fields by camelCase name, for the cross-field checks.
    """
    valid: dict[str, Any] = {}
    for spec in specs:
        value = getattr(obj, spec.attr)
        if value is None:
            continue
        coerced, message = check_field(spec, value)
        if message is not None:
            issues.append(ConfigIssue(spec.name, message))
            continue
        if coerced is not value:
            object.__setattr__(obj, spec.attr, coerced)
        valid[spec.name] = coerced
    return valid


def _set_fields(obj: object, specs: tuple[ConfigField, ...]) -> dict[str, Any]:
    return {spec.name: value for spec in specs if (value := getattr(obj, spec.attr)) is not None}


@dataclass(frozen=True, kw_only=True)
class Detectors:
    """The ``detectors`` object: which detectors run (``None`` = unset, resolved as on).

    Raises:
        ConfigError: a set flag is not a ``bool``.
    """

    generic_repeat: bool | None = None
    known_poll_no_progress: bool | None = None
    ping_pong: bool | None = None

    def __post_init__(self) -> None:
        issues: list[ConfigIssue] = []
        _validate_attrs(self, DETECTOR_FIELDS, issues)
        if issues:
            raise ConfigError(issues)

    def to_mapping(self) -> dict[str, Any]:
        """The set flags as a camelCase dict."""
        return _set_fields(self, DETECTOR_FIELDS)


@dataclass(frozen=True, kw_only=True)
class PostCompactionGuardConfig:
    """The ``postCompactionGuard`` object (``None`` = unset, resolved as 3).

    Raises:
        ConfigError: ``window_size`` is set and is not an integer in 1 … 2^53 − 1.
    """

    window_size: int | None = None

    def __post_init__(self) -> None:
        issues: list[ConfigIssue] = []
        _validate_attrs(self, GUARD_FIELDS, issues)
        if issues:
            raise ConfigError(issues)

    def to_mapping(self) -> dict[str, Any]:
        """The set field as a camelCase dict."""
        return _set_fields(self, GUARD_FIELDS)


@dataclass(frozen=True, kw_only=True)
class LoopDetectionConfig:
    """A validated ``tools.loopDetection`` block.

    ``None`` means "not set": the defaults belong to ``resolve_config``, never to this object,
    so an agent block's ``to_mapping()`` never overrides global values it did not set.

    Args:
        enabled: master switch; ``False`` also disables recording and the post-compaction guard.
        history_size: records kept per session.
        warning_threshold: count at which a pattern warns.
        critical_threshold: count at which a pattern blocks.
        unknown_tool_threshold: misses of one unavailable tool before it is blocked.
        global_circuit_breaker_threshold: no-progress count that blocks whatever the detector.
        detectors: a ``Detectors`` or a camelCase mapping (converted).
        post_compaction_guard: a ``PostCompactionGuardConfig`` or a camelCase mapping.
        profile: ``"reference"`` (OpenClaw's behaviour) or ``"adaptive"``; not part of the block.

    Raises:
        ConfigError: with every issue (SPEC §7.2), including the cross-field ones when both
            fields are set.
    """

    enabled: bool | None = None
    history_size: int | None = None
    warning_threshold: int | None = None
    critical_threshold: int | None = None
    unknown_tool_threshold: int | None = None
    global_circuit_breaker_threshold: int | None = None
    detectors: Detectors | None = None
    post_compaction_guard: PostCompactionGuardConfig | None = None
    profile: Profile = "reference"

    def __post_init__(self) -> None:
        issues: list[ConfigIssue] = []
        valid = _validate_attrs(self, BLOCK_FIELDS, issues)
        self._convert_nested("detectors", "detectors", Detectors, DETECTOR_FIELDS, issues)
        self._convert_nested(
            "post_compaction_guard",
            "postCompactionGuard",
            PostCompactionGuardConfig,
            GUARD_FIELDS,
            issues,
        )
        check_profile(self.profile, "profile", issues)
        cross_field_issues(valid, "", issues)
        if issues:
            raise ConfigError(issues)

    def _convert_nested(
        self,
        attr: str,
        name: str,
        cls: type[Detectors] | type[PostCompactionGuardConfig],
        specs: tuple[ConfigField, ...],
        issues: list[ConfigIssue],
    ) -> None:
        value = getattr(self, attr)
        if value is None or isinstance(value, cls):
            return
        valid = validate_object(value, name, specs, issues, NO_DUPLICATES)
        if valid is not None:
            object.__setattr__(self, attr, _nested_from_valid(cls, specs, valid))

    @classmethod
    def from_mapping(cls, block: object, *, profile: Profile = "reference") -> LoopDetectionConfig:
        """Load a camelCase block strictly (SPEC §7.2).

        Args:
            block: a ``tools.loopDetection`` mapping. ``None`` values are issues: omit a key to
                leave it unset.
            profile: the profile to attach (it is never a key of the block).

        Returns:
            The validated config.

        Raises:
            ConfigError: every issue, paths relative to the block (``detectors.pingPong``).
        """
        issues: list[ConfigIssue] = []
        valid = validate_block(block, "", issues)
        check_profile(profile, "profile", issues)
        if issues or valid is None:
            raise ConfigError(issues)
        return cls._from_valid(valid, profile)

    @classmethod
    def from_file(
        cls, path: str | os.PathLike[str], *, agent_id: str | None = None
    ) -> LoopDetectionConfig:
        """Load a whole OpenClaw config file (JSON5 or JSON) and merge it for one agent.

        Each block in the file is validated on its own; the merged result is not re-checked,
        because OpenClaw accepts a threshold order that only the merge creates and clamps it
        at runtime (SPEC §2, §7.2).

        Args:
            path: the file to read (UTF-8, an optional BOM is ignored).
            agent_id: the agent whose block overrides the global one; ``None`` or ``""`` → the
                global block only.

        Returns:
            The merged block (every field unset when the file has none), with ``profile`` from
            the top-level ``loopwatch.profile``. The file's ``loopwatch.adaptive`` settings
            have no place in a block: they are left out, and a warning on the
            ``loopwatch.config`` logger says so.

        Raises:
            ConfigError: the file cannot be read or parsed, or any block is invalid.
        """
        config = load_config_file(path)
        own = config.get("loopwatch")
        if isinstance(own, Mapping) and "adaptive" in own:
            logger.warning(MSG_ADAPTIVE_NOT_CARRIED.format(path=os.fspath(path)))
        merged = merge_agent_config(config, agent_id) or {}
        return cls._from_valid(merged, profile_of_openclaw_config(config), cross_checked=False)

    @classmethod
    def _from_valid(
        cls, valid: Mapping[str, Any], profile: Profile, *, cross_checked: bool = True
    ) -> LoopDetectionConfig:
        """Build from a block whose fields were already validated one by one."""
        kwargs: dict[str, Any] = {}
        for spec in BLOCK_FIELDS:
            value = valid.get(spec.name)
            if value is not None:
                kwargs[spec.attr] = check_field(spec, value)[0]
        detectors = valid.get("detectors")
        if isinstance(detectors, Mapping):
            kwargs["detectors"] = _nested_from_valid(Detectors, DETECTOR_FIELDS, detectors)
        guard = valid.get("postCompactionGuard")
        if isinstance(guard, Mapping):
            kwargs["post_compaction_guard"] = _nested_from_valid(
                PostCompactionGuardConfig, GUARD_FIELDS, guard
            )
        if cross_checked:
            return cls(profile=profile, **kwargs)
        # A merged block may order thresholds in a way the constructor would refuse; its
        # fields are already valid, so set them without the cross-field checks.
        obj = cls.__new__(cls)
        for field in fields(cls):
            object.__setattr__(obj, field.name, kwargs.get(field.name, field.default))
        object.__setattr__(obj, "profile", profile)
        return obj

    def to_mapping(self) -> dict[str, Any]:
        """The set fields as a camelCase block (``profile`` is not part of it).

        Returns:
            A new dict; ``detectors`` / ``postCompactionGuard`` appear only when set, with
            their set fields only.
        """
        out = _set_fields(self, BLOCK_FIELDS)
        if self.detectors is not None:
            out["detectors"] = self.detectors.to_mapping()
        if self.post_compaction_guard is not None:
            out["postCompactionGuard"] = self.post_compaction_guard.to_mapping()
        return out


def _nested_from_valid(
    cls: type[Detectors] | type[PostCompactionGuardConfig],
    specs: tuple[ConfigField, ...],
    valid: Mapping[str, Any],
) -> Any:
    kwargs = {spec.attr: valid[spec.name] for spec in specs if valid.get(spec.name) is not None}
    return cls(**kwargs)
