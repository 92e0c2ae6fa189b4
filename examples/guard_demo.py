"""A tiny agent loop guarded by loopwatch: watch it warn, then block, a stuck poll.

Run: ``python examples/guard_demo.py``. The "agent" keeps polling a process whose output
never changes, as a real model does when it forgets that it already checked; then it
ping-pongs between two calls. loopwatch prints its decision for each call.
"""

from __future__ import annotations

from typing import Any

from loopwatch import LoopEvent, LoopGuard


def fake_tool(name: str, params: dict[str, Any]) -> dict[str, Any]:
    """A tool that never makes progress: same output, new pid and duration every time."""
    if name == "process":
        return {
            "content": [{"type": "text", "text": "still running..."}],
            "details": {"status": "running", "exitCode": None, "aggregated": "building 42%"},
        }
    return {"content": [{"type": "text", "text": f"{name}: nothing new"}], "details": {}}


def main() -> None:
    events: list[str] = []

    def on_event(event: LoopEvent) -> None:
        events.append(event.type)

    guard = LoopGuard(
        {"enabled": True, "warningThreshold": 10, "criticalThreshold": 20},
        listeners=[on_event],
    )
    script = [("process", {"action": "poll", "sessionId": "build-1"})] * 24
    script += [("read", {"path": "a.py"}), ("grep", {"pattern": "TODO"})] * 12
    for step, (tool, params) in enumerate(script, start=1):
        decision = guard.before_call(tool, params, session_key="demo", tool_call_id=f"c{step}")
        if decision.tool_result is not None:  # blocked: the tool is not run
            result = decision.tool_result
        else:
            result = fake_tool(tool, params)
        guard.after_call(tool, params, session_key="demo", tool_call_id=f"c{step}", result=result)
        verdict = decision.verdict
        note = f"{verdict.detector} x{verdict.count}" if verdict.stuck else ""
        shown = " (logged + event)" if decision.emitted else ""
        print(f"{step:3d} {tool:8s} {decision.action:6s} {note}{shown}")
    print(f"events: {', '.join(sorted(set(events)))}")


if __name__ == "__main__":
    main()
