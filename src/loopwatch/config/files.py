"""Reading config files: regular files only, at most 2 MiB, JSON first then JSON5.

A path to a FIFO or a device must fail at once rather than hang or fill the memory; a syntax
error names its line and column; duplicate keys are kept through parsing so validation can
report them (inside a block) or warn about them (on the way to one).
"""

from __future__ import annotations

import json
import os
import re
import stat
from collections.abc import Iterable, Mapping
from typing import Any, Final, cast

from loopwatch.config._expand import resolve_includes, substitute_env
from loopwatch.config.openclaw import unused_adaptive_warning, validate_whole
from loopwatch.errors import ConfigError, ConfigIssue

_JSON5_POSITION: Final = re.compile(r"^<string>:(\d+) (.*) at column (\d+)$", re.DOTALL)
_LINE_BREAKING: Final = re.compile("[\x00-\x1f\x7f\x85\u2028\u2029]")


def _one_line(text: str) -> str:
    """Escape control characters so an issue stays on one line (``Unexpected "\\n"``)."""
    return _LINE_BREAKING.sub(lambda found: found[0].encode("unicode_escape").decode(), text)


def _end_position(text: str) -> tuple[int, int]:
    lines = text.split("\n")
    return len(lines), len(lines[-1]) + 1


def _syntax_issue(exc: ValueError, text: str) -> ConfigIssue:
    """One issue at path ``""`` naming the 1-based line and column of a JSON5 syntax error."""
    found = _JSON5_POSITION.match(str(exc))
    if found:
        line, column, reason = int(found[1]), int(found[3]), found[2]
    else:
        # The parser reports no position only for input that ends too early (an empty file).
        (line, column), reason = _end_position(text), str(exc)
    return ConfigIssue(
        "", _one_line(f"JSON5 syntax error at line {line}, column {column}: {reason}")
    )


#: The largest config file loopwatch reads: OpenClaw configs are kilobytes, and a path to a
#: device or a runaway file must fail at once rather than fill the memory.
MAX_CONFIG_BYTES: Final = 2 * 1024 * 1024


def _read_config_bytes(path: str | os.PathLike[str]) -> bytes:
    """The bytes of a config file: a regular file of at most :data:`MAX_CONFIG_BYTES`.

    A FIFO, a device (``/dev/zero``), a folder or a socket is refused before it is opened
    for reading, so nothing can hang or grow without bound; the file is then read with the
    limit again, in case it changed in between.
    """
    shown = os.fspath(path)
    try:
        info = os.stat(path)
    except (OSError, ValueError) as exc:
        raise ConfigError([ConfigIssue("", _one_line(f"cannot read {shown!s}: {exc}"))]) from exc
    if not stat.S_ISREG(info.st_mode):
        raise ConfigError([ConfigIssue("", f"{shown!s} is not a regular file")])
    if info.st_size > MAX_CONFIG_BYTES:
        raise ConfigError([ConfigIssue("", f"{shown!s} is larger than {MAX_CONFIG_BYTES} bytes")])
    try:
        flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0)
        descriptor = os.open(path, flags)
        with os.fdopen(descriptor, "rb") as handle:
            raw = handle.read(MAX_CONFIG_BYTES + 1)
    except OSError as exc:
        raise ConfigError([ConfigIssue("", _one_line(f"cannot read {shown!s}: {exc}"))]) from exc
    if len(raw) > MAX_CONFIG_BYTES:
        raise ConfigError([ConfigIssue("", f"{shown!s} is larger than {MAX_CONFIG_BYTES} bytes")])
    return raw


def config_warnings(path: str | os.PathLike[str]) -> tuple[ConfigIssue, ...]:
    """What a valid file silently loses: duplicated keys on the way to a block (a second
    ``tools``, ``agents``, ``loopwatch``, ``loopDetection``), whose earlier value is ignored,
    and a ``loopwatch.adaptive`` block the file's profile (``reference``) does not use.

    Raises:
        ConfigError: as :func:`load_config_file`.
    """
    shadowed: list[ConfigIssue] = []
    config = _load(path, shadowed)
    unused = unused_adaptive_warning(config)
    return (*shadowed, unused) if unused is not None else tuple(shadowed)


def load_config_file(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Read, parse (JSON5) and validate a whole OpenClaw config file.

    Duplicate keys are issues inside the validated subtrees (``tools.loopDetection``,
    ``agents.list[i].tools.loopDetection``, ``loopwatch``); elsewhere the last value wins, as
    in OpenClaw. ``$include`` and ``${VAR}`` are resolved first, as OpenClaw does
    (:mod:`loopwatch.config._expand`).

    Args:
        path: the file (UTF-8; a BOM is ignored; JSON is a subset of JSON5).

    Returns:
        The parsed config as plain dicts and lists.

    Raises:
        ConfigError: the file cannot be read, is not UTF-8, does not parse (one issue with line
            and column), an include fails (one issue at its ``$include``), or validation
            fails (every issue).
    """
    return _load(path, [])


def _decode(raw: bytes, shown: str) -> str:
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        message = _one_line(f"{shown} is not valid UTF-8 (byte {exc.start})")
        raise ConfigError([ConfigIssue("", message)]) from exc


def _parse(
    text: str, duplicates: dict[int, tuple[Mapping[Any, Any], list[tuple[Any, Any]]]]
) -> Any:
    """Parse JSON5 text, noting the objects that had duplicate keys in ``duplicates``."""
    found: dict[int, tuple[Mapping[Any, Any], list[tuple[Any, Any]]]] = {}

    def keep_pairs(pairs: Iterable[tuple[Any, Any]]) -> dict[Any, Any]:
        items = list(pairs)
        obj = dict(items)
        if len(obj) != len(items):
            found[id(obj)] = (obj, items)
        return obj

    try:
        try:
            # Most configs are plain JSON: the C parser reads them a thousand times faster
            # than the JSON5 one, with the same values and the same duplicate hook.
            value = json.loads(text, object_pairs_hook=keep_pairs)
        except ValueError:
            found.clear()
            # Imported here: a hook process with no config file (or a plain JSON one)
            # never pays for it, and ``python -S`` hooks may not see site-packages.
            import json5

            value = json5.loads(text, object_pairs_hook=keep_pairs)
    except RecursionError as exc:
        raise ConfigError([ConfigIssue("", "JSON5 nesting too deep")]) from exc
    except ValueError as exc:
        raise ConfigError([_syntax_issue(exc, text)]) from exc
    duplicates.update(found)
    return value


def _load(path: str | os.PathLike[str], shadowed: list[ConfigIssue]) -> dict[str, Any]:
    """:func:`load_config_file`, noting warnings (shadowed keys, unset environment variables)
    in ``shadowed`` (the caller's list, so concurrent loads never share one)."""
    shown = os.fspath(path)
    duplicates: dict[int, tuple[Mapping[Any, Any], list[tuple[Any, Any]]]] = {}
    config = _parse(_decode(_read_config_bytes(path), f"{shown!s}"), duplicates)

    def parse_included(file: str, where: str) -> Any:
        try:
            return _parse(_decode(_read_config_bytes(file), file), duplicates)
        except ConfigError as err:
            # An included file's problem is reported where its ``$include`` was written.
            raise ConfigError(
                [
                    ConfigIssue(where, _one_line(text if file in text else f"{file}: {text}"))
                    for text in (str(issue) for issue in err.issues)
                ]
            ) from err

    try:
        config = resolve_includes(config, f"{shown!s}", parse_included)
        substitute_env(config, shadowed, dups=duplicates)
    except RecursionError as exc:
        raise ConfigError([ConfigIssue("", "JSON5 nesting too deep")]) from exc
    issues: list[ConfigIssue] = []
    validate_whole(config, issues, duplicates, shadowed)
    if issues:
        raise ConfigError(issues)
    return cast("dict[str, Any]", config)  # validate_whole refused anything else
