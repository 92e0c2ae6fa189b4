"""``loopwatch hook <agent>`` and ``loopwatch hook status``.

``hook <agent>`` is run by the agent itself, once per event, with the event on stdin. It
must never get in the agent's way: whatever happens (a bad flag, a broken store, bad
JSON) it exits 0 with the host's "no opinion" answer and writes its diagnostics to the
log file in the state folder, never a traceback into the agent (for Gemini CLI any exit
code but 0 and 1 would block the call). It also starts fast: only what one event needs
is imported, and when a ``loopwatch serve`` runs with the same options the event is
answered there, before anything heavy of loopwatch is imported (the warm path:
:func:`_try_serve`, which loads only the light client :mod:`loopwatch.serve`).

``hook status`` is for people: what the guard saw of a session (its records, warning
buckets and post-compaction guard), or the sessions the store holds.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    import argparse

STATUS: Final = "status"
#: The log file is started afresh (the old one kept as ``.1``) beyond this size.
MAX_LOG_BYTES: Final = 1 << 20
_LOG_FORMAT: Final = "%(asctime)s %(process)d %(name)s %(levelname)s %(message)s"
#: Read at most this much of stdin: tool outputs can be large, but not unbounded.
MAX_PAYLOAD_BYTES: Final = 64 << 20


#: The flags of an agent event that take a value (the warm path reads them without argparse).
_VALUE_FLAGS: Final = ("--store", "--config", "--profile")


class _ArgumentError(Exception):
    """A usage error of ``hook`` (argparse would exit 2: a block for Gemini CLI)."""


def build_parser() -> argparse.ArgumentParser:
    """The parser of ``loopwatch hook ...`` (its errors raise instead of exiting)."""
    import argparse
    from typing import NoReturn

    from loopwatch.hooks import AGENTS

    class _Parser(argparse.ArgumentParser):
        def error(self, message: str) -> NoReturn:
            raise _ArgumentError(message)

    parser = _Parser(
        prog="loopwatch hook",
        description=(
            "Guard one event of a coding agent: the event comes as JSON on stdin, the "
            "answer goes to stdout in the agent's own format. Run by the agent's hook "
            "settings (see 'loopwatch install'). 'loopwatch hook status' shows what the "
            "guard saw."
        ),
    )
    parser.add_argument("agent", metavar="AGENT", help=f"{', '.join(AGENTS)}, or {STATUS}")
    parser.add_argument(
        "--store",
        metavar="URL",
        help="sqlite:///file.db or redis://... (default: $LOOPWATCH_STORE, else SQLite in "
        "the state folder)",
    )
    parser.add_argument("--config", metavar="FILE", help="an OpenClaw-style config (JSON5)")
    parser.add_argument("--profile", choices=("reference", "adaptive"), help="default adaptive")
    parser.add_argument(
        "--session",
        metavar="ID",
        help="status: the agent's session id (a sub-agent's calls: ID/AGENT_ID)",
    )
    parser.add_argument(
        "--agent", dest="status_agent", metavar="AGENT", help="status: the session's agent"
    )
    parser.add_argument("--json", action="store_true", help="status: print JSON")
    return parser


def _setup_log() -> None:
    """Send loopwatch's log lines to the state folder's file (never to the agent)."""
    import logging

    from loopwatch.hooks._paths import log_path

    path = log_path()
    try:
        os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
        if os.path.exists(path) and os.stat(path).st_size > MAX_LOG_BYTES:
            os.replace(path, path + ".1")
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600))
        handler: logging.Handler = logging.FileHandler(path, encoding="utf-8", delay=True)
    except OSError:
        return  # no log then; the hook still answers
    handler.setFormatter(logging.Formatter(_LOG_FORMAT))
    root = logging.getLogger("loopwatch")
    root.addHandler(handler)
    root.setLevel(logging.INFO)


def _read_stdin() -> str:
    from loopwatch.hooks import read_payload

    return read_payload(sys.stdin.buffer)


def _emit(stdout: str, stderr: str = "") -> None:
    try:
        if stdout:
            sys.stdout.write(stdout if stdout.endswith("\n") else stdout + "\n")
            sys.stdout.flush()
        if stderr:
            sys.stderr.write(stderr if stderr.endswith("\n") else stderr + "\n")
            sys.stderr.flush()
    except (OSError, ValueError):
        pass  # the agent closed the pipe: nothing left to tell it


def _event_flags(arguments: Sequence[str]) -> dict[str, str | None] | None:
    """The value flags of a plain agent event (``AGENT [--store X] ...``), read without
    argparse (a few milliseconds of a hook to import and build).

    ``None`` for anything unusual (no agent, an unknown or abbreviated flag, ``--help``):
    the full parser decides then, so the two never disagree on a command line.
    """
    if not arguments or arguments[0].startswith("-"):
        return None
    values: dict[str, str | None] = dict.fromkeys(_VALUE_FLAGS)
    rest = list(arguments[1:])
    while rest:
        flag = rest.pop(0)
        name, equals, value = flag.partition("=")
        if name not in values:
            return None
        if not equals:
            if not rest:
                return None
            value = rest.pop(0)
        values[name] = value
    if values["--profile"] not in (None, "reference", "adaptive"):
        return None
    return values


def _quick_options(arguments: Sequence[str]) -> tuple[str, dict[str, str | None]] | None:
    """``(agent, hook options)`` of a plain agent event (see :func:`_event_flags`)."""
    values = _event_flags(arguments)
    if values is None:
        return None
    from loopwatch.serve import hook_options

    options = hook_options(values["--store"], values["--config"], values["--profile"])
    return arguments[0], options


def _plain_event(arguments: Sequence[str]) -> Any:
    """The parsed arguments of a plain agent event (argparse's names), else ``None``."""
    values = _event_flags(arguments)
    if values is None:
        return None
    from types import SimpleNamespace

    return SimpleNamespace(
        agent=arguments[0],
        store=values["--store"],
        config=values["--config"],
        profile=values["--profile"],
    )


def _try_serve(arguments: Sequence[str], payload: str) -> tuple[str, int, str] | None:
    """The answer of a running ``loopwatch serve`` with this hook's options, else ``None``."""
    try:
        quick = _quick_options(arguments)
        if quick is None:
            return None
        from loopwatch.serve import try_hook

        agent, options = quick
        return try_hook(agent, payload, options=options)
    except Exception:  # the warm path is an optimisation: any doubt, run in-process
        return None


def _run_agent(agent: str, args: argparse.Namespace, payload: str | None) -> int:
    import logging

    from loopwatch.hooks import default_guard, fail_open_result, run_hook

    log = logging.getLogger("loopwatch.hooks")
    fallback = fail_open_result(agent)
    if payload is None:
        try:
            payload = _read_stdin()
        except (OSError, ValueError) as exc:
            log.warning("loopwatch hook %s: cannot read stdin: %s", agent, exc)
            _emit(fallback.stdout)
            return 0
    try:
        try:
            guard = default_guard(args.store, args.config, args.profile)
        except ImportError:
            # Started with ``python -S`` (the installed command): a JSON5 config or a
            # Redis store needs site-packages; load ``site`` and try once more.
            if "site" in sys.modules:
                raise
            import site

            site.main()
            guard = default_guard(args.store, args.config, args.profile)
    except Exception as exc:
        # A broken store or config: allow the call, say why in the log.
        log.error("loopwatch hook %s: no guard (%s: %s); allowing", agent, type(exc).__name__, exc)
        _emit(fallback.stdout)
        return 0
    try:
        result = run_hook(agent, payload, guard)
    finally:
        try:
            guard.store.close()
        except Exception as exc:  # closing must not change the answer
            log.warning("loopwatch hook: closing the store failed: %s", exc)
    _emit(result.stdout, result.stderr)
    return result.exit_code


def main(argv: Sequence[str], *, payload: str | None = None, try_server: bool = True) -> int:
    """Run ``loopwatch hook ...``; for an agent event, exit 0 whatever happens.

    ``payload`` is the event when the caller already read stdin (the installed command,
    :mod:`loopwatch._hook_client`, which also asked the server already: ``try_server``
    false).
    """
    arguments = list(argv)
    if arguments and arguments[0] == STATUS:
        return status_main(arguments)
    asks_help = bool({"-h", "--help"} & set(arguments))
    if payload is None and arguments and not arguments[0].startswith("-") and not asks_help:
        try:
            payload = _read_stdin()
        except (OSError, ValueError):
            payload = None  # read again (and logged) by the in-process path
    if payload is not None and try_server:
        warm = _try_serve(arguments, payload)
        if warm is not None:
            _emit(warm[0], warm[2])
            return warm[1]
    import logging

    _setup_log()
    log = logging.getLogger("loopwatch.hooks")
    agent = arguments[0] if arguments and not arguments[0].startswith("-") else ""
    try:
        args = _plain_event(arguments) or build_parser().parse_args(arguments)
    except _ArgumentError as exc:
        log.error("loopwatch hook: %s (arguments %r); allowing", exc, arguments)
        from loopwatch.hooks import fail_open_result

        _emit(fail_open_result(agent).stdout, f"loopwatch hook: {exc}")
        return 0
    except SystemExit as exc:  # --help
        return exc.code if isinstance(exc.code, int) else 0
    try:
        return _run_agent(args.agent, args, payload)
    except BaseException as exc:  # the last line of defence: never a traceback
        if isinstance(exc, KeyboardInterrupt):
            return 0
        log.error("loopwatch hook %s crashed: %s", args.agent, exc, exc_info=True)
        from loopwatch.hooks import fail_open_result

        _emit(fail_open_result(args.agent).stdout)
        return 0


# --- status -------------------------------------------------------------------------------


def status_main(arguments: list[str]) -> int:
    """``loopwatch hook status``: exit 0, or 2 on a usage or store error."""
    from loopwatch.cli._text import write

    try:
        args = build_parser().parse_args(arguments)
    except _ArgumentError as exc:
        write(sys.stderr, f"loopwatch hook status: error: {exc}\n")
        return 2
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else 0
    from loopwatch.hooks._paths import store_url_or_default
    from loopwatch.stores.base import StoreError
    from loopwatch.stores.url import store_from_url

    url = store_url_or_default(args.store)
    try:
        store = store_from_url(url)
    except (StoreError, ValueError, TypeError, ImportError) as exc:
        write(sys.stderr, f"loopwatch hook status: error: cannot open {url}: {exc}\n")
        return 2
    try:
        document = _status(store, url, args)
    except StoreError as exc:
        write(sys.stderr, f"loopwatch hook status: error: {exc}\n")
        return 2
    finally:
        store.close()
    if args.json:
        import json

        write(sys.stdout, json.dumps(document, indent=2, ensure_ascii=False) + "\n")
    else:
        write(sys.stdout, _render(document))
    return 0


def _status(store: Any, url: str, args: argparse.Namespace) -> dict[str, Any]:
    now = time.time()
    document: dict[str, Any] = {"store": url}
    if args.session is None:
        lister = getattr(store, "session_keys", None)
        if lister is None:
            document["sessions"] = None  # this store cannot list them: name one
            return document
        document["sessions"] = [
            {"session_key": key, "records": len(store.history(key, now)), "touched": touched}
            for key, touched in lister(now)
        ]
        return document
    key = f"{args.status_agent}:{args.session}" if args.status_agent else args.session
    history = store.history(key, now)
    runs = list(dict.fromkeys(record.run_id for record in history))
    document["session_key"] = key
    document["records"] = [
        {
            "tool": record.tool_name,
            "tool_call_id": record.tool_call_id,
            "run_id": record.run_id,
            "outcome": None if record.result_hash is None else record.result_hash[:16],
        }
        for record in history
    ]
    buckets = getattr(store, "warning_buckets", None)
    document["warning_buckets"] = buckets(key, now) if buckets is not None else None
    document["guards"] = {}
    for run in runs:
        snapshot = store.guard_snapshot(key, run, now)
        verdict = store.last_guard_verdict(key, run, now)
        document["guards"][str(run)] = {
            "armed": snapshot.armed,
            "remaining_attempts": snapshot.remaining_attempts,
            "last_abort": None if verdict is None or not verdict.should_abort else verdict.message,
        }
    return document


def _render(document: dict[str, Any]) -> str:
    from loopwatch.cli._text import safe_text

    lines = [f"store: {safe_text(document['store'])}"]
    if "session_key" not in document:
        sessions = document["sessions"]
        if sessions is None:
            lines.append("this store cannot list its sessions: pass --session ID [--agent NAME]")
        elif not sessions:
            lines.append("no sessions")
        else:
            lines.append(f"{len(sessions)} sessions (newest first):")
            for item in sessions:
                stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(item["touched"]))
                lines.append(
                    f"  {safe_text(item['session_key'])}  {item['records']} records  "
                    f"last call {stamp}"
                )
        return "\n".join(lines) + "\n"
    records = document["records"]
    lines.append(f"session: {safe_text(document['session_key'])}, {len(records)} records")
    for index, item in enumerate(records, 1):
        outcome = item["outcome"] or "pending"
        run = f" run {safe_text(item['run_id'])}" if item["run_id"] else ""
        call = f" id {safe_text(item['tool_call_id'])}" if item["tool_call_id"] else ""
        lines.append(f"  {index:>4}. {safe_text(item['tool'])}{call}{run}  outcome {outcome}")
    buckets = document["warning_buckets"] or {}
    if buckets:
        lines.append("warnings given (key: bucket):")
        lines.extend(f"  {safe_text(key)}: {bucket}" for key, bucket in buckets.items())
    for run, guard in document["guards"].items():
        if guard["armed"] or guard["last_abort"]:
            lines.append(
                f"post-compaction guard of run {safe_text(run)}: "
                f"{'armed' if guard['armed'] else 'idle'}, "
                f"{guard['remaining_attempts']} attempts left"
            )
            if guard["last_abort"]:
                lines.append(f"  aborted: {safe_text(guard['last_abort'])}")
    return "\n".join(lines) + "\n"


__all__ = ["build_parser", "main", "status_main"]
