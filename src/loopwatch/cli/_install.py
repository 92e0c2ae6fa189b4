"""``loopwatch install AGENT`` / ``loopwatch uninstall AGENT``: wire the hook into an agent.

Each agent keeps its hooks in its own settings file (formats checked against each agent's
docs or source, 2026-12):

- Claude Code: ``~/.claude/settings.json`` (``$CLAUDE_CONFIG_DIR``) or
  ``.claude/settings.json``; ``{"hooks": {"PreToolUse": [{"hooks": [{"type": "command",
  "command": …, "timeout": seconds}]}]}}`` (no ``matcher``: every tool).
- Codex CLI: ``~/.codex/hooks.json`` (``$CODEX_HOME``) or ``.codex/hooks.json``, the same
  shape; the root may hold only ``hooks`` and ``description``. Hooks are on by default since
  0.124 (``[features] hooks = false`` turns them off; ``codex_hooks`` is the old flag), and a
  new or changed hook runs only once the user trusts it in ``/hooks``.
- Gemini CLI: ``~/.gemini/settings.json`` or ``.gemini/settings.json``, the same shape with
  ``name`` and a ``timeout`` in milliseconds; ``hooks.enabled`` etc. are reserved keys, and
  releases where hooks were experimental also want ``hooksConfig.enabled`` (not written).
- Cursor: ``~/.cursor/hooks.json`` or ``.cursor/hooks.json``, ``{"version": 1, "hooks":
  {"preToolUse": [{"command": …}]}}`` (flat entries, no matcher groups). Cursor also runs
  the Claude Code hooks of Claude's settings files; the Claude Code hook recognises
  Cursor's payloads (:mod:`loopwatch.hooks._cursor_origin`).
- OpenHands (software-agent-sdk 1.x): ``~/.openhands/hooks.json`` or ``.openhands/hooks.json``
  (the first of project, user that exists is the one read), the events at the top
  (``{"PreToolUse": [{"matcher": "*", "hooks": [...]}]}``), or under a ``hooks`` wrapper
  when the file has one; an event may be spelled ``pre_tool_use`` too, and is merged under
  the spelling the file uses (the SDK refuses a file with both).
- OpenCode: a plugin file in ``~/.config/opencode/plugins/`` or ``.opencode/plugins/``,
  where 1.x and 2.x both load ``*.js`` files at start (the file serves both plugin APIs;
  2.x's config key is ``plugins``, 1.x's ``plugin``: neither is needed for these folders).

Every write backs the file up first (``<file>.loopwatch.bak``), keeps the user's settings and
key order, and is idempotent. A handler is loopwatch's when its command runs
``loopwatch hook <agent>`` (the executable, ``-m loopwatch.cli`` or the entry script
``loopwatch/_hook_entry.py``, which install writes): uninstall removes those and nothing
else. A settings file that is not valid JSON is refused, never overwritten.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import os
import shlex
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Literal

from loopwatch.config.files import load_config_file
from loopwatch.errors import ConfigError
from loopwatch.hooks._commands import ENTRY_SCRIPT, is_loopwatch_command

from ._install_files import (
    BACKUP_SUFFIX,
    MSG_NOT_OBJECT,
    MSG_UNWRITABLE,
    InstallError,
    backup,
    parse_settings,
    read_text,
    render_json,
    unified_diff,
    write_atomic,
)
from ._opencode_plugin import PLUGIN_FILE_NAME, is_ours, render_plugin
from ._text import safe_text, write

EXIT_OK: Final = 0
EXIT_USAGE: Final = 2
#: Seconds an agent lets one hook run (Claude Code, Codex); Gemini counts milliseconds.
HOOK_TIMEOUT_S: Final = 30

MSG_NOT_LIST: Final = "{path}: hooks.{event} must be a list; not changing the file"
MSG_FOREIGN_PLUGIN: Final = "{path} exists and was not written by loopwatch; not replacing it"
MSG_FOREIGN_PLUGIN_REMOVE: Final = "{path} was not written by loopwatch; not removing it"
MSG_NOTHING: Final = "loopwatch: {path}: nothing to change\n"
MSG_INSTALLED: Final = "loopwatch: installed the {agent} hook in {path} ({events})\n"
MSG_UNINSTALLED: Final = "loopwatch: removed the {agent} hook from {path}\n"
MSG_REMOVED_FILE: Final = "loopwatch: removed {path} (loopwatch had created it)\n"
MSG_BACKUP: Final = "loopwatch: backup of the previous file: {path}\n"
MSG_NOT_INSTALLED: Final = "loopwatch: the {agent} hook is not installed in {path}\n"
NOTE_CODEX_TRUST: Final = (
    "loopwatch: Codex runs a new or changed hook only after you trust it: open /hooks in "
    "Codex once. (Codex before 0.124 also needs `[features] codex_hooks = true` in "
    "config.toml.)\n"
)
NOTE_GEMINI: Final = (
    "loopwatch: Gemini CLI releases in which hooks were still experimental run them only with "
    '`"hooksConfig": {"enabled": true}` in settings.json (older ones: `tools.enableHooks`).\n'
)
NOTE_OPENCODE: Final = "loopwatch: OpenCode loads the plugin at its next start.\n"
NOTE_OPENHANDS: Final = (
    "loopwatch: OpenHands reads the first of .openhands/hooks.json (project) and "
    "~/.openhands/hooks.json that exists; a program on the SDK passes "
    "hook_config=HookConfig.load() to Conversation. OpenHands shows the model a block's "
    "reason, but no text of a PostToolUse hook: warnings reach the hook log only.\n"
)
NOTE_CLAUDE_IN_CURSOR: Final = (
    "loopwatch: Cursor runs Claude Code's hooks too (its third-party hooks): this hook "
    "guards Cursor's calls as `loopwatch hook cursor` does, and leaves them to that hook "
    "when it is installed, so a call is counted once.\n"
)
NOTE_CURSOR: Final = (
    "loopwatch: Cursor also runs the Claude Code hooks of ~/.claude/settings.json and "
    ".claude/settings.json; loopwatch's Claude Code hook leaves Cursor's calls to this one, "
    "so a call is counted once.\n"
)

Style = Literal["groups", "flat", "plugin"]


@dataclass(frozen=True)
class AgentSpec:
    """Where an agent keeps its hooks, which events loopwatch hooks, and the entry's shape."""

    name: str
    style: Style
    events: tuple[str, ...]
    user_file: Callable[[], Path]
    project_file: Callable[[Path], Path]
    handler: Callable[[str], dict[str, Any]]
    skeleton: Callable[[], dict[str, Any]]
    note: str = ""
    #: The events sit at the document's top (OpenHands) unless it has a ``hooks`` wrapper;
    #: else always under ``hooks``.
    top_level: bool = False


def _home() -> Path:
    return Path(os.path.expanduser("~"))


def _env_dir(variable: str, default: Path) -> Path:
    value = os.environ.get(variable, "")
    return Path(value) if value and os.path.isabs(value) else default


def _command_handler(command: str) -> dict[str, Any]:
    return {"type": "command", "command": command, "timeout": HOOK_TIMEOUT_S}


def _gemini_handler(command: str) -> dict[str, Any]:
    return {
        "type": "command",
        "command": command,
        "name": "loopwatch",
        "timeout": 1000 * HOOK_TIMEOUT_S,
    }


def _cursor_handler(command: str) -> dict[str, Any]:
    return {"command": command}


AGENT_SPECS: Final[dict[str, AgentSpec]] = {
    "claude-code": AgentSpec(
        name="claude-code",
        style="groups",
        events=("PreToolUse", "PostToolUse", "PostToolUseFailure", "PreCompact"),
        user_file=lambda: _env_dir("CLAUDE_CONFIG_DIR", _home() / ".claude") / "settings.json",
        project_file=lambda root: root / ".claude" / "settings.json",
        handler=_command_handler,
        skeleton=dict,
        note=NOTE_CLAUDE_IN_CURSOR,
    ),
    "codex": AgentSpec(
        name="codex",
        style="groups",
        events=("PreToolUse", "PostToolUse", "PreCompact"),
        user_file=lambda: _env_dir("CODEX_HOME", _home() / ".codex") / "hooks.json",
        project_file=lambda root: root / ".codex" / "hooks.json",
        handler=_command_handler,
        skeleton=dict,
        note=NOTE_CODEX_TRUST,
    ),
    "gemini": AgentSpec(
        name="gemini",
        style="groups",
        events=("BeforeTool", "AfterTool", "PreCompress"),
        user_file=lambda: _home() / ".gemini" / "settings.json",
        project_file=lambda root: root / ".gemini" / "settings.json",
        handler=_gemini_handler,
        skeleton=dict,
        note=NOTE_GEMINI,
    ),
    "cursor": AgentSpec(
        name="cursor",
        style="flat",
        events=("preToolUse", "postToolUse", "postToolUseFailure", "preCompact"),
        user_file=lambda: _home() / ".cursor" / "hooks.json",
        project_file=lambda root: root / ".cursor" / "hooks.json",
        handler=_cursor_handler,
        skeleton=lambda: {"version": 1},
        note=NOTE_CURSOR,
    ),
    "opencode": AgentSpec(
        name="opencode",
        style="plugin",
        events=("tool.execute.before", "tool.execute.after", "experimental.session.compacting"),
        user_file=lambda: (
            _env_dir("XDG_CONFIG_HOME", _home() / ".config")
            / "opencode"
            / "plugins"
            / PLUGIN_FILE_NAME
        ),
        project_file=lambda root: root / ".opencode" / "plugins" / PLUGIN_FILE_NAME,
        handler=_cursor_handler,
        skeleton=dict,
        note=NOTE_OPENCODE,
    ),
    "openhands": AgentSpec(
        name="openhands",
        style="groups",
        events=("PreToolUse", "PostToolUse"),
        user_file=lambda: _home() / ".openhands" / "hooks.json",
        project_file=lambda root: root / ".openhands" / "hooks.json",
        handler=_command_handler,
        skeleton=dict,
        note=NOTE_OPENHANDS,
        top_level=True,
    ),
}


# --- the hook command ---------------------------------------------------------------------


def entry_script() -> Path | None:
    """The absolute path of the entry script of the ``loopwatch`` package that runs this
    code (an editable install's included: this is where the package really is), or
    ``None`` when it is not a plain file (a zipped install)."""
    import loopwatch

    path = Path(loopwatch.__file__).resolve().parent / ENTRY_SCRIPT
    return path if path.is_file() else None


def hook_argv(agent: str, config_file: str | None = None) -> list[str]:
    """The hook's command as an argv list: ``<python> -S <entry script> hook AGENT``.

    The absolute ``sys.executable`` of this install (agents run hooks with their own
    ``PATH``; a venv's interpreter finds its own prefix without being activated) with
    ``-S``: ``site`` and its ``.pth`` files often cost more than the interpreter's start,
    and the entry script (see :mod:`loopwatch._hook_client`) finds the package by its own path
    instead. Without an entry script file, ``<python> -m loopwatch.cli hook AGENT``.
    """
    script = entry_script()
    if script is not None and sys.executable:
        argv = [sys.executable, "-S", str(script)]
    else:
        argv = [sys.executable, "-m", "loopwatch.cli"]
    argv += ["hook", agent]
    if config_file:
        argv += ["--config", os.path.abspath(config_file)]
    return argv


def hook_command(agent: str, config_file: str | None = None) -> str:
    """:func:`hook_argv` as one shell command line (the settings files want a string)."""
    return shlex.join(hook_argv(agent, config_file))


def _is_ours(handler: object, agent: str) -> bool:
    return isinstance(handler, dict) and is_loopwatch_command(handler.get("command"), agent)


# --- merging ------------------------------------------------------------------------------


def _hooks_table(
    spec: AgentSpec, document: dict[str, Any], path: Path, *, create: bool
) -> dict[str, Any] | None:
    if spec.top_level and "hooks" not in document:
        return document
    if "hooks" not in document:
        if not create:
            return None
        document["hooks"] = {}
    table = document["hooks"]
    if not isinstance(table, dict):
        raise InstallError(MSG_NOT_OBJECT.format(path=path, where="'hooks'"))
    return table


def _snake_case(event: str) -> str:
    return "".join(f"_{c.lower()}" if c.isupper() and i else c.lower() for i, c in enumerate(event))


def _event_key(spec: AgentSpec, table: dict[str, Any], event: str) -> str:
    """The event's key in ``table``: OpenHands also reads ``pre_tool_use`` for
    ``PreToolUse`` (and refuses a file with both), so the file's own spelling is kept."""
    if spec.top_level and event not in table and _snake_case(event) in table:
        return _snake_case(event)
    return event


def _event_list(table: dict[str, Any], event: str, path: Path) -> list[Any]:
    entries = table.setdefault(event, [])
    if not isinstance(entries, list):
        raise InstallError(MSG_NOT_LIST.format(path=path, event=event))
    return entries


def _handlers(spec: AgentSpec, entries: list[Any]) -> list[dict[str, Any]]:
    """The handler objects of one event's entries (inside matcher groups, or flat)."""
    if spec.style == "flat":
        return [entry for entry in entries if isinstance(entry, dict)]
    found: list[dict[str, Any]] = []
    for group in entries:
        if isinstance(group, dict) and isinstance(group.get("hooks"), list):
            found.extend(h for h in group["hooks"] if isinstance(h, dict))
    return found


def merge_install(
    spec: AgentSpec, document: dict[str, Any], command: str, path: Path
) -> dict[str, Any]:
    """``document`` with loopwatch's handler on every event (a copy; idempotent).

    A handler of ours already there keeps its place and the user's tweaks (a longer
    timeout, a matcher); only its command is brought up to date.
    """
    result = copy.deepcopy(document)
    table = _hooks_table(spec, result, path, create=True)
    assert table is not None
    for event in spec.events:
        entries = _event_list(table, _event_key(spec, table, event), path)
        ours = [h for h in _handlers(spec, entries) if _is_ours(h, spec.name)]
        if ours:
            ours[0]["command"] = command
        elif spec.style == "flat":
            entries.append(spec.handler(command))
        else:
            entries.append({"hooks": [spec.handler(command)]})
    return result


def merge_uninstall(spec: AgentSpec, document: dict[str, Any], path: Path) -> dict[str, Any]:
    """``document`` without loopwatch's handlers for this agent (a copy).

    A matcher group left empty, an event left empty and a ``hooks`` table left empty are
    removed too: loopwatch added them.
    """
    result = copy.deepcopy(document)
    table = _hooks_table(spec, result, path, create=False)
    if table is None:
        return result
    removed_any = False
    for event in list(table):
        entries = table[event]
        if not isinstance(entries, list):
            continue
        kept: list[Any] = []
        removed = False
        for entry in entries:
            if spec.style == "flat":
                if _is_ours(entry, spec.name):
                    removed = True
                else:
                    kept.append(entry)
                continue
            inner = entry.get("hooks") if isinstance(entry, dict) else None
            if not isinstance(inner, list):
                kept.append(entry)
                continue
            rest = [h for h in inner if not _is_ours(h, spec.name)]
            if len(rest) == len(inner):
                kept.append(entry)
                continue
            removed = True
            if rest:
                entry["hooks"] = rest
                kept.append(entry)
        if removed:
            removed_any = True
            if kept:
                table[event] = kept
            else:
                del table[event]
    if removed_any and not table and table is not result:
        del result["hooks"]
    return result


@dataclass(frozen=True)
class Plan:
    """What a command will do to one file: its text before and after (``None``: absent)."""

    path: Path
    old: str | None
    new: str | None

    @property
    def changes(self) -> bool:
        return self.old != self.new


def plan_install(spec: AgentSpec, path: Path, config_file: str | None) -> Plan:
    """The file's new text with loopwatch's hook installed."""
    old = read_text(path)
    if spec.style == "plugin":
        if old is not None and not is_ours(old):
            raise InstallError(MSG_FOREIGN_PLUGIN.format(path=path))
        return Plan(path, old, render_plugin(hook_argv(spec.name, config_file)))
    document = parse_settings(path, old, spec)
    merged = merge_install(spec, document, hook_command(spec.name, config_file), path)
    if old is not None and merged == document:
        return Plan(path, old, old)
    return Plan(path, old, render_json(merged, old))


def plan_uninstall(spec: AgentSpec, path: Path) -> Plan:
    """The file's new text without loopwatch's hook (``new`` is ``None``: delete the file).

    A file left as its agent's empty skeleton is deleted when loopwatch created it, which is
    when no backup exists (loopwatch backs a file up only when it was there before).
    """
    old = read_text(path)
    if old is None:
        return Plan(path, None, None)
    if spec.style == "plugin":
        if not is_ours(old):
            raise InstallError(MSG_FOREIGN_PLUGIN_REMOVE.format(path=path))
        return Plan(path, old, None)
    document = parse_settings(path, old, spec)
    cleaned = merge_uninstall(spec, document, path)
    if cleaned == document:
        return Plan(path, old, old)
    created_by_us = not path.with_name(path.name + BACKUP_SUFFIX).exists()
    if created_by_us and cleaned == spec.skeleton():
        return Plan(path, old, None)
    return Plan(path, old, render_json(cleaned, old))


def apply(plan: Plan) -> Path | None:
    """Carry the plan out (backup first); returns the backup's path, if one was written."""
    if not plan.changes:
        return None
    saved = backup(plan.path) if plan.old is not None and plan.new is not None else None
    if plan.new is None:
        try:
            plan.path.unlink()
        except OSError as exc:
            raise InstallError(MSG_UNWRITABLE.format(path=plan.path, error=exc)) from exc
        with contextlib.suppress(OSError):
            plan.path.parent.rmdir()  # only when empty: loopwatch created it
        return None
    write_atomic(plan.path, plan.new)
    return saved


# --- commands -----------------------------------------------------------------------------


def add_install_parsers(commands: Any) -> None:
    """Register ``install`` and ``uninstall`` on the CLI's sub-command parsers."""
    for name, help_text in (
        ("install", "add loopwatch's hook to a coding agent's settings"),
        ("uninstall", "remove loopwatch's hook from a coding agent's settings"),
    ):
        parser = commands.add_parser(
            name,
            help=help_text,
            description=(
                f"{help_text[0].upper()}{help_text[1:]} (the user's settings by default, "
                "--project for the current directory's). A backup <file>.loopwatch.bak is "
                "written before every change."
            ),
        )
        parser.add_argument(
            "agent",
            choices=tuple(AGENT_SPECS),
            metavar="AGENT",
            help="one of: " + ", ".join(AGENT_SPECS),
        )
        scope = parser.add_mutually_exclusive_group()
        scope.add_argument("--project", action="store_true", help="this project's settings")
        scope.add_argument("--user", action="store_true", help="the user's settings (default)")
        if name == "install":
            parser.add_argument(
                "--config", metavar="FILE", help="run the hook with this OpenClaw config"
            )
        parser.add_argument(
            "--dry-run", action="store_true", help="print the change as a diff, write nothing"
        )
        parser.set_defaults(handler=cmd_install if name == "install" else cmd_uninstall)


def target_file(spec: AgentSpec, project: bool, root: Path | None = None) -> Path:
    """The settings file the command works on."""
    return spec.project_file(root or Path.cwd()) if project else spec.user_file()


def _error(message: str) -> int:
    write(sys.stderr, f"loopwatch: error: {safe_text(message)}\n")
    return EXIT_USAGE


def _report(plan: Plan, dry_run: bool, done: str) -> None:
    if not plan.changes:
        write(sys.stderr, MSG_NOTHING.format(path=plan.path))
        return
    if dry_run:
        write(sys.stdout, unified_diff(plan.path, plan.old, plan.new))
        return
    saved = apply(plan)
    write(sys.stderr, done)
    if saved is not None:
        write(sys.stderr, MSG_BACKUP.format(path=saved))


def cmd_install(args: argparse.Namespace) -> int:
    """``loopwatch install AGENT``: 0 done (or nothing to do), 2 refused."""
    spec = AGENT_SPECS[args.agent]
    if args.config is not None:
        try:
            load_config_file(args.config)
        except ConfigError as exc:
            return _error(f"{args.config}: {exc}")
    path = target_file(spec, args.project)
    try:
        plan = plan_install(spec, path, args.config)
        done = MSG_INSTALLED.format(agent=spec.name, path=path, events=", ".join(spec.events))
        _report(plan, args.dry_run, done)
    except InstallError as exc:
        return _error(str(exc))
    if not args.dry_run and spec.note:
        write(sys.stderr, spec.note)
    return EXIT_OK


def cmd_uninstall(args: argparse.Namespace) -> int:
    """``loopwatch uninstall AGENT``: 0 done (or nothing installed), 2 refused."""
    spec = AGENT_SPECS[args.agent]
    path = target_file(spec, args.project)
    try:
        plan = plan_uninstall(spec, path)
        if plan.old is None:
            write(sys.stderr, MSG_NOT_INSTALLED.format(agent=spec.name, path=path))
            return EXIT_OK
        done = (
            MSG_REMOVED_FILE.format(path=path)
            if plan.new is None
            else MSG_UNINSTALLED.format(agent=spec.name, path=path)
        )
        _report(plan, args.dry_run, done)
    except InstallError as exc:
        return _error(str(exc))
    return EXIT_OK
