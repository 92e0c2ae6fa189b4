"""``loopwatch scan --sweep``: parsing, skipped combinations, the table and its JSON."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from loopwatch.cli import main
from loopwatch.cli._sweep import (
    SweepAxis,
    apply_setting,
    combinations,
    parse_sweep,
    run_sweep,
)
from loopwatch.transcripts import read_transcript


def test_parse_sweep_ranges_are_inclusive() -> None:
    axes = parse_sweep("warningThreshold=5:20:5, criticalThreshold=10:12,windowSize=4")
    assert axes == (
        SweepAxis("warningThreshold", (5, 10, 15, 20)),
        SweepAxis("criticalThreshold", (10, 11, 12)),
        SweepAxis("windowSize", (4,)),
    )


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("", "needs at least one"),
        ("warningThreshold", "expected NAME=START:STOP"),
        ("bogus=1:2", "unknown setting 'bogus'"),
        ("warningThreshold=a:3", "'a' is not an integer"),
        ("warningThreshold=0:3", "integers > 0"),
        ("warningThreshold=5:1", "STOP is below START"),
        ("warningThreshold=1:2:3:4", "expected VALUE or START:STOP"),
        ("windowSize=1,postCompactionGuard.windowSize=2", "swept twice"),
        ("warningThreshold=1:100,criticalThreshold=1:100", "more than 1000"),
    ],
)
def test_parse_sweep_rejects(spec: str, message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        parse_sweep(spec)


def test_apply_setting_copies_and_nests() -> None:
    base = {
        "enabled": True,
        "postCompactionGuard": {"windowSize": 2},
        "detectors": {"pingPong": False},
    }
    out = apply_setting(base, (("windowSize", 5), ("warningThreshold", 3)))
    assert out == {
        "enabled": True,
        "postCompactionGuard": {"windowSize": 5},
        "detectors": {"pingPong": False},
        "warningThreshold": 3,
    }
    assert base["postCompactionGuard"] == {"windowSize": 2}
    assert out["detectors"] is not base["detectors"]


def test_combinations_vary_the_last_axis_fastest() -> None:
    axes = (SweepAxis("warningThreshold", (1, 2)), SweepAxis("criticalThreshold", (3, 4)))
    assert [dict(c) for c in combinations(axes)] == [
        {"warningThreshold": 1, "criticalThreshold": 3},
        {"warningThreshold": 1, "criticalThreshold": 4},
        {"warningThreshold": 2, "criticalThreshold": 3},
        {"warningThreshold": 2, "criticalThreshold": 4},
    ]


def test_run_sweep_counts_and_skips(data: Path) -> None:
    runs = read_transcript(data / "loopwatch" / "loop.jsonl").runs
    axes = parse_sweep("warningThreshold=5:15:5,criticalThreshold=10:20:10")
    rows = {
        tuple(v for _n, v in row.setting): row for row in run_sweep(runs, {"enabled": True}, axes)
    }
    assert rows[(5, 10)].skipped is None
    assert (rows[(5, 10)].calls_warned, rows[(5, 10)].calls_blocked) == (5, 15)
    assert rows[(5, 10)].wasted_calls == 15
    assert rows[(15, 20)].calls_warned == 5
    assert rows[(10, 10)].skipped == (
        "tools.loopDetection.warningThreshold must be lower than criticalThreshold."
    )
    assert rows[(15, 10)].resolved is None


def test_sweep_table_end_to_end(capsys: pytest.CaptureFixture[str], data: Path) -> None:
    code = main(
        [
            "scan",
            str(data / "loopwatch"),
            "--sweep",
            "warningThreshold=5:10:5,criticalThreshold=8:16:8",
        ]
    )
    out = capsys.readouterr().out
    assert code == 0
    assert out.startswith("loopwatch scan --sweep: 3 files, 4 runs, 37 calls\n")
    assert "thresholds:" not in out  # they vary per row
    header = next(line for line in out.splitlines() if "runs warned" in line)
    assert re.split(r"\s{2,}", header.strip()) == [
        "warningThreshold",
        "criticalThreshold",
        "effective w/c/g",
        "runs warned",
        "calls warned",
        "runs blocked",
        "calls blocked",
        "wasted",
    ]
    assert re.search(r"^\s+5\s+8\s+5/8/30\s+1/4\s+3\s+2/4\s+18\s+18$", out, re.M)
    assert "skipped 1 combination the schema rejects:" in out
    assert "  warningThreshold=10, criticalThreshold=8: tools.loopDetection.warningThreshold" in out


def test_sweep_shows_clamped_effective_thresholds(
    capsys: pytest.CaptureFixture[str], data: Path
) -> None:
    code = main(["scan", str(data / "loopwatch" / "loop.jsonl"), "--sweep", "warningThreshold=25"])
    out = capsys.readouterr().out
    assert code == 0
    # Set alone, the schema accepts it; runtime clamps critical to 26 and the breaker to 30.
    assert re.search(r"^\s+25\s+25/26/30\s+0/1\s+0\s+0/1\s+0\s+0$", out, re.M)


def test_sweep_json(capsys: pytest.CaptureFixture[str], data: Path) -> None:
    code = main(
        [
            "scan",
            str(data / "loopwatch" / "loop.jsonl"),
            "--sweep",
            "criticalThreshold=5:15:10",
            "--json",
        ]
    )
    document = json.loads(capsys.readouterr().out)
    assert code == 0
    clamped, replayed = document["sweep"]
    # criticalThreshold=5 alone is valid for the schema; runtime clamps it above warning.
    assert clamped["setting"] == {"criticalThreshold": 5}
    assert clamped["skipped"] is None
    assert clamped["effective"]["criticalThreshold"] == 11
    assert (clamped["calls_warned"], clamped["calls_blocked"]) == (1, 14)
    assert replayed["effective"] == {
        "warningThreshold": 10,
        "criticalThreshold": 15,
        "globalCircuitBreakerThreshold": 30,
    }
    assert (replayed["calls_warned"], replayed["calls_blocked"]) == (5, 10)


def test_sweep_over_a_config_uses_the_agents_merged_block(
    capsys: pytest.CaptureFixture[str], data: Path
) -> None:
    config = str(data / "configs" / "openclaw.json5")
    argv = ["scan", str(data / "loopwatch" / "loop.jsonl"), "--config", config]
    code = main([*argv, "--agent", "patient", "--sweep", "historySize=30", "--json"])
    (row,) = json.loads(capsys.readouterr().out)["sweep"]
    assert code == 0
    assert row["effective"]["warningThreshold"] == 15


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--sweep", "nope=1"], "--sweep: nope=1: unknown setting"),
        (["--sweep", "warningThreshold=1", "--fail-on", "warn"], "cannot be combined"),
    ],
)
def test_sweep_usage_errors(
    capsys: pytest.CaptureFixture[str], data: Path, extra: list[str], message: str
) -> None:
    assert main(["scan", str(data / "loopwatch"), *extra]) == 2
    assert message in capsys.readouterr().err


def test_sweep_with_a_skipped_file_exits_3(capsys: pytest.CaptureFixture[str], data: Path) -> None:
    paths = [str(data / "loopwatch" / "loop.jsonl"), str(data / "malformed" / "bad_tool.jsonl")]
    assert main(["scan", *paths, "--sweep", "warningThreshold=3"]) == 3


def test_sweep_keeps_the_config_files_adaptive_profile(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = (
        Path(__file__).resolve().parents[2] / "examples" / "runs" / "openclaw_kimi48b__P1-r5.jsonl"
    )
    config = tmp_path / "openclaw.json5"
    config.write_text(
        "{tools: {loopDetection: {enabled: true}},"
        " loopwatch: {profile: 'adaptive', adaptive: {repeatedFailure: {warn: 2, block: 3}}}}",
        encoding="utf-8",
    )
    argv = ["scan", str(run), "--config", str(config), "--json"]
    code = main([*argv, "--sweep", "warningThreshold=10:10:1"])
    document = json.loads(capsys.readouterr().out)
    assert code == 0
    (row,) = document["sweep"]
    assert row["runs_blocked"] == 1
    assert row["wasted_calls"] > 106  # blocked far earlier than the reference's call 24
