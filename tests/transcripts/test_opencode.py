"""OpenCode sessions: ``opencode export`` output, the storage folder and the SQLite database
(samples in tests/data/transcripts/opencode/, built to ``message-v2.ts``; see SOURCES.md)."""

from __future__ import annotations

import json
import shutil
import sqlite3
from collections.abc import Mapping
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from loopwatch import UNDEFINED
from loopwatch.cli import main
from loopwatch.transcripts import (
    Compaction,
    NotATranscript,
    ReplayCall,
    Transcript,
    TranscriptError,
    parse_transcript,
    read_transcript,
    walk_transcripts,
)

DATA = Path(__file__).resolve().parents[1] / "data" / "transcripts" / "opencode"
EXPORT = DATA / "export-ses_5f3a1c2e7ffeQk2mVn8rT4bLwX.json"
STORAGE = DATA / "storage"
SESSION = "ses_5f3a1c2e7ffeQk2mVn8rT4bLwX"
CHILD = "ses_5f3a1b9d4ffeHc3nWo9sU5cMyY"
PROJECT = "a91c9c3f0f2f7b3e6d4c1b2a0e9f8d7c6b5a4f3e"


def _calls(transcript: Transcript) -> list[ReplayCall]:
    return [call for run in transcript.runs for call in run.calls]


def _key(call: ReplayCall) -> tuple[object, ...]:
    return (call.tool, call.args, call.result, call.error, call.call_id, call.tokens)


def _export() -> dict[str, object]:
    document: dict[str, object] = json.loads(EXPORT.read_text())
    return document


# --- the SQLite database, built as OpenCode's migration writes it ------------------------------

#: The columns of ``packages/core/src/session/sql.ts`` that the reader touches (and a few
#: it does not), as drizzle creates them.
_SCHEMA = """
CREATE TABLE session (id text PRIMARY KEY, project_id text NOT NULL, parent_id text,
  slug text NOT NULL, directory text NOT NULL, title text NOT NULL, version text NOT NULL,
  time_created integer NOT NULL, time_updated integer NOT NULL);
CREATE TABLE message (id text PRIMARY KEY, session_id text NOT NULL,
  time_created integer NOT NULL, time_updated integer NOT NULL, data text NOT NULL);
CREATE TABLE part (id text PRIMARY KEY, message_id text NOT NULL, session_id text NOT NULL,
  time_created integer NOT NULL, time_updated integer NOT NULL, data text NOT NULL);
CREATE INDEX message_session_time_created_id_idx ON message (session_id, time_created, id);
CREATE INDEX part_message_id_id_idx ON part (message_id, id);
"""


def _database(path: Path, document: Mapping[str, object], *, wal: bool = False) -> Path:
    """A database holding ``document``'s session, rows as ``json-migration.ts`` writes them
    (``data`` the record without its ids)."""
    connection = sqlite3.connect(path)
    connection.executescript(_SCHEMA)
    if wal:
        connection.execute("PRAGMA journal_mode = WAL")
    info = document["info"]
    assert isinstance(info, dict)
    connection.execute(
        "INSERT INTO session VALUES (?, ?, NULL, ?, ?, ?, ?, ?, ?)",
        (info["id"], PROJECT, "brave-cart", "/home/dev/shop", info["title"], "1.2.10", 1, 2),
    )
    messages = document["messages"]
    assert isinstance(messages, list)
    for message in messages:
        data = {k: v for k, v in message["info"].items() if k not in ("id", "sessionID")}
        created = message["info"]["time"]["created"]
        connection.execute(
            "INSERT INTO message VALUES (?, ?, ?, ?, ?)",
            (message["info"]["id"], info["id"], created, created, json.dumps(data)),
        )
        for part in message["parts"]:
            rest = {k: v for k, v in part.items() if k not in ("id", "sessionID", "messageID")}
            connection.execute(
                "INSERT INTO part VALUES (?, ?, ?, ?, ?, ?)",
                (part["id"], part["messageID"], info["id"], created, created, json.dumps(rest)),
            )
    connection.commit()
    connection.close()
    return path


# --- opencode export ---------------------------------------------------------------------------


def test_an_export_is_read_with_its_outcomes() -> None:
    transcript = read_transcript(EXPORT)
    assert transcript.format == "opencode"
    (run,) = transcript.runs
    assert run.run_id == SESSION
    tools = [c.tool for c in run.calls]
    assert tools == ["bash", "read", "edit", "edit", "bash", "bash", "bash"]
    failing, read, refused, edit, passing, killed, running = run.calls
    # bash exits 1: a failure whose text is what the model saw
    assert failing.result is UNDEFINED and "1 failed" in str(failing.error)
    assert failing.args == {
        "command": "python -m pytest -q tests/test_cart.py",
        "description": "Runs the cart tests",
    }
    assert isinstance(read.result, str) and read.error is UNDEFINED
    assert refused.error == "Error: oldString not found in content"
    assert edit.result == "Edit applied successfully." and edit.error is UNDEFINED
    assert "12 passed" in str(passing.result) and passing.error is UNDEFINED
    # killed by the tool's timeout: exit null, the <bash_metadata> note
    assert killed.result is UNDEFINED and "exceeding timeout" in str(killed.error)
    # still running when the session ended: counted, no outcome, and a note
    assert running.result is UNDEFINED and running.error is UNDEFINED
    assert any("never finished" in note for note in transcript.notes)
    assert transcript.skipped_calls == 0 and transcript.unmatched_results == 0


def test_the_parts_of_one_message_are_one_batch_sharing_its_step_tokens() -> None:
    calls = _calls(read_transcript(EXPORT))
    assert calls[0].batch is not None and calls[0].batch == calls[1].batch
    assert calls[3].batch is not None and calls[3].batch == calls[4].batch != calls[0].batch
    assert calls[2].batch is None
    # step-finish tokens 8120 + 164 + 8110, shared by the two calls (remainder to the first)
    assert (calls[0].tokens, calls[1].tokens) == (8197, 8197)
    # the cut-off last message has no step-finish: its own tokens are used
    assert calls[6].tokens == 9100 + 80 + 8900 + 200


def test_steps_of_one_older_message_are_separate_batches() -> None:
    """OpenCode releases that ran many steps in one message open each with ``step-start``."""
    document = _export()
    messages = document["messages"]
    assert isinstance(messages, list)
    merged = dict(messages[1])
    merged["parts"] = messages[1]["parts"] + messages[3]["parts"]
    document["messages"] = [messages[0], merged]
    transcript = parse_transcript(json.dumps(document).encode(), path="export.json")
    first, second, third, fourth = _calls(transcript)
    assert first.batch == second.batch and third.batch == fourth.batch
    assert first.batch != third.batch


def test_a_compaction_part_arms_the_post_compaction_guard() -> None:
    document = _export()
    messages = document["messages"]
    assert isinstance(messages, list)
    messages[4]["parts"].append(
        {"id": "prt_x", "messageID": "m", "sessionID": SESSION, "type": "compaction", "auto": True}
    )
    (run,) = parse_transcript(json.dumps(document).encode(), path="e.json").runs
    kinds = [type(event).__name__ for event in run.events]
    assert kinds.index("Compaction") == 5  # after the five calls before that user message
    assert isinstance(run.events[5], Compaction) and run.events[5].run_id == SESSION


def test_an_unknown_tool_like_part_is_a_skipped_call() -> None:
    document = _export()
    messages = document["messages"]
    assert isinstance(messages, list)
    messages[1]["parts"].insert(1, {"type": "tool-invocation", "toolInvocation": {"x": 1}})
    messages[1]["parts"].insert(1, {"type": "hologram", "text": "?"})
    transcript = parse_transcript(json.dumps(document).encode(), path="e.json")
    assert transcript.call_count == 7 and transcript.skipped_calls == 1
    assert any("tool-invocation part (1)" in note for note in transcript.notes)
    assert any("hologram part (1)" in note for note in transcript.notes)


def test_an_exit_code_is_read_for_bash_only() -> None:
    document = _export()
    messages = document["messages"]
    assert isinstance(messages, list)
    part = messages[1]["parts"][2]
    part["tool"] = "mcp_shell"  # another tool's metadata.exit means nothing to OpenCode
    (call, *_) = _calls(parse_transcript(json.dumps(document).encode(), path="e.json"))
    assert call.error is UNDEFINED and "1 failed" in str(call.result)


def test_a_malformed_part_names_its_message() -> None:
    document = _export()
    messages = document["messages"]
    assert isinstance(messages, list)
    messages[2]["parts"].append({"type": "tool", "tool": 7, "state": {}})
    with pytest.raises(TranscriptError, match='message 3: a tool part needs a string "tool"'):
        parse_transcript(json.dumps(document).encode(), path="e.json")


# --- the storage folder ------------------------------------------------------------------------


def test_a_storage_folder_is_read_as_its_sessions() -> None:
    transcript = read_transcript(STORAGE)
    assert transcript.format == "opencode"
    assert [(run.label, len(run.calls)) for run in transcript.runs] == [(SESSION, 5), (CHILD, 1)]
    # the storage holds the same first four messages as the export: the same calls
    assert [_key(c) for c in transcript.runs[0].calls] == [
        _key(c) for c in _calls(read_transcript(EXPORT))[:5]
    ]
    assert transcript.runs[1].calls[0].tool == "grep"


def test_a_session_file_named_alone_is_read_as_that_session() -> None:
    path = STORAGE / "session" / PROJECT / f"{CHILD}.json"
    transcript = read_transcript(path)
    assert [(run.label, len(run.calls)) for run in transcript.runs] == [(CHILD, 1)]


def test_a_walk_reads_the_storage_folder_once_and_skips_it_beside_a_database(
    tmp_path: Path,
) -> None:
    home = tmp_path / "opencode"
    shutil.copytree(STORAGE, home / "storage")
    found = walk_transcripts([tmp_path])
    assert found.files == (str(home / "storage"),)
    _database(home / "opencode.db", _export())
    found = walk_transcripts([tmp_path])
    assert found.files == (str(home / "opencode.db"),)
    assert [e.reason for e in found.ignored] == [
        "an OpenCode storage folder beside its opencode.db (migrated into it: the database is read)"
    ]


def test_an_unreadable_storage_file_is_a_skipped_call_not_an_abort(tmp_path: Path) -> None:
    storage = shutil.copytree(STORAGE, tmp_path / "storage")
    broken = next((storage / "part" / "msg_a0c1e5f03003Kp2gTq8wZxNcVm").glob("*02.json"))
    broken.write_text('{"type": "tool", "tool": "edit", "callID": ')
    transcript = read_transcript(storage)
    assert transcript.call_count == 5 and transcript.skipped_calls == 1
    assert any("storage file(s) not read" in note for note in transcript.notes)


def test_a_storage_folder_over_the_size_limit_is_refused(tmp_path: Path) -> None:
    with pytest.raises(TranscriptError, match="the storage folder is too big"):
        read_transcript(STORAGE, max_bytes=2000)


# --- the database ------------------------------------------------------------------------------


@pytest.mark.parametrize("wal", [False, True])
def test_the_database_is_read_like_the_export_and_left_untouched(tmp_path: Path, wal: bool) -> None:
    path = _database(tmp_path / "opencode.db", _export(), wal=wal)
    before = path.read_bytes()
    transcript = read_transcript(path)
    assert transcript.format == "opencode"
    assert [_key(c) for c in _calls(transcript)] == [
        _key(c) for c in _calls(read_transcript(EXPORT))
    ]
    assert path.read_bytes() == before


def test_a_database_of_another_program_is_not_a_transcript(tmp_path: Path) -> None:
    path = tmp_path / "notes.db"
    connection = sqlite3.connect(path)
    connection.execute("CREATE TABLE note (id integer, body text)")
    connection.commit()
    connection.close()
    with pytest.raises(NotATranscript, match="without OpenCode's message and part tables"):
        read_transcript(path)


def test_sessions_only_in_the_v2_table_make_the_file_a_doubt(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _database(tmp_path / "opencode.db", _export())
    connection = sqlite3.connect(path)
    connection.execute(
        "CREATE TABLE session_message (id text PRIMARY KEY, session_id text NOT NULL, "
        "type text NOT NULL, seq integer NOT NULL, time_created integer, time_updated "
        "integer, data text NOT NULL)"
    )
    connection.execute(
        "INSERT INTO session_message VALUES ('m1', 'ses_v2only', 'assistant', 1, 1, 1, '{}')"
    )
    connection.commit()
    connection.close()
    transcript = read_transcript(path)
    assert transcript.call_count == 7 and transcript.skipped_calls == 1
    assert any("session_message" in note for note in transcript.notes)
    assert main(["scan", str(path)]) == 4
    assert "1 skipped" in capsys.readouterr().out


def test_a_bad_row_names_itself(tmp_path: Path) -> None:
    path = _database(tmp_path / "opencode.db", _export())
    connection = sqlite3.connect(path)
    connection.execute("UPDATE part SET data = '{oops' WHERE id = (SELECT min(id) FROM part)")
    connection.commit()
    connection.close()
    with pytest.raises(TranscriptError, match=r"part prt_\w+: invalid JSON"):
        read_transcript(path)


def test_scan_of_the_samples_by_hand(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    db = _database(tmp_path / "opencode.db", _export())
    assert main(["scan", str(EXPORT), str(STORAGE), str(db)]) == 0
    out = capsys.readouterr().out
    assert "3 files, 4 runs, 20 calls" in out


# --- damaged input -----------------------------------------------------------------------------

_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner),
    max_leaves=12,
)
_PART = st.fixed_dictionaries(
    {"type": st.sampled_from(["tool", "text", "step-start", "step-finish", "x-tool", "retry"])},
    optional={
        "tool": st.sampled_from(["bash", "read"]) | _JSON,
        "callID": st.sampled_from(["c1", "c2"]) | _JSON,
        "state": st.fixed_dictionaries(
            {},
            optional={
                "status": st.sampled_from(["completed", "error", "pending", "running", "?"])
                | _JSON,
                "input": _JSON,
                "output": _JSON,
                "error": _JSON,
                "metadata": st.fixed_dictionaries({}, optional={"exit": _JSON}) | _JSON,
            },
        )
        | _JSON,
        "tokens": _JSON,
    },
)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.lists(_PART | _JSON, max_size=4), max_size=4), _JSON)
def test_any_export_is_read_or_reported_never_silently_clear(
    messages: list[list[object]], info: object
) -> None:
    document = {
        "info": {"id": SESSION},
        "messages": [{"info": info, "parts": parts} for parts in messages],
    }
    try:
        transcript = parse_transcript(json.dumps(document).encode(), path="export.json")
    except TranscriptError:
        return
    tool_parts = sum(
        1
        for parts in messages
        for part in parts
        if isinstance(part, Mapping) and part.get("type") == "tool"
    )
    assert transcript.format == "opencode" or not messages
    assert transcript.call_count <= tool_parts
    if tool_parts:
        assert transcript.call_count > 0  # copies aside, every tool part is a call


@settings(max_examples=60, deadline=None)
@given(
    cut=st.floats(min_value=0.0, max_value=1.0),
    flips=st.lists(st.tuples(st.floats(0.0, 1.0), st.integers(0, 255)), max_size=3),
)
def test_a_damaged_export_is_read_or_reported(cut: float, flips: list[tuple[float, int]]) -> None:
    data = bytearray(EXPORT.read_bytes())
    for where, byte in flips:
        data[int(where * (len(data) - 1))] = byte
    try:
        transcript = parse_transcript(bytes(data[: int(cut * len(data))]), path="e.json")
    except TranscriptError:
        return
    assert transcript.call_count <= 7 or flips


def test_a_damaged_database_is_reported(tmp_path: Path) -> None:
    path = _database(tmp_path / "opencode.db", _export())
    data = bytearray(path.read_bytes())
    data[100:4096] = bytes(len(data[100:4096]))
    path.write_bytes(bytes(data))
    with pytest.raises(TranscriptError):
        read_transcript(path)
