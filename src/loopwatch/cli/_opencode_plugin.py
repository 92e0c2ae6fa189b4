"""The OpenCode plugin that ``loopwatch install opencode`` writes (one JavaScript file).

OpenCode (anomalyco/opencode) auto-loads ``*.ts`` / ``*.js`` files from ``.opencode/plugins/``
and ``~/.config/opencode/plugins/``. A file plugin must default-export ``{id, server}``
(``readV1Plugin`` / ``resolvePluginId`` in ``packages/opencode/src/plugin/shared.ts``: "Path
plugin ... must export id"); the legacy loader accepts the same object (it takes any export
with a ``server`` function), so one default export works for both and nothing registers twice.

The plugin runs ``loopwatch hook opencode`` per event and speaks the protocol of
:mod:`loopwatch.hooks.opencode` (one protocol, defined there): it sends ``{"event", "input",
"output"}`` — the OpenCode hook's name and its own two arguments — plus ``args`` when the
after-event's input lacks them (kept by ``callID`` from the before-event) and ``error`` for a
failed tool. OpenCode calls ``tool.execute.after`` for successful tools only; a failure shows
as a ``message.part.updated`` event whose tool part has ``state.status: "error"``, which the
plugin forwards as a ``tool.execute.after`` with ``error`` (once per call, and never for a
call loopwatch itself blocked). ``session.compacted`` events and the
``experimental.session.compacting`` hook arm the post-compaction guard.

It reads back ``{"action": "allow" | "block" | "abort", "message", "warning"}``: ``block``
throws from ``tool.execute.before`` (OpenCode hands the error text to the model), ``warning``
is appended to the tool's output, ``abort`` appends the message and asks OpenCode to abort
the session. Anything else — the hook missing, slow, crashing or answering garbage, an
argument JSON cannot encode — lets the call run (fail-open).
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
// Runs `loopwatch hook opencode` for each tool call, failure and compaction, with one JSON
// event on stdin: {event, input, output[, args][, error]}. It answers
// {action: "allow" | "block" | "abort", message, warning}. A block throws from
// tool.execute.before: OpenCode returns the error text to the model. Any failure of the hook
// lets the call run (fail-open).
import { spawn } from "node:child_process"

const COMMAND = __COMMAND__
const TIMEOUT_MS = __TIMEOUT__
const MAX_REMEMBERED = 4096

function runHook(event) {
  return new Promise((resolve) => {
    let body
    try {
      body = JSON.stringify(event)
    } catch {
      resolve(null)
      return
    }
    let child
    try {
      child = spawn(COMMAND[0], COMMAND.slice(1), { stdio: ["pipe", "pipe", "ignore"] })
    } catch {
      resolve(null)
      return
    }
    let stdout = ""
    const timer = setTimeout(() => child.kill("SIGKILL"), TIMEOUT_MS)
    child.stdout.on("data", (chunk) => {
      stdout += chunk
    })
    child.on("error", () => {
      clearTimeout(timer)
      resolve(null)
    })
    child.on("close", (code) => {
      clearTimeout(timer)
      resolve(code === 0 ? parse(stdout) : null)
    })
    child.stdin.on("error", () => {})
    child.stdin.end(body)
  })
}

function parse(text) {
  try {
    const value = JSON.parse(text)
    return value && typeof value === "object" ? value : null
  } catch {
    return null
  }
}

function remember(map, key, value) {
  map.set(key, value)
  if (map.size > MAX_REMEMBERED) map.delete(map.keys().next().value)
}

async function server(input) {
  const client = input && input.client
  const argsByCall = new Map()
  const settled = new Map()

  async function abort(sessionID) {
    try {
      await client.session.abort({ path: { id: sessionID } })
    } catch {}
  }

  function appendTo(output, text) {
    if (!output || typeof text !== "string" || !text) return
    const before = typeof output.output === "string" ? output.output : ""
    output.output = before ? before + "\\n\\n" + text : text
  }

  async function after(hook, output, error) {
    const event = { event: "tool.execute.after", input: hook, output: {} }
    if (output) event.output = { title: output.title, output: output.output }
    if (hook.args === undefined && argsByCall.has(hook.callID)) {
      event.args = argsByCall.get(hook.callID)
    }
    if (error !== undefined) event.error = error
    argsByCall.delete(hook.callID)
    return await runHook(event)
  }

  return {
    "tool.execute.before": async (hook, output) => {
      const args = output ? output.args : undefined
      remember(argsByCall, hook.callID, args)
      const answer = await runHook({ event: "tool.execute.before", input: hook, output: { args } })
      if (answer && answer.action === "block") {
        remember(settled, hook.callID, true)
        argsByCall.delete(hook.callID)
        throw new Error(String(answer.message || "loopwatch blocked this tool call"))
      }
    },
    "tool.execute.after": async (hook, output) => {
      remember(settled, hook.callID, true)
      const answer = await after(hook, output)
      if (!answer) return
      if (answer.action === "abort") {
        appendTo(output, answer.message)
        await abort(hook.sessionID)
      }
      appendTo(output, answer.warning)
    },
    "experimental.session.compacting": async (hook) => {
      await runHook({ event: "experimental.session.compacting", input: hook, output: {} })
    },
    event: async ({ event }) => {
      if (!event || typeof event !== "object") return
      const props = event.properties || {}
      if (event.type === "session.compacted" && props.sessionID) {
        await runHook({ event: "session.compacted", input: { sessionID: props.sessionID } })
        return
      }
      const part = props.part
      if (event.type !== "message.part.updated" || !part || part.type !== "tool") return
      const state = part.state || {}
      if (state.status !== "error" || settled.has(part.callID)) return
      remember(settled, part.callID, true)
      const hook = { tool: part.tool, sessionID: part.sessionID, callID: part.callID }
      if (state.input !== undefined) hook.args = state.input
      const answer = await after(hook, undefined, String(state.error || "tool failed"))
      if (answer && answer.action === "abort") await abort(part.sessionID)
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
