"""``loopwatch config check FILE [--agent ID]``: validate a config and show what applies.

A config is checked exactly as ``LoopGuard(openclaw_config=...)`` checks it (SPEC §7.2:
every issue at once, each with its path), then every setting is listed with where its
value comes from (the agent's block, the global block, or the default), the value written
and the value detection actually uses after the lenient resolution and clamping of SPEC §2.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from loopwatch.config import CONFIG_FIELDS, ConfigField
from loopwatch.config.files import config_warnings, load_config_file
from loopwatch.config.merge import merge_agent_config, normalize_agent_id
from loopwatch.config.openclaw import profile_of_openclaw_config
from loopwatch.config.resolve import ResolvedConfig
from loopwatch.errors import ConfigError, ConfigIssue
from loopwatch.settings import GuardSettings

from ._text import safe_text, table

Source = Literal["agent", "global", "default"]


@dataclass(frozen=True)
class SettingReport:
    """One setting of the effective config."""

    path: str
    source: Source
    value: object
    effective: bool | int
    help: str


def _lookup(block: Mapping[str, Any] | None, spec: ConfigField) -> tuple[bool, object]:
    if block is None:
        return False, None
    holder: object = block.get(spec.group) if spec.group else block
    if isinstance(holder, Mapping) and spec.name in holder:
        return True, holder[spec.name]
    return False, None


def _resolved_value(resolved: ResolvedConfig, spec: ConfigField) -> bool | int:
    if spec.group == "postCompactionGuard":
        return resolved.guard_window_size
    value: bool | int = getattr(resolved, spec.attr)
    return value


def settings_report(
    config: Mapping[str, Any], agent_id: str | None
) -> tuple[list[SettingReport], ResolvedConfig, bool]:
    """Every setting with its source, written value and effective value.

    Args:
        config: a validated whole config.
        agent_id: the agent whose override applies, or ``None``.

    Returns:
        ``(settings, resolved, agent_has_block)``.
    """
    global_block = merge_agent_config(config, None)
    agent_block = (
        merge_agent_config({"agents": config.get("agents")}, agent_id) if agent_id else None
    )
    # Resolved as a guard on this file resolves it (GuardSettings): under the adaptive
    # profile, an unset ``enabled`` runs detection.
    resolved = GuardSettings.resolve(openclaw_config=config).block_for(agent_id)[1]
    reports: list[SettingReport] = []
    for spec in CONFIG_FIELDS:
        in_agent, agent_value = _lookup(agent_block, spec)
        in_global, global_value = _lookup(global_block, spec)
        source: Source = "agent" if in_agent else "global" if in_global else "default"
        value = agent_value if in_agent else global_value if in_global else None
        reports.append(
            SettingReport(spec.path, source, value, _resolved_value(resolved, spec), spec.help)
        )
    return reports, resolved, agent_block is not None


def _show(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return "-" if value is None else str(value)


def render_check(path: str, config: Mapping[str, Any], agent_id: str | None) -> str:
    """The text report of a valid config."""
    reports, resolved, agent_has_block = settings_report(config, agent_id)
    lines = [f"config: {safe_text(path)}: valid"]
    lines += [f"warning: {safe_text(str(issue))}" for issue in _warnings(path)]
    if agent_id is not None:
        normalized = normalize_agent_id(agent_id)
        how = (
            "its tools.loopDetection block is merged over the global one"
            if agent_has_block
            else "it has no tools.loopDetection block: the global block applies"
        )
        lines.append(f"agent: {safe_text(agent_id)} (id {normalized}): {how}")
    profile = profile_of_openclaw_config(config)
    lines.append(f"profile: {profile}")
    if not resolved.enabled:
        lines.append(
            "detection: off (enabled is false)"
            if profile == "adaptive"
            else "detection: off (enabled is not true)"
        )
    elif profile == "adaptive" and not _enabled_written(reports):
        lines.append("detection: on (the adaptive profile runs unless enabled is false)")
    lines.append("")
    rows = []
    for report in reports:
        effective = _show(report.effective)
        if report.source != "default" and report.value != report.effective:
            effective += " (clamped)"
        rows.append([report.path, report.source, _show(report.value), effective])
    lines.append(table(["setting", "source", "value", "effective"], rows, right=frozenset()))
    lines += ["", "settings:"]
    lines += [f"  {report.path}: {report.help}" for report in reports]
    return "\n".join(lines) + "\n"


def _enabled_written(reports: list[SettingReport]) -> bool:
    return any(r.path == "enabled" and r.source != "default" for r in reports)


def _warnings(path: str) -> tuple[ConfigIssue, ...]:
    try:
        return config_warnings(path)
    except ConfigError:
        return ()


def render_errors(path: str, error: ConfigError) -> str:
    """Every issue of an invalid config, one a line, with its path."""
    count = len(error.issues)
    lines = [f"config: {safe_text(path)}: invalid ({count} issue{'s' if count != 1 else ''})"]
    lines += [f"  {safe_text(str(issue))}" for issue in error.issues]
    return "\n".join(lines) + "\n"


def check_json(path: str, agent_id: str | None) -> tuple[str, bool]:
    """The ``--json`` report and whether the config is valid."""
    document: dict[str, Any] = {"path": path, "agent": agent_id}
    try:
        config = load_config_file(path)
    except ConfigError as exc:
        document.update(
            valid=False,
            issues=[{"path": issue.path, "message": issue.message} for issue in exc.issues],
        )
        return json.dumps(document, indent=2, ensure_ascii=False) + "\n", False
    reports, resolved, agent_has_block = settings_report(config, agent_id)
    document.update(
        valid=True,
        issues=[],
        warnings=[{"path": w.path, "message": w.message} for w in _warnings(path)],
        profile=profile_of_openclaw_config(config),
        agent_has_block=agent_has_block,
        enabled=resolved.enabled,
        settings=[
            {
                "path": r.path,
                "source": r.source,
                "value": r.value,
                "effective": r.effective,
                "help": r.help,
            }
            for r in reports
        ],
    )
    return json.dumps(document, indent=2, ensure_ascii=False) + "\n", True


__all__ = ["SettingReport", "check_json", "render_check", "render_errors", "settings_report"]
