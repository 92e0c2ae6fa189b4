"""Claude Agent SDK: the hook callbacks, driven with payloads of the documented shape.

The SDK runs the ``claude`` CLI, which runs the tools and calls the hooks; there is no
offline CLI, so ``ScriptedSession`` plays its part: it sends ``PreToolUse``,
``PostToolUse`` and ``PostToolUseFailure`` inputs (``session_id``, ``tool_name``,
``tool_input``, ``tool_use_id``, ``tool_response`` / ``error``) through the ``HookMatcher``
lists that ``LoopGuardHooks.matchers()`` builds for ``ClaudeAgentOptions(hooks=...)``.
The last tests go through the SDK itself (``query()`` and ``ClaudeSDKClient``, with a
``Transport`` that plays the CLI's side of the control protocol), so the SDK's own hook
registration, dispatch and answer conversion (``continue_`` to ``continue``) are covered.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator
from typing import Any

import pytest
from claude_agent_sdk import (
    ClaudeAgentOptions,
    ClaudeSDKClient,
    HookMatcher,
    ResultMessage,
    Transport,
    query,
)
from framework_matrix import (
    BY_NAME,
    FAILURE,
    SEQUENTIAL_PARALLEL,
    SINGLE,
    Scenario,
    Tools,
    blocks,
    check_answers,
    make_guard,
)
from hypothesis import given, settings
from hypothesis import strategies as st

from loopwatch import LoopGuard
from loopwatch import messages as texts
from loopwatch.integrations.claude_agent_sdk import NO_SUCH_TOOL, LoopGuardHooks, ScriptedSession
from loopwatch.testing import LoopScript


def session(script: LoopScript, tools: Tools, *, concurrent: bool = False) -> ScriptedSession:
    return ScriptedSession(
        script,
        {"read_file": tools.read_file, "list_dir": tools.list_dir, "flaky_read": tools.flaky_read},
        session_id="sess-1",
        concurrent=concurrent,
    )


async def test_the_matrix_recover() -> None:
    scenario = BY_NAME["recover"]
    guard, events = make_guard()
    tools = Tools()
    play = session(scenario.script, tools)
    final = await play.run(LoopGuardHooks(guard, on_critical="recover").matchers())
    # The second critical is denied and stops the session (a hook cannot raise into the
    # CLI): the model never reads that denial.
    assert play.stopped == final == BY_NAME["repeat"].blocked_message
    check_answers(scenario, play.read[: scenario.reads], tools, events, None, stopped=True)
    assert play.read[scenario.reads :] == [final]


# The parallel row. The hooks see one call at a time and nothing in their input names the
# other calls of the message, so the adapter cannot admit a message as one batch. Played
# one after another the three calls of each message give the repeat row's figures; played
# as the CLI runs read-only tools (every PreToolUse of the message first), the 21st call,
# decided while the 19th and 20th have no outcome yet, still runs (one extra run), and the
# next message is blocked whole.
@pytest.mark.parametrize(
    ("concurrent", "expected"),
    [(False, SEQUENTIAL_PARALLEL), (True, (21, 39))],
    ids=["in_order", "concurrent"],
)
async def test_the_matrix_parallel(concurrent: bool, expected: tuple[int, int]) -> None:
    scenario = BY_NAME["parallel"]
    guard, events = make_guard()
    tools = Tools()
    play = session(scenario.script, tools, concurrent=concurrent)
    await play.run(LoopGuardHooks(guard).matchers())
    assert (tools.total, blocks(events)) == expected
    assert len(play.read) == scenario.reads
    first = expected[0]
    assert "CRITICAL" not in " ".join(play.read[:first])
    critical = texts.GENERIC_CRITICAL.format(tool="read_file", count=first)
    assert play.read[first:] == [critical] * (60 - first)


@pytest.mark.parametrize("scenario", SINGLE, ids=lambda s: s.name)
async def test_the_matrix(scenario: Scenario) -> None:
    guard, events = make_guard()
    tools = Tools()
    play = session(scenario.script, tools)
    await play.run(LoopGuardHooks(guard).matchers())

    assert len(play.read) == 60
    assert tools.total == scenario.executions
    if scenario.name == "unknown":
        # The CLI answers a missing tool before any hook: nothing to see, nothing blocked.
        assert play.read == [NO_SUCH_TOOL.format(name="open_file")] * 60
        assert len(guard.history(session_key="sess-1")) == 0
        return
    assert blocks(events) == scenario.blocks
    if scenario.warned_at is not None:
        assert play.read[scenario.warned_at].endswith(f"\n\n{scenario.warning}")
        assert "WARNING" not in play.read[scenario.warned_at - 1]
    if scenario.blocked_message is not None:
        assert play.read[20] == scenario.blocked_message
    if scenario.name == "failing":
        assert play.read[0] == FAILURE
        assert guard.history(session_key="sess-1")[0].tool_name == "flaky_read"


async def test_end_run_denies_and_stops_the_session() -> None:
    guard, _ = make_guard()
    tools = Tools()
    play = session(BY_NAME["repeat"].script, tools)
    final = await play.run(LoopGuardHooks(guard, on_critical="end_run").matchers())
    assert final == BY_NAME["repeat"].blocked_message
    assert play.stopped == final
    assert tools.total == 20
    assert len(play.read) == 21


async def test_the_answers_have_the_documented_shape() -> None:
    guard, _ = make_guard()
    hooks = LoopGuardHooks(guard, warn_model=False, run_id="r-1")
    base = {"session_id": "s", "transcript_path": "t", "cwd": "."}
    ctx: Any = {"signal": None}
    for i in range(21):
        call = {**base, "tool_name": "Read", "tool_input": {"file": "a"}, "tool_use_id": f"t{i}"}
        pre = await hooks.pre_tool_use({**call, "hook_event_name": "PreToolUse"}, f"t{i}", ctx)
        if i < 20:
            assert pre == {}
            post = {**call, "hook_event_name": "PostToolUse", "tool_response": {"content": "x"}}
            assert await hooks.post_tool_use(post, f"t{i}", ctx) == {}  # warn_model=False
    assert pre["hookSpecificOutput"]["hookEventName"] == "PreToolUse"
    assert pre["hookSpecificOutput"]["permissionDecision"] == "deny"
    assert "continue_" not in pre
    assert {r.run_id for r in guard.history(session_key="s")} == {"r-1"}
    # A PostToolUse without a PreToolUse seen here records nothing.
    stray = {**base, "tool_name": "Read", "tool_input": {}, "tool_use_id": "zz"}
    assert await hooks.post_tool_use(stray, "zz", ctx) == {}
    assert len(guard.history(session_key="s")) == 20


def test_matchers_plug_into_claude_agent_options() -> None:
    hooks = LoopGuardHooks(LoopGuard({"enabled": True}))
    matchers = hooks.matchers(compaction=True)
    options = ClaudeAgentOptions(hooks=matchers)
    assert options.hooks is matchers
    assert set(matchers) == {"PreToolUse", "PostToolUse", "PostToolUseFailure", "PreCompact"}
    assert all(isinstance(m, HookMatcher) for ms in matchers.values() for m in ms)
    with pytest.raises(ValueError, match="on_critical"):
        LoopGuardHooks(LoopGuard(), on_critical="stop")  # type: ignore[arg-type]


async def _mine(input_data: Any, tool_use_id: str | None, context: Any) -> Any:
    return {}


EVENTS = ["PreToolUse", "PostToolUse", "PostToolUseFailure", "PreCompact", "Stop"]


@settings(max_examples=60, deadline=None)
@given(
    st.dictionaries(
        st.sampled_from(EVENTS),
        st.lists(st.sampled_from([None, "Bash", "Write|Edit", "mcp__.*"]), max_size=3),
    ),
    st.booleans(),
)
def test_matchers_existing_keeps_your_hooks_first_and_in_order(
    shape: dict[str, list[str | None]], compaction: bool
) -> None:
    mine = {e: [HookMatcher(matcher=m, hooks=[_mine]) for m in ms] for e, ms in shape.items()}
    before = {e: list(ms) for e, ms in mine.items()}
    hooks = LoopGuardHooks(LoopGuard({"enabled": True}))
    merged = hooks.matchers(compaction=compaction, existing=mine)
    ClaudeAgentOptions(hooks=merged)  # the SDK's own type accepts it
    assert mine == before  # the user's mapping is not changed
    ours = hooks.matchers(compaction=compaction)
    assert set(merged) == set(mine) | set(ours)
    for event in merged:
        own = mine.get(event, [])
        assert merged[event][: len(own)] == own  # the same objects, in the user's order
        assert [m.hooks for m in merged[event][len(own) :]] == [
            m.hooks for m in ours.get(event, [])
        ]


def test_a_dict_merge_drops_your_hooks_and_existing_does_not() -> None:
    # The pitfall matchers(existing=...) is for: a dict merge replaces per-event lists.
    hooks = LoopGuardHooks(LoopGuard({"enabled": True}))
    mine = {"PreToolUse": [HookMatcher(matcher="Bash", hooks=[_mine])]}
    naive = {**mine, **hooks.matchers()}
    assert all(_mine not in m.hooks for m in naive["PreToolUse"])
    merged = hooks.matchers(existing=mine)
    assert [m.hooks for m in merged["PreToolUse"]] == [[_mine], [hooks.pre_tool_use]]


@pytest.mark.parametrize(
    ("existing", "message"),
    [
        ([HookMatcher(hooks=[_mine])], r"existing must be a mapping .* not list"),
        ({1: []}, r"a hook event must be a str, not 1"),
        ({"PreToolUse": HookMatcher(hooks=[_mine])}, r"existing\['PreToolUse'\] must be a list"),
        (
            {"PreToolUse": "Bash"},
            r"existing\['PreToolUse'\] must be a list of HookMatcher, not str",
        ),
        ({"Stop": None}, r"existing\['Stop'\] must be a list of HookMatcher, not NoneType"),
        (
            {"PostToolUse": [HookMatcher(hooks=[_mine]), {"matcher": None, "hooks": [_mine]}]},
            r"existing\['PostToolUse'\]\[1\] must be a HookMatcher, not dict",
        ),
    ],
)
def test_matchers_existing_of_the_wrong_shape_is_a_type_error(existing: Any, message: str) -> None:
    hooks = LoopGuardHooks(LoopGuard({"enabled": True}))
    with pytest.raises(TypeError, match=message):
        hooks.matchers(existing=existing)


def test_matchers_existing_that_holds_the_guards_own_hooks_is_refused() -> None:
    hooks = LoopGuardHooks(LoopGuard({"enabled": True}))
    with pytest.raises(ValueError, match=r"existing\['PreToolUse'\]\[0\] already holds"):
        hooks.matchers(existing=hooks.matchers())
    # Another LoopGuardHooks' callbacks are the user's own business (another guard).
    other = LoopGuardHooks(LoopGuard({"enabled": True}))
    assert len(hooks.matchers(existing=other.matchers())["PreToolUse"]) == 2


async def test_pre_compact_arms_the_post_compaction_guard() -> None:
    guard, events = make_guard()
    hooks = LoopGuardHooks(guard)
    data = {"session_id": "s", "transcript_path": "", "cwd": ".", "hook_event_name": "PreCompact"}
    assert await hooks.pre_compact(data, None, {"signal": None}) == {}
    assert [e.type for e in events] == ["guard.armed"]


async def test_a_command_whose_output_changes_is_never_blocked() -> None:
    # The CLI's tool_response is the tool's own structure (Bash: {stdout, stderr,
    # interrupted, isImage}), not an OpenClaw result: it must be compared whole, else
    # re-running the tests while fixing the code counts as a loop.
    guard, _ = make_guard()
    hooks = LoopGuardHooks(guard, warn_model=False)
    base = {"session_id": "s", "transcript_path": "t", "cwd": "."}
    ctx: Any = {"signal": None}
    for i in range(25):
        call = {**base, "tool_name": "Bash", "tool_input": {"command": "make test"}}
        call["tool_use_id"] = f"t{i}"
        pre = await hooks.pre_tool_use({**call, "hook_event_name": "PreToolUse"}, f"t{i}", ctx)
        assert pre == {}, i
        response = {"stdout": f"{25 - i} failed", "stderr": "", "interrupted": False}
        post = {**call, "hook_event_name": "PostToolUse", "tool_response": response}
        await hooks.post_tool_use(post, f"t{i}", ctx)


# --- through the real SDK: query() and ClaudeSDKClient over a transport playing the CLI ------


class CliTransport(Transport):
    """The ``claude`` CLI's side of the SDK's control protocol, offline.

    It answers the SDK's ``initialize`` (which carries the hook callback ids), and for each
    user message makes ``times`` calls of ``mcp__files__read_file`` with ``args_of(n)``,
    ``per_turn`` at a time run concurrently (as the CLI runs read-only tools): a
    ``hook_callback`` control request per hook, the tool, then ``PostToolUse`` (or
    ``PostToolUseFailure`` when it raised); a ``continue: false`` answer ends the session.
    ``read`` is what the model read; ``wire`` the hook answers as the CLI received them.
    """

    def __init__(
        self,
        tool: Any,
        args_of: Any,
        *,
        times: int = 40,
        per_turn: int = 1,
        session_id: str = "sess-1",
    ) -> None:
        self.tool, self.args_of, self.times, self.per_turn = tool, args_of, times, per_turn
        self.session_id = session_id
        self.out: asyncio.Queue[dict[str, Any] | None] = asyncio.Queue()
        self.hooks: dict[str, list[str]] = {}
        self.waiting: dict[str, asyncio.Future[dict[str, Any]]] = {}
        self.read: list[str] = []
        self.wire: list[dict[str, Any]] = []
        self.stopped: str | None = None
        self._requests = 0
        self._agent: asyncio.Task[None] | None = None

    async def connect(self) -> None:
        return None

    def is_ready(self) -> bool:
        return True

    async def end_input(self) -> None:
        return None

    async def close(self) -> None:
        if self._agent is not None:
            self._agent.cancel()

    async def read_messages(self) -> AsyncIterator[dict[str, Any]]:
        while (message := await self.out.get()) is not None:
            yield message

    async def write(self, data: str) -> None:
        for line in data.splitlines():
            message = json.loads(line)
            kind = message["type"]
            if kind == "control_request" and message["request"]["subtype"] == "initialize":
                for event, matchers in (message["request"].get("hooks") or {}).items():
                    self.hooks[event] = [i for m in matchers for i in m["hookCallbackIds"]]
                await self.out.put(self._success(message["request_id"]))
            elif kind == "control_response":
                response = message["response"]
                self.waiting.pop(response["request_id"]).set_result(response)
            elif kind == "user":
                self._agent = asyncio.ensure_future(self._run())

    @staticmethod
    def _success(request_id: str) -> dict[str, Any]:
        response = {"subtype": "success", "request_id": request_id, "response": {}}
        return {"type": "control_response", "response": response}

    async def _hook(self, event: str, data: dict[str, Any]) -> dict[str, Any]:
        answer: dict[str, Any] = {}
        for callback_id in self.hooks.get(event, []):
            self._requests += 1
            request_id = f"cli-{self._requests}"
            self.waiting[request_id] = asyncio.get_running_loop().create_future()
            request = {
                "subtype": "hook_callback",
                "callback_id": callback_id,
                "input": {**data, "hook_event_name": event},
                "tool_use_id": data["tool_use_id"],
            }
            await self.out.put(
                {"type": "control_request", "request_id": request_id, "request": request}
            )
            response = await self.waiting[request_id]
            assert response["subtype"] == "success", response
            self.wire.append(response["response"])
            answer.update(response["response"])
        return answer

    async def _call(self, n: int) -> str:
        data = {
            "session_id": self.session_id,
            "transcript_path": "",
            "cwd": ".",
            "tool_name": "mcp__files__read_file",
            "tool_input": self.args_of(n),
            "tool_use_id": f"toolu_{n:03d}",
        }
        pre = await self._hook("PreToolUse", data)
        if pre.get("continue") is False:
            self.stopped = str(pre.get("stopReason"))
        specific = pre.get("hookSpecificOutput") or {}
        if specific.get("permissionDecision") == "deny":
            return str(specific["permissionDecisionReason"])
        try:
            result = str(self.tool(**data["tool_input"]))
        except Exception as exc:
            result = str(exc)
            post = await self._hook("PostToolUseFailure", {**data, "error": result})
        else:
            post = await self._hook("PostToolUse", {**data, "tool_response": result})
        extra = (post.get("hookSpecificOutput") or {}).get("additionalContext")
        return result if extra is None else f"{result}\n\n{extra}"

    async def _run(self) -> None:
        n = 0
        while n < self.times and self.stopped is None:
            turn = range(n, min(n + self.per_turn, self.times))
            self.read.extend(await asyncio.gather(*(self._call(i) for i in turn)))
            n += len(turn)
        result = {
            "type": "result",
            "subtype": "success",
            "duration_ms": 1,
            "duration_api_ms": 1,
            "is_error": False,
            "num_turns": n,
            "session_id": self.session_id,
            "result": self.stopped or "done",
        }
        await self.out.put(result)
        await self.out.put(None)


SDK_WARNING = texts.GENERIC_WARNING.format(tool="mcp__files__read_file", count=10)
SDK_CRITICAL = texts.GENERIC_CRITICAL.format(tool="mcp__files__read_file", count=20)


async def run_through_the_sdk(
    hooks: LoopGuardHooks, cli: CliTransport, *, client: bool = False
) -> list[Any]:
    options = ClaudeAgentOptions(hooks=hooks.matchers())
    if not client:
        return [
            m async for m in query(prompt="Summarise notes.txt", options=options, transport=cli)
        ]
    async with ClaudeSDKClient(options=options, transport=cli) as sdk:
        await sdk.query("Summarise notes.txt")
        return [m async for m in sdk.receive_response()]


@pytest.mark.parametrize("client", [False, True], ids=["query", "ClaudeSDKClient"])
async def test_a_loop_through_the_real_sdk_is_warned_then_denied(client: bool) -> None:
    runs: list[str] = []
    guard = LoopGuard({"enabled": True})
    cli = CliTransport(lambda path: runs.append(path) or "the notes", lambda n: {"path": "n.txt"})
    messages = await run_through_the_sdk(LoopGuardHooks(guard), cli, client=client)
    assert isinstance(messages[-1], ResultMessage) and messages[-1].result == "done"
    assert len(runs) == 20 and len(cli.read) == 40
    assert cli.read[10] == f"the notes\n\n{SDK_WARNING}"  # the model reads it with the 11th
    assert all("WARNING" not in r for r in cli.read[:10])
    assert cli.read[20:] == [SDK_CRITICAL] * 20
    assert len(guard.history(session_key="sess-1")) == 20


async def test_a_healthy_run_through_the_real_sdk_is_never_denied() -> None:
    guard = LoopGuard({"enabled": True})
    cli = CliTransport(lambda path: f"contents of {path}", lambda n: {"path": f"f{n}.txt"})
    await run_through_the_sdk(LoopGuardHooks(guard), cli)
    assert cli.read == [f"contents of f{n}.txt" for n in range(40)]
    assert all(answer == {} for answer in cli.wire)


async def test_concurrent_calls_through_the_real_sdk_lose_no_record() -> None:
    guard = LoopGuard({"enabled": True})
    cli = CliTransport(lambda path: "ok", lambda n: {"path": f"f{n}"}, times=12, per_turn=4)
    await run_through_the_sdk(LoopGuardHooks(guard), cli)
    history = guard.history(session_key="sess-1")
    assert sorted(str(r.tool_call_id) for r in history) == [f"toolu_{n:03d}" for n in range(12)]
    assert all(r.result_hash is not None for r in history)  # every outcome recorded


async def test_end_run_through_the_real_sdk_reaches_the_cli_as_continue_false() -> None:
    def failing(path: str) -> str:
        raise OSError("disk gone")

    guard = LoopGuard({"enabled": True})
    cli = CliTransport(failing, lambda n: {"path": "n.txt"})
    messages = await run_through_the_sdk(LoopGuardHooks(guard, on_critical="end_run"), cli)
    # The failures went through PostToolUseFailure, and the 21st call was denied with
    # "continue": false on the wire (the SDK renames the hook's continue_).
    critical = SDK_CRITICAL
    assert cli.read[:20] == ["disk gone"] * 10 + [f"disk gone\n\n{SDK_WARNING}"] + ["disk gone"] * 9
    assert cli.read[20:] == [critical] and cli.stopped == critical
    assert {"continue": False, "stopReason": critical}.items() <= cli.wire[-1].items()
    assert isinstance(messages[-1], ResultMessage) and messages[-1].result == critical


class StrictestCli(CliTransport):
    """:class:`CliTransport`, answering as the CLI combines several hooks of one event.

    The CLI runs an event's matching hooks in parallel and keeps the strictest answer (the
    SDK's hooks guide; the bundled CLI's ``strictestHookAnswer``): a ``deny`` wins whatever
    the order; the other answers' ``additionalContext`` are all given to the model.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.matchers: dict[str, list[tuple[str | None, list[str]]]] = {}

    async def write(self, data: str) -> None:
        for line in data.splitlines():
            message = json.loads(line)
            request = message.get("request") or {}
            if message["type"] == "control_request" and request["subtype"] == "initialize":
                for event, ms in (request.get("hooks") or {}).items():
                    self.matchers[event] = [(m["matcher"], m["hookCallbackIds"]) for m in ms]
        await super().write(data)

    async def _one(self, callback_id: str, event: str, data: dict[str, Any]) -> dict[str, Any]:
        self._requests += 1
        request_id = f"cli-{self._requests}"
        self.waiting[request_id] = asyncio.get_running_loop().create_future()
        request = {
            "subtype": "hook_callback",
            "callback_id": callback_id,
            "input": {**data, "hook_event_name": event},
            "tool_use_id": data["tool_use_id"],
        }
        await self.out.put(
            {"type": "control_request", "request_id": request_id, "request": request}
        )
        response = await self.waiting[request_id]
        assert response["subtype"] == "success", response
        answer: dict[str, Any] = response["response"]
        self.wire.append(answer)
        return answer

    async def _hook(self, event: str, data: dict[str, Any]) -> dict[str, Any]:
        ids = [
            i
            for matcher, callback_ids in self.matchers.get(event, [])
            if matcher is None or re.fullmatch(matcher, data["tool_name"])
            for i in callback_ids
        ]
        answers = await asyncio.gather(*(self._one(i, event, data) for i in ids))
        specifics = [a.get("hookSpecificOutput") or {} for a in answers]
        combined: dict[str, Any] = {}
        for answer in answers:
            if answer.get("continue") is False:
                combined.update(continue_=False, stopReason=answer.get("stopReason"))
        denies = [s for s in specifics if s.get("permissionDecision") == "deny"]
        extra = [s["additionalContext"] for s in specifics if "additionalContext" in s]
        specific: dict[str, Any] = dict(denies[0]) if denies else {}
        if extra:
            specific["additionalContext"] = "\n\n".join(extra)
        if combined.pop("continue_", None) is False:
            combined["continue"] = False
        if specific:
            combined["hookSpecificOutput"] = specific
        return combined


@pytest.mark.parametrize("yours_first", [True, False], ids=["existing", "reversed"])
async def test_your_hooks_and_the_guards_both_run_through_the_real_sdk(yours_first: bool) -> None:
    # The user's hooks see every call (an audit) and deny one; the guard still warns and
    # blocks the loop; a deny wins whichever matcher comes first.
    audited: list[tuple[str, str]] = []

    async def audit(input_data: Any, tool_use_id: str | None, context: Any) -> Any:
        audited.append((input_data["hook_event_name"], str(tool_use_id)))
        if input_data["hook_event_name"] == "PreToolUse" and tool_use_id == "toolu_003":
            reason = "not this one"
            output = {"hookEventName": "PreToolUse", "permissionDecision": "deny"}
            return {"hookSpecificOutput": {**output, "permissionDecisionReason": reason}}
        return {}

    mine = {
        "PreToolUse": [HookMatcher(matcher="mcp__files__.*", hooks=[audit])],
        "PostToolUse": [HookMatcher(hooks=[audit])],
        "Stop": [HookMatcher(hooks=[audit])],
    }
    guard = LoopGuard({"enabled": True})
    hooks = LoopGuardHooks(guard)
    merged = hooks.matchers(existing=mine)
    if not yours_first:
        merged = {event: matchers[::-1] for event, matchers in merged.items()}
    runs: list[str] = []
    cli = StrictestCli(lambda path: runs.append(path) or "the notes", lambda n: {"path": "n.txt"})
    options = ClaudeAgentOptions(hooks=merged)
    messages = [
        m async for m in query(prompt="Summarise notes.txt", options=options, transport=cli)
    ]
    assert isinstance(messages[-1], ResultMessage)
    assert cli.read[3] == "not this one"  # the user's deny won over the guard's allow
    pre = [call for event, call in audited if event == "PreToolUse"]
    post = [call for event, call in audited if event == "PostToolUse"]
    assert pre == [f"toolu_{n:03d}" for n in range(40)]  # every call, denied or not
    assert post == [f"toolu_{n:03d}" for n in range(21) if n != 3]  # the calls that ran
    # The denied call was counted by the guard (admitted before the CLI combined the
    # answers), with no outcome, which repeats no result: the loop is still blocked after
    # 20 runs of the same result, one call later than without the user's deny.
    assert len(runs) == 20
    history = guard.history(session_key="sess-1")
    assert [r.tool_call_id for r in history if r.result_hash is None] == ["toolu_003"]
    assert cli.read[21:] == [SDK_CRITICAL] * 19
