"""Real files of other people's agents, and the damage files suffer on the way to a scan.

``claude_code/subagent-2.1.220-consult-architect.jsonl`` is a real Claude Code 2.1.220
sub-agent session (``isSidechain``, ``agentId``, ``promptId``, ``attachment`` records,
``toolUseResult`` objects and strings), trimmed; see ``tests/data/transcripts/SOURCES.md``.
Its 24 ``tool_use`` blocks, 24 results and 2 ``is_error: true`` results were counted with
``jq``. The damage: a last line cut off mid-write, CRLF line ends, a BOM, compression, a
folder of mixed formats, and arbitrary cuts and byte flips (never a crash: read, or
reported).
"""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from loopwatch import UNDEFINED
from loopwatch.cli import main
from loopwatch.transcripts import TranscriptError, parse_transcript, read_transcript

DATA = Path(__file__).resolve().parents[1] / "data" / "transcripts"
SUBAGENT = DATA / "claude_code" / "subagent-2.1.220-consult-architect.jsonl"
#: One JSONL sample per line format, with its call count.
JSONL_SAMPLES = {
    "claude-code": (SUBAGENT, 24),
    "codex": (
        DATA / "codex" / "rollout-2025-10-29T01-00-00-0199aa00-0000-7000-8000-000000000001.jsonl",
        5,
    ),
    "gemini-cli": (DATA / "gemini-cli" / "session-2026-05-19T02-28-8b2e4f10.jsonl", 7),
    "loopwatch": (DATA / "loopwatch" / "loop.jsonl", None),
}


def test_a_real_claude_code_subagent_session_reads_every_call() -> None:
    transcript = read_transcript(SUBAGENT)
    assert transcript.format == "claude-code"
    (run,) = transcript.runs
    assert run.run_id == "sidechain:a1bee4ee26b0c17ef"
    assert len(run.calls) == 24
    assert [c.tool for c in run.calls].count("Read") == 14
    assert transcript.unmatched_results == 0 and transcript.skipped_calls == 0
    failed = [c for c in run.calls if c.error is not UNDEFINED]
    assert len(failed) == 2
    assert all(isinstance(c.error, str) and c.error.startswith("Exit code 1") for c in failed)
    assert all(c.result is not UNDEFINED for c in run.calls if c.error is UNDEFINED)
    assert transcript.notes == ()


def test_an_unknown_use_block_is_a_skipped_call_and_its_result_no_orphan() -> None:
    lines = [
        {
            "type": "assistant",
            "message": {
                "id": "m1",
                "role": "assistant",
                "content": [
                    {"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "ls"}},
                    {"type": "hologram_tool_use", "id": "t2", "name": "X", "input": {}},
                ],
            },
        },
        {
            "type": "user",
            "message": {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": "t1", "content": "a"},
                    {"type": "tool_result", "tool_use_id": "t2", "content": "b"},
                ],
            },
        },
    ]
    text = "\n".join(json.dumps(line) for line in (*lines, lines[0])) + "\n"  # a copy
    transcript = parse_transcript(text.encode(), path="s.jsonl")
    assert transcript.format == "claude-code"
    assert transcript.call_count == 1
    assert transcript.skipped_calls == 1  # the copy's block is the same call
    assert transcript.unmatched_results == 0
    assert any("hologram_tool_use (1)" in note for note in transcript.notes)


@pytest.mark.parametrize("fmt", sorted(JSONL_SAMPLES))
def test_a_last_line_cut_off_is_noted_and_the_rest_read(fmt: str) -> None:
    path, calls = JSONL_SAMPLES[fmt]
    data = path.read_bytes()
    whole = parse_transcript(data, path=path.name)
    cut = data.rstrip(b"\n") + b"\n" + data.split(b"\n", 1)[0][:40]
    transcript = parse_transcript(cut, path=path.name)
    assert transcript.format == fmt
    assert transcript.call_count == whole.call_count
    if calls is not None:
        assert transcript.call_count == calls
    assert transcript.skipped_calls == 1
    assert any("is cut off" in note for note in transcript.notes)


def test_a_bad_line_inside_the_file_is_still_a_skip() -> None:
    data = SUBAGENT.read_bytes().split(b"\n")
    data.insert(3, b'{"type": "assistant", "mess')
    with pytest.raises(TranscriptError) as caught:
        parse_transcript(b"\n".join(data), path="s.jsonl")
    assert caught.value.line == 4


def test_a_bad_last_line_that_ends_in_a_newline_is_a_skip() -> None:
    data = SUBAGENT.read_bytes() + b'{"type": "assistant", "mess\n'
    with pytest.raises(TranscriptError):
        parse_transcript(data, path="s.jsonl")


def test_a_cut_line_in_a_one_line_file_is_a_skip() -> None:
    with pytest.raises(TranscriptError):
        parse_transcript(b'{"type": "assistant", "mess', path="s.jsonl")


@pytest.mark.parametrize("fmt", sorted(JSONL_SAMPLES))
def test_crlf_and_a_bom_read_the_same(fmt: str) -> None:
    path, _calls = JSONL_SAMPLES[fmt]
    data = path.read_bytes()
    plain = parse_transcript(data, path=path.name)
    for variant in (data.replace(b"\n", b"\r\n"), b"\xef\xbb\xbf" + data):
        other = parse_transcript(variant, path=path.name)
        assert other.format == plain.format
        assert other.call_count == plain.call_count
        assert [c.tool for r in other.runs for c in r.calls] == [
            c.tool for r in plain.runs for c in r.calls
        ]


def test_a_compressed_transcript_is_named_skipped_alone_and_in_a_folder(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    archive = tmp_path / "session.jsonl.gz"
    archive.write_bytes(gzip.compress(SUBAGENT.read_bytes()))
    assert main(["scan", str(archive)]) == 3
    assert "gzip-compressed: not read" in capsys.readouterr().out
    (tmp_path / "notes.txt.gz").write_bytes(gzip.compress(b"x"))  # not a transcript name
    assert main(["scan", str(tmp_path)]) == 3
    out = capsys.readouterr().out
    assert "session.jsonl.gz: gzip-compressed" in out and "notes.txt.gz" not in out


def test_an_empty_file_is_a_doubt(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    (tmp_path / "empty.jsonl").write_bytes(b"")
    assert main(["scan", str(tmp_path / "empty.jsonl")]) == 4
    assert "no tool calls found" in capsys.readouterr().out


def test_a_folder_of_mixed_formats_reads_each_file_as_its_own(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    for fmt, (path, _calls) in JSONL_SAMPLES.items():
        folder = tmp_path / fmt
        folder.mkdir()
        shutil.copy(path, folder / path.name)
    shutil.copy(DATA / "openai" / "chat.json", tmp_path / "chat.json")
    shutil.copy(DATA / "swe-agent" / "rock.first3.traj", tmp_path / "rock.traj")
    code = main(["scan", str(tmp_path), "--json"])
    report = json.loads(capsys.readouterr().out)
    formats = {Path(entry["file"]).name: entry["format"] for entry in report["files"]}
    assert formats == {
        SUBAGENT.name: "claude-code",
        JSONL_SAMPLES["codex"][0].name: "codex",
        JSONL_SAMPLES["gemini-cli"][0].name: "gemini-cli",
        "loop.jsonl": "loopwatch",
        "chat.json": "openai",
        "rock.traj": "swe-agent",
    }
    assert all(entry["understood"] for entry in report["files"])
    assert code == 0 and report["totals"]["files_not_understood"] == 0


@settings(max_examples=60, deadline=None)
@given(
    fmt=st.sampled_from(sorted(JSONL_SAMPLES)),
    cut=st.floats(min_value=0.0, max_value=1.0),
    flips=st.lists(st.tuples(st.floats(0.0, 1.0), st.integers(0, 255)), max_size=3),
)
def test_a_damaged_sample_is_read_or_reported(
    fmt: str, cut: float, flips: list[tuple[float, int]]
) -> None:
    """Cut anywhere, bytes changed anywhere: a transcript or a TranscriptError, nothing else,
    and never more calls than the whole file has."""
    path, _calls = JSONL_SAMPLES[fmt]
    data = bytearray(path.read_bytes())
    whole = parse_transcript(bytes(data), path=path.name).call_count
    for where, byte in flips:
        data[int(where * (len(data) - 1))] = byte
    damaged = bytes(data[: int(cut * len(data))])
    try:
        transcript = parse_transcript(damaged, path=path.name)
    except TranscriptError:
        return
    if not flips:
        assert transcript.call_count <= whole


def test_a_gemini_built_in_tool_call_part_is_counted_not_replayed() -> None:
    body = {
        "contents": [
            {"role": "user", "parts": [{"text": "x"}]},
            {
                "role": "model",
                "parts": [
                    {"functionCall": {"name": "ls", "args": {}}},
                    {"executableCode": {"language": "PYTHON", "code": "print(1)"}},
                ],
            },
            {"role": "user", "parts": [{"functionResponse": {"name": "ls", "response": {}}}]},
            {"role": "model", "parts": [{"codeExecutionResult": {"outcome": "OUTCOME_OK"}}]},
        ]
    }
    transcript = parse_transcript(json.dumps(body).encode(), path="req.json")
    assert transcript.call_count == 1 and transcript.skipped_calls == 1
    assert any("executableCode part (1)" in note for note in transcript.notes)


def test_a_cursor_stream_call_without_a_body_is_counted_once() -> None:
    events = [
        {"type": "system", "subtype": "init", "session_id": "s"},
        {"type": "tool_call", "subtype": "started", "call_id": "c1", "tool_call": {"x": 1}},
        {"type": "tool_call", "subtype": "completed", "call_id": "c1", "tool_call": {"x": 1}},
        {
            "type": "tool_call",
            "subtype": "started",
            "call_id": "c2",
            "tool_call": {"readToolCall": {"args": {"path": "a"}}},
        },
    ]
    text = "\n".join(json.dumps(event) for event in events)
    transcript = parse_transcript(text.encode(), path="stream.jsonl")
    assert transcript.format == "cursor"
    assert transcript.call_count == 1 and transcript.skipped_calls == 1


def test_a_swe_agent_trajectory_saved_with_its_history_alone_is_read() -> None:
    """SWE-agent's function-calling demonstration: ``{"history": [...]}``, no ``trajectory``
    (5 ``tool_calls``, each answered by a ``tool`` message's ``tool_call_ids``)."""
    transcript = read_transcript(DATA / "swe-agent" / "function_calling_simple.history-only.traj")
    assert transcript.format == "swe-agent"
    (run,) = transcript.runs
    assert [c.tool for c in run.calls] == ["find_file", "open", "edit", "bash", "submit"]
    assert run.calls[3].args == {"command": "python tests/missing_colon.py"}
    assert all(isinstance(c.result, str) and c.error is UNDEFINED for c in run.calls)
    assert transcript.unmatched_results == 0


def test_an_openhands_resolver_output_in_the_memory_form_is_read() -> None:
    """OpenHands' issue-resolver ``output.jsonl`` (0.9 memory form: no ids, no causes)."""
    transcript = read_transcript(DATA / "openhands" / "resolver-memory-output.jsonl")
    assert transcript.format == "openhands"
    assert [(run.label, len(run.calls)) for run in transcript.runs] == [
        ("line-1", 4),
        ("line-2", 22),
    ]
    first = transcript.runs[0].calls
    assert [c.tool for c in first] == ["run", "run_ipython", "run", "finish"]
    assert first[0].args == {"command": "touch LICENSE"}
    assert first[2].args == {"command": "cat LICENSE"}
    assert isinstance(first[2].result, str) and first[2].result.startswith("MIT License")
    assert first[3].result is UNDEFINED  # finish: no observation
    assert transcript.unmatched_results == 0


def _memory_events(*observations: dict[str, object]) -> bytes:
    history: list[dict[str, object]] = [
        {"action": "run", "command": "make", "thought": "build", "is_confirmed": "confirmed"},
        *observations,
    ]
    line = {"issue": {"number": 1}, "instruction": "fix", "history": history}
    return (json.dumps(line) + "\n").encode()


def test_a_memory_form_observation_with_a_non_zero_exit_code_is_a_failure() -> None:
    data = _memory_events({"observation": "run", "content": "boom", "exit_code": 2})
    (call,) = parse_transcript(data, path="output.jsonl").runs[0].calls
    assert call.args == {"command": "make"}
    assert call.error == "boom" and call.result is UNDEFINED


def test_a_memory_form_observation_of_no_call_is_unmatched() -> None:
    data = _memory_events(
        {"observation": "run", "content": "ok", "exit_code": 0},
        {"observation": "read", "content": "stray"},
    )
    transcript = parse_transcript(data, path="output.jsonl")
    assert transcript.call_count == 1 and transcript.unmatched_results == 1


def test_sub_agent_calls_streamed_as_progress_records_are_noted_not_replayed() -> None:
    """Claude Code 2.1 copies a sub-agent's messages into the parent session as
    ``progress`` records; the sub-agent's own file holds the same calls."""
    task = {"type": "tool_use", "id": "t1", "name": "Task", "input": {"prompt": "look"}}
    inner = {"type": "tool_use", "id": "s1", "name": "Read", "input": {"file_path": "a"}}
    lines = [
        {
            "type": "assistant",
            "sessionId": "s",
            "message": {"role": "assistant", "content": [task]},
        },
        {
            "type": "progress",
            "sessionId": "s",
            "parentToolUseID": "t1",
            "data": {
                "type": "agent_progress",
                "agentId": "a22b0b3973014b318",
                "message": {
                    "type": "assistant",
                    "message": {"role": "assistant", "content": [inner]},
                },
            },
        },
    ]
    text = "\n".join(json.dumps(line) for line in lines) + "\n"
    transcript = parse_transcript(text.encode(), path="session.jsonl")
    assert transcript.format == "claude-code"
    assert [c.tool for r in transcript.runs for c in r.calls] == ["Task"]
    (note,) = transcript.notes
    assert note.startswith("1 sub-agent tool call streamed as progress records")
    assert transcript.skipped_calls == 0


def test_a_mini_swe_agent_run_saved_as_its_bare_messages_is_read() -> None:
    """mini-swe-agent's own test trajectory: a JSON list of messages, ``mswea_bash_command``
    blocks, ``<returncode>`` observations (two of them 1)."""
    path = DATA / "mini-swe-agent" / "messages-only-github_issue.traj.json"
    transcript = read_transcript(path)
    assert transcript.format == "mini-swe-agent"
    (run,) = transcript.runs
    assert len(run.calls) == 10 and {c.tool for c in run.calls} == {"bash"}
    assert [i for i, c in enumerate(run.calls) if c.error is not UNDEFINED] == [0, 7]
    assert transcript.unmatched_results == 0


def test_a_plain_chat_list_is_no_mini_swe_agent_run() -> None:
    chat = [
        {"role": "user", "content": "show me a bash block"},
        {"role": "assistant", "content": "```bash\nls\n```"},
    ]
    assert parse_transcript(json.dumps(chat).encode(), path="chat.json").format == "openai"
