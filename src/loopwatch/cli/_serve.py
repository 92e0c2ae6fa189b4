"""``loopwatch serve``: keep one guard warm for hook processes and agents in any language.

The server logic is :mod:`loopwatch.serve`; this module parses the arguments, builds the
guard the way the hooks do (``loopwatch.hooks.default_guard``: the adaptive profile on the
SQLite store in the state directory unless told otherwise) and reports start-up errors with
exit code 2.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import sys
from typing import Any, Final

from loopwatch.errors import ConfigError

from ._text import safe_text, write

EXIT_OK: Final = 0
EXIT_USAGE: Final = 2
HOOKS_MODULE: Final = "loopwatch.hooks"

MSG_NO_HOOKS: Final = (
    "serve needs the loopwatch.hooks module (default_guard), missing from this installation"
)
MSG_BAD_PORT: Final = "--http must be a port between 0 and 65535 (0 picks a free one)"


def add_serve_parser(commands: Any) -> None:
    """Register ``serve`` on the CLI's sub-command parsers."""
    parser = commands.add_parser(
        "serve",
        help="keep one loop guard warm behind a unix socket (and optionally HTTP)",
        description=(
            "Serve the loopwatch JSON API (before_call, after_call, compaction_retry, "
            "history, health, hook) on a unix socket (mode 0600, in the state directory by "
            "default) and, with --http, on a localhost port that wants the token written "
            "to the state directory. Stops cleanly on SIGTERM or SIGINT. See docs/serve.md."
        ),
    )
    parser.add_argument("--socket", metavar="PATH", help="the unix socket (default: state dir)")
    parser.add_argument(
        "--http", metavar="PORT", type=int, help="also listen on 127.0.0.1:PORT (0: any port)"
    )
    parser.add_argument("--store", metavar="URL", help="sqlite:///FILE or redis://… store")
    parser.add_argument("--config", metavar="FILE", help="an OpenClaw config (JSON5/JSON)")
    parser.add_argument(
        "--profile", choices=("reference", "adaptive"), help="the loopwatch profile"
    )
    parser.set_defaults(handler=cmd_serve)


def _error(message: str) -> int:
    write(sys.stderr, f"loopwatch: error: {safe_text(message)}\n")
    return EXIT_USAGE


def _ready(text: str) -> None:
    # One line per address: safe_text escapes control characters, newlines included.
    write(sys.stderr, "".join(safe_text(line) + "\n" for line in text.splitlines()))
    sys.stderr.flush()


def cmd_serve(args: argparse.Namespace) -> int:
    """Run the server until a signal; 2 when it cannot start."""
    from loopwatch import _serve_server, serve

    if args.http is not None and not 0 <= args.http <= 65535:
        return _error(MSG_BAD_PORT)
    try:
        hooks = importlib.import_module(HOOKS_MODULE)
    except ImportError:
        return _error(MSG_NO_HOOKS)
    if not logging.getLogger().handlers:
        logging.basicConfig(level=logging.WARNING, format="%(name)s: %(message)s")

    def factory() -> Any:
        return hooks.default_guard(
            store_url=args.store, config_file=args.config, profile=args.profile
        )

    try:
        return _serve_server.run(
            factory,
            socket_path=os.path.abspath(args.socket or serve.default_socket_path()),
            http_port=args.http,
            token_path=serve.default_token_path(),
            on_ready=_ready,
            options=serve.hook_options(args.store, args.config, args.profile),
        )
    except serve.ServeError as exc:
        return _error(exc.message)
    except ConfigError as exc:
        return _error(f"{args.config or 'config'}: {exc}")
    except OSError as exc:
        return _error(f"cannot listen: {exc.strerror or exc}")
    except Exception as exc:  # a bad store URL or option: a start-up error, not a crash
        return _error(f"cannot start: {exc}")
