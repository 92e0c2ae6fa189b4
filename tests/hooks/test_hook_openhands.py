"""``loopwatch hook openhands``: the OpenHands SDK's hook payloads (``tests/data/hooks/openhands``).

The per-agent matrix (``test_hook_agents.py``) runs OpenHands' loops through the real hook
process; this file pins what is OpenHands' own: the observation dump as the outcome (its
per-run metadata left out, a failed command an error), calls without ids, the answers.
"""

from __future__ import annotations

import copy
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _hookkit import DATA, HookRunner, context, denied
from hypothesis import given
from hypothesis import strategies as st

from loopwatch import UNDEFINED
from loopwatch.hooks import openhands


@pytest.fixture
def hooks(tmp_path: Path) -> Iterator[HookRunner]:
    runner = HookRunner(tmp_path)
    yield runner
    runner.close()


def _fixture(name: str, command: str = "make test", session: str = "S") -> dict[str, Any]:
    text = (DATA / "openhands" / f"{name}.json").read_text(encoding="utf-8")
    loaded: dict[str, Any] = json.loads(
        text.replace("@COMMAND@", command).replace("@SESSION@", session)
    )
    return loaded


def _post(text: str, exit_code: int | None = 0, **fields: Any) -> dict[str, Any]:
    payload = _fixture("PostToolUse")
    response = payload["tool_response"]
    response["content"][0]["text"] = text
    response["exit_code"] = exit_code
    response["metadata"]["exit_code"] = -1 if exit_code is None else exit_code
    response.update(fields)
    return payload


def _outcome(payload: dict[str, Any]) -> tuple[object, object]:
    event = openhands.parse(payload)
    return event.result, event.error


def test_the_outcome_is_what_the_model_reads_without_the_run_metadata() -> None:
    one = _post("12 passed")
    other_run = copy.deepcopy(one)
    other_run["tool_response"]["metadata"].update(pid=99, hostname="runtime-b", username="u")
    assert (
        _outcome(one)
        == _outcome(other_run)
        == ("12 passed\n[Command finished with exit code 0]", UNDEFINED)
    )
    assert _outcome(_post("11 passed")) != _outcome(one)


def test_a_command_that_exited_non_zero_is_an_error() -> None:
    result, error = _outcome(_post("1 failed", exit_code=1))
    assert result is UNDEFINED
    assert error == "1 failed\n[Command finished with exit code 1]"
    assert _outcome(_post("1 failed", exit_code=2)) != (result, error)


def test_a_command_still_running_past_the_soft_timeout_is_a_result() -> None:
    # exit code -1: the command hit the soft timeout and still runs (a poll loop's shape).
    assert _outcome(_post("building...", exit_code=-1)) == ("building...", UNDEFINED)


def test_an_observation_flagged_is_error_is_an_error() -> None:
    payload = _post("File not found: /x", exit_code=None, is_error=True)
    payload["tool_response"].pop("metadata")
    assert _outcome(payload) == (UNDEFINED, "File not found: /x")


def test_an_observation_without_text_is_compared_whole_without_metadata() -> None:
    payload = _fixture("PostToolUse")
    payload["tool_response"]["content"] = [{"type": "image", "image_urls": ["data:x"]}]
    result, error = _outcome(payload)
    assert error is UNDEFINED and isinstance(result, str)
    assert "image_urls" in result and "48213" not in result and "runtime-7f3a" not in result


@given(st.one_of(st.none(), st.integers(), st.text(), st.lists(st.integers())))
def test_a_tool_response_of_another_shape_never_raises(response: object) -> None:
    payload = _fixture("PostToolUse")
    payload["tool_response"] = response
    event = openhands.parse(payload)
    assert event.kind == "after" and event.error is UNDEFINED


def test_the_events_loopwatch_does_not_hook_are_ignored() -> None:
    for name in ("UserPromptSubmit", "SessionStart", "SessionEnd", "Stop", "", "postToolUse"):
        payload = _fixture("PreToolUse")
        payload["event_type"] = name
        assert openhands.parse(payload).kind == "ignore"


def test_a_batch_of_calls_without_ids_keeps_each_outcome(hooks: HookRunner) -> None:
    # OpenHands runs the PreToolUse hooks of a batch of actions first, then executes them:
    # pre A, pre B, post A, post B, and no event carries a tool-call id.
    for command in ("ls", "make test"):
        assert hooks.inprocess("openhands", json.dumps(_fixture("PreToolUse", command))) == ""
    hooks.inprocess(
        "openhands",
        json.dumps(_post("a.txt") | {"tool_input": _fixture("PreToolUse", "ls")["tool_input"]}),
    )
    hooks.inprocess("openhands", json.dumps(_post("12 passed")))
    store = hooks.store()
    history = store.history("openhands:S", time.time())
    store.close()
    assert len(history) == 2
    assert len({record.args_hash for record in history}) == 2
    assert len({record.result_hash for record in history}) == 2
    assert all(record.result_hash is not None for record in history)


def test_a_loop_of_failing_runs_is_blocked_with_a_deny_the_sdk_reads(hooks: HookRunner) -> None:
    reasons = []
    for _ in range(6):
        pre = hooks.inprocess("openhands", json.dumps(_fixture("PreToolUse")))
        reasons.append(denied("openhands", pre))
        if reasons[-1] is not None:
            answer = json.loads(pre)
            assert set(answer) == {"decision", "reason"}  # HookExecutor's fields
            break
        hooks.inprocess("openhands", json.dumps(_fixture("PostToolUse-failed")))
    assert reasons[0] is None and reasons[-1] is not None
    # The real hook process answers the same, and exits 0 (2 would block without a reason).
    done = hooks.process("openhands", json.dumps(_fixture("PreToolUse")))
    assert done.returncode == 0 and denied("openhands", done.stdout) == reasons[-1]


def test_a_warning_is_the_post_answers_additional_context(hooks: HookRunner) -> None:
    answers = []
    for _ in range(11):
        hooks.inprocess("openhands", json.dumps(_fixture("PreToolUse")), "reference")
        answers.append(
            hooks.inprocess("openhands", json.dumps(_fixture("PostToolUse")), "reference")
        )
    assert answers[:10] == [""] * 10
    warning = context("openhands", answers[10])
    assert warning is not None and warning.startswith("WARNING: You have called ")


def test_a_payload_without_session_id_is_allowed_and_not_recorded(hooks: HookRunner) -> None:
    payload = _fixture("PreToolUse")
    payload["session_id"] = None
    for _ in range(25):
        assert hooks.inprocess("openhands", json.dumps(payload)) == ""
    store = hooks.store()
    assert store.history("openhands:None", time.time()) == ()
    assert store.history("openhands:", time.time()) == ()
    store.close()


def test_an_edit_with_the_sdks_file_editor_is_progress_between_failing_runs(
    hooks: HookRunner,
) -> None:
    # The adaptive profile blocks the third identical failing run in a row; an edit in
    # between (OpenHands' file_editor, a mutating tool) is what a fix looks like.
    def run_tests() -> str | None:
        reason = denied(
            "openhands", hooks.inprocess("openhands", json.dumps(_fixture("PreToolUse")))
        )
        if reason is None:
            hooks.inprocess("openhands", json.dumps(_fixture("PostToolUse-failed")))
        return reason

    edit_input = {
        "command": "str_replace",
        "path": "/workspace/app/app.py",
        "old_str": "return 1",
        "new_str": "return 2",
        "kind": "FileEditorAction",
    }
    edit = _fixture("PreToolUse") | {"tool_name": "file_editor", "tool_input": edit_input}
    edited = _fixture("PostToolUse") | {
        "tool_name": "file_editor",
        "tool_input": edit_input,
        "tool_response": {
            "content": [
                {"type": "text", "text": "The file /workspace/app/app.py has been edited."}
            ],
            "is_error": False,
            "command": "str_replace",
            "path": "/workspace/app/app.py",
            "kind": "FileEditorObservation",
        },
    }
    assert run_tests() is None and run_tests() is None
    assert hooks.inprocess("openhands", json.dumps(edit)) == ""
    hooks.inprocess("openhands", json.dumps(edited))
    assert run_tests() is None  # after the edit: a new attempt, not the third in a row
    assert run_tests() is None
    assert run_tests() is not None  # three identical failures since the edit
