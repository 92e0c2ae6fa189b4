"""Agent settings files on disk, for ``loopwatch install``: read, parse, write, back up, diff.

A settings file belongs to the user: loopwatch refuses one that is not a JSON object rather
than overwrite it, writes through a temporary file and a rename (keeping the file's mode),
copies the old file to ``<file>.loopwatch.bak`` first, and keeps the original indentation.
"""

from __future__ import annotations

import contextlib
import difflib
import json
import os
import re
import shutil
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from ._install import AgentSpec

#: The suffix of the backup written before every change.
BACKUP_SUFFIX: Final = ".loopwatch.bak"

MSG_NOT_JSON: Final = (
    "{path} is not valid JSON ({error}); fix or move it first — loopwatch will not overwrite it"
)
MSG_NOT_OBJECT: Final = "{path}: {where} must be a JSON object; not changing the file"
MSG_TOO_DEEP: Final = (
    "{path} is nested deeper than {depth} levels; fix or move it first — loopwatch will not "
    "overwrite it"
)
MSG_UNREADABLE: Final = "cannot read {path}: {error}"
#: The deepest settings document loopwatch edits. Real ones are a few levels deep; the
#: copy, the comparison and the indented rendering of an edit all recurse per level.
MAX_SETTINGS_DEPTH: Final = 100
MSG_UNWRITABLE: Final = "cannot write {path}: {error}"


class InstallError(Exception):
    """A settings file loopwatch must not touch, or cannot read or write."""


#: A byte order mark a Windows editor may have put at the start of a settings file: read
#: past it, and kept when the file is written again.
BOM: Final = "\ufeff"


def _indent_of(text: str) -> int:
    match = re.match(r"\s*\{\s*?\n([ ]+)\S", text)
    return len(match.group(1)) if match else 2


def render_json(document: dict[str, Any], original: str | None) -> str:
    """The document as the file's text, indented like the original (default 2)."""
    indent = _indent_of(original.removeprefix(BOM)) if original else 2
    mark = BOM if original and original.startswith(BOM) else ""
    return mark + json.dumps(document, indent=indent, ensure_ascii=False) + "\n"


def read_text(path: Path) -> str | None:
    """The file's text, or ``None`` when it does not exist."""
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        raise InstallError(MSG_UNREADABLE.format(path=path, error=exc)) from exc


def parse_settings(path: Path, text: str | None, spec: AgentSpec) -> dict[str, Any]:
    """The settings document (the agent's skeleton when the file is new).

    Raises:
        InstallError: not JSON, or not an object at the top.
    """
    if text is not None:
        text = text.removeprefix(BOM)
    if text is None or not text.strip():
        return spec.skeleton()
    try:
        document = json.loads(text)
    except RecursionError as exc:
        raise InstallError(MSG_TOO_DEEP.format(path=path, depth=MAX_SETTINGS_DEPTH)) from exc
    except ValueError as exc:
        raise InstallError(MSG_NOT_JSON.format(path=path, error=exc)) from exc
    if not isinstance(document, dict):
        raise InstallError(MSG_NOT_OBJECT.format(path=path, where="the file"))
    if _depth(document) > MAX_SETTINGS_DEPTH:
        raise InstallError(MSG_TOO_DEEP.format(path=path, depth=MAX_SETTINGS_DEPTH))
    return document


def _depth(document: object) -> int:
    """How deeply a parsed JSON document nests its objects and arrays (iteratively)."""
    deepest = 0
    stack = [(document, 1)]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, (dict, list)):
            deepest = max(deepest, depth)
            items = value.values() if isinstance(value, dict) else value
            stack.extend((item, depth + 1) for item in items)
    return deepest


def write_atomic(path: Path, text: str) -> None:
    """Write ``text`` through a temporary file and a rename, keeping the file's mode."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        mode = path.stat().st_mode & 0o7777 if path.exists() else None
        fd, temp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                handle.write(text)
            if mode is not None:
                os.chmod(temp, mode)
            os.replace(temp, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(temp)
            raise
    except OSError as exc:
        raise InstallError(MSG_UNWRITABLE.format(path=path, error=exc.strerror or exc)) from exc


def backup(path: Path) -> Path | None:
    """Copy the file to ``<file>.loopwatch.bak`` (when it exists) before it changes."""
    if not path.exists():
        return None
    target = path.with_name(path.name + BACKUP_SUFFIX)
    try:
        shutil.copy2(path, target)
    except OSError as exc:
        raise InstallError(MSG_UNWRITABLE.format(path=target, error=exc.strerror or exc)) from exc
    return target


def unified_diff(path: Path, old: str | None, new: str | None) -> str:
    """The change as a unified diff (``/dev/null`` for a file created or removed)."""
    return "".join(
        difflib.unified_diff(
            (old or "").splitlines(keepends=True),
            (new or "").splitlines(keepends=True),
            fromfile=str(path) if old is not None else "/dev/null",
            tofile=str(path) if new is not None else "/dev/null",
        )
    )
