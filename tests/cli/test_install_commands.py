"""``loopwatch install <agent>`` writes exactly a command that ``loopwatch hook`` accepts.

For every agent (and with ``--config``), the command is taken from the file install wrote
(the settings' handlers, or the OpenCode plugin's argv), parsed by ``loopwatch hook``'s own
parser and by its warm-path reader (they must agree, or a hook would be judged by a server
started with other options), and run once as the agent would run it.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from loopwatch.cli import _install, main
from loopwatch.cli._hook import _quick_options, build_parser
from loopwatch.hooks import AGENTS, fail_open_result
from loopwatch.serve import hook_options

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("HOME", str(tmp_path))
    for variable in ("CLAUDE_CONFIG_DIR", "CODEX_HOME", "XDG_CONFIG_HOME", "LOOPWATCH_STORE"):
        monkeypatch.delenv(variable, raising=False)
    # The command install writes is this Python's (sys.executable), whatever is on PATH.
    return tmp_path


def written_commands(agent: str, path: Path) -> list[list[str]]:
    """Every argv loopwatch wrote into the agent's file."""
    text = path.read_text(encoding="utf-8")
    spec = _install.AGENT_SPECS[agent]
    if spec.style == "plugin":
        match = re.search(r"^const COMMAND = (.+)$", text, re.MULTILINE)
        assert match is not None
        return [json.loads(match.group(1))]
    document = json.loads(text)
    commands = []
    for event in spec.events:
        table = document if spec.top_level and "hooks" not in document else document["hooks"]
        for entry in table[event]:
            handlers = [entry] if spec.style == "flat" else entry["hooks"]
            commands += [shlex.split(h["command"]) for h in handlers]
    assert len(commands) == len(spec.events)
    return commands


@pytest.mark.parametrize("with_config", [False, True])
@pytest.mark.parametrize("agent", AGENTS)
def test_install_writes_a_command_the_hook_accepts(
    home: Path, agent: str, with_config: bool
) -> None:
    config = home / "openclaw.json"
    config.write_text('{"tools": {"loopDetection": {"enabled": true}}}', encoding="utf-8")
    flags = ["--config", str(config)] if with_config else []
    assert main(["install", agent, *flags]) == 0
    path = _install.target_file(_install.AGENT_SPECS[agent], project=False)
    commands = written_commands(agent, path)
    for argv in commands:
        assert argv[:3] == [sys.executable, "-S", str(_install.entry_script())]
        hook_args = argv[4:]
        assert argv[3] == "hook" and hook_args[0] == agent
        parsed = build_parser().parse_args(hook_args)
        assert (parsed.agent, parsed.store, parsed.profile) == (agent, None, None)
        assert parsed.config == (str(config) if with_config else None)
        quick = _quick_options(hook_args)
        assert quick == (agent, hook_options(parsed.store, parsed.config, parsed.profile))
    # Run it as the agent does: an event loopwatch ignores gets the host's "no opinion".
    env = {**os.environ, "XDG_STATE_HOME": str(home / "state")}
    env["PYTHONPATH"] = str(ROOT / "src") + os.pathsep + env.get("PYTHONPATH", "")
    env["LOOPWATCH_SOCKET"] = str(home / "none.sock")
    env.pop("LOOPWATCH_STORE", None)
    done = subprocess.run(
        commands[0], input="{}", capture_output=True, text=True, env=env, check=False
    )
    expected = fail_open_result(agent).stdout
    assert (done.returncode, done.stdout.strip(), done.stderr) == (0, expected, "")
    # The log says nothing went wrong (no unknown flag, no bad config).
    log = home / "state" / "loopwatch" / "hook.log"
    assert "error" not in (log.read_text() if log.exists() else "").lower()


def test_every_agent_of_the_hook_can_be_installed() -> None:
    assert tuple(_install.AGENT_SPECS) == AGENTS
