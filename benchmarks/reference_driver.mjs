// The node side of bench_reference_node.py: OpenClaw's own loop detection, timed per pass.
//
//   node reference_driver.mjs <spec.json>
//
// spec.json (written by bench_reference_node.py): {"calls": [...], "exports": {name: [file,
// alias]}, "config": {...}}. The exports are the functions of an installed openclaw package
// found by name in its dist chunks. Then one command a line on stdin, one JSON line back:
//   "run"    one pass over the calls in a fresh session; replies {"cpu_ns", "wall_ns", "n"}
//   "run fresh"  the same on new copies of the values (a JSON round trip, untimed)
//   "check"  one pass; replies {"actions": [...]} (allow / warn / block per call)
//   "quit"
//
// One call is what OpenClaw's before_tool_call / after-tool wiring does for it
// (agent-tools.before-tool-call*.js): look the session state up
// (getDiagnosticSessionState), normalizeToolName (bash -> exec), detectToolCallLoop; a critical verdict blocks (no record, the
// outcome is the veto result); a warning goes through the warning buckets (the wiring's
// shouldEmitLoopWarning, not exported: the same 8 lines re-written below); recordToolCall;
// then, after the tool ran, the session lookup again and recordToolCallOutcome. The logging
// the wiring does around a verdict (log.warn / logToolLoopAction) is left out: a healthy
// call has none, and loopwatch's listeners are empty here too. CPU time is
// process.cpuUsage() (user + system, every thread of the process: V8's GC and compiler
// helper threads included).

import { readFileSync } from "node:fs";
import { createInterface } from "node:readline";
import { pathToFileURL } from "node:url";

const LOOP_WARNING_BUCKET_SIZE = 10; // as in the wiring
const MAX_LOOP_WARNING_KEYS = 256;

const spec = JSON.parse(readFileSync(process.argv[2], "utf8"));
const fns = {};
for (const [name, [file, alias]] of Object.entries(spec.exports)) {
  const mod = await import(pathToFileURL(file).href);
  fns[name] = mod[alias];
  if (typeof fns[name] !== "function") throw new Error(`${name}: ${alias} of ${file}`);
}
const { detectToolCallLoop, recordToolCall, recordToolCallOutcome, normalizeToolName } = fns;
const getState = fns.getDiagnosticSessionState;
const config = spec.config;
// The corpus records a missing result or error as null: undefined for OpenClaw.
const calls = spec.calls.map((c, i) => ({
  tool: c.tool,
  args: c.args,
  result: c.result === null ? undefined : c.result,
  error: c.error === null ? undefined : c.error,
  id: `c${i}`,
}));

function shouldEmitLoopWarning(state, warningKey, count) {
  if (!state.toolLoopWarningBuckets) state.toolLoopWarningBuckets = new Map();
  const bucket = Math.floor(count / LOOP_WARNING_BUCKET_SIZE);
  if (bucket <= (state.toolLoopWarningBuckets.get(warningKey) ?? 0)) return false;
  state.toolLoopWarningBuckets.set(warningKey, bucket);
  if (state.toolLoopWarningBuckets.size > MAX_LOOP_WARNING_KEYS) {
    const oldest = state.toolLoopWarningBuckets.keys().next().value;
    if (oldest) state.toolLoopWarningBuckets.delete(oldest);
  }
  return true;
}

let passNo = 0;
let emitted = 0; // warnings the buckets let through (kept so the work is not optimised out)

function pass(actions, list) {
  passNo += 1;
  const ref = { sessionKey: `bench-${process.pid}-${passNo}` };
  const plain = {};
  for (const c of list) {
    const tool = normalizeToolName(c.tool || "tool"); // bash -> exec, as the wiring does
    const state = getState ? getState(ref) : plain;
    const verdict = detectToolCallLoop(state, tool, c.args, config, undefined);
    let result = c.result;
    let error = c.error;
    let action = "allow";
    if (verdict.stuck && verdict.level === "critical") {
      action = "block";
      result = {
        content: [{ type: "text", text: verdict.message }],
        details: { status: "blocked", deniedReason: "tool-loop" },
      };
      error = undefined;
    } else {
      if (verdict.stuck) {
        // loopwatch's Decision is "warn" for a suppressed warning too (emitted: false)
        action = "warn";
        const key = verdict.warningKey ?? `${verdict.detector}:${tool}`;
        emitted += shouldEmitLoopWarning(state, key, verdict.count) ? 1 : 0;
      }
      recordToolCall(state, tool, c.args, c.id, config, undefined);
    }
    recordToolCallOutcome(getState ? getState(ref) : plain, {
      toolName: tool,
      toolParams: c.args,
      toolCallId: c.id,
      result,
      error,
      config,
    });
    if (actions) actions.push(action);
  }
}

const rl = createInterface({ input: process.stdin });
for await (const line of rl) {
  const cmd = line.trim();
  if (cmd === "run" || cmd === "run fresh") {
    // fresh: new copies of every value, made untimed, as a real tool call brings
    const list = cmd === "run" ? calls : JSON.parse(JSON.stringify(calls));
    const wall = process.hrtime.bigint();
    const cpu = process.cpuUsage();
    pass(null, list);
    const used = process.cpuUsage(cpu);
    const wallNs = Number(process.hrtime.bigint() - wall);
    const cpuNs = (used.user + used.system) * 1000;
    process.stdout.write(`${JSON.stringify({ cpu_ns: cpuNs, wall_ns: wallNs, n: calls.length })}\n`);
  } else if (cmd === "check") {
    const actions = [];
    pass(actions, calls);
    process.stdout.write(`${JSON.stringify({ actions, emitted })}\n`);
  } else if (cmd === "quit") {
    break;
  }
}
process.exit(0);
