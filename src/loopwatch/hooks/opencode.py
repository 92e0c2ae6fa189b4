"""OpenCode (``loopwatch hook opencode``), called by the plugin ``loopwatch install
opencode`` writes.

OpenCode has no command hooks, only plugins, and two plugin APIs
(:mod:`loopwatch.cli._opencode_plugin` has the details and sources). 1.x passes
``tool.execute.before(input, output)`` with ``input = {tool, sessionID, callID}``, ``output
= {args}`` (throwing blocks the call, and the error text goes to the model as the tool's
error), ``tool.execute.after(input, output)`` with ``output = {title, output, metadata}``
(the plugin may append to ``output.output``; a ``bash`` call whose ``metadata.exit`` is
not 0 is recorded as failed, as ``loopwatch scan`` reads it), and
``experimental.session.compacting``.
2.x registers ``ctx.tool.hook("execute.before" | "execute.after", cb)`` with one event
``{tool, sessionID, agent, messageID, id, input[, status, result | error]}``; the plugin
translates it to the same messages. The plugin sends loopwatch one JSON object per event:

``{"event": "tool.execute.before" | "tool.execute.after" |
"experimental.session.compacting" | "session.compacted", "input": {...}, "output":
{...}}`` — the hook's own two arguments (for 2.x: ``callID`` from ``id``, ``output.args``
from ``input``, ``output.output`` the text of ``result.content``); ``error`` beside them
reports a failed tool (1.x runs ``tool.execute.after`` for successful tools only: the
plugin sees a failure as a ``message.part.updated`` event whose tool part is in
``state.status: "error"`` and forwards it as a ``tool.execute.after`` with ``error``; 2.x
reports it to ``execute.after`` with ``status: "error"``).
Releases whose ``tool.execute.after`` input has no ``args`` need the plugin to send the
call's arguments (kept by ``callID`` from its ``before``) as ``args`` beside them: the
outcome is matched to its call by the arguments' digest.

It reads back ``{"action": "allow" | "block" | "abort", "message": ...,
"warning": ...}``: ``block`` (before): reject the call with ``message``; ``warning``
(after): append it to the tool's output; ``abort`` (after): the loop survived a
compaction, stop the session.
"""

from __future__ import annotations

import json
from typing import Any, Final

from loopwatch.core._undefined import UNDEFINED
from loopwatch.hooks._core import CompactionCheck, HookEvent, HookResult, Outcome, text
from loopwatch.host_outcome import opencode_bash_failed

AGENT: Final = "opencode"
REMEMBER_RUN: Final = False
FAIL_OPEN: Final = HookResult('{"action": "allow"}', 0)
#: A compaction event means a compaction ran: nothing to check (see gemini.COMPACTION_CHECK).
COMPACTION_CHECK: Final[CompactionCheck | None] = None

_KINDS: Final = {
    "tool.execute.before": "before",
    "tool.execute.after": "after",
    "experimental.session.compacting": "compaction",
    "session.compacted": "compaction",
}


def parse(payload: dict[str, Any]) -> HookEvent:
    """The event the plugin forwarded (``ignore`` for events loopwatch skips)."""
    name = text(payload, "event") or ""
    given = payload.get("input")
    data: dict[str, Any] = given if isinstance(given, dict) else {}
    output = payload.get("output")
    output = output if isinstance(output, dict) else {}
    params = data.get("args", payload.get("args", output.get("args")))
    result: object = UNDEFINED
    error: object = UNDEFINED
    if name == "tool.execute.after":
        if payload.get("error"):
            error = payload["error"]
        else:
            result = output.get("output", UNDEFINED)
            # A shell command that exited non-zero completes as a plain result: a failure,
            # by the rule scan reads stored sessions with.
            if text(data, "tool") == "bash" and opencode_bash_failed(
                output.get("metadata"), result
            ):
                error = result if result not in (UNDEFINED, None, "") else "exit code non-zero"
                result = UNDEFINED
    return HookEvent(
        kind=_KINDS.get(name, "ignore"),  # type: ignore[arg-type]
        name=name,
        session=text(data, "sessionID"),
        tool=text(data, "tool"),
        params=params,
        call_id=text(data, "callID"),
        result=result,
        error=error,
    )


def render(event: HookEvent, outcome: Outcome) -> HookResult:
    """The answer the plugin reads."""
    answer: dict[str, Any] = {"action": "allow"}
    if event.kind == "before" and outcome.block:
        answer = {"action": "block", "message": outcome.block}
    elif event.kind == "after":
        if outcome.end_run:
            answer = {"action": "abort", "message": outcome.end_run}
        if outcome.warning:
            answer["warning"] = outcome.warning
    return HookResult(json.dumps(answer), 0)
