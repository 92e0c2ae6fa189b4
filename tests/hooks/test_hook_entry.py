"""The installed hook command (``python -S loopwatch/_hook_entry.py``, ``_hook_client``).

Its lean client must send what :func:`loopwatch.serve.try_hook` sends and accept only what it
accepts, its option parsing must be the hook's, and the process must work without ``site``:
its own package found by path, site-packages loaded only when the event needs it.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from _hookkit import HookRunner, payload
from hypothesis import given, settings
from hypothesis import strategies as st

from loopwatch import _hook_client as entry
from loopwatch import hooks, serve
from loopwatch.cli import _hook
from loopwatch.cli._install import hook_argv
from loopwatch.hooks import _paths


def test_the_mirrored_constants_agree_with_their_modules() -> None:
    assert entry.SOCKET_ENV == serve.SOCKET_ENV
    assert entry.SOCKET_NAME == serve.SOCKET_NAME
    assert entry.CLIENT_TIMEOUT_S == serve.CLIENT_TIMEOUT_S
    assert entry.STORE_ENV == _paths.STORE_ENV
    assert entry.VALUE_FLAGS == _hook._VALUE_FLAGS
    assert entry.MAX_PAYLOAD_BYTES == _hook.MAX_PAYLOAD_BYTES == hooks.MAX_PAYLOAD_BYTES
    assert entry.OVERSIZED == hooks.OVERSIZED


TOKENS = st.sampled_from(
    [
        *("claude-code", "codex", "x", "--store", "--config", "--profile", "reference"),
        *("adaptive", "--store=memory://", "--profile=bad", "--config=c.json", "-h", "--help"),
        *("--sto", "="),
    ]
)


@settings(max_examples=300, deadline=None)
@given(
    arguments=st.lists(TOKENS | st.text(max_size=6), max_size=6),
    store=st.text(alphabet=" \tab:/", max_size=4),  # an environment value: no NUL
)
def test_options_are_read_as_the_hook_reads_them(arguments: list[str], store: str) -> None:
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("LOOPWATCH_STORE", store)
        expected = None if arguments[:1] == ["status"] else _hook._quick_options(arguments)
        assert entry.quick_options(arguments) == expected


def test_the_socket_path_is_the_servers(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("LOOPWATCH_SOCKET", raising=False)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))
    assert entry.socket_path() == serve.default_socket_path()
    monkeypatch.setenv("XDG_STATE_HOME", "relative")
    assert entry.socket_path() == serve.default_socket_path()
    monkeypatch.setenv("LOOPWATCH_SOCKET", str(tmp_path / "s.sock"))
    assert entry.socket_path() == serve.default_socket_path()


STRINGS = st.text(max_size=20)
REQUESTS = st.dictionaries(
    STRINGS, st.none() | STRINGS | st.dictionaries(STRINGS, st.none() | STRINGS)
)


@given(request=REQUESTS)
def test_requests_are_encoded_as_the_serve_client_encodes_them(request: dict[str, object]) -> None:
    assert entry._encode(request) == json.dumps(request, separators=(",", ":"))


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner, max_size=4)
    ),
    max_leaves=12,
)


@given(value=JSON_VALUES, pad=st.sampled_from(["", " ", "\n", " \r\n\t"]))
def test_replies_are_decoded_as_json_decodes_them(value: object, pad: str) -> None:
    text = json.dumps(value) + pad
    assert json.dumps(entry._decode(text)) == json.dumps(json.loads(text))


@pytest.mark.parametrize("text", ["", "{", '{"a": 1} x', '{"a": 1}{}', "nul", '"\\x"', "[1,]"])
def test_a_reply_that_is_not_one_json_value_is_refused(text: str) -> None:
    with pytest.raises(ValueError):
        json.loads(text)
    with pytest.raises(ValueError):
        entry._decode(text)


@pytest.fixture
def canned(tmp_path: Path) -> Iterator[tuple[str, list[bytes], list[bytes]]]:
    """A unix socket that answers every connection with the next canned reply."""
    path = str(tmp_path / "s.sock")
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(8)
    replies: list[bytes] = []
    received: list[bytes] = []

    def serve_forever() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            with conn:
                data = b""
                while not data.endswith(b"\n"):
                    chunk = conn.recv(65536)
                    if not chunk:
                        break
                    data += chunk
                received.append(data)
                conn.sendall(replies.pop(0) if replies else b"")

    thread = threading.Thread(target=serve_forever, daemon=True)
    thread.start()
    yield path, replies, received
    listener.close()


GOOD = {"ok": True, "op": "hook", "result": {"stdout": "{}", "exit_code": 0, "stderr": ""}}


@pytest.mark.parametrize(
    "reply",
    [
        GOOD,
        {"ok": True, "result": {"stdout": "x", "exit_code": 2, "stderr": "why"}},
        {"ok": False, "error": {"code": "mismatch", "message": "other options"}},
        {"ok": True, "result": []},
        {"ok": True, "result": {"stdout": "x", "exit_code": True, "stderr": ""}},
        {"ok": True, "result": {"stdout": 1, "exit_code": 0, "stderr": ""}},
        {"ok": "yes", "result": GOOD["result"]},
        [1, 2],
        "not json",
        "",
    ],
)
def test_the_client_accepts_what_try_hook_accepts(
    canned: tuple[str, list[bytes], list[bytes]], reply: object
) -> None:
    path, replies, received = canned
    line = (reply if isinstance(reply, str) else json.dumps(reply)).encode() + b"\n"
    options = {"store": None, "config": "/c.json", "profile": None}
    text = payload("claude-code", "pre", session="S", call="c1") + "\u00e9\ud7ff"
    replies.append(line)
    ours = entry.ask_server("claude-code", text, options, path)
    replies.append(line)
    theirs = serve.try_hook("claude-code", text, socket_path=path, options=options)
    assert ours == theirs
    assert received[0] == received[1]  # the same request, byte for byte


def test_no_socket_means_no_answer(tmp_path: Path) -> None:
    options = {"store": None, "config": None, "profile": None}
    assert entry.ask_server("codex", "{}", options, str(tmp_path / "none.sock")) is None
    (tmp_path / "file.sock").write_text("")
    assert entry.ask_server("codex", "{}", options, str(tmp_path / "file.sock")) is None


def _run(command: list[str], stdin: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        command, input=stdin, capture_output=True, text=True, env=env, timeout=120, check=False
    )


def test_the_installed_command_answers_like_the_module_command(tmp_path: Path) -> None:
    hooks = HookRunner(tmp_path)
    for agent in ("claude-code", "codex", "gemini", "cursor", "opencode"):
        for index in range(3):  # the third identical call warns or blocks, by agent
            for kind in ("pre", "post"):
                stdin = payload(agent, kind, session=f"S-{agent}", call=f"c{index}")
                installed = hooks.process(agent, stdin)
                module = hooks.process(
                    agent, stdin.replace(f"S-{agent}", f"M-{agent}"), module=True
                )
                assert (installed.returncode, installed.stderr) == (
                    module.returncode,
                    module.stderr,
                )
                assert installed.stdout == module.stdout.replace(f"M-{agent}", f"S-{agent}")


def test_a_json5_config_loads_site_packages_when_needed(tmp_path: Path) -> None:
    # json5 lives in site-packages, which ``python -S`` does not see: the hook loads site.
    config = tmp_path / "lw.json5"
    config.write_text(
        "{tools: {loopDetection: {enabled: true}}, loopwatch: {profile: 'reference'}}"
    )
    hooks = HookRunner(tmp_path)
    stdin = payload("claude-code", "pre", session="S", call="c1")
    done = hooks.process("claude-code", stdin, "--config", str(config))
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
    log = hooks.state / "loopwatch" / "hook.log"
    assert "error" not in (log.read_text() if log.exists() else "").lower()


def test_the_entry_replaces_its_own_folder_by_its_packages_parent(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Python puts a script's folder first on sys.path: loopwatch/ would shadow other
    # modules (its config.py, events.py ...) and would not find the package itself.
    here = Path(entry.__file__).resolve().parent
    monkeypatch.setattr(sys, "path", [str(here), "", "/elsewhere", str(here)])
    entry._fix_path()
    assert sys.path == [str(here.parent), "", "/elsewhere"]
    monkeypatch.setattr(sys, "path", ["/elsewhere"])  # -P or -I: no script folder
    entry._fix_path()
    assert sys.path == [str(here.parent), "/elsewhere"]


def test_other_commands_run_the_command_line_without_site(tmp_path: Path) -> None:
    script = hook_argv("codex")[2]
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "LOOPWATCH_STORE")}
    env["XDG_STATE_HOME"] = str(tmp_path)
    version = _run([sys.executable, "-S", script, "--version"], "", env)
    assert (version.returncode, version.stdout.split()[0]) == (0, "loopwatch"), version.stderr
    status = _run([sys.executable, "-S", script, "hook", "status", "--json"], "", env)
    assert status.returncode == 0, status.stderr
    assert json.loads(status.stdout)["sessions"] == []


def test_the_client_imports_only_what_the_interpreter_needs_anyway() -> None:
    # The warm path's whole point: ``typing`` alone imports ``re`` and ``enum`` (15 ms).
    folder = str(Path(entry.__file__).resolve().parent)
    code = (
        f"import sys; sys.path.insert(0, {folder!r}); before = set(sys.modules); "
        "import _hook_client; print(' '.join(sorted(set(sys.modules) - before)))"
    )
    done = _run([sys.executable, "-S", "-c", code], "", dict(os.environ))
    assert done.returncode == 0, done.stderr
    loaded = set(done.stdout.split())
    assert "_hook_client" in loaded
    assert loaded <= {
        "_hook_client",
        "__future__",
        "os",
        "os.path",
        "posixpath",
        "genericpath",
        "stat",
        "_stat",
        "_collections_abc",
        "abc",
        "_abc",
        "gc",
    }, loaded


@pytest.mark.parametrize("agent", hooks.AGENTS)
def test_every_agent_module_declares_what_run_hook_reads(agent: str) -> None:
    # run_hook reads these names of the agent's module; one missing would make every
    # event of that agent fail open (logged, but never decided).
    from loopwatch.hooks._core import CompactionCheck, HookResult

    module = hooks.agent_module(agent)
    assert callable(module.parse) and callable(module.render)
    assert isinstance(module.FAIL_OPEN, HookResult)
    assert isinstance(module.REMEMBER_RUN, bool)
    check = module.COMPACTION_CHECK
    assert check is None or isinstance(check, CompactionCheck)
    assert (check is not None) == (agent == "gemini")  # only Gemini's event may not compact
