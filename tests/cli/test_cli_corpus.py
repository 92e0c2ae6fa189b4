"""The whole shared corpus of real runs replays, and a real subprocess runs the CLI."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from loopwatch.cli import main


@pytest.mark.corpus
def test_the_whole_corpus_scans(capsys: pytest.CaptureFixture[str], corpus: Path) -> None:
    files = sorted(corpus.glob("*.jsonl"))
    code = main(["scan", str(corpus), "--json"])
    captured = capsys.readouterr()
    assert code == 0
    assert captured.err == ""
    document = json.loads(captured.out)
    totals = document["totals"]
    assert document["skipped"] == []
    assert {run["file"] for run in document["runs"]} == {str(f) for f in files}
    assert totals["files"] == len(files) == 136
    assert totals["runs"] == 136
    assert totals["calls"] == 3490
    # Under the reference defaults (enabled: true) the corpus is mostly loop-free: two runs
    # warn, one of them loops on a missing file and is blocked at call 24.
    assert (totals["runs_warned"], totals["runs_blocked"], totals["runs_aborted"]) == (2, 1, 0)
    blocked = [run for run in document["runs"] if run["blocked"]]
    assert [Path(run["file"]).name for run in blocked] == ["openclaw_kimi48b__P1-r5.jsonl"]
    assert blocked[0]["first_stop"] == {"index": 24, "action": "block"}
    assert totals["wasted_calls"] == 106


@pytest.mark.corpus
def test_the_corpus_fails_ci_on_block(capsys: pytest.CaptureFixture[str], corpus: Path) -> None:
    assert main(["scan", str(corpus), "--fail-on", "block", "--flagged"]) == 1
    out = capsys.readouterr().out
    assert "openclaw_kimi48b__P1-r5.jsonl" in out


def test_python_dash_m_runs_the_cli(examples: Path) -> None:
    env = {**os.environ, "PYTHONIOENCODING": "utf-8"}
    completed = subprocess.run(
        [sys.executable, "-m", "loopwatch.cli", "scan", str(examples), "--fail-on", "block"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert completed.returncode == 1
    assert completed.stdout.startswith("loopwatch scan: 5 files, 5 runs, 254 calls")
    assert "#24 block" in completed.stdout
    assert completed.stderr == ""  # no log noise, no progress bar on a pipe
