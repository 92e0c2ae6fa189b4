"""The ``loopwatch`` command line (dependency-free: argparse and plain text).

Commands:

- ``loopwatch scan PATH...``: replay recorded agent runs through ``LoopGuard`` and show
  where it would have warned, blocked or aborted, and what the loop wasted
  (``--json``, ``--html FILE``, ``--sweep``, ``--fail-on``).
- ``loopwatch config check FILE [--agent ID]``: validate a config, show the effective values.
- ``loopwatch mcp-proxy ...``: run the MCP proxy (``loopwatch.integrations.mcp_proxy``).
- ``loopwatch serve``: keep one guard warm behind a unix socket / localhost HTTP.
- ``loopwatch install AGENT`` / ``uninstall AGENT``: add or remove the hook entries.
- ``loopwatch hook AGENT`` / ``loopwatch hook status``: the coding agents' hook command
  (``loopwatch.cli._hook``).

Exit codes: 0 everything scanned (or the config is valid); 1 ``--fail-on`` found a run that
warned / blocked; 2 a usage or config error; 3 some file was skipped; 4 a file was read as a
transcript but yielded no tool calls, or tool results that match no call (nothing, or not
everything, was checked: never a silent all-clear). When several apply, the lowest of 1, 3,
4 wins: a finding is definite, a skipped file is a bigger doubt than a misread one.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Final, TextIO

from loopwatch import __version__
from loopwatch.config.files import load_config_file
from loopwatch.config.merge import merge_agent_config
from loopwatch.errors import ConfigError
from loopwatch.transcripts import FORMATS, FormatName, Run
from loopwatch.transcripts.detect import DEFAULT_MAX_FILE_BYTES, walk_transcripts

from ._config_check import check_json, render_check, render_errors
from ._html import render_html
from ._install import add_install_parsers
from ._progress import Progress, wants_progress
from ._scan import (
    EXIT_OK,
    EXIT_USAGE,
    ScanResult,
    ScanSetup,
    UsageError,
    describe_setup,
    load_setup,
    scan,
)
from ._scan_report import header_line, render_json, render_table, setup_json, skipped_json
from ._serve import add_serve_parser
from ._sweep import parse_sweep, render_sweep, run_sweep, sweep_json
from ._text import safe_text, write

PROXY_MODULE: Final = "loopwatch.integrations.mcp_proxy"


def _error(message: str) -> None:
    write(sys.stderr, f"loopwatch: error: {message}\n")


def _config_error(error: ConfigError, path: str) -> int:
    write(sys.stderr, render_errors(path, error))
    return EXIT_USAGE


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of every command (``mcp-proxy`` is dispatched before it)."""
    parser = argparse.ArgumentParser(
        prog="loopwatch",
        description="Detect and stop tool-call loops in LLM agents.",
    )
    parser.add_argument("--version", action="version", version=f"loopwatch {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")

    scan_parser = commands.add_parser(
        "scan",
        help="replay recorded agent runs and show where loops would be caught",
        description=(
            "Replay every tool call of recorded agent runs through LoopGuard and show where "
            "it would have warned, blocked or aborted. Without --config the reference "
            "defaults run with enabled: true."
        ),
    )
    scan_parser.add_argument("paths", nargs="+", metavar="PATH", help="files or folders")
    scan_parser.add_argument("--config", metavar="FILE", help="an OpenClaw config (JSON5/JSON)")
    scan_parser.add_argument("--agent", metavar="ID", help="apply this agent's override")
    scan_parser.add_argument(
        "--profile", choices=("reference", "adaptive"), help="the loopwatch profile"
    )
    scan_parser.add_argument(
        "--format", choices=FORMATS, help="read every file as this format (default: detect)"
    )
    scan_parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    scan_parser.add_argument("--html", metavar="FILE", help="also write a self-contained report")
    scan_parser.add_argument(
        "--sweep",
        metavar="SPEC",
        help=(
            "replay under each combination, e.g. warningThreshold=5:20:5,criticalThreshold=10:40:10"
        ),
    )
    scan_parser.add_argument(
        "--fail-on",
        choices=("warn", "block"),
        help="exit 1 when any run warned (warn) or was blocked or aborted (block)",
    )
    scan_parser.add_argument(
        "--flagged", action="store_true", help="list only files (runs) with findings"
    )
    scan_parser.add_argument(
        "--runs", action="store_true", help="one row per run instead of one per file"
    )
    scan_parser.add_argument(
        "--jobs", type=_positive, default=1, metavar="N", help="read N files in parallel processes"
    )
    scan_parser.add_argument(
        "--max-file-size",
        type=_positive,
        default=DEFAULT_MAX_FILE_BYTES // (1024 * 1024),
        metavar="MIB",
        help="skip files bigger than this (default %(default)s MiB)",
    )
    scan_parser.add_argument(
        "--no-excerpts",
        action="store_true",
        help="leave the excerpt of the repeated error/result out of --html and --json",
    )
    scan_parser.add_argument("--no-progress", action="store_true", help="never draw a progress bar")
    scan_parser.set_defaults(handler=_cmd_scan)

    config_parser = commands.add_parser("config", help="work with config files")
    config_commands = config_parser.add_subparsers(dest="config_command", metavar="SUBCOMMAND")
    check_parser = config_commands.add_parser(
        "check", help="validate a config and print the effective values"
    )
    check_parser.add_argument("file", metavar="FILE")
    check_parser.add_argument("--agent", metavar="ID", help="show this agent's merged values")
    check_parser.add_argument("--json", action="store_true", help="print JSON")
    check_parser.set_defaults(handler=_cmd_config_check)

    commands.add_parser(
        "hook",
        help="guard one event of a coding agent (stdin JSON; 'hook status' shows a session)",
        add_help=False,
    )
    commands.add_parser(
        "mcp-proxy",
        help="run the loop-guarding MCP proxy (arguments are passed on)",
        add_help=False,
    )
    add_serve_parser(commands)
    add_install_parsers(commands)
    return parser


# --- scan --------------------------------------------------------------------------------


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value


def _sweep_base(setup: ScanSetup) -> dict[str, object]:
    if setup.settings.openclaw_config is not None:
        return merge_agent_config(setup.settings.openclaw_config, setup.agent_id) or {}
    return dict(setup.settings.config or {})


def _run_sweep(args: argparse.Namespace, setup: ScanSetup, result: ScanResult) -> int:
    try:
        axes = parse_sweep(args.sweep)
    except ValueError as exc:
        _error(f"--sweep: {exc}")
        return EXIT_USAGE
    runs: list[Run] = [replay.run for _path, replay in result.replays]
    total = 1
    for axis in axes:
        total *= len(axis.values)
    progress = Progress(
        sys.stderr,
        total,
        unit="settings",
        enabled=wants_progress(sys.stderr, total, disabled=args.no_progress),
    )
    rows = run_sweep(
        runs,
        _sweep_base(setup),
        axes,
        profile=setup.profile,
        adaptive=setup.adaptive,
        progress=progress,
    )
    progress.close()
    if args.json:
        import json

        document = {
            "loopwatch": __version__,
            "config": setup_json(setup),
            "sweep": sweep_json(rows),
            "skipped": skipped_json(result.skipped),
        }
        write(sys.stdout, json.dumps(document, indent=2, ensure_ascii=False) + "\n")
    else:
        header = [
            header_line(result, "loopwatch scan --sweep"),
            # The swept thresholds replace the fixed ones in the header.
            *(line for line in describe_setup(setup) if not line.startswith("thresholds:")),
            "",
        ]
        write(sys.stdout, "\n".join(header) + "\n" + render_sweep(rows, axes))
    return result.exit_code(None)


def _cmd_scan(args: argparse.Namespace) -> int:
    if args.sweep is not None and args.html is not None:
        _error("--sweep and --html cannot be combined")
        return EXIT_USAGE
    if args.sweep is not None and args.fail_on is not None:
        _error("--sweep and --fail-on cannot be combined")
        return EXIT_USAGE
    try:
        setup = load_setup(args.config, args.agent, args.profile)
    except UsageError as exc:
        _error(str(exc))
        return EXIT_USAGE
    except ConfigError as exc:
        return _config_error(exc, args.config or "")
    except NotImplementedError as exc:
        _error(str(exc))
        return EXIT_USAGE

    found = walk_transcripts(args.paths)
    files = found.files
    format_name: FormatName | None = args.format
    progress = Progress(
        sys.stderr,
        len(files),
        unit="files",
        enabled=wants_progress(sys.stderr, len(files), disabled=args.no_progress),
    )
    reports, skipped, ignored = scan(
        files,
        setup,
        format=format_name,
        progress=progress,
        explicit=found.explicit,
        max_bytes=args.max_file_size * 1024 * 1024,
        jobs=args.jobs,
        keep_runs=args.sweep is not None,
    )
    progress.close()
    result = ScanResult(
        setup=setup,
        files=reports,
        skipped=(*found.problems, *skipped),
        ignored=(*found.ignored, *ignored),
    )
    for problem in result.skipped:
        write(sys.stderr, f"loopwatch: skipped {safe_text(str(problem))}\n")
    for report in result.doubtful:
        for doubt in report.doubts:
            write(sys.stderr, f"loopwatch: {safe_text(report.path)}: {safe_text(doubt)}\n")

    if args.sweep is not None:
        return _run_sweep(args, setup, result)

    if args.html is not None:
        try:
            Path(args.html).write_text(
                render_html(result, __version__, excerpts=not args.no_excerpts),
                encoding="utf-8",
                errors="backslashreplace",
            )
        except OSError as exc:
            _error(f"cannot write {args.html}: {exc.strerror or exc}")
            return EXIT_USAGE
        write(sys.stderr, f"loopwatch: report written to {safe_text(args.html)}\n")
    if args.json:
        write(sys.stdout, render_json(result, __version__, excerpts=not args.no_excerpts))
    else:
        write(sys.stdout, render_table(result, flagged_only=args.flagged, per_run=args.runs))
    return result.exit_code(args.fail_on)


# --- config check ------------------------------------------------------------------------


def _cmd_config_check(args: argparse.Namespace) -> int:
    if args.json:
        text, valid = check_json(args.file, args.agent)
        write(sys.stdout, text)
        return EXIT_OK if valid else EXIT_USAGE
    try:
        config = load_config_file(args.file)
    except ConfigError as exc:
        write(sys.stdout, render_errors(args.file, exc))
        return EXIT_USAGE
    write(sys.stdout, render_check(args.file, config, args.agent))
    return EXIT_OK


# --- mcp-proxy ---------------------------------------------------------------------------


def run_mcp_proxy(argv: Sequence[str]) -> int:
    """Hand the remaining arguments to ``loopwatch.integrations.mcp_proxy.main``.

    The module is imported only here, so the rest of the CLI never needs the ``mcp``
    package. A missing module or dependency is a clear error with exit code 2.
    """
    try:
        module = importlib.import_module(PROXY_MODULE)
    except ModuleNotFoundError as exc:
        missing = exc.name or ""
        if missing == PROXY_MODULE or PROXY_MODULE.startswith(missing + "."):
            _error(
                "mcp-proxy is not available in this installation "
                f"(the module {PROXY_MODULE} is missing)"
            )
        else:
            _error(
                f"mcp-proxy needs the optional dependency {missing!r}: pip install 'loopwatch[mcp]'"
            )
        return EXIT_USAGE
    entry = getattr(module, "main", None)
    if not callable(entry):
        _error(f"{PROXY_MODULE} has no main(argv) function")
        return EXIT_USAGE
    code = entry(list(argv))
    return code if isinstance(code, int) else EXIT_OK


# --- entry point -------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    """Run the ``loopwatch`` command.

    Args:
        argv: the arguments after the program name (default: ``sys.argv[1:]``).

    Returns:
        The exit code (argparse's own exits, such as ``--help``, are returned, not raised).
    """
    arguments = list(sys.argv[1:] if argv is None else argv)
    if arguments and arguments[0] == "mcp-proxy":
        return run_mcp_proxy(arguments[1:])
    if arguments and arguments[0] == "hook":
        from ._hook import main as hook_main

        return hook_main(arguments[1:])
    parser = build_parser()
    try:
        args = parser.parse_args(arguments)
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else EXIT_OK if exc.code is None else 2
    handler = getattr(args, "handler", None)
    if handler is None:
        stream: TextIO = sys.stderr
        parser.print_help(stream)
        return EXIT_USAGE
    code: int = handler(args)
    return code


__all__ = ["main", "run_mcp_proxy"]
