"""A SQLite store whose file or folder is read-only, for real: as a user who may not write.

The suite runs as root, whom file permissions do not stop, so each case runs in a forked
child that drops to ``nobody`` first (``setgroups``, ``setgid``, ``setuid``; a fork, not a
new interpreter: the interpreter may live where ``nobody`` cannot read, as under
``/root/.pyenv``). Run as another user, the child keeps that user. Before the store is
touched, the child proves the layout is what the case says (the file readable but not
writable, the folder not writable), so no case passes on a permission it did not mean to
test. A machine where the child cannot drop root fails these tests, saying why.

What a user gets: at configuration time (``SqliteStore(path)``, ``store_from_url``) a
:class:`StoreError` naming the path and what is read-only; at call time (the file replaced
by a read-only one under a running guard) an allowed call, no exception, and a log line
naming the path and why; from ``loopwatch hook``, exit 0 and the host's "no opinion"
answer, with the reason in the hook log.
"""

from __future__ import annotations

import json
import logging
import os
import pwd
import select
import shutil
import signal
import sqlite3
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import redirect_stdout
from io import StringIO
from pathlib import Path
from typing import Any

import pytest

from loopwatch import LoopGuard
from loopwatch.cli import _hook as hook_cli
from loopwatch.hooks._paths import STATE_ENV
from loopwatch.stores import sqlite as sqlite_module
from loopwatch.stores.base import StoreError
from loopwatch.stores.sqlite import SqliteStore
from loopwatch.stores.url import store_from_url

#: How long a child may take before it is killed and the test fails.
CHILD_TIMEOUT_S = 60.0

Child = Callable[[], dict[str, Any]]


def _drop_privileges() -> None:
    """In the child: become ``nobody`` when root (else stay who we are)."""
    if os.geteuid() != 0:
        return
    nobody = pwd.getpwnam("nobody")
    os.setgroups([])
    os.setgid(nobody.pw_gid)
    os.setuid(nobody.pw_uid)
    if os.geteuid() == 0 or os.getuid() == 0:
        raise RuntimeError("setuid(nobody) left this process root")


def run_unprivileged(child: Child) -> dict[str, Any]:
    """Run ``child`` in a forked process that may not write what it does not own.

    Returns what it returned (a JSON object), or fails the test loudly when the child
    could not drop privileges, raised, or did not finish in time.
    """
    if os.geteuid() == 0:
        try:
            pwd.getpwnam("nobody")
        except KeyError:
            pytest.fail("running as root with no 'nobody' user: cannot test a read-only store")
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        code = 0
        try:
            os.close(read_end)
            try:
                _drop_privileges()
            except Exception as exc:
                answer: dict[str, Any] = {"setup_error": f"{type(exc).__name__}: {exc}"}
            else:
                try:
                    answer = child()
                except BaseException as exc:  # reported to the parent, which fails
                    answer = {"child_error": f"{type(exc).__name__}: {exc}"}
            os.write(write_end, json.dumps(answer).encode())
        except BaseException:
            code = 1
        finally:
            os._exit(code)
    os.close(write_end)
    data = b""
    deadline = time.monotonic() + CHILD_TIMEOUT_S
    try:
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                os.kill(pid, signal.SIGKILL)
                pytest.fail(f"the unprivileged child did not finish in {CHILD_TIMEOUT_S} s")
            ready, _, _ = select.select([read_end], [], [], left)
            if ready:
                chunk = os.read(read_end, 65536)
                if not chunk:
                    break
                data += chunk
    finally:
        os.close(read_end)
        _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, f"the child failed: {data!r}"
    answer = json.loads(data)
    if "setup_error" in answer:
        pytest.fail(f"cannot drop root to test a read-only store: {answer['setup_error']}")
    if "child_error" in answer:
        pytest.fail(f"the unprivileged child raised: {answer['child_error']}")
    assert answer["uid"] != 0, "the child ran as root: the permissions were not tested"
    return answer


def _layout_check(path: str, *, file_writable: bool | None, folder_writable: bool) -> None:
    """In the child: the layout is what the case says, or the child raises."""
    folder = os.path.dirname(path)
    os.listdir(folder)  # the folder can be searched and read
    if os.access(folder, os.W_OK) != folder_writable:
        raise AssertionError(f"folder writable: {not folder_writable}, expected the opposite")
    if file_writable is None:
        if os.path.exists(path):
            raise AssertionError("the file exists")
        return
    with open(path, "rb"):
        pass  # readable
    try:
        with open(path, "r+b"):
            writable = True
    except PermissionError:
        writable = False
    if writable != file_writable:
        raise AssertionError(f"file writable: {writable}, expected {file_writable}")


class Lines(logging.Handler):
    """Keeps ``logger: message`` of every record (in the child, for the parent)."""

    def __init__(self, lines: list[str]) -> None:
        super().__init__()
        self.lines = lines

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(f"{record.name}: {record.getMessage()}")


def _nobody_ids() -> tuple[int, int]:
    if os.geteuid() != 0:
        return os.getuid(), os.getgid()
    nobody = pwd.getpwnam("nobody")
    return nobody.pw_uid, nobody.pw_gid


@pytest.fixture
def shared_dir() -> Iterator[Path]:
    """A folder under the system temp folder that ``nobody`` can reach (pytest's own
    ``tmp_path`` sits in a folder only its owner may search)."""
    base = Path(tempfile.mkdtemp(prefix="loopwatch-ro-"))
    base.chmod(0o755)
    try:
        yield base
    finally:
        for folder in [base, *base.rglob("*")]:
            if folder.is_dir():
                folder.chmod(0o755)
        shutil.rmtree(base, ignore_errors=True)


def _make_store_file(path: Path) -> None:
    SqliteStore(path).close()


def _layout(shared_dir: Path, case: str) -> tuple[str, bool | None, bool, str]:
    """Build ``case``; ``(path, file writable, folder writable, what the error says)``."""
    uid, gid = _nobody_ids()
    folder = shared_dir / "state"
    folder.mkdir()
    path = folder / "sessions.db"
    file_reason = "the file is read-only for this user"
    folder_reason = f"its folder {str(folder)!r} is not writable by this user"
    if case == "read-only file, read-only folder":
        _make_store_file(path)
        path.chmod(0o644)
        return str(path), False, False, file_reason
    if case == "read-only file, writable folder":
        _make_store_file(path)
        path.chmod(0o444)
        os.chown(folder, uid, gid)
        return str(path), False, True, file_reason
    if case == "no file, read-only folder":
        return str(path), None, False, folder_reason
    if case == "writable new file, read-only folder":
        path.touch()
        os.chown(path, uid, gid)
        return str(path), True, False, folder_reason
    if case == "writable store file, read-only folder":
        _make_store_file(path)
        os.chown(path, uid, gid)
        return str(path), True, False, folder_reason
    raise AssertionError(case)


CASES = [
    "read-only file, read-only folder",
    "read-only file, writable folder",
    "no file, read-only folder",
    "writable new file, read-only folder",
    "writable store file, read-only folder",
]


# --- configuration time: a typed error naming the path and the reason --------------------


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("how", ["SqliteStore", "store_from_url"])
def test_a_read_only_store_is_refused_at_configuration(
    shared_dir: Path, case: str, how: str
) -> None:
    path, file_writable, folder_writable, reason = _layout(shared_dir, case)

    def child() -> dict[str, Any]:
        _layout_check(path, file_writable=file_writable, folder_writable=folder_writable)
        try:
            if how == "SqliteStore":
                SqliteStore(path)
            else:
                store_from_url(f"sqlite://{path}")
        except StoreError as exc:
            return {"uid": os.getuid(), "error": str(exc), "exists": os.path.exists(path)}
        return {"uid": os.getuid(), "error": None}

    answer = run_unprivileged(child)
    assert answer["error"] is not None, "a read-only store was opened"
    assert answer["error"].startswith(f"cannot open the SQLite store {path!r}: ")
    assert reason in answer["error"]
    assert answer["exists"] == (file_writable is not None)  # nothing was created


# --- call time: fail open, a log line that names the path and why ------------------------


@pytest.mark.parametrize("fail_open", [True, False], ids=["fail-open", "fail-closed"])
def test_a_store_file_turned_read_only_under_a_running_guard_fails_open_with_a_log(
    shared_dir: Path, fail_open: bool
) -> None:
    # A long-running guard (loopwatch serve, an agent's own) opened a writable store;
    # then the file is replaced by a read-only copy (restored from a backup, say) and its
    # folder locked: the guard's next transaction reopens the path and cannot write it.
    uid, gid = _nobody_ids()
    folder = shared_dir / "state"
    folder.mkdir()
    os.chown(folder, uid, gid)
    path = str(folder / "sessions.db")

    def child() -> dict[str, Any]:
        sqlite_module.FILE_CHECK_INTERVAL_S = 0.0  # type: ignore[misc]  # check at once
        lines: list[str] = []
        logging.getLogger("loopwatch").addHandler(Lines(lines))
        logging.getLogger("loopwatch").setLevel(logging.WARNING)
        events: list[dict[str, Any]] = []
        store = SqliteStore(path, fail_open=fail_open)
        guard = LoopGuard(
            {"enabled": True}, store=store, listeners=[lambda e: events.append(e.to_dict())]
        )
        guard.before_call("read", {"p": 1}, session_key="s", tool_call_id="c1")
        guard.after_call("read", {"p": 1}, session_key="s", tool_call_id="c1", result="x")
        copy = path + ".restored"
        with sqlite3.connect(path) as source, sqlite3.connect(copy) as target:
            source.backup(target)
        os.chmod(copy, 0o444)
        os.replace(copy, path)
        for suffix in ("-wal", "-shm"):
            if os.path.exists(path + suffix):
                os.unlink(path + suffix)
        os.chmod(os.path.dirname(path), 0o555)
        _layout_check(path, file_writable=False, folder_writable=False)
        decision = guard.before_call("read", {"p": 2}, session_key="s", tool_call_id="c2")
        record = guard.after_call("read", {"p": 2}, session_key="s", tool_call_id="c2", result="x")
        return {
            "uid": os.getuid(),
            "action": decision.action,
            "detector": decision.verdict.detector,
            "record": None if record is None else repr(record),
            "lines": lines,
            "events": [e for e in events if e["type"] == "store.error"],
        }

    answer = run_unprivileged(child)
    assert answer["action"] == ("allow" if fail_open else "block")
    if not fail_open:
        assert answer["detector"] == "store_unavailable"
    assert answer["record"] is None  # nothing recorded, and nothing raised
    store_lines = [line for line in answer["lines"] if line.startswith("loopwatch.store: ")]
    assert store_lines, answer["lines"]
    assert any(f"cannot open the SQLite store {path!r}" in line for line in store_lines)
    assert any("the file is read-only for this user" in line for line in store_lines)
    policy = "fail-open" if fail_open else "fail-closed"
    assert all(policy in line for line in store_lines if "store error" in line.lower())
    operations = [e["operation"] for e in answer["events"]]
    assert operations[:2] == ["before_call", "after_call"]


def test_a_store_file_made_read_only_while_open_is_still_written(shared_dir: Path) -> None:
    # chmod does not close what is open: the guard that opened the file writes on (no
    # error); only a process opening it afterwards is refused (the case above).
    uid, gid = _nobody_ids()
    folder = shared_dir / "state"
    folder.mkdir()
    os.chown(folder, uid, gid)
    path = str(folder / "sessions.db")

    def child() -> dict[str, Any]:
        guard = LoopGuard({"enabled": True}, store=SqliteStore(path))
        os.chmod(path, 0o444)
        _layout_check(path, file_writable=False, folder_writable=True)
        for n in range(3):
            guard.before_call("read", {"p": n}, session_key="s", tool_call_id=f"c{n}")
            guard.after_call("read", {"p": n}, session_key="s", tool_call_id=f"c{n}", result="x")
        kept = len(guard.history(session_key="s"))
        try:
            SqliteStore(path)
        except StoreError as exc:
            refused = str(exc)
        else:
            refused = ""
        return {"uid": os.getuid(), "kept": kept, "refused": refused}

    answer = run_unprivileged(child)
    assert answer["kept"] == 3
    assert "the file is read-only for this user" in answer["refused"]


# --- the hook command: exit 0, no opinion, the reason in its log -------------------------


def test_the_hook_command_on_a_read_only_store_allows_and_logs_why(shared_dir: Path) -> None:
    path, _, _, reason = _layout(shared_dir, "read-only file, read-only folder")
    uid, gid = _nobody_ids()
    state = shared_dir / "hook-state"
    state.mkdir()
    os.chown(state, uid, gid)
    payload = json.dumps(
        {
            "session_id": "s",
            "transcript_path": "",
            "cwd": ".",
            "hook_event_name": "PreToolUse",
            "tool_name": "Bash",
            "tool_input": {"command": "ls"},
            "tool_use_id": "t1",
        }
    )

    def child() -> dict[str, Any]:
        os.environ[STATE_ENV] = str(state)
        out = StringIO()
        with redirect_stdout(out):
            code = hook_cli.main(
                ["claude-code", "--store", f"sqlite://{path}"], payload=payload, try_server=False
            )
        log = "".join(p.read_text() for p in Path(state).rglob("*.log"))
        return {"uid": os.getuid(), "code": code, "stdout": out.getvalue(), "log": log}

    answer = run_unprivileged(child)
    assert answer["code"] == 0
    assert answer["stdout"].strip() == ""  # Claude Code's "no opinion": the call runs
    assert "no guard (StoreError: cannot open the SQLite store" in answer["log"]
    assert path in answer["log"] and reason in answer["log"]
    assert "allowing" in answer["log"]
