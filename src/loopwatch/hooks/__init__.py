"""``loopwatch hook <agent>``: guard the coding agents that run a command per tool call.

Claude Code, Codex CLI, Gemini CLI, Cursor and OpenHands run a hook command before and
after each tool call with the event as JSON on stdin; OpenCode does the same through a
small plugin.
Each call is a new process, so the session's history lives in a store that outlives it
(SQLite in the user's state folder by default, or ``LOOPWATCH_STORE``, e.g. a Redis URL).

:func:`run_hook` is the whole job for one event: parse the host's payload, run it
through the guard, answer in the host's own contract. It never raises: anything that
goes wrong (bad JSON, an unknown event, a broken store) is logged and answered with the
host's "no opinion", so a loopwatch failure never blocks a tool call by accident.
Cursor runs Claude Code's hooks too: a Cursor payload given to the Claude Code hook is read
and answered as Cursor's, once (:mod:`loopwatch.hooks._cursor_origin`).
"""

from __future__ import annotations

import importlib
import json
import logging
from types import ModuleType
from typing import TYPE_CHECKING, BinaryIO, Final

from loopwatch.hooks._core import HookResult

if TYPE_CHECKING:
    from loopwatch.guard import LoopGuard

logger = logging.getLogger("loopwatch.hooks")

#: The agents ``loopwatch hook`` speaks to, by the name the command takes.
AGENTS: Final = ("claude-code", "codex", "gemini", "cursor", "opencode", "openhands")
_MODULES: Final = {
    "claude-code": "loopwatch.hooks.claude_code",
    "codex": "loopwatch.hooks.codex",
    "gemini": "loopwatch.hooks.gemini",
    "cursor": "loopwatch.hooks.cursor",
    "opencode": "loopwatch.hooks.opencode",
    "openhands": "loopwatch.hooks.openhands",
}
#: A byte order mark some hosts put before the payload (read as UTF-8, it is U+FEFF).
BOM: Final = "\ufeff"
#: Read at most this much of stdin: tool outputs can be large, but not unbounded.
MAX_PAYLOAD_BYTES: Final = 64 << 20
#: What a payload over ``MAX_PAYLOAD_BYTES`` is read as: :func:`run_hook` allows the call
#: and logs why, rather than parse the cut-off text as broken JSON (the entry script,
#: :mod:`loopwatch._hook_client`, mirrors both).
OVERSIZED: Final = "\x00loopwatch: the payload is over the read limit"


def read_payload(stream: BinaryIO) -> str:
    """At most ``MAX_PAYLOAD_BYTES`` of ``stream`` as text (bytes that are not UTF-8 as
    U+FFFD), else :data:`OVERSIZED`."""
    data = stream.read(MAX_PAYLOAD_BYTES + 1)
    if len(data) > MAX_PAYLOAD_BYTES:
        return OVERSIZED
    return data.decode("utf-8", errors="replace")


#: The answer for an agent loopwatch does not know: nothing on stdout, exit 0.
UNKNOWN_AGENT: Final = HookResult("", 0)


def agent_module(agent: str) -> ModuleType:
    """The module of one agent (imported on first use: a hook process needs one).

    Raises:
        ValueError: an agent not in :data:`AGENTS`.
    """
    name = _MODULES.get(agent)
    if name is None:
        raise ValueError(f"unknown agent {agent!r}: expected one of {', '.join(AGENTS)}")
    return importlib.import_module(name)


def fail_open_result(agent: str) -> HookResult:
    """What to answer when loopwatch itself cannot decide: the host's "no opinion"."""
    try:
        result: HookResult = agent_module(agent).FAIL_OPEN
        return result
    except ValueError:
        return UNKNOWN_AGENT


def run_hook(agent: str, payload_text: str, guard: LoopGuard) -> HookResult:
    """Handle one hook event of ``agent`` and answer in its contract; never raises.

    Args:
        agent: one of :data:`AGENTS`.
        payload_text: the JSON the host wrote to the hook's stdin.
        guard: the guard to consult (its store must be shared by every hook process of
            the session: see :func:`default_guard`).

    Returns:
        What to print (``stdout``, ``stderr``) and the exit code; exit 0 whatever happens,
        with the host's "no opinion" answer when loopwatch could not decide.
    """
    try:
        module = agent_module(agent)
    except ValueError as exc:
        logger.warning("loopwatch hook: %s", exc)
        return UNKNOWN_AGENT
    fallback: HookResult = module.FAIL_OPEN
    if payload_text == OVERSIZED:
        logger.warning(
            "loopwatch hook %s: the payload is over %d bytes, not read; allowing",
            agent,
            MAX_PAYLOAD_BYTES,
        )
        return fallback
    if payload_text.startswith(BOM):
        # cursor-agent writes a UTF-8 byte order mark before its JSON (DobermanCore/
        # Doberman-Core#576, from captured payloads); json.loads refuses one.
        payload_text = payload_text[len(BOM) :]
    try:
        payload = json.loads(payload_text)
    except RecursionError:
        # Nested deeper than the interpreter's stack (``[[[[...``): no host sends that.
        logger.warning("loopwatch hook %s: the payload is nested too deeply to read", agent)
        return fallback
    except (ValueError, TypeError) as exc:
        logger.warning("loopwatch hook %s: the payload is not JSON: %s", agent, exc)
        return fallback
    if not isinstance(payload, dict):
        logger.warning("loopwatch hook %s: the payload is not a JSON object", agent)
        return fallback
    try:
        if agent == "claude-code":
            from loopwatch.hooks import _cursor_origin as origin

            if origin.sent_by_cursor(payload):
                # Cursor runs Claude Code's hooks too: its payload, its answers, and its
                # own loopwatch hook (when installed) counts the call (see the module).
                agent, module = "cursor", agent_module("cursor")
                fallback = module.FAIL_OPEN
                if origin.cursor_hook_installed(payload):
                    return fallback
                payload = origin.as_cursor_payload(payload)
        from loopwatch.hooks._core import process

        event = module.parse(payload)
        outcome = process(
            agent,
            event,
            guard,
            remember_run=module.REMEMBER_RUN,
            compaction_check=module.COMPACTION_CHECK,
        )
        result: HookResult = module.render(event, outcome)
        return result
    except Exception as exc:
        logger.warning(
            "loopwatch hook %s failed: %s: %s", agent, type(exc).__name__, exc, exc_info=True
        )
        return fallback


def default_guard(
    store_url: str | None = None, config_file: str | None = None, profile: str | None = None
) -> LoopGuard:
    """The guard of the hook commands: detection on, adaptive profile, a shared store.

    Args:
        store_url: any :func:`~loopwatch.stores.url.store_from_url` URL; default
            ``LOOPWATCH_STORE``, else ``sqlite://`` in the user's state folder.
        config_file: an OpenClaw-style config (JSON5) with ``tools.loopDetection`` and a
            ``loopwatch`` block; its ``loopwatch.profile`` is used when ``profile`` is not
            given (the adaptive profile when the file names none).
        profile: ``"reference"`` or ``"adaptive"`` (default ``"adaptive"``).

    Raises:
        ConfigError: an invalid config file.
        ValueError: a bad store URL or profile.
        StoreError: the store cannot be opened.
    """
    from loopwatch.guard import LoopGuard
    from loopwatch.hooks._paths import store_url_or_default
    from loopwatch.stores.url import store_from_url

    if profile is not None and profile not in ("reference", "adaptive"):
        raise ValueError(f"profile must be 'reference' or 'adaptive', not {profile!r}")
    store = store_from_url(store_url_or_default(store_url))
    if config_file is None:
        chosen = profile or "adaptive"
        return LoopGuard({"enabled": True}, store=store, profile=chosen)  # type: ignore[arg-type]
    from loopwatch.config.files import load_config_file
    from loopwatch.config.openclaw import named_profile

    config = load_config_file(config_file)
    # The file's own profile when it names one (so the guard's notes say where the profile
    # came from); else the hooks' default, adaptive.
    from_file = profile or (None if named_profile(config) else "adaptive")
    return LoopGuard(openclaw_config=config, store=store, profile=from_file)  # type: ignore[arg-type]


__all__ = [
    "AGENTS",
    "MAX_PAYLOAD_BYTES",
    "OVERSIZED",
    "HookResult",
    "agent_module",
    "default_guard",
    "fail_open_result",
    "read_payload",
    "run_hook",
]
