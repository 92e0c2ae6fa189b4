"""Helpers for the Redis store suites: start ``redis-server`` processes on loopback.

Kept out of ``conftest.py`` so tests can import them by a name no other folder uses.
Missing ``redis-server`` (or a client library) fails the tests that need it, unless
``LOOPWATCH_ALLOW_NO_REDIS=1``: then they are skipped with a loud reason.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import random
import shutil
import socket
import subprocess
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from loopwatch import Store

REDIS_URL_ENV = "LOOPWATCH_REDIS_URL"
ALLOW_NO_REDIS_ENV = "LOOPWATCH_ALLOW_NO_REDIS"
START_TIMEOUT_S = 10.0


def _missing(what: str) -> None:
    message = (
        f"{what} not found: install Debian's redis-server package (apt-get install "
        f"redis-server) or point {REDIS_URL_ENV} at a server"
    )
    if os.environ.get(ALLOW_NO_REDIS_ENV) == "1":
        pytest.skip(f"!!! REDIS SUITE NOT RUN: {message} ({ALLOW_NO_REDIS_ENV}=1) !!!")
    pytest.fail(f"{message}; set {ALLOW_NO_REDIS_ENV}=1 to skip the Redis tests instead")


def require_module(name: str, install: str) -> Any:
    """Import a client library the Redis suite needs; missing is a failure, like the server."""
    try:
        return importlib.import_module(name)
    except ImportError:
        message = f"the {name!r} package is not installed: {install}"
        if os.environ.get(ALLOW_NO_REDIS_ENV) == "1":
            pytest.skip(f"!!! REDIS SUITE PART NOT RUN: {message} ({ALLOW_NO_REDIS_ENV}=1) !!!")
        pytest.fail(f"{message}; set {ALLOW_NO_REDIS_ENV}=1 to skip instead")


def redis_binary(name: str = "redis-server") -> str:
    """The path of a Redis binary, or a failure (a loud skip when allowed)."""
    path = shutil.which(name)
    if path is None:
        _missing(name)
    assert path is not None
    return path


def _bindable(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def free_port(*, cluster: bool = False) -> int:
    """A loopback port that is free now (the server binds it right after).

    A cluster node also listens on port + 10000 (its bus), so its port must be at most
    55535 and both ports must be free.
    """
    if not cluster:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.bind(("127.0.0.1", 0))
            return int(sock.getsockname()[1])
    rng = random.Random()
    for _ in range(1000):
        port = rng.randrange(20000, 55535)
        if _bindable(port) and _bindable(port + 10000):
            return port
    raise RuntimeError("no free port pair for a cluster node")


def _ping(port: int | None = None, unix: str | None = None) -> bool:
    family = socket.AF_UNIX if unix else socket.AF_INET
    try:
        with socket.socket(family, socket.SOCK_STREAM) as sock:
            sock.settimeout(0.5)
            sock.connect(unix if unix else ("127.0.0.1", port))
            sock.sendall(b"PING\r\n")
            return sock.recv(64).startswith(b"+PONG")
    except OSError:
        return False


class RedisServer:
    """One ``redis-server`` on a loopback port (and a unix socket) in its own folder.

    No persistence: a restart starts empty, like a crashed cache. ``stop`` and ``start``
    keep the port, so clients reconnect to the same URL.
    """

    def __init__(self, directory: Path, *extra: str, port: int | None = None) -> None:
        self.binary = redis_binary()
        self.directory = directory
        self.directory.mkdir(parents=True, exist_ok=True)
        self.port = port or free_port()
        self.extra = extra
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    @property
    def socket_path(self) -> str:
        return str(self.directory / "redis.sock")

    def start(self) -> RedisServer:
        log = open(self.directory / "redis.log", "ab")  # noqa: SIM115 - owned by the process
        self.process = subprocess.Popen(
            [
                self.binary,
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                str(self.directory),
                "--unixsocket",
                self.socket_path,
                "--unixsocketperm",
                "700",
                *self.extra,
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=self.directory,
        )
        log.close()
        deadline = time.monotonic() + START_TIMEOUT_S
        while not _ping(self.port):
            if self.process.poll() is not None or time.monotonic() > deadline:
                text = (self.directory / "redis.log").read_text(errors="replace")
                self.stop()
                raise RuntimeError(f"redis-server did not start on {self.port}:\n{text}")
            time.sleep(0.02)
        return self

    def stop(self) -> None:
        process, self.process = self.process, None
        if process is None:
            return
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        # The port must be free before a restart binds it again.
        deadline = time.monotonic() + 5
        while _ping(self.port) and time.monotonic() < deadline:
            time.sleep(0.02)

    def restart(self) -> None:
        self.stop()
        self.start()


def unique_prefix() -> str:
    """A key prefix of its own for each store, so tests never see each other's keys."""
    return f"lwtest-{uuid.uuid4().hex[:12]}"


def delete_prefix(client: Any, prefix: str) -> None:
    with contextlib.suppress(Exception):
        for key in client.scan_iter(match=f"{prefix}:*", count=1000):
            client.delete(key)


StoreFactory = Callable[..., Store]
