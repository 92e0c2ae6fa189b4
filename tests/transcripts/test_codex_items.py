"""Codex rollouts: every item type Codex writes is read or reported, never passed over.

The item types are ``ResponseItem`` of openai/codex ``codex-rs/protocol/src/models.rs``
(``message``, ``agent_message``, ``reasoning``, ``local_shell_call``, ``function_call``,
``tool_search_call``, ``function_call_output``, ``custom_tool_call``,
``custom_tool_call_output``, ``tool_search_output``, ``web_search_call``,
``image_generation_call``, ``ghost_snapshot``, ``compaction``, ``context_compaction``,
``additional_tools``, ...) and the line types ``RolloutItem`` (``session_meta``,
``response_item``, ``event_msg``, ``turn_context``, ``compacted``, ``world_state``,
``inter_agent_communication``). The refusal shapes (a bare ``apply_patch verification
failed: ...`` string where a patch that applied gets the ``{"output", "metadata"}``
envelope) are those of a real rollout, pinouchon/rtchess
``dev_history/exported-session.jsonl`` @ b8d8edf (Codex 0.60.1, no licence: not copied;
298 calls, 9 ``Exit code: 1`` and 8 ``apply_patch verification failed`` outputs, all 17
read as failures).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from loopwatch import UNDEFINED
from loopwatch.cli import main
from loopwatch.transcripts import TranscriptError, parse_text

META = {"timestamp": "t", "type": "session_meta", "payload": {"id": "s", "cwd": "/w"}}


def _item(payload: dict[str, object]) -> dict[str, object]:
    return {"timestamp": "t", "type": "response_item", "payload": payload}


def _rollout(*lines: dict[str, object]) -> str:
    return "\n".join(json.dumps(line) for line in (META, *lines)) + "\n"


def _call(call_id: str, name: str = "shell_command") -> dict[str, object]:
    return _item(
        {"type": "function_call", "name": name, "arguments": '{"command":"ls"}', "call_id": call_id}
    )


def _output(call_id: str, output: object, kind: str = "function_call_output") -> dict[str, object]:
    return _item({"type": kind, "call_id": call_id, "output": output})


def test_an_unknown_call_item_is_skipped_counted_and_named() -> None:
    text = _rollout(
        _call("c1"),
        _output("c1", "Exit code: 0\nWall time: 0.1 seconds\nOutput:\nok"),
        _item({"type": "hologram_call", "call_id": "h1", "action": {"x": 1}}),
        _item({"type": "hologram_call_output", "call_id": "h1", "output": "done"}),
        _item({"type": "hologram_call", "id": "h2", "action": {"x": 2}}),
    )
    transcript = parse_text(text, path="r.jsonl")
    assert transcript.format == "codex"
    assert transcript.call_count == 1
    assert transcript.skipped_calls == 2  # two calls; the output of the first is theirs
    assert transcript.unmatched_results == 0
    assert any("hologram_call (2)" in note for note in transcript.notes)


def test_an_unknown_output_answering_a_call_read_is_its_outcome() -> None:
    text = _rollout(_call("c1"), _output("c1", "nope", kind="shell_v2_call_output"))
    transcript = parse_text(text, path="r.jsonl")
    (call,) = transcript.runs[0].calls
    assert call.result == "nope" and call.error is UNDEFINED
    assert transcript.skipped_calls == 0 and transcript.unmatched_results == 0


def test_an_unknown_output_of_no_call_is_skipped() -> None:
    text = _rollout(_call("c1"), _output("zz", "x", kind="shell_v2_call_output"))
    transcript = parse_text(text, path="r.jsonl")
    assert transcript.skipped_calls == 1


def test_unknown_types_that_hold_no_call_are_noted_not_doubted() -> None:
    text = _rollout(
        _call("c1"),
        _output("c1", "ok"),
        _item({"type": "holo_summary", "text": "x"}),
        {"timestamp": "t", "type": "brand_new_line", "payload": {}},
    )
    transcript = parse_text(text, path="r.jsonl")
    assert transcript.call_count == 1 and transcript.skipped_calls == 0
    (note,) = [n for n in transcript.notes if "unknown kinds ignored" in n]
    assert "holo_summary (1)" in note and "brand_new_line (1)" in note


def test_the_item_and_line_types_codex_writes_without_calls_pass_in_silence() -> None:
    text = _rollout(
        _item({"type": "ghost_snapshot", "ghost_commit": {"id": "a", "parent": "b"}}),
        _item({"type": "agent_message", "author": "a", "recipient": "b", "content": []}),
        _item({"type": "compaction", "encrypted_content": "x"}),
        _item({"type": "compaction_summary", "encrypted_content": "x"}),
        _item({"type": "context_compaction"}),
        _item({"type": "compaction_trigger"}),
        _item({"type": "additional_tools", "role": "system", "tools": []}),
        _item({"type": "other"}),
        {"timestamp": "t", "type": "world_state", "payload": {}},
        {"timestamp": "t", "type": "inter_agent_communication", "payload": {}},
        {"timestamp": "t", "type": "inter_agent_communication_metadata", "payload": {}},
        {"timestamp": "t", "type": "turn_context", "payload": {"cwd": "/w"}},
        _call("c1"),
        _output("c1", "ok"),
    )
    transcript = parse_text(text, path="r.jsonl")
    assert transcript.call_count == 1
    assert transcript.notes == () and transcript.skipped_calls == 0


def test_every_call_item_codex_writes_is_a_call() -> None:
    text = _rollout(
        _call("c1"),
        _output("c1", "ok"),
        _item(
            {
                "type": "custom_tool_call",
                "call_id": "c2",
                "name": "apply_patch",
                "input": "*** Begin Patch\n*** End Patch",
                "status": "completed",
            }
        ),
        _output("c2", "done", kind="custom_tool_call_output"),
        _item(
            {
                "type": "local_shell_call",
                "call_id": "c3",
                "status": "completed",
                "action": {"type": "exec", "command": ["ls"]},
            }
        ),
        _output("c3", "listing"),
        _item({"type": "tool_search_call", "call_id": "c4", "execution": "x", "arguments": {}}),
        _item(
            {
                "type": "tool_search_output",
                "call_id": "c4",
                "status": "completed",
                "execution": "x",
                "tools": [],
            }
        ),
        _item(
            {"type": "web_search_call", "id": "ws_1", "action": {"type": "search", "query": "q"}}
        ),
        _item({"type": "image_generation_call", "id": "ig_1", "status": "completed", "result": ""}),
    )
    transcript = parse_text(text, path="r.jsonl")
    tools = [call.tool for call in transcript.runs[0].calls]
    assert tools == [
        "shell_command",
        "apply_patch",
        "local_shell",
        "tool_search",
        "web_search",
        "image_generation",
    ]
    assert transcript.unmatched_results == 0 and transcript.skipped_calls == 0
    assert transcript.notes == ()


@pytest.mark.parametrize(
    "text",
    [
        "apply_patch verification failed: Failed to find expected lines in /w/app.js:\nfoo",
        "exec command rejected by user",
        "patch rejected by user",
        "failed to parse function arguments: expected value at line 1 column 1",
        "unsupported call: frobnicate",
        "unsupported custom tool call: frobnicate",
    ],
)
def test_a_codex_refusal_is_a_failure(text: str) -> None:
    rollout = _rollout(
        _item({"type": "custom_tool_call", "call_id": "p1", "name": "apply_patch", "input": "x"}),
        _output("p1", text, kind="custom_tool_call_output"),
    )
    (call,) = parse_text(rollout, path="r.jsonl").runs[0].calls
    assert call.result is UNDEFINED and call.error == text


def test_a_patch_that_applied_is_no_failure() -> None:
    """The real rollout's success shape: the envelope with exit code 0."""
    envelope = json.dumps(
        {
            "output": "Success. Updated the following files:\nM app.js\n",
            "metadata": {"exit_code": 0, "duration_seconds": 0},
        }
    )
    rollout = _rollout(
        _item({"type": "custom_tool_call", "call_id": "p1", "name": "apply_patch", "input": "x"}),
        _output("p1", envelope, kind="custom_tool_call_output"),
    )
    (call,) = parse_text(rollout, path="r.jsonl").runs[0].calls
    assert call.error is UNDEFINED
    assert call.result == "Success. Updated the following files:\nM app.js\n"


def test_the_same_words_inside_an_output_are_no_refusal() -> None:
    rollout = _rollout(_call("c1"), _output("c1", "grep: 'patch rejected' matched 2 lines"))
    (call,) = parse_text(rollout, path="r.jsonl").runs[0].calls
    assert call.error is UNDEFINED


def test_a_legacy_rollout_counts_an_unknown_bare_call_item() -> None:
    lines = [
        {"id": "s", "timestamp": "2025-05-07T17:24:21Z", "instructions": None},
        {"record_type": "state"},
        {"type": "function_call", "name": "shell", "arguments": "{}", "call_id": "c1"},
        {"type": "function_call_output", "call_id": "c1", "output": "ok"},
        {"type": "hologram_call", "call_id": "h1"},
    ]
    text = "\n".join(json.dumps(line) for line in lines)
    transcript = parse_text(text, path="rollout-2025-05-07.jsonl")
    assert transcript.format == "codex"
    assert transcript.call_count == 1 and transcript.skipped_calls == 1


def test_a_response_item_line_without_a_payload_object_is_skipped() -> None:
    text = _rollout(_call("c1"), _output("c1", "ok"), {"type": "response_item", "payload": "x"})
    transcript = parse_text(text, path="r.jsonl")
    assert transcript.call_count == 1 and transcript.skipped_calls == 1


def test_responses_items_count_unknown_calls_too() -> None:
    body = {
        "input": [
            {"type": "function_call", "name": "f", "arguments": "{}", "call_id": "c1"},
            {"type": "function_call_output", "call_id": "c1", "output": "ok"},
            {"type": "hologram_call", "id": "h1"},
        ]
    }
    transcript = parse_text(json.dumps(body), path="req.json")
    assert transcript.format == "openai-responses"
    assert transcript.call_count == 1 and transcript.skipped_calls == 1


def test_the_scan_is_a_doubt_for_skipped_calls(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = tmp_path / "rollout.jsonl"
    path.write_text(
        _rollout(_call("c1"), _output("c1", "ok"), _item({"type": "hologram_call", "id": "h"}))
    )
    code = main(["scan", str(path)])
    out = capsys.readouterr().out
    assert code == 4
    assert "1 record that may hold tool calls not read" in out
    assert "1 skipped" in out  # the row's note cell
    code = main(["scan", str(path), "--json"])
    (entry,) = json.loads(capsys.readouterr().out)["files"]
    assert code == 4 and entry["understood"] is False and entry["skipped_calls"] == 1


def test_an_unknown_kind_that_holds_no_call_keeps_the_all_clear(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = tmp_path / "rollout.jsonl"
    path.write_text(_rollout(_call("c1"), _output("c1", "ok"), _item({"type": "holo_summary"})))
    assert main(["scan", str(path)]) == 0
    assert "holo_summary (1)" in capsys.readouterr().out


_KINDS = st.one_of(
    st.sampled_from(["function_call", "function_call_output", "message", "hologram_call"]),
    st.text(max_size=12),
    st.integers(),
    st.none(),
)
_VALUES = st.one_of(st.none(), st.text(max_size=8), st.integers(), st.lists(st.integers()))


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.fixed_dictionaries(
            {"type": _KINDS},
            optional={
                "call_id": _VALUES,
                "id": _VALUES,
                "name": _VALUES,
                "output": _VALUES,
                "arguments": _VALUES,
            },
        ),
        max_size=8,
    )
)
def test_any_items_are_read_or_reported(items: list[dict[str, object]]) -> None:
    """Whatever the items, a rollout is read or rejected; each typed item is accounted."""
    try:
        transcript = parse_text(_rollout(*(_item(i) for i in items)), path="r.jsonl")
    except TranscriptError:
        return
    unknown_calls = [
        i
        for i in items
        if isinstance(i["type"], str)
        and i["type"].endswith(("_call", "_output"))
        and i["type"] not in ("function_call", "function_call_output")
    ]
    if unknown_calls:
        assert transcript.skipped_calls or transcript.call_count or transcript.notes
    assert transcript.call_count <= sum(1 for i in items if i["type"] == "function_call")


def test_a_namespaced_call_is_named_as_codex_dispatches_it() -> None:
    text = _rollout(
        _item(
            {
                "type": "function_call",
                "name": "gmail_get_recent_emails",
                "namespace": "mcp__codex_apps__gmail",
                "arguments": "{}",
                "call_id": "c1",
            }
        ),
        _item({"type": "function_call", "name": "shell", "arguments": "{}", "call_id": "c2"}),
    )
    tools = [call.tool for call in parse_text(text, path="r.jsonl").runs[0].calls]
    assert tools == ["mcp__codex_apps__gmail:gmail_get_recent_emails", "shell"]
