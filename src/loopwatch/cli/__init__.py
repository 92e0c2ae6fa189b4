"""The ``loopwatch`` command line; the commands themselves are in :mod:`loopwatch.cli._main`.

This package module stays light on purpose: ``loopwatch hook <agent>`` runs once per tool
call of a coding agent, and importing the scanners, readers and config machinery of the
other commands would cost every one of those calls. :func:`main` sends ``hook`` straight
to :mod:`loopwatch.cli._hook` (which asks a running ``loopwatch serve`` before loading the
guard) and everything else to the full command line; other names of the old module
(``build_parser``, ``PROXY_MODULE`` ...) are forwarded on first use.
"""

from __future__ import annotations

import sys
from typing import Any


def main(argv: list[str] | None = None) -> int:
    """Run the ``loopwatch`` command (see :func:`loopwatch.cli._main.main`)."""
    arguments = list(sys.argv[1:] if argv is None else argv)
    if arguments and arguments[0] == "hook":
        from loopwatch.cli._hook import main as hook_main

        return hook_main(arguments[1:])
    from loopwatch.cli._main import main as full_main

    return full_main(arguments)


def __getattr__(name: str) -> Any:
    # Private names are submodules (``from loopwatch.cli import _install`` imports it).
    if name.startswith("_"):
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module("loopwatch.cli._main"), name)


__all__ = ["main"]
