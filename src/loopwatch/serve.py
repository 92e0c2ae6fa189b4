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

Layout: this module holds the constants, the paths and the client (a leaf: it imports
nothing of loopwatch); the API (``Dispatcher``, in ``_serve_api``) and the transports
(``_serve_server.run``) build on it and are imported by ``loopwatch serve`` only.
The client (:func:`request`, :func:`try_hook`) imports only ``_socket``, ``json``
and ``os``: a hook process can ask a running server without loading the detectors (this
file even loads on its own, by path, without ``loopwatch/__init__``).
"""

from __future__ import annotations

import _socket  # the C module: ``socket`` would import enum and selectors on each hook call
import json
import os
from collections.abc import Mapping
from typing import Any, Final

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
        timeout_s: seconds each socket step (connect, send, each read) may wait.

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
    a server that runs without it. The default store is resolved from ``LOOPWATCH_STORE``
    (as the hooks do), so a hook and a server that see different variables differ here.
    """
    return {
        "store": store_url or os.environ.get("LOOPWATCH_STORE", "").strip() or None,
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


__all__ = [
    "CLIENT_TIMEOUT_S",
    "CONNECTION_TIMEOUT_S",
    "MAX_REQUEST_BYTES",
    "OPS",
    "SOCKET_ENV",
    "TOKEN_HEADER",
    "ServeError",
    "default_socket_path",
    "default_token_path",
    "hook_options",
    "request",
    "state_dir",
    "try_hook",
]
