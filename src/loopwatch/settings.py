"""``GuardSettings``: one place that turns what a user wrote into what a guard runs with.

A guard's settings come from up to four places: a ``tools.loopDetection`` block (a mapping
or a :class:`LoopDetectionConfig`), or a whole OpenClaw config (a mapping or a file) whose
global block is merged with each agent's override; the loopwatch profile (an argument, the
block object's ``profile``, or the file's ``loopwatch.profile``); and the adaptive settings
(an argument, or the file's ``loopwatch.adaptive``). :meth:`GuardSettings.resolve` applies
one precedence to all of them, validates strictly (raising :class:`ConfigError`), and gives
the CLI, ``scan`` and the guard the same answer without building a guard:

* an explicit ``profile`` / ``adaptive`` argument wins over the config's own;
* a ``LoopDetectionConfig``'s ``profile`` comes next, then ``loopwatch.profile``;
* the default profile is ``reference``; a profile that is its own opt-in (``adaptive``)
  runs detection unless the block says ``enabled: false`` explicitly;
* adaptive settings under the ``reference`` profile are validated but not used, and say so:
  :attr:`GuardSettings.warnings` names them, and a guard logs it when it is built.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Final

from loopwatch.config import PROFILES, Profile
from loopwatch.config._schema import MSG_ADAPTIVE_UNUSED_ARGUMENT
from loopwatch.config.block import LoopDetectionConfig
from loopwatch.config.files import load_config_file
from loopwatch.config.merge import merge_agent_config
from loopwatch.config.openclaw import (
    loopwatch_parts,
    profile_of_openclaw_config,
    unused_adaptive_warning,
    validate_openclaw_config,
)
from loopwatch.config.resolve import ResolvedConfig, resolve_config
from loopwatch.core.naming import plain_str
from loopwatch.errors import ConfigIssue

if TYPE_CHECKING:
    from loopwatch.detectors.adaptive import AdaptiveConfig

_MAX_CACHED_AGENTS: Final = 1024


@dataclass(frozen=True, eq=False)
class GuardSettings:
    """The resolved settings of a guard; immutable, validated once.

    Attributes:
        block: the global ``tools.loopDetection`` block as a camelCase mapping of its set
            fields, or ``None`` (everything unset).
        openclaw_config: the parts of the whole config that loopwatch reads (its blocks,
            the agent ids, the ``loopwatch`` block), merged per agent, or ``None``.
        profile: the loopwatch profile's name.
        adaptive: the adaptive settings (``None`` unless the profile is ``adaptive``).
        detection_by_default: whether the profile is its own opt-in to detection (the
            adaptive one is): detection then runs unless the block says ``enabled: false``.
        warnings: valid settings that will not be used (adaptive settings under the
            ``reference`` profile), each at its path with how to use it.
    """

    block: Mapping[str, Any] | None
    openclaw_config: Mapping[str, Any] | None
    profile: str
    adaptive: AdaptiveConfig | None
    detection_by_default: bool = False
    warnings: tuple[ConfigIssue, ...] = ()
    _cache: OrderedDict[str | None, tuple[dict[str, Any] | None, ResolvedConfig]] = field(
        default_factory=OrderedDict, repr=False, init=False
    )
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, init=False)

    @classmethod
    def resolve(
        cls,
        config: LoopDetectionConfig | Mapping[str, Any] | None = None,
        *,
        openclaw_config: Mapping[str, Any] | None = None,
        config_file: str | os.PathLike[str] | None = None,
        profile: str | None = None,
        adaptive: AdaptiveConfig | Mapping[str, Any] | None = None,
    ) -> GuardSettings:
        """Resolve and validate every source with one precedence (see the module doc).

        Args:
            config: a ``tools.loopDetection`` block.
            openclaw_config: a whole OpenClaw config instead.
            config_file: a whole OpenClaw config file instead (JSON5 or JSON).
            profile: the profile's name, over the config's own.
            adaptive: the adaptive settings, over the config's ``loopwatch.adaptive``
                (validated whatever the profile; used by the adaptive profile only).

        Raises:
            ConfigError: a config, file or adaptive block the schema rejects.
            TypeError: more than one config source, or one of the wrong type (a
                ``ResolvedConfig`` no longer knows whether ``enabled`` was unset).
            ValueError: an unknown profile.
        """
        given = [s for s in (config, openclaw_config, config_file) if s is not None]
        if len(given) > 1:
            raise TypeError("pass either config or openclaw_config, not both")
        if config_file is not None:
            openclaw_config = load_config_file(config_file)
        block: dict[str, Any] | None = None
        whole: dict[str, Any] | None = None
        config_profile: Profile = "reference"
        if isinstance(config, ResolvedConfig):
            raise TypeError(
                "LoopGuard needs a LoopDetectionConfig or a mapping, not a ResolvedConfig "
                "(it no longer knows whether 'enabled' was unset)"
            )
        if isinstance(config, LoopDetectionConfig):
            block = config.to_mapping()
            config_profile = config.profile
        elif isinstance(config, Mapping):
            block = LoopDetectionConfig.from_mapping(config).to_mapping()
        elif config is not None:
            raise TypeError(
                f"config must be a LoopDetectionConfig, a mapping or None, "
                f"not {type(config).__name__}"
            )
        if openclaw_config is not None:
            if not isinstance(openclaw_config, Mapping):
                hint = (
                    " (read a file with loopwatch.config.load_config_file(path))"
                    if isinstance(openclaw_config, (str, bytes, os.PathLike))
                    else ""
                )
                raise TypeError(
                    f"openclaw_config must be a mapping (a whole OpenClaw config), not "
                    f"{type(openclaw_config).__name__}{hint}"
                )
            validate_openclaw_config(openclaw_config)
            whole = loopwatch_parts(openclaw_config)
            config_profile = profile_of_openclaw_config(whole)
        chosen = profile if profile is not None else config_profile
        if chosen not in PROFILES:
            raise ValueError(f"profile must be 'reference' or 'adaptive', not {chosen!r}")
        settings = None
        warnings: tuple[ConfigIssue, ...] = ()
        if chosen == "adaptive":
            settings = _adaptive_settings(adaptive, whole)
        elif adaptive is not None:
            # Not used by this profile, but validated all the same: a wrong block must not
            # wait, unnoticed, for the day the profile is switched.
            _adaptive_settings(adaptive, None)
            warnings = (ConfigIssue("adaptive", MSG_ADAPTIVE_UNUSED_ARGUMENT),)
        elif whole is not None:
            unused = unused_adaptive_warning(whole, profile)
            warnings = () if unused is None else (unused,)
        return cls(
            block,
            whole,
            chosen,
            settings,
            detection_by_default=chosen == "adaptive",
            warnings=warnings,
        )

    def block_for(self, agent_id: object = None) -> tuple[dict[str, Any] | None, ResolvedConfig]:
        """The merged block of a call's agent and its resolved config (SPEC §5.1, §7.3).

        Args:
            agent_id: the agent of the call (only a ``str`` selects an override).

        Returns:
            ``(block, resolved)``; ``resolved`` has detection on for a profile that is its
            own opt-in unless the block says ``enabled: false``.
        """
        # (a str subclass is read as its characters: its __hash__ and __eq__ are the host's)
        agent = plain_str(agent_id) if isinstance(agent_id, str) and self.openclaw_config else None
        cached = self._cache.get(agent)
        if cached is None:
            if self.openclaw_config is None:
                block = None if self.block is None else dict(self.block)
            else:
                block = merge_agent_config(self.openclaw_config, agent)
            cached = (block, self._opt_in(block, resolve_config(block)))
            with self._lock:
                self._cache[agent] = cached
                if len(self._cache) > _MAX_CACHED_AGENTS:
                    self._cache.popitem(last=False)
        return cached

    def _opt_in(self, block: Mapping[str, Any] | None, resolved: ResolvedConfig) -> ResolvedConfig:
        if not self.detection_by_default or resolved.enabled:
            return resolved
        if block is not None and block.get("enabled") is False:
            return resolved
        return replace(resolved, enabled=True)


def _adaptive_settings(
    adaptive: AdaptiveConfig | Mapping[str, Any] | None, whole: Mapping[str, Any] | None
) -> AdaptiveConfig:
    from loopwatch.detectors.adaptive import AdaptiveConfig

    if isinstance(adaptive, AdaptiveConfig):
        return adaptive
    if adaptive is not None:
        return AdaptiveConfig.from_mapping(adaptive)
    found = (whole or {}).get("loopwatch")
    block = found.get("adaptive") if isinstance(found, Mapping) else None
    return AdaptiveConfig.from_mapping(block)


__all__ = ["GuardSettings"]
