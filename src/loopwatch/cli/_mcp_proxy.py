"""The process half of ``loopwatch mcp-proxy``: pipes, framing, signals and the server's life.

The message logic (what a line turns into) is :class:`loopwatch.integrations.mcp_proxy.
McpLoopProxy`; this module moves bytes between the client (our stdin/stdout), that logic and
the server (our child), and owns the server process. Its promises (SECURITY.md):

- **Content never kills the relay.** Lines are framed incrementally (each byte is looked at
  once: linear in the stream), a line up to :data:`MAX_MESSAGE_BYTES` is parsed and guarded,
  a longer one is relayed verbatim in pieces as it arrives (unguarded, logged), and a failure
  of the message logic on one line relays that line unchanged (fail-open, logged).
- **Bounded buffering, with back-pressure.** The client's stdin is read by a thread into a
  queue of at most :data:`QUEUE_CHUNKS` chunks of :data:`CHUNK_BYTES`; when the server does
  not read, the queue fills, the thread stops reading and the client's pipe fills. The same
  holds the other way (the server's pipe is read a chunk at a time, and writes to the
  client wait for it to drain). At most one line under assembly per direction is held.
- **Lifecycle.** The server runs in its own process group. Its exit status is the proxy's
  (``128 + n`` when a signal ``n`` ended it). When the client closes stdin, the server's
  stdin is closed and it gets :data:`EOF_TIMEOUT_S` to exit, then SIGTERM, then after
  :data:`STOP_TIMEOUT_S` SIGKILL. SIGTERM, SIGINT or SIGHUP to the proxy stops the server the
  same way and the proxy exits with ``128 + signal`` (130 for SIGINT, 143 for SIGTERM: the
  shell convention for "ended by that signal", whatever the server answered); a second
  signal kills the group at once. When the server exits, whatever is left of its process
  group is terminated too, so its own children do not outlive it (a child that left the
  group with ``setsid`` is beyond reach).

The server is signalled with ``os.killpg`` only, never ``Process.terminate()``: that calls
``Popen.poll()``, which may reap the child before asyncio's child watcher does, and the
watcher then reports the exit status as 255.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import select
import signal
import sys
import threading
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Final

from loopwatch.messages import (
    MCP_LOG_CANNOT_START,
    MCP_LOG_CLIENT_GONE,
    MCP_LOG_RELAY_FAILED,
    MCP_LOG_SERVER_EXITED,
    MCP_LOG_STARTED,
)

if TYPE_CHECKING:  # pragma: no cover
    from loopwatch.integrations.mcp_proxy import Flow, McpLoopProxy

logger = logging.getLogger("loopwatch.mcp_proxy")

#: Longest line the proxy parses and guards. A longer line (either way) is relayed verbatim
#: as it arrives, without being held whole: a ``tools/call`` that long is not guarded.
MAX_MESSAGE_BYTES: Final = 32 * 1024 * 1024
#: How much is read from either side at once.
CHUNK_BYTES: Final = 256 * 1024
#: Chunks read from the client and not yet handled, at most (back-pressure beyond).
QUEUE_CHUNKS: Final = 8
#: How long the server gets to exit after the client closed the connection.
EOF_TIMEOUT_S: Final = 5.0
#: How long the server (and its group) gets to exit after SIGTERM before SIGKILL.
STOP_TIMEOUT_S: Final = 5.0
#: Signals that stop the proxy and its server.
STOP_SIGNALS: Final = ("SIGTERM", "SIGINT", "SIGHUP")
_POLL_S: Final = 0.05

LOG_OVERSIZE: Final = (
    "mcp-proxy: a {direction} line over {limit} bytes is relayed unparsed (not guarded)"
)
LOG_LINE_FAILED: Final = "mcp-proxy: a {direction} line was relayed unchanged: {error}"
LOG_SIGNAL: Final = "mcp-proxy: got signal {signal}, stopping the server"
LOG_EOF_TIMEOUT: Final = (
    "mcp-proxy: the server did not exit {timeout}s after its stdin closed, stopping it"
)
LOG_KILLED: Final = "mcp-proxy: the server did not stop in {timeout}s, killed it"

# Kinds of framed pieces.
LINE: Final = 0  # a whole line, at most the limit (ends with b"\n" unless the stream ended)
RAW_FIRST: Final = 1  # the first piece of an oversize line, relayed as is
RAW: Final = 2  # a further piece of an oversize line
RAW_LAST: Final = 3  # the last piece of an oversize line (ends with b"\n" or at EOF)


class LineFramer:
    """Splits a byte stream into lines incrementally, in time linear in the stream.

    Pieces of an unfinished line are kept in a list and joined once, when its newline
    arrives (concatenating on every chunk is what made long lines quadratic). A line that
    grows past ``limit`` is given out in pieces from then on (``RAW_FIRST``, ``RAW``…,
    ``RAW_LAST``), so nothing holds more than ``limit`` bytes plus one chunk.
    """

    def __init__(self, limit: int = MAX_MESSAGE_BYTES) -> None:
        self.limit = limit
        self._parts: list[bytes] = []
        self._size = 0
        self._streaming = False

    def feed(self, chunk: bytes) -> list[tuple[int, bytes]]:
        """The pieces ``chunk`` completes, in order."""
        pieces: list[tuple[int, bytes]] = []
        start = 0
        while True:
            nl = chunk.find(b"\n", start)
            if nl < 0:
                if start < len(chunk):
                    self._hold(chunk[start:] if start else chunk, pieces)
                return pieces
            self._finish(chunk[start : nl + 1], pieces)
            start = nl + 1

    def close(self) -> list[tuple[int, bytes]]:
        """The rest at the end of the stream (a last line without a newline)."""
        pieces: list[tuple[int, bytes]] = []
        if self._streaming:
            pieces.append((RAW_LAST, b""))
        elif self._parts:
            pieces.append((LINE, b"".join(self._parts)))
        self._parts, self._size, self._streaming = [], 0, False
        return pieces

    def _hold(self, data: bytes, pieces: list[tuple[int, bytes]]) -> None:
        if self._streaming:
            pieces.append((RAW, data))
            return
        self._parts.append(data)
        self._size += len(data)
        if self._size > self.limit:
            pieces.append((RAW_FIRST, b"".join(self._parts)))
            self._parts, self._size, self._streaming = [], 0, True

    def _finish(self, tail: bytes, pieces: list[tuple[int, bytes]]) -> None:
        if self._streaming:
            pieces.append((RAW_LAST, tail))
            self._streaming = False
            return
        if self._parts:
            self._parts.append(tail)
            line = b"".join(self._parts)
            self._parts, self._size = [], 0
        else:
            line = tail
        if len(line) > self.limit:
            pieces.append((RAW_FIRST, line))
            pieces.append((RAW_LAST, b""))
        else:
            pieces.append((LINE, line))


# --- the client's side --------------------------------------------------------------------


def _read_fd(fd: int, size: int) -> bytes:
    """``os.read`` that also works when the descriptor was made non-blocking under us
    (stdin and stdout may share one open file, and the stdout transport sets O_NONBLOCK)."""
    while True:
        try:
            return os.read(fd, size)
        except BlockingIOError:
            select.select([fd], [], [])


def _stdin_reader(
    loop: asyncio.AbstractEventLoop, queue: asyncio.Queue[bytes | None], fd: int
) -> None:
    """Feeds the client's bytes to the event loop, waiting while the queue is full.

    A daemon thread, because reading stdin without blocking is not portable. It reads the
    raw file descriptor: a thread blocked inside ``sys.stdin.buffer`` would hold that
    object's lock, and the interpreter aborts when it cannot take it at exit.
    """
    while True:
        try:
            chunk = _read_fd(fd, CHUNK_BYTES)
        except OSError:  # stdin closed under us: the client is gone
            chunk = b""
        try:
            asyncio.run_coroutine_threadsafe(queue.put(chunk or None), loop).result()
        except Exception:  # the loop is gone (the put cancelled or refused): exiting
            return
        if not chunk:
            return


class ClientWriter:
    """Writes whole lines to the client, waiting for it to drain (back-pressure).

    An asyncio pipe transport when stdout is a pipe, socket or terminal; plain blocking
    writes otherwise (a regular file never blocks for long). ``lock`` keeps the two pumps
    from interleaving pieces of different lines.
    """

    def __init__(self) -> None:
        self.lock = asyncio.Lock()
        self._writer: asyncio.StreamWriter | None = None
        self._fd = sys.stdout.fileno()

    async def open(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            transport, protocol = await loop.connect_write_pipe(
                lambda: asyncio.streams.FlowControlMixin(loop=loop),
                os.fdopen(os.dup(self._fd), "wb", buffering=0),
            )
        except (OSError, ValueError):
            return
        self._writer = asyncio.StreamWriter(transport, protocol, None, loop)

    async def write(self, data: bytes) -> None:
        if not data:
            return
        writer = self._writer
        if writer is None:
            view = memoryview(data)
            while view:
                view = view[os.write(self._fd, view) :]
            return
        writer.write(data)
        await writer.drain()

    async def close(self) -> None:
        writer = self._writer
        if writer is None:
            return
        with contextlib.suppress(Exception):
            await asyncio.wait_for(writer.drain(), timeout=STOP_TIMEOUT_S)
        writer.close()


# --- the server's process -----------------------------------------------------------------


def _group_kwargs() -> dict[str, Any]:
    """Start the server as the leader of its own process group (keeping our session, so it
    still belongs to the terminal where there is one)."""
    if sys.version_info >= (3, 11):
        return {"process_group": 0}
    return {"start_new_session": True}  # pragma: no cover - Python 3.10


def _signal_group(pgid: int, sig: int) -> bool:
    """Signal the server's process group; ``False`` when no member is left."""
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        return False
    except PermissionError:  # pragma: no cover - a reused id owned by someone else
        return False
    return True


class Server:
    """The server process: starting, stopping (TERM, then KILL) and its exit status."""

    def __init__(self, child: asyncio.subprocess.Process) -> None:
        self.child = child
        self.pgid = child.pid
        self._stopping: asyncio.Task[None] | None = None

    async def wait(self) -> int:
        """The server's exit status, as soon as it exits.

        Polled, not ``Process.wait()``: before Python 3.12 that waits for the pipes to
        close too, which never happens while a process the server left behind holds its
        stdout, and the proxy would hang instead of ending that process.
        """
        while (code := self.child.returncode) is None:
            await asyncio.sleep(_POLL_S)
        return code

    def stop(self, reason: str | None = None) -> None:
        """Start stopping the server (idempotent); a second call kills at once."""
        if reason is not None:
            logger.info(reason)
        if self._stopping is None:
            self._stopping = asyncio.ensure_future(self._terminate())
        else:
            self.kill()

    def kill(self) -> None:
        _signal_group(self.pgid, signal.SIGKILL)

    async def _terminate(self) -> None:
        if self.child.returncode is not None:
            return
        _signal_group(self.pgid, signal.SIGTERM)
        try:
            await asyncio.wait_for(self.wait(), timeout=STOP_TIMEOUT_S)
        except asyncio.TimeoutError:
            logger.warning(LOG_KILLED.format(timeout=STOP_TIMEOUT_S))
            self.kill()

    async def reap_group(self) -> None:
        """After the leader exited: end what is left of its group (TERM, then KILL)."""
        if not _signal_group(self.pgid, signal.SIGTERM):
            return
        for _ in range(int(STOP_TIMEOUT_S / _POLL_S)):
            await asyncio.sleep(_POLL_S)
            if not _signal_group(self.pgid, 0):
                return
        self.kill()

    async def cancel_stop(self) -> None:
        task = self._stopping
        if task is not None and not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task


async def _guarded(
    handle: Callable[[bytes], Awaitable[Any]], line: bytes, direction: str
) -> Any | None:
    """The message logic on one line; ``None`` (relay unchanged) when it fails."""
    try:
        return await handle(line)
    except Exception as exc:  # fail-open: the line passes as it came
        logger.error(LOG_LINE_FAILED.format(direction=direction, error=_brief(exc)))
        return None


def _brief(exc: BaseException) -> str:
    try:
        text = f"{type(exc).__name__}: {exc}"
    except Exception:
        text = type(exc).__name__
    return text if len(text) <= 300 else text[:300] + "…"


async def relay(
    command: list[str],
    proxy: McpLoopProxy,
    *,
    max_message_bytes: int = MAX_MESSAGE_BYTES,
    eof_timeout_s: float = EOF_TIMEOUT_S,
) -> int:
    """Start the server and relay both ways until it exits; returns the exit status."""
    try:
        child = await asyncio.create_subprocess_exec(
            *command,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            limit=CHUNK_BYTES,
            **_group_kwargs(),
        )
    except (OSError, ValueError) as exc:
        logger.error(MCP_LOG_CANNOT_START.format(command=command[0], error=exc))
        return 127
    logger.info(MCP_LOG_STARTED.format(command=" ".join(command), session=proxy.session_key))
    server = Server(child)
    assert child.stdin is not None and child.stdout is not None
    child_in, child_out = child.stdin, child.stdout
    loop = asyncio.get_running_loop()
    out = ClientWriter()
    await out.open()
    received: list[int] = []

    def on_signal(sig: int) -> None:
        received.append(sig)
        server.stop(LOG_SIGNAL.format(signal=signal.Signals(sig).name))

    installed: list[int] = []
    for name in STOP_SIGNALS:
        sig = getattr(signal, name, None)
        if sig is None:
            continue
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            loop.add_signal_handler(sig, on_signal, int(sig))
            installed.append(int(sig))

    queue: asyncio.Queue[bytes | None] = asyncio.Queue(maxsize=QUEUE_CHUNKS)
    threading.Thread(
        target=_stdin_reader, args=(loop, queue, sys.stdin.fileno()), daemon=True
    ).start()
    failed: list[BaseException] = []

    async def to_server(data: bytes) -> None:
        child_in.write(data)
        await child_in.drain()

    async def client_to_server() -> None:
        framer = LineFramer(max_message_bytes)
        try:
            while (chunk := await queue.get()) is not None:
                for kind, data in framer.feed(chunk):
                    await client_piece(kind, data)
            for kind, data in framer.close():
                await client_piece(kind, data)
        except (BrokenPipeError, ConnectionResetError):
            return  # the server is gone; its exit ends the relay
        # The client hung up: close the server's stdin, as an MCP client would, and give
        # the server some time to exit on its own.
        logger.info(MCP_LOG_CLIENT_GONE)
        with contextlib.suppress(Exception):
            child_in.close()
        try:
            await asyncio.wait_for(server.wait(), timeout=eof_timeout_s)
        except asyncio.TimeoutError:
            server.stop(LOG_EOF_TIMEOUT.format(timeout=eof_timeout_s))

    async def client_piece(kind: int, data: bytes) -> None:
        if kind != LINE:
            if kind == RAW_FIRST:
                logger.warning(LOG_OVERSIZE.format(direction="client", limit=max_message_bytes))
            await to_server(data)
            return
        flow: Flow | None = await _guarded(proxy.from_client, data, "client")
        if flow is None:
            await to_server(data)
            return
        for answer in flow.to_client:
            async with out.lock:
                await out.write(answer)
        for forward in flow.to_server:
            await to_server(forward)

    async def server_to_client() -> None:
        framer = LineFramer(max_message_bytes)
        while chunk := await child_out.read(CHUNK_BYTES):
            for kind, data in framer.feed(chunk):
                await server_piece(kind, data)
        for kind, data in framer.close():
            await server_piece(kind, data)

    async def server_piece(kind: int, data: bytes) -> None:
        if kind == LINE:
            answer: bytes | None = await _guarded(proxy.from_server, data, "server")
            async with out.lock:
                await out.write(data if answer is None else answer)
            return
        if kind == RAW_FIRST:
            logger.warning(LOG_OVERSIZE.format(direction="server", limit=max_message_bytes))
            await out.lock.acquire()  # held until the line ends: no answer lands inside it
        try:
            await out.write(data)
        finally:
            if kind == RAW_LAST and out.lock.locked():
                out.lock.release()

    def pump_done(task: asyncio.Task[None]) -> None:
        error = None if task.cancelled() else task.exception()
        if error is not None:
            logger.error(MCP_LOG_RELAY_FAILED.format(error=_brief(error)))
            failed.append(error)
            server.stop()

    pump = asyncio.create_task(client_to_server())
    pump.add_done_callback(pump_done)
    reader = asyncio.create_task(server_to_client())
    exited = asyncio.ensure_future(server.wait())
    await asyncio.wait({reader, exited}, return_when=asyncio.FIRST_COMPLETED)
    if reader.done() and not reader.cancelled() and reader.exception() is not None:
        server.stop()  # the client is gone (or relaying broke): nobody to serve
    if not exited.done():
        # The server closed its stdout: it is exiting (or stopped talking); wait for it.
        try:
            await asyncio.wait_for(asyncio.shield(exited), timeout=STOP_TIMEOUT_S)
        except asyncio.TimeoutError:
            server.stop()
    code = await exited
    await server.cancel_stop()
    await server.reap_group()
    # What the server wrote before it exited still reaches the client; a pipe held open
    # by a process that left the group is given up after the timeout.
    try:
        await asyncio.wait_for(asyncio.shield(reader), timeout=STOP_TIMEOUT_S)
    except asyncio.TimeoutError:
        reader.cancel()
    except (BrokenPipeError, ConnectionResetError):
        logger.info(MCP_LOG_CLIENT_GONE)
    except Exception as exc:  # never a traceback: report
        logger.error(MCP_LOG_RELAY_FAILED.format(error=_brief(exc)))
        failed.append(exc)
    with contextlib.suppress(asyncio.CancelledError, Exception):
        await reader
    pump.remove_done_callback(pump_done)
    pump.cancel()
    with contextlib.suppress(asyncio.CancelledError, Exception):
        await pump
    await out.close()
    for sig in installed:
        with contextlib.suppress(Exception):
            loop.remove_signal_handler(sig)
    logger.info(MCP_LOG_SERVER_EXITED.format(code=code))
    if received:
        return 128 + received[0]
    if failed:
        return 1
    return code if code >= 0 else 128 - code


def run(
    args: argparse.Namespace, command: list[str], proxy: McpLoopProxy
) -> int:  # pragma: no cover - exercised through subprocesses
    """Run the relay in a fresh event loop; a signal before or after it is an exit code."""
    try:
        return asyncio.run(
            relay(
                command,
                proxy,
                max_message_bytes=args.max_message_bytes,
                eof_timeout_s=args.eof_timeout,
            )
        )
    except KeyboardInterrupt:
        return 128 + signal.SIGINT


__all__ = [
    "CHUNK_BYTES",
    "EOF_TIMEOUT_S",
    "MAX_MESSAGE_BYTES",
    "STOP_TIMEOUT_S",
    "LineFramer",
    "relay",
    "run",
]
