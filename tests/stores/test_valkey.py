"""The ``valkey`` Python client works as well as redis-py (against the same redis-server:
Debian's packages have no Valkey server, and Valkey speaks the same protocol)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import pytest
from _redis_helpers import delete_prefix, require_module, unique_prefix
from _scenarios import SCENARIOS, play

from loopwatch import LoopGuard, MemoryStore
from loopwatch.stores import RedisStore

pytestmark = pytest.mark.redis


@pytest.fixture(scope="module")
def valkey() -> Any:
    return require_module("valkey", "pip install valkey")


@pytest.fixture
def address(redis_url: str) -> tuple[str, int, int]:
    parts = urlsplit(redis_url)
    return parts.hostname or "127.0.0.1", parts.port or 6379, int(parts.path.strip("/") or 0)


@pytest.fixture
def prefix(redis_client: Any) -> Iterator[str]:
    value = unique_prefix()
    yield value
    delete_prefix(redis_client, value)


@pytest.mark.parametrize("decode_responses", [False, True])
@pytest.mark.parametrize("name", ["generic", "ping-pong", "compaction", "odd-strings"])
def test_valkey_client_matches_memory(
    valkey: Any, address: tuple[str, int, int], prefix: str, name: str, decode_responses: bool
) -> None:
    host, port, db = address
    client = valkey.Valkey(
        host=host, port=port, db=db, socket_timeout=0.5, decode_responses=decode_responses
    )
    scenario, config = SCENARIOS[name]
    store = RedisStore(client, prefix=prefix)
    assert play(store, scenario, config) == play(MemoryStore(), scenario, config)
    client.close()


def test_valkey_script_reload_after_flush(
    valkey: Any, address: tuple[str, int, int], prefix: str
) -> None:
    host, port, db = address
    client = valkey.Valkey(host=host, port=port, db=db)
    guard = LoopGuard({"enabled": True}, store=RedisStore(client, prefix=prefix))
    guard.before_call("read", {}, session_key="s")
    client.script_flush()
    guard.before_call("read", {}, session_key="s")
    assert len(guard.history(session_key="s")) == 2
    client.close()


async def test_valkey_asyncio_client(
    valkey: Any, address: tuple[str, int, int], prefix: str
) -> None:
    import valkey.asyncio as valkey_asyncio

    host, port, db = address
    client = valkey_asyncio.Valkey(host=host, port=port, db=db)
    guard = LoopGuard(
        {"enabled": True, "warningThreshold": 2, "criticalThreshold": 3},
        store=RedisStore(async_client=client, prefix=prefix),
    )
    actions = []
    for _ in range(4):
        decision = await guard.abefore_call("read", {}, session_key="s")
        await guard.aafter_call("read", {}, session_key="s", result=decision.tool_result or 1)
        actions.append(decision.action)
    assert actions == ["allow", "allow", "warn", "block"]
    assert len(await guard.ahistory(session_key="s")) == 3
    await client.aclose()
