"""A SQLite store whose file is deleted or replaced under it reopens the path.

Otherwise a long-running process (``loopwatch serve``, an agent's guard) writes on into
the deleted file, with no error, while each new process (every hook event) makes a new
file at the path: two histories that never meet.
"""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path

import pytest

from loopwatch import LoopGuard
from loopwatch.stores import sqlite as sqlite_module
from loopwatch.stores.sqlite import SqliteStore


@pytest.fixture(autouse=True)
def check_every_time(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sqlite_module, "FILE_CHECK_INTERVAL_S", 0.0)


def _call(guard: LoopGuard, n: int) -> None:
    guard.before_call("read", {"n": n}, session_key="s", tool_call_id=f"c{n}")
    guard.after_call("read", {"n": n}, session_key="s", tool_call_id=f"c{n}", result="x")


@pytest.mark.parametrize("how", ["deleted", "replaced"])
def test_a_long_running_store_follows_its_path(
    tmp_path: Path, how: str, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "sessions.db"
    guard = LoopGuard({"enabled": True}, store=SqliteStore(path), strict=True)
    _call(guard, 1)
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    if how == "replaced":  # another process made a new file there and wrote a call
        other = LoopGuard({"enabled": True}, store=SqliteStore(path), strict=True)
        _call(other, 2)
        other.store.close()  # type: ignore[attr-defined]
    with caplog.at_level(logging.WARNING, logger="loopwatch.store"):
        _call(guard, 3)
    assert f"is no longer the file it opened ({how})" in caplog.text
    # This process and a new one now see one history, in the file at the path.
    seen = [r.tool_call_id for r in guard.history(session_key="s")]
    assert seen == (["c2", "c3"] if how == "replaced" else ["c3"])
    fresh = SqliteStore(path)
    assert [r.tool_call_id for r in fresh.history("s", time.time())] == seen
    fresh.close()
    guard.store.close()  # type: ignore[attr-defined]


def test_the_same_file_is_not_reopened(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "sessions.db"
    store = SqliteStore(path)
    guard = LoopGuard({"enabled": True}, store=store, strict=True)
    first = store._db
    with caplog.at_level(logging.WARNING, logger="loopwatch.store"):
        for n in range(5):
            _call(guard, n)
    assert store._db is first and "no longer the file" not in caplog.text
    assert os.path.exists(path)
    store.close()
