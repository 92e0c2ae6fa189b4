"""``loopwatch config check``: validation errors with paths, effective merged values."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from loopwatch.cli import main


def _settings(out: str) -> dict[str, list[str]]:
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("setting "))
    rows: dict[str, list[str]] = {}
    for line in lines[start + 1 :]:
        if not line.strip():
            break
        cells = re.split(r"\s{2,}", line.strip())
        rows[cells[0]] = cells[1:]
    return rows


def test_valid_config_global_block(capsys: pytest.CaptureFixture[str], data: Path) -> None:
    path = str(data / "configs" / "openclaw.json5")
    code = main(["config", "check", path])
    out = capsys.readouterr().out
    assert code == 0
    assert out.startswith(f"config: {path}: valid\n")
    assert "profile: reference" in out
    rows = _settings(out)
    assert rows["enabled"] == ["global", "true", "true"]
    assert rows["warningThreshold"] == ["global", "5", "5"]
    assert rows["historySize"] == ["default", "-", "30"]
    assert rows["postCompactionGuard.windowSize"] == ["default", "-", "3"]
    assert rows["detectors.pingPong"] == ["default", "-", "true"]
    assert len(rows) == 10
    assert "  historySize: Tool history window size for loop detection (default: 30)" in out


def test_agent_override_is_merged(capsys: pytest.CaptureFixture[str], data: Path) -> None:
    path = str(data / "configs" / "openclaw.json5")
    assert main(["config", "check", path, "--agent", " Patient "]) == 0
    out = capsys.readouterr().out
    assert "agent:  Patient  (id patient): its tools.loopDetection block is merged" in out
    rows = _settings(out)
    assert rows["warningThreshold"] == ["agent", "15", "15"]
    assert rows["criticalThreshold"] == ["agent", "30", "30"]
    assert rows["globalCircuitBreakerThreshold"] == ["agent", "40", "40"]
    assert rows["enabled"] == ["global", "true", "true"]


def test_agent_without_a_block_uses_the_global_one(
    capsys: pytest.CaptureFixture[str], data: Path
) -> None:
    assert (
        main(["config", "check", str(data / "configs" / "openclaw.json5"), "--agent", "main"]) == 0
    )
    out = capsys.readouterr().out
    assert "it has no tools.loopDetection block: the global block applies" in out
    assert _settings(out)["warningThreshold"] == ["global", "5", "5"]


def test_clamped_values_are_marked(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = tmp_path / "c.json"
    path.write_text(json.dumps({"tools": {"loopDetection": {"warningThreshold": 25}}}))
    assert main(["config", "check", str(path)]) == 0
    out = capsys.readouterr().out
    assert "detection: off (enabled is not true)" in out
    rows = _settings(out)
    assert rows["warningThreshold"] == ["global", "25", "25"]
    assert rows["criticalThreshold"] == ["default", "-", "26"]


def test_invalid_config_lists_every_issue_with_its_path(
    capsys: pytest.CaptureFixture[str], data: Path
) -> None:
    path = str(data / "configs" / "invalid.json5")
    assert main(["config", "check", path]) == 2
    out = capsys.readouterr().out
    assert out.splitlines() == [
        f"config: {path}: invalid (4 issues)",
        "  tools.loopDetection.enabled: expected a boolean",
        "  tools.loopDetection.bogus: unknown key",
        "  tools.loopDetection.criticalThreshold: "
        "tools.loopDetection.warningThreshold must be lower than criticalThreshold.",
        "  agents.list[0].tools.loopDetection.historySize: expected an integer > 0",
    ]


def test_syntax_error_and_missing_file(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    broken = tmp_path / "broken.json5"
    broken.write_text("{\n  tools: {,\n}")
    assert main(["config", "check", str(broken)]) == 2
    assert "JSON5 syntax error at line 2" in capsys.readouterr().out
    assert main(["config", "check", str(tmp_path / "missing.json")]) == 2
    assert "cannot read" in capsys.readouterr().out


def test_json_output(capsys: pytest.CaptureFixture[str], data: Path) -> None:
    path = str(data / "configs" / "openclaw.json5")
    assert main(["config", "check", path, "--agent", "patient", "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["valid"] is True
    assert document["agent_has_block"] is True
    assert document["enabled"] is True
    by_path = {s["path"]: s for s in document["settings"]}
    assert by_path["warningThreshold"]["source"] == "agent"
    assert by_path["warningThreshold"]["value"] == 15
    assert by_path["historySize"] == {
        "path": "historySize",
        "source": "default",
        "value": None,
        "effective": 30,
        "help": "Tool history window size for loop detection (default: 30)",
    }
    assert main(["config", "check", str(data / "configs" / "invalid.json5"), "--json"]) == 2
    invalid = json.loads(capsys.readouterr().out)
    assert invalid["valid"] is False
    assert {"path": "tools.loopDetection.bogus", "message": "unknown key"} in invalid["issues"]


def test_config_without_subcommand_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["config"]) == 2
