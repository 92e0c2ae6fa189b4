"""The OpenCode plugin ``loopwatch install opencode`` writes, under node, against the REAL hook.

The plugin is rendered with the command ``install`` writes (``hook_argv("opencode")``) and
driven by a small node script that calls its hooks as OpenCode does
(``tool.execute.before(input: {tool, sessionID, callID}, output: {args})``,
``tool.execute.after(input, output: {title, output, metadata})``, the ``event`` hook with a
failed tool part, ``experimental.session.compacting``). Each event runs the real
``python -m loopwatch.cli hook opencode`` process on a SQLite store in a temporary state
folder, so the two sides of the protocol (``loopwatch.hooks.opencode`` and the plugin)
are checked against each other, not against a stand-in.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from loopwatch.cli import _install
from loopwatch.cli._opencode_plugin import render_plugin
from loopwatch.stores.sqlite import SqliteStore

ROOT = Path(__file__).resolve().parents[2]

DRIVER = textwrap.dedent(
    """
    const plugin = (await import(process.argv[2])).default
    const aborted = []
    const client = { session: { abort: async (request) => aborted.push(request.path.id) } }
    const hooks = await plugin.server({ directory: "/work/project", client })
    const steps = []
    const args = { command: "make test", description: "Run the tests" }
    for (let index = 1; index <= 6; index++) {
      const input = { tool: "bash", sessionID: "ses_loop", callID: "call_" + index }
      try {
        await hooks["tool.execute.before"](input, { args: { ...args } })
      } catch (error) {
        steps.push({ blocked: error.message })
        continue
      }
      // Newer OpenCode releases pass args to the after hook; older ones do not (the plugin
      // then sends the ones it kept from the before hook): cover both.
      const afterInput = index % 2 ? { ...input, args: { ...args } } : input
      const output = { title: "make test", output: "FAILED test_login", metadata: {} }
      await hooks["tool.execute.after"](afterInput, output)
      steps.push({ output: output.output })
    }
    // A failed tool: OpenCode skips tool.execute.after and reports the part in error.
    const failed = { tool: "read", sessionID: "ses_fail", callID: "call_f1" }
    await hooks["tool.execute.before"](failed, { args: { filePath: "/nope" } })
    const part = { type: "tool", tool: "read", sessionID: "ses_fail", callID: "call_f1",
      state: { status: "error", input: { filePath: "/nope" }, error: "ENOENT: /nope" } }
    await hooks.event({ event: { type: "message.part.updated", properties: { part } } })
    await hooks.event({ event: { type: "message.part.updated", properties: { part } } })
    // Input JSON cannot encode: the call runs.
    let odd = "allowed"
    try {
      await hooks["tool.execute.before"](
        { tool: "bash", sessionID: "ses_odd", callID: "c" }, { args: { n: 10n } })
    } catch (error) {
      odd = "blocked: " + error.message
    }
    await hooks["experimental.session.compacting"]({ sessionID: "ses_loop" }, { context: [] })
    console.log(JSON.stringify({ id: plugin.id, steps, odd, aborted }))
    """
)


def run_plugin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, **env: str) -> dict[str, Any]:
    node = shutil.which("node")
    assert node, "the OpenCode plugin test needs node on PATH (deselect with -m 'not node')"
    command = _install.hook_argv("opencode")  # python -S .../loopwatch/_hook_entry.py hook ...
    assert command[1:] == ["-S", str(_install.entry_script()), "hook", "opencode"]
    plugin = tmp_path / "loopwatch.mjs"
    plugin.write_text(render_plugin(command), encoding="utf-8")
    (tmp_path / "driver.mjs").write_text(DRIVER, encoding="utf-8")
    environment = {k: v for k, v in os.environ.items() if k != "LOOPWATCH_STORE"}
    environment["PYTHONPATH"] = str(ROOT / "src") + os.pathsep + environment.get("PYTHONPATH", "")
    environment["XDG_STATE_HOME"] = str(tmp_path / "state")
    environment["LOOPWATCH_SOCKET"] = str(tmp_path / "no-server.sock")
    environment.update(env)
    done = subprocess.run(
        [node, str(tmp_path / "driver.mjs"), plugin.as_uri()],
        capture_output=True,
        text=True,
        env=environment,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(done.stdout)
    return result


@pytest.mark.node
def test_the_plugin_and_the_real_hook_agree(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    result = run_plugin(tmp_path, monkeypatch)
    assert result["id"] == "loopwatch"
    steps = result["steps"]
    # Allowed, the tool's own output untouched.
    assert steps[0] == {"output": "FAILED test_login"}
    # A warning is appended after the call's own output, before any block.
    warned = [
        i for i, s in enumerate(steps) if s.get("output", "").startswith("FAILED test_login\n\n")
    ]
    blocked = [i for i, s in enumerate(steps) if "blocked" in s]
    assert blocked, steps
    # The default (adaptive) profile blocks the third identical call with no warning before
    # it (issue 15); a warning that does come is appended after the output, before the block
    # (the warning path itself: tests/hooks/test_hook_fail_open.py).
    assert steps[: blocked[0]] == [{"output": "FAILED test_login"}] * blocked[0] or (
        warned and warned[0] < blocked[0]
    )
    for index in warned:
        assert "make test" not in steps[index]["output"].split("\n\n", 1)[1]
    # The plugin throws: the message is loopwatch's, not a generic one.
    assert steps[blocked[0]]["blocked"] != "loopwatch blocked this tool call"
    assert steps[blocked[0]]["blocked"].startswith("CRITICAL: Blocked call")
    assert result["odd"] == "allowed"
    assert result["aborted"] == []

    store = SqliteStore(tmp_path / "state" / "loopwatch" / "sessions.db")
    try:
        now = time.time()
        loop = store.history("opencode:ses_loop", now)
        failed = store.history("opencode:ses_fail", now)
        armed = store.guard_snapshot("opencode:ses_loop", None, now).armed
    finally:
        store.close()
    # Every allowed call has its outcome, the odd-numbered and even-numbered alike.
    assert len([r for r in loop if r.result_hash is not None]) == blocked[0]
    assert len({r.args_hash for r in loop}) == 1
    # The failure is one record, an error (the repeated event is not counted twice).
    assert len(failed) == 1 and failed[0].result_hash is not None
    assert failed[0].result_hash.startswith("error:")
    assert armed


@pytest.mark.node
def test_a_broken_hook_lets_every_call_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    result = run_plugin(tmp_path, monkeypatch, LOOPWATCH_STORE="nosuch://store")
    assert result["steps"] == [{"output": "FAILED test_login"}] * 6
    assert result["odd"] == "allowed"
