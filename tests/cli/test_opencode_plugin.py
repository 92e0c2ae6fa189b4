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


def run_plugin(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, driver: str = DRIVER, **env: str
) -> dict[str, Any]:
    node = shutil.which("node")
    assert node, "the OpenCode plugin test needs node on PATH (deselect with -m 'not node')"
    command = _install.hook_argv("opencode")  # python -S .../loopwatch/_hook_entry.py hook ...
    assert command[1:] == ["-S", str(_install.entry_script()), "hook", "opencode"]
    plugin = tmp_path / "loopwatch.mjs"
    plugin.write_text(render_plugin(command), encoding="utf-8")
    (tmp_path / "driver.mjs").write_text(driver, encoding="utf-8")
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


# A 1.x host whose tool.execute.before output carries `cancel` / `cancelReason` (a shape seen
# in an Effect-based test of OpenCode's, not in a release read here): the plugin sets them
# instead of throwing.
DRIVER_CANCEL = textwrap.dedent(
    """
    const plugin = (await import(process.argv[2])).default
    const hooks = await plugin.server({ directory: "/work/project", client: {} })
    const steps = []
    for (let index = 1; index <= 6; index++) {
      const input = { tool: "bash", sessionID: "ses_c", callID: "call_" + index }
      const output = { args: { command: "make test" }, cancel: false, cancelReason: undefined }
      try {
        await hooks["tool.execute.before"](input, output)
      } catch (error) {
        steps.push({ thrown: error.message })
        continue
      }
      if (output.cancel) {
        steps.push({ cancelled: output.cancelReason })
        continue
      }
      const after = { title: "make test", output: "FAILED test_login", metadata: {} }
      await hooks["tool.execute.after"](input, after)
      steps.push({ output: after.output })
    }
    console.log(JSON.stringify({ steps }))
    """
)


def assert_recorded(tmp_path: Path, *, outcomes: int) -> None:
    """What the hook stored for the plugin's scripted sessions: ``outcomes`` finished calls
    of the one looping call, one failure recorded as an error, the guard armed."""
    store = SqliteStore(tmp_path / "state" / "loopwatch" / "sessions.db")
    try:
        now = time.time()
        loop = store.history("opencode:ses_loop", now)
        failed = store.history("opencode:ses_fail", now)
        armed = store.guard_snapshot("opencode:ses_loop", None, now).armed
    finally:
        store.close()
    assert len([r for r in loop if r.result_hash is not None]) == outcomes
    assert len({r.args_hash for r in loop}) == 1
    assert len(failed) == 1 and failed[0].result_hash is not None
    assert failed[0].result_hash.startswith("error:")
    assert armed


@pytest.mark.node
def test_a_host_with_output_cancel_is_cancelled_not_thrown_at(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    steps = run_plugin(tmp_path, monkeypatch, driver=DRIVER_CANCEL)["steps"]
    cancelled = [s for s in steps if "cancelled" in s]
    assert cancelled and cancelled[0]["cancelled"].startswith("CRITICAL: Blocked call")
    assert not [s for s in steps if "thrown" in s]


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

    # Every allowed call has its outcome, the odd-numbered and even-numbered alike; the
    # failure is one record, an error (the repeated event is not counted twice).
    assert_recorded(tmp_path, outcomes=blocked[0])


@pytest.mark.node
def test_a_broken_hook_lets_every_call_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    result = run_plugin(tmp_path, monkeypatch, LOOPWATCH_STORE="nosuch://store")
    assert result["steps"] == [{"output": "FAILED test_login"}] * 6
    assert result["odd"] == "allowed"


# --- OpenCode 2.x ----------------------------------------------------------------------------
#
# A fake host shaped like OpenCode 2's, from anomalyco/opencode (v2 line, read 2026-12):
# - the loader (packages/core/src/plugin/module.ts @ 07db2b92) takes the module's default
#   export when it is {id: string, setup: function} (or {id, effect}); a default with only
#   {id, server} fails with "Plugin must export a default definition with an id and an effect
#   or setup function.";
# - setup(ctx) registers hooks with ctx.tool.hook(name, callback) -> Promise<{dispose}>
#   (packages/plugin/src/promise/tool.ts @ 196e4612, registration.ts);
# - the tool service (packages/core/src/tool.ts) triggers "execute.before" with
#   {tool, sessionID, agent, messageID, id, input} before the tool runs; the Promise adapter
#   (packages/plugin/src/promise/adapter.ts, attemptTool) turns a rejected callback into a
#   Tool.Error with its message, so the tool does not run, "execute.after" is not triggered
#   and the model gets the message as the tool's error;
# - after the tool it triggers "execute.after" with the same fields plus status "completed"
#   and result {output?, content: [{type: "text", text}], metadata?}, or status "error" and
#   error (a Tool.Error: {message}); the model is shown result.content
#   (normalizeContent in packages/core/src/tool/runtime.ts @ 0ad62326);
# - ctx.event.subscribe() is an async iterable of {id, type, created, data} events;
#   compaction is {type: "session.compacted", data: {sessionID}}
#   (packages/schema/src/session-compaction-event.ts, event.ts);
# - ctx.session.interrupt({sessionID}) stops a session.

DRIVER_V2 = textwrap.dedent(
    """
    const mod = await import(process.argv[2])
    const plugin = mod.default
    // The loader's check (module.ts): an id and a setup function on the default export.
    if (typeof plugin.id !== "string" || typeof plugin.setup !== "function") {
      console.log(JSON.stringify({ loaded: false }))
      process.exit(0)
    }
    const hooks = { "execute.before": [], "execute.after": [] }
    const interrupted = []
    let disposed = 0
    let compactions = []
    const ctx = {
      options: {},
      tool: {
        hook: async (name, callback) => {
          hooks[name].push(callback)
          return { dispose: async () => { disposed++ } }
        },
      },
      session: { interrupt: async (input) => { interrupted.push(input.sessionID) } },
      event: {
        subscribe: () => ({
          async *[Symbol.asyncIterator]() {
            for (const sessionID of compactions) {
              yield { id: "evt_1", type: "session.compacted", created: 0, data: { sessionID } }
            }
          },
        }),
      },
    }
    // What the tool service does for one call: the model sees either the error message or
    // the text of result.content.
    async function call(tool, sessionID, id, input, run) {
      const before = { tool, sessionID, agent: "build", messageID: "msg_" + id, id, input }
      try {
        for (const callback of hooks["execute.before"]) await callback(before)
      } catch (error) {
        return { blocked: error.message }
      }
      const outcome = run(before.input)
      const base = { ...before, input: before.input }
      const after = outcome.error
        ? { ...base, status: "error", error: { _tag: "Tool.Error", message: outcome.error } }
        : { ...base, status: "completed",
            result: { content: [{ type: "text", text: outcome.text }], metadata: {} } }
      for (const callback of hooks["execute.after"]) await callback(after)
      if (outcome.error) return { error: after.error.message }
      return { output: after.result.content.map((part) => part.text).join("\\n") }
    }
    const cleanup = await plugin.setup(ctx)
    const steps = []
    for (let index = 1; index <= 6; index++) {
      steps.push(await call("shell", "ses_loop", "call_" + index, { command: "make test" },
        () => ({ text: "FAILED test_login" })))
    }
    const failed = await call("read", "ses_fail", "call_f1", { filePath: "/nope" },
      () => ({ error: "ENOENT: /nope" }))
    const odd = await call("shell", "ses_odd", "c", { n: 10n }, () => ({ text: "ok" }))
    compactions = ["ses_loop"]
    await plugin.setup({ ...ctx, tool: undefined })  // a context without tools: nothing breaks
    const second = { ...ctx, tool: { hook: async () => ({ dispose: async () => {} }) } }
    await plugin.setup(second)
    await new Promise((resolve) => setTimeout(resolve, 1500))
    if (typeof cleanup === "function") await cleanup()
    // The same module must not also serve the 1.x API in this process.
    const v1 = await plugin.server({ client: {} })
    console.log(JSON.stringify({ loaded: true, id: plugin.id, steps, failed, odd, interrupted,
      disposed, v1Hooks: Object.keys(v1 || {}),
      registered: Object.keys(hooks).map((k) => hooks[k].length) }))
    """
)


def run_plugin_v2(tmp_path: Path, *flags: str, **env: str) -> dict[str, Any]:
    node = shutil.which("node")
    assert node, "the OpenCode plugin test needs node on PATH (deselect with -m 'not node')"
    plugin = tmp_path / "loopwatch.mjs"
    command = [*_install.hook_argv("opencode"), *flags]
    plugin.write_text(render_plugin(command), encoding="utf-8")
    (tmp_path / "driver.mjs").write_text(DRIVER_V2, encoding="utf-8")
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
def test_opencode_2_loads_the_plugin_and_it_blocks_and_warns(tmp_path: Path) -> None:
    result = run_plugin_v2(tmp_path)
    assert result["loaded"], "OpenCode 2's loader would reject the plugin (no setup)"
    assert result["id"] == "loopwatch"
    steps = result["steps"]
    assert steps[0] == {"output": "FAILED test_login"}
    blocked = [i for i, s in enumerate(steps) if "blocked" in s]
    assert blocked, steps
    assert steps[blocked[0]]["blocked"].startswith("CRITICAL: Blocked call")
    # A warning, when one comes before the block, follows the tool's own text.
    for step in steps[: blocked[0]]:
        assert step["output"] == "FAILED test_login" or step["output"].startswith(
            "FAILED test_login\n"
        ), step
    assert result["failed"] == {"error": "ENOENT: /nope"}
    assert result["odd"] == {"output": "ok"}
    assert result["interrupted"] == []
    # Its two hooks were registered once each, and disposed by the cleanup setup returned.
    assert result["registered"] == [1, 1]
    assert result["disposed"] == 2
    assert result["v1Hooks"] == []

    # OpenCode 2 reports a failed tool to execute.after itself: one record, an error; the
    # session.compacted event armed the post-compaction guard.
    assert_recorded(tmp_path, outcomes=blocked[0])


@pytest.mark.node
def test_opencode_2_with_a_broken_hook_lets_every_call_run(tmp_path: Path) -> None:
    result = run_plugin_v2(tmp_path, LOOPWATCH_STORE="nosuch://store")
    assert result["loaded"]
    assert result["steps"] == [{"output": "FAILED test_login"}] * 6
    assert result["failed"] == {"error": "ENOENT: /nope"}


@pytest.mark.node
def test_opencode_2_shows_the_model_a_warning_after_the_tool_text(tmp_path: Path) -> None:
    config = tmp_path / "warn-at-3.json5"
    config.write_text(
        "{loopwatch: {profile: 'adaptive', adaptive: {identicalStreak: {warn: 3, block: 4}}}}",
        encoding="utf-8",
    )
    result = run_plugin_v2(tmp_path, "--config", str(config))
    steps = result["steps"]
    assert steps[:2] == [{"output": "FAILED test_login"}] * 2
    # The third identical call runs; its result.content gets a text part after the tool's.
    first, warning = steps[2]["output"].split("\n", 1)
    assert first == "FAILED test_login"
    assert warning and "make test" not in warning
    assert "blocked" in steps[3] and steps[3]["blocked"].startswith("CRITICAL")
