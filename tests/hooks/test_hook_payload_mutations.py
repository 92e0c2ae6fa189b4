"""Real hook payloads with any field replaced by any JSON value: ``run_hook`` answers in
the host's contract without reaching its catch-all (which would hide a loopwatch bug as an
allowed call). The guard is strict, so an internal error cannot be swallowed earlier.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from typing import Any

import pytest
from _hookkit import EVENTS, payload
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from loopwatch import LoopGuard, MemoryStore
from loopwatch.hooks import AGENTS, run_hook

JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats()  # NaN and infinities too: Python's JSON writes and reads them
    | st.text(st.characters(min_codepoint=0, max_codepoint=0x10FFFF), max_size=6),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3)
    ),
    max_leaves=8,
)
BASES = [
    (agent, json.loads(payload(agent, kind, session="S", call="c")))
    for agent in AGENTS
    for kind in ("pre", "post", "fail", "compact")
    if EVENTS[agent].get(kind) is not None
]


def _paths(value: object, prefix: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    if isinstance(value, dict):
        for key, inner in value.items():
            yield (*prefix, key)
            yield from _paths(inner, (*prefix, key))


@settings(max_examples=400, suppress_health_check=list(HealthCheck), deadline=None)
@given(data=st.data())
def test_a_mutated_real_payload_never_reaches_the_catch_all(
    data: st.DataObject, caplog: pytest.LogCaptureFixture
) -> None:
    agent, base = data.draw(st.sampled_from(BASES))
    mutated: dict[str, Any] = json.loads(json.dumps(base))
    paths = list(_paths(mutated))
    for _ in range(data.draw(st.integers(1, 3))):
        path = data.draw(st.sampled_from(paths))
        node: Any = mutated
        for key in path[:-1]:
            node = node.get(key) if isinstance(node, dict) else None
        if isinstance(node, dict):
            node[path[-1]] = data.draw(JSON)
    guard = LoopGuard({"enabled": True}, store=MemoryStore(), profile="adaptive", strict=True)
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="loopwatch.hooks"):
        for _ in range(2):
            result = run_hook(agent, json.dumps(mutated), guard)
            assert result.exit_code == 0 and result.stderr == ""
            if result.stdout.strip():
                assert isinstance(json.loads(result.stdout), dict)
    crashed = [r.getMessage() for r in caplog.records if " failed: " in r.getMessage()]
    assert crashed == []
