"""What OpenClaw does to a parsed config file before validating it: ``$include``, ``${VAR}``.

Read from OpenClaw 2026.6.10 (``src/config/includes.ts``, ``src/config/env-substitution.ts``,
``src/config/io.ts``), so a config split over files, or naming environment variables, means
the same to loopwatch as to OpenClaw:

* ``{"$include": "./a.json5"}`` or ``{"$include": ["./a.json5", "./b.json5"]}`` is replaced
  by the included file(s), merged deeply in order (objects key by key, lists concatenated,
  anything else: the later wins); sibling keys are merged over the included content, which
  must then be an object. Paths are relative to the including file and must stay inside
  the main config's folder (or a folder of ``OPENCLAW_INCLUDE_ROOTS``), symlinks resolved;
  at most 10 levels; a file including itself (directly or not) is an error.
* After includes, ``${NAME}`` in a string value (``NAME`` uppercase: ``[A-Z_][A-Z0-9_]*``)
  is replaced by the environment variable, or the config's own ``env.vars.NAME`` /
  ``env.NAME`` when the process has none; ``$${NAME}`` is the literal ``${NAME}``. A name
  set nowhere keeps its text and is a warning (OpenClaw's reading of a config does the
  same). Only strings change: ``warningThreshold: "${WARN}"`` stays a string, which the
  schema rejects, in OpenClaw as here.

Every problem is a :class:`ConfigError` whose issue names where the ``$include`` was
written (``tools.$include``).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping, MutableMapping
from typing import Any, Final

from loopwatch.errors import ConfigError, ConfigIssue

INCLUDE_KEY: Final = "$include"
#: OpenClaw's limit of nested includes.
MAX_INCLUDE_DEPTH: Final = 10
#: OpenClaw's limit of an include path's length (CWE-22 hardening).
MAX_INCLUDE_PATH_LENGTH: Final = 4096
#: Keys OpenClaw's deep merge skips (JavaScript prototype keys).
_BLOCKED_KEYS: Final = frozenset({"__proto__", "prototype", "constructor"})
_ENV_NAME: Final = re.compile(r"[A-Z_][A-Z0-9_]*")
_ENV_SKIP: Final = ("vars", "shellEnv")
MSG_ENV_UNSET: Final = "environment variable {name} is not set: the text ${{{name}}} is kept"

#: Reads and parses one file: ``(path, issue path) -> value``, raising ``ConfigError``.
ParseFile = Callable[[str, str], Any]


def _join(path: str, key: object) -> str:
    return f"{path}.{key}" if path else str(key)


def _inside(root: str, candidate: str) -> bool:
    return candidate == root or candidate.startswith(root.rstrip(os.sep) + os.sep)


def include_roots(env: Mapping[str, str]) -> tuple[str, ...]:
    """The extra folders ``OPENCLAW_INCLUDE_ROOTS`` allows (``os.pathsep``-separated)."""
    roots: list[str] = []
    for entry in env.get("OPENCLAW_INCLUDE_ROOTS", "").strip().split(os.pathsep):
        entry = entry.strip()
        if not entry:
            continue
        resolved = os.path.abspath(os.path.expanduser(entry))
        if resolved not in roots:
            roots.append(resolved)
    return tuple(roots)


def deep_merge(target: object, source: object) -> object:
    """OpenClaw's include merge: lists concatenate, objects merge key by key, else source."""
    if isinstance(target, list) and isinstance(source, list):
        return [*target, *source]
    if isinstance(target, dict) and isinstance(source, dict):
        result = dict(target)
        for key, value in source.items():
            if key in _BLOCKED_KEYS:
                continue
            result[key] = deep_merge(result[key], value) if key in result else value
        return result
    return source


class _Includes:
    def __init__(self, main: str, parse: ParseFile, env: Mapping[str, str]) -> None:
        self.parse = parse
        root = os.path.dirname(os.path.abspath(main))
        self.roots = [(r, os.path.realpath(r)) for r in (root, *include_roots(env))]

    def process(self, value: object, path: str, base: str, chain: tuple[str, ...]) -> object:
        # In place where nothing is included, so objects keep the identity the parser's
        # record of duplicate keys knows them by.
        if isinstance(value, list):
            for i, item in enumerate(value):
                value[i] = self.process(item, f"{path}[{i}]", base, chain)
            return value
        if not isinstance(value, dict):
            return value
        if INCLUDE_KEY not in value:
            for key, item in value.items():
                value[key] = self.process(item, _join(path, key), base, chain)
            return value
        where = _join(path, INCLUDE_KEY)
        included = self._resolve(value[INCLUDE_KEY], where, path, base, chain)
        rest = {
            key: self.process(item, _join(path, key), base, chain)
            for key, item in value.items()
            if key != INCLUDE_KEY
        }
        if not rest:
            return included
        if not isinstance(included, dict):
            raise ConfigError(
                [ConfigIssue(where, "sibling keys need the included content to be an object")]
            )
        return deep_merge(included, rest)

    def _resolve(
        self, value: object, where: str, path: str, base: str, chain: tuple[str, ...]
    ) -> object:
        if isinstance(value, str):
            return self._load(value, where, path, base, chain)
        if isinstance(value, list):
            merged: object = {}
            for index, item in enumerate(value):
                if not isinstance(item, str):
                    raise ConfigError(
                        [ConfigIssue(f"{where}[{index}]", "expected a string (a file path)")]
                    )
                merged = deep_merge(merged, self._load(item, where, path, base, chain))
            return merged
        raise ConfigError(
            [ConfigIssue(where, "expected a string or a list of strings (file paths)")]
        )

    def _load(self, name: str, where: str, path: str, base: str, chain: tuple[str, ...]) -> object:
        def fail(reason: str) -> ConfigError:
            return ConfigError([ConfigIssue(where, f"{name!r}: {reason}")])

        if "\0" in name:
            raise fail("an include path must not contain NUL bytes")
        if len(name) >= MAX_INCLUDE_PATH_LENGTH:
            raise fail(f"longer than {MAX_INCLUDE_PATH_LENGTH} characters")
        resolved = os.path.normpath(os.path.join(os.path.dirname(base), name))
        if not any(_inside(root, resolved) for root, _real in self.roots):
            raise fail("outside the config's folder (OPENCLAW_INCLUDE_ROOTS allows others)")
        if os.path.exists(resolved):
            real = os.path.realpath(resolved)
            if not any(_inside(real_root, real) for _root, real_root in self.roots):
                raise fail("a symlink to outside the config's folder")
        if resolved in chain:
            raise fail("circular include: " + " -> ".join((*chain, resolved)))
        if len(chain) > MAX_INCLUDE_DEPTH:
            raise fail(f"more than {MAX_INCLUDE_DEPTH} nested includes")
        parsed = self.parse(resolved, where)
        return self.process(parsed, path, resolved, (*chain, resolved))


def resolve_includes(
    config: object, main: str, parse: ParseFile, env: Mapping[str, str] | None = None
) -> object:
    """Replace every ``$include`` of a parsed config, as OpenClaw does (module doc).

    Args:
        config: the parsed main file.
        main: the main file's path (includes are confined to its folder).
        parse: reads and parses one included file, raising ``ConfigError``.
        env: the environment (``OPENCLAW_INCLUDE_ROOTS``); default ``os.environ``.

    Returns:
        The config with its includes merged in (objects without one are new dicts too).

    Raises:
        ConfigError: an include that cannot be read, parsed or merged, at its path.
    """
    main_path = os.path.normpath(os.path.abspath(main))
    includes = _Includes(main_path, parse, os.environ if env is None else env)
    return includes.process(config, "", main_path, (main_path,))


def _config_env(config: object) -> dict[str, str]:
    """The config's own ``env`` entries, OpenClaw's lower-precedence source: ``env.vars``,
    then the other string entries of ``env`` (which win), non-blank and naming no variable."""
    block = config.get("env") if isinstance(config, dict) else None
    if not isinstance(block, dict):
        return {}
    named = block.get("vars")
    found: dict[str, str] = {}
    for source, skip in ((named if isinstance(named, dict) else {}, ()), (block, _ENV_SKIP)):
        for key, value in source.items():
            usable = isinstance(value, str) and value.strip() and "${" not in value
            if isinstance(key, str) and key not in skip and usable:
                found[key] = value
    return found


def substitute_env(
    config: object,
    warnings: list[ConfigIssue],
    env: Mapping[str, str] | None = None,
    dups: MutableMapping[int, tuple[Mapping[Any, Any], list[tuple[Any, Any]]]] | None = None,
) -> None:
    """Replace ``${NAME}`` in the string values loopwatch reads, in place (module doc).

    Those are ``tools.loopDetection``, each ``agents.list[i]``'s ``id`` and
    ``tools.loopDetection``, and the ``loopwatch`` block; the rest of a config is not
    loopwatch's to read, so its unset names are not warned about.

    Args:
        config: the config, includes resolved; changed in place, so the objects that had
            duplicate keys keep their identity.
        warnings: where a name set nowhere is noted, at the path of its value.
        env: the environment; default ``os.environ``.
        dups: the parser's record of objects with duplicate keys; their pairs are
            substituted too.
    """
    if not isinstance(config, dict):
        return
    process_env = os.environ if env is None else env
    fallback = _config_env(config)

    def lookup(name: str) -> str | None:
        value = process_env.get(name)
        if value:
            return value
        return fallback.get(name) or None

    def text(value: str, path: str) -> str:
        if "$" not in value:
            return value
        out: list[str] = []
        index = 0
        while index < len(value):
            char = value[index]
            if char != "$":
                out.append(char)
                index += 1
                continue
            escaped = value.startswith("$${", index)
            if escaped or value.startswith("${", index):
                start = index + (3 if escaped else 2)
                end = value.find("}", start)
                name = value[start:end] if end != -1 else ""
                if end != -1 and _ENV_NAME.fullmatch(name):
                    found = None if escaped else lookup(name)
                    if found is None and not escaped:
                        warnings.append(ConfigIssue(path, MSG_ENV_UNSET.format(name=name)))
                    out.append("${" + name + "}" if found is None else found)
                    index = end + 1
                    continue
            out.append(char)
            index += 1
        return "".join(out)

    def walk(value: object, path: str) -> object:
        if isinstance(value, str):
            return text(value, path)
        if isinstance(value, list):
            for i, item in enumerate(value):
                value[i] = walk(item, f"{path}[{i}]")
        elif isinstance(value, dict):
            for key, item in value.items():
                value[key] = walk(item, _join(path, key))
            kept = dups.get(id(value)) if dups else None
            if dups is not None and kept is not None and kept[0] is value:
                written = [(k, walk(v, _join(path, k))) for k, v in kept[1]]
                dups[id(value)] = (value, written)
        return value

    tools = config.get("tools")
    if isinstance(tools, dict) and "loopDetection" in tools:
        tools["loopDetection"] = walk(tools["loopDetection"], "tools.loopDetection")
    agents = config.get("agents")
    entries = agents.get("list") if isinstance(agents, dict) else None
    if isinstance(entries, list):
        for index, entry in enumerate(entries):
            if not isinstance(entry, dict):
                continue
            path = f"agents.list[{index}]"
            if "id" in entry:
                entry["id"] = walk(entry["id"], f"{path}.id")
            tools = entry.get("tools")
            if isinstance(tools, dict) and "loopDetection" in tools:
                tools["loopDetection"] = walk(tools["loopDetection"], f"{path}.tools.loopDetection")
    if "loopwatch" in config:
        config["loopwatch"] = walk(config["loopwatch"], "loopwatch")
