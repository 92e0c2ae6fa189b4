"""``loopwatch scan``: never a silent all-clear, per-file rows, header counts, clean output."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from loopwatch.cli import main


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _chat_without_calls(tmp_path: Path) -> Path:
    path = tmp_path / "chat.json"
    path.write_text(
        json.dumps([{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}])
    )
    return path


def test_a_transcript_without_calls_is_exit_4_with_a_note_everywhere(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = _chat_without_calls(tmp_path)
    code, out, err = _run(capsys, "scan", str(path))
    assert code == 4
    assert "no tool calls found (read as openai)" in err
    assert "chat.json" in out and "no calls" in out  # the row's note cell
    assert "notes:" in out
    code, out, _err = _run(capsys, "scan", str(path), "--json")
    assert code == 4
    (entry,) = json.loads(out)["files"]
    assert entry["understood"] is False
    assert entry["doubts"][0].startswith("no tool calls found")
    assert json.loads(out)["totals"]["files_not_understood"] == 1
    report = tmp_path / "r.html"
    assert _run(capsys, "scan", str(path), "--html", str(report))[0] == 4
    assert "no tool calls found" in report.read_text(encoding="utf-8")


def test_unmatched_results_are_exit_4(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = tmp_path / "orphans.json"
    messages = [
        {
            "role": "assistant",
            "tool_calls": [{"id": "a", "function": {"name": "f", "arguments": "{}"}}],
        },
        {"role": "tool", "tool_call_id": "a", "content": "ok"},
        {"role": "tool", "tool_call_id": "zzz", "content": "lost"},
    ]
    path.write_text(json.dumps(messages))
    code, out, _err = _run(capsys, "scan", str(path))
    assert code == 4
    assert "1 tool results match no call" in out


def test_exit_codes_rank_findings_then_skips_then_doubts(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, data: Path
) -> None:
    empty = str(_chat_without_calls(tmp_path))
    bad = str(data / "malformed" / "bad_tool.jsonl")
    loop = str(data / "loopwatch" / "loop.jsonl")
    assert _run(capsys, "scan", empty, bad)[0] == 3
    assert _run(capsys, "scan", empty, loop, "--fail-on", "block")[0] == 1
    assert _run(capsys, "scan", loop)[0] == 0


def test_header_counts_a_skipped_only_file(capsys: pytest.CaptureFixture[str], data: Path) -> None:
    code, out, _err = _run(capsys, "scan", str(data / "malformed" / "bad_tool.jsonl"))
    assert code == 3
    assert out.startswith("loopwatch scan: 1 file (1 skipped), 0 runs, 0 calls\n")


def test_a_folder_with_side_files_scans_clean(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    session = tmp_path / "s1.jsonl"
    use = {"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "ls"}}
    session.write_text(
        json.dumps(
            {
                "type": "assistant",
                "sessionId": "s",
                "message": {"role": "assistant", "content": [use]},
            }
        )
        + "\n"
    )
    (tmp_path / "agent-a1.meta.json").write_text('{"agentType": "general-purpose"}')
    (tmp_path / "notes.json").write_text('{"todo": ["a"]}')  # valid JSON, no transcript
    code, out, err = _run(capsys, "scan", str(tmp_path))
    assert code == 0, err
    assert out.startswith("loopwatch scan: 1 file (2 ignored), 1 run, 1 call\n")
    assert "ignored: 2 files" in out
    assert "not a transcript format loopwatch reads: a JSON object with keys todo" in out
    # Named explicitly, the same JSON fails loudly.
    code, _out, err = _run(capsys, "scan", str(tmp_path / "notes.json"))
    assert code == 3
    assert "keys todo" in err


def test_one_row_per_file_and_runs_expands(capsys: pytest.CaptureFixture[str], data: Path) -> None:
    path = str(data / "tau-bench" / "gpt-4o-airline.first3.json")
    _code, out, _err = _run(capsys, "scan", path)
    rows = [line for line in out.splitlines() if line.startswith("gpt-4o-airline")]
    assert len(rows) == 1
    assert rows[0].split()[:4] == ["gpt-4o-airline.first3.json", "tau-bench", "3", "15"]
    _code, out, _err = _run(capsys, "scan", path, "--runs")
    rows = [line for line in out.splitlines() if line.startswith("gpt-4o-airline")]
    assert [row.split()[0] for row in rows] == [
        "gpt-4o-airline.first3.json#task-0-trial0",
        "gpt-4o-airline.first3.json#task-1-trial0",
        "gpt-4o-airline.first3.json#task-2-trial0",
    ]


def test_terminal_escape_sequences_are_never_printed(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = tmp_path / "evil\x1b[2J.jsonl"
    line = {"tool": "x\x1b]0;pwned\x07", "args": {}, "run_id": "r\x1b[31m"}
    path.write_text("\n".join([json.dumps(line)] * 12))
    for argv in (["--runs"], []):
        _code, out, err = _run(capsys, "scan", str(path), *argv)
        assert "\x1b" not in out and "\x07" not in out
        assert "\x1b" not in err
        assert "\\x1b" in out


def test_jobs_give_the_same_report(capsys: pytest.CaptureFixture[str], data: Path) -> None:
    folders = [str(data / name) for name in ("loopwatch", "openai", "codex", "cline", "tau-bench")]
    one = _run(capsys, "scan", *folders, "--json")
    two = _run(capsys, "scan", *folders, "--json", "--jobs", "2")
    assert one[0] == two[0]
    assert json.loads(one[1]) == json.loads(two[1])


def test_html_excerpt_of_the_repeated_outcome(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = tmp_path / "loop.jsonl"
    line = {"tool": "read", "args": {"p": 1}, "error": "<b>ENOENT</b> " + "x" * 500}
    path.write_text("\n".join([json.dumps(line)] * 25))
    report = tmp_path / "r.html"
    assert _run(capsys, "scan", str(path), "--html", str(report))[0] == 0
    html = report.read_text(encoding="utf-8")
    assert "&lt;b&gt;ENOENT&lt;/b&gt;" in html and "<b>ENOENT" not in html
    assert "x" * 500 not in html  # cut short
    assert _run(capsys, "scan", str(path), "--html", str(report), "--no-excerpts")[0] == 0
    assert "ENOENT" not in report.read_text(encoding="utf-8")


def test_every_sample_format_scans_with_calls(
    capsys: pytest.CaptureFixture[str], data: Path
) -> None:
    folders = [
        "swe-agent", "mini-swe-agent", "openhands", "tau-bench", "cline", "codex",
        "openai-responses", "gemini-cli", "cursor", "claude-code-sdk", "openclaw-trajectory",
        "tau2-bench",
    ]  # fmt: skip
    code, out, err = _run(capsys, "scan", "--json", *(str(data / f) for f in folders))
    assert code == 0, err
    files = json.loads(out)["files"]
    assert len(files) == 35  # three real samples added (swe-agent, mini-swe-agent, openhands)
    assert all(entry["calls"] > 0 and entry["understood"] for entry in files)


def test_report_names_tools_as_the_messages_do(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = tmp_path / "bash.jsonl"
    path.write_text(
        "\n".join([json.dumps({"tool": "bash", "args": {"c": "ls"}, "result": "x"})] * 12)
    )
    report = tmp_path / "r.html"
    assert _run(capsys, "scan", str(path), "--html", str(report))[0] == 0
    html = report.read_text(encoding="utf-8")
    assert "exec (recorded as bash)" in html
    assert "You have called exec 10 times" in html


def test_a_gemini_project_folder_scans_clean_despite_its_prompt_log(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, data: Path
) -> None:
    """``~/.gemini/tmp/<hash>/logs.json`` holds only the user's prompts: read as chat
    messages it was a file with 0 calls, and every Gemini project folder a doubt (exit 4)."""
    project = tmp_path / "0b7dfb12"
    (project / "chats").mkdir(parents=True)
    sample = data / "gemini-cli" / "session-2025-09-18T10-00-8a1f3c52.json"
    (project / "chats" / sample.name).write_bytes(sample.read_bytes())
    prompts = [
        {"sessionId": "8a1f3c52", "messageId": 0, "type": "user", "message": "fix the build"},
        {"sessionId": "8a1f3c52", "messageId": 1, "type": "user", "message": "/quit"},
    ]
    (project / "logs.json").write_text(json.dumps(prompts, indent=2))
    code, out, err = _run(capsys, "scan", "--json", str(project))
    assert code == 0, err
    report = json.loads(out)
    assert [Path(entry["file"]).name for entry in report["files"]] == [sample.name]
    assert report["totals"]["ignored_files"] == 1
    code, _out, err = _run(capsys, "scan", str(project / "logs.json"))
    assert code == 3
    assert "a Gemini CLI prompt log" in err
