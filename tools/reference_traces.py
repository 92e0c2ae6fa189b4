"""Random traces in the format of ``tests/data/spec_examples`` (its README), for reference_diff.

Aimed at the corners where a re-implementation drifts: values the stable stringify must
print as JavaScript does (key order by UTF-16 units, lone surrogates, ``-0``, exponents,
``undefined`` in arrays, bytes), configs the lenient resolution must read as OpenClaw does
(strings, floats, ``0``, ``NaN`` thresholds, truthy detector flags), the exec / process /
messaging outcome hashes, unknown-tool errors, run ids with blanks, tool-call ids that match
or not, the post-compaction guard, and (loopguard traces) tool-name variants and the wiring's
warning buckets.

Integers stay within ±2^53: beyond that the reference rounds to the nearest double, a
documented divergence (SPEC §8.1). Loopguard traces never reuse a tool-call id after a call
whose outcome never came (``noOutcome``): loopwatch then reads the second call as the same
call seen by a second layer of the host (README "Adapters"), which OpenClaw has no notion of.
"""

from __future__ import annotations

import base64
import random
from typing import Any

STRINGS = (
    *("", " ", "a", "make test", "ls -la", "é", "\u00ad", "\u2028", "\U0001f600", "\ud800"),
    *("\udc00x", "\uffff", "\U0002000b", "\x00", "\x1f", "\t\n", "ünïcödé", "Z", "z", "_"),
    *("-", "0", "10", "1e3", '"q"', "\\", "/", "<tag>", "\u0301", "İ", "ß", "ﬁ"),
)
NUMBERS: tuple[Any, ...] = (
    *(0, 1, -1, 7, 2**31, 2**53, 2**53 - 1, -(2**53), 1.0, -1.0, 0.5, 0.1 + 0.2, 1e21, 1e-7),
    *(1e-6, 5e-324, 1.7976931348623157e308, 123.456, -0.0001, 1e16, 12345678.9, 100.0, 2.5e-8),
    *({"$nan": True}, {"$inf": 1}, {"$inf": -1}, {"$negzero": True}, 3.0e20, 4.35, 0.000001),
)
KEYS = (
    *("a", "b", "A", "B", "_", "1", "10", "2", "01", "é", "\uffff", "\U0001f600", "\U0002000b"),
    *("", " ", "z", "aa", "ab", "a b", "e\u0301", "constructor", "toString", "length"),
    *("command", "action", "status", "id", "text", "type", "content", "details"),
)
ERRORS = (
    *("Unknown tool: foo_bar", 'unknown tool "Read.File"', "Tool 'x-y' not found"),
    *("tool zz is not available", "boom", "", "  ", "UNKNOWN TOOL:   ABC", "unknown tool:"),
    *("Tool   q not found", "ünknown tool: x"),
)
RAW_ERRORS: tuple[Any, ...] = (
    *(None, "unknown tool: s", 0, 1.5, True, False, {"message": "unknown tool: m"}, 1e21),
    *(["unknown tool: l"], {"$undefined": True}, {"$nan": True}, "", {"$bytes": "AAE="}, -0.5),
    {"a": {"$undefined": True}},
)
SAME_RESULT = {"content": [{"type": "text", "text": "same"}], "details": {"status": "completed"}}


def text(r: random.Random) -> str:
    if r.random() < 0.7:
        return r.choice(STRINGS)
    return "".join(r.choice(STRINGS) for _ in range(r.randint(1, 4)))


def value(r: random.Random, depth: int = 0) -> Any:
    """Any value of the examples' tagged JSON, nested up to four levels."""
    k = r.random()
    if depth > 3 or k < 0.35:
        leaves = (
            lambda: text(r),
            lambda: r.choice(NUMBERS),
            lambda: r.choice((True, False, None, {"$undefined": True})),
            lambda: {"$bytes": base64.b64encode(r.randbytes(r.randint(0, 5))).decode()},
        )
        return r.choice(leaves)()
    if k < 0.65:
        return [value(r, depth + 1) for _ in range(r.randint(0, 4))]
    return {r.choice(KEYS): value(r, depth + 1) for _ in range(r.randint(0, 4))}


def result(r: random.Random) -> Any:
    """A tool result: exec / process details, a send result with volatile ids, or anything."""
    k = r.random()
    texts = [{"type": "text", "text": r.choice(["ok", "same", f"v{r.randint(0, 2)}", " p ", ""])}]
    if k < 0.25:
        details = {
            "status": r.choice(
                ["running", "completed", "failed", "approval-pending", "blocked", "x", 3, None]
            ),
            "exitCode": r.choice([0, 1, "0", None, 2.0, {"$undefined": True}]),
            "timedOut": r.choice([True, False, "true"]),
            "aggregated": r.choice(["out", "  ", "", None, 5]),
            "tail": r.choice(["t", None, 1]),
            "reason": r.choice(["r", None]),
            "command": r.choice(["c", None]),
            "warningText": r.choice(["w", 1]),
            "exitSignal": r.choice([None, "SIGTERM"]),
            "totalLines": r.choice([1, 2, None]),
            "truncated": r.choice([True, None]),
            "deniedReason": r.choice(["tool-loop", "other"]),
        }
        kept = {key: v for key, v in details.items() if r.random() < 0.6}
        extra = [{"type": "image"}] if r.random() < 0.2 else []
        return {"content": texts + extra, "details": kept}
    if k < 0.35:
        nested = [{"message_id": 1, "keep": r.randint(0, 1)}]
        volatile = {"messageId": r.randint(0, 3), "ts": r.random(), "id": f"m{r.randint(0, 2)}"}
        details = {**volatile, "text": "hi", "direction": "out", "n": nested}
        return {"content": texts, "details": details}
    if k < 0.45:
        return {"content": "not a list", "details": [1]}
    if k < 0.55:
        return value(r)
    if k < 0.6:
        return {"$undefined": True}
    return {"content": texts, "details": {"status": "completed", "n": r.randint(0, 1)}}


def outcome(r: random.Random, step: dict[str, Any], steady: bool) -> None:
    """Give the step an error (text or raw) or a result; ``steady`` favours one result."""
    k = r.random()
    if k < 0.1:
        step["error"] = r.choice(ERRORS)
        if r.random() < 0.4:
            step["errorName"] = r.choice(["TypeError", "Error", "", "Custom"])
    elif k < 0.2:
        step["errorRaw"] = r.choice(RAW_ERRORS)
    elif steady and k < 0.65:
        step["result"] = SAME_RESULT
    elif r.random() > 0.02:  # else no result at all: undefined
        step["result"] = result(r)


def lenient_config(r: random.Random) -> dict[str, Any]:
    """A block for the functions driver: anything the lenient resolution must read."""
    fields: dict[str, tuple[Any, ...]] = {
        "warningThreshold": (1, 2, 3, 3, 4, 0, -1, 2.5, 3.0, "3", None, True, 1e20, {"$nan": True}),
        "criticalThreshold": (2, 3, 4, 5, 6, 3.0, 1, "5", None, 0),
        "globalCircuitBreakerThreshold": (3, 5, 7, 9, 4.0, 2, "9", None),
        "historySize": (3, 5, 8, 12, 30, 40, 40, 1, 2, 0, 6.0, 6.5, "5", None),
        "unknownToolThreshold": (1, 2, 3, 4, 0, "2", None, 2.0),
    }
    config: dict[str, Any] = {}
    if r.random() < 0.9:
        config["enabled"] = r.choice([True, True, True, False, None, "yes", 0, 1, ""])
    for key, choices in fields.items():
        if r.random() < 0.8:
            config[key] = r.choice(choices)
    if r.random() < 0.7:
        flags = (True, False, None, 0, 1, "", "no", [], {})
        detectors = {
            key: r.choice(flags)
            for key in ("genericRepeat", "knownPollNoProgress", "pingPong")
            if r.random() < 0.6
        }
        config["detectors"] = r.choice([detectors, detectors, None, "x", []])
    if r.random() < 0.4:
        config["postCompactionGuard"] = r.choice(
            [{"windowSize": r.choice([1, 2, 3, 2.0, 0, "2", 2.5])}, {}, None]
        )
    return config


def strict_config(r: random.Random) -> dict[str, Any]:
    """A block the strict schema accepts (SPEC §7), for the loopguard driver."""
    warning = r.randint(1, 6)
    critical = warning + r.randint(1, 4)
    config: dict[str, Any] = {
        "enabled": r.random() < 0.85,
        "warningThreshold": warning,
        "criticalThreshold": r.choice([critical, float(critical)]),
        "globalCircuitBreakerThreshold": critical + r.randint(1, 6),
    }
    if r.random() < 0.8:
        config["historySize"] = r.choice([2, 3, 5, 8, 12, 20, 30, 40])
    if r.random() < 0.6:
        config["unknownToolThreshold"] = r.randint(1, 5)
    if r.random() < 0.6:
        names = ("genericRepeat", "knownPollNoProgress", "pingPong")
        config["detectors"] = {k: r.random() < 0.5 for k in names if r.random() < 0.6}
    return config


def tool_args(r: random.Random, tool: str | None) -> Any:
    """Arguments the tool's detectors look at (polls, commands, send actions), or any."""
    name = (tool or "").strip().lower()
    if name == "process":
        return {"action": r.choice(["poll", "log", "kill", " poll"]), "sessionId": "s1"}
    if name in ("exec", "bash"):
        return {"command": r.choice(["make test", "ls"])}
    if name == "message":
        return {"action": r.choice(["send", "read", "reply", "poll"]), "to": "u"}
    if name == "command_status":
        return {"id": r.choice([1, 2])}
    return r.choice([{"path": r.choice(["/a", "/b"])}, value(r), {"$undefined": True}])


def _sequence(r: random.Random, pool: list[tuple[Any, Any]], count: int) -> list[tuple[Any, Any]]:
    """The calls of a trace: one repeated, two or more alternating, or at random."""
    mode = r.choice(["repeat", "alternate", "cycle", "random"])
    calls = []
    for j in range(count):
        if mode == "repeat":
            calls.append(pool[0])
        elif mode == "alternate":
            calls.append(pool[j % min(2, len(pool))])
        elif mode == "cycle":
            calls.append(pool[j % len(pool)])
        else:
            calls.append(r.choice(pool))
    return calls


def _with_args(step: dict[str, Any], args: Any) -> dict[str, Any]:
    if args != {"$undefined": True}:
        step["args"] = args  # absent args: undefined
    return step


def functions_trace(r: random.Random) -> dict[str, Any]:
    """A functions-driver trace (detect / recordCall / recordOutcome and the other ops)."""
    tools = ["exec", "process", "command_status", "message", "sessions_send", "read", "x", ""]
    pool = [(t, tool_args(r, t)) for t in (r.choice(tools) for _ in range(r.randint(1, 4)))]
    runs = r.choice([[None], [None, "r1"], ["r1", " r1", ""], ["r1", "r2", None]])
    steady = r.random() < 0.6
    steps: list[dict[str, Any]] = []
    for j, (tool, args) in enumerate(_sequence(r, pool, r.randint(3, 60))):
        common: dict[str, Any] = {"tool": tool}
        run = r.choice(runs)
        if run is not None or r.random() < 0.3:
            common["runId"] = run
        if r.random() < 0.05:
            common["noConfig"] = True
        elif r.random() < 0.05:
            common["config"] = lenient_config(r)
        call_id = r.choice([f"b{j}", f"b{j}", f"b{j}", None, "dup", f"b{max(0, j - 1)}"])
        steps.append(_with_args({"op": "detect", **common}, args))
        if r.random() < 0.9:
            step = _with_args({"op": "recordCall", **common}, args)
            if call_id is not None:
                step["toolCallId"] = call_id
            steps.append(step)
        if r.random() < 0.9:
            step = _with_args({"op": "recordOutcome", **common}, args)
            if call_id is not None and r.random() < 0.9:
                step["toolCallId"] = call_id
            outcome(r, step, steady)
            if r.random() < 0.3:
                step["observeGuard"] = True
            steps.append(step)
        steps.extend(_side_ops(r, tool))
    steps.append({"op": "history"})
    trace: dict[str, Any] = {
        "meta": {"source": "random", "category": "detector", "driver": "functions"},
        "config": lenient_config(r),
        "steps": steps,
    }
    if r.random() < 0.2:
        trace["runId"] = "r1"
    return trace


def _side_ops(r: random.Random, tool: Any) -> list[dict[str, Any]]:
    """The ops between calls: history, config changes, hashes, stringify, the guard."""
    ops: list[dict[str, Any]] = []
    if r.random() < 0.05:
        ops.append({"op": "history"})
    if r.random() < 0.03:
        ops.append({"op": "setConfig", "value": lenient_config(r)})
    if r.random() < 0.1:
        hashed = r.choice(["exec", "process", "message", "x"])
        step = {"op": "hash", "tool": hashed, "args": value(r)}
        outcome(r, step, steady=False)
        ops.append(step)
    if r.random() < 0.1:
        ops.append({"op": "stringify", "value": value(r)})
    if r.random() < 0.08:
        ops.append({"op": r.choice(["arm", "compaction"])})
    if r.random() < 0.05:
        ops.append({"op": "guardSnapshot"})
    if r.random() < 0.03:
        new: dict[str, Any] = {"op": "newGuard"}
        if r.random() < 0.6:
            window = r.choice([1, 2, 3, 4, 2.0, 0, -1, 2.5, "3", None, True, {"$nan": True}])
            new["guardConfig"] = r.choice([{"windowSize": window}, None, {}, "x", []])
        if r.random() < 0.4:
            new["enabled"] = r.random() < 0.5
        ops.append(new)
    if r.random() < 0.1:
        observed = {"toolName": r.choice(["exec", "read", tool]), "argsHash": r.choice("ab")}
        ops.append({"op": "observe", **observed, "resultHash": r.choice(["r1", "r2"])})
    return ops


TOOL_NAMES = (
    *("exec", "Bash", " BASH ", "bash", "Exec", "process", "PROCESS", "memory_search\t", None),
    *("", "read", "Read", "apply_patch", "command_status", "message", "sessions_send"),
    *("unknown_tool", "web_fetch", " read "),
)


def loopguard_trace(r: random.Random) -> dict[str, Any]:
    """A loopguard-driver trace of calls (no compaction: its wiring is loopwatch's own)."""
    pool = [(t, tool_args(r, t)) for t in (r.choice(TOOL_NAMES) for _ in range(r.randint(1, 4)))]
    runs = r.choice([[None], [None, "r1"], ["r1", " r1 ", ""], ["r1", "r2"]])
    steady = r.random() < 0.7
    steps: list[dict[str, Any]] = []
    for j, (tool, args) in enumerate(_sequence(r, pool, r.randint(3, 70))):
        step = _with_args({"op": "call", "tool": tool}, args)
        run = r.choice(runs)
        if run is not None or r.random() < 0.2:
            step["runId"] = run
        if r.random() < 0.7:
            step["toolCallId"] = r.choice([f"call_{j}", f"call_{j}", "call_dup"])
        outcome(r, step, steady)
        if r.random() < 0.04 and step.get("toolCallId") != "call_dup":
            step["noOutcome"] = True
        steps.append(step)
    meta = {"source": "random", "category": "wrapper", "driver": "loopguard", "schemaValid": True}
    trace: dict[str, Any] = {"meta": meta, "config": strict_config(r), "steps": steps}
    if r.random() < 0.3:
        trace["runId"] = "r-7"
    return trace


AGENT_IDS = (
    *("main", "Main", " main ", "MAIN", "safe-runner", "Safe_Runner", "safe runner", "ops", ""),
    *(" ", "é", "agent.1", "a/b", "x" * 70, "default"),
)


def merge_case(r: random.Random) -> tuple[dict[str, Any], str | None]:
    """A whole OpenClaw config and an agent id, for ``merge_agent_config``."""

    def block() -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key in ("enabled", "warningThreshold", "criticalThreshold", "historySize"):
            if r.random() < 0.4:
                out[key] = r.choice([True, False, 3, 5, 8, None])
        if r.random() < 0.5:
            out["detectors"] = r.choice(
                [{"pingPong": r.random() < 0.5}, {}, None, {"genericRepeat": False}]
            )
        if r.random() < 0.4:
            out["postCompactionGuard"] = r.choice([{"windowSize": r.choice([2, 4])}, {}, None])
        return out

    def tools() -> dict[str, Any]:
        if r.random() < 0.88:
            return {"loopDetection": block()}
        return r.choice([{}, {"loopDetection": None}])

    config: dict[str, Any] = {}
    if r.random() < 0.8:
        config["tools"] = tools()
    if r.random() < 0.85:
        entries = []
        for _ in range(r.randint(0, 4)):
            entry: dict[str, Any] = {"id": r.choice(AGENT_IDS)}
            if r.random() < 0.8:
                entry["tools"] = tools()
            if r.random() < 0.1:
                entry["default"] = True
            entries.append(entry)
        config["agents"] = {"list": entries}
    return config, r.choice([*AGENT_IDS, None, None])
