"""``loopwatch serve``: a real server process, every API op, bad input, HTTP, shutdown.

The server is the real ``python -m loopwatch.cli serve`` process running
``loopwatch.hooks.default_guard``; hook answers are compared with ``loopwatch.hooks.run_hook``
in this process.
"""

from __future__ import annotations

import http.client
import json
import os
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import threading
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import loopwatch.hooks
from loopwatch import LoopGuard, serve
from loopwatch._serve_api import Dispatcher, encode_reply
from loopwatch.cli._install import hook_argv
from loopwatch.serve import MAX_REQUEST_BYTES, ServeError

SERVE = [sys.executable, "-m", "loopwatch.cli", "serve"]


@dataclass
class Server:
    proc: subprocess.Popen[str]
    socket_path: str
    state: Path
    port: int | None
    token: str | None

    def call(self, op: str, **fields: Any) -> dict[str, Any]:
        return serve.request(op, fields, socket_path=self.socket_path)


def start_server(root: Path, *extra: str, http: bool = True) -> Server:
    state = root / "state"
    socket_path = str(root / "s.sock")
    args = [*SERVE, "--socket", socket_path]
    args += ["--store", f"sqlite:///{root / 'serve.db'}"]
    if http:
        args += ["--http", "0"]
    env = {**os.environ, "XDG_STATE_HOME": str(state)}
    proc = subprocess.Popen(args + list(extra), env=env, stderr=subprocess.PIPE, text=True)
    assert proc.stderr is not None
    lines = [proc.stderr.readline()]
    if http:
        lines.append(proc.stderr.readline())
    assert lines[0].startswith("loopwatch serve: listening on"), lines
    port = token = None
    if http:
        port = int(lines[1].split("127.0.0.1:")[1].split()[0])
        token = (state / "loopwatch" / "serve.token").read_text().strip()
    return Server(proc, socket_path, state, port, token)


def stop_server(server: Server, sig: int = signal.SIGTERM) -> int:
    if server.proc.poll() is None:
        server.proc.send_signal(sig)
    code = server.proc.wait()
    assert server.proc.stderr is not None
    server.proc.stderr.close()
    return code


@pytest.fixture
def root() -> Iterator[Path]:
    # Short paths: a unix socket path must fit in 107 bytes.
    folder = Path(tempfile.mkdtemp(prefix="lw", dir="/tmp"))
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(scope="module")
def server() -> Iterator[Server]:
    folder = Path(tempfile.mkdtemp(prefix="lw", dir="/tmp"))
    running = start_server(folder)
    yield running
    assert stop_server(running) == 0
    shutil.rmtree(folder, ignore_errors=True)


def raw_exchange(path: str, data: bytes) -> list[dict[str, Any]]:
    """Send raw bytes, half-close, and read every reply line."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
        conn.connect(path)
        conn.sendall(data)
        conn.shutdown(socket.SHUT_WR)
        chunks = []
        while chunk := conn.recv(65536):
            chunks.append(chunk)
    return [json.loads(line) for line in b"".join(chunks).splitlines() if line.strip()]


# --- the API over the socket ---------------------------------------------------------------


def test_health_names_the_process_and_every_op(server: Server) -> None:
    health = server.call("health")
    assert health["status"] == "ok"
    assert health["pid"] == server.proc.pid
    assert health["profile"] == "adaptive"
    assert health["ops"] == list(serve.OPS)


def test_the_socket_and_the_token_are_private(server: Server) -> None:
    assert stat.S_IMODE(os.stat(server.socket_path).st_mode) == 0o600
    token_file = server.state / "loopwatch" / "serve.token"
    assert stat.S_IMODE(token_file.stat().st_mode) == 0o600
    assert stat.S_IMODE((server.state / "loopwatch").stat().st_mode) == 0o700


def test_a_call_round_trip_records_digests_only(server: Server) -> None:
    session = "round-trip"
    decision = server.call(
        "before_call",
        session_key=session,
        tool_name="exec",
        params={"command": "ls /secret"},
        tool_call_id="c1",
    )
    assert decision["action"] == "allow"
    assert decision["blocked"] is False
    assert decision["verdict"]["stuck"] is False
    after = server.call(
        "after_call",
        session_key=session,
        tool_name="exec",
        params={"command": "ls /secret"},
        result="file-a file-b",
        tool_call_id="c1",
    )
    assert after["recorded"] is True
    assert after["end_run"] is False
    record = after["record"]
    assert record["tool_call_id"] == "c1"
    assert record["args_hash"].startswith("exec:")
    assert "secret" not in json.dumps(after) and "file-a" not in json.dumps(after)
    assert server.call("history", session_key=session)["records"] == [record]
    assert server.call("compaction_retry", session_key=session, run_id="r1") == {"armed": True}


def test_a_failed_call_is_recorded_as_an_error(server: Server) -> None:
    fields = {"session_key": "failing", "tool_name": "read", "params": {"path": "x"}}
    server.call("before_call", **fields)
    failed = server.call("after_call", **fields, error="ENOENT")
    ok = server.call("after_call", **{**fields, "session_key": "other"}, result="ENOENT")
    assert failed["record"]["result_hash"] != ok["record"]["result_hash"]


def test_the_server_blocks_a_loop_like_a_guard_in_process(server: Server, root: Path) -> None:
    local = loopwatch.hooks.default_guard(store_url=f"sqlite:///{root / 'replay.db'}")
    remote_actions, local_actions = [], []
    for _ in range(30):
        fields: dict[str, Any] = {"tool_name": "web_search", "params": {"q": "same"}}
        remote = server.call("before_call", session_key="looping", **fields)
        remote_actions.append(remote["action"])
        decision = local.before_call("web_search", {"q": "same"}, session_key="looping")
        local_actions.append(decision.action)
        result = remote["tool_result"] if remote["blocked"] else "no results"
        server.call("after_call", session_key="looping", **fields, result=result)
        local.after_call(
            "web_search",
            {"q": "same"},
            session_key="looping",
            result=decision.tool_result if decision.tool_result is not None else "no results",
        )
    assert remote_actions == local_actions
    assert "block" in remote_actions
    assert remote_actions[0] == "allow"


def test_the_hook_op_answers_like_run_hook_in_process(server: Server, root: Path) -> None:
    hooks = loopwatch.hooks
    local = hooks.default_guard(store_url=f"sqlite:///{root / 'hook.db'}")
    remote_answers, local_answers = [], []
    for index in range(30):
        for event in ("PreToolUse", "PostToolUse"):
            payload = json.dumps(
                {
                    "session_id": "hook-session",
                    "hook_event_name": event,
                    "tool_name": "Bash",
                    "tool_input": {"command": "cat missing.txt"},
                    "tool_use_id": f"t{index}",
                    "tool_response": "cat: missing.txt: No such file",
                    "cwd": "/tmp",
                    "transcript_path": "/tmp/t.jsonl",
                }
            )
            answer = server.call("hook", agent="claude-code", payload=payload)
            remote_answers.append((answer["stdout"], answer["exit_code"], answer["stderr"]))
            result = hooks.run_hook("claude-code", payload, local)
            local_answers.append((result.stdout, result.exit_code, result.stderr))
    assert remote_answers == local_answers
    assert len(set(remote_answers)) > 1  # the loop was noticed at some point


def test_try_hook_uses_the_server(server: Server) -> None:
    payload = json.dumps(
        {
            "session_id": "try-hook",
            "hook_event_name": "PreToolUse",
            "tool_name": "Read",
            "tool_input": {"file_path": "a"},
            "tool_use_id": "t1",
        }
    )
    answer = serve.try_hook("claude-code", payload, socket_path=server.socket_path)
    assert answer is not None
    stdout, exit_code, stderr = answer
    assert (exit_code, isinstance(stdout, str), isinstance(stderr, str)) == (0, True, True)
    assert server.call("history", session_key="claude-code:try-hook")["records"] != []


def test_hooks_with_other_options_are_sent_back(server: Server) -> None:
    mine = server.call("health")["options"]
    assert mine["config"] is None and mine["profile"] is None
    assert mine["store"].startswith("sqlite:///")
    payload = json.dumps({"session_id": "opts", "hook_event_name": "PreToolUse"})
    same = serve.hook_options(store_url=mine["store"])
    assert serve.try_hook("codex", payload, socket_path=server.socket_path, options=same)
    other = serve.hook_options(store_url=mine["store"], profile="reference")
    assert serve.try_hook("codex", payload, socket_path=server.socket_path, options=other) is None
    with pytest.raises(ServeError) as caught:
        server.call("hook", agent="codex", payload=payload, options=other)
    assert caught.value.code == "mismatch"
    with pytest.raises(ServeError) as caught:
        server.call("hook", agent="codex", payload=payload, options={"color": "red"})
    assert caught.value.code == "bad_request"


def test_try_hook_is_none_without_a_server(root: Path) -> None:
    assert serve.try_hook("codex", "{}", socket_path=str(root / "none.sock")) is None
    stale = str(root / "stale.sock")
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(stale)
    listener.close()  # the file stays, nobody listens: as after a killed server
    assert serve.try_hook("codex", "{}", socket_path=stale) is None


def test_try_hook_is_none_when_the_server_refuses(server: Server) -> None:
    assert serve.try_hook("no-such-agent", "{}", socket_path=server.socket_path) is None


# --- bad input ----------------------------------------------------------------------------


def test_bad_requests_get_json_errors_and_the_connection_goes_on(server: Server) -> None:
    lines = [
        b"{not json",
        b"[1, 2]",
        b'{"op": "explode"}',
        b'{"no_op": true}',
        b'{"op": "before_call", "tool_name": "exec"}',
        b'{"op": "before_call", "session_key": "s", "tool_name": 7}',
        b'{"op": "after_call", "session_key": "s", "tool_name": "x", "run_id": 5}',
        b'{"op": "hook", "agent": "vim", "payload": "{}"}',
        b'{"op": "hook", "agent": "codex", "payload": 12}',
        b"\xff\xfe",
        b'{"op": "health", "id": 42}',
    ]
    replies = raw_exchange(server.socket_path, b"\n".join(lines) + b"\n")
    codes = [reply.get("error", {}).get("code") for reply in replies]
    assert codes == [
        "bad_json",
        "bad_request",
        "unknown_op",
        "bad_request",
        "bad_request",
        "bad_request",
        "bad_request",
        "bad_request",
        "bad_request",
        "bad_json",
        None,
    ]
    assert all(reply["ok"] is False for reply in replies[:-1])
    assert replies[-1]["ok"] is True and replies[-1]["id"] == 42
    assert "session_key" in replies[4]["error"]["message"]


def test_deep_nesting_and_lone_surrogates_are_answered(server: Server) -> None:
    deep = b"[" * 200_000 + b"]" * 200_000
    lines = [
        deep,
        b'{"op": "health", "id": ' + deep + b"}",
        b'{"op": "health", "id": "\\ud800"}',
        b'{"op": "before_call", "session_key": "\\udfff", "tool_name": "\\ud800x"}',
    ]
    replies = raw_exchange(server.socket_path, b"\n".join(lines) + b"\n")
    assert [reply["ok"] for reply in replies] == [False, False, True, True]
    assert replies[2]["id"] == "\ud800"
    assert server.call("health")["status"] == "ok"


def test_a_last_request_without_newline_is_answered(server: Server) -> None:
    assert raw_exchange(server.socket_path, b'{"op": "health"}')[0]["ok"] is True


def test_an_oversize_request_is_refused_and_the_server_lives(server: Server) -> None:
    big = b'{"op": "health", "pad": "' + b"x" * (MAX_REQUEST_BYTES + 10) + b'"}\n'
    replies = raw_exchange(server.socket_path, big)
    assert [reply["error"]["code"] for reply in replies] == ["request_too_large"]
    assert server.call("health")["status"] == "ok"


def test_the_client_raises_serve_error_on_refusal(server: Server) -> None:
    with pytest.raises(ServeError) as caught:
        server.call("before_call", tool_name="exec")
    assert caught.value.code == "bad_request"


# --- HTTP ---------------------------------------------------------------------------------


def http_call(
    server: Server, method: str, path: str, body: bytes = b"", headers: dict[str, str] | None = None
) -> tuple[int, dict[str, Any]]:
    assert server.port is not None
    conn = http.client.HTTPConnection("127.0.0.1", server.port)
    try:
        conn.request(method, path, body=body, headers=headers or {})
        response = conn.getresponse()
        return response.status, json.loads(response.read())
    finally:
        conn.close()


def test_http_wants_the_token(server: Server) -> None:
    assert server.token
    status, reply = http_call(server, "GET", "/v1/health")
    assert (status, reply["error"]["code"]) == (401, "unauthorized")
    status, _ = http_call(server, "GET", "/v1/health", headers={"X-Loopwatch-Token": "wrong"})
    assert status == 401
    status, reply = http_call(
        server, "GET", "/v1/health", headers={"X-Loopwatch-Token": server.token}
    )
    assert status == 200 and reply["result"]["status"] == "ok"
    bearer = {"Authorization": f"Bearer {server.token}"}
    body = json.dumps({"session_key": "http", "tool_name": "exec", "params": {}}).encode()
    status, reply = http_call(server, "POST", "/v1/before_call", body, bearer)
    assert status == 200 and reply["result"]["action"] == "allow"
    status, reply = http_call(
        server, "POST", "/v1", b'{"op": "history", "session_key": "http"}', bearer
    )
    assert status == 200 and reply["result"]["records"][0]["tool_name"] == "exec"


def test_http_errors(server: Server) -> None:
    token = {"X-Loopwatch-Token": server.token or ""}
    assert http_call(server, "GET", "/elsewhere", headers=token)[0] == 404
    assert http_call(server, "POST", "/v1/before_call", b"{oops", token)[0] == 400
    assert http_call(server, "POST", "/v1/nope", b"{}", token)[0] == 400
    oversize = {**token, "Content-Length": str(MAX_REQUEST_BYTES + 1)}
    assert server.port is not None
    with socket.create_connection(("127.0.0.1", server.port)) as conn:
        head = "POST /v1/health HTTP/1.1\r\nHost: x\r\n"
        head += "".join(f"{k}: {v}\r\n" for k, v in oversize.items()) + "\r\n"
        conn.sendall(head.encode())
        assert conn.recv(65536).startswith(b"HTTP/1.1 413")


def test_http_listens_on_localhost_only(server: Server) -> None:
    listening = subprocess.run(
        ["ss", "-ltnH", f"sport = :{server.port}"], capture_output=True, text=True, check=False
    )
    if listening.returncode == 0 and listening.stdout.strip():
        assert "127.0.0.1:" in listening.stdout
    address = socket.gethostbyname(socket.gethostname())
    if not address.startswith("127."):
        with pytest.raises(OSError):
            socket.create_connection((address, server.port or 0), timeout=5).close()


# --- concurrency --------------------------------------------------------------------------


def test_eight_clients_at_once_lose_no_record(server: Server, root: Path) -> None:
    session = "crowd"
    calls = [(client, step) for client in range(8) for step in range(3)]
    barrier = threading.Barrier(8)
    errors: list[BaseException] = []

    def client(number: int) -> None:
        try:
            barrier.wait()
            for step in range(3):
                fields: dict[str, Any] = {
                    "session_key": session,
                    "tool_name": "read",
                    "params": {"path": f"file-{number}-{step}"},
                    "tool_call_id": f"call-{number}-{step}",
                }
                server.call("before_call", **fields)
                server.call("after_call", **fields, result=f"content {number} {step}")
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=client, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    records = server.call("history", session_key=session)["records"]

    replay = LoopGuard(profile="adaptive")
    for number, step in calls:
        params = {"path": f"file-{number}-{step}"}
        call_id = f"call-{number}-{step}"
        replay.before_call("read", params, session_key=session, tool_call_id=call_id)
        replay.after_call(
            "read",
            params,
            session_key=session,
            tool_call_id=call_id,
            result=f"content {number} {step}",
        )
    expected = replay.history(session_key=session)

    def key(record: Any) -> tuple[Any, ...]:
        if isinstance(record, dict):
            return (record["tool_call_id"], record["args_hash"], record["result_hash"])
        return (record.tool_call_id, record.args_hash, record.result_hash)

    assert len(records) == len(calls) == len(expected)
    assert Counter(map(key, records)) == Counter(map(key, expected))


# --- start-up and shutdown ----------------------------------------------------------------


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_stops_the_server_cleanly(root: Path, sig: int) -> None:
    running = start_server(root)
    token_file = running.state / "loopwatch" / "serve.token"
    assert os.path.exists(running.socket_path) and token_file.exists()
    assert running.call("health")["status"] == "ok"
    assert stop_server(running, sig) == 0
    assert not os.path.exists(running.socket_path)
    assert not token_file.exists()


def test_a_second_server_on_the_same_socket_is_refused(root: Path) -> None:
    first = start_server(root, http=False)
    try:
        second = subprocess.run(
            [*SERVE, "--socket", first.socket_path],
            capture_output=True,
            text=True,
            env={**os.environ, "XDG_STATE_HOME": str(root / "state")},
            check=False,
        )
        assert second.returncode == 2
        assert "already listening" in second.stderr
        assert first.call("health")["status"] == "ok"
    finally:
        assert stop_server(first) == 0


def test_a_stale_socket_is_replaced(root: Path) -> None:
    stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    stale.bind(str(root / "s.sock"))
    stale.close()
    running = start_server(root, http=False)
    try:
        assert running.call("health")["status"] == "ok"
    finally:
        assert stop_server(running) == 0


def test_start_up_errors_exit_2(root: Path) -> None:
    env = {**os.environ, "XDG_STATE_HOME": str(root / "state")}
    (root / "plain").write_text("not a socket")
    long_path = str(root / ("x" * 120))
    bad_config = root / "bad.json"
    bad_config.write_text('{"tools": {"loopDetection": {"historySize": "many"}}}')
    for args, words in (
        (["--socket", str(root / "plain")], "not a socket"),
        (["--socket", long_path], "longer than"),
        (["--socket", str(root / "a.sock"), "--http", "70000"], "--http"),
        (["--socket", str(root / "b.sock"), "--config", str(bad_config)], "historySize"),
    ):
        done = subprocess.run(
            [*SERVE, *args],
            capture_output=True,
            text=True,
            env=env,
            check=False,
        )
        assert done.returncode == 2, (args, done.stderr)
        assert words in done.stderr, (args, done.stderr)
        assert "Traceback" not in done.stderr
    assert (root / "plain").read_text() == "not a socket"


# --- the dispatcher in-process: no input makes it raise ---------------------------------------


@pytest.fixture(scope="module")
def dispatcher() -> Iterator[Dispatcher]:
    hooks = loopwatch.hooks
    instance = Dispatcher(lambda: LoopGuard(profile="adaptive"), hooks_module=hooks)
    yield instance
    instance.close()


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=8,
)
REQUESTS = st.fixed_dictionaries(
    {"op": st.sampled_from([*serve.OPS, "other"]) | JSON_VALUES},
    optional={
        "session_key": st.sampled_from(["s", ""]) | JSON_VALUES,
        "tool_name": st.sampled_from(["exec", "read"]) | JSON_VALUES,
        "params": JSON_VALUES,
        "result": JSON_VALUES,
        "error": JSON_VALUES,
        "run_id": JSON_VALUES,
        "tool_call_id": JSON_VALUES,
        "agent": st.sampled_from(["claude-code", "codex"]) | JSON_VALUES,
        "payload": st.text(max_size=20) | JSON_VALUES,
        "id": JSON_VALUES,
    },
)


@settings(
    max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.binary(max_size=64))
def test_any_bytes_get_an_envelope(dispatcher: Dispatcher, data: bytes) -> None:
    reply = dispatcher.handle_bytes(data)
    assert reply["ok"] in (True, False)
    json.dumps(reply, default=str)


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(message=REQUESTS)
def test_any_request_gets_an_envelope(dispatcher: Dispatcher, message: dict[str, Any]) -> None:
    reply = dispatcher.handle(message)
    assert isinstance(reply["ok"], bool)
    if reply["ok"]:
        assert reply["op"] == message["op"] and isinstance(reply["result"], dict)
    else:
        assert reply["error"]["code"] in ("bad_request", "unknown_op", "bad_json")
    assert encode_reply(reply).endswith(b"\n")


# --- the hook process's warm path ----------------------------------------------------------


#: The hook commands: the one ``loopwatch install`` writes (``python -S`` and the entry
#: script, with its own client) and ``python -m loopwatch.cli hook`` (``loopwatch.serve``).
HOOK_COMMANDS = {
    "installed": hook_argv("claude-code"),
    "module": [sys.executable, "-m", "loopwatch.cli", "hook", "claude-code"],
}


def hook_process(
    socket_path: str, state: Path, stdin: str, *flags: str, form: str = "installed"
) -> tuple[str, int, str]:
    """The real ``loopwatch hook claude-code`` process, as Claude Code runs it."""
    env = {k: v for k, v in os.environ.items() if k != "LOOPWATCH_STORE"}
    env.update({"LOOPWATCH_SOCKET": socket_path, "XDG_STATE_HOME": str(state)})
    done = subprocess.run(
        [*HOOK_COMMANDS[form], *flags],
        input=stdin,
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    return done.stdout, done.returncode, done.stderr


def claude_events(session: str, calls: int) -> list[str]:
    events = []
    for index in range(calls):
        for name in ("PreToolUse", "PostToolUse"):
            event = {
                "session_id": session,
                "hook_event_name": name,
                "tool_name": "Bash",
                "tool_input": {"command": "make test"},
                "tool_use_id": f"t{index}",
                "cwd": "/tmp",
                "transcript_path": "/tmp/t.jsonl",
            }
            if name == "PostToolUse":
                event["tool_response"] = "FAILED test_login"
            events.append(json.dumps(event))
    return events


@pytest.mark.parametrize("form", list(HOOK_COMMANDS))
def test_a_hook_process_answers_through_serve_as_in_process(root: Path, form: str) -> None:
    # A memory:// store lives as long as its process: only a server keeps the history from
    # one hook process to the next, so a loop is caught only if every event went through it.
    running = start_server(root, "--store", "memory://", http=False)
    try:
        events = claude_events("warm", 5)
        remote = [
            hook_process(
                running.socket_path, root / "hook-state", event, "--store", "memory://", form=form
            )
            for event in events
        ]
        local_guard = loopwatch.hooks.default_guard(store_url="memory://")
        local = []
        for event in events:
            result = loopwatch.hooks.run_hook("claude-code", event, local_guard)
            stdout = result.stdout + "\n" if result.stdout else ""
            local.append((stdout, result.exit_code, result.stderr))
        assert remote == local
        assert any("permissionDecision" in stdout for stdout, _, _ in remote)
        remote_records = running.call("history", session_key="claude-code:warm")["records"]
        assert len(remote_records) == len(local_guard.history(session_key="claude-code:warm"))
        assert 1 < len(remote_records) < 5  # the loop was blocked before its fifth call
        # The warm path never set up the hook's log (it loads nothing of the guard).
        assert not (root / "hook-state" / "loopwatch" / "hook.log").exists()
        # A hook with other options is not judged by this server: it runs in-process.
        other = hook_process(
            running.socket_path,
            root / "hook-state",
            events[0],
            "--store",
            "memory://",
            "--profile",
            "reference",
            form=form,
        )
        assert other == ("", 0, "")
        assert (root / "hook-state" / "loopwatch" / "hook.log").exists()
    finally:
        assert stop_server(running) == 0


def test_a_hook_process_runs_in_process_when_no_server_runs(root: Path) -> None:
    events = claude_events("cold", 5)
    answers = [
        hook_process(str(root / "none.sock"), root / "state", event, "--store", "memory://")
        for event in events
    ]
    # Each process has a fresh memory store: no loop, every call allowed, nothing printed.
    assert answers == [("", 0, "")] * len(events)
    db = root / "cold.db"
    answers = [
        hook_process(str(root / "none.sock"), root / "state", event, "--store", f"sqlite:///{db}")
        for event in events
    ]
    assert any("permissionDecision" in stdout for stdout, _, _ in answers)
