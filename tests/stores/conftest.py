"""Fixtures for the store suites: real ``redis-server`` processes on loopback, no docker.

``LOOPWATCH_REDIS_URL`` names a server to use for the shared suites; without it a server
is started here, on a free loopback port in a temporary folder. Fault tests always start
their own servers (they stop them), and the cluster tests start three nodes.

Missing ``redis-server`` (or the ``redis`` package) is a failure, not a skip, so CI can
never go green without the Redis suite; and it is one clear line, once for the whole run
(:func:`pytest_collection_modifyitems`), not a failure per test. Set
``LOOPWATCH_ALLOW_NO_REDIS=1`` to skip those tests instead, with a loud reason in the summary.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Final

import pytest
from _redis_helpers import (
    ALLOW_NO_REDIS_ENV,
    REDIS_URL_ENV,
    RedisServer,
    StoreFactory,
    delete_prefix,
    free_port,
    redis_binary,
    unique_prefix,
)

from loopwatch import MemoryStore, Store
from loopwatch.testing import ReferenceStore


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "redis: needs a real redis-server; fails without one unless "
        f"{ALLOW_NO_REDIS_ENV}=1 (then skipped, loudly)",
    )


MISSING_REDIS: Final = (
    "the Redis tests need {what}, which is missing: {install} (or point {url_env} at a "
    "server, or set {allow_env}=1 to skip them)"
)


@pytest.hookimpl(trylast=True)  # after -m / -k deselected what they deselect
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Stop the whole run with one line when selected Redis tests cannot run."""
    if os.environ.get(ALLOW_NO_REDIS_ENV) == "1":
        return
    if not any(item.get_closest_marker("redis") for item in items):
        return
    missing = []
    if not os.environ.get(REDIS_URL_ENV) and shutil.which("redis-server") is None:
        missing.append(("redis-server", "apt-get install redis-server"))
    if importlib.util.find_spec("redis") is None:
        missing.append(("the 'redis' package", "pip install -e '.[all,dev]'"))
    if missing:
        what, install = missing[0]
        raise pytest.UsageError(
            MISSING_REDIS.format(
                what=what, install=install, url_env=REDIS_URL_ENV, allow_env=ALLOW_NO_REDIS_ENV
            )
        )


@pytest.fixture(scope="session")
def redis_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The shared server of the contract suites (``LOOPWATCH_REDIS_URL`` or our own)."""
    given = os.environ.get(REDIS_URL_ENV)
    if given:
        yield given
        return
    server = RedisServer(tmp_path_factory.mktemp("redis")).start()
    try:
        yield server.url
    finally:
        server.stop()


@pytest.fixture
def redis_server_factory(tmp_path: Path) -> Iterator[Callable[..., RedisServer]]:
    """Start dedicated servers (for tests that stop them); all stopped at teardown."""
    servers: list[RedisServer] = []

    def make(*extra: str) -> RedisServer:
        server = RedisServer(tmp_path / f"redis-{len(servers)}", *extra).start()
        servers.append(server)
        return server

    yield make
    for server in servers:
        server.stop()


@pytest.fixture
def redis_client(redis_url: str) -> Iterator[Any]:
    """A plain redis-py client on the shared server, for looking at keys directly."""
    import redis

    client = redis.Redis.from_url(redis_url)
    yield client
    client.close()


@pytest.fixture(
    params=["reference", "memory", "sqlite", pytest.param("redis", marks=pytest.mark.redis)]
)
def store_kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def make_store(
    store_kind: str, request: pytest.FixtureRequest, tmp_path: Path
) -> Iterator[StoreFactory]:
    """Build stores of the parametrised kind with the given options (``idle_ttl_s`` …)."""
    built: list[tuple[Store, str]] = []
    files: list[Store] = []

    def make(**options: Any) -> Store:
        if store_kind in ("memory", "reference"):
            options.pop("use_asyncio", None)  # in-process stores have no I/O to await
            if store_kind == "reference":  # the template and oracle of loopwatch.testing
                return ReferenceStore(**options)
            return MemoryStore(**options)
        if store_kind == "sqlite":
            from loopwatch.stores.sqlite import SqliteStore

            options.pop("use_asyncio", None)  # a local file: the sync methods serve both
            sqlite_store = SqliteStore(tmp_path / f"store-{len(files)}.db", **options)
            files.append(sqlite_store)
            return sqlite_store
        from loopwatch.stores import RedisStore

        url = request.getfixturevalue("redis_url")
        prefix = unique_prefix()
        store = RedisStore.from_url(url, prefix=prefix, **options)
        built.append((store, prefix))
        return store

    yield make
    for opened in files:
        opened.close()
    if built:
        import redis

        client = redis.Redis.from_url(request.getfixturevalue("redis_url"))
        for store, prefix in built:
            delete_prefix(client, prefix)
            store.close()
        client.close()


@pytest.fixture
def redis_store_factory(redis_url: str, redis_client: Any) -> Iterator[Callable[..., Any]]:
    """Build RedisStores on the shared server, each with its own prefix, cleaned after."""
    from loopwatch.stores import RedisStore

    built: list[RedisStore] = []

    def make(**options: Any) -> RedisStore:
        options.setdefault("prefix", unique_prefix())
        store = RedisStore.from_url(options.pop("url", redis_url), **options)
        built.append(store)
        return store

    yield make
    for store in built:
        delete_prefix(redis_client, store.prefix)
        store.close()


@pytest.fixture(scope="session")
def redis_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[int]]:
    """A three-node Redis Cluster (no replicas) on loopback ports; yields the ports."""
    redis_binary()
    cli = redis_binary("redis-cli")
    root = tmp_path_factory.mktemp("cluster")
    nodes: list[RedisServer] = []
    try:
        for index in range(3):
            port = free_port(cluster=True)
            nodes.append(
                RedisServer(
                    root / f"node-{index}",
                    "--cluster-enabled",
                    "yes",
                    "--cluster-config-file",
                    str(root / f"node-{index}" / "nodes.conf"),
                    "--cluster-node-timeout",
                    "2000",
                    port=port,
                ).start()
            )
        ports = [node.port for node in nodes]
        subprocess.run(
            [
                cli,
                "--cluster",
                "create",
                *(f"127.0.0.1:{port}" for port in ports),
                "--cluster-replicas",
                "0",
                "--cluster-yes",
            ],
            check=True,
            capture_output=True,
            timeout=30,
        )
        deadline = time.monotonic() + 20
        for port in ports:
            while True:
                info = subprocess.run(
                    [cli, "-p", str(port), "cluster", "info"],
                    capture_output=True,
                    text=True,
                    timeout=5,
                ).stdout
                if "cluster_state:ok" in info:
                    break
                if time.monotonic() > deadline:
                    raise RuntimeError(f"cluster node {port} not ready:\n{info}")
                time.sleep(0.05)
        yield ports
    finally:
        for node in nodes:
            node.stop()
