// The node side of reference_diff.py: random traces replayed through OpenClaw's own code.
//
//   node reference_diff.mjs <spec.json>
//
// spec.json (written by reference_diff.py): {"modules": {name: [file, exportName]}, "kind":
// "functions" | "loopguard" | "merge", "inputs": [...]}. The modules are chunks of an
// installed openclaw package; the detection and post-compaction-guard chunks are copies that
// reference_diff.py wrote beside the originals, with extra exports and a logger that collects
// lines into globalThis.__lwLogs instead of printing them. Prints one JSON document: the
// output lines of each trace (the README of tests/data/spec_examples gives their fields), or
// the merged block of each merge case.

import { readFileSync } from "node:fs";
import { createHash } from "node:crypto";
import { pathToFileURL } from "node:url";

globalThis.__lwLogs = [];
const spec = JSON.parse(readFileSync(process.argv[2], "utf8"));
const fn = {};
for (const [name, [file, exported]] of Object.entries(spec.modules)) {
  const mod = await import(pathToFileURL(file).href);
  fn[name] = mod[exported];
  if (fn[name] === undefined) throw new Error(`${name}: ${exported} of ${file}`);
}

// The tags of the examples' values (README "Values") turned into the JS values they stand for.
function decode(value) {
  if (Array.isArray(value)) return value.map(decode);
  if (value === null || typeof value !== "object") return value;
  const keys = Object.keys(value);
  if (keys.length === 1) {
    const tag = keys[0];
    const inner = value[tag];
    if (tag === "$undefined") return undefined;
    if (tag === "$nan") return NaN;
    if (tag === "$inf") return inner > 0 ? Infinity : -Infinity;
    if (tag === "$negzero") return -0;
    if (tag === "$bytes") return new Uint8Array(Buffer.from(inner, "base64"));
  }
  const out = {};
  for (const key of keys) out[key] = decode(value[key]);
  return out;
}

function outcomeOf(step) {
  if ("error" in step) {
    const error = new Error(step.error);
    error.name = step.errorName || "Error";
    return { error };
  }
  if ("errorRaw" in step) return { error: decode(step.errorRaw) };
  if ("result" in step) return { result: decode(step.result) };
  return {};
}

function record(r) {
  if (!r) return null;
  const out = { toolName: r.toolName, argsHash: r.argsHash };
  for (const key of ["toolCallId", "runId", "resultHash", "unknownToolName"]) {
    if (r[key] !== undefined) out[key] = r[key];
  }
  return out;
}

const isObject = (v) => v !== null && typeof v === "object" && !Array.isArray(v);

// The functions driver's guard: built from the config as the README says (window from its
// postCompactionGuard, enabled unless the config's enabled is false).
function newGuard(config, enabled) {
  const guardConfig = isObject(config) ? config.postCompactionGuard : undefined;
  const on = enabled !== undefined ? enabled : !(isObject(config) && config.enabled === false);
  return fn.createPostCompactionLoopGuard(guardConfig, { enabled: on });
}

function runFunctions(trace) {
  let current = decode(trace.config);
  let state = {};
  let guard = newGuard(current);
  return trace.steps.map((step, i) => {
    globalThis.__lwLogs.length = 0;
    const op = step.op ?? "call";
    const out = { i, op };
    const config = "config" in step ? decode(step.config) : step.noConfig ? undefined : current;
    const runId = "runId" in step ? step.runId : trace.runId;
    const scope = { runId: runId === null ? undefined : runId };
    const args = "args" in step ? decode(step.args) : undefined;
    if (op === "detect") {
      out.verdict = JSON.parse(JSON.stringify(fn.detectToolCallLoop(state, step.tool, args, config, scope)));
    } else if (op === "recordCall") {
      fn.recordToolCall(state, step.tool, args, step.toolCallId, config, scope);
      out.historyLength = state.toolCallHistory.length;
    } else if (op === "recordOutcome") {
      const r = fn.recordToolCallOutcome(state, {
        toolName: step.tool, toolParams: args, toolCallId: step.toolCallId, config,
        runId: scope.runId, ...outcomeOf(step),
      });
      out.record = record(r);
      out.historyLength = (state.toolCallHistory ?? []).length;
      if (step.observeGuard && r && r.resultHash) {
        out.guard = guard.observe({ toolName: r.toolName, argsHash: r.argsHash, resultHash: r.resultHash });
      }
    } else if (op === "stringify") {
      const text = fn.stableStringify(decode(step.value));
      out.serialized = text;
      out.sha256 = createHash("sha256").update(text).digest("hex");
    } else if (op === "hash") {
      out.argsHash = fn.hashToolCall(step.tool, args);
      const o = outcomeOf(step);
      const hashed = fn.hashToolOutcome(step.tool, args, o.result, o.error);
      out.resultHash = hashed.resultHash ?? null;
      if (hashed.unknownToolName !== undefined) out.unknownToolName = hashed.unknownToolName;
    } else if (op === "setConfig") {
      current = decode(step.value);
      out.config = step.value;
    } else if (op === "clearHistory") {
      state = {};
    } else if (op === "history") {
      out.history = (state.toolCallHistory ?? []).map(record);
    } else if (op === "arm" || op === "compaction") {
      guard.armPostCompaction();
      out.guardSnapshot = guard.snapshot();
    } else if (op === "observe") {
      out.guard = guard.observe({ toolName: step.toolName, argsHash: step.argsHash, resultHash: step.resultHash });
      if (out.guard.shouldAbort) out.error = "PostCompactionLoopPersistedError";
    } else if (op === "guardSnapshot") {
      out.guardSnapshot = guard.snapshot();
    } else if (op === "newGuard") {
      const base = isObject(current) ? { ...current } : {};
      if ("guardConfig" in step) base.postCompactionGuard = decode(step.guardConfig);
      guard = newGuard(base, "enabled" in step ? decode(step.enabled) : undefined);
    } else {
      throw new Error(`unknown op ${op}`);
    }
    if (globalThis.__lwLogs.length) out.logs = globalThis.__lwLogs.map((line) => ({ ...line }));
    return out;
  });
}

// OpenClaw's before_tool_call wiring (runBeforeToolCallHook: detection, the warning buckets,
// the block, recordToolCall) and the outcome it records after the tool ran (recordLoopOutcome
// calls recordToolCallOutcome with these fields). "warn" vs "warn-suppressed" is read off the
// session's warning buckets: the wiring sets one exactly when it emits.
let sessions = 0;
async function runLoopguard(trace) {
  const config = decode(trace.config);
  const sessionKey = `agent:main:reference-diff-${process.pid}-${sessions++}`;
  const runtime = fn.beforeToolCallRuntime;
  const out = [];
  for (const [i, step] of trace.steps.entries()) {
    const runId = ("runId" in step ? step.runId : trace.runId) ?? undefined;
    const tool = fn.normalizeToolName(step.tool || "tool");
    const args = "args" in step ? decode(step.args) : undefined;
    const toolCallId = step.toolCallId ?? `${tool}-${i}`;
    const state = runtime.getDiagnosticSessionState({ sessionKey });
    const verdict = runtime.detectToolCallLoop(state, tool, args, config, runId ? { runId } : undefined);
    const buckets = () => JSON.stringify([...(state.toolLoopWarningBuckets ?? new Map())]);
    const before = buckets();
    const decided = await fn.runBeforeToolCallHook({
      toolName: step.tool, params: args, toolCallId, ctx: { sessionKey, runId, loopDetection: config },
    });
    const line = { i, op: "call", tool, verdict: JSON.parse(JSON.stringify(verdict)) };
    if (decided.blocked) {
      line.action = "block";
      line.outcome = null;
    } else {
      line.action = verdict.stuck ? (buckets() !== before ? "warn" : "warn-suppressed") : "allow";
      line.outcome = step.noOutcome ? null : record(runtime.recordToolCallOutcome(state, {
        toolName: tool, toolParams: args, toolCallId, config, ...outcomeOf(step), ...(runId && { runId }),
      }));
    }
    out.push(line);
  }
  return out;
}

let result;
if (spec.kind === "functions") result = spec.inputs.map(runFunctions);
else if (spec.kind === "loopguard") {
  result = [];
  for (const trace of spec.inputs) result.push(await runLoopguard(trace));
} else if (spec.kind === "merge") {
  result = spec.inputs.map(([cfg, agentId]) => {
    const merged = fn.resolveToolLoopDetectionConfig({ cfg, agentId: agentId ?? undefined });
    return merged === undefined ? null : merged;
  });
} else throw new Error(`unknown kind ${spec.kind}`);
process.stdout.write(JSON.stringify(result));
