"""Claude Agent SDK for Python: ``PreToolUse`` / ``PostToolUse`` hooks that guard tool calls.

::

    from claude_agent_sdk import ClaudeAgentOptions, query
    from loopwatch import LoopGuard
    from loopwatch.integrations.claude_agent_sdk import LoopGuardHooks

    hooks = LoopGuardHooks(LoopGuard({"enabled": True}))
    options = ClaudeAgentOptions(hooks=hooks.matchers())
    async for message in query(prompt="Summarise notes.txt", options=options): ...

The SDK drives the ``claude`` CLI, which runs the tools; the CLI calls these hooks around
every tool call (SPEC §11):

* ``PreToolUse`` asks the guard. A blocked call is denied (``permissionDecision: "deny"``)
  with the blocked message as the reason, which the model reads; the tool is not run.
* ``PostToolUse`` records the ``tool_response`` (what the model is shown) and, for an
  emitted warning, returns it as ``additionalContext``, which the CLI gives the model with
  the result (the tool's output itself is left alone).
* ``PostToolUseFailure`` records the ``error`` text as the call's error, with the same
  warning handling.

A call of a tool the CLI does not have is only seen if the CLI runs the hooks for it (then it
is recorded as the failure the CLI reports); the offline :class:`ScriptedSession` assumes it
does not.

Hooks of your own: pass them as ``matchers(existing=your_hooks)``, which appends loopwatch's
matcher to each event's list after yours (``{**your_hooks, **hooks.matchers()}`` would
replace your ``PreToolUse`` / ``PostToolUse`` lists). The order does not change what the
model gets: the CLI runs every matching hook of an event in parallel and keeps the
strictest answer, so a ``deny`` from any of them denies the call whatever the others
answer (the SDK's hooks guide; the bundled CLI 2.1.332 keeps a ``strictestHookAnswer``).
Hence a call your hook denies while loopwatch allowed it was already counted by the guard,
as a call with no outcome (no ``PostToolUse`` comes), like a call the permission rules
deny.

Sessions and runs: the session is the hook input's ``session_id`` and the run its
``prompt_id`` (one user prompt); pass ``session_key=`` / ``run_id=`` (strings, or callables
taking the hook input) to choose. The CLI compacts on its own (a ``PreCompact`` hook): pass
``compaction=True`` to :meth:`LoopGuardHooks.matchers` to arm the post-compaction guard
there.

``on_critical="end_run"``: a hook cannot raise into the caller (the CLI runs the loop), so a
blocked call is denied *and* the hook answers ``continue: false`` with the blocked message as
``stopReason``: the CLI stops the session. ``"recover"`` denies the run's first critical
with the recovery message and stops the session at the second.

Parallel calls: the hooks see one call at a time (the CLI, not the SDK, decides when each
runs; it may run a message's read-only tools concurrently), and nothing in a hook's input
names the other calls of its message, so the calls are not admitted as one batch: each is
decided on the outcomes recorded so far.

Two layers: the hooks do not run around the tool (the CLI calls it, an SDK MCP tool in a
task of its own), so a ``guard.tool`` function called by an SDK MCP tool, on the same guard
and session, cannot pass the call through: it is guarded and recorded twice. Give such a
function no guard of its own.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, TypeAlias

from claude_agent_sdk import HookContext, HookMatcher

from loopwatch.adapter import AdapterOptions, OnCritical, ToolCall
from loopwatch.errors import LoopDetectedError
from loopwatch.guard import LoopGuard
from loopwatch.integrations._shared import check_adapter_arguments
from loopwatch.testing import LoopScript

#: A session key or run id: fixed, or computed from the hook input.
IdSource: TypeAlias = "str | Callable[[Mapping[str, Any]], object] | None"

#: How many started calls wait for their ``PostToolUse`` at most (a denied permission or an
#: interrupted tool never sends one).
MAX_PENDING: Final = 4096


class LoopGuardHooks:
    """The hook callbacks of one :class:`LoopGuard`, for ``ClaudeAgentOptions(hooks=...)``.

    Args:
        guard: the guard (its config, store, listeners and shadow mode apply).
        session_key: the conversation (default: the hook input's ``session_id``).
        run_id: the agent run (default: the hook input's ``prompt_id``).
        agent_id: the agent, for ``openclaw_config`` per-agent blocks (default: the
            sub-agent's ``agent_type`` when a hook fires inside one).
        warn_model: give the model an emitted warning as ``additionalContext``.
        on_critical: ``"block_call"`` (deny the call), ``"end_run"`` (deny it and stop the
            session) or ``"recover"`` (deny the run's first critical with the recovery
            message; deny the second and stop the session).
    """

    def __init__(
        self,
        guard: LoopGuard,
        *,
        session_key: IdSource = None,
        run_id: IdSource = None,
        agent_id: str | None = None,
        warn_model: bool = True,
        on_critical: OnCritical = "block_call",
    ) -> None:
        self.guard = guard
        self.session_key = session_key
        self.run_id = run_id
        self.agent_id = agent_id
        # end_run (and recover's second critical) is answered in the CLI's own idiom
        # (continue: false), never raised into it.
        check_adapter_arguments(guard, agent_id=agent_id, session_key=session_key, run_id=run_id)
        self.options = AdapterOptions(warn_model=warn_model, on_critical=on_critical)
        self._pending: OrderedDict[object, ToolCall] = OrderedDict()

    def matchers(
        self,
        *,
        compaction: bool = False,
        existing: Mapping[Any, Sequence[HookMatcher]] | None = None,
    ) -> dict[Any, list[HookMatcher]]:
        """The ``hooks=`` mapping: every tool, before, after and on failure.

        Args:
            compaction: also hook ``PreCompact`` (arms the post-compaction guard).
            existing: hooks of your own (a ``ClaudeAgentOptions.hooks`` mapping). The
                result keeps every one of them, in your order, with loopwatch's matcher
                appended to each event's list, a new dict (yours is not changed). Use
                this rather than ``{**yours, **hooks.matchers()}``, which replaces your
                ``PreToolUse`` / ``PostToolUse`` lists with loopwatch's.

        Raises:
            TypeError: ``existing`` is not a mapping of event names to lists of
                ``HookMatcher``, naming the event and the position of the wrong entry.
            ValueError: ``existing`` already holds this object's callbacks (they would
                record every call twice).
        """
        hooks: dict[Any, list[HookMatcher]] = {} if existing is None else self._own(existing)
        ours: dict[str, Callable[..., Any]] = {
            "PreToolUse": self.pre_tool_use,
            "PostToolUse": self.post_tool_use,
            "PostToolUseFailure": self.post_tool_use_failure,
        }
        if compaction:
            ours["PreCompact"] = self.pre_compact
        for event, callback in ours.items():
            hooks.setdefault(event, []).append(HookMatcher(hooks=[callback]))
        return hooks

    def _own(self, existing: object) -> dict[Any, list[HookMatcher]]:
        """A copy of the user's ``hooks=`` mapping, checked (see :meth:`matchers`)."""
        if not isinstance(existing, Mapping):
            raise TypeError(
                "existing must be a mapping of hook events to lists of HookMatcher "
                f"(ClaudeAgentOptions.hooks), not {type(existing).__name__}"
            )
        # Bound methods compare equal (not identical) each time they are read.
        ours = (self.pre_tool_use, self.post_tool_use, self.post_tool_use_failure, self.pre_compact)
        copy: dict[Any, list[HookMatcher]] = {}
        for event, matchers in existing.items():
            if not isinstance(event, str):
                raise TypeError(f"existing: a hook event must be a str, not {event!r}")
            if isinstance(matchers, (str, bytes, HookMatcher)) or not isinstance(
                matchers, Sequence
            ):
                raise TypeError(
                    f"existing[{event!r}] must be a list of HookMatcher, "
                    f"not {type(matchers).__name__}"
                )
            for i, matcher in enumerate(matchers):
                if not isinstance(matcher, HookMatcher):
                    raise TypeError(
                        f"existing[{event!r}][{i}] must be a HookMatcher, "
                        f"not {type(matcher).__name__}"
                    )
                if any(callback in ours for callback in matcher.hooks):
                    raise ValueError(
                        f"existing[{event!r}][{i}] already holds this LoopGuardHooks' "
                        "callbacks: pass your own hooks only (every call would be "
                        "recorded twice)"
                    )
            copy[event] = list(matchers)
        return copy

    def _resolve(self, source: IdSource, data: Mapping[str, Any], key: str) -> object:
        value = source(data) if callable(source) else source
        return value if value is not None else data.get(key)

    def _ids(self, data: Mapping[str, Any]) -> dict[str, object]:
        return {
            "session_key": self._resolve(self.session_key, data, "session_id"),
            "run_id": self._resolve(self.run_id, data, "prompt_id"),
            "agent_id": self.agent_id if self.agent_id is not None else data.get("agent_type"),
        }

    async def pre_tool_use(
        self, input_data: Any, tool_use_id: str | None, context: HookContext
    ) -> Any:
        """Ask the guard; deny a blocked call with its message."""
        data: Mapping[str, Any] = input_data
        call_id = data.get("tool_use_id", tool_use_id)
        ids = self._ids(data)
        tc = ToolCall(
            self.guard,
            str(data.get("tool_name")),
            data.get("tool_input") or {},
            tool_call_id=call_id,
            options=self.options,
            session_key=ids["session_key"],
            run_id=ids["run_id"],
            agent_id=ids["agent_id"],
        )
        try:
            await tc.astart()
        except LoopDetectedError:
            # end_run, or recover's second critical: a hook cannot raise into the caller
            # (the CLI runs the loop), so the call is denied and the session stopped.
            return self._deny(str(tc.message), stop=True)
        if not tc.blocked:
            self._pending[call_id] = tc
            while len(self._pending) > MAX_PENDING:
                self._pending.popitem(last=False)
            return {}
        return self._deny(str(tc.message), stop=False)

    @staticmethod
    def _deny(message: str, *, stop: bool) -> dict[str, Any]:
        answer: dict[str, Any] = {
            "hookSpecificOutput": {
                "hookEventName": "PreToolUse",
                "permissionDecision": "deny",
                "permissionDecisionReason": message,
            }
        }
        if stop:
            answer["continue_"] = False
            answer["stopReason"] = message
        return answer

    async def _finish(self, data: Mapping[str, Any], event: str, **outcome: object) -> Any:
        tc = self._pending.pop(data.get("tool_use_id"), None)
        if tc is None:
            return {}  # never started here (or a blocked call): nothing to record
        if "error" in outcome:
            tc.error(outcome["error"])
        else:
            tc.result(outcome["result"])
        await tc.afinish()
        warning = tc.warning
        if warning is None:
            return {}
        return {"hookSpecificOutput": {"hookEventName": event, "additionalContext": warning}}

    async def post_tool_use(
        self, input_data: Any, tool_use_id: str | None, context: HookContext
    ) -> Any:
        """Record the tool's response; give the model an emitted warning.

        The response is the tool's own structure (Bash ``{stdout, stderr, ...}``): the
        :class:`ToolCall` compares it whole (:func:`loopwatch.host_outcome.as_outcome`), as
        ``loopwatch hook claude-code`` does.
        """
        data: Mapping[str, Any] = input_data
        return await self._finish(data, "PostToolUse", result=data.get("tool_response"))

    async def post_tool_use_failure(
        self, input_data: Any, tool_use_id: str | None, context: HookContext
    ) -> Any:
        """Record the failure's error text; give the model an emitted warning."""
        data: Mapping[str, Any] = input_data
        return await self._finish(data, "PostToolUseFailure", error=str(data.get("error")))

    async def pre_compact(
        self, input_data: Any, tool_use_id: str | None, context: HookContext
    ) -> Any:
        """Arm the post-compaction guard of the session (SPEC §6)."""
        ids = self._ids(input_data)
        await self.guard.acompaction_retry(
            session_key=ids["session_key"], run_id=ids["run_id"], agent_id=ids["agent_id"]
        )
        return {}


# --- a scripted offline session -------------------------------------------------------------

#: What the CLI tells the model about a tool it does not have (no hook runs for it).
NO_SUCH_TOOL: Final = "Error: No such tool available: {name}"


@dataclass
class ScriptedSession:
    """Plays the CLI's part offline: a :class:`~loopwatch.testing.LoopScript` model whose
    calls go through the hooks of ``hooks=`` as the CLI sends them, and ``tools`` run.

    The payloads have the documented shape (``session_id``, ``tool_name``,
    ``tool_input``, ``tool_use_id``, ``tool_response`` / ``error``). ``read`` is what the
    model read after each call: the result or error, then any ``additionalContext``.
    ``concurrent`` plays a message's calls as the CLI runs read-only tools (see :meth:`run`).
    """

    script: LoopScript = field(default_factory=LoopScript)
    tools: Mapping[str, Callable[..., Any]] = field(default_factory=dict)
    session_id: str = "scripted-session"
    read: list[str] = field(default_factory=list)
    stopped: str | None = None
    concurrent: bool = False
    answers: dict[str, str] = field(default_factory=dict)

    async def _hook(self, hooks: Mapping[Any, list[HookMatcher]], event: str, data: Any) -> Any:
        answer: dict[str, Any] = {}
        for matcher in hooks.get(event, ()):
            for callback in matcher.hooks:
                answer.update(await callback(data, data.get("tool_use_id"), {"signal": None}))
        return answer

    async def _pre(self, hooks: Mapping[Any, list[HookMatcher]], data: dict[str, Any]) -> bool:
        """``PreToolUse``; False (and the denial read) when the hook denied the call."""
        pre = await self._hook(hooks, "PreToolUse", {**data, "hook_event_name": "PreToolUse"})
        specific = pre.get("hookSpecificOutput") or {}
        if specific.get("permissionDecision") != "deny":
            return True
        self.answers[data["tool_use_id"]] = str(specific.get("permissionDecisionReason"))
        if pre.get("continue_") is False:
            self.stopped = str(pre.get("stopReason"))
        return False

    async def _run(self, hooks: Mapping[Any, list[HookMatcher]], data: dict[str, Any]) -> None:
        """Run the tool, then ``PostToolUse`` or ``PostToolUseFailure``."""
        name, args = data["tool_name"], data["tool_input"]
        try:
            result = self.tools[name](**args)
        except Exception as exc:
            event, text = "PostToolUseFailure", str(exc)
            post = await self._hook(hooks, event, {**data, "hook_event_name": event, "error": text})
        else:
            event, text = "PostToolUse", str(result)
            post = await self._hook(
                hooks, event, {**data, "hook_event_name": event, "tool_response": result}
            )
        extra = (post.get("hookSpecificOutput") or {}).get("additionalContext")
        self.answers[data["tool_use_id"]] = text if extra is None else f"{text}\n\n{extra}"

    async def run(self, hooks: Mapping[Any, list[HookMatcher]]) -> str:
        """Play the script to its end (or until a hook stops the session); the final text.

        The calls of one model message (``LoopScript.per_turn``) go through the hooks one
        after another, or, with ``concurrent``, as the CLI runs read-only tools: every
        ``PreToolUse`` of the message first, then the tools and their ``PostToolUse``.
        """
        base: dict[str, Any] = {"session_id": self.session_id, "transcript_path": "", "cwd": "."}
        while steps := self.script.next_calls(self.read):
            message: list[dict[str, Any]] = []
            for name, args in steps:
                call_id = f"toolu_{len(self.read) + len(message) + 1:04d}"
                message.append(
                    {**base, "tool_name": name, "tool_input": args, "tool_use_id": call_id}
                )
            admitted = []
            for data in message:
                if data["tool_name"] not in self.tools:
                    self.answers[data["tool_use_id"]] = NO_SUCH_TOOL.format(name=data["tool_name"])
                elif await self._pre(hooks, data):
                    if self.concurrent:
                        admitted.append(data)
                    else:
                        await self._run(hooks, data)
                if self.stopped is not None:
                    break
            for data in admitted:
                if self.stopped is None:
                    await self._run(hooks, data)
            self.read.extend(
                self.answers.pop(d["tool_use_id"])
                for d in message
                if d["tool_use_id"] in self.answers
            )
            if self.stopped is not None:
                return self.stopped
        return self.script.final


__all__ = ["MAX_PENDING", "NO_SUCH_TOOL", "LoopGuardHooks", "ScriptedSession"]
