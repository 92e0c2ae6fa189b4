"""Loop-detection configuration: strict loading, lenient resolution, per-agent merge.

Two readers of the same ``tools.loopDetection`` block live here, on purpose:

* **Strict** (SPEC §7): what a user writes — ``LoopDetectionConfig(...)``, ``from_mapping``,
  files, the ``config`` / ``openclaw_config`` of ``LoopGuard``. Every problem is reported at
  once, with its camelCase path, so a config is fixed in one round instead of one error per run.
* **Lenient** (SPEC §2): what the detectors do on every tool call with whatever block they are
  handed. It never raises and silently falls back to defaults, exactly as the reference does,
  so detection verdicts match OpenClaw's even for configs the schema would reject.

One concept a module, bottom to top:

* ``_schema``: the table of settings (names, defaults, help) and the reasons of strict loading;
* ``_values``: the lenient value rules (JavaScript truthiness, positive integers);
* ``_strict``: strict validation of one block, with paths and duplicate keys;
* ``merge``: agent ids and the global + agent merge (SPEC §7.3);
* ``openclaw``: strict validation of a whole OpenClaw config, and its profile;
* ``_expand``: what OpenClaw does to a parsed file before validating it (``$include``,
  ``${VAR}``);
* ``files``: reading a config file (regular files, 2 MiB, JSON then JSON5, includes);
* ``block``: the typed config objects (``LoopDetectionConfig`` and its nested objects);
* ``resolve``: ``ResolvedConfig`` and ``resolve_config``, the hot path.

This package re-exports every public name, so ``from loopwatch.config import X`` keeps working.
"""

from loopwatch.config._schema import (
    BLOCK_FIELDS,
    BLOCK_KEYS,
    CONFIG_FIELDS,
    DETECTOR_FIELDS,
    GUARD_FIELDS,
    LOOPWATCH_BLOCK_KEYS,
    MAX_SAFE_INTEGER,
    MSG_SHADOWED_KEY,
    PROFILES,
    ConfigField,
    Profile,
)
from loopwatch.config._values import js_truthy, resolve_window_size
from loopwatch.config.block import Detectors, LoopDetectionConfig, PostCompactionGuardConfig
from loopwatch.config.files import MAX_CONFIG_BYTES, config_warnings, load_config_file
from loopwatch.config.merge import DEFAULT_AGENT_ID, merge_agent_config, normalize_agent_id
from loopwatch.config.openclaw import profile_of_openclaw_config, validate_openclaw_config
from loopwatch.config.resolve import DEFAULT_RESOLVED_CONFIG, ResolvedConfig, resolve_config
from loopwatch.errors import ConfigError, ConfigIssue

__all__ = [
    "BLOCK_FIELDS",
    "BLOCK_KEYS",
    "CONFIG_FIELDS",
    "DEFAULT_AGENT_ID",
    "DEFAULT_RESOLVED_CONFIG",
    "DETECTOR_FIELDS",
    "GUARD_FIELDS",
    "LOOPWATCH_BLOCK_KEYS",
    "MAX_CONFIG_BYTES",
    "MAX_SAFE_INTEGER",
    "MSG_SHADOWED_KEY",
    "PROFILES",
    "ConfigError",
    "ConfigField",
    "ConfigIssue",
    "Detectors",
    "LoopDetectionConfig",
    "PostCompactionGuardConfig",
    "Profile",
    "ResolvedConfig",
    "config_warnings",
    "js_truthy",
    "load_config_file",
    "merge_agent_config",
    "normalize_agent_id",
    "profile_of_openclaw_config",
    "resolve_config",
    "resolve_window_size",
    "validate_openclaw_config",
]
