"""The transcript shapes of issue 13 (and the special paths of issue 17, item 4)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from loopwatch import UNDEFINED
from loopwatch.replay import ReplaySettings, replay_run
from loopwatch.transcripts import (
    NotATranscript,
    ReplayCall,
    Run,
    TranscriptError,
    parse_text,
    read_transcript,
)
from loopwatch.transcripts._common import CallBook, CallDraft, RunAssembler
from loopwatch.transcripts.detect import walk_transcripts


def _jsonl(rows: list[dict[str, object]]) -> str:
    return "\n".join(json.dumps(row) for row in rows) + "\n"


def _entry(entry_id: str, parent: str | None, message: dict[str, object]) -> dict[str, object]:
    return {"type": "message", "id": entry_id, "parentId": parent, "message": message}


def _call(call_id: str, name: str = "exec", command: str = "ls") -> dict[str, object]:
    block = {"type": "toolCall", "id": call_id, "name": name, "arguments": {"command": command}}
    return {"role": "assistant", "content": [block]}


def _result(
    call_id: str, text: str, *, error: bool = False, name: str = "exec"
) -> dict[str, object]:
    return {
        "role": "toolResult",
        "toolCallId": call_id,
        "toolName": name,
        "content": [{"type": "text", "text": text}],
        "isError": error,
    }


# --- each call once ----------------------------------------------------------------------


def test_openclaw_compaction_branch_copies_are_replayed_once_in_branch_order() -> None:
    rows = [
        {"type": "session", "version": 3, "id": "s"},
        _entry("u1", None, {"role": "user", "content": "go"}),
        _entry("a1", "u1", _call("c1", command="one")),
        _entry("r1", "a1", _result("c1", "1")),
        _entry("a2", "r1", _call("c2", command="two")),
        _entry("r2", "a2", _result("c2", "2")),
        {
            "type": "compaction",
            "id": "k1",
            "parentId": "u1",
            "summary": "s",
            "firstKeptEntryId": "a1",
        },
        # The kept history re-appended on the new branch: the same call ids again.
        _entry("a1b", "k1", _call("c1", command="one")),
        _entry("r1b", "a1b", _result("c1", "1")),
        _entry("a2b", "r1b", _call("c2", command="two")),
        _entry("r2b", "a2b", _result("c2", "2")),
        _entry("a3", "r2b", _call("c3", command="three")),
        _entry("r3", "a3", _result("c3", "3")),
    ]
    transcript = parse_text(_jsonl(rows))
    calls = [call for run in transcript.runs for call in run.calls]
    assert [call.call_id for call in calls] == ["c1", "c2", "c3"]
    assert transcript.notes == ()  # the originals are the copies' calls: nothing abandoned
    assert [call.line for call in calls] == [8, 10, 12]  # the leaf's branch, not the original


def test_openclaw_abandoned_branch_is_not_replayed() -> None:
    rows = [
        _entry("u1", None, {"role": "user", "content": "go"}),
        _entry("a1", "u1", _call("c1", command="abandoned")),
        _entry("a2", "u1", _call("c2", command="kept")),
    ]
    transcript = parse_text(_jsonl(rows), format="openclaw")
    (run,) = transcript.runs
    assert [call.call_id for call in run.calls] == ["c2"]
    assert transcript.notes == ("1 calls on abandoned branches of the session tree not replayed",)


def test_openclaw_without_ids_is_replayed_in_file_order() -> None:
    rows = [{"role": "user", "content": "go"}, _call("c1"), _call("c2")]
    (run,) = parse_text(_jsonl(rows), format="openclaw").runs
    assert [call.call_id for call in run.calls] == ["c1", "c2"]


def test_claude_code_copied_history_is_counted_once() -> None:
    use = {"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {"command": "ls"}}
    assistant = {
        "type": "assistant",
        "sessionId": "s",
        "message": {"role": "assistant", "content": [use]},
    }
    rows = [assistant, assistant, {**assistant, "isSidechain": True, "agentId": "x"}]
    transcript = parse_text(_jsonl(rows))
    assert transcript.format == "claude-code"
    assert transcript.call_count == 1
    assert transcript.notes == ("2 calls copied (ids already seen): counted once",)


def test_openclaw_orphan_results_of_a_missing_tool_rebuild_the_calls_and_are_caught() -> None:
    rows: list[dict[str, object]] = [_entry("u1", None, {"role": "user", "content": "go"})]
    parent = "u1"
    for index in range(11):
        entry_id = f"r{index}"
        message = _result(f"x{index}", "Tool read_file not found", error=True, name="read_file")
        rows.append(_entry(entry_id, parent, message))
        parent = entry_id
    transcript = parse_text(_jsonl(rows))
    (run,) = transcript.runs
    assert len(run.calls) == 11
    assert all(
        call.tool == "read_file" and call.error == "Tool read_file not found" for call in run.calls
    )
    assert "11 calls rebuilt from results without their call" in transcript.notes
    replay = replay_run(run)
    assert replay.warned or replay.blocked  # the missing-tool loop is no longer invisible


def test_results_without_calls_are_counted_as_unmatched() -> None:
    messages = [
        {"role": "assistant", "content": None, "tool_calls": []},
        {"role": "tool", "tool_call_id": "nope", "content": "x"},
    ]
    transcript = parse_text(json.dumps(messages))
    assert transcript.call_count == 0
    assert transcript.unmatched_results == 1


# --- batches and cancellations -----------------------------------------------------------


class _Recording(ReplaySettings):
    """Replay settings whose guard records the order of its calls."""

    log: list[str]

    def new_guard(self):  # type: ignore[no-untyped-def]
        guard = super().new_guard()
        log = self.log
        before, after = guard.before_call, guard.after_call

        def record_before(tool: str, *args: object, **kwargs: object) -> object:
            log.append(f"before {kwargs.get('tool_call_id')}")
            return before(tool, *args, **kwargs)  # type: ignore[arg-type]

        def record_after(tool: str, *args: object, **kwargs: object) -> object:
            log.append(f"after {kwargs.get('tool_call_id')}")
            return after(tool, *args, **kwargs)  # type: ignore[arg-type]

        guard.before_call = record_before  # type: ignore[method-assign]
        guard.after_call = record_after  # type: ignore[method-assign]
        return guard


def test_a_batch_is_replayed_every_call_first_then_the_outcomes() -> None:
    calls = (
        ReplayCall("read", {"p": 1}, result="a", call_id="a", batch=1),
        ReplayCall("read", {"p": 2}, result="b", call_id="b", batch=1),
        ReplayCall("read", {"p": 3}, result="c", call_id="c"),
    )
    settings = _Recording()
    object.__setattr__(settings, "log", [])
    replay = replay_run(Run(None, "", calls), settings)
    assert settings.log == ["before a", "before b", "after a", "after b", "before c", "after c"]
    assert [d.index for d in replay.decisions] == [1, 2, 3]


def test_sibling_cancellations_are_not_replayed_as_failures() -> None:
    records = []
    for turn in range(12):
        uses = [
            {
                "type": "tool_use",
                "id": f"f{turn}",
                "name": "Bash",
                "input": {"command": f"make {turn}"},
            },
            {"type": "tool_use", "id": f"s{turn}", "name": "Read", "input": {"file_path": "/a"}},
        ]
        records.append(
            {
                "type": "assistant",
                "sessionId": "s",
                "message": {"id": f"m{turn}", "role": "assistant", "content": uses},
            }
        )
        results = [
            {
                "type": "tool_result",
                "tool_use_id": f"f{turn}",
                "content": f"error {turn}",
                "is_error": True,
            },
            {
                "type": "tool_result",
                "tool_use_id": f"s{turn}",
                "content": (
                    "<tool_use_error>Cancelled: parallel tool call Bash(make) errored"
                    "</tool_use_error>"
                ),
                "is_error": True,
            },
        ]
        records.append(
            {"type": "user", "sessionId": "s", "message": {"role": "user", "content": results}}
        )
    transcript = parse_text(_jsonl(records))
    (run,) = transcript.runs
    siblings = [call for call in run.calls if call.tool == "Read"]
    assert len(siblings) == 12
    assert all(call.error is UNDEFINED and call.result is UNDEFINED for call in siblings)
    assert "12 calls cancelled or never run: no outcome replayed" in transcript.notes
    # Twelve identical Read calls still count as calls, but not as twelve identical failures.
    replay = replay_run(run)
    assert replay.calls == 24


# --- detection of documents of other shapes ----------------------------------------------


def test_a_valid_document_of_another_shape_names_its_keys(tmp_path: Path) -> None:
    path = tmp_path / "config.traj"
    path.write_text(json.dumps({"agent": {"model": "x"}, "problem": "y"}, indent=2))
    with pytest.raises(NotATranscript) as caught:
        read_transcript(path)
    assert "invalid JSON" not in caught.value.reason
    assert "a JSON object with keys agent, problem" in caught.value.reason


@pytest.mark.parametrize("kind", [[], {}, ["ActionEvent"], {"ActionEvent": 1}])
@pytest.mark.parametrize("lines", [False, True], ids=["document", "jsonl"])
def test_an_event_kind_that_is_not_a_string_is_not_an_sdk_event(kind: object, lines: bool) -> None:
    """``kind`` may be any JSON value: a list or an object is no V1 event (it raised
    ``TypeError: unhashable type`` out of detection, ending a whole folder's scan)."""
    text = json.dumps({"kind": kind, "id": 1}) + ("\n" if lines else "")
    with pytest.raises(NotATranscript):
        parse_text(text, path="x.json")


def test_a_pretty_printed_swe_agent_trajectory_is_not_invalid_json(tmp_path: Path) -> None:
    path = tmp_path / "x.traj"
    document = {"trajectory": [{"action": "ls\n", "observation": "a", "thought": "t"}], "info": {}}
    path.write_text(json.dumps(document, indent=2))
    transcript = read_transcript(path)
    assert (transcript.format, transcript.call_count) == ("swe-agent", 1)


# --- folder walks and special paths ------------------------------------------------------


def test_side_files_and_copies_are_ignored_and_counted(tmp_path: Path) -> None:
    project = tmp_path / "project"
    (project / "s1" / "subagents").mkdir(parents=True)
    line = json.dumps(
        {"type": "user", "sessionId": "s", "message": {"role": "user", "content": "hi"}}
    )
    (project / "s1.jsonl").write_text(line + "\n")
    (project / "s1" / "subagents" / "agent-a1.jsonl").write_text(line + "\n")
    (project / "s1" / "subagents" / "agent-a1.meta.json").write_text('{"agentType": "x"}')
    (project / "s1" / "subagents" / "agent-acompact-9.jsonl").write_text(line + "\n")
    (project / "s1" / "subagents" / "agent-aside_question-3.jsonl").write_text(line + "\n")
    (project / "s1.checkpoint.1.jsonl").write_text(line + "\n")
    found = walk_transcripts([project])
    assert [os.path.basename(f) for f in found.files] == ["agent-a1.jsonl", "s1.jsonl"]
    assert found.problems == ()
    assert sorted(os.path.basename(e.path) for e in found.ignored) == [
        "agent-a1.meta.json",
        "agent-acompact-9.jsonl",
        "agent-aside_question-3.jsonl",
        "s1.checkpoint.1.jsonl",
    ]


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs on this platform")
def test_a_fifo_is_refused_named_and_ignored_in_a_walk(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe.jsonl"
    os.mkfifo(fifo)
    with pytest.raises(TranscriptError) as caught:
        read_transcript(fifo)  # must not block waiting for a writer
    assert caught.value.reason == "not a regular file (a FIFO)"
    named = walk_transcripts([fifo])
    assert [p.reason for p in named.problems] == ["not a regular file (a FIFO)"]
    walked = walk_transcripts([tmp_path])
    assert walked.files == ()
    assert [e.reason for e in walked.ignored] == ["skipped: a FIFO"]


@pytest.mark.skipif(not os.path.exists("/dev/zero"), reason="no /dev/zero here")
def test_a_device_is_refused_without_reading_it() -> None:
    with pytest.raises(TranscriptError) as caught:
        read_transcript("/dev/zero")
    assert caught.value.reason == "not a regular file (a device)"


def test_a_file_over_the_size_cap_is_refused_with_a_note(tmp_path: Path) -> None:
    path = tmp_path / "big.jsonl"
    path.write_text('{"tool": "x"}\n' * 100)
    with pytest.raises(TranscriptError) as caught:
        read_transcript(path, max_bytes=100)
    assert "larger than the" in caught.value.reason and "--max-file-size" in caught.value.reason
    assert read_transcript(path).call_count == 100


def test_symlink_loops_are_walked_once(tmp_path: Path) -> None:
    root = tmp_path / "root"
    (root / "a").mkdir(parents=True)
    (root / "a" / "run.jsonl").write_text('{"tool": "x"}\n')
    (root / "a" / "loop").symlink_to(root, target_is_directory=True)
    (root / "a" / "back").symlink_to(root / "a", target_is_directory=True)
    (root / "same.jsonl").symlink_to(root / "a" / "run.jsonl")
    found = walk_transcripts([root, root / "a"])
    assert len(found.files) == 1
    assert found.problems == ()


def test_an_openhands_events_folder_is_one_transcript(tmp_path: Path) -> None:
    events = tmp_path / "sessions" / "abc" / "events"
    events.mkdir(parents=True)
    stream = [
        {"id": 0, "source": "user", "action": "message", "args": {"content": "go"}},
        {"id": 1, "source": "agent", "action": "run", "args": {"command": "ls"}},
        {"id": 2, "source": "agent", "observation": "run", "content": "a.txt", "cause": 1},
        {"id": 3, "source": "agent", "action": "run", "args": {"command": "cat b"}},
        {"id": 4, "source": "agent", "observation": "error", "content": "no b", "cause": 3},
    ]
    for event in stream:
        (events / f"{event['id']}.json").write_text(json.dumps(event))
    (events / "10.json").write_text(
        json.dumps({"id": 10, "source": "agent", "action": "finish", "args": {}})
    )
    found = walk_transcripts([tmp_path])
    assert found.files == (str(events),)
    transcript = read_transcript(events)
    assert transcript.format == "openhands"
    ls, cat, finish = transcript.runs[0].calls
    assert ls.result == "a.txt"
    assert cat.error == "no b"
    assert finish.tool == "finish"


def test_a_session_opening_with_an_unknown_record_type_is_still_detected() -> None:
    use = {"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "ls"}}
    rows = [
        {"kind": "custom-title", "title": "x"},
        {"type": "assistant", "sessionId": "s", "message": {"role": "assistant", "content": [use]}},
    ]
    transcript = parse_text(_jsonl(rows))
    assert (transcript.format, transcript.call_count) == ("claude-code", 1)


def test_claude_code_sdk_array_with_other_record_types() -> None:
    use = {"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "ls"}}
    records = [
        {"type": "system", "subtype": "init", "session_id": "s"},
        {"type": "stream_event", "event": {"type": "message_start"}},
        {"type": "assistant", "message": {"role": "assistant", "content": [use]}},
        {"type": "result", "subtype": "success"},
    ]
    transcript = parse_text(json.dumps(records))
    assert (transcript.format, transcript.call_count) == ("claude-code-sdk", 1)


def test_mark_batch_groups_two_or_more_and_keeps_a_grown_groups_batch() -> None:
    book = CallBook(RunAssembler())
    alone = [CallDraft("a", {}, None, None, None, None)]
    book.mark_batch(alone)
    assert alone[0].batch is None
    pair = [CallDraft(name, {}, None, None, None, None) for name in "bc"]
    book.mark_batch(pair)
    assert pair[0].batch == pair[1].batch == 1
    grown = [*pair, CallDraft("d", {}, None, None, None, None)]
    book.mark_batch(grown)  # a split message's later line: still the first batch
    assert {draft.batch for draft in grown} == {1}
    groups = {"r1": [CallDraft("e", {}, None, None, None, None)] * 2, "r2": alone}
    book.mark_batches(groups)
    assert groups["r1"][0].batch == 2 and alone[0].batch is None
