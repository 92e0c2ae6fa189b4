"""The OpenCode plugin that ``loopwatch install opencode`` writes (one JavaScript file).

OpenCode auto-loads ``*.ts`` / ``*.js`` files from ``.opencode/plugins/`` and
``~/.config/opencode/plugins/`` — 1.x and 2.x alike (2.x: ``{plugin,plugins}/`` under every
config directory, ``packages/core/src/plugin/source-directory.ts``). The two lines have
different plugin APIs, and one default export ``{id, server, setup}`` serves both:

- OpenCode 1.x (``@opencode-ai/plugin``, ``packages/plugin/src/index.ts`` @ ``0d4d22f4``)
  takes a default export with a ``server`` function (``readV1Plugin`` in
  ``packages/opencode/src/plugin/shared.ts``; a path plugin "must export id") and calls
  ``server(input)`` for the hooks ``tool.execute.before(input: {tool, sessionID, callID},
  output: {args})`` (throwing blocks the call, the error text goes to the model) and
  ``tool.execute.after(input, output: {title, output, metadata})`` — called for successful
  tools only; a failure shows as a ``message.part.updated`` event whose tool part has
  ``state.status: "error"``, which the plugin forwards as a ``tool.execute.after`` with
  ``error`` (once per call, never for a call loopwatch blocked). ``session.compacted``
  events and ``experimental.session.compacting`` arm the post-compaction guard. Should a
  host pass ``output.cancel`` (seen in a test, in no release read), the plugin sets
  ``cancel``/``cancelReason`` instead of throwing.
- OpenCode 2.x (``@opencode/plugin``) rejects a module without ``setup``: its loader
  (``packages/core/src/plugin/module.ts``) decodes the default export as ``{id, setup}`` or
  ``{id, effect}``. ``setup(ctx)`` registers ``ctx.tool.hook("execute.before", cb)`` —
  ``cb({tool, sessionID, agent, messageID, id, input})``, a rejection becomes a
  ``Tool.Error`` that stops the call and reaches the model — and ``"execute.after"`` —
  ``{..., status: "completed", result: {output?, content, metadata?}}`` or ``{..., status:
  "error", error}``, failures included; the model is shown ``result.content``, to which a
  warning is added as a text part. Compaction is a ``session.compacted`` event on
  ``ctx.event.subscribe()``; an abort is ``ctx.session.interrupt({sessionID})``. ``setup``
  returns a cleanup that disposes the registrations.

A module that served one API registers nothing for the other, so a host offering both
cannot count a call twice. Either way the plugin runs ``loopwatch hook opencode`` per event
and speaks the protocol of :mod:`loopwatch.hooks.opencode` (one protocol, defined there,
the 2.x events translated to it): it sends ``{"event", "input", "output"}`` plus ``args``
when the after-event's input lacks them (kept by ``callID`` from the before-event) and
``error`` for a failed tool, and reads back ``{"action": "allow" | "block" | "abort",
"message", "warning"}``. Anything else — the hook missing, slow, crashing or answering
garbage, an argument JSON cannot encode — lets the call run (fail-open).
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
// {action: "allow" | "block" | "abort", message, warning}. A block rejects the call
// (OpenCode returns the message to the model), a warning is appended to the tool's result.
// Any failure of the hook lets the call run (fail-open).
//
// One default export serves both plugin APIs: OpenCode 1.x runs `server` (hooks returned
// as an object), OpenCode 2.x runs `setup` (hooks registered on the context).
import { spawn } from "node:child_process"

const COMMAND = __COMMAND__
const TIMEOUT_MS = __TIMEOUT__
const MAX_REMEMBERED = 4096

// Which API this module instance serves: a host that offered both must not count each
// call twice.
let api = null

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

function blockMessage(answer) {
  return String(answer.message || "loopwatch blocked this tool call")
}

function joined(before, text) {
  return before ? before + "\\n\\n" + text : text
}

// --- OpenCode 1.x: server(input) returns the hooks -----------------------------------------

async function server(input) {
  if (api === "v2") return {}
  api = "v1"
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
    output.output = joined(typeof output.output === "string" ? output.output : "", text)
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
        const message = blockMessage(answer)
        // A host whose output carries `cancel` cancels that way; the others (1.x as
        // released) take a thrown error as the block.
        if (output && typeof output === "object" && "cancel" in output) {
          output.cancel = true
          output.cancelReason = message
          return
        }
        throw new Error(message)
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

// --- OpenCode 2.x: setup(ctx) registers the hooks --------------------------------------------
//
// ctx.tool.hook("execute.before", cb): cb({tool, sessionID, agent, messageID, id, input});
// a rejected cb rejects the call with its message. ctx.tool.hook("execute.after", cb):
// cb({..., input, status: "completed", result: {output?, content, metadata?}}) or
// cb({..., status: "error", error: {message}}); the model is shown result.content.

function textOf(result) {
  if (!result || typeof result !== "object") return ""
  const content = result.content
  if (typeof content === "string") return content
  if (Array.isArray(content) && content.length) {
    return content
      .filter((part) => part && part.type === "text" && typeof part.text === "string")
      .map((part) => part.text)
      .join("\\n")
  }
  if (typeof result.output === "string") return result.output
  try {
    return result.output === undefined ? "" : JSON.stringify(result.output)
  } catch {
    return ""
  }
}

function appendResult(result, text) {
  if (!result || typeof result !== "object" || typeof text !== "string" || !text) return
  const content = result.content
  if (typeof content === "string") {
    result.content = joined(content, text)
  } else if (Array.isArray(content) && content.length) {
    result.content = [...content, { type: "text", text }]
  } else {
    // No content: OpenCode would show the output; keep showing it, then the warning.
    const shown = textOf(result)
    const warning = { type: "text", text }
    result.content = shown ? [{ type: "text", text: shown }, warning] : [warning]
  }
}

async function setup(ctx) {
  if (api === "v1") return
  const tool = ctx && ctx.tool
  if (!tool || typeof tool.hook !== "function") return
  api = "v2"
  const registrations = []
  const stop = new AbortController()

  async function interrupt(sessionID) {
    try {
      await ctx.session.interrupt({ sessionID })
    } catch {}
  }

  async function register(name, callback) {
    try {
      const registration = await tool.hook(name, callback)
      if (registration) registrations.push(registration)
    } catch {}
  }

  await register("execute.before", async (event) => {
    if (!event || typeof event !== "object") return
    const hook = { tool: event.tool, sessionID: event.sessionID, callID: event.id }
    const output = { args: event.input }
    const answer = await runHook({ event: "tool.execute.before", input: hook, output })
    if (answer && answer.action === "block") throw new Error(blockMessage(answer))
  })

  await register("execute.after", async (event) => {
    if (!event || typeof event !== "object") return
    const hook = { tool: event.tool, sessionID: event.sessionID, callID: event.id }
    hook.args = event.input
    const message = { event: "tool.execute.after", input: hook, output: {} }
    const failed = event.status === "error"
    if (failed) {
      const error = event.error
      message.error = String((error && error.message) || error || "tool failed")
    } else {
      message.output = { output: textOf(event.result) }
    }
    const answer = await runHook(message)
    if (!answer) return
    if (answer.action === "abort") {
      if (!failed) appendResult(event.result, answer.message)
      await interrupt(event.sessionID)
    }
    if (!failed) appendResult(event.result, answer.warning)
  })

  watch(ctx, stop.signal)

  return async () => {
    stop.abort()
    for (const registration of registrations) {
      try {
        await registration.dispose()
      } catch {}
    }
  }
}

// A compaction arms the post-compaction guard: OpenCode 2.x reports it as a
// `session.compacted` event ({type, data: {sessionID}}) on ctx.event.subscribe().
function watch(ctx, signal) {
  let events
  try {
    const source = ctx.event
    events = source && typeof source.subscribe === "function" ? source.subscribe({ signal }) : null
  } catch {
    return
  }
  if (!events || typeof events[Symbol.asyncIterator] !== "function") return
  let iterator
  try {
    iterator = events[Symbol.asyncIterator]()
  } catch {
    return
  }
  signal.addEventListener("abort", () => {
    try {
      if (typeof iterator.return === "function") Promise.resolve(iterator.return()).catch(() => {})
    } catch {}
  })
  ;(async () => {
    while (!signal.aborted) {
      const step = await iterator.next()
      if (!step || step.done) break
      const event = step.value
      if (!event || event.type !== "session.compacted") continue
      const data = event.data || event.properties || {}
      if (!data.sessionID) continue
      await runHook({ event: "session.compacted", input: { sessionID: data.sessionID } })
    }
  })().catch(() => {})
}

export default { id: "loopwatch", server, setup }
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
