"""The shared adapter logic (SPEC §11), the ``with`` form and the decorator."""

from __future__ import annotations

import inspect
import subprocess
import sys
from typing import Any

import pytest
from integration_support import (
    ARGS,
    BLOCK_AT,
    CONFIG,
    CRITICAL,
    RESULT,
    TOOL,
    WARN_AT,
    WARNED_RESULT,
    WARNING,
    Counter,
    make_guard,
)

from loopwatch import (
    UNDEFINED,
    LoopDetectedError,
    LoopGuard,
    PostCompactionLoopPersistedError,
    hash_tool_call,
    hash_tool_outcome,
)
from loopwatch import messages as texts
from loopwatch.adapter import (
    NO_OUTCOME_REPORTED,
    AdapterOptions,
    Outcome,
    QueuedIds,
    SessionCache,
    StreamGuards,
    TextTranslator,
    ToolCall,
    aguarded_call,
    append_warning,
    call,
    call_params,
    guarded_call,
    tool,
    unknown_tool_error,
)

S = "session-1"


def guarded_loop(guard: LoopGuard, times: int, **kw: Any) -> list[ToolCall]:
    """``times`` identical calls in the ``with`` form; the tool runs unless blocked."""
    done = []
    for _ in range(times):
        with call(guard, TOOL, dict(ARGS), session_key=S, **kw) as c:
            if not c.blocked:
                c.result(RESULT)
        done.append(c)
    return done


# --- options and texts -----------------------------------------------------------------------


def test_options_are_validated_once() -> None:
    assert AdapterOptions() == AdapterOptions(warn_model=True, on_critical="block_call")
    with pytest.raises(ValueError, match="on_critical"):
        AdapterOptions(on_critical="crash")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="warn_model"):
        AdapterOptions(warn_model="yes")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("message", "recorded"),
    [
        (None, "Unknown tool: open_file"),
        ("Unknown tool: open_file", "Unknown tool: open_file"),
        ("Tool open_file not found", "Tool open_file not found"),
        # LangChain's wording does not name the tool for SPEC §3.5...
        ("Error: open_file is not a valid tool, try one of [read].", "Unknown tool: open_file"),
        # ...and pydantic-ai's names the wrong one ("name").
        ("Unknown tool name: 'open_file'. Available tools: 'read'", "Unknown tool: open_file"),
        ("Unknown tool: other", "Unknown tool: open_file"),
    ],
)
def test_unknown_tool_error_names_the_tool(message: str | None, recorded: str) -> None:
    assert unknown_tool_error("open_file", message) == recorded
    assert hash_tool_outcome("open_file", {}, error=recorded).unknown_tool_name == "open_file"


@pytest.mark.parametrize(
    ("shown", "expected"),
    [
        ("result", "result\n\nW"),
        ("", "W"),
        (None, "W"),
        (
            [{"type": "text", "text": "a"}],
            [{"type": "text", "text": "a"}, {"type": "text", "text": "W"}],
        ),
        (
            {"content": [{"type": "text", "text": "a"}], "isError": False},
            {
                "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "W"}],
                "isError": False,
            },
        ),
        ({"rows": 2}, '{"rows": 2}\n\nW'),
        (42, "42\n\nW"),
    ],
)
def test_append_warning_keeps_the_shape(shown: object, expected: object) -> None:
    assert append_warning(shown, "W") == expected


# --- the with form -----------------------------------------------------------------------------


def test_with_form_warns_then_blocks() -> None:
    guard, events = make_guard()
    calls = guarded_loop(guard, BLOCK_AT + 1)
    assert [c.shown for c in calls[: WARN_AT - 1]] == [RESULT] * (WARN_AT - 1)
    assert calls[WARN_AT - 1].warning == WARNING
    assert calls[WARN_AT - 1].shown == WARNED_RESULT
    assert calls[WARN_AT].shown == RESULT
    for blocked in calls[BLOCK_AT - 1 :]:
        assert blocked.blocked and blocked.shown == CRITICAL and blocked.record is None
    assert [e.type for e in events][-2:] == ["tool.loop", "tool.execution.blocked"]


def test_the_original_result_is_recorded_before_the_warning() -> None:
    guard, _ = make_guard()
    calls = guarded_loop(guard, WARN_AT)
    hashes = {c.record.result_hash for c in calls if c.record is not None}
    assert hashes == {hash_tool_outcome(TOOL, ARGS, result=RESULT).result_hash}


def test_with_form_end_run_raises_before_the_body() -> None:
    guard, _ = make_guard()
    guarded_loop(guard, BLOCK_AT - 1)
    ran = False
    with (
        pytest.raises(LoopDetectedError) as caught,
        call(guard, TOOL, dict(ARGS), session_key=S, on_critical="end_run") as c,
    ):
        ran = True
        c.result(RESULT)
    assert not ran
    assert caught.value.verdict.count == 12 and str(caught.value) == CRITICAL


def test_with_form_shadow_mode_never_blocks() -> None:
    guard, events = make_guard(enforce=False)
    calls = guarded_loop(guard, BLOCK_AT + 2, on_critical="end_run")
    assert not any(c.blocked for c in calls)
    assert calls[-1].decision.action == "block" and not calls[-1].decision.enforced
    assert calls[-1].shown == RESULT  # a would-be block is never shown
    assert not any(e.type == "tool.execution.blocked" for e in events)


def test_an_exception_is_recorded_as_the_error_and_propagates() -> None:
    guard, _ = make_guard()
    with pytest.raises(OSError, match="disk"), call(guard, TOOL, ARGS, session_key=S) as c:
        raise OSError("disk on fire")
    assert c.shown is None
    assert c.record is not None
    assert (
        c.record.result_hash
        == hash_tool_outcome(TOOL, ARGS, error=OSError("disk on fire")).result_hash
    )


def test_error_text_is_shown_with_the_warning() -> None:
    guard, _ = make_guard()
    for _ in range(WARN_AT - 1):
        with call(guard, TOOL, ARGS, session_key=S) as c:
            c.error("permission denied")
    with call(guard, TOOL, ARGS, session_key=S) as c:
        c.error("permission denied")
    assert c.shown == f"permission denied\n\n{WARNING}"


def test_none_is_a_real_result_and_undefined_is_refused() -> None:
    guard, _ = make_guard()
    with call(guard, TOOL, ARGS, session_key=S) as c:
        c.result(None)
    assert c.record is not None
    assert c.record.result_hash == hash_tool_outcome(TOOL, ARGS, result=None).result_hash
    with call(guard, TOOL, ARGS, session_key=S) as c:
        with pytest.raises(ValueError, match="UNDEFINED"):
            c.error(UNDEFINED)
        c.result("ok")


def test_misuse_is_reported() -> None:
    guard, _ = make_guard()
    with pytest.raises(RuntimeError) as caught, call(guard, TOOL, ARGS, session_key=S):
        pass
    assert str(caught.value) == NO_OUTCOME_REPORTED.format(tool=TOOL)
    tc = call(guard, TOOL, ARGS, session_key=S)
    with pytest.raises(RuntimeError, match="not started"):
        tc.result(1)
    with pytest.raises(RuntimeError, match="not started"):
        _ = tc.decision
    with tc:
        tc.result(1)
        with pytest.raises(RuntimeError, match="already reported"):
            tc.result(2)
        with pytest.raises(RuntimeError, match="not finished"):
            _ = tc.shown
    with pytest.raises(RuntimeError, match="already started"):
        tc.start()
    guarded_loop(guard, BLOCK_AT)
    with (
        call(guard, TOOL, dict(ARGS), session_key=S) as blocked,
        pytest.raises(RuntimeError, match="blocked"),
    ):
        blocked.result(RESULT)


def test_a_missing_session_key_says_how_to_pass_it() -> None:
    guard, _ = make_guard()

    def read_file(path: str) -> str:
        return RESULT

    for attempt in (lambda: guard.tool(read_file), lambda: guard.tool()):
        with pytest.raises(TypeError) as caught:
            attempt()
        assert str(caught.value).startswith("guard.tool needs session_key=")
        assert '@guard.tool(session_key="thread-1")' in str(caught.value)
    with pytest.raises(TypeError, match=r"not a bare @guard\.tool$"):
        guard.tool(read_file)
    with pytest.raises(TypeError, match=r'^guard.call needs session_key=.*session_key="thread-1"'):
        guard.call(TOOL, dict(ARGS))
    # Passed, it works as before (None included: "no session", logged, not guarded).
    assert guard.tool(read_file, session_key=S)(**ARGS) == RESULT
    with guard.call(TOOL, dict(ARGS), session_key=None) as c:
        c.result(RESULT)
    assert c.shown == RESULT


def test_cancellation_leaves_the_call_pending() -> None:
    guard, _ = make_guard()
    with pytest.raises(KeyboardInterrupt), call(guard, TOOL, ARGS, session_key=S):
        raise KeyboardInterrupt
    (record,) = guard.history(session_key=S)
    assert record.result_hash is None


async def test_async_with_form() -> None:
    guard, _ = make_guard()
    shown = []
    for _ in range(BLOCK_AT):
        async with call(guard, TOOL, dict(ARGS), session_key=S) as c:
            if not c.blocked:
                c.result(RESULT)
        shown.append(c.shown)
    assert shown[WARN_AT - 1] == WARNED_RESULT
    assert shown[BLOCK_AT - 1] == CRITICAL


def test_a_post_compaction_abort_ends_the_run() -> None:
    guard, _ = make_guard()
    guard.compaction_retry(session_key=S)
    guarded_loop(guard, 2)
    with (
        pytest.raises(PostCompactionLoopPersistedError),
        call(guard, TOOL, dict(ARGS), session_key=S) as c,
    ):
        c.result(RESULT)


def test_without_a_session_nothing_happens() -> None:
    guard, _ = make_guard()
    for _ in range(BLOCK_AT + 1):
        with call(guard, TOOL, ARGS, session_key=None) as c:
            c.result(RESULT)
        assert c.shown == RESULT
    assert guard.history(session_key="") == ()


# --- guarded_call ----------------------------------------------------------------------------


class Labels:
    """A framework whose answers are ``("ok" | "err" | "blocked", text)`` pairs."""

    def blocked(self, message: str) -> tuple[str, str]:
        return ("blocked", message)

    def outcome(self, answer: tuple[str, str]) -> Outcome:
        kind, text = answer
        return Outcome(error=text) if kind == "err" else Outcome(result=text)

    def add_warning(self, answer: tuple[str, str], warning: str) -> tuple[str, str]:
        return (answer[0], f"{answer[1]} [{warning}]")


def new_call(guard: LoopGuard, **kw: Any) -> ToolCall:
    return ToolCall(guard, TOOL, dict(ARGS), session_key=S, **kw)


def test_guarded_call_with_a_translator() -> None:
    guard, _ = make_guard()
    counter = Counter()
    answers = [
        guarded_call(new_call(guard), lambda: ("ok", counter()), Labels()) for _ in range(BLOCK_AT)
    ]
    assert answers[WARN_AT - 1] == ("ok", f"{RESULT} [{WARNING}]")
    assert answers[BLOCK_AT - 1] == ("blocked", CRITICAL)
    assert counter.calls == BLOCK_AT - 1


def test_guarded_call_records_errors_and_reraises() -> None:
    guard, _ = make_guard()

    def boom() -> tuple[str, str]:
        raise ValueError("bad")

    with pytest.raises(ValueError, match="bad"):
        guarded_call(new_call(guard), boom, Labels())
    guarded_call(new_call(guard), lambda: ("err", "denied"), Labels())
    first, second = guard.history(session_key=S)
    assert first.result_hash == hash_tool_outcome(TOOL, ARGS, error=ValueError("bad")).result_hash
    assert second.result_hash == hash_tool_outcome(TOOL, ARGS, error="denied").result_hash


def test_guarded_call_end_run() -> None:
    guard, _ = make_guard()
    options = AdapterOptions(on_critical="end_run")
    for _ in range(BLOCK_AT - 1):
        guarded_call(new_call(guard, options=options), lambda: RESULT, TextTranslator())
    with pytest.raises(LoopDetectedError):
        guarded_call(new_call(guard, options=options), lambda: RESULT, TextTranslator())


async def test_aguarded_call() -> None:
    guard, _ = make_guard()

    async def run() -> object:
        return RESULT

    answers = [await aguarded_call(new_call(guard), run, TextTranslator()) for _ in range(BLOCK_AT)]
    assert answers[WARN_AT - 1] == WARNED_RESULT
    assert answers[BLOCK_AT - 1] == CRITICAL

    async def fails() -> object:
        raise KeyError("k")

    with pytest.raises(KeyError):
        await aguarded_call(ToolCall(guard, "other", {}, session_key=S), fails, TextTranslator())


# --- the decorator --------------------------------------------------------------------------


def test_decorator_warns_then_blocks_without_calling() -> None:
    guard, _ = make_guard()
    counter = Counter()

    @tool(guard, session_key=S)
    def read_file(path: str) -> str:
        return counter()

    answers = [read_file(**ARGS) for _ in range(BLOCK_AT)]
    assert answers[WARN_AT - 1] == WARNED_RESULT
    assert answers[BLOCK_AT - 1] == CRITICAL
    assert counter.calls == BLOCK_AT - 1
    assert read_file.__name__ == "read_file"


async def test_decorator_on_a_coroutine_function() -> None:
    guard, _ = make_guard()
    counter = Counter()

    async def read_file(path: str) -> str:
        return counter()

    guarded = tool(guard, read_file, session_key=S)
    answers = [await guarded(**ARGS) for _ in range(BLOCK_AT)]
    assert answers[WARN_AT - 1] == WARNED_RESULT
    assert answers[BLOCK_AT - 1] == CRITICAL
    assert counter.calls == BLOCK_AT - 1


def test_decorator_hashes_the_arguments_by_name() -> None:
    guard, _ = make_guard()

    @tool(guard, session_key=S, name=TOOL)
    def read(path: str, encoding: str = "utf-8", *rest: Any, **extra: Any) -> str:
        return RESULT

    read("notes.txt")
    read(path="notes.txt")
    read("notes.txt", "latin-1", 1, 2, mode="r")
    plain, named, everything = guard.history(session_key=S)
    assert plain.args_hash == named.args_hash  # positional or keyword: the same call
    assert plain.tool_name == TOOL
    expected = {"path": "notes.txt", "encoding": "latin-1", "rest": [1, 2], "mode": "r"}
    assert everything.args_hash == hash_tool_call(TOOL, expected)


def test_call_params() -> None:
    def f(a: int, b: int = 2, **kw: Any) -> None: ...

    sig = inspect.signature(f)
    assert call_params(sig, (1,), {}) == {"a": 1}
    assert call_params(sig, (), {"a": 1, "z": 3}) == {"a": 1, "z": 3}
    # Arguments that do not bind are kept as given (the call then fails as it would).
    assert call_params(sig, (1, 2, 3), {}) == {"args": [1, 2, 3]}


def test_decorator_reads_the_session_and_run_on_every_call() -> None:
    guard, _ = make_guard()
    current = {"session": "a", "run": "r1"}

    @tool(guard, session_key=lambda: current["session"], run_id=lambda: current["run"])
    def read_file(path: str) -> str:
        return RESULT

    read_file(**ARGS)
    current.update(session="b", run="r2")
    read_file(**ARGS)
    assert [r.run_id for r in guard.history(session_key="a")] == ["r1"]
    assert [r.run_id for r in guard.history(session_key="b")] == ["r2"]


def test_decorator_errors_end_run_and_warn_model_off() -> None:
    guard, _ = make_guard()

    @tool(guard, session_key=S, warn_model=False, on_critical="end_run")
    def read_file(path: str) -> str:
        return RESULT

    answers = [read_file(**ARGS) for _ in range(BLOCK_AT - 1)]
    assert answers == [RESULT] * (BLOCK_AT - 1)
    with pytest.raises(LoopDetectedError):
        read_file(**ARGS)

    @tool(guard, session_key="other")
    def broken(path: str) -> str:
        raise FileNotFoundError(path)

    with pytest.raises(FileNotFoundError):
        broken("x")
    (record,) = guard.history(session_key="other")
    assert record.result_hash is not None and record.result_hash.startswith("error:")


def test_decorator_renders_other_values_with_the_warning() -> None:
    guard, _ = make_guard()

    @tool(guard, session_key=S, name=TOOL)
    def rows(path: str) -> dict[str, int]:
        return {"rows": 2}

    answers = [rows(**ARGS) for _ in range(WARN_AT)]
    assert answers[0] == {"rows": 2}
    assert answers[WARN_AT - 1] == f'{{"rows": 2}}\n\n{WARNING}'


# --- per-session state ----------------------------------------------------------------------


def test_stream_guards_replace_a_message_that_keeps_calling_a_missing_tool() -> None:
    guard = LoopGuard({**CONFIG, "unknownToolThreshold": 2})
    streams = StreamGuards(guard)
    allowed = [TOOL]
    seen = [streams.observe(S, ["open_file"], allowed) for _ in range(3)]
    assert seen == [None, None, texts.UNKNOWN_TOOL_STREAM.format(name="open_file")]
    # A new tool set keeps the streak; an allowed call resets it.
    assert streams.observe(S, ["open_file"], [TOOL, "write"]) is not None
    assert streams.observe(S, [TOOL], [TOOL, "write"]) is None
    assert streams.observe(S, ["open_file"], allowed) is None
    assert streams.observe(None, ["open_file"] * 1, allowed) is None
    assert streams.observe("  ", ["open_file"], allowed) is None


def test_stream_guards_default_threshold() -> None:
    streams = StreamGuards(LoopGuard())
    answers = [streams.observe(S, ["nope"], [TOOL]) for _ in range(11)]
    assert answers[:10] == [None] * 10 and answers[10] is not None


def test_session_cache_is_bounded() -> None:
    cache: SessionCache[int] = SessionCache(max_sessions=2)
    cache.put("a", 1)
    cache.put("b", 2)
    assert cache.get("a") == 1  # "a" is now the most recent
    cache.put("c", 3)
    assert (cache.get("a"), cache.get("b"), cache.get("c")) == (1, None, 3)
    assert cache.pop("a") == 1 and cache.pop("a") is None
    assert len(cache) == 1


# --- packaging ------------------------------------------------------------------------------


def test_importing_loopwatch_imports_no_framework() -> None:
    code = (
        "import sys, loopwatch, loopwatch.adapter, loopwatch.integrations\n"
        "heavy = ['langchain', 'langchain_core', 'langgraph', 'agents', 'openai',\n"
        "         'pydantic_ai', 'mcp']\n"
        "print([m for m in heavy if m in sys.modules])\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "[]"


def test_queued_ids_hand_out_a_turns_ids_by_name_and_arguments() -> None:
    ids = QueuedIds()
    ids.queue([("read", {"p": 1}, "a"), ("read", {"p": 1}, "b"), ("list", {}, "c")])
    assert ids.take("list", {}) == "c"
    assert ids.take("read", {"p": 1}) == "a"
    assert ids.take("read", {"p": 1}) == "b"
    assert ids.take("read", {"p": 1}) is None  # more calls than the turn had
    assert ids.take("read", {"p": 2}) is None
    ids.queue([("read", {"p": 1}, "d")])
    ids.queue([("list", {}, "e")])  # a new turn drops what the last one left
    assert ids.take("read", {"p": 1}) is None
    ids.queue([("read", {"p": 1}, "f")], replace=False)
    assert (ids.take("list", {}), ids.take("read", {"p": 1})) == ("e", "f")
