"""``tools/adaptive_eval.py`` refuses to report on a corpus that is not there."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

TOOL = Path(__file__).resolve().parents[2] / "tools" / "adaptive_eval.py"


def test_a_missing_corpus_is_an_error_not_zero_of_zero(tmp_path: Path) -> None:
    for corpus in (tmp_path / "absent", tmp_path):  # missing, and a folder without runs
        done = subprocess.run(
            [sys.executable, str(TOOL), "--corpus", str(corpus)],
            capture_output=True,
            text=True,
            check=False,
        )
        assert done.returncode == 2
        assert f"no corpus at {corpus}" in done.stderr
        assert "0/0" not in done.stdout
