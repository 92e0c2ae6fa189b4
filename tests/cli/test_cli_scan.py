"""``loopwatch scan`` end to end through ``loopwatch.cli.main``."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import pytest

from loopwatch import LoopGuard
from loopwatch.cli import main
from loopwatch.cli._progress import MIN_FILES_FOR_PROGRESS, Progress, wants_progress
from loopwatch.cli._scan import load_setup
from loopwatch.config import Profile


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _table(out: str) -> dict[str, list[str]]:
    """Every cell of every row by its first cell (file or run), split on 2+ spaces."""
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(("run ", "file ")))
    rows: dict[str, list[str]] = {}
    for line in lines[start + 1 :]:
        if not line.strip() or line.startswith("("):
            break
        cells = re.split(r"\s{2,}", line.strip())
        rows[cells[0]] = cells[1:]
    return rows


def _rows(out: str) -> dict[str, list[str]]:
    """Table rows by file (or run, with ``--runs``): the finding cells only (calls, first
    warn, first block, detector, wasted, wasted tokens), without format, runs and note."""
    per_file = any(line.startswith("file ") for line in out.splitlines())
    skip = 2 if per_file else 1
    return {name: cells[skip:-1] for name, cells in _table(out).items()}


# --- the table ---------------------------------------------------------------------------


def test_scan_examples_table(capsys: pytest.CaptureFixture[str], examples: Path) -> None:
    code, out, err = _run(capsys, "scan", str(examples))
    assert code == 0
    assert err == ""
    assert out.startswith("loopwatch scan: 5 files, 5 runs, 254 calls\n")
    assert "default thresholds with enabled: true" in out
    assert "thresholds: warning 10, critical 20, global breaker 30" in out
    rows = _rows(out)
    assert rows["openclaw_kimi48b__P1-r5.jsonl"] == [
        "129",
        "#13",
        "#24 block",
        "generic_repeat",
        "106",
    ]
    assert rows["gemini3pro_miniswe__matplotlib__matplotlib-24177.jsonl"] == [
        "72",
        "#56",
        "-",
        "generic_repeat",
        "0",
    ]
    assert rows["taubench_gpt4o_airline__task03_trial0.jsonl"] == ["20", "-", "-", "-", "0"]
    assert "totals: 5 runs, 254 calls; 2 warned, 1 blocked, 0 aborted; 106 calls wasted" in out
    assert "\x1b" not in out  # ANSI-free


def test_scan_with_run_ids_tokens_and_an_abort(
    capsys: pytest.CaptureFixture[str], data: Path
) -> None:
    path = str(data / "loopwatch" / "runs_and_compaction.jsonl")
    code, out, _err = _run(capsys, "scan", path, "--runs")
    assert code == 0
    rows = _rows(out)
    assert rows["runs_and_compaction.jsonl#r1"] == ["3", "-", "-", "-", "0", "0"]
    assert rows["runs_and_compaction.jsonl#r2"] == [
        "5",
        "-",
        "#4 abort",
        "compaction_loop_persisted",
        "1",
        "200",
    ]
    assert "wasted tokens" in out.splitlines()[4]
    assert "0 warned, 0 blocked, 1 aborted; 1 calls wasted (12.5% of all calls), 200 tokens" in out


def test_flagged_lists_only_runs_with_findings(
    capsys: pytest.CaptureFixture[str], examples: Path
) -> None:
    code, out, _err = _run(capsys, "scan", str(examples), "--flagged")
    assert code == 0
    assert set(_rows(out)) == {
        "openclaw_kimi48b__P1-r5.jsonl",
        "gemini3pro_miniswe__matplotlib__matplotlib-24177.jsonl",
    }
    assert "(3 files without findings not shown)" in out


def test_every_format_in_one_scan(capsys: pytest.CaptureFixture[str], data: Path) -> None:
    folders = ["loopwatch", "openai", "anthropic", "claude_code", "openclaw"]
    code, out, err = _run(capsys, "scan", "--runs", *(str(data / folder) for folder in folders))
    assert (code, err) == (0, "")
    rows = _rows(out)
    assert rows["loop.jsonl"][:4] == ["25", "#11", "#21 block", "generic_repeat"]
    assert rows["chat.json"][:4] == ["14", "#11", "-", "generic_repeat"]
    assert rows["session.jsonl#turn-2"][:4] == ["5", "-", "#4 abort", "compaction_loop_persisted"]
    assert rows["session.jsonl#main"][0] == "2"
    assert rows["session.jsonl#sidechain:a1b2"][0] == "1"


# --- exit codes and problems -------------------------------------------------------------


def test_malformed_files_are_reported_and_the_others_still_scanned(
    capsys: pytest.CaptureFixture[str], data: Path
) -> None:
    code, out, err = _run(
        capsys, "scan", str(data / "malformed"), str(data / "loopwatch" / "loop.jsonl")
    )
    assert code == 3
    assert "loop.jsonl" in _rows(out)
    bad = data / "malformed" / "bad_json.jsonl"
    assert f"loopwatch: skipped {bad}:3: invalid JSON: Expecting property name" in err
    # The walk ignores valid JSON of another shape (unknown_shape.jsonl) instead of failing.
    assert f"skipped: {len(list((data / 'malformed').iterdir())) - 1} files" in out
    assert "ignored: 1 file" in out
    assert f"  {data / 'malformed' / 'invalid_utf8.jsonl'}:2: not valid UTF-8" in out


def test_missing_path_is_a_skip(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, _out, err = _run(capsys, "scan", str(tmp_path / "nope.jsonl"))
    assert code == 3
    assert "no such file or directory" in err


@pytest.mark.parametrize(
    ("fail_on", "path", "expected"),
    [
        ("warn", "openai/chat.json", 1),  # warned only
        ("block", "openai/chat.json", 0),
        ("block", "loopwatch/loop.jsonl", 1),
        ("block", "loopwatch/runs_and_compaction.jsonl", 1),  # an abort counts as a block
        ("warn", "openclaw/session.jsonl", 1),
        ("warn", "anthropic/messages.json", 0),
    ],
)
def test_fail_on(
    capsys: pytest.CaptureFixture[str], data: Path, fail_on: str, path: str, expected: int
) -> None:
    code, _out, _err = _run(capsys, "scan", str(data / path), "--fail-on", fail_on)
    assert code == expected


def test_fail_on_wins_over_a_skipped_file(capsys: pytest.CaptureFixture[str], data: Path) -> None:
    paths = [str(data / "loopwatch" / "loop.jsonl"), str(data / "malformed" / "bad_tool.jsonl")]
    assert _run(capsys, "scan", *paths, "--fail-on", "block")[0] == 1


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["scan", "x", "--agent", "a"], "--agent needs --config"),
        (["scan", "x", "--format", "yaml"], "invalid choice"),
        (["scan"], "the following arguments are required: PATH"),
        (["scan", "x", "--sweep", "a=1", "--html", "r.html"], "cannot be combined"),
        (["bogus"], "invalid choice"),
    ],
)
def test_usage_errors_exit_2(
    capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    code, _out, err = _run(capsys, *argv)
    assert code == 2
    assert message in err


def test_no_command_prints_help_and_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    code, _out, err = _run(capsys)
    assert code == 2
    assert "usage: loopwatch" in err


def test_help_and_version_exit_0(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _err = _run(capsys, "scan", "--help")
    assert code == 0
    assert "--sweep SPEC" in out
    code, out, _err = _run(capsys, "--version")
    assert (code, out.strip()) == (0, "loopwatch 0.1.0")


# --- configs -----------------------------------------------------------------------------


def test_config_and_agent_change_the_thresholds(
    capsys: pytest.CaptureFixture[str], data: Path
) -> None:
    config = str(data / "configs" / "openclaw.json5")
    loop = str(data / "loopwatch" / "loop.jsonl")
    code, out, _err = _run(capsys, "scan", loop, "--config", config)
    assert code == 0
    assert f"config: {config}\n" in out
    assert "thresholds: warning 5, critical 8, global breaker 30" in out
    assert _rows(out)["loop.jsonl"][:3] == ["25", "#6", "#9 block"]
    code, out, _err = _run(capsys, "scan", loop, "--config", config, "--agent", "patient")
    assert f"config: {config} (agent patient)" in out
    assert "thresholds: warning 15, critical 30, global breaker 40" in out
    assert _rows(out)["loop.jsonl"][:3] == ["25", "#16", "-"]


def test_a_disabled_config_says_so(capsys: pytest.CaptureFixture[str], data: Path) -> None:
    config = str(data / "configs" / "disabled.json5")
    code, out, _err = _run(capsys, "scan", str(data / "loopwatch"), "--config", config)
    assert code == 0
    assert "note: enabled is false: detection and the post-compaction guard are off" in out
    assert "0 warned, 0 blocked, 0 aborted" in out


def test_an_invalid_config_is_exit_2_with_every_issue(
    capsys: pytest.CaptureFixture[str], data: Path
) -> None:
    config = str(data / "configs" / "invalid.json5")
    code, out, err = _run(capsys, "scan", str(data / "loopwatch"), "--config", config)
    assert (code, out) == (2, "")
    assert f"config: {config}: invalid (4 issues)" in err
    assert "  tools.loopDetection.enabled: expected a boolean" in err
    assert "  agents.list[0].tools.loopDetection.historySize: expected an integer > 0" in err


@pytest.mark.parametrize(
    ("agent", "profile"),
    [(None, None), ("patient", None), (None, "adaptive"), ("patient", "adaptive")],
)
def test_the_setup_is_the_guard_s_without_building_one(
    monkeypatch: pytest.MonkeyPatch, data: Path, agent: str | None, profile: Profile | None
) -> None:
    config = str(data / "configs" / "openclaw.json5")
    setup = load_setup(config, agent, profile)
    guard = setup.settings.new_guard()
    assert setup.resolved == guard.block_for(agent)[1]
    assert (setup.profile, setup.adaptive) == (guard.profile, guard.adaptive)

    def no_guard(*_args: object, **_kwargs: object) -> None:
        raise AssertionError("load_setup built a LoopGuard")

    monkeypatch.setattr(LoopGuard, "__init__", no_guard)
    again = load_setup(config, agent, profile)
    assert (again.resolved, again.profile, again.adaptive) == (
        setup.resolved,
        setup.profile,
        setup.adaptive,
    )


def test_the_setup_rejects_an_unknown_profile_up_front(data: Path) -> None:
    with pytest.raises(ValueError, match="profile must be 'reference' or 'adaptive'"):
        load_setup(None, None, "fast")  # type: ignore[arg-type]


# --- JSON --------------------------------------------------------------------------------


def test_json_has_one_object_per_run_with_every_decision(
    capsys: pytest.CaptureFixture[str], data: Path
) -> None:
    code, out, _err = _run(
        capsys, "scan", str(data / "loopwatch" / "runs_and_compaction.jsonl"), "--json"
    )
    assert code == 0
    document = json.loads(out)
    assert document["loopwatch"] == "0.1.0"
    assert document["config"]["source"] == "defaults"
    assert document["config"]["block"] == {"enabled": True}
    assert document["config"]["resolved"]["warning_threshold"] == 10
    assert document["totals"]["runs"] == 2
    assert document["totals"]["runs_aborted"] == 1
    assert document["skipped"] == []
    r1, r2 = document["runs"]
    assert (r1["run"], r1["run_id"], r1["format"]) == ("r1", "r1", "loopwatch")
    assert r2["first_stop"] == {"index": 4, "action": "abort"}
    assert r2["wasted_calls"] == 1
    assert r2["wasted_tokens"] == 200
    assert [d["action"] for d in r2["decisions"]] == [
        "allow",
        "allow",
        "allow",
        "abort",
        "not-replayed",
    ]
    decision = r2["decisions"][3]
    assert set(decision) == {
        "index",
        "tool",
        "call_id",
        "signature",
        "action",
        "emitted",
        "level",
        "detector",
        "count",
        "message",
        "tokens",
        "line",
    }
    assert decision["call_id"] == "b4"
    assert decision["line"] == 7


def test_json_lists_skipped_files(capsys: pytest.CaptureFixture[str], data: Path) -> None:
    path = data / "malformed" / "bad_tool.jsonl"
    code, out, _err = _run(capsys, "scan", str(path), "--json")
    assert code == 3
    assert json.loads(out)["skipped"] == [
        {"path": str(path), "line": 2, "reason": '"tool" must be a string'}
    ]


# --- HTML --------------------------------------------------------------------------------


def test_html_report_is_self_contained(
    capsys: pytest.CaptureFixture[str], data: Path, tmp_path: Path
) -> None:
    report = tmp_path / "report.html"
    paths = [str(data / "loopwatch"), str(data / "openclaw"), str(data / "malformed")]
    code, out, err = _run(capsys, "scan", *paths, "--html", str(report))
    assert code == 3
    assert "loopwatch scan:" in out  # the table is still printed
    assert f"report written to {report}" in err
    html = report.read_text(encoding="utf-8")
    assert html.startswith("<!DOCTYPE html>")
    for forbidden in ("<script", "<link", "src=", "@import", "url(", "http://", "https://"):
        assert forbidden not in html
    assert html.count("<svg") == 6  # one timeline per run
    assert "<h2>Runs with findings</h2>" in html
    assert "loop.jsonl" in html
    assert "runs_and_compaction.jsonl#r2" in html
    # Colours per decision, and the repeated signature drawn as its own lane.
    for css_class in ("allow", "warn", "block", "abort", "not-replayed"):
        assert f'class="{css_class}"' in html
    assert re.search(r">read [0-9a-f]{8}</text>", html)
    assert 'class="compaction"' in html
    assert 'class="wasted"' in html
    assert "CRITICAL: Called read with identical arguments and identical outcomes 20 times" in html
    assert "Skipped files" in html and "bad_tool.jsonl:2" in html


def test_html_escapes_transcript_text(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    transcript = tmp_path / "evil.jsonl"
    line = {"tool": "<script>alert(1)</script>", "args": {"q": "</title><b>"}, "result": "x"}
    transcript.write_text("\n".join([json.dumps(line)] * 12), encoding="utf-8")
    report = tmp_path / "r.html"
    assert _run(capsys, "scan", str(transcript), "--html", str(report))[0] == 0
    html = report.read_text(encoding="utf-8")
    assert "<script" not in html
    assert "&lt;script&gt;" in html
    assert "</title><b>" not in html


def test_html_unwritable_target_is_exit_2(
    capsys: pytest.CaptureFixture[str], data: Path, tmp_path: Path
) -> None:
    target = tmp_path / "missing-dir" / "r.html"
    code, _out, err = _run(capsys, "scan", str(data / "loopwatch"), "--html", str(target))
    assert code == 2
    assert "cannot write" in err


# --- odd text ----------------------------------------------------------------------------


def test_lone_surrogates_in_tool_names_print(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    transcript = tmp_path / "odd.jsonl"
    transcript.write_text('{"tool": "ab\\ud800c", "args": {}}\n' * 11, encoding="utf-8")
    code, out, _err = _run(capsys, "scan", str(transcript), "--json")
    assert code == 0
    assert json.loads(out)["runs"][0]["decisions"][0]["tool"] == "ab\ud800c"
    report = tmp_path / "odd.html"
    assert _run(capsys, "scan", str(transcript), "--html", str(report))[0] == 0
    assert "ab\\ud800c" in report.read_text(encoding="utf-8")


# --- progress ----------------------------------------------------------------------------


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_only_on_a_terminal_with_many_files() -> None:
    many = MIN_FILES_FOR_PROGRESS
    assert wants_progress(_Tty(), many)
    assert not wants_progress(_Tty(), many - 1)
    assert not wants_progress(io.StringIO(), many)
    assert not wants_progress(_Tty(), many, disabled=True)


def test_progress_bar_draws_and_erases() -> None:
    stream = _Tty()
    progress = Progress(stream, 4, unit="files", enabled=True)
    for _ in range(4):
        progress.advance()
    progress.close()
    text = stream.getvalue()
    assert "\r[" + "#" * 30 + "] 4/4 files" in text
    assert "1/4 files" in text
    assert text.endswith("\r")
    silent = io.StringIO()
    Progress(silent, 4, unit="files", enabled=False).advance()
    assert silent.getvalue() == ""


def test_scan_never_draws_progress_on_a_pipe(
    capsys: pytest.CaptureFixture[str], data: Path
) -> None:
    _code, _out, err = _run(capsys, "scan", str(data))
    assert "[#" not in err


def test_adaptive_profile_blocks_the_short_loop_early(capsys: pytest.CaptureFixture[str]) -> None:
    run = str(
        Path(__file__).resolve().parents[2] / "examples" / "runs" / "openclaw_kimi48b__P1-r5.jsonl"
    )
    reference = json.loads(_run(capsys, "scan", run, "--json")[1])
    adaptive = json.loads(_run(capsys, "scan", run, "--json", "--profile", "adaptive")[1])
    (ref_run,) = reference["runs"]
    (ada_run,) = adaptive["runs"]
    assert ref_run["first_stop"] == {"index": 24, "action": "block"}
    assert ada_run["first_stop"]["action"] == "block"
    assert ada_run["first_stop"]["index"] <= 6
    assert ada_run["detector"] == "repeated_failure"
    code, out, _err = _run(capsys, "scan", run, "--profile", "adaptive")
    assert code == 0 and "profile: adaptive" in out


def test_python_dash_m_loopwatch_is_the_console_script() -> None:
    # `python -m loopwatch ...` is what a user tries when the scripts folder is not on PATH.
    import subprocess
    import sys

    run = subprocess.run(
        [sys.executable, "-m", "loopwatch", "--help"], capture_output=True, text=True, timeout=60
    )
    assert run.returncode == 0, run.stderr
    assert "scan" in run.stdout
