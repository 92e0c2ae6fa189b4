"""A Claude Code hook that Cursor runs: tell it apart, and count each call once.

Cursor runs the hooks of Claude Code's settings files too (cursor.com/docs/reference/
third-party-hooks: ``~/.claude/settings.json``, ``.claude/settings.json``,
``.claude/settings.local.json``; "Include Third-Party Plugins, Skills, and Other Configs",
on by default), mapping the event names (``PreToolUse`` → ``preToolUse``, ``PostToolUse``
→ ``postToolUse``, ``PreCompact`` → ``preCompact``) and accepting Claude Code's answers as
well as its own. "All matching hooks from every source run", so a user who installed both
``loopwatch install claude-code`` and ``loopwatch install cursor`` gets two loopwatch
hooks for every Cursor tool call (the commands differ, so Cursor's de-duplication of an
imported hook by its command does not apply).

Such a payload is Cursor's own, not Claude Code's (captured ones: herdrdev/herdr#2832,
PeonPing/peon-ping#102, DobermanCore/Doberman-Core#576): ``conversation_id``,
``generation_id``, ``cursor_version``, ``workspace_roots``, Cursor's camelCase event name
and tool names (``Shell``), ``tool_output`` as a JSON string. So the Claude Code hook
hands it to the Cursor hook's reading (:mod:`loopwatch.hooks.cursor`), under the Cursor
session key, and answers in Cursor's format, unless loopwatch's own Cursor hook is
installed where Cursor reads hooks (the user's, the enterprise and each workspace root's
``hooks.json``): then that hook counts the call and this one stays out of the way.
"""

from __future__ import annotations

import json
import logging
import os
import sys
from typing import Any, Final

logger = logging.getLogger("loopwatch.hooks")

#: Fields only Cursor sends (Claude Code's hook input has none of them).
CURSOR_FIELDS: Final = ("cursor_version", "conversation_id", "workspace_roots")
#: Where Cursor reads enterprise hooks, by platform (cursor.com/docs/hooks).
ENTERPRISE_FILES: Final = {
    "linux": "/etc/cursor/hooks.json",
    "darwin": "/Library/Application Support/Cursor/hooks.json",
    "win32": "C:\\ProgramData\\Cursor\\hooks.json",
}
#: Cursor's name of a Claude Code event (its third-party hooks mapping), should a payload
#: carry the Claude Code name (the captured ones carry Cursor's).
CURSOR_NAMES: Final = {
    "PreToolUse": "preToolUse",
    "PostToolUse": "postToolUse",
    "PostToolUseFailure": "postToolUseFailure",
    "PreCompact": "preCompact",
}
#: Settings files larger than this are not read (a hooks file is a few hundred bytes).
MAX_FILE_BYTES: Final = 1 << 20


def sent_by_cursor(payload: dict[str, Any]) -> bool:
    """Whether a payload given to the Claude Code hook comes from Cursor."""
    return any(key in payload for key in CURSOR_FIELDS)


def as_cursor_payload(payload: dict[str, Any]) -> dict[str, Any]:
    """The payload with Cursor's event name (a copy when the name had to change)."""
    name = payload.get("hook_event_name")
    if isinstance(name, str) and name in CURSOR_NAMES:
        return {**payload, "hook_event_name": CURSOR_NAMES[name]}
    return payload


def hook_files(payload: dict[str, Any]) -> list[str]:
    """The Cursor ``hooks.json`` files that apply to the payload's workspace."""
    files = [os.path.join(os.path.expanduser("~"), ".cursor", "hooks.json")]
    enterprise = ENTERPRISE_FILES.get(sys.platform)
    if enterprise:
        files.append(enterprise)
    roots = payload.get("workspace_roots")
    folders = [r for r in roots if isinstance(r, str)] if isinstance(roots, list) else []
    folders.append(os.environ.get("CURSOR_PROJECT_DIR", ""))
    for folder in folders:
        if folder and os.path.isabs(folder):
            files.append(os.path.join(folder, ".cursor", "hooks.json"))
    return list(dict.fromkeys(files))


def _has_our_hook(path: str) -> bool:
    from loopwatch.hooks._commands import is_loopwatch_command

    try:
        if os.path.getsize(path) > MAX_FILE_BYTES:
            return False
        with open(path, encoding="utf-8-sig") as file:
            document = json.load(file)
    except (OSError, ValueError):
        return False
    table = document.get("hooks") if isinstance(document, dict) else None
    if not isinstance(table, dict):
        return False
    return any(
        isinstance(entry, dict) and is_loopwatch_command(entry.get("command"), "cursor")
        for entries in table.values()
        if isinstance(entries, list)
        for entry in entries
    )


def cursor_hook_installed(payload: dict[str, Any]) -> bool:
    """Whether loopwatch's Cursor hook is in a ``hooks.json`` Cursor reads for this payload."""
    return any(_has_our_hook(path) for path in hook_files(payload))


__all__ = ["as_cursor_payload", "cursor_hook_installed", "hook_files", "sent_by_cursor"]
