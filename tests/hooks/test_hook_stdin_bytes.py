"""What the hook process makes of stdin as bytes: a byte order mark, bytes that are not
UTF-8 (the real process, fed raw bytes as a host writes them)."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from _hookkit import ALLOW, HookRunner, payload

from loopwatch.cli._install import hook_argv
from loopwatch.hooks import AGENTS

BOM = b"\xef\xbb\xbf"


@pytest.fixture
def hooks(tmp_path: Path) -> Iterator[HookRunner]:
    runner = HookRunner(tmp_path)
    yield runner
    runner.close()


def _run(hooks: HookRunner, agent: str, stdin: bytes) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        hook_argv(agent),
        input=stdin,
        capture_output=True,
        env=hooks.env(),
        timeout=120,
        check=False,
    )


def _records(hooks: HookRunner, key: str) -> int:
    store = hooks.store()
    try:
        return len(store.history(key, 0))
    finally:
        store.close()


@pytest.mark.parametrize("agent", AGENTS)
def test_a_payload_after_a_byte_order_mark_is_guarded(hooks: HookRunner, agent: str) -> None:
    # cursor-agent writes a UTF-8 BOM before every payload (DobermanCore/Doberman-Core#576,
    # found replaying captured payloads); json.loads refuses one, so the hook used to let
    # every call through unguarded.
    text = payload(agent, "pre", session="S", call="c1")
    done = _run(hooks, agent, BOM + text.encode("utf-8"))
    assert done.returncode == 0
    assert done.stdout.decode().strip() == ALLOW[agent]
    assert _records(hooks, f"{agent}:S") == 1


@pytest.mark.parametrize(
    "stdin",
    [b"\xff\xfe{\x00}\x00", b"\xc3\x28{}", BOM + BOM + b"{}", b"\x00" * 64],
    ids=["utf-16", "bad-utf-8", "two-boms", "nul"],
)
@pytest.mark.parametrize("agent", AGENTS)
def test_bytes_that_are_no_payload_are_allowed_quietly(
    hooks: HookRunner, agent: str, stdin: bytes
) -> None:
    done = _run(hooks, agent, stdin)
    assert done.returncode == 0
    assert done.stdout.decode().strip() == ALLOW[agent]
    assert done.stderr == b""
    log = (hooks.state / "loopwatch" / "hook.log").read_text(encoding="utf-8")
    assert "payload is not" in log  # the reason is logged


@pytest.mark.parametrize("agent", AGENTS)
def test_a_byte_that_is_not_utf8_inside_a_payload_is_read_as_a_replacement(
    hooks: HookRunner, agent: str
) -> None:
    # A tool input with a stray byte (a Latin-1 file name) is still a call to guard.
    text = payload(agent, "pre", session="S", call="c1", command="cat caf@E9")
    done = _run(hooks, agent, text.encode("utf-8").replace(b"@E9", b"\xe9"))
    assert done.returncode == 0
    assert done.stdout.decode().strip() == ALLOW[agent]
    assert _records(hooks, f"{agent}:S") == 1


def test_a_large_payload_is_guarded_and_one_over_the_limit_is_allowed_and_logged(
    hooks: HookRunner,
) -> None:
    from loopwatch.hooks import MAX_PAYLOAD_BYTES

    post = json.loads(payload("claude-code", "post", session="S", call="c1"))
    post["tool_response"]["stdout"] = "x" * (8 << 20)  # an 8 MiB test log
    done = _run(
        hooks, "claude-code", payload("claude-code", "pre", session="S", call="c1").encode()
    )
    assert done.returncode == 0
    done = _run(hooks, "claude-code", json.dumps(post).encode())
    assert (done.returncode, done.stdout, done.stderr) == (0, b"", b"")
    store = hooks.store()
    try:
        (record,) = store.history("claude-code:S", 0)
    finally:
        store.close()
    assert record.result_hash is not None  # a digest, not the 8 MiB
    post["tool_response"]["stdout"] = "x" * (MAX_PAYLOAD_BYTES + 1)
    done = _run(hooks, "claude-code", json.dumps(post).encode())
    assert (done.returncode, done.stdout, done.stderr) == (0, b"", b"")
    log = (hooks.state / "loopwatch" / "hook.log").read_text(encoding="utf-8")
    assert "over 67108864 bytes, not read; allowing" in log
