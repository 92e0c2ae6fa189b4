"""OpenClaw configs as users already write them (config5): what loads, what is refused, and how.

The rules checked here were read from OpenClaw 2026.6.10 itself (``zod-schema.agent-runtime``:
``ToolLoopDetectionSchema`` and ``AgentToolsSchema`` are strict zod objects;
``agent-scope-config`` / ``tool-loop-detection-config``: an agent's ``tools.loopDetection``
is spread over the global one, ``detectors`` and ``postCompactionGuard`` one level deeper;
``agents.defaults`` has no ``tools``; ``config/includes``: ``$include``;
``config/env-substitution``: ``${VAR}`` in strings). Every refusal is a ``ConfigError`` at
load time whose issues name the field path.
"""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from loopwatch import ConfigError, LoopGuard
from loopwatch.cli import main
from loopwatch.config import config_warnings, load_config_file
from loopwatch.config._schema import (
    MSG_ADAPTIVE_UNUSED_ARGUMENT,
    MSG_ADAPTIVE_UNUSED_CHOSEN,
    MSG_ADAPTIVE_UNUSED_REFERENCE,
    MSG_ADAPTIVE_UNUSED_UNSET,
)
from loopwatch.settings import GuardSettings


def _write(tmp_path: Path, text: str, name: str = "openclaw.json5") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def _issues(exc: pytest.ExceptionInfo[ConfigError]) -> list[tuple[str, str]]:
    return [(issue.path, issue.message) for issue in exc.value.issues]


# --- 1. adaptive settings under the reference profile: validated, and never silently dropped --

ADAPTIVE_ONLY = """{
  tools: { loopDetection: { enabled: true } },
  loopwatch: { %s adaptive: { repeatedFailure: { warn: 2, block: 3 } } },
}"""


@pytest.mark.parametrize(
    ("profile_line", "expected"),
    [
        ("", MSG_ADAPTIVE_UNUSED_UNSET),
        ('profile: "reference",', MSG_ADAPTIVE_UNUSED_REFERENCE),
        ('profile: "adaptive",', None),
    ],
)
def test_an_adaptive_block_the_profile_ignores_is_a_warning_of_the_file(
    tmp_path: Path, profile_line: str, expected: str | None
) -> None:
    path = _write(tmp_path, ADAPTIVE_ONLY % profile_line)
    warnings = [(w.path, w.message) for w in config_warnings(path)]
    assert warnings == ([] if expected is None else [("loopwatch.adaptive", expected)])
    settings = GuardSettings.resolve(config_file=path)
    assert [(w.path, w.message) for w in settings.warnings] == warnings
    if expected is None:
        assert settings.adaptive is not None
        failure = settings.adaptive.repeated_failure
        assert (failure.warn, failure.block) == (2, 3)


def test_choosing_the_adaptive_profile_uses_the_block_without_a_warning(tmp_path: Path) -> None:
    path = _write(tmp_path, ADAPTIVE_ONLY % 'profile: "reference",')
    settings = GuardSettings.resolve(config_file=path, profile="adaptive")
    assert settings.warnings == ()
    assert settings.adaptive is not None and settings.adaptive.repeated_failure.warn == 2


def test_choosing_reference_over_an_adaptive_file_says_the_block_is_unused(tmp_path: Path) -> None:
    path = _write(tmp_path, ADAPTIVE_ONLY % 'profile: "adaptive",')
    settings = GuardSettings.resolve(config_file=path, profile="reference")
    assert [(w.path, w.message) for w in settings.warnings] == [
        ("loopwatch.adaptive", MSG_ADAPTIVE_UNUSED_CHOSEN)
    ]
    assert settings.adaptive is None


def test_an_adaptive_argument_under_reference_is_logged_when_the_guard_is_built(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING, logger="loopwatch.config"):
        guard = LoopGuard({"enabled": True}, adaptive={"window": 5})
    assert guard.profile == "reference"
    assert [r.getMessage() for r in caplog.records if r.name == "loopwatch.config"] == [
        f"loopwatch config: adaptive: {MSG_ADAPTIVE_UNUSED_ARGUMENT}"
    ]
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="loopwatch.config"):
        LoopGuard({"enabled": True}, adaptive={"window": 5}, profile="adaptive")
    assert [r for r in caplog.records if r.name == "loopwatch.config"] == []


def test_an_invalid_adaptive_block_fails_whatever_the_profile(tmp_path: Path) -> None:
    path = _write(tmp_path, "{loopwatch: {profile: 'reference', adaptive: {window: 'ten'}}}")
    with pytest.raises(ConfigError) as info:
        load_config_file(path)
    assert [p for p, _m in _issues(info)] == ["loopwatch.adaptive.window"]


def test_the_file_warning_is_logged_by_a_guard_on_the_whole_config(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    config = load_config_file(_write(tmp_path, ADAPTIVE_ONLY % ""))
    with caplog.at_level(logging.WARNING, logger="loopwatch.config"):
        LoopGuard(openclaw_config=config)
    assert [r.getMessage() for r in caplog.records if r.name == "loopwatch.config"] == [
        f"loopwatch config: loopwatch.adaptive: {MSG_ADAPTIVE_UNUSED_UNSET}"
    ]


def test_config_check_and_scan_show_the_unused_block(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _write(tmp_path, ADAPTIVE_ONLY % "profile: 'reference',")
    assert main(["config", "check", str(path)]) == 0
    out = capsys.readouterr().out
    assert f"warning: loopwatch.adaptive: {MSG_ADAPTIVE_UNUSED_REFERENCE}\n" in out
    run = _write(tmp_path, '{"tool": "read", "args": {"path": "a"}, "result": "x"}\n', "r.jsonl")
    assert main(["scan", "--config", str(path), str(run)]) == 0
    out = capsys.readouterr().out
    assert f"warning: loopwatch.adaptive: {MSG_ADAPTIVE_UNUSED_REFERENCE}\n" in out
    assert main(["scan", "--config", str(path), "--profile", "adaptive", str(run)]) == 0
    assert "warning: loopwatch.adaptive" not in capsys.readouterr().out
