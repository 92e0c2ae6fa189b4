"""Gemini CLI's chat compression and the post-compaction guard, as the real CLI sends it.

Gemini CLI fires ``PreCompress`` before *every* model request (``GeminiClient.processTurn``
→ ``tryCompressChat`` → ``ChatCompressionService.compress``, which fires the hook before it
compares the prompt's tokens with the threshold), so a session's hook stream is
``PreCompress``, ``BeforeTool``, ``AfterTool``, ``PreCompress``, ... whether or not anything
was compressed. A compression that ran restarts the chat, whose recorder appends
``{"$set":{"sessionId":...}}`` to the JSONL transcript (``ChatRecordingService.initialize``
@ google-gemini/gemini-cli 5411f113). These tests replay such streams through the hook
process (``tests/data/hooks/gemini``), with a transcript written as the CLI writes it.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from _hookkit import ALLOW, HookRunner, context, ended, payload

from loopwatch.hooks import gemini
from loopwatch.hooks._core import HookEvent

REF = ("--profile", "reference")
KEY = "gemini:S"


@pytest.fixture
def hooks(tmp_path: Path) -> Iterator[HookRunner]:
    runner = HookRunner(tmp_path)
    yield runner
    runner.close()


def _with_transcript(text: str, transcript: Path | None) -> str:
    data = json.loads(text)
    if transcript is not None:
        data["transcript_path"] = str(transcript)
    return json.dumps(data)


def _transcript(tmp_path: Path) -> Path:
    """A session file as ``ChatRecordingService`` starts it (metadata, one user message)."""
    path = tmp_path / "gemini" / "tmp" / "app" / "chats" / "session-2026-12-01T22-00-S.jsonl"
    path.parent.mkdir(parents=True)
    lines = [
        {
            "sessionId": "S",
            "projectHash": "0" * 64,
            "startTime": "2026-12-01T22:00:00.000Z",
            "lastUpdated": "2026-12-01T22:00:00.000Z",
            "kind": "main",
        },
        {"id": "m1", "timestamp": "2026-12-01T22:00:00.000Z", "type": "user", "content": "go"},
    ]
    path.write_text("".join(json.dumps(line, separators=(",", ":")) + "\n" for line in lines))
    return path


def _append(path: Path, record: object) -> None:
    with path.open("a", encoding="utf-8") as file:
        file.write(json.dumps(record, separators=(",", ":")) + "\n")


def _model_turn(path: Path, index: int) -> None:
    """What the recorder appends for a model answer (no restart record)."""
    _append(path, {"$set": {"lastUpdated": f"2026-12-01T22:0{index}:00.000Z"}})
    _append(
        path,
        {
            "id": f"g{index}",
            "timestamp": "2026-12-01T22:00:00.000Z",
            "type": "gemini",
            "content": "",
            "tokens": {"input": 9000, "output": 20, "cached": 0, "total": 9020},
        },
    )


def _compress(hooks: HookRunner, transcript: Path | None, trigger: str = "auto") -> None:
    data = json.loads(
        _with_transcript(payload("gemini", "compact", session="S", call=""), transcript)
    )
    data["trigger"] = trigger
    done = hooks.process("gemini", json.dumps(data), *REF)
    assert (done.returncode, done.stdout.strip(), done.stderr) == (0, ALLOW["gemini"], "")


def _call(hooks: HookRunner, transcript: Path | None, call: str) -> str:
    """One identical shell call, pre and post, through the hook process; the post answer."""
    pre = hooks.process(
        "gemini",
        _with_transcript(payload("gemini", "pre", session="S", call=call), transcript),
        *REF,
    )
    assert (pre.returncode, pre.stdout.strip()) == (0, ALLOW["gemini"])
    post = hooks.process(
        "gemini",
        _with_transcript(payload("gemini", "post", session="S", call=call), transcript),
        *REF,
    )
    assert post.returncode == 0
    return post.stdout


def _armed(hooks: HookRunner) -> tuple[bool, int]:
    store = hooks.store()
    snapshot = store.guard_snapshot(KEY, None, time.time())
    store.close()
    return snapshot.armed, snapshot.remaining_attempts


def test_a_pre_compress_that_compressed_nothing_does_not_arm(
    hooks: HookRunner, tmp_path: Path
) -> None:
    transcript = _transcript(tmp_path)
    answers = []
    for index in (1, 2, 3):
        _compress(hooks, transcript)  # the attempt before each model request
        _model_turn(transcript, index)
        answers.append(_call(hooks, transcript, f"c{index}"))
    assert _armed(hooks) == (False, 0)
    # Three identical calls with the reference profile: no abort, no warning yet.
    assert all(answer.strip() == ALLOW["gemini"] for answer in answers)


@pytest.mark.parametrize("trigger", ["auto", "manual"])
def test_a_compression_arms_and_a_loop_that_survives_it_ends_the_run(
    hooks: HookRunner, tmp_path: Path, trigger: str
) -> None:
    transcript = _transcript(tmp_path)
    _compress(hooks, transcript)
    _model_turn(transcript, 0)
    _call(hooks, transcript, "c0")
    _compress(hooks, transcript, trigger)
    assert _armed(hooks) == (False, 0)  # not yet: the hook fires before the compression
    _append(transcript, {"$set": {"sessionId": "S"}})  # the compression ran: the chat restarted
    _model_turn(transcript, 1)
    answers = [_call(hooks, transcript, "c1")]
    for index in (2, 3):
        # The attempts before the next requests compress nothing: the window goes on.
        _compress(hooks, transcript)
        _model_turn(transcript, index)
        answers.append(_call(hooks, transcript, f"c{index}"))
    assert [ended("gemini", a) for a in answers[:2]] == [None, None]
    told = context("gemini", answers[2])
    assert told is not None and "did not break the loop" in told
    reason = ended("gemini", answers[2])
    assert reason is not None and reason.startswith("CRITICAL: tool run_shell_command repeated 3")


def test_without_a_transcript_the_first_attempt_arms_and_later_ones_keep_the_window(
    hooks: HookRunner,
) -> None:
    # No transcript to read (the fixture's path does not exist here, as when recording is
    # off): the attempt arms, and the next attempts do not restart the window.
    _compress(hooks, None)
    assert _armed(hooks) == (True, 3)
    first = _call(hooks, None, "c1")
    _compress(hooks, None)
    assert _armed(hooks) == (True, 2)
    second = _call(hooks, None, "c2")
    _compress(hooks, None)
    third = _call(hooks, None, "c3")
    assert ended("gemini", first) is None and ended("gemini", second) is None
    assert ended("gemini", third) is not None


def test_a_transcript_rewritten_shorter_cannot_tell_and_arms(
    hooks: HookRunner, tmp_path: Path
) -> None:
    transcript = _transcript(tmp_path)
    _model_turn(transcript, 1)
    _compress(hooks, transcript)
    transcript.write_text('{"sessionId":"S"}\n')  # rewritten whole, as a failed reload does
    _call(hooks, transcript, "c1")
    assert _armed(hooks) == (True, 2)
    log = (hooks.state / "loopwatch" / "hook.log").read_text()
    assert "cannot tell whether a compaction ran; arming" in log


def _event(path: str | None) -> HookEvent:
    return HookEvent(kind="maybe_compaction", name="PreCompress", session="S", transcript=path)


def test_the_mark_is_the_size_of_a_jsonl_transcript_only(tmp_path: Path) -> None:
    jsonl = tmp_path / "session-x.jsonl"
    jsonl.write_bytes(b"12345\n")
    assert gemini.transcript_mark(_event(str(jsonl))) == f"6 {jsonl}"
    legacy = tmp_path / "session-x.json"  # rewritten whole on every update: no offsets
    legacy.write_text("{}")
    for path in (str(legacy), "relative/session.jsonl", str(tmp_path / "gone.jsonl"), "", None):
        assert gemini.transcript_mark(_event(path)) is None


@pytest.mark.parametrize(
    ("gained", "expected"),
    [
        (b'{"$set":{"sessionId":"S"}}\n', True),
        (b'{"$set":{"lastUpdated":"x"}}\n{"$set":{"sessionId":"S"}}\n{"id":"g"}\n', True),
        (b'{"$set":{"sessionId":"S"}}', True),  # no newline yet
        (b'{"$set":{"lastUpdated":"x"}}\n', False),
        (b'{"$set":{"sessionId":"S","summary":"s"}}\n', False),
        (b'{"$set":{"sessionId":', False),  # cut off
        (b"", False),
        (b'{"type":"gemini","content":"{\\"$set\\":{\\"sessionId\\":1}}"}\n', False),
    ],
)
def test_what_the_transcript_gained_tells_a_compression(
    tmp_path: Path, gained: bytes, expected: bool
) -> None:
    path = tmp_path / "s.jsonl"
    path.write_bytes(b'{"sessionId":"S"}\n')
    mark = gemini.transcript_mark(_event(str(path)))
    assert mark is not None
    with path.open("ab") as file:
        file.write(gained)
    assert gemini.compressed_since(mark) is expected


def test_a_transcript_that_cannot_be_read_again_cannot_tell(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_bytes(b'{"sessionId":"S"}\n{"id":"m1"}\n')
    mark = gemini.transcript_mark(_event(str(path)))
    assert mark is not None
    path.write_bytes(b"{}\n")
    assert gemini.compressed_since(mark) is None
    path.unlink()
    assert gemini.compressed_since(mark) is None
    assert gemini.compressed_since("not-a-size /x.jsonl") is None


def test_a_transcript_that_is_no_regular_file_cannot_tell(tmp_path: Path) -> None:
    import os

    fifo = tmp_path / "session-x.jsonl"
    os.mkfifo(fifo)
    assert gemini.transcript_mark(_event(str(fifo))) is None
    assert gemini.compressed_since(f"0 {fifo}") is None  # and it does not hang
    folder = tmp_path / "folder.jsonl"
    folder.mkdir()
    assert gemini.transcript_mark(_event(str(folder))) is None
    assert gemini.compressed_since(f"0 {folder}") is None
    assert gemini.transcript_mark(_event("/nul\x00.jsonl")) is None
