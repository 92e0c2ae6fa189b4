"""Where the hook commands keep their state: one folder per user, as XDG says.

``$XDG_STATE_HOME/loopwatch/`` (default ``~/.local/state/loopwatch/``) holds the SQLite
store shared by every hook process, the note side file used with a Redis store, and the
log file (the hooks never print diagnostics into the agent).

Paths are strings (``os.path``): every hook process asks for them, and ``pathlib`` costs
a hook a few milliseconds to import (it imports ``urllib.parse`` and ``ipaddress``).
"""

from __future__ import annotations

import os
from contextlib import suppress
from typing import Final

#: The environment variable naming the store of the hooks (any ``store_from_url`` URL).
STORE_ENV: Final = "LOOPWATCH_STORE"
STATE_ENV: Final = "XDG_STATE_HOME"
STORE_FILE: Final = "sessions.db"
NOTES_FILE: Final = "notes.db"
LOG_FILE: Final = "hook.log"


def state_dir() -> str:
    """``$XDG_STATE_HOME/loopwatch`` (an absolute ``XDG_STATE_HOME`` only, as the spec
    says), else ``~/.local/state/loopwatch``."""
    base = os.environ.get(STATE_ENV, "")
    if not base or not os.path.isabs(base):
        base = os.path.join(os.path.expanduser("~"), ".local", "state")
    return os.path.join(base, "loopwatch")


def make_state_dir() -> str:
    """Create the state folder (``0700``, parents as needed) and return it.

    The hooks own this folder, so they create it; a SQLite store never creates the folder
    of a path it is given (a typo would make a new, empty store).

    Raises:
        OSError: it cannot be created.
    """
    folder = state_dir()
    os.makedirs(folder, mode=0o700, exist_ok=True)
    return folder


def default_store_url() -> str:
    """``LOOPWATCH_STORE`` when set, else the SQLite file in the state folder."""
    given = os.environ.get(STORE_ENV, "").strip()
    if given:
        return given
    return "sqlite://" + os.path.join(state_dir(), STORE_FILE)


def store_url_or_default(given: str | None) -> str:
    """``given``, else :func:`default_store_url`, with the state folder created when the
    URL is the hooks' own file there (never for a URL the user chose)."""
    if given:
        return given
    url = default_store_url()
    if url == "sqlite://" + os.path.join(state_dir(), STORE_FILE):
        with suppress(OSError):  # the store then fails to open, naming the folder
            make_state_dir()
    return url


def notes_path() -> str:
    """The note side file, for stores that keep no notes themselves (Redis)."""
    return os.path.join(state_dir(), NOTES_FILE)


def log_path() -> str:
    return os.path.join(state_dir(), LOG_FILE)


__all__ = [
    "STORE_ENV",
    "default_store_url",
    "log_path",
    "make_state_dir",
    "notes_path",
    "state_dir",
    "store_url_or_default",
]
