"""Which hook commands are loopwatch's: the one test ``install`` / ``uninstall`` and the
hooks themselves share (a Claude Code hook run by Cursor looks for loopwatch's Cursor hook).

A command is loopwatch's when it runs ``loopwatch hook <agent>``: the ``loopwatch``
executable, ``-m loopwatch.cli`` or the entry script ``.../loopwatch/_hook_entry.py``
(what install writes), then ``hook <agent>``.
"""

from __future__ import annotations

import re
from typing import Final

#: The installed command's entry script, in the ``loopwatch`` package.
ENTRY_SCRIPT: Final = "_hook_entry.py"


def is_loopwatch_command(command: object, agent: str) -> bool:
    """Whether a handler's command runs ``loopwatch hook <agent>`` (so it is ours)."""
    if not isinstance(command, str):
        return False
    pattern = (
        r"(?:(?:^|[\s/\\'\"])loopwatch(?:\.exe)?(?:\.cli)?"
        r"|[/\\]loopwatch[/\\]"
        + re.escape(ENTRY_SCRIPT)
        + r")['\"]?\s+hook\s+"
        + re.escape(agent)
        + r"(?=$|[\s'\"])"
    )
    return re.search(pattern, command) is not None


__all__ = ["ENTRY_SCRIPT", "is_loopwatch_command"]
