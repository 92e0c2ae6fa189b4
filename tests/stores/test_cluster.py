"""Redis Cluster: three nodes on loopback ports, started by the ``redis_cluster`` fixture.

A session's four keys share a hash tag, so each script runs on the one node that owns
the session's slot; different sessions spread over the nodes, and each node gets the
scripts the first time it needs them.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from _scenarios import SCENARIOS, play

from loopwatch import LoopGuard, MemoryStore
from loopwatch.stores import RedisStore, store_from_url

pytestmark = pytest.mark.redis


@pytest.fixture
def cluster_client(redis_cluster: list[int]) -> Iterator[Any]:
    from redis.cluster import RedisCluster

    client = RedisCluster(host="127.0.0.1", port=redis_cluster[0], socket_timeout=1)
    yield client
    client.close()


@pytest.mark.parametrize("name", ["generic", "runs", "compaction", "odd-strings", "buckets"])
def test_cluster_matches_memory(cluster_client: Any, name: str) -> None:
    scenario, config = SCENARIOS[name]
    store = RedisStore(cluster_client, prefix=f"cl-{name}")
    assert play(store, scenario, config) == play(MemoryStore(), scenario, config)


def test_sessions_spread_over_the_nodes(cluster_client: Any, redis_cluster: list[int]) -> None:
    import redis

    store = RedisStore(cluster_client, prefix="cl-spread")
    guard = LoopGuard({"enabled": True}, store=store)
    sessions = [f"agent:main:{i}" for i in range(24)]
    for session in sessions:
        guard.before_call("read", {"p": 1}, session_key=session)
        guard.after_call("read", {"p": 1}, session_key=session, result="x")
    for session in sessions:
        assert len(guard.history(session_key=session)) == 1
        slots = {cluster_client.keyslot(key) for key in store.keys(session)}
        assert len(slots) == 1
    used = 0
    for port in redis_cluster:
        node = redis.Redis(port=port)
        used += bool(list(node.scan_iter(match="cl-spread:*")))
        node.close()
    assert used == 3


def test_cluster_url_form(redis_cluster: list[int]) -> None:
    store = store_from_url(f"redis://127.0.0.1:{redis_cluster[1]}", cluster=True, prefix="cl-url")
    guard = LoopGuard({"enabled": True, "warningThreshold": 2}, store=store)
    actions = [guard.before_call("read", {}, session_key=f"s{i % 2}").action for i in range(6)]
    assert actions == ["allow", "allow", "allow", "allow", "warn", "warn"]
    store.close()


async def test_cluster_asyncio_client(redis_cluster: list[int]) -> None:
    store = RedisStore.from_url(
        f"redis://127.0.0.1:{redis_cluster[2]}", cluster=True, use_asyncio=True, prefix="cl-a"
    )
    guard = LoopGuard({"enabled": True, "warningThreshold": 2, "criticalThreshold": 3}, store=store)
    actions = []
    for _ in range(4):
        decision = await guard.abefore_call("read", {}, session_key="async")
        await guard.aafter_call("read", {}, session_key="async", result=decision.tool_result or 1)
        actions.append(decision.action)
    assert actions == ["allow", "allow", "warn", "block"]
    await store.aclose()
