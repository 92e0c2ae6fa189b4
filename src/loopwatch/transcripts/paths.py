"""Which paths a scan reads, and reading them safely.

Every path is checked before it is read: only regular files are opened (a FIFO would block
forever, ``/dev/zero`` never ends), the check is repeated on the opened descriptor (a file
swapped for a FIFO in between is still refused), and a file over the size limit is refused
with a note. Folder walks follow each folder once (symlink loops end), read each file once
(however many links reach it), and leave out hidden entries, special files, and the side
files and copies hosts keep beside their transcripts (counted, never read).
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Final

from loopwatch.transcripts.model import TranscriptError

#: File name suffixes picked up when a folder is scanned (files named explicitly are always
#: read, whatever their name).
TRANSCRIPT_SUFFIXES: Final = frozenset({".jsonl", ".json", ".ndjson", ".traj"})
#: Compression suffixes: ``session.jsonl.gz`` in a folder is picked up, so the scan names it
#: as skipped (compressed files are not read), never passes over it in silence.
COMPRESSED_SUFFIXES: Final = frozenset({".gz", ".zst", ".bz2", ".xz", ".zip"})

#: The largest file read (bytes); a bigger one is skipped with a note, so a stray log or
#: ``/dev/zero`` cannot take the machine's memory.
DEFAULT_MAX_FILE_BYTES: Final = 512 * 1024 * 1024


def _kind_of(mode: int) -> str:
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISDIR(mode):
        return "a directory"
    return "not a regular file"


def check_readable(path: str, info: os.stat_result, max_bytes: int) -> None:
    """Refuse what ``scan`` never reads: anything but a regular file (a FIFO would block, a
    device never ends), and a file over the per-file limit.

    Raises:
        TranscriptError: naming the kind of file, or its size and the limit.
    """
    if not stat.S_ISREG(info.st_mode):
        raise TranscriptError(path, None, f"not a regular file ({_kind_of(info.st_mode)})")
    if info.st_size > max_bytes:
        raise TranscriptError(
            path,
            None,
            f"larger than the {max_bytes // (1024 * 1024)} MiB limit per file "
            f"({info.st_size} bytes; raise it with --max-file-size)",
        )


def read_bytes(path: str, *, max_bytes: int = DEFAULT_MAX_FILE_BYTES) -> bytes:
    """The bytes of a regular file no bigger than ``max_bytes``.

    The file is opened without blocking and checked *after* opening (``fstat``), so a FIFO
    or a device swapped in for a file is refused, never waited on or read forever.

    Raises:
        TranscriptError: not a regular file, too big, or unreadable.
    """
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0)
    try:
        descriptor = os.open(path, flags)
    except OSError as exc:
        raise TranscriptError(path, None, f"cannot read: {exc.strerror or exc}") from exc
    try:
        check_readable(path, os.fstat(descriptor), max_bytes)
        if hasattr(os, "set_blocking"):
            os.set_blocking(descriptor, True)
        with os.fdopen(descriptor, "rb", closefd=False) as stream:
            data = stream.read(max_bytes + 1)
    except OSError as exc:
        raise TranscriptError(path, None, f"cannot read: {exc.strerror or exc}") from exc
    finally:
        os.close(descriptor)
    if len(data) > max_bytes:
        raise TranscriptError(path, None, "grew past the per-file limit while being read")
    return data


# --- folder walks ------------------------------------------------------------------------

#: ``<n>.json`` (V0 sessions) or ``event-<n>-<uuid>.json`` (V1 SDK conversations).
_EVENT_FILE: Final = re.compile(r"(?:event-)?([0-9]+)(?:-[0-9A-Za-z-]+)?\.json")


def event_files(folder: str) -> list[tuple[int, str]] | None:
    """The event files of an OpenHands ``events`` folder in event order, or ``None``."""
    if os.path.basename(os.path.normpath(folder)) != "events":
        return None
    try:
        names = [entry.name for entry in os.scandir(folder) if entry.is_file()]
    except OSError:
        return None
    numbered = [name for name in names if _EVENT_FILE.fullmatch(name)]
    if not numbered or len(numbered) != len([n for n in names if n.endswith(".json")]):
        return None
    return sorted(
        (int(match.group(1)), os.path.join(folder, name))
        for name in numbered
        if (match := _EVENT_FILE.fullmatch(name)) is not None
    )


def is_event_folder(folder: str) -> bool:
    """Whether a folder is an OpenHands session's ``events/`` (one ``<n>.json`` per event)."""
    return event_files(folder) is not None


# --- OpenCode's storage folder and database (read by transcripts.opencode) -------------


def is_storage_folder(folder: str) -> bool:
    """Whether ``folder`` is an OpenCode ``storage/`` folder (``session/``, ``message/``
    and ``part/`` inside it)."""
    return all(os.path.isdir(os.path.join(folder, name)) for name in ("session", "message", "part"))


def storage_session_file(path: str) -> tuple[str, str] | None:
    """``(storage folder, session id)`` for a ``storage/session/<project>/<id>.json`` file."""
    name = os.path.basename(path)
    if not name.endswith(".json"):
        return None
    sessions = os.path.dirname(os.path.dirname(os.path.abspath(path)))
    if os.path.basename(sessions) != "session":
        return None
    root = os.path.dirname(sessions)
    return (root, name[: -len(".json")]) if is_storage_folder(root) else None


def migrated_storage(folder: str) -> bool:
    """Whether a storage folder sits beside an ``opencode*.db`` (it was migrated into it)."""
    parent = os.path.dirname(os.path.abspath(folder))
    try:
        return any(is_database_name(entry) for entry in os.listdir(parent))
    except OSError:
        return False


#: Why a walk leaves out an OpenCode storage folder that has a database beside it.
_MIGRATED: Final = (
    "an OpenCode storage folder beside its opencode.db (migrated into it: the database is read)"
)


def is_database_name(name: str) -> bool:
    """Whether a file name is OpenCode's database (``opencode.db``, ``opencode-<ch>.db``)."""
    return name == "opencode.db" or (name.startswith("opencode-") and name.endswith(".db"))


#: Side files hosts keep beside transcripts; a folder walk counts them, never reads them.
_SIDE_FILE_NAMES: Final = frozenset(
    {
        "settings.json",
        "settings.local.json",
        "ui_messages.json",
        "task_metadata.json",
        "sessions.json",
        "package.json",
        "package-lock.json",
        "tsconfig.json",
        "history.jsonl",
        "config.json",
    }
)


def side_file_reason(path: str) -> str | None:
    """Why a folder walk skips ``path`` without reading it, or ``None`` to read it."""
    name = os.path.basename(path)
    lower = name.lower()
    if lower in _SIDE_FILE_NAMES:
        return "a host side file, not a transcript"
    if lower.endswith(".meta.json") or lower.endswith(".trajectory-path.json"):
        return "a metadata file, not a transcript"
    if ".checkpoint." in lower:
        return "a checkpoint copy of a session (the session itself is read)"
    if lower.startswith(("agent-acompact-", "agent-aside_question-")):
        return "a Claude Code copy of the parent conversation (compaction / side question)"
    return None


@dataclass(frozen=True)
class Found:
    """What a walk found: files to read, problems, and files deliberately left out.

    Attributes:
        files: the files to read, in order.
        explicit: the files named on the command line (they fail loudly when they are no
            transcript; walked files that are no transcript are only counted).
        problems: missing paths, special files named explicitly, empty folders.
        ignored: files a walk left out, with the reason (side files, copies, FIFOs).
    """

    files: tuple[str, ...]
    explicit: frozenset[str]
    problems: tuple[TranscriptError, ...]
    ignored: tuple[TranscriptError, ...]


#: The folder Cursor keeps its agent transcripts in; only there is a ``.txt`` file read
#: (a ``.txt`` anywhere else is almost never a transcript).
CURSOR_TRANSCRIPT_FOLDER: Final = "agent-transcripts"


def _is_cursor_text_file(folder: str, suffix: str) -> bool:
    return suffix == ".txt" and os.path.basename(os.path.normpath(folder)) == (
        CURSOR_TRANSCRIPT_FOLDER
    )


def _walk(
    folder: str,
    seen_dirs: set[tuple[int, int]],
    seen_files: set[tuple[int, int]],
    ignored: list[TranscriptError],
) -> Iterator[str]:
    try:
        entries = sorted(os.scandir(folder), key=lambda e: e.name)
    except OSError as exc:
        ignored.append(TranscriptError(folder, None, f"cannot list: {exc.strerror or exc}"))
        return
    for entry in entries:
        if entry.name.startswith("."):
            continue
        try:
            info = entry.stat()  # follows symlinks: a link is walked as what it points to
        except OSError:
            ignored.append(TranscriptError(entry.path, None, "a broken link or unreadable entry"))
            continue
        key = (info.st_dev, info.st_ino)
        if stat.S_ISDIR(info.st_mode):
            if key in seen_dirs:
                continue  # a symlink loop, or a folder reached twice: walk it once
            seen_dirs.add(key)
            if is_event_folder(entry.path):
                yield entry.path  # one OpenHands session, one event per file: one transcript
                continue
            if is_storage_folder(entry.path):
                if migrated_storage(entry.path):
                    ignored.append(TranscriptError(entry.path, None, _MIGRATED))
                else:
                    yield entry.path  # OpenCode's sessions, a file per message and part
                continue
            yield from _walk(entry.path, seen_dirs, seen_files, ignored)
            continue
        if is_database_name(entry.name) and stat.S_ISREG(info.st_mode):
            if key not in seen_files:
                seen_files.add(key)
                yield entry.path  # OpenCode's SQLite database
            continue
        stem, suffix = os.path.splitext(entry.name.lower())
        compressed = suffix in COMPRESSED_SUFFIXES
        if compressed and os.path.splitext(stem)[1] not in TRANSCRIPT_SUFFIXES:
            continue
        if (
            not compressed
            and suffix not in TRANSCRIPT_SUFFIXES
            and not _is_cursor_text_file(folder, suffix)
        ):
            continue
        if not stat.S_ISREG(info.st_mode):
            ignored.append(TranscriptError(entry.path, None, f"skipped: {_kind_of(info.st_mode)}"))
            continue
        if key in seen_files:
            continue  # the same file through another link
        seen_files.add(key)
        reason = side_file_reason(entry.path)
        if reason is not None:
            ignored.append(TranscriptError(entry.path, None, reason))
            continue
        yield entry.path


def walk_transcripts(paths: Iterable[str | os.PathLike[str]]) -> Found:
    """Expand files and folders (recursively, each folder and file once) into files to read.

    Folders contribute their ``.jsonl`` / ``.json`` / ``.ndjson`` / ``.traj`` regular files
    (compressed ones too, ``.jsonl.gz``, which the scan then reports as skipped, the
    ``.txt`` files of a Cursor ``agent-transcripts`` folder, and OpenCode's ``opencode.db``)
    in name order; an OpenHands ``events/`` folder and an OpenCode ``storage/`` folder are
    one transcript each
    (hidden entries, side files and special files left out and counted); files named
    explicitly are always included when they are regular files.
    """
    files: list[str] = []
    explicit: set[str] = set()
    problems: list[TranscriptError] = []
    ignored: list[TranscriptError] = []
    seen_dirs: set[tuple[int, int]] = set()
    seen_files: set[tuple[int, int]] = set()
    for raw in paths:
        name = os.fspath(raw)
        try:
            info = os.stat(name)
        except FileNotFoundError:
            problems.append(TranscriptError(name, None, "no such file or directory"))
            continue
        except OSError as exc:
            problems.append(TranscriptError(name, None, f"cannot read: {exc.strerror or exc}"))
            continue
        if stat.S_ISDIR(info.st_mode):
            key = (info.st_dev, info.st_ino)
            if key in seen_dirs:
                inside = os.path.join(name, "")
                if not any(f.startswith(inside) for f in files):
                    problems.append(TranscriptError(name, None, "no transcript files found"))
                continue
            seen_dirs.add(key)
            before = len(files) + len(ignored)
            if is_event_folder(name) or is_storage_folder(name):
                files.append(name)
                explicit.add(name)
                continue
            files.extend(_walk(name, seen_dirs, seen_files, ignored))
            if len(files) + len(ignored) == before:
                problems.append(TranscriptError(name, None, "no transcript files found"))
        elif stat.S_ISREG(info.st_mode):
            key = (info.st_dev, info.st_ino)
            if key in seen_files:
                continue
            seen_files.add(key)
            files.append(name)
            explicit.add(name)
        else:
            problems.append(
                TranscriptError(name, None, f"not a regular file ({_kind_of(info.st_mode)})")
            )
    return Found(tuple(files), frozenset(explicit), tuple(problems), tuple(ignored))


def find_transcripts(
    paths: Iterable[str | os.PathLike[str]],
) -> tuple[tuple[str, ...], tuple[TranscriptError, ...]]:
    """``(files, problems)`` of :func:`walk_transcripts` (side files left out silently)."""
    found = walk_transcripts(paths)
    return found.files, found.problems


__all__ = [
    "COMPRESSED_SUFFIXES",
    "DEFAULT_MAX_FILE_BYTES",
    "TRANSCRIPT_SUFFIXES",
    "Found",
    "event_files",
    "find_transcripts",
    "is_database_name",
    "is_event_folder",
    "is_storage_folder",
    "migrated_storage",
    "read_bytes",
    "side_file_reason",
    "storage_session_file",
    "walk_transcripts",
]
