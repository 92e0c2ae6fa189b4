"""The MCP proxy end to end: a real MCP client, the proxy as a subprocess, a real server.

The client is the MCP SDK's ``ClientSession`` over ``stdio_client``; the proxy is started
exactly as a host would start it (``python -m loopwatch.integrations.mcp_proxy ... --
python mcp_echo_server.py``). The message logic is also tested on its own, without pipes.
"""

from __future__ import annotations

import asyncio
import json
import os
import pathlib
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
from integration_support import ARGS, BLOCK_AT, CONFIG, CRITICAL, RESULT, TOOL, WARN_AT, WARNING
from mcp import ClientSession, MCPError, StdioServerParameters, stdio_client
from mcp.client.stdio import get_default_environment

import loopwatch
from loopwatch import LoopGuard
from loopwatch import messages as texts
from loopwatch.adapter import AdapterOptions
from loopwatch.integrations import mcp_proxy
from loopwatch.integrations.mcp_proxy import LOOP_ERROR_CODE, McpLoopProxy

SERVER = pathlib.Path(__file__).with_name("mcp_echo_server.py")
#: How the proxy is started: its module, or the CLI (``loopwatch mcp-proxy``, as the README).
PROXY_MODULE = "loopwatch.integrations.mcp_proxy"
#: The proxy's environment: ``stdio_client`` passes only a few variables (HOME, PATH, ...)
#: by default, so without this the proxy would import whatever loopwatch is installed, not
#: the one under test.
PROXY_ENV = {
    **get_default_environment(),
    "PYTHONPATH": os.pathsep.join(
        [str(pathlib.Path(loopwatch.__file__).resolve().parents[1])]
        + ([os.environ["PYTHONPATH"]] if os.environ.get("PYTHONPATH") else [])
    ),
}


@pytest.fixture
def config_file(tmp_path: pathlib.Path) -> pathlib.Path:
    path = tmp_path / "openclaw.json5"
    path.write_text(json.dumps({"tools": {"loopDetection": CONFIG}}), encoding="utf-8")
    return path


@asynccontextmanager
async def session(
    *proxy_args: str, proxied: bool = True, errlog: Any = None, cli: bool = False
) -> AsyncIterator[ClientSession]:
    """A client session with the test server, through the proxy unless ``proxied=False``
    (started as ``loopwatch mcp-proxy`` with ``cli=True``)."""
    server = [sys.executable, str(SERVER)]
    if proxied:
        start = ["loopwatch", "mcp-proxy"] if cli else [PROXY_MODULE]
        args = ["-m", *start, *proxy_args, "--", *server]
        params = StdioServerParameters(command=sys.executable, args=args, env=PROXY_ENV)
    else:
        params = StdioServerParameters(command=server[0], args=server[1:])
    log = errlog if errlog is not None else sys.stderr
    async with (
        stdio_client(params, errlog=log) as (read, write),
        ClientSession(read, write) as client,
    ):
        await client.initialize()
        yield client


def texts_of(result: Any) -> list[str]:
    return [part.text for part in result.content]


async def test_a_looping_call_is_answered_with_the_warning_then_blocked(
    config_file: pathlib.Path, tmp_path: pathlib.Path
) -> None:
    with (tmp_path / "stderr.txt").open("w+", encoding="utf-8") as stderr:
        async with session("--config", str(config_file), errlog=stderr) as client:
            answers = [await client.call_tool(TOOL, dict(ARGS)) for _ in range(BLOCK_AT + 2)]
            runs = await client.call_tool("stats", {})
        stderr.seek(0)
        logged = stderr.read()

    for n, answer in enumerate(answers[: BLOCK_AT - 1], start=1):
        assert not answer.is_error
        expected = [RESULT, WARNING] if n == WARN_AT else [RESULT]
        assert texts_of(answer) == expected, n
    for blocked in answers[BLOCK_AT - 1 :]:  # sticky: the same message every time
        assert blocked.is_error
        assert texts_of(blocked) == [CRITICAL]
    assert texts_of(runs) == [str(BLOCK_AT - 1)]  # blocked calls never reached the server
    assert f"Blocking {TOOL} due to critical loop: {CRITICAL}" in logged


async def test_a_non_looping_sequence_passes_through_unchanged(config_file: pathlib.Path) -> None:
    async def traffic(client: ClientSession) -> list[Any]:
        seen: list[Any] = [await client.list_tools()]
        for n in range(25):  # many calls, no two alike
            seen.append(await client.call_tool("echo", {"text": f"message {n}"}))
        for _ in range(5):  # alike, but fewer than a warning needs
            seen.append(await client.call_tool("tick", {}))
        seen.append(await client.call_tool("fail", {"reason": "no such file"}))
        seen.append(await client.list_prompts())
        seen.append(await client.send_ping())
        return [item.model_dump(mode="json") for item in seen]

    async def through(*args: str, proxied: bool = True) -> list[Any]:
        async with session(*args, proxied=proxied) as client:
            return await traffic(client)

    expected, got = await asyncio.gather(
        through(proxied=False), through("--config", str(config_file))
    )
    assert got == expected


def test_the_proxy_runs_the_loopwatch_under_test() -> None:
    code = "import loopwatch; print(loopwatch.__file__)"
    run = subprocess.run(
        [sys.executable, "-c", code], env=PROXY_ENV, capture_output=True, text=True, check=True
    )
    assert pathlib.Path(run.stdout.strip()).resolve() == pathlib.Path(loopwatch.__file__).resolve()


async def test_the_cli_without_a_config_guards_concurrent_calls() -> None:
    # As the README starts it (``loopwatch mcp-proxy -- server``; no --config: the default
    # thresholds, detection on), with a client that sends 4 calls at a time.
    warning = texts.GENERIC_WARNING.format(tool=TOOL, count=10)
    critical = texts.GENERIC_CRITICAL.format(tool=TOOL, count=20)
    answers: list[Any] = []
    async with session(cli=True) as client:
        for _ in range(10):
            turn = [client.call_tool(TOOL, dict(ARGS)) for _ in range(4)]
            answers += await asyncio.gather(*turn)
        runs = int(texts_of(await client.call_tool("stats", {}))[0])
        healthy = await asyncio.gather(
            *(client.call_tool("echo", {"text": f"message {n}"}) for n in range(40))
        )
    blocked = [a for a in answers if a.is_error]
    assert [texts_of(a) for a in blocked] == [[critical]] * len(blocked)
    assert runs + len(blocked) == 40  # every call was run or blocked: none lost
    assert 20 <= runs <= 23  # concurrent calls can run a call or two past the threshold
    assert all(a.is_error for a in answers[-4:])  # the loop ends blocked
    warned = [texts_of(a) for a in answers if len(texts_of(a)) == 2]
    assert warned == [[RESULT, warning]]
    assert [texts_of(a) for a in healthy] == [[f"message {n}"] for n in range(40)]
    assert not any(a.is_error for a in healthy)


async def test_end_run_answers_with_a_json_rpc_error(config_file: pathlib.Path) -> None:
    async with session("--config", str(config_file), "--on-critical", "end_run") as client:
        for _ in range(BLOCK_AT - 1):
            assert not (await client.call_tool(TOOL, dict(ARGS))).is_error
        with pytest.raises(MCPError) as caught:
            await client.call_tool(TOOL, dict(ARGS))
        assert texts_of(await client.call_tool("stats", {})) == [str(BLOCK_AT - 1)]
    assert caught.value.error.code == LOOP_ERROR_CODE
    assert caught.value.error.message == CRITICAL


def test_arguments_are_checked(tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert mcp_proxy.main([]) == 2
    assert "missing -- COMMAND" in capsys.readouterr().err
    missing = str(tmp_path / "missing.json5")
    assert mcp_proxy.main(["--config", missing, "--", sys.executable, str(SERVER)]) == 2
    assert mcp_proxy.main(["--on-critical", "explode", "--", "x"]) == 2
    assert mcp_proxy.main(["--", str(tmp_path / "no-such-server")]) == 127
    assert capsys.readouterr().out == ""  # stdout belongs to the protocol
    # A blank session would guard nothing: refused before the server starts.
    assert mcp_proxy.main(["--session", " ", "--", str(tmp_path / "no-such-server")]) == 2
    assert capsys.readouterr().err.endswith(
        "error: --session: session_key must be a non-blank str, not ' '\n"
    )


@pytest.mark.skipif(sys.platform == "win32", reason="SIGTERM is a POSIX signal")
def test_sigterm_stops_the_server_too() -> None:
    sleeper = "import os, time; print(os.getpid(), flush=True); time.sleep(60)"
    command = [sys.executable, "-m", "loopwatch.integrations.mcp_proxy"]
    with subprocess.Popen(
        [*command, "--", sys.executable, "-c", sleeper],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    ) as proxy_process:
        assert proxy_process.stdout is not None
        server_pid = int(proxy_process.stdout.readline())  # relayed: it is not JSON
        proxy_process.send_signal(signal.SIGTERM)
        assert proxy_process.wait(timeout=10) == 128 + signal.SIGTERM
    with pytest.raises(ProcessLookupError):
        os.kill(server_pid, 0)  # the proxy reaped it


# --- the message logic alone -----------------------------------------------------------------


def line(message: object) -> bytes:
    return json.dumps(message).encode() + b"\n"


def call(rid: object, name: str = TOOL, arguments: object = ARGS) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": rid,
        "method": "tools/call",
        "params": {"name": name, "arguments": arguments},
    }


def ok(rid: object, text: str = RESULT) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": rid,
        "result": {"content": [{"type": "text", "text": text}], "isError": False},
    }


def proxy(**options: Any) -> McpLoopProxy:
    return McpLoopProxy(LoopGuard(CONFIG), options=AdapterOptions(**options))


async def loop(p: McpLoopProxy, times: int) -> list[bytes]:
    answers = []
    for rid in range(1, times + 1):
        flow = await p.from_client(line(call(rid)))
        answers += flow.to_client
        if flow.to_server:
            assert flow.to_server == [line(call(rid))]  # forwarded byte for byte
            answers.append(await p.from_server(line(ok(rid))))
    return answers


async def test_logic_blocks_and_warns() -> None:
    answers = [json.loads(a) for a in await loop(proxy(), BLOCK_AT)]
    assert answers[WARN_AT - 1]["result"]["content"][-1] == {"type": "text", "text": WARNING}
    assert answers[BLOCK_AT - 1] == {
        "jsonrpc": "2.0",
        "id": BLOCK_AT,
        "result": {"content": [{"type": "text", "text": CRITICAL}], "isError": True},
    }


async def test_logic_shadow_mode_never_blocks() -> None:
    p = McpLoopProxy(LoopGuard(CONFIG, enforce=False), options=AdapterOptions(warn_model=False))
    answers = await loop(p, BLOCK_AT + 3)
    assert answers == [line(ok(rid)) for rid in range(1, BLOCK_AT + 4)]


async def test_logic_passes_other_lines_through_unchanged() -> None:
    p = proxy()
    for raw in (b"not json\n", b"42\n", line({"jsonrpc": "2.0", "method": "ping", "id": 1})):
        assert (await p.from_client(raw)).to_server == [raw]
        assert await p.from_server(raw) == raw
    notice = line({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})
    assert await p.from_server(notice) == notice
    unrelated = line(ok(99))
    assert await p.from_server(unrelated) == unrelated


async def test_logic_warns_inside_a_json_rpc_error() -> None:
    p = proxy()
    await loop(p, WARN_AT - 1)
    await p.from_client(line(call(WARN_AT)))
    error = {"jsonrpc": "2.0", "id": WARN_AT, "error": {"code": -32603, "message": "busy"}}
    answer = json.loads(await p.from_server(line(error)))
    assert answer["error"] == {"code": -32603, "message": f"busy\n\n{WARNING}"}


async def test_logic_records_unknown_tools_by_the_listed_tools() -> None:
    guard = LoopGuard(CONFIG)
    p = McpLoopProxy(guard, session_key="s")
    await p.from_client(line({"jsonrpc": "2.0", "id": "l", "method": "tools/list"}))
    listing = {"jsonrpc": "2.0", "id": "l", "result": {"tools": [{"name": TOOL}]}}
    await p.from_server(line(listing))
    assert p.known_tools == {TOOL}
    await p.from_client(line(call(1, name="open_file")))
    failed = {"content": [{"type": "text", "text": "no such tool"}], "isError": True}
    await p.from_server(line({"jsonrpc": "2.0", "id": 1, "result": failed}))
    (record,) = guard.history(session_key="s")
    assert record.unknown_tool_name == "open_file"


async def test_logic_handles_batches_and_cancellations() -> None:
    p = proxy()
    await loop(p, BLOCK_AT - 1)
    batch = [call(100), {"jsonrpc": "2.0", "id": 101, "method": "ping"}]
    flow = await p.from_client(line(batch))
    assert json.loads(flow.to_server[0]) == [batch[1]]
    (answers,) = flow.to_client
    assert json.loads(answers)[0]["result"]["isError"] is True
    # A cancelled call's late answer is passed on untouched.
    p2 = proxy()
    await p2.from_client(line(call(7)))
    cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 7}}
    assert (await p2.from_client(line(cancel))).to_server == [line(cancel)]
    assert await p2.from_server(line(ok(7))) == line(ok(7))


async def test_logic_input_required_continues_the_same_call() -> None:
    guard = LoopGuard(CONFIG)
    p = McpLoopProxy(guard, session_key="s")
    await p.from_client(line(call(1)))
    pending = {"resultType": "input_required", "inputRequests": {"a": {}}, "requestState": "x"}
    await p.from_server(line({"jsonrpc": "2.0", "id": 1, "result": pending}))
    (record,) = guard.history(session_key="s")
    assert record.result_hash is None  # not an outcome yet
    retry = call(2)
    retry["params"].update({"inputResponses": {"a": {}}, "requestState": "x"})
    assert (await p.from_client(line(retry))).to_server == [line(retry)]
    await p.from_server(line(ok(2)))
    (record,) = guard.history(session_key="s")
    assert record.result_hash is not None


async def test_logic_recover_blocks_once_then_ends_with_a_json_rpc_error() -> None:
    """``--on-critical recover``: the first critical is a recovery message (an isError
    result), a second critical in the same run is a JSON-RPC error (issue 15)."""
    answers = [json.loads(a) for a in await loop(proxy(on_critical="recover"), BLOCK_AT + 1)]
    first = answers[BLOCK_AT - 1]
    assert first["result"]["isError"] is True
    assert CRITICAL in first["result"]["content"][0]["text"]
    assert first["result"]["content"][0]["text"] != CRITICAL  # the recovery text is added
    second = answers[BLOCK_AT]
    assert "error" in second and second["error"]["code"] == LOOP_ERROR_CODE


@pytest.mark.parametrize(
    "params",
    [{"arguments": {"path": "a"}}, {"name": 7, "arguments": {"path": "a"}}, "not-an-object"],
    ids=["no-name", "int-name", "params-not-an-object"],
)
async def test_logic_guards_malformed_tool_calls_too(params: object) -> None:
    """A malformed ``tools/call`` repeated forever is blocked like any other (issue 17)."""
    p = proxy()
    blocked = 0
    for rid in range(1, BLOCK_AT + 2):
        message = {"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": params}
        flow = await p.from_client(line(message))
        if flow.to_server:
            error = {"jsonrpc": "2.0", "id": rid, "error": {"code": -32602, "message": "bad"}}
            await p.from_server(line(error))
        else:
            blocked += 1
    assert blocked >= 1
