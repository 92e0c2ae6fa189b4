"""The transports of ``loopwatch serve``: a unix socket (JSON lines) and optional HTTP.

Kept apart from :mod:`loopwatch.serve` so that the client there imports nothing of this.
Both transports hand every request to one :class:`~loopwatch._serve_api.Dispatcher`; threads
serve connections (``socketserver``), the dispatcher's single worker runs the guard.
"""

from __future__ import annotations

import contextlib
import hmac
import logging
import os
import secrets
import signal
import socket
import socketserver
import stat
import threading
from collections.abc import Callable, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import FrameType
from typing import TYPE_CHECKING, Any, Final

from loopwatch._serve_api import Dispatcher, encode_reply, error_reply
from loopwatch.serve import (
    CONNECTION_TIMEOUT_S,
    E_BAD_JSON,
    E_BAD_REQUEST,
    E_BUSY,
    E_INTERNAL,
    E_MISMATCH,
    E_NOT_FOUND,
    E_TOO_LARGE,
    E_UNAUTHORIZED,
    E_UNAVAILABLE,
    E_UNKNOWN_OP,
    MAX_CONNECTIONS,
    MAX_REQUEST_BYTES,
    MAX_SOCKET_PATH_BYTES,
    MSG_BUSY,
    MSG_NOT_FOUND,
    MSG_SOCKET_IN_USE,
    MSG_SOCKET_NOT_SOCKET,
    MSG_SOCKET_TOO_LONG,
    MSG_TOO_LARGE,
    MSG_UNAUTHORIZED,
    TOKEN_HEADER,
    ServeError,
)

if TYPE_CHECKING:
    from loopwatch.guard import LoopGuard

logger = logging.getLogger("loopwatch.serve")

#: How often (seconds) the serving loops look for a shutdown request.
POLL_INTERVAL_S: Final = 0.2
#: HTTP status of each API error code.
HTTP_STATUS: Final = {
    E_BAD_JSON: 400,
    E_BAD_REQUEST: 400,
    E_UNKNOWN_OP: 400,
    E_UNAUTHORIZED: 401,
    E_NOT_FOUND: 404,
    E_MISMATCH: 409,
    E_TOO_LARGE: 413,
    E_INTERNAL: 500,
    E_BUSY: 503,
    E_UNAVAILABLE: 503,
}
#: The HTTP paths: ``/v1/<op>`` names the op; ``/v1`` and ``/`` take it from the body.
HTTP_PREFIX: Final = "/v1"
#: What the server prints once it listens (``on_ready``); tests and scripts parse it.
READY_SOCKET: Final = "loopwatch serve: listening on {path}"
READY_HTTP: Final = "loopwatch serve: http://127.0.0.1:{port} (token in {token_path})"


# --- set-up helpers ---------------------------------------------------------------------------


def prepare_socket_path(path: str) -> None:
    """Make ``path`` ready to bind: parent created ``0700``, a stale socket removed.

    Raises:
        ServeError: the path is too long, is not a socket, or a live server listens there.
    """
    if len(os.fsencode(path)) > MAX_SOCKET_PATH_BYTES:
        raise ServeError(
            E_BAD_REQUEST, MSG_SOCKET_TOO_LONG.format(path=path, limit=MAX_SOCKET_PATH_BYTES)
        )
    parent = os.path.dirname(os.path.abspath(path))
    os.makedirs(parent, mode=0o700, exist_ok=True)
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return
    if not stat.S_ISSOCK(mode):
        raise ServeError(E_BAD_REQUEST, MSG_SOCKET_NOT_SOCKET.format(path=path))
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
        probe.settimeout(1.0)
        try:
            probe.connect(path)
        except (ConnectionRefusedError, FileNotFoundError):
            os.unlink(path)  # left behind by a killed server
            return
        except OSError:
            pass
    raise ServeError(E_BAD_REQUEST, MSG_SOCKET_IN_USE.format(path=path))


def write_token(path: str) -> str:
    """Generate the HTTP token and write it to ``path``, readable by the user only."""
    token = secrets.token_urlsafe(32)
    os.makedirs(os.path.dirname(os.path.abspath(path)), mode=0o700, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.fchmod(fd, 0o600)
        os.write(fd, (token + "\n").encode())
    finally:
        os.close(fd)
    return token


# --- unix socket: one JSON object per line ---------------------------------------------------


class _UnixServer(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True
    request_queue_size = MAX_CONNECTIONS

    def __init__(self, path: str, dispatcher: Dispatcher, slots: threading.BoundedSemaphore):
        self.dispatcher = dispatcher
        self.slots = slots
        super().__init__(path, _LineHandler)


class _LineHandler(socketserver.BaseRequestHandler):
    server: _UnixServer

    def handle(self) -> None:
        conn: socket.socket = self.request
        conn.settimeout(CONNECTION_TIMEOUT_S)
        if not self.server.slots.acquire(blocking=False):
            self._send(conn, error_reply(E_BUSY, MSG_BUSY))
            return
        try:
            self._serve(conn)
        except OSError:
            pass  # the client went away or timed out: nothing to answer
        finally:
            self.server.slots.release()

    @staticmethod
    def _send(conn: socket.socket, reply: dict[str, Any]) -> None:
        with contextlib.suppress(OSError):
            conn.sendall(encode_reply(reply))

    def _serve(self, conn: socket.socket) -> None:
        dispatcher = self.server.dispatcher
        buffer = b""
        while True:
            searched = 0
            newline = buffer.find(b"\n")
            while newline < 0:
                if len(buffer) > MAX_REQUEST_BYTES:
                    self._send(conn, _too_large())
                    return
                chunk = conn.recv(65536)
                if not chunk:
                    # A last request without its newline is still answered.
                    if buffer.strip():
                        self._send(conn, dispatcher.handle_bytes(buffer))
                    return
                searched = len(buffer)
                buffer += chunk
                newline = buffer.find(b"\n", searched)
            line, buffer = buffer[:newline], buffer[newline + 1 :]
            if len(line) > MAX_REQUEST_BYTES:
                self._send(conn, _too_large())
                return
            if line.strip():
                conn.sendall(encode_reply(dispatcher.handle_bytes(line)))


def _too_large() -> dict[str, Any]:
    return error_reply(E_TOO_LARGE, MSG_TOO_LARGE.format(limit=MAX_REQUEST_BYTES))


# --- HTTP: POST /v1/<op>, localhost only, token required --------------------------------------


class _HttpServer(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = MAX_CONNECTIONS

    def __init__(
        self,
        port: int,
        dispatcher: Dispatcher,
        slots: threading.BoundedSemaphore,
        token: str,
    ) -> None:
        self.dispatcher = dispatcher
        self.slots = slots
        self.token = token.encode()
        super().__init__(("127.0.0.1", port), _HttpHandler)


class _HttpHandler(BaseHTTPRequestHandler):
    server: _HttpServer
    server_version = "loopwatch-serve"
    sys_version = ""
    protocol_version = "HTTP/1.1"
    timeout = CONNECTION_TIMEOUT_S

    def handle(self) -> None:
        if not self.server.slots.acquire(blocking=False):
            with contextlib.suppress(OSError):
                self.rfile.readline(65537)
                self._reply(error_reply(E_BUSY, MSG_BUSY), close=True)
            return
        try:
            super().handle()
        except OSError:
            pass
        finally:
            self.server.slots.release()

    def do_GET(self) -> None:
        self._answer(with_body=False)

    def do_POST(self) -> None:
        self._answer(with_body=True)

    def log_message(self, format: str, *args: Any) -> None:
        logger.debug("http %s " + format, self.address_string(), *args)

    def _authorised(self) -> bool:
        given = self.headers.get(TOKEN_HEADER, "")
        if not given:
            scheme, _, value = self.headers.get("Authorization", "").partition(" ")
            given = value.strip() if scheme.lower() == "bearer" else ""
        return hmac.compare_digest(given.strip().encode(), self.server.token)

    def _answer(self, *, with_body: bool) -> None:
        try:
            length = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            length = -1
        if length < 0 or length > MAX_REQUEST_BYTES:
            # The body is not read: the connection cannot be reused.
            self._reply(_too_large(), close=True)
            return
        body = self.rfile.read(length) if length else b""
        if not self._authorised():
            self._reply(error_reply(E_UNAUTHORIZED, MSG_UNAUTHORIZED))
            return
        path = self.path.split("?", 1)[0].rstrip("/")
        op: str | None
        if path in ("", HTTP_PREFIX):
            op = None
        elif path.startswith(HTTP_PREFIX + "/") and "/" not in path[len(HTTP_PREFIX) + 1 :]:
            op = path[len(HTTP_PREFIX) + 1 :]
        else:
            self._reply(error_reply(E_NOT_FOUND, MSG_NOT_FOUND))
            return
        if not with_body and op is None:
            self._reply(error_reply(E_NOT_FOUND, MSG_NOT_FOUND))
            return
        self._reply(self.server.dispatcher.handle_bytes(body, op))

    def _reply(self, reply: dict[str, Any], *, close: bool = False) -> None:
        data = encode_reply(reply)
        status = 200
        if reply.get("ok") is not True:
            status = HTTP_STATUS.get(str(reply.get("error", {}).get("code")), 400)
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        if close:
            self.send_header("Connection", "close")
            self.close_connection = True
        self.end_headers()
        self.wfile.write(data)


# --- the serving loop -------------------------------------------------------------------------


def run(
    guard_factory: Callable[[], LoopGuard],
    *,
    socket_path: str,
    http_port: int | None,
    token_path: str,
    on_ready: Callable[[str], None] | None = None,
    options: Mapping[str, str | None] | None = None,
) -> int:
    """Serve until SIGTERM or SIGINT (call from the main thread), then shut down cleanly.

    Shutting down stops accepting, lets the running guard operation finish, closes the store,
    and removes the socket file and the token file.

    Returns:
        0 after a signal.

    Raises:
        ServeError: the socket path cannot be used.
        OSError: the socket or the port cannot be bound.
        Exception: whatever ``guard_factory`` raises (a bad config or store URL).
    """
    prepare_socket_path(socket_path)
    dispatcher = Dispatcher(guard_factory, options=options)
    slots = threading.BoundedSemaphore(MAX_CONNECTIONS)
    servers: list[socketserver.BaseServer] = []
    threads: list[threading.Thread] = []
    stop = threading.Event()
    previous: dict[signal.Signals, Any] = {}
    identity: tuple[int, int] | None = None
    token_written = False

    def on_signal(_signum: int, _frame: FrameType | None) -> None:
        stop.set()

    try:
        old_umask = os.umask(0o177)  # the socket is born 0600: no window for others
        try:
            unix = _UnixServer(socket_path, dispatcher, slots)
        finally:
            os.umask(old_umask)
        servers.append(unix)
        os.chmod(socket_path, 0o600)
        status = os.stat(socket_path)
        identity = (status.st_dev, status.st_ino)
        lines = [READY_SOCKET.format(path=socket_path)]
        if http_port is not None:
            token = write_token(token_path)
            token_written = True
            http = _HttpServer(http_port, dispatcher, slots, token)
            servers.append(http)
            lines.append(READY_HTTP.format(port=http.server_address[1], token_path=token_path))
        for signum in (signal.SIGTERM, signal.SIGINT):
            previous[signum] = signal.signal(signum, on_signal)
        for server in servers:
            thread = threading.Thread(
                target=server.serve_forever,
                kwargs={"poll_interval": POLL_INTERVAL_S},
                name=f"loopwatch-serve-{type(server).__name__}",
                daemon=True,
            )
            thread.start()
            threads.append(thread)
        if on_ready is not None:
            on_ready("\n".join(lines))
        while not stop.wait(POLL_INTERVAL_S):
            if not all(thread.is_alive() for thread in threads):
                logger.error("loopwatch serve: a listener stopped; shutting down")
                break
    finally:
        for server, thread in zip(servers, threads, strict=False):
            if thread.is_alive():
                server.shutdown()
        for server in servers:
            server.server_close()
        _remove_socket(socket_path, identity)
        if token_written:
            with contextlib.suppress(OSError):
                os.unlink(token_path)
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        dispatcher.close()
    return 0


def _remove_socket(path: str, identity: tuple[int, int] | None) -> None:
    """Remove our socket file, not one a newer server bound at the same path."""
    if identity is None:
        return
    with contextlib.suppress(OSError):
        status = os.lstat(path)
        if (status.st_dev, status.st_ino) == identity:
            os.unlink(path)


__all__ = ["prepare_socket_path", "run", "write_token"]
