"""Where the hook commands keep their state: one folder per user, as XDG says.

``$XDG_STATE_HOME/loopwatch/`` (default ``~/.local/state/loopwatch/``) holds the SQLite
store shared by every hook process, the note side file used with a Redis store, and the
log file (the hooks never print diagnostics into the agent).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Final

#: The environment variable naming the store of the hooks (any ``store_from_url`` URL).
STORE_ENV: Final = "LOOPWATCH_STORE"
STATE_ENV: Final = "XDG_STATE_HOME"
STORE_FILE: Final = "sessions.db"
NOTES_FILE: Final = "notes.db"
LOG_FILE: Final = "hook.log"


def state_dir() -> Path:
    """``$XDG_STATE_HOME/loopwatch`` (an absolute ``XDG_STATE_HOME`` only, as the spec
    says), else ``~/.local/state/loopwatch``."""
    base = os.environ.get(STATE_ENV, "")
    root = Path(base) if base and os.path.isabs(base) else Path.home() / ".local" / "state"
    return root / "loopwatch"


def default_store_url() -> str:
    """``LOOPWATCH_STORE`` when set, else the SQLite file in the state folder."""
    given = os.environ.get(STORE_ENV, "").strip()
    if given:
        return given
    return "sqlite://" + str(state_dir() / STORE_FILE)


def notes_path() -> Path:
    """The note side file, for stores that keep no notes themselves (Redis)."""
    return state_dir() / NOTES_FILE


def log_path() -> Path:
    return state_dir() / LOG_FILE


__all__ = ["STORE_ENV", "default_store_url", "log_path", "notes_path", "state_dir"]
