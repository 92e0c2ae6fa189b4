"""``loopwatch mcp-proxy``: guard any MCP server by standing between it and its client.

::

    loopwatch mcp-proxy [--config FILE] [--agent ID] -- COMMAND [ARGS...]
    python -m loopwatch.integrations.mcp_proxy [--config FILE] -- COMMAND [ARGS...]

The proxy is an MCP server over stdio that starts the real server (``COMMAND``) as its
child and relays the newline-delimited JSON-RPC stream both ways. Every ``tools/call``
goes through a :class:`LoopGuard` first: a blocked call is answered by the proxy itself
with an ``isError`` result carrying the blocked message (the server never sees it), and an
emitted warning is appended to the server's result as one more text part, after the
original result was recorded (SPEC §11.2). ``tools/list`` answers teach the proxy the
server's tools, so a failed call of a tool the server does not have is recorded as an
unknown-tool failure (SPEC §3.5). Everything else (initialisation, resources, prompts,
notifications, server-to-client requests, lines that are not JSON) passes through
byte for byte, so the proxy works with every protocol revision. Logs go to stderr only:
stdout carries the protocol. This module is the message logic; the process half (framing
lines of any size, back-pressure, signals, exit status, the server's process group) is
:mod:`loopwatch.cli._mcp_proxy`, whose docstring and SECURITY.md state its promises.

One proxy process is one session (``--session``, default ``mcp-proxy``); the guard
lives in memory. Without ``--config`` detection is on with the reference defaults
(``{"enabled": true}``); a config file is a whole OpenClaw-style JSON5 config whose
``tools.loopDetection`` block (merged with ``agents.list[].tools.loopDetection`` for
``--agent``) applies, with its ``loopwatch`` block (profile, adaptive settings), read as
``LoopGuard(openclaw_config=...)`` reads it.

``--on-critical end_run`` answers a blocked call with a JSON-RPC error instead (MCP
clients raise it, which ends an unattended run). ``--shadow`` decides and logs but never
blocks; ``--no-warn-model`` leaves results unchanged.

MCP has no compaction event and the proxy does not see the model's messages, so it
neither arms the post-compaction guard nor runs the stream-level unknown-tool guard
(SPEC §5.7); hosts that compact their context should guard their agent loop itself (a
post-compaction abort would be answered with a JSON-RPC error, like ``end_run``).
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, TextIO

from loopwatch.adapter import (
    WARNING_SEPARATOR,
    AdapterOptions,
    OnCritical,
    Outcome,
    ToolCall,
    append_warning,
    render_for_model,
    unknown_tool_error,
)
from loopwatch.cli import _mcp_proxy as _process
from loopwatch.config.block import LoopDetectionConfig
from loopwatch.config.files import load_config_file
from loopwatch.detectors.compaction import PostCompactionLoopPersistedError
from loopwatch.errors import ConfigError, LoopDetectedError
from loopwatch.guard import LoopGuard
from loopwatch.host_outcome import content_text
from loopwatch.integrations._shared import check_adapter_arguments
from loopwatch.messages import (
    MCP_LOG_DETECTION_OFF,
)

logger = logging.getLogger("loopwatch.mcp_proxy")

PROG: Final = "loopwatch mcp-proxy"
DEFAULT_SESSION: Final = "mcp-proxy"
#: JSON-RPC error code of a call the proxy refused (the implementation-defined range).
LOOP_ERROR_CODE: Final = -32000
#: Longest line parsed and guarded (longer ones are relayed unparsed); see the process half.
MAX_MESSAGE_BYTES: Final = _process.MAX_MESSAGE_BYTES

Message = dict[str, Any]


def _dump(message: object) -> bytes:
    """A message as one JSON line, as compact as the server's own.

    Non-ASCII text stays raw UTF-8, except when the message holds a lone surrogate (a
    Node server emits ``"\\ud800"`` when it cuts a string mid-emoji): raw, it cannot be
    encoded, so the whole message is written with ASCII escapes, which keep it exactly.
    """
    text = json.dumps(message, ensure_ascii=False, separators=(",", ":"))
    try:
        data = text.encode("utf-8")
    except UnicodeEncodeError:
        data = json.dumps(message, ensure_ascii=True, separators=(",", ":")).encode("ascii")
    return data + b"\n"


def _request_id(rid: object) -> object:
    """A JSON-RPC id usable as a dict key (ids are strings or numbers), or ``None``."""
    return rid if isinstance(rid, (str, int, float)) and not isinstance(rid, bool) else None


def _parse(line: bytes) -> object:
    """The JSON value of a line, or ``None`` for a line that is not JSON (relayed as is)."""
    try:
        return json.loads(line)
    except (ValueError, RecursionError):
        return None


@dataclass
class Flow:
    """What one line from the client turns into: lines for the server, and the proxy's own
    answers for the client."""

    to_server: list[bytes] = field(default_factory=list)
    to_client: list[bytes] = field(default_factory=list)


class McpLoopProxy:
    """The proxy's message logic, separate from its pipes (so it can be tested alone).

    Args:
        guard: the guard.
        session_key: the session every call belongs to.
        agent_id: the agent, for ``openclaw_config`` per-agent blocks.
        options: :class:`AdapterOptions`.
    """

    def __init__(
        self,
        guard: LoopGuard,
        *,
        session_key: str = DEFAULT_SESSION,
        agent_id: str | None = None,
        options: AdapterOptions | None = None,
    ) -> None:
        self.guard = guard
        self.session_key = session_key
        self.agent_id = agent_id
        check_adapter_arguments(guard, agent_id=agent_id)
        if not isinstance(session_key, str) or not session_key.strip():
            # One fixed session for every call: anything else guards nothing.
            raise TypeError(f"session_key must be a non-blank str, not {session_key!r}")
        self.options = options or AdapterOptions()
        self.known_tools: set[str] | None = None
        self._calls: dict[object, ToolCall] = {}
        self._lists: dict[object, bool] = {}
        # Calls whose server answered "input required" (MCP 2026-07-28): the client
        # retries the same call with its answers, which continues this call.
        self._awaiting_input: dict[str, ToolCall] = {}

    # --- client -> server ------------------------------------------------------------------

    async def from_client(self, line: bytes) -> Flow:
        """Handle one line from the client."""
        message = _parse(line)
        if isinstance(message, list):
            return await self._client_batch(line, message)
        if not isinstance(message, dict):
            return Flow(to_server=[line])
        answer = await self._client_message(message)
        if answer is None:
            return Flow(to_server=[line])
        return Flow(to_client=[_dump(answer)])

    async def _client_batch(self, line: bytes, batch: list[Any]) -> Flow:
        forward: list[Any] = []
        answers: list[Message] = []
        for message in batch:
            answer = await self._client_message(message) if isinstance(message, dict) else None
            if answer is None:
                forward.append(message)
            else:
                answers.append(answer)
        flow = Flow()
        if forward:
            flow.to_server.append(line if len(forward) == len(batch) else _dump(forward))
        if answers:
            flow.to_client.append(_dump(answers))
        return flow

    async def _client_message(self, message: Message) -> Message | None:
        """The proxy's own answer to a client message, or ``None`` to forward it."""
        method = message.get("method")
        rid = _request_id(message.get("id"))
        if method == "notifications/cancelled":
            params = message.get("params")
            if isinstance(params, dict):
                self._calls.pop(_request_id(params.get("requestId")), None)
            return None
        if rid is None:
            return None
        params = message.get("params")
        params = params if isinstance(params, dict) else {}
        if method == "tools/list":
            self._lists[rid] = "cursor" not in params
            return None
        if method != "tools/call":
            return None
        raw_name = params.get("name")
        # A malformed call (no name, a name that is not a string, params that are not an
        # object) is still a call the server will answer: guarded under the name it has
        # (SPEC §5.1 normalises a missing one to "tool"), so repeating it cannot slip by.
        name: str = (
            raw_name if isinstance(raw_name, str) else "" if raw_name is None else str(raw_name)
        )
        arguments = params.get("arguments", {})
        if "inputResponses" in params or "requestState" in params:
            waiting = self._awaiting_input.pop(self._input_key(name, arguments), None)
            if waiting is not None:
                self._calls[rid] = waiting
            return None
        tc = ToolCall(
            self.guard,
            name,
            arguments,
            session_key=self.session_key,
            tool_call_id=str(rid),
            agent_id=self.agent_id,
            options=self.options,
        )
        try:
            await tc.astart()
        except LoopDetectedError as exc:
            return self._error(rid, str(exc), exc.verdict.detector, exc.verdict.count)
        if tc.blocked:
            return {
                "jsonrpc": "2.0",
                "id": message.get("id"),
                "result": {"content": [{"type": "text", "text": tc.message}], "isError": True},
            }
        self._calls[rid] = tc
        return None

    @staticmethod
    def _input_key(name: str, arguments: object) -> str:
        return name + "\x00" + render_for_model(arguments)

    @staticmethod
    def _error(rid: object, text: str, detector: object, count: object) -> Message:
        return {
            "jsonrpc": "2.0",
            "id": rid,
            "error": {
                "code": LOOP_ERROR_CODE,
                "message": text,
                "data": {"detector": detector, "count": count},
            },
        }

    # --- server -> client ------------------------------------------------------------------

    async def from_server(self, line: bytes) -> bytes:
        """Handle one line from the server; returns what the client gets."""
        message = _parse(line)
        if isinstance(message, list):
            changed = [await self._server_message(m) if isinstance(m, dict) else m for m in message]
            same = all(new is old for new, old in zip(changed, message, strict=True))
            return line if same else _dump(changed)
        if not isinstance(message, dict):
            return line
        answer = await self._server_message(message)
        return line if answer is message else _dump(answer)

    async def _server_message(self, message: Message) -> Message:
        """The message for the client: ``message`` itself, or a changed copy."""
        if "method" in message:
            return message
        rid = _request_id(message.get("id"))
        if rid in self._lists:
            self._learn_tools(message, fresh=self._lists.pop(rid))
            return message
        tc = self._calls.pop(rid, None)
        if tc is None:
            return message
        result = message.get("result")
        if isinstance(result, dict) and result.get("resultType") == "input_required":
            self._awaiting_input[self._input_key(tc.tool_name, tc.params)] = tc
            return message
        return await self._finish(tc, message, rid)

    def _learn_tools(self, message: Message, *, fresh: bool) -> None:
        result = message.get("result")
        tools = result.get("tools") if isinstance(result, dict) else None
        if not isinstance(tools, list):
            return
        names = {t["name"] for t in tools if isinstance(t, dict) and isinstance(t.get("name"), str)}
        self.known_tools = names if fresh or self.known_tools is None else self.known_tools | names

    def _failure(self, name: str, text: str) -> str:
        if self.known_tools is not None and name not in self.known_tools:
            return unknown_tool_error(name, text)
        return text

    async def _finish(self, tc: ToolCall, message: Message, rid: object) -> Message:
        """Record the server's answer (SPEC §11.1), then append an emitted warning."""
        result = message.get("result")
        error = message.get("error")
        if isinstance(error, dict) or "result" not in message:
            text = str(error.get("message", "")) if isinstance(error, dict) else str(error)
            tc.error(self._failure(tc.tool_name, text))
        elif isinstance(result, dict) and result.get("isError") is True:
            tc.error(self._failure(tc.tool_name, content_text(result.get("content"))))
        else:
            tc.outcome(Outcome(result=result))
        try:
            await tc.afinish()
        except PostCompactionLoopPersistedError as exc:
            return self._error(message.get("id"), str(exc), exc.detector, exc.count)
        warning = tc.warning
        if warning is None:
            return message
        if isinstance(error, dict):
            text = f"{error.get('message', '')}{WARNING_SEPARATOR}{warning}"
            return {**message, "error": {**error, "message": text}}
        if isinstance(result, dict):
            return {**message, "result": append_warning(result, warning)}
        return message


# --- the process ---------------------------------------------------------------------------


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG,
        usage=f"{PROG} [options] -- COMMAND [ARGS...]",
        description="Guard an MCP server (started as COMMAND) against tool-call loops.",
    )
    parser.add_argument("--config", metavar="FILE", help="an OpenClaw-style JSON5 config")
    parser.add_argument("--agent", metavar="ID", help="the agent whose config block applies")
    parser.add_argument("--session", metavar="KEY", default=DEFAULT_SESSION, help="the session key")
    parser.add_argument(
        "--on-critical",
        choices=("block_call", "end_run", "recover"),
        default="block_call",
        help="answer a blocked call with an isError result (default), a JSON-RPC error "
        "(end_run), or a recovery message first and a JSON-RPC error at the run's second "
        "critical (recover)",
    )
    parser.add_argument(
        "--no-warn-model",
        dest="warn_model",
        action="store_false",
        help="do not append emitted warnings to results",
    )
    parser.add_argument("--shadow", action="store_true", help="decide and log, never block")
    parser.add_argument(
        "--max-message-bytes",
        type=_positive(int),
        default=_process.MAX_MESSAGE_BYTES,
        metavar="N",
        help="longest line parsed and guarded; longer lines are relayed unparsed "
        f"(default {_process.MAX_MESSAGE_BYTES})",
    )
    parser.add_argument(
        "--eof-timeout",
        type=_positive(float),
        default=_process.EOF_TIMEOUT_S,
        metavar="SECONDS",
        help="how long the server may run on after the client closed stdin "
        f"(default {_process.EOF_TIMEOUT_S:g})",
    )
    parser.add_argument(
        "--log-level",
        default="WARNING",
        choices=("DEBUG", "INFO", "WARNING", "ERROR"),
        help="stderr log level (default WARNING)",
    )
    return parser


def _split(argv: Sequence[str]) -> tuple[list[str], list[str]]:
    if "--" not in argv:
        return list(argv), []
    at = list(argv).index("--")
    return list(argv[:at]), list(argv[at + 1 :])


def _guard(args: argparse.Namespace) -> LoopGuard:
    if args.config is None:
        return LoopGuard(LoopDetectionConfig(enabled=True), enforce=not args.shadow)
    # The whole file, as LoopGuard(openclaw_config=...), scan and the hooks read it: a
    # block alone (LoopDetectionConfig.from_file) would drop the loopwatch.adaptive settings.
    guard = LoopGuard(openclaw_config=load_config_file(args.config), enforce=not args.shadow)
    if not guard.settings.block_for(args.agent)[1].enabled:
        logger.warning(MCP_LOG_DETECTION_OFF.format(path=args.config))
    return guard


def _positive(kind: type[float] | type[int]) -> Callable[[str], Any]:
    def parse(text: str) -> float | int:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
        if not value > 0:
            raise argparse.ArgumentTypeError(f"must be positive: {text!r}")
        return value

    return parse


def _configure_logging(level: str, stream: TextIO) -> Callable[[], None]:
    """Send loopwatch's log lines to ``stream`` (stderr: stdout carries the protocol).

    Returns the undo: ``main`` restores the logger when it returns, so a proxy run in a
    process that goes on (a test, an embedding host) leaves no handler on a stream that
    may be closed by then.
    """
    root = logging.getLogger("loopwatch")
    for old in [h for h in root.handlers if getattr(h, "loopwatch_mcp_proxy", False)]:
        root.removeHandler(old)
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logging.Formatter("%(name)s %(levelname)s %(message)s"))
    handler.loopwatch_mcp_proxy = True  # type: ignore[attr-defined]
    previous = root.level
    root.addHandler(handler)
    root.setLevel(level)

    def undo() -> None:
        root.removeHandler(handler)
        root.setLevel(previous)

    return undo


def main(argv: list[str]) -> int:
    """Run the proxy until the server exits; returns the server's exit code.

    Args:
        argv: the arguments after ``mcp-proxy``: options, ``--``, the server command.

    Returns:
        The server's exit code (``128 + n`` when signal ``n`` ended it); ``128 + n`` when
        the proxy itself got signal ``n`` (130 for SIGINT, 143 for SIGTERM); 2 for bad
        arguments or config; 127 when the server cannot be started. See
        :mod:`loopwatch.cli._mcp_proxy` for the lifecycle.
    """
    parser = _parser()
    options, command = _split(argv)
    try:
        args = parser.parse_args(options)
    except SystemExit as exc:  # --help, or a bad option (argparse printed why)
        return exc.code if isinstance(exc.code, int) else 2
    if not command:
        parser.print_usage(sys.stderr)
        print(f"{PROG}: error: missing -- COMMAND [ARGS...]", file=sys.stderr)
        return 2
    restore_logging = _configure_logging(args.log_level, sys.stderr)
    try:
        try:
            guard = _guard(args)
        except ConfigError as exc:
            print(f"{PROG}: error: {args.config}: {exc}", file=sys.stderr)
            return 2
        on_critical: OnCritical = args.on_critical
        try:
            proxy = McpLoopProxy(
                guard,
                session_key=args.session,
                agent_id=args.agent,
                options=AdapterOptions(warn_model=args.warn_model, on_critical=on_critical),
            )
        except TypeError as exc:  # --session "": a session that would guard nothing
            print(f"{PROG}: error: --session: {exc}", file=sys.stderr)
            return 2
        return _process.run(args, command, proxy)
    finally:
        restore_logging()


__all__ = ["DEFAULT_SESSION", "LOOP_ERROR_CODE", "Flow", "McpLoopProxy", "main"]

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
