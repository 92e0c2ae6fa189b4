"""Helpers for the hook tests: payloads from ``tests/data/hooks``, the real hook process.

``HookRunner`` runs the command ``loopwatch install`` writes (``hook_argv``: ``python -S
.../loopwatch/_hook_entry.py hook <agent>``) as the agents do (stdin in, stdout out) with its
own state folder, and can also feed events in this process through
``run_hook`` on the same SQLite file: long loops are built up in-process, and the events
that matter (the call that warns, the call that is blocked) go through the real process.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from loopwatch.cli._install import hook_argv
from loopwatch.hooks import default_guard, run_hook
from loopwatch.stores.sqlite import SqliteStore

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data" / "hooks"

#: The event files of each agent: pre, post, failure (None: the host has no failure
#: event), compaction.
EVENTS: dict[str, dict[str, str | None]] = {
    "claude-code": {
        "pre": "PreToolUse",
        "post": "PostToolUse",
        "fail": "PostToolUseFailure",
        "compact": "PreCompact",
    },
    "codex": {"pre": "PreToolUse", "post": "PostToolUse", "fail": None, "compact": "PreCompact"},
    "gemini": {
        "pre": "BeforeTool",
        "post": "AfterTool",
        "fail": "AfterToolError",
        "compact": "PreCompress",
    },
    "cursor": {
        "pre": "preToolUse",
        "post": "postToolUse",
        "fail": "postToolUseFailure",
        "compact": "preCompact",
    },
    "opencode": {
        "pre": "tool.execute.before",
        "post": "tool.execute.after",
        "fail": "tool.execute.error",
        "compact": "experimental.session.compacting",
    },
    # OpenHands has no failure event (a failed observation is a PostToolUse) and runs no
    # hook when it condenses a conversation.
    "openhands": {"pre": "PreToolUse", "post": "PostToolUse", "fail": None, "compact": None},
}
#: What each agent gets when loopwatch has nothing to say.
ALLOW = {
    "claude-code": "",
    "codex": "",
    "gemini": "{}",
    "cursor": "{}",
    "opencode": '{"action": "allow"}',
    "openhands": "",
}
#: The run id in the payloads (``None``: the host sends none).
RUN = {
    "claude-code": None,
    "codex": "turn-1",
    "gemini": None,
    "cursor": "gen-1",
    "opencode": None,
    "openhands": None,
}


def payload(agent: str, kind: str, *, session: str, call: str, command: str = "make test") -> str:
    """The agent's ``kind`` event (``pre``, ``post``, ``fail``, ``compact``) as JSON text."""
    name = EVENTS[agent][kind]
    assert name is not None
    text = (DATA / agent / f"{name}.json").read_text(encoding="utf-8")
    for placeholder, value in (("@SESSION@", session), ("@CALL@", call), ("@COMMAND@", command)):
        text = text.replace(placeholder, value)
    json.loads(text)  # the file stays valid JSON
    return text


def denied(agent: str, stdout: str) -> str | None:
    """The reason of a block in the agent's answer, else ``None``."""
    if not stdout.strip():
        return None
    answer = json.loads(stdout)
    if agent in ("claude-code", "codex"):
        specific = answer.get("hookSpecificOutput") or {}
        if specific.get("permissionDecision") == "deny":
            assert specific["hookEventName"] == "PreToolUse"
            reason: str = specific["permissionDecisionReason"]
            assert reason
            return reason
        return None
    if agent in ("gemini", "openhands"):
        return answer["reason"] if answer.get("decision") == "deny" else None
    if agent == "cursor":
        if answer.get("permission") == "deny":
            assert answer["agent_message"] == answer["user_message"]
            return str(answer["agent_message"])
        return None
    return answer["message"] if answer.get("action") == "block" else None


def context(agent: str, stdout: str) -> str | None:
    """What the agent's post answer tells the model, else ``None``."""
    if not stdout.strip():
        return None
    answer = json.loads(stdout)
    if agent in ("claude-code", "codex", "gemini"):
        specific = answer.get("hookSpecificOutput") or {}
        return specific.get("additionalContext")
    if agent == "cursor":
        return answer.get("additional_context")
    if agent == "openhands":
        return answer.get("additionalContext")
    if answer.get("action") == "abort":
        parts = [answer.get("warning"), answer.get("message")]
        return "\n\n".join(p for p in parts if p)
    return answer.get("warning")


def ended(agent: str, stdout: str) -> str | None:
    """The stop reason when the answer ends the run (hosts that can), else ``None``."""
    if not stdout.strip():
        return None
    answer = json.loads(stdout)
    if agent == "opencode":
        return answer["message"] if answer.get("action") == "abort" else None
    if answer.get("continue") is False:
        reason: str = answer["stopReason"]
        return reason
    return None


@dataclass(frozen=True)
class Done:
    returncode: int
    stdout: str
    stderr: str


class HookRunner:
    """Run hook events for one state folder (so one SQLite store)."""

    def __init__(self, tmp_path: Path) -> None:
        self.state = tmp_path / "state"
        self.db = self.state / "loopwatch" / "sessions.db"
        self.url = "sqlite://" + str(self.db)
        self._guards: dict[str | None, Any] = {}

    def env(self, **extra: str) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k != "LOOPWATCH_STORE"}
        env["PYTHONPATH"] = str(ROOT / "src") + os.pathsep + env.get("PYTHONPATH", "")
        env["XDG_STATE_HOME"] = str(self.state)
        env.update(extra)
        return env

    def process(
        self, agent: str, stdin: str, *flags: str, module: bool = False, **env: str
    ) -> Done:
        """The real hook process: the installed command, or ``python -m loopwatch.cli hook``
        with ``module``."""
        command = (
            [sys.executable, "-m", "loopwatch.cli", "hook", agent] if module else hook_argv(agent)
        )
        done = subprocess.run(
            [*command, *flags],
            input=stdin.encode("utf-8"),
            capture_output=True,
            env=self.env(**env),
            timeout=120,
            check=False,
        )
        return Done(
            done.returncode,
            done.stdout.decode("utf-8", "replace"),
            done.stderr.decode("utf-8", "replace"),
        )

    def inprocess(self, agent: str, stdin: str, profile: str | None = None) -> str:
        """The same event through ``run_hook`` here, on the same store file."""
        guard = self._guards.get(profile)
        if guard is None:
            # An explicit URL: its folder is not created (the hook process creates its own
            # state folder only for the default URL).
            self.db.parent.mkdir(parents=True, exist_ok=True)
            guard = self._guards[profile] = default_guard(self.url, profile=profile)
        result = run_hook(agent, stdin, guard)
        assert result.exit_code == 0
        return result.stdout

    def store(self) -> SqliteStore:
        return SqliteStore(self.db)

    def close(self) -> None:
        for guard in self._guards.values():
            guard.store.close()
