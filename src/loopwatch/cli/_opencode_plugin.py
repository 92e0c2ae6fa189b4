"""The OpenCode plugin that ``loopwatch install opencode`` writes (one JavaScript file).

OpenCode (anomalyco/opencode) auto-loads ``*.ts`` / ``*.js`` files from ``.opencode/plugins/``
and ``~/.config/opencode/plugins/``. A file plugin must default-export ``{id, server}``
(``readV1Plugin`` / ``resolvePluginId`` in ``packages/opencode/src/plugin/shared.ts``: "Path
plugin ... must export id"); the legacy loader accepts the same object (it takes any export
with a ``server`` function), so one default export works for both and nothing registers twice.

The plugin runs ``loopwatch hook opencode`` per event, with one JSON object on stdin
(``hook_event_name`` = OpenCode's hook name, ``session_id``, ``tool_name``, ``tool_use_id``,
``tool_input``, and ``tool_response`` after the call). It understands the hook's answer in the
shapes the other agents use: exit 2 (stderr = reason), ``decision: "block"|"deny"`` +
``reason``, ``hookSpecificOutput.permissionDecision: "deny"``, or ``continue: false`` block
the call (``tool.execute.before`` throws, and OpenCode hands the error text to the model);
``additionalContext`` (top level or in ``hookSpecificOutput``) or ``systemMessage`` after the
call is appended to the tool's output. Any failure of the hook lets the call run (fail-open).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Final

#: The first line of every file loopwatch writes: uninstall removes only such files.
PLUGIN_MARKER: Final = "// loopwatch-managed: written by `loopwatch install opencode`"
#: The plugin's file name inside the plugins directory.
PLUGIN_FILE_NAME: Final = "loopwatch.js"
#: Milliseconds a hook process may take before the plugin gives up on it (and allows).
PLUGIN_TIMEOUT_MS: Final = 30000

_TEMPLATE: Final = """__MARKER__
// (`loopwatch uninstall opencode` removes this file). Do not edit: reinstall instead.
//
// Runs `loopwatch hook opencode` for each tool call and compaction, with one JSON event on
// stdin. A block throws from tool.execute.before: OpenCode returns the error to the model.
// Any failure of the hook lets the call run (fail-open).
import { spawn } from "node:child_process"

const COMMAND = __COMMAND__
const TIMEOUT_MS = __TIMEOUT__
const BLOCKED = "loopwatch blocked this tool call"

function runHook(event) {
  return new Promise((resolve) => {
    let child
    try {
      child = spawn(COMMAND[0], COMMAND.slice(1), { stdio: ["pipe", "pipe", "pipe"] })
    } catch {
      resolve(null)
      return
    }
    let stdout = ""
    let stderr = ""
    const timer = setTimeout(() => child.kill("SIGKILL"), TIMEOUT_MS)
    child.stdout.on("data", (chunk) => {
      stdout += chunk
    })
    child.stderr.on("data", (chunk) => {
      stderr += chunk
    })
    child.on("error", () => {
      clearTimeout(timer)
      resolve(null)
    })
    child.on("close", (code) => {
      clearTimeout(timer)
      resolve({ code, stdout, stderr })
    })
    child.stdin.on("error", () => {})
    child.stdin.end(JSON.stringify(event))
  })
}

function parse(text) {
  try {
    const value = JSON.parse(text)
    return value && typeof value === "object" ? value : {}
  } catch {
    return {}
  }
}

function specificOf(out) {
  const value = out.hookSpecificOutput
  return value && typeof value === "object" ? value : {}
}

// The reason to block with, or null to let the call run.
function blockReason(answer) {
  if (!answer) return null
  if (answer.code === 2) return answer.stderr.trim() || BLOCKED
  if (answer.code !== 0) return null
  const out = parse(answer.stdout)
  const specific = specificOf(out)
  if (out.decision === "block" || out.decision === "deny") return String(out.reason || BLOCKED)
  if (specific.permissionDecision === "deny") {
    return String(specific.permissionDecisionReason || BLOCKED)
  }
  if (out.continue === false) return String(out.stopReason || out.reason || BLOCKED)
  return null
}

// Text for the model after the call, or null.
function contextOf(answer) {
  if (!answer || answer.code !== 0) return null
  const out = parse(answer.stdout)
  const specific = specificOf(out)
  const text =
    specific.additionalContext || out.additionalContext || out.reason || out.systemMessage
  return typeof text === "string" && text ? text : null
}

async function server(input) {
  const cwd = input && typeof input.directory === "string" ? input.directory : undefined
  return {
    "tool.execute.before": async (hook, output) => {
      const answer = await runHook({
        hook_event_name: "tool.execute.before",
        session_id: hook.sessionID,
        tool_name: hook.tool,
        tool_use_id: hook.callID,
        tool_input: output ? output.args : undefined,
        cwd,
      })
      const reason = blockReason(answer)
      if (reason) throw new Error(reason)
    },
    "tool.execute.after": async (hook, output) => {
      const answer = await runHook({
        hook_event_name: "tool.execute.after",
        session_id: hook.sessionID,
        tool_name: hook.tool,
        tool_use_id: hook.callID,
        tool_input: hook.args,
        tool_response: output ? { title: output.title, output: output.output } : undefined,
        cwd,
      })
      const text = contextOf(answer)
      if (text && output) {
        const before = typeof output.output === "string" ? output.output : ""
        output.output = before ? before + "\\n\\n" + text : text
      }
    },
    "experimental.session.compacting": async (hook) => {
      await runHook({
        hook_event_name: "experimental.session.compacting",
        session_id: hook.sessionID,
        cwd,
      })
    },
  }
}

export default { id: "loopwatch", server }
"""


def render_plugin(command: Sequence[str]) -> str:
    """The plugin's source, running ``command`` (an argv list, no shell) for each event."""
    return (
        _TEMPLATE.replace("__MARKER__", PLUGIN_MARKER)
        .replace("__COMMAND__", json.dumps(list(command), ensure_ascii=False))
        .replace("__TIMEOUT__", str(PLUGIN_TIMEOUT_MS))
    )


def is_ours(text: str) -> bool:
    """Whether a plugin file was written by loopwatch (its first line is the marker)."""
    return text.startswith(PLUGIN_MARKER)
