"""``loopwatch install`` / ``uninstall``: each agent's settings file, merged and restored."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from loopwatch.cli import _install, main
from loopwatch.cli._install import (
    AGENT_SPECS,
    BACKUP_SUFFIX,
    hook_argv,
    hook_command,
    is_loopwatch_command,
    merge_install,
    merge_uninstall,
)
from loopwatch.cli._opencode_plugin import PLUGIN_MARKER

AGENTS = tuple(AGENT_SPECS)
#: The agents whose settings keep the events under "hooks" (OpenHands' file holds them at its
#: top: tests/cli/test_install_openhands.py).
SETTINGS_AGENTS = tuple(
    name for name, spec in AGENT_SPECS.items() if spec.style != "plugin" and not spec.top_level
)
EXPECTED_PATHS = {
    ("claude-code", "user"): "home/.claude/settings.json",
    ("claude-code", "project"): "project/.claude/settings.json",
    ("codex", "user"): "home/.codex/hooks.json",
    ("codex", "project"): "project/.codex/hooks.json",
    ("gemini", "user"): "home/.gemini/settings.json",
    ("gemini", "project"): "project/.gemini/settings.json",
    ("cursor", "user"): "home/.cursor/hooks.json",
    ("cursor", "project"): "project/.cursor/hooks.json",
    ("opencode", "user"): "home/.config/opencode/plugins/loopwatch.js",
    ("opencode", "project"): "project/.opencode/plugins/loopwatch.js",
    ("openhands", "user"): "home/.openhands/hooks.json",
    ("openhands", "project"): "project/.openhands/hooks.json",
}
EXPECTED_EVENTS = {
    "claude-code": ["PreToolUse", "PostToolUse", "PostToolUseFailure", "PreCompact"],
    "codex": ["PreToolUse", "PostToolUse", "PreCompact"],
    "gemini": ["BeforeTool", "AfterTool", "PreCompress"],
    "cursor": ["preToolUse", "postToolUse", "postToolUseFailure", "preCompact"],
}


@pytest.fixture
def places(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fake HOME and project directory (the current directory)."""
    (tmp_path / "home").mkdir()
    (tmp_path / "project").mkdir()
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    for variable in ("CLAUDE_CONFIG_DIR", "CODEX_HOME", "XDG_CONFIG_HOME"):
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.chdir(tmp_path / "project")
    return tmp_path


def scope_args(scope: str) -> list[str]:
    return ["--project"] if scope == "project" else ["--user"] if scope == "user" else []


def our_handlers(agent: str, document: dict[str, Any], event: str) -> list[dict[str, Any]]:
    entries = document["hooks"][event]
    if AGENT_SPECS[agent].style == "flat":
        handlers = entries
    else:
        handlers = [h for group in entries for h in group["hooks"]]
    return [h for h in handlers if is_loopwatch_command(h.get("command"), agent)]


# --- fresh files ----------------------------------------------------------------------------


@pytest.mark.parametrize("scope", ["user", "project"])
@pytest.mark.parametrize("agent", SETTINGS_AGENTS)
def test_install_into_a_fresh_settings_file(
    places: Path, agent: str, scope: str, capsys: pytest.CaptureFixture[str]
) -> None:
    path = places / EXPECTED_PATHS[(agent, scope)]
    assert main(["install", agent, *scope_args(scope)]) == 0
    document = json.loads(path.read_text())
    assert list(document["hooks"]) == EXPECTED_EVENTS[agent]
    for event in EXPECTED_EVENTS[agent]:
        (handler,) = our_handlers(agent, document, event)
        assert handler["command"] == hook_command(agent)
    if agent == "cursor":
        assert document["version"] == 1
    if agent == "gemini":
        group = document["hooks"]["BeforeTool"][0]
        assert group["hooks"][0]["timeout"] == 30000 and "matcher" not in group
    if agent in ("claude-code", "codex"):
        assert document["hooks"]["PreToolUse"][0]["hooks"][0]["timeout"] == 30
    assert not path.with_name(path.name + BACKUP_SUFFIX).exists()
    err = capsys.readouterr().err
    assert "installed" in err
    assert ("trust it: open /hooks" in err) == (agent == "codex")

    # Idempotent: the second run changes nothing, not even the bytes.
    before = path.read_bytes()
    assert main(["install", agent, *scope_args(scope)]) == 0
    assert path.read_bytes() == before
    assert "nothing to change" in capsys.readouterr().err

    # Uninstall removes the file loopwatch created.
    assert main(["uninstall", agent, *scope_args(scope)]) == 0
    assert not path.exists()
    assert main(["uninstall", agent, *scope_args(scope)]) == 0
    assert "not installed" in capsys.readouterr().err


def test_user_scope_is_the_default(places: Path) -> None:
    assert main(["install", "claude-code"]) == 0
    assert (places / "home/.claude/settings.json").exists()
    assert not (places / "project/.claude").exists()


def test_environment_overrides_of_the_user_folders(
    places: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CODEX_HOME", str(places / "codex-home"))
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(places / "claude-home"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(places / "xdg"))
    for agent in ("codex", "claude-code", "opencode"):
        assert main(["install", agent]) == 0
    assert (places / "codex-home/hooks.json").exists()
    assert (places / "claude-home/settings.json").exists()
    assert (places / "xdg/opencode/plugins/loopwatch.js").exists()


def test_the_command_carries_an_absolute_config(places: Path) -> None:
    config = places / "project" / "openclaw.json"
    config.write_text('{"tools": {"loopDetection": {"enabled": true}}}')
    assert main(["install", "gemini", "--project", "--config", "openclaw.json"]) == 0
    document = json.loads((places / "project/.gemini/settings.json").read_text())
    command = document["hooks"]["AfterTool"][0]["hooks"][0]["command"]
    assert command.endswith(f"hook gemini --config {config}")


def test_an_invalid_config_is_refused(places: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (places / "bad.json").write_text('{"tools": {"loopDetection": {"historySize": -1}}}')
    assert main(["install", "codex", "--config", str(places / "bad.json")]) == 2
    assert "historySize" in capsys.readouterr().err
    assert not (places / "home/.codex").exists()


# --- existing files -------------------------------------------------------------------------

USER_FILES: dict[str, dict[str, Any]] = {
    "claude-code": {
        "model": "opus",
        "hooks": {
            "PreToolUse": [
                {"matcher": "Bash", "hooks": [{"type": "command", "command": "audit.sh"}]}
            ],
            "Stop": [{"hooks": [{"type": "command", "command": "notify-send done"}]}],
        },
        "permissions": {"allow": ["Bash(ls:*)"]},
    },
    "codex": {
        "description": "team hooks",
        "hooks": {"PostToolUse": [{"hooks": [{"type": "command", "command": "log.py"}]}]},
    },
    "gemini": {
        "theme": "dark",
        "hooks": {
            "enabled": True,
            "BeforeTool": [
                {
                    "matcher": "run_shell_command",
                    "hooks": [{"type": "command", "command": "./check.sh", "timeout": 5000}],
                }
            ],
        },
        "ui": {"hideBanner": True},
    },
    "cursor": {
        "version": 1,
        "hooks": {
            "beforeShellExecution": [{"command": "./guard.sh"}],
            "preToolUse": [{"command": "./mine.sh", "timeout": 5}],
        },
    },
}


@pytest.mark.parametrize("agent", SETTINGS_AGENTS)
def test_install_keeps_the_users_settings_and_uninstall_restores_them(
    places: Path, agent: str, capsys: pytest.CaptureFixture[str]
) -> None:
    path = places / EXPECTED_PATHS[(agent, "project")]
    path.parent.mkdir(parents=True)
    original = json.dumps(USER_FILES[agent], indent=2) + "\n"
    path.write_text(original)

    assert main(["install", agent, "--project"]) == 0
    backup = path.with_name(path.name + BACKUP_SUFFIX)
    assert backup.read_text() == original
    document = json.loads(path.read_text())
    assert list(document) == list(USER_FILES[agent])  # key order kept
    for key, value in USER_FILES[agent].items():
        if key != "hooks":
            assert document[key] == value
    for event, entries in USER_FILES[agent]["hooks"].items():
        if isinstance(entries, list):
            assert document["hooks"][event][: len(entries)] == entries  # user's first
    for event in EXPECTED_EVENTS[agent]:
        assert len(our_handlers(agent, document, event)) == 1
    assert "backup" in capsys.readouterr().err

    assert main(["install", agent, "--project"]) == 0
    assert json.loads(path.read_text()) == document

    assert main(["uninstall", agent, "--project"]) == 0
    assert path.read_text() == original


def test_uninstall_takes_only_loopwatch_out_of_a_shared_group(places: Path) -> None:
    path = places / "home/.claude/settings.json"
    path.parent.mkdir(parents=True)
    ours = {"type": "command", "command": "/opt/bin/loopwatch hook claude-code", "timeout": 99}
    mine = {"type": "command", "command": "my-audit"}
    path.write_text(
        json.dumps({"hooks": {"PreToolUse": [{"matcher": "*", "hooks": [mine, ours]}]}}, indent=4)
    )
    assert main(["install", "claude-code"]) == 0
    document = json.loads(path.read_text())
    group = document["hooks"]["PreToolUse"]
    assert len(group) == 1  # the existing handler was reused, its timeout kept
    assert group[0]["hooks"][1] == {**ours, "command": hook_command("claude-code")}
    assert path.read_text().startswith('{\n    "hooks"')  # the user's indentation
    assert main(["uninstall", "claude-code"]) == 0
    assert json.loads(path.read_text()) == {
        "hooks": {"PreToolUse": [{"matcher": "*", "hooks": [mine]}]}
    }


def test_uninstall_leaves_other_agents_and_other_tools_alone(places: Path) -> None:
    path = places / "home/.cursor/hooks.json"
    path.parent.mkdir(parents=True)
    foreign = [
        {"command": "loopwatch hook claude-code"},
        {"command": "myloopwatch hook cursor"},
        {"command": "echo loopwatch"},
    ]
    path.write_text(json.dumps({"version": 1, "hooks": {"preToolUse": foreign}}))
    assert main(["install", "cursor"]) == 0
    assert main(["uninstall", "cursor"]) == 0
    assert json.loads(path.read_text()) == {"version": 1, "hooks": {"preToolUse": foreign}}


# --- refusals and dry runs ------------------------------------------------------------------


@pytest.mark.parametrize("agent", SETTINGS_AGENTS)
@pytest.mark.parametrize(
    "text",
    [
        '{"hooks": {',
        "[1, 2]",
        '{"hooks": []}',
        '{"hooks": {"PreToolUse": {}}}',
        # Parsed, but too deep to copy and render (RecursionError), or even to parse.
        '{"x": ' + "[" * 900 + "]" * 900 + "}",
        '{"x": ' + "[" * 5000 + "]" * 5000 + "}",
    ],
    ids=["truncated", "array", "hooks-array", "event-object", "deep", "deeper"],
)
def test_a_file_loopwatch_cannot_read_is_refused(
    places: Path, agent: str, text: str, capsys: pytest.CaptureFixture[str]
) -> None:
    path = places / EXPECTED_PATHS[(agent, "user")]
    path.parent.mkdir(parents=True)
    if "PreToolUse" in text:
        text = text.replace("PreToolUse", EXPECTED_EVENTS[agent][0])
    path.write_text(text)
    assert main(["install", agent]) == 2
    err = capsys.readouterr().err
    assert str(path) in err and "Traceback" not in err
    assert path.read_text() == text
    assert not path.with_name(path.name + BACKUP_SUFFIX).exists()
    if not text.startswith('{"hooks": {"'):
        assert main(["uninstall", agent]) == 2
        assert path.read_text() == text


@pytest.mark.parametrize("agent", AGENTS)
def test_dry_run_prints_a_diff_and_writes_nothing(
    places: Path, agent: str, capsys: pytest.CaptureFixture[str]
) -> None:
    path = places / EXPECTED_PATHS[(agent, "user")]
    assert main(["install", agent, "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("--- /dev/null\n+++ " + str(path))
    assert f"hook {agent}" in out
    assert not path.exists() and not path.parent.exists()

    assert main(["install", agent]) == 0
    before = path.read_bytes()
    assert main(["uninstall", agent, "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"--- {path}\n+++ /dev/null\n")  # the file loopwatch created goes
    assert f"hook {agent}" in out
    assert path.read_bytes() == before


# --- OpenCode -------------------------------------------------------------------------------


@pytest.mark.parametrize("scope", ["user", "project"])
def test_opencode_plugin_file(places: Path, scope: str) -> None:
    path = places / EXPECTED_PATHS[("opencode", scope)]
    assert main(["install", "opencode", *scope_args(scope)]) == 0
    text = path.read_text()
    assert text.startswith(PLUGIN_MARKER)
    assert json.dumps(hook_argv("opencode")) in text
    # One default export for both APIs: 1.x runs server, 2.x setup.
    assert 'export default { id: "loopwatch", server, setup }' in text
    assert main(["install", "opencode", *scope_args(scope)]) == 0
    assert path.read_text() == text
    assert main(["uninstall", "opencode", *scope_args(scope)]) == 0
    assert not path.exists()


def test_opencode_leaves_a_foreign_plugin_alone(
    places: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = places / EXPECTED_PATHS[("opencode", "project")]
    path.parent.mkdir(parents=True)
    path.write_text("export default { id: 'mine', server: async () => ({}) }\n")
    assert main(["install", "opencode", "--project"]) == 2
    assert main(["uninstall", "opencode", "--project"]) == 2
    assert "not written by loopwatch" in capsys.readouterr().err
    assert path.read_text().startswith("export default { id: 'mine'")


# --- the marker and the merge, as properties ------------------------------------------------


@pytest.mark.parametrize(
    ("command", "agent", "ours"),
    [
        ("/usr/local/bin/loopwatch hook codex", "codex", True),
        ("loopwatch hook codex --config /x.json", "codex", True),
        ("/usr/bin/python3 -m loopwatch.cli hook gemini", "gemini", True),
        ("'/My Tools/loopwatch' hook cursor", "cursor", True),
        (
            "/usr/bin/python3 -S /venv/lib/site-packages/loopwatch/_hook_entry.py hook codex",
            "codex",
            True,
        ),
        (
            "'/My Py/python' -S '/My Src/loopwatch/_hook_entry.py' hook gemini --config /x",
            "gemini",
            True,
        ),
        ("/usr/bin/python3 -S /src/loopwatch/_hook_entry.py hook codexx", "codex", False),
        ("/usr/bin/python3 -S /src/myloopwatch/_hook_entry.py hook codex", "codex", False),
        ("/usr/bin/python3 -S /src/loopwatch/_hook_entry.py scan hook codex", "codex", False),
        ("loopwatch hook codexx", "codex", False),
        ("myloopwatch hook codex", "codex", False),
        ("loopwatch hook claude-code", "codex", False),
        ("loopwatch scan hook codex", "codex", False),
        (None, "codex", False),
    ],
)
def test_which_commands_are_loopwatchs(command: object, agent: str, ours: bool) -> None:
    assert is_loopwatch_command(command, agent) is ours


def test_the_command_runs_this_python_without_site_on_the_entry_script(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import loopwatch

    script = Path(loopwatch.__file__).resolve().parent / "_hook_entry.py"
    assert script.is_file()
    assert hook_argv("codex") == [sys.executable, "-S", str(script), "hook", "codex"]
    assert is_loopwatch_command(hook_command("codex"), "codex")
    # Without the script as a file (a zipped install): this Python's -m loopwatch.cli.
    monkeypatch.setattr(_install, "entry_script", lambda: None)
    assert hook_argv("codex") == [sys.executable, "-m", "loopwatch.cli", "hook", "codex"]
    assert is_loopwatch_command(hook_command("codex"), "codex")


USER_COMMANDS = st.text(min_size=1, max_size=12).filter(lambda c: "loopwatch" not in c)
JSON_LEAVES = st.none() | st.booleans() | st.integers() | st.text(max_size=6)


def user_handler(style: str) -> st.SearchStrategy[dict[str, Any]]:
    if style == "flat":
        return st.fixed_dictionaries({"command": USER_COMMANDS}, optional={"timeout": JSON_LEAVES})
    return st.fixed_dictionaries(
        {"type": st.just("command"), "command": USER_COMMANDS}, optional={"timeout": JSON_LEAVES}
    )


def user_document(agent: str) -> st.SearchStrategy[dict[str, Any]]:
    spec = AGENT_SPECS[agent]
    if spec.style == "flat":
        entries = st.lists(user_handler("flat"), min_size=1, max_size=3)
    else:
        group = st.fixed_dictionaries(
            {"hooks": st.lists(user_handler("groups"), min_size=1, max_size=2)},
            optional={"matcher": st.text(max_size=5)},
        )
        entries = st.lists(group, min_size=1, max_size=2)
    # Empty tables and lists are left out: uninstall cannot tell an empty list the user wrote
    # from one loopwatch emptied, and removes it (documented in docs/serve.md).
    events = st.sampled_from([*spec.events, "Stop", "sessionStart"])
    table = st.dictionaries(events, entries, min_size=1, max_size=3)
    others = st.dictionaries(
        st.text(max_size=6).filter(lambda k: k != "hooks"), JSON_LEAVES, max_size=3
    )
    return st.tuples(others, st.none() | table).map(
        lambda pair: {**pair[0], **({"hooks": pair[1]} if pair[1] is not None else {})}
    )


@pytest.mark.parametrize("agent", SETTINGS_AGENTS)
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_install_then_uninstall_is_the_identity(agent: str, data: st.DataObject) -> None:
    spec = AGENT_SPECS[agent]
    document = data.draw(user_document(agent))
    path = Path("/nowhere/settings.json")
    command = hook_command(agent, "/etc/lw.json")
    installed = merge_install(spec, document, command, path)
    assert merge_install(spec, installed, command, path) == installed
    for event in spec.events:
        assert len(our_handlers(agent, installed, event)) == 1
    restored = merge_uninstall(spec, installed, path)
    assert restored == document
    assert list(restored) == list(document)


def test_the_console_command_installs_and_uninstalls(tmp_path: Path) -> None:
    env = {**os.environ, "HOME": str(tmp_path)}
    for variable in ("CLAUDE_CONFIG_DIR", "CODEX_HOME", "XDG_CONFIG_HOME"):
        env.pop(variable, None)
    command = [sys.executable, "-m", "loopwatch.cli"]
    done = subprocess.run(
        [*command, "install", "cursor"], env=env, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    document = json.loads((tmp_path / ".cursor/hooks.json").read_text())
    assert list(document["hooks"]) == EXPECTED_EVENTS["cursor"]
    done = subprocess.run(
        [*command, "uninstall", "cursor"], env=env, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    assert not (tmp_path / ".cursor/hooks.json").exists()


@pytest.mark.parametrize("agent", SETTINGS_AGENTS)
def test_a_settings_file_with_a_byte_order_mark_is_edited_and_keeps_it(
    places: Path, agent: str
) -> None:
    # A Windows editor may save settings.json with a UTF-8 BOM (json.loads refuses one).
    path = places / EXPECTED_PATHS[(agent, "user")]
    path.parent.mkdir(parents=True)
    original = "\ufeff" + json.dumps({"theme": "dark"}, indent=4) + "\n"
    path.write_text(original, encoding="utf-8")
    assert main(["install", agent]) == 0
    text = path.read_text(encoding="utf-8")
    assert text.startswith("\ufeff{\n    ")  # the mark and the indentation kept
    document = json.loads(text.removeprefix("\ufeff"))
    assert document["theme"] == "dark" and document["hooks"]
    assert main(["uninstall", agent]) == 0
    assert path.read_text(encoding="utf-8") == original
