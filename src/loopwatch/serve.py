"""``loopwatch serve``: one warm :class:`~loopwatch.LoopGuard` for hook processes and agents.

Every coding-agent hook is a new process, which pays Python's start-up, loopwatch's imports
and the store's connection on each tool call. A server pays them once: the hook process (or
an agent written in any language) sends one JSON request over a unix socket and gets the
answer back. The wire protocol is in ``docs/serve.md``; in short, one JSON object per line::

    {"op": "before_call", "session_key": "s1", "tool_name": "exec", "params": {...}}
    {"ok": true, "op": "before_call", "result": {"action": "allow", ...}}

Security: the unix socket is created ``0600`` in the user's state directory, so the file
permissions are the authentication. The optional HTTP port listens on ``127.0.0.1`` only and
wants the token the server writes (``0600``) beside the socket, in ``X-Loopwatch-Token``.

Robustness: requests are bounded (:data:`MAX_REQUEST_BYTES`), each connection has an idle
timeout, a bad request gets a JSON error and never stops the server, and every guard
operation runs on one worker thread (the stores need not be thread-safe; parallel clients
are serialised in arrival order, so no record is lost).

The client half (:func:`request`, :func:`try_hook`) imports only ``_socket``, ``json`` and
``os``: a hook process can ask a running server without loading the detectors (this file
even loads on its own, by path, without ``loopwatch/__init__``).
"""

from __future__ import annotations

import _socket  # the C module: ``socket`` would import enum and selectors on each hook call
import json
import os
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from concurrent.futures import ThreadPoolExecutor

    from loopwatch.guard import Decision, LoopGuard
    from loopwatch.history import ToolCallRecord

# --- constants ----------------------------------------------------------------------------

#: The socket's file name in the state directory.
SOCKET_NAME: Final = "serve.sock"
#: The HTTP token's file name in the state directory.
TOKEN_NAME: Final = "serve.token"
#: Environment variable naming the socket (both the server's default and the client's).
SOCKET_ENV: Final = "LOOPWATCH_SOCKET"
#: The largest request accepted, in bytes (one line on the socket, the body over HTTP).
MAX_REQUEST_BYTES: Final = 1 << 20
#: Seconds a connection may stay silent before the server closes it.
CONNECTION_TIMEOUT_S: Final = 30.0
#: Seconds the client waits for the server before giving up (the hook then runs in-process).
CLIENT_TIMEOUT_S: Final = 5.0
#: How many connections are served at once; more are answered ``busy`` and closed.
MAX_CONNECTIONS: Final = 64
#: The HTTP header carrying the token (``Authorization: Bearer <token>`` works too).
TOKEN_HEADER: Final = "X-Loopwatch-Token"
#: Every operation of the API.
OPS: Final = ("health", "before_call", "after_call", "compaction_retry", "history", "hook")
#: The longest unix socket path Linux accepts (``sun_path`` is 108 bytes with its NUL).
MAX_SOCKET_PATH_BYTES: Final = 107

# Error codes of the API (``{"ok": false, "error": {"code": ..., "message": ...}}``).
E_BAD_JSON: Final = "bad_json"
E_BAD_REQUEST: Final = "bad_request"
E_UNKNOWN_OP: Final = "unknown_op"
E_TOO_LARGE: Final = "request_too_large"
E_UNAUTHORIZED: Final = "unauthorized"
E_NOT_FOUND: Final = "not_found"
E_BUSY: Final = "busy"
E_UNAVAILABLE: Final = "unavailable"
E_MISMATCH: Final = "mismatch"
E_INTERNAL: Final = "internal"

MSG_NOT_OBJECT: Final = "the request must be a JSON object"
MSG_NO_OP: Final = "the request needs an 'op' string, one of: " + ", ".join(OPS)
MSG_UNKNOWN_OP: Final = "unknown op {op!r}; expected one of: " + ", ".join(OPS)
MSG_FIELD_STRING: Final = "{field!r} must be a non-empty string"
MSG_FIELD_OPTIONAL: Final = "{field!r} must be a string or null"
MSG_TOO_LARGE: Final = "the request is larger than {limit} bytes"
MSG_BAD_JSON: Final = "the request is not valid JSON: {error}"
MSG_BAD_UTF8: Final = "the request is not valid UTF-8"
MSG_TOO_DEEP: Final = "the request nests too deeply"
MSG_MISMATCH: Final = (
    "this server runs with {server}, the hook asked for {hook}: run the hook in-process"
)
MSG_OPTIONS: Final = "'options' must be an object with 'store', 'config' and 'profile'"
MSG_UNAUTHORIZED: Final = "missing or wrong token (send it in the " + TOKEN_HEADER + " header)"
MSG_NOT_FOUND: Final = "no such path; POST /v1/<op> (ops: " + ", ".join(OPS) + ")"
MSG_BUSY: Final = "too many connections; retry later"
MSG_NO_HOOKS: Final = "this installation has no loopwatch.hooks module: the hook op is unavailable"
MSG_UNKNOWN_AGENT: Final = "unknown agent {agent!r}; expected one of: {agents}"
MSG_PAYLOAD: Final = "'payload' must be the hook's stdin text (a string) or a JSON object"
MSG_INTERNAL: Final = "the server failed on this request (see its log): {error}"
MSG_SOCKET_TOO_LONG: Final = (
    "the socket path {path} is longer than {limit} bytes; pass a shorter --socket"
)
MSG_SOCKET_IN_USE: Final = "another loopwatch serve is already listening on {path}"
MSG_SOCKET_NOT_SOCKET: Final = "{path} exists and is not a socket; not replacing it"


class ServeError(Exception):
    """A request the server refused or could not answer; ``code`` is the API's error code."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


# --- paths (shared by client and server) ----------------------------------------------------


def state_dir() -> str:
    """Where loopwatch keeps per-user state: ``$XDG_STATE_HOME/loopwatch`` or the XDG default.

    A relative ``XDG_STATE_HOME`` is ignored, as the XDG spec asks.
    """
    base = os.environ.get("XDG_STATE_HOME", "")
    if not base or not os.path.isabs(base):
        base = os.path.join(os.path.expanduser("~"), ".local", "state")
    return os.path.join(base, "loopwatch")


def default_socket_path() -> str:
    """``$LOOPWATCH_SOCKET`` when set, else ``serve.sock`` in :func:`state_dir`."""
    return os.environ.get(SOCKET_ENV) or os.path.join(state_dir(), SOCKET_NAME)


def default_token_path() -> str:
    """The file holding the HTTP token: ``serve.token`` in :func:`state_dir`."""
    return os.path.join(state_dir(), TOKEN_NAME)


# --- client --------------------------------------------------------------------------------


def request(
    op: str,
    fields: Mapping[str, Any] | None = None,
    *,
    socket_path: str | None = None,
    timeout_s: float = CLIENT_TIMEOUT_S,
) -> dict[str, Any]:
    """Send one request to a running server over its unix socket and return the reply.

    Args:
        op: the operation (one of :data:`OPS`).
        fields: the operation's fields.
        socket_path: the server's socket (default: :func:`default_socket_path`).
        timeout_s: seconds to wait for the connection and for the whole answer.

    Returns:
        The reply's ``result`` object.

    Raises:
        OSError: no server (``FileNotFoundError``, ``ConnectionRefusedError``) or it timed out.
        ServeError: the server answered with an error.
    """
    path = socket_path or default_socket_path()
    message = dict(fields or {})
    message["op"] = op
    line = json.dumps(message, separators=(",", ":")).encode("ascii") + b"\n"
    conn = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    chunks: list[bytes] = []
    try:
        conn.settimeout(timeout_s)
        conn.connect(path)
        conn.sendall(line)
        while True:
            chunk = conn.recv(65536)
            if not chunk:
                break
            chunks.append(chunk)
            if chunk.endswith(b"\n"):
                break
    finally:
        conn.close()
    try:
        reply = json.loads(b"".join(chunks))
    except ValueError as exc:
        raise ServeError(E_BAD_JSON, "the server's reply is not JSON") from exc
    if not isinstance(reply, dict):
        raise ServeError(E_BAD_JSON, "the server's reply is not a JSON object")
    if reply.get("ok") is not True:
        error = reply.get("error")
        error = error if isinstance(error, dict) else {}
        raise ServeError(str(error.get("code", E_INTERNAL)), str(error.get("message", "")))
    result = reply.get("result")
    return result if isinstance(result, dict) else {}


def hook_options(
    store_url: str | None = None, config_file: str | None = None, profile: str | None = None
) -> dict[str, str | None]:
    """The guard options of a hook, normalised so that a hook and a server can compare them.

    The hook sends its own (``--store``, ``--config``, ``--profile``; ``None`` for a default)
    with each ``hook`` request; a server started with other options refuses (``mismatch``)
    and the hook runs in-process, so a hook installed with ``--config X`` is never judged by
    a server that runs without it.
    """
    return {
        "store": store_url or None,
        "config": os.path.abspath(config_file) if config_file else None,
        "profile": profile or None,
    }


def try_hook(
    agent: str,
    payload_text: str,
    socket_path: str | None = None,
    timeout_s: float = CLIENT_TIMEOUT_S,
    *,
    options: Mapping[str, str | None] | None = None,
) -> tuple[str, int, str] | None:
    """Answer a hook event through a running server, or ``None`` when that is not possible.

    The hook process calls this first; ``None`` (no socket, no server, a timeout, an error,
    a server running with other ``options``) means "run the hook in-process", so a missing
    or broken server never blocks a call, and this function never raises. Caveat: after a
    timeout the server may still record the call, so the in-process fallback can record it a
    second time; a duplicate record is the fail-open price.

    Args:
        agent: the agent's name (``loopwatch.hooks.AGENTS``).
        payload_text: the hook's stdin, unchanged.
        socket_path: the server's socket (default: :func:`default_socket_path`).
        timeout_s: seconds to wait for the server.
        options: the hook's :func:`hook_options`; ``None`` accepts any server.

    Returns:
        ``(stdout, exit_code, stderr)`` exactly as the hook process must emit them.
    """
    try:
        path = socket_path or default_socket_path()
        if not os.path.exists(path):
            return None
        fields: dict[str, Any] = {"agent": agent, "payload": payload_text}
        if options is not None:
            fields["options"] = dict(options)
        result = request("hook", fields, socket_path=path, timeout_s=timeout_s)
    except Exception:
        return None
    stdout, exit_code, stderr = result.get("stdout"), result.get("exit_code"), result.get("stderr")
    if not isinstance(stdout, str) or type(exit_code) is not int or not isinstance(stderr, str):
        return None
    return stdout, exit_code, stderr


# --- server: the API ------------------------------------------------------------------------


def _text_field(message: Mapping[str, Any], field: str) -> str:
    value = message.get(field)
    if not isinstance(value, str) or not value.strip():
        raise ServeError(E_BAD_REQUEST, MSG_FIELD_STRING.format(field=field))
    return value


def _optional_field(message: Mapping[str, Any], field: str) -> str | None:
    value = message.get(field)
    if value is not None and not isinstance(value, str):
        raise ServeError(E_BAD_REQUEST, MSG_FIELD_OPTIONAL.format(field=field))
    return value


def _verdict_json(decision: Decision) -> dict[str, Any]:
    verdict = decision.verdict
    return {
        "stuck": verdict.stuck,
        "level": verdict.level,
        "detector": verdict.detector,
        "count": verdict.count,
        "message": verdict.message,
        "warning_key": verdict.warning_key,
        "paired_tool_name": verdict.paired_tool_name,
    }


def decision_json(decision: Decision) -> dict[str, Any]:
    """A :class:`~loopwatch.Decision` as the API's ``before_call`` result."""
    return {
        "action": decision.action,
        "blocked": decision.tool_result is not None,
        "enforced": decision.enforced,
        "emitted": decision.emitted,
        "tool_result": decision.tool_result,
        "verdict": _verdict_json(decision),
    }


def record_json(record: ToolCallRecord | None) -> dict[str, Any] | None:
    """A history record as JSON: names, ids and digests only (never raw arguments)."""
    if record is None:
        return None
    return {
        "tool_name": record.tool_name,
        "args_hash": record.args_hash,
        "result_hash": record.result_hash,
        "tool_call_id": record.tool_call_id,
        "run_id": record.run_id,
        "unknown_tool_name": record.unknown_tool_name,
        "timestamp": record.timestamp,
    }


class Dispatcher:
    """Turns API requests into guard calls on one worker thread; never raises.

    Args:
        guard_factory: builds the guard; called once, on the worker thread, so that a store
            bound to its creating thread (``sqlite3``) is only ever used there.
        hooks_module: the module providing ``run_hook`` and ``AGENTS`` (default: import
            ``loopwatch.hooks`` on first use).
        options: the server's own :func:`hook_options`; a ``hook`` request carrying other
            ones is refused (``mismatch``). ``None`` accepts every hook.

    Raises:
        Exception: whatever ``guard_factory`` raises (a bad config is a start-up error).
    """

    def __init__(
        self,
        guard_factory: Callable[[], LoopGuard],
        hooks_module: Any = None,
        options: Mapping[str, str | None] | None = None,
    ) -> None:
        import time
        from concurrent.futures import ThreadPoolExecutor

        self._executor: ThreadPoolExecutor = ThreadPoolExecutor(
            max_workers=1, thread_name_prefix="loopwatch-guard"
        )
        self._started = time.monotonic()
        self._hooks = hooks_module
        self.options = dict(options) if options is not None else None
        try:
            self.guard: LoopGuard = self._executor.submit(guard_factory).result()
        except BaseException:
            self._executor.shutdown(wait=False)
            raise

    def close(self) -> None:
        """Finish the running operation, then close the guard's store."""

        def close_store() -> None:
            closer = getattr(self.guard.store, "close", None)
            if callable(closer):
                closer()

        try:
            self._executor.submit(close_store).result()
        except Exception:
            _logger().warning("loopwatch serve: closing the store failed", exc_info=True)
        self._executor.shutdown(wait=True)

    # --- entry points ---------------------------------------------------------------------

    def handle_bytes(self, data: bytes, op: str | None = None) -> dict[str, Any]:
        """Answer one raw request (a JSON object); ``op`` overrides the body's (HTTP path)."""
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            return error_reply(E_BAD_JSON, MSG_BAD_UTF8)
        try:
            message = json.loads(text) if text.strip() or op is None else {}
        except ValueError as exc:
            return error_reply(E_BAD_JSON, MSG_BAD_JSON.format(error=exc))
        except RecursionError:
            return error_reply(E_BAD_JSON, MSG_TOO_DEEP)
        return self.handle(message, op)

    def handle(self, message: object, op: str | None = None) -> dict[str, Any]:
        """Answer one decoded request."""
        if not isinstance(message, dict):
            return error_reply(E_BAD_REQUEST, MSG_NOT_OBJECT)
        name = op if op is not None else message.get("op")
        reply: dict[str, Any]
        try:
            if not isinstance(name, str):
                raise ServeError(E_BAD_REQUEST, MSG_NO_OP)
            handler = self._ops().get(name)
            if handler is None:
                raise ServeError(E_UNKNOWN_OP, MSG_UNKNOWN_OP.format(op=name))
            reply = {"ok": True, "op": name, "result": handler(message)}
        except ServeError as exc:
            reply = error_reply(exc.code, exc.message)
        except Exception as exc:
            _logger().exception("loopwatch serve: request failed")
            reply = error_reply(E_INTERNAL, MSG_INTERNAL.format(error=type(exc).__name__))
        if "id" in message:
            reply["id"] = message["id"]
        return reply

    # --- operations -----------------------------------------------------------------------

    def _ops(self) -> dict[str, Callable[[dict[str, Any]], dict[str, Any]]]:
        return {
            "health": self._health,
            "before_call": self._before_call,
            "after_call": self._after_call,
            "compaction_retry": self._compaction_retry,
            "history": self._history,
            "hook": self._hook,
        }

    def _run(self, work: Callable[[], Any]) -> Any:
        return self._executor.submit(work).result()

    def _health(self, _message: dict[str, Any]) -> dict[str, Any]:
        import time

        from loopwatch import __version__

        return {
            "status": "ok",
            "version": __version__,
            "pid": os.getpid(),
            "profile": self.guard.profile,
            "store": type(self.guard.store).__name__,
            "uptime_s": round(time.monotonic() - self._started, 3),
            "options": self.options,
            "ops": list(OPS),
        }

    def _before_call(self, message: dict[str, Any]) -> dict[str, Any]:
        session = _text_field(message, "session_key")
        tool = _text_field(message, "tool_name")
        run_id = _optional_field(message, "run_id")
        call_id = _optional_field(message, "tool_call_id")
        agent_id = _optional_field(message, "agent_id")
        params = message.get("params", {})
        decision: Decision = self._run(
            lambda: self.guard.before_call(
                tool,
                params,
                session_key=session,
                run_id=run_id,
                tool_call_id=call_id,
                agent_id=agent_id,
            )
        )
        return decision_json(decision)

    def _after_call(self, message: dict[str, Any]) -> dict[str, Any]:
        from loopwatch import UNDEFINED, PostCompactionLoopPersistedError

        session = _text_field(message, "session_key")
        tool = _text_field(message, "tool_name")
        run_id = _optional_field(message, "run_id")
        call_id = _optional_field(message, "tool_call_id")
        agent_id = _optional_field(message, "agent_id")
        params = message.get("params", {})
        # A key that is absent is "not given"; ``"error": null`` is a real (empty) error.
        result = message.get("result", UNDEFINED)
        error = message.get("error", UNDEFINED)

        def work() -> dict[str, Any]:
            try:
                record = self.guard.after_call(
                    tool,
                    params,
                    session_key=session,
                    run_id=run_id,
                    tool_call_id=call_id,
                    result=result,
                    error=error,
                    agent_id=agent_id,
                )
            except PostCompactionLoopPersistedError as exc:
                return {
                    "recorded": exc.record is not None,
                    "record": record_json(exc.record),
                    "end_run": True,
                    "message": exc.message,
                    "count": exc.count,
                    "detector": exc.detector,
                }
            return {"recorded": record is not None, "record": record_json(record), "end_run": False}

        answer: dict[str, Any] = self._run(work)
        return answer

    def _compaction_retry(self, message: dict[str, Any]) -> dict[str, Any]:
        session = _text_field(message, "session_key")
        run_id = _optional_field(message, "run_id")
        agent_id = _optional_field(message, "agent_id")
        self._run(
            lambda: self.guard.compaction_retry(
                session_key=session, run_id=run_id, agent_id=agent_id
            )
        )
        return {"armed": True}

    def _history(self, message: dict[str, Any]) -> dict[str, Any]:
        session = _text_field(message, "session_key")
        records = self._run(lambda: self.guard.history(session_key=session))
        return {"records": [record_json(record) for record in records]}

    def _hooks_module(self) -> Any:
        if self._hooks is None:
            import importlib

            try:
                self._hooks = importlib.import_module("loopwatch.hooks")
            except ImportError as exc:
                raise ServeError(E_UNAVAILABLE, MSG_NO_HOOKS) from exc
        return self._hooks

    def _check_options(self, given: object) -> None:
        keys = ("store", "config", "profile")
        if not isinstance(given, dict) or not set(given) <= set(keys):
            raise ServeError(E_BAD_REQUEST, MSG_OPTIONS)
        if any(value is not None and not isinstance(value, str) for value in given.values()):
            raise ServeError(E_BAD_REQUEST, MSG_OPTIONS)
        if self.options is None:
            return
        asked = {key: given.get(key) for key in keys}
        mine = {key: self.options.get(key) for key in keys}
        if asked != mine:
            raise ServeError(E_MISMATCH, MSG_MISMATCH.format(server=mine, hook=asked))

    def _hook(self, message: dict[str, Any]) -> dict[str, Any]:
        hooks = self._hooks_module()
        agents = tuple(getattr(hooks, "AGENTS", ()))
        agent = message.get("agent")
        if not isinstance(agent, str) or agent not in agents:
            raise ServeError(
                E_BAD_REQUEST, MSG_UNKNOWN_AGENT.format(agent=agent, agents=", ".join(agents))
            )
        if "options" in message:
            self._check_options(message["options"])
        payload = message.get("payload")
        if isinstance(payload, dict):
            payload = json.dumps(payload, ensure_ascii=False)
        if not isinstance(payload, str):
            raise ServeError(E_BAD_REQUEST, MSG_PAYLOAD)
        text: str = payload
        outcome = self._run(lambda: hooks.run_hook(agent, text, self.guard))
        return {
            "stdout": str(outcome.stdout),
            "exit_code": int(outcome.exit_code),
            "stderr": str(getattr(outcome, "stderr", "")),
        }


def error_reply(code: str, message: str) -> dict[str, Any]:
    """The API's error envelope."""
    return {"ok": False, "error": {"code": code, "message": message}}


def _logger() -> Any:
    import logging

    return logging.getLogger("loopwatch.serve")


def encode_reply(reply: Mapping[str, Any]) -> bytes:
    """One reply as a JSON line (non-JSON values, which guards never produce, become text).

    A reply that cannot be encoded (an echoed ``id`` nested too deeply) becomes an error.
    """
    try:
        # ASCII: a lone surrogate (valid in a JSON string) is escaped, never raised on.
        text = json.dumps(reply, separators=(",", ":"), default=str)
    except (RecursionError, ValueError, TypeError):
        text = json.dumps(error_reply(E_BAD_REQUEST, MSG_TOO_DEEP))
    return text.encode("ascii") + b"\n"


# --- server: transports ---------------------------------------------------------------------


def run(
    guard_factory: Callable[[], LoopGuard],
    *,
    socket_path: str | None = None,
    http_port: int | None = None,
    token_path: str | None = None,
    on_ready: Callable[[str], None] | None = None,
    options: Mapping[str, str | None] | None = None,
) -> int:
    """Serve until SIGTERM or SIGINT, then shut down cleanly (see ``_serve_server.run``).

    The transports live in their own module so that the client half stays import-light.
    """
    from loopwatch._serve_server import run as run_server

    return run_server(
        guard_factory,
        socket_path=os.path.abspath(socket_path or default_socket_path()),
        http_port=http_port,
        token_path=token_path or default_token_path(),
        on_ready=on_ready,
        options=options,
    )


__all__ = [
    "CLIENT_TIMEOUT_S",
    "CONNECTION_TIMEOUT_S",
    "MAX_REQUEST_BYTES",
    "OPS",
    "SOCKET_ENV",
    "TOKEN_HEADER",
    "Dispatcher",
    "ServeError",
    "decision_json",
    "default_socket_path",
    "default_token_path",
    "error_reply",
    "hook_options",
    "record_json",
    "request",
    "run",
    "state_dir",
    "try_hook",
]
