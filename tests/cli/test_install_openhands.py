"""``loopwatch install openhands``: the SDK's ``hooks.json``, whose events sit at its top.

OpenHands (software-agent-sdk ``hooks/config.py``, ``HookConfig._normalize_hooks_input``)
reads ``{"PreToolUse": [...]}``, or the same under a ``hooks`` wrapper, in which case every
other top-level key is ignored; an event may be spelled ``pre_tool_use`` as well, and a file
with both spellings of one event is refused. The install must keep to the file's form.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from loopwatch.cli import main
from loopwatch.cli._install import is_loopwatch_command

USER_HOOK: dict[str, Any] = {"type": "command", "command": "echo audit", "timeout": 5}


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "home").mkdir()
    (tmp_path / "project").mkdir()
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path / "project")
    return tmp_path


def _events(table: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    """Each event's handlers, by the snake_case name OpenHands reads it under."""
    found: dict[str, list[dict[str, Any]]] = {}
    for key, groups in table.items():
        snake = "".join(
            f"_{c.lower()}" if c.isupper() and i else c.lower() for i, c in enumerate(key)
        )
        assert snake not in found, f"{key}: both spellings of one event (OpenHands refuses it)"
        found[snake] = [handler for group in groups for handler in group["hooks"]]
    return found


def _ours(handlers: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [h for h in handlers if is_loopwatch_command(h.get("command"), "openhands")]


@pytest.mark.parametrize("scope", ["--user", "--project"])
def test_a_fresh_file_holds_the_events_at_its_top(home: Path, scope: str) -> None:
    assert main(["install", "openhands", scope]) == 0
    folder = home / ("home" if scope == "--user" else "project") / ".openhands"
    document = json.loads((folder / "hooks.json").read_text())
    assert list(document) == ["PreToolUse", "PostToolUse"]
    for groups in document.values():
        (group,) = groups
        (handler,) = group["hooks"]
        assert handler["type"] == "command" and handler["timeout"] == 30
        assert group.get("matcher", "*") == "*"  # every tool
        assert _ours([handler]) == [handler]
    assert main(["uninstall", "openhands", scope]) == 0
    assert not (folder / "hooks.json").exists()


@pytest.mark.parametrize(
    "original",
    [
        {"PreToolUse": [{"matcher": "terminal", "hooks": [USER_HOOK]}]},
        {"hooks": {"PreToolUse": [{"matcher": "terminal", "hooks": [USER_HOOK]}]}},
        {"pre_tool_use": [{"matcher": "/file_.*/", "hooks": [USER_HOOK]}], "stop": []},
    ],
    ids=["top", "wrapper", "snake-case"],
)
def test_the_users_file_keeps_its_form_and_comes_back_unchanged(
    home: Path, original: dict[str, Any]
) -> None:
    path = home / "project" / ".openhands" / "hooks.json"
    path.parent.mkdir()
    path.write_text(json.dumps(original, indent=2) + "\n")
    assert main(["install", "openhands", "--project"]) == 0
    document = json.loads(path.read_text())
    wrapped = "hooks" in original
    assert ("hooks" in document) == wrapped  # a wrapper added would hide the user's events
    table = document["hooks"] if wrapped else document
    events = _events(table)
    assert events["pre_tool_use"][0] == USER_HOOK  # the user's hook first, untouched
    assert len(_ours(events["pre_tool_use"])) == 1
    assert len(_ours(events["post_tool_use"])) == 1
    assert main(["install", "openhands", "--project"]) == 0  # idempotent
    assert json.loads(path.read_text()) == document
    assert main(["uninstall", "openhands", "--project"]) == 0
    assert json.loads(path.read_text()) == original
