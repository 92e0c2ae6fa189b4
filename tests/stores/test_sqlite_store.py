"""What the SQLite store promises beyond the contract suite: a private file, a versioned
schema, expiry that frees the file, many processes on one session, a killed writer.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path, PurePosixPath
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from loopwatch import LoopGuard, MemoryStore
from loopwatch.core.records import ToolCallRecord
from loopwatch.stores._sqlite_schema import path_text, token, untoken
from loopwatch.stores.base import StoreError
from loopwatch.stores.sqlite import SCHEMA_VERSION, SqliteStore
from loopwatch.stores.url import parse_sqlite_url, store_from_url

WORKER = Path(__file__).with_name("_sqlite_worker.py")
ROOT = Path(__file__).resolve().parents[2]
T0 = 1_700_000_000.0
S = "agent:main:sqlite"


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT / "src") + os.pathsep + env.get("PYTHONPATH", "")
    return env


def rec(args: str = "a", call: str | None = None) -> ToolCallRecord:
    return ToolCallRecord("read", f"read:{args}", call, timestamp=1)


# --- the file ---------------------------------------------------------------------------


def test_the_file_and_its_wal_are_private(tmp_path: Path) -> None:
    path = tmp_path / "store.db"
    store = SqliteStore(path)
    store.begin_call(S, None, rec(), 30, T0)
    reader = SqliteStore(path)  # a second connection keeps the -wal and -shm files
    assert reader.history(S, T0) == (rec(),)
    for name in ("store.db", "store.db-wal", "store.db-shm"):
        assert (path.parent / name).stat().st_mode & 0o777 == 0o600, name
    mode = sqlite3.connect(path).execute("PRAGMA journal_mode").fetchone()[0]
    assert mode == "wal"
    store.close()
    reader.close()


def test_records_hold_digests_only(tmp_path: Path) -> None:
    path = tmp_path / "store.db"
    guard = LoopGuard({"enabled": True}, store=SqliteStore(path))
    secret = "hunter2-very-secret-token"
    guard.before_call("exec", {"command": f"login {secret}"}, session_key=S, tool_call_id="1")
    guard.after_call(
        "exec", {"command": f"login {secret}"}, session_key=S, tool_call_id="1", result=secret
    )
    guard.store.close()
    raw = b"".join(p.read_bytes() for p in tmp_path.iterdir())
    assert secret.encode() not in raw


def test_a_newer_schema_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "store.db"
    SqliteStore(path).close()
    db = sqlite3.connect(path)
    assert db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    db.execute(f"PRAGMA user_version={SCHEMA_VERSION + 1}")
    db.commit()
    db.close()
    with pytest.raises(StoreError, match="schema version 2"):
        SqliteStore(path)


@pytest.mark.parametrize("missing", ["missing", "missing/dir", "a-file"])
def test_a_missing_folder_is_refused_and_not_created(tmp_path: Path, missing: str) -> None:
    (tmp_path / "a-file").write_text("")
    folder = tmp_path / missing
    path = folder / "x.db"
    expected = (
        f"cannot open the SQLite store '{path}': its folder '{folder}' does not exist or is "
        "not a folder (create it first: loopwatch does not create folders)"
    )
    with pytest.raises(StoreError) as info:
        SqliteStore(path)
    assert str(info.value) == expected
    with pytest.raises(StoreError) as info:
        store_from_url(f"sqlite://{path}")
    assert str(info.value) == expected
    assert not (tmp_path / "missing").exists()
    assert (tmp_path / "a-file").is_file()


def test_a_relative_path_in_the_current_folder_is_fine(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    SqliteStore("here.db").close()
    assert (tmp_path / "here.db").is_file()
    with pytest.raises(StoreError, match="its folder 'nowhere' does not exist"):
        store_from_url("sqlite://nowhere/x.db")


def test_memory_is_not_a_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ValueError, match="use MemoryStore or memory://"):
        SqliteStore(":memory:")
    with pytest.raises(ValueError, match="use MemoryStore or memory://"):
        store_from_url("sqlite://:memory:")
    assert list(tmp_path.iterdir()) == []


def test_an_unopenable_path_is_a_store_error(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="cannot open the SQLite store"):
        SqliteStore(tmp_path)  # a folder


@pytest.mark.parametrize(
    ("option", "value"),
    [("idle_ttl_s", 0), ("idle_ttl_s", True), ("max_sessions", 0), ("busy_timeout_s", -1)],
)
def test_bad_options_name_the_field(tmp_path: Path, option: str, value: Any) -> None:
    with pytest.raises(ValueError, match=option):
        SqliteStore(tmp_path / "x.db", **{option: value})


def test_store_from_url(tmp_path: Path) -> None:
    path = tmp_path / "u.db"
    store = store_from_url(f"sqlite://{path}", idle_ttl_s=60)
    assert isinstance(store, SqliteStore) and store.path == path and store.idle_ttl_s == 60
    store.close()
    assert parse_sqlite_url("sqlite://~/x.db") == str(Path.home() / "x.db")
    for bad in ("sqlite://", f"sqlite://{path}?mode=ro"):
        with pytest.raises(ValueError, match="invalid SQLite URL"):
            store_from_url(bad)


# --- expiry ----------------------------------------------------------------------------


def test_expired_sessions_leave_the_file(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "e.db", idle_ttl_s=100)
    for index in range(5):
        store.begin_call(f"old-{index}", None, rec(), 30, T0)
        store.put_note(f"old-{index}", "k", "v", T0)
    store.begin_call("new", None, rec(), 30, T0 + 150)  # a new session reclaims
    assert [key for key, _ in store.session_keys(T0 + 150)] == ["new"]
    db = sqlite3.connect(tmp_path / "e.db")
    for table, left in (("sessions", 1), ("records", 1), ("notes", 0)):
        assert db.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0] == left, table
    db.close()
    store.close()


def test_max_sessions_drops_the_least_recently_touched(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "m.db", max_sessions=3, idle_ttl_s=None)
    for index in range(3):
        store.begin_call(f"s{index}", None, rec(), 30, T0 + index)
    store.begin_call("s0", None, None, 30, T0 + 10)  # s1 is now the least recent
    store.begin_call("s3", None, rec(), 30, T0 + 11)
    assert sorted(key for key, _ in store.session_keys(T0 + 12)) == ["s0", "s2", "s3"]
    store.close()


def test_notes_are_taken_once(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "n.db")
    store.put_note(S, "warn:1", "WARNING: ...", T0)
    assert store.take_note(S, "warn:1", T0, keep=True) == "WARNING: ..."
    assert store.take_note(S, "warn:1", T0) == "WARNING: ..."
    assert store.take_note(S, "warn:1", T0) is None
    assert store.take_note("other", "warn:1", T0) is None
    store.close()


# --- many processes ----------------------------------------------------------------------

PROCESSES = 8
CALLS = 30
CONFIG = {
    "enabled": True,
    "historySize": 10_000,
    "warningThreshold": 4,
    "criticalThreshold": 1_000_000,
    "globalCircuitBreakerThreshold": 1_000_001,
}


def test_eight_processes_share_one_linearisable_history(tmp_path: Path) -> None:
    db = tmp_path / "shared.db"
    SqliteStore(db).close()
    go = tmp_path / "go"
    procs = []
    for worker in range(PROCESSES):
        command = [
            sys.executable,
            str(WORKER),
            "burst",
            f"--db={db}",
            f"--session={S}",
            f"--config={json.dumps(CONFIG)}",
            f"--calls={CALLS}",
            f"--worker={worker}",
            f"--out={tmp_path / f'{worker}.json'}",
            f"--go={go}",
        ]
        procs.append(subprocess.Popen(command, env=_env()))
    deadline = time.monotonic() + 120
    while not all((tmp_path / f"{w}.json.ready").exists() for w in range(PROCESSES)):
        assert all(p.poll() is None for p in procs), "a worker died before the start"
        assert time.monotonic() < deadline, "workers did not get ready"
        time.sleep(0.01)
    go.touch()  # all start together
    for proc in procs:
        assert proc.wait(timeout=300) == 0
    workers = [json.loads((tmp_path / f"{w}.json").read_text()) for w in range(PROCESSES)]
    calls = {call["call_id"]: call for worker in workers for call in worker}
    assert len(calls) == PROCESSES * CALLS

    # Every call and every outcome is in the file, exactly once.
    store = SqliteStore(db)
    history = store.history(S, time.time())
    store.close()
    order = [record.tool_call_id for record in history]
    assert sorted(order) == sorted(calls)
    assert all(record.result_hash is not None for record in history)
    worker_of = [call_id.split("-")[0] for call_id in order]
    assert sum(1 for a, b in itertools.pairwise(worker_of) if a != b) > PROCESSES

    # Call k saw exactly the k calls before it; outcomes seen only ever grow; replaying
    # that global order in one process gives the same decision for every call.
    done: set[str] = set()
    events: list[tuple[str, str]] = []
    for position, call_id in enumerate(order):
        seen = calls[call_id]["seen"]
        assert [cid for cid, _ in seen] == order[:position], f"{call_id} saw another history"
        with_outcome = {cid for cid, has_outcome in seen if has_outcome}
        assert done <= with_outcome, f"{call_id} saw an outcome disappear"
        events += [("after", cid) for cid in order[:position] if cid in with_outcome - done]
        done |= with_outcome
        events.append(("before", call_id))
    events += [("after", cid) for cid in order if cid not in done]
    guard = LoopGuard(CONFIG, store=MemoryStore())
    replayed: dict[str, list[Any]] = {}
    for kind, call_id in events:
        call = calls[call_id]
        common = {"session_key": S, "run_id": "run", "tool_call_id": call_id}
        if kind == "before":
            decision = guard.before_call(call["tool"], call["params"], **common)
            verdict = decision.verdict
            replayed[call_id] = [decision.action, verdict.level, verdict.detector, verdict.count]
        else:
            guard.after_call(call["tool"], call["params"], result=call["result"], **common)
    assert {cid: calls[cid]["decision"] for cid in order} == replayed
    assert any(decision[0] == "warn" for decision in replayed.values())
    strip = [dataclasses.replace(r, timestamp=0) for r in guard.history(session_key=S)]
    assert strip == [dataclasses.replace(r, timestamp=0) for r in history]


# --- a killed writer ---------------------------------------------------------------------


def test_a_writer_killed_inside_its_transaction_leaves_nothing(tmp_path: Path) -> None:
    db = tmp_path / "k.db"
    store = SqliteStore(db, busy_timeout_s=30)
    store.begin_call(S, None, rec("before", "0"), 30, time.time())
    holder = subprocess.Popen(
        [sys.executable, str(WORKER), "hold", f"--db={db}", f"--session={S}"],
        stdout=subprocess.PIPE,
        env=_env(),
    )
    assert holder.stdout is not None
    assert holder.stdout.readline().strip() == b"holding"  # it holds the write lock now
    os.kill(holder.pid, signal.SIGKILL)
    holder.wait(timeout=30)
    # The next writer goes ahead at once; the killed one's append was rolled back.
    scoped = store.begin_call(S, None, rec("after", "1"), 30, time.time())
    assert [r.tool_call_id for r in scoped] == ["0"]
    assert [r.tool_call_id for r in store.history(S, time.time())] == ["0", "1"]
    check = sqlite3.connect(db).execute("PRAGMA integrity_check").fetchone()[0]
    assert check == "ok"
    store.close()


def test_a_writer_killed_at_any_point_loses_only_its_last_call(tmp_path: Path) -> None:
    db = tmp_path / "steady.db"
    SqliteStore(db).close()
    config = json.dumps(
        {
            "enabled": True,
            "historySize": 10_000,
            "criticalThreshold": 10**6,
            "globalCircuitBreakerThreshold": 10**6 + 1,
            "warningThreshold": 10**5,
        }
    )
    finished: list[str] = []
    for round_ in range(3):
        proc = subprocess.Popen(
            [
                sys.executable,
                str(WORKER),
                "steady",
                f"--db={db}",
                f"--session={S}",
                f"--config={config}",
                "--calls=100000",
                f"--name=r{round_}",
            ],
            stdout=subprocess.PIPE,
            env=_env(),
        )
        assert proc.stdout is not None
        for _ in range(5 + 7 * round_):
            finished.append(json.loads(proc.stdout.readline())["call_id"])
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
        # Lines printed after the ones read may exist: they finished too.
        finished += [json.loads(line)["call_id"] for line in proc.stdout.read().splitlines()]
    store = SqliteStore(db)
    history = store.history(S, time.time())
    store.close()
    ids = [record.tool_call_id for record in history]
    done = set(finished)
    # Every finished call is there, with its outcome, in order. Per killed process, at most
    # one more call is there: its last, killed after its outcome was committed but before
    # it printed its line, or before its after_call ran (then without its outcome).
    complete = [r.tool_call_id for r in history if r.result_hash is not None]
    assert [cid for cid in complete if cid in done] == finished
    unreported = [cid for cid in ids if cid not in done]
    assert len(unreported) <= 3
    for round_ in range(3):
        mine = [cid for cid in ids if cid.startswith(f"r{round_}-")]
        assert [cid for cid in mine if cid not in done] in ([], mine[-1:])
    assert sqlite3.connect(db).execute("PRAGMA integrity_check").fetchone()[0] == "ok"


# --- encoding ------------------------------------------------------------------------------

_TEXT = st.text(st.characters(codec=None, exclude_categories=()), max_size=30)


@given(value=st.none() | _TEXT)
def test_tokens_round_trip_any_text(value: str | None) -> None:
    encoded = token(value)
    assert encoded.isascii()
    assert untoken(encoded) == value


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(session=_TEXT, tool=_TEXT, call=st.none() | _TEXT, run=st.none() | _TEXT)
def test_records_of_any_text_round_trip(
    tmp_path: Path, session: str, tool: str, call: str | None, run: str | None
) -> None:
    store = SqliteStore(tmp_path / "codec.db", idle_ttl_s=None)
    record = ToolCallRecord(tool, f"{tool}:x", call, run, timestamp=-5)
    store.begin_call(session, run, record, 10_000, T0)
    assert store.history(session, T0)[-1] == record
    assert list(store.begin_call(session, run, None, 10_000, T0))[-1] == record
    store.close()


@given(st.lists(st.sampled_from(["", ".", "..", "a", "b.db", " ", "~", "\\"]), max_size=6))
def test_path_text_spells_a_path_as_pathlib_does(parts: list[str]) -> None:
    """The store names its file as ``str(Path(path))`` did, without importing pathlib."""
    for text in ("/".join(parts), "/" + "/".join(parts), "//" + "/".join(parts)):
        assert path_text(text) == str(PurePosixPath(text))
        assert path_text(PurePosixPath(text)) == str(PurePosixPath(text))


def test_path_text_refuses_bytes_and_the_store_path_is_a_path(tmp_path: Path) -> None:
    with pytest.raises(TypeError):
        path_text(b"/tmp/x.db")  # type: ignore[arg-type]
    (tmp_path / "sub").mkdir()
    store = SqliteStore(str(tmp_path) + "//sub/./x.db")
    try:
        assert store.path == tmp_path / "sub" / "x.db" and isinstance(store.path, Path)
        assert (tmp_path / "sub" / "x.db").is_file()
    finally:
        store.close()
