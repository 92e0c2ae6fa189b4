"""Cursor runs Claude Code's hooks too (cursor.com/docs/reference/third-party-hooks): a
user with ``loopwatch install claude-code`` gets the Claude Code hook run for Cursor's
calls, with Cursor's payloads (camelCase event names, ``conversation_id``,
``cursor_version``, ``workspace_roots``: herdrdev/herdr#2832, PeonPing/peon-ping#102,
DobermanCore/Doberman-Core#576), and one with both hooks installed gets both run for each
call. Each call must be counted once, under the Cursor session, answered as Cursor reads.
"""

from __future__ import annotations

import json
import shlex
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from _hookkit import ALLOW, HookRunner, denied, payload

from loopwatch.cli import main
from loopwatch.cli._install import hook_command
from loopwatch.hooks import _cursor_origin


@pytest.fixture
def hooks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[HookRunner]:
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    for variable in ("CURSOR_PROJECT_DIR", "CLAUDE_CONFIG_DIR"):
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.setattr(_cursor_origin, "ENTERPRISE_FILES", {})
    runner = HookRunner(tmp_path)
    yield runner
    runner.close()


def _cursor_event(kind: str, call: str, *, root: str = "/home/user/app", **fields: object) -> str:
    """Cursor's payload as a Claude Code hook gets it: Cursor's own, ``cwd`` empty and the
    project only in ``workspace_roots`` (as Doberman-Core#576 captured it)."""
    data = json.loads(payload("cursor", kind, session="S", call=call))
    data.update(cwd="", workspace_roots=[root], **fields)
    return json.dumps(data)


def _install_cursor_hook(folder: Path) -> None:
    command = hook_command("cursor")
    events = ("preToolUse", "postToolUse", "postToolUseFailure", "preCompact")
    document = {"version": 1, "hooks": {event: [{"command": command}] for event in events}}
    (folder / ".cursor").mkdir(parents=True, exist_ok=True)
    (folder / ".cursor" / "hooks.json").write_text(json.dumps(document), encoding="utf-8")


def _records(hooks: HookRunner) -> dict[str, int]:
    store = hooks.store()
    try:
        return {key: len(store.history(key, 0)) for key, _ in store.session_keys(0)}
    finally:
        store.close()


def _loop(hooks: HookRunner, agents: tuple[str, ...], calls: int, **fields: object) -> list[bool]:
    """``calls`` identical Cursor calls, each event run by every hook in ``agents``; whether
    any hook blocked each call."""
    blocked = []
    for index in range(calls):
        call = f"tool-{index}"
        pre = _cursor_event("pre", call, **fields)
        answers = [denied("cursor", hooks.inprocess(agent, pre)) for agent in agents]
        blocked.append(any(answers))
        post = _cursor_event("post", call, **fields)
        for agent in agents:
            hooks.inprocess(agent, post)
    return blocked


def _cursor_alone(tmp_path: Path, calls: int) -> tuple[list[bool], dict[str, int]]:
    """What the Cursor hook alone makes of the same calls (a store of its own)."""
    runner = HookRunner(tmp_path / "alone")
    try:
        return _loop(runner, ("cursor",), calls), _records(runner)
    finally:
        runner.close()


def test_the_claude_code_hook_guards_cursors_calls_as_the_cursor_hook_does(
    hooks: HookRunner, tmp_path: Path
) -> None:
    # Only `loopwatch install claude-code`: Cursor's calls are guarded all the same.
    blocked, records = _cursor_alone(tmp_path, 5)
    assert any(blocked) and records["cursor:S"] < 5  # (the loop is blocked)
    assert _loop(hooks, ("claude-code",), 5) == blocked
    assert _records(hooks) == records


def test_with_both_hooks_installed_each_cursor_call_is_counted_once(
    hooks: HookRunner, tmp_path: Path
) -> None:
    _install_cursor_hook(tmp_path / "home")
    blocked, records = _cursor_alone(tmp_path, 5)
    assert _loop(hooks, ("cursor", "claude-code"), 5) == blocked
    assert _records(hooks) == records


def test_a_project_cursor_hook_in_a_workspace_root_counts_too(
    hooks: HookRunner, tmp_path: Path
) -> None:
    project = tmp_path / "project"
    _install_cursor_hook(project)
    for agent in ("cursor", "claude-code"):
        answer = hooks.inprocess(agent, _cursor_event("pre", "t1", root=str(project)))
        assert answer == ALLOW["cursor"]
    assert _records(hooks) == {"cursor:S": 1}


def test_a_claude_code_event_name_from_cursor_is_read_as_cursors(hooks: HookRunner) -> None:
    # Should Cursor pass the Claude Code name on, the call is still Cursor's, counted once.
    _install_cursor_hook(Path(hooks.state).parent / "home")
    for index in range(2):
        call = f"tool-{index}"
        for claude_name, kind in (("PreToolUse", "pre"), ("PostToolUse", "post")):
            hooks.inprocess("cursor", _cursor_event(kind, call))
            hooks.inprocess("claude-code", _cursor_event(kind, call, hook_event_name=claude_name))
    assert _records(hooks) == {"cursor:S": 2}


def test_the_real_claude_code_hook_answers_cursor_in_cursors_format(
    hooks: HookRunner, tmp_path: Path
) -> None:
    # Through the installed command, with the byte order mark cursor-agent writes.
    home = str(tmp_path / "home")
    for index in range(3):
        hooks.inprocess("claude-code", _cursor_event("pre", f"tool-{index}"))
        hooks.inprocess("claude-code", _cursor_event("post", f"tool-{index}"))
    done = hooks.process("claude-code", "\ufeff" + _cursor_event("pre", "tool-3"), HOME=home)
    assert done.returncode == 0 and done.stderr == ""
    assert denied("cursor", done.stdout)  # permission: deny, agent_message: Cursor's own
    allowed = hooks.process(
        "claude-code", _cursor_event("pre", "other", tool_name="Read"), HOME=home
    )
    assert allowed.stdout.strip() == ALLOW["cursor"]  # "{}": JSON, as Cursor wants


def test_claude_codes_own_payloads_are_unchanged(hooks: HookRunner, tmp_path: Path) -> None:
    _install_cursor_hook(tmp_path / "home")
    hooks.inprocess("claude-code", payload("claude-code", "pre", session="S", call="toolu_1"))
    assert _records(hooks) == {"claude-code:S": 1}


@pytest.mark.parametrize(
    "fields",
    [{"cursor_version": "2026.09.02"}, {"conversation_id": "c"}, {"workspace_roots": []}],
)
def test_a_payload_with_a_field_only_cursor_sends_is_cursors(fields: dict[str, object]) -> None:
    assert _cursor_origin.sent_by_cursor(fields)
    claude = json.loads(payload("claude-code", "pre", session="S", call="toolu_1"))
    assert not _cursor_origin.sent_by_cursor(claude)


def test_a_broken_cursor_hooks_file_is_no_cursor_hook(hooks: HookRunner, tmp_path: Path) -> None:
    folder = tmp_path / "home" / ".cursor"
    folder.mkdir(parents=True)
    (folder / "hooks.json").write_text('{"hooks": ', encoding="utf-8")
    hooks.inprocess("claude-code", _cursor_event("pre", "t1"))
    assert _records(hooks) == {"cursor:S": 1}


def test_after_both_installs_cursor_runs_two_hooks_and_one_counts(
    hooks: HookRunner, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # `loopwatch install` into the real settings files of both, then every command Cursor
    # would run for a call (its own hooks.json's, then Claude's), as the processes it runs.
    assert main(["install", "claude-code"]) == 0
    assert "Cursor runs Claude Code's hooks too" in capsys.readouterr().err
    assert main(["install", "cursor"]) == 0
    assert "counted once" in capsys.readouterr().err
    home = tmp_path / "home"
    cursor = json.loads((home / ".cursor" / "hooks.json").read_text(encoding="utf-8"))
    claude = json.loads((home / ".claude" / "settings.json").read_text(encoding="utf-8"))
    commands = {
        "preToolUse": [cursor["hooks"]["preToolUse"][0]["command"]]
        + [h["command"] for g in claude["hooks"]["PreToolUse"] for h in g["hooks"]],
        "postToolUse": [cursor["hooks"]["postToolUse"][0]["command"]]
        + [h["command"] for g in claude["hooks"]["PostToolUse"] for h in g["hooks"]],
    }
    assert [c.split()[-1] for c in commands["preToolUse"]] == ["cursor", "claude-code"]
    for kind, event in (("pre", "preToolUse"), ("post", "postToolUse")):
        for command in commands[event]:
            done = subprocess.run(
                shlex.split(command),
                input=("\ufeff" + _cursor_event(kind, "tool-1")).encode("utf-8"),
                capture_output=True,
                env=hooks.env(HOME=str(home)),
                timeout=120,
                check=False,
            )
            assert done.returncode == 0 and done.stdout.decode().strip() == ALLOW["cursor"]
    assert _records(hooks) == {"cursor:S": 1}
