"""``loopwatch hook`` never gets in the agent's way: bad input, bad flags and a broken
store all end with exit 0, the host's "no opinion" answer and no traceback; the reason
goes to the log file in the state folder. Also ``loopwatch hook status``.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _hookkit import ALLOW, HookRunner, payload
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from loopwatch import LoopGuard, MemoryStore
from loopwatch.hooks import AGENTS, HookResult, run_hook


@pytest.fixture
def hooks(tmp_path: Path) -> Iterator[HookRunner]:
    runner = HookRunner(tmp_path)
    yield runner
    runner.close()


def _missing_fields(agent: str) -> str:
    data = json.loads(payload(agent, "pre", session="S", call="c"))
    for key in ("session_id", "conversation_id", "tool_name", "input"):
        data.pop(key, None)
    return json.dumps(data)


def _unknown_event(agent: str) -> str:
    data = json.loads(payload(agent, "pre", session="S", call="c"))
    data["hook_event_name" if "hook_event_name" in data else "event"] = "SomethingNew"
    return json.dumps(data)


def _deeply_nested_input(agent: str) -> str:
    data = json.loads(payload(agent, "pre", session="S", call="c"))
    place = data["output"] if agent == "opencode" else data
    place["args" if agent == "opencode" else "tool_input"] = "@DEEP@"
    return _deep_input_text(json.dumps(data))


def _deep_input_text(text: str) -> str:
    return text.replace('"@DEEP@"', "[" * 100_000 + "]" * 100_000)


BAD_INPUTS: dict[str, Any] = {
    "not-json": lambda agent: '{"session_id": "S", "hook_event_name": ',
    "empty": lambda agent: "",
    "not-an-object": lambda agent: '["PreToolUse"]',
    "invalid-utf8": lambda agent: "\udcff{}",
    "missing-fields": _missing_fields,
    "unknown-event": _unknown_event,
    "nested-too-deeply": lambda agent: "[" * 100_000 + "]" * 100_000,
    "input-nested-too-deeply": _deeply_nested_input,
}


def _assert_clean(done: Any, agent: str) -> None:
    assert done.returncode == 0
    assert done.stdout.strip() == ALLOW[agent]
    assert "Traceback" not in done.stdout + done.stderr


@pytest.mark.parametrize("case", sorted(BAD_INPUTS))
@pytest.mark.parametrize("agent", AGENTS)
def test_bad_input_is_allowed_quietly(hooks: HookRunner, agent: str, case: str) -> None:
    stdin = BAD_INPUTS[case](agent).encode("utf-8", "surrogateescape").decode("utf-8", "replace")
    done = hooks.process(agent, stdin)
    _assert_clean(done, agent)
    assert done.stderr == ""


@pytest.mark.parametrize("agent", AGENTS)
def test_a_broken_store_allows_and_logs_why(hooks: HookRunner, agent: str, tmp_path: Path) -> None:
    folder = tmp_path / "a-folder.db"
    folder.mkdir()
    done = hooks.process(
        agent, payload(agent, "pre", session="S", call="c"), "--store", f"sqlite://{folder}"
    )
    _assert_clean(done, agent)
    log = (hooks.state / "loopwatch" / "hook.log").read_text(encoding="utf-8")
    assert "no guard" in log and "allowing" in log
    assert (hooks.state / "loopwatch" / "hook.log").stat().st_mode & 0o777 == 0o600


def test_an_unreachable_redis_allows(hooks: HookRunner) -> None:
    done = hooks.process(
        "gemini",
        payload("gemini", "pre", session="S", call="c"),
        LOOPWATCH_STORE="redis://127.0.0.1:9/0",
    )
    _assert_clean(done, "gemini")


@pytest.mark.parametrize(
    "flags",
    [("--profile", "bogus"), ("--no-such-flag",), ("--config", "/nonexistent/openclaw.json")],
    ids=["bad-profile", "unknown-flag", "missing-config"],
)
def test_bad_flags_exit_zero_without_a_traceback(hooks: HookRunner, flags: tuple[str, ...]) -> None:
    done = hooks.process("gemini", payload("gemini", "pre", session="S", call="c"), *flags)
    assert done.returncode == 0  # any other code would block the call in Gemini CLI
    assert done.stdout.strip() == "{}"
    assert "Traceback" not in done.stderr


def test_an_unknown_agent_exits_zero(hooks: HookRunner) -> None:
    done = hooks.process("vim", '{"session_id": "S"}')
    assert (done.returncode, done.stdout) == (0, "")
    assert "Traceback" not in done.stderr


def test_a_config_file_sets_thresholds_and_profile(hooks: HookRunner, tmp_path: Path) -> None:
    config = tmp_path / "openclaw.json5"
    config.write_text(
        "{tools: {loopDetection: {enabled: true, warningThreshold: 1, criticalThreshold: 2}},"
        " loopwatch: {profile: 'reference'}}",
        encoding="utf-8",
    )
    answers = []
    for index in range(3):
        pre = hooks.process(
            "codex", payload("codex", "pre", session="S", call=f"c{index}"), "--config", str(config)
        )
        answers.append(pre.stdout)
        hooks.process(
            "codex",
            payload("codex", "post", session="S", call=f"c{index}"),
            "--config",
            str(config),
        )
    assert answers[0] == answers[1] == ""
    assert (
        "CRITICAL: Called exec with identical arguments and identical outcomes 2 times"
        in answers[2]
    )


WARN_AT_THIRD_CONFIG = (
    "{loopwatch: {profile: 'adaptive', adaptive: {identicalStreak: {warn: 3, block: 4}}}}"
)


def test_status_shows_what_the_guard_saw(hooks: HookRunner, tmp_path: Path) -> None:
    # Thresholds that warn at the third identical call (the default blocks it, issue 15).
    config = tmp_path / "warn-at-3.json5"
    config.write_text(WARN_AT_THIRD_CONFIG)
    for index in range(3):
        pre = payload("codex", "pre", session="S", call=f"c{index}")
        hooks.process("codex", pre, "--config", str(config))
        post = payload("codex", "post", session="S", call=f"c{index}")
        hooks.process("codex", post, "--config", str(config))
    listing = hooks.process("status", "")
    assert listing.returncode == 0
    assert "codex:S  3 records" in listing.stdout
    shown = hooks.process("status", "", "--agent", "codex", "--session", "S", "--json")
    assert shown.returncode == 0
    document = json.loads(shown.stdout)
    assert [r["tool_call_id"] for r in document["records"]] == ["c0", "c1", "c2"]
    assert all(r["run_id"] == "turn-1" and r["outcome"] for r in document["records"])
    assert document["warning_buckets"]  # the adaptive warning of the third call
    text = hooks.process("status", "", "--agent", "codex", "--session", "S")
    assert "session: codex:S, 3 records" in text.stdout and "id c2 run turn-1" in text.stdout


def test_status_of_a_bad_store_is_a_usage_error(hooks: HookRunner) -> None:
    done = hooks.process("status", "", "--store", "nosuch://x")
    assert done.returncode == 2 and "cannot open" in done.stderr


# --- in process: run_hook never raises, whatever the payload ------------------------------

_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)
_FIELDS = st.fixed_dictionaries(
    {},
    optional={
        "hook_event_name": st.sampled_from(
            [
                "PreToolUse",
                "PostToolUse",
                "PostToolUseFailure",
                "PreCompact",
                "BeforeTool",
                "AfterTool",
                "PreCompress",
                "preToolUse",
                "postToolUse",
                "postToolUseFailure",
                "preCompact",
                "x",
            ]
        ),
        "event": st.sampled_from(
            ["tool.execute.before", "tool.execute.after", "session.compacted"]
        ),
        "session_id": _JSON,
        "conversation_id": _JSON,
        "tool_name": _JSON,
        "tool_input": _JSON,
        "tool_use_id": _JSON,
        "transcript_path": st.one_of(_JSON, st.sampled_from(["/dev/null.jsonl", "/tmp", "/"])),
        "tool_response": _JSON,
        "error": _JSON,
        "input": _JSON,
        "output": _JSON,
    },
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(agent=st.sampled_from(AGENTS), fields=_FIELDS)
def test_run_hook_answers_any_payload(agent: str, fields: dict[str, Any]) -> None:
    guard = LoopGuard({"enabled": True}, store=MemoryStore(), profile="adaptive")
    for _ in range(2):
        result = run_hook(agent, json.dumps(fields), guard)
        assert isinstance(result, HookResult) and result.exit_code == 0
        if result.stdout or agent in ("gemini", "cursor", "opencode"):
            assert isinstance(json.loads(result.stdout), dict)


@settings(max_examples=100, deadline=None)
@given(agent=st.sampled_from(AGENTS), text=st.text(max_size=40))
def test_run_hook_answers_any_text(agent: str, text: str) -> None:
    guard = LoopGuard({"enabled": True}, store=MemoryStore())
    result = run_hook(agent, text, guard)
    assert result.exit_code == 0 and result.stderr == ""


def test_a_payload_nested_too_deeply_is_allowed_and_logged(hooks: HookRunner) -> None:
    done = hooks.process("gemini", "[" * 100_000)
    _assert_clean(done, "gemini")
    log = (hooks.state / "loopwatch" / "hook.log").read_text()
    assert "the payload is nested too deeply to read" in log
    assert "crashed" not in log


@settings(max_examples=40, deadline=None)
@given(
    agent=st.sampled_from(AGENTS),
    depth=st.integers(min_value=1, max_value=20_000),
    opener=st.sampled_from(["[", '{"a":', '{"tool_input":']),
    closed=st.booleans(),
)
def test_run_hook_answers_any_nesting(agent: str, depth: int, opener: str, closed: bool) -> None:
    closer = "]" if opener == "[" else "}"
    text = opener * depth + (("0" if opener != "[" else "") + closer * depth if closed else "")
    guard = LoopGuard({"enabled": True}, store=MemoryStore())
    result = run_hook(agent, text, guard)
    assert isinstance(result, HookResult) and result.exit_code == 0


def test_a_warning_waits_for_its_own_call_in_memory() -> None:
    # In one process (loopwatch serve, tests): notes live in memory beside the store.
    guard = LoopGuard(
        {"enabled": True},
        store=MemoryStore(),
        profile="adaptive",
        adaptive={"identicalStreak": {"warn": 3, "block": 4}},
    )
    told = []
    for index in range(3):
        run_hook("claude-code", payload("claude-code", "pre", session="M", call=f"c{index}"), guard)
        post = run_hook(
            "claude-code", payload("claude-code", "post", session="M", call=f"c{index}"), guard
        )
        told.append(post.stdout)
    assert told[:2] == ["", ""] and "WARNING" in told[2]


@pytest.mark.parametrize("agent", ["claude-code", "cursor"])
def test_a_tool_the_user_interrupted_is_no_outcome(hooks: HookRunner, agent: str) -> None:
    # Both send is_interrupt with a failure (Cursor's postToolUseFailure as hook projects
    # read it: failure_type, is_interrupt, error_message).
    hooks.inprocess(agent, payload(agent, "pre", session="I", call="c1"))
    stopped = json.loads(payload(agent, "fail", session="I", call="c1"))
    stopped["is_interrupt"] = True
    assert hooks.inprocess(agent, json.dumps(stopped)) == ALLOW[agent]
    store = hooks.store()
    (record,) = store.history(f"{agent}:I", time.time())
    store.close()
    assert record.result_hash is None  # still pending: neither a result nor an error
