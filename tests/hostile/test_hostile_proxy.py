"""Hostile streams and process faults against ``mcp-proxy`` (issue 17 items 1 and 5).

Promise (SECURITY.md): nothing a client or server writes kills the proxy; lines of any size
pass; the server's exit status is the proxy's; one signal ends both; nothing outlives it.
The proxy runs as a real subprocess in front of ``raw_server.py`` (a bare JSON-RPC server,
so every byte is the test's choice).
"""

from __future__ import annotations

import json
import os
import pathlib
import signal
import subprocess
import sys
import time
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from loopwatch import LoopGuard
from loopwatch.cli._mcp_proxy import RAW, RAW_FIRST, RAW_LAST, LineFramer
from loopwatch.integrations.mcp_proxy import McpLoopProxy

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX process groups")

SERVER = pathlib.Path(__file__).with_name("raw_server.py")
CONFIG = {
    "enabled": True,
    "warningThreshold": 10,
    "criticalThreshold": 12,
    "globalCircuitBreakerThreshold": 14,
}
SURROGATES = "\ud800 \udfff \ud83d"


def proxy_command(*server_args: str, options: tuple[str, ...] = ()) -> list[str]:
    return [
        sys.executable,
        "-m",
        "loopwatch.integrations.mcp_proxy",
        *options,
        "--",
        sys.executable,
        str(SERVER),
        *server_args,
    ]


def start(*server_args: str, options: tuple[str, ...] = ()) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        proxy_command(*server_args, options=options),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def call(rid: int, reply: str = "ok", **arguments: Any) -> bytes:
    params = {"name": "read", "arguments": {"reply": reply, **arguments}}
    return (
        json.dumps({"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": params}).encode()
        + b"\n"
    )


def gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def wait_gone(pid: int, seconds: float = 10.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if gone(pid):
            return True
        time.sleep(0.05)
    return gone(pid)


# --- content ---------------------------------------------------------------------------------


def test_lone_surrogates_survive_every_rewrite(tmp_path: pathlib.Path) -> None:
    config = tmp_path / "c.json"
    config.write_text(json.dumps({"tools": {"loopDetection": CONFIG}}))
    proxy = start("echo", options=("--config", str(config)))
    assert proxy.stdin is not None and proxy.stdout is not None
    answers = []
    for rid in range(1, 15):  # warned at 11 (the result is rewritten), blocked from 13 on
        proxy.stdin.write(call(rid, SURROGATES, path="\udc00"))
        proxy.stdin.flush()
        answers.append(json.loads(proxy.stdout.readline()))
    # A batch the proxy must split: one blocked call, one new call forwarded.
    batch = (
        b"[" + call(20, SURROGATES, path="\udc00")[:-1] + b"," + call(21, "\ud800")[:-1] + b"]\n"
    )
    proxy.stdin.write(batch)
    proxy.stdin.flush()
    split = [json.loads(proxy.stdout.readline()) for _ in range(2)]
    proxy.stdin.close()
    assert proxy.wait(timeout=30) == 0, proxy.stderr.read() if proxy.stderr else ""
    texts = [a["result"]["content"][-1]["text"] for a in answers]
    assert texts[0] == SURROGATES
    assert len(answers[10]["result"]["content"]) == 2  # the warning appended
    assert all(a["result"]["isError"] for a in answers[12:])  # blocked by the proxy
    assert sorted(m[0]["id"] for m in split) == [20, 21]  # two batches: proxy's, server's


def test_a_server_line_over_64_mib_is_relayed_and_the_session_goes_on() -> None:
    size = 65 * 1024 * 1024
    proxy = start("huge", str(size))
    assert proxy.stdin is not None and proxy.stdout is not None
    proxy.stdin.write(call(1) + call(2, "after"))
    proxy.stdin.flush()
    first = proxy.stdout.readline()
    second = json.loads(proxy.stdout.readline())
    proxy.stdin.close()
    assert proxy.wait(timeout=60) == 0
    assert len(first) > size and json.loads(first)["id"] == 1
    assert second["result"]["content"][0]["text"] == "after"


def test_a_client_line_over_the_limit_is_streamed_through_unchanged() -> None:
    proxy = start("echo", options=("--max-message-bytes", "4096"))
    assert proxy.stdin is not None and proxy.stdout is not None
    big = call(1, "y" * 3_000_000)
    proxy.stdin.write(big + call(2, "small"))
    proxy.stdin.flush()
    first = json.loads(proxy.stdout.readline())
    second = json.loads(proxy.stdout.readline())
    proxy.stdin.close()
    assert proxy.wait(timeout=60) == 0
    assert first["result"]["content"][0]["text"] == "y" * 3_000_000
    assert second["result"]["content"][0]["text"] == "small"


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    text=st.text(st.characters(min_codepoint=0, max_codepoint=0x10FFFF), max_size=20),
    rounds=st.integers(1, 8),
)
async def test_logic_never_raises_and_always_writes_json(text: str, rounds: int) -> None:
    proxy = McpLoopProxy(LoopGuard(CONFIG))
    for rid in range(1, rounds + 1):
        flow = await proxy.from_client(call(rid, text, key=text))
        for data in flow.to_client:
            json.loads(data)
        if flow.to_server:
            reply = {
                "jsonrpc": "2.0",
                "id": rid,
                "result": {"content": [{"type": "text", "text": text}]},
            }
            json.loads(await proxy.from_server(json.dumps(reply).encode() + b"\n"))
            error = {"jsonrpc": "2.0", "id": rid, "error": {"code": 1, "message": text}}
            json.loads(await proxy.from_server(json.dumps(error).encode() + b"\n"))


@settings(max_examples=200, deadline=None)
@given(
    lines=st.lists(st.binary(max_size=300).map(lambda b: b.replace(b"\n", b"")), max_size=8),
    cuts=st.lists(st.integers(1, 50), max_size=40),
    limit=st.integers(1, 200),
)
def test_framer_gives_back_the_stream_line_by_line(
    lines: list[bytes], cuts: list[int], limit: int
) -> None:
    stream = b"".join(line + b"\n" for line in lines) + b"tail"
    framer = LineFramer(limit)
    pieces = []
    at = 0
    for cut in [*cuts, len(stream)]:
        pieces += framer.feed(stream[at : at + cut])
        at += cut
    pieces += framer.close()
    assert b"".join(data for _kind, data in pieces) == stream
    rebuilt: list[bytes] = []
    for kind, data in pieces:
        if kind in (RAW, RAW_LAST):
            rebuilt[-1] += data
        else:
            rebuilt.append(data)
        assert kind != RAW_FIRST or len(data) > limit or data.endswith(b"\n")
    assert rebuilt == [line + b"\n" for line in lines] + [b"tail"]
    assert all(len(d) <= limit for k, d in pieces if k == 0)


def test_framer_joins_a_long_line_once() -> None:
    """Linear time: the pieces of a line are joined when it ends, not on every chunk."""
    framer = LineFramer(10**9)
    chunk = b"x" * 1024
    for _ in range(10_000):
        assert framer.feed(chunk) == []
    assert framer._size == 10_000 * 1024 and len(framer._parts) == 10_000
    [(kind, line)] = framer.feed(b"\n")
    assert kind == 0 and len(line) == 10_000 * 1024 + 1


# --- lifecycle and faults ------------------------------------------------------------------------


@pytest.mark.parametrize("status", [0, 3, 42])
def test_the_server_exit_status_is_forwarded_every_time(status: int) -> None:
    for _ in range(10):  # the old terminate/child-watcher race gave 255 in about half
        with start("exit", str(status)) as proxy:
            assert proxy.wait(timeout=30) == status


def test_a_server_that_ignores_stdin_eof_is_stopped_after_the_timeout() -> None:
    with start("deaf", options=("--eof-timeout", "0.5")) as proxy:
        assert proxy.stdout is not None and proxy.stdin is not None
        assert proxy.stdout.readline() == b"ready\n"
        proxy.stdin.close()  # deaf ignores SIGTERM too: TERM, then KILL after 5 s
        assert proxy.wait(timeout=30) == 128 + signal.SIGKILL


def test_a_second_sigterm_ends_both_without_a_traceback() -> None:
    with start("deaf") as proxy:
        assert proxy.stdout is not None and proxy.stderr is not None
        assert proxy.stdout.readline() == b"ready\n"
        proxy.send_signal(signal.SIGTERM)
        time.sleep(0.3)
        proxy.send_signal(signal.SIGTERM)
        assert proxy.wait(timeout=30) == 128 + signal.SIGTERM
        assert b"Traceback" not in proxy.stderr.read()


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_ends_the_server_and_the_proxy_exits_128_plus_it(sig: int) -> None:
    with start("child") as proxy:
        assert proxy.stdout is not None and proxy.stderr is not None
        grandchild = int(proxy.stdout.readline())
        proxy.send_signal(sig)
        assert proxy.wait(timeout=30) == 128 + sig
        assert b"Traceback" not in proxy.stderr.read()
    assert wait_gone(grandchild)


def test_the_servers_children_do_not_outlive_it() -> None:
    with start("child") as proxy:
        assert proxy.stdout is not None and proxy.stdin is not None
        grandchild = int(proxy.stdout.readline())
        proxy.stdin.close()  # the server exits on EOF, leaving its child behind
        assert proxy.wait(timeout=30) == 0
    assert wait_gone(grandchild)


def test_a_killed_server_is_reported_as_its_signal() -> None:
    with start("child") as proxy:
        assert proxy.stdout is not None
        proxy.stdout.readline()
        children = subprocess.run(
            ["pgrep", "-P", str(proxy.pid)], capture_output=True, text=True, check=False
        ).stdout.split()
        assert children, "the server runs as the proxy's child"
        os.kill(int(children[0]), signal.SIGKILL)
        assert proxy.wait(timeout=30) == 128 + signal.SIGKILL
