"""Each reader on its samples (tests/data/transcripts/<format>/): format, calls, outcomes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from loopwatch import UNDEFINED
from loopwatch.transcripts import ReplayCall, Transcript, parse_text, read_transcript

DATA = Path(__file__).resolve().parents[1] / "data" / "transcripts"


def _read(relative: str) -> Transcript:
    return read_transcript(DATA / relative)


def _calls(transcript: Transcript) -> list[ReplayCall]:
    return [call for run in transcript.runs for call in run.calls]


@pytest.mark.parametrize(
    ("relative", "fmt", "runs", "calls"),
    [
        ("swe-agent/BabyEncryption.traj", "swe-agent", 1, 16),
        ("swe-agent/rock.first3.traj", "swe-agent", 1, 3),
        ("mini-swe-agent/astropy__astropy-12907.traj.json", "mini-swe-agent", 1, 20),
        ("openhands/output.jsonl", "openhands", 1, 23),
        ("openhands/v1-openagentsafety-output.jsonl", "openhands", 2, 18),
        ("openhands/v1-conversation/events", "openhands", 1, 2),
        ("tau-bench/gpt-4o-airline.first3.json", "tau-bench", 3, 15),
        ("tau2-bench/whissle-airline.first-two.json", "tau2-bench", 2, 10),
        ("cline/api_conversation_history.json", "cline", 1, 5),
        ("cline/xml_api_conversation_history.json", "cline", 1, 3),
        (
            "codex/rollout-2025-10-29T01-00-00-0199aa00-0000-7000-8000-000000000001.jsonl",
            "codex",
            1,
            5,
        ),
        ("codex/rollout-2025-05-07T17-24-21-legacy.jsonl", "codex", 1, 2),
        (
            "codex/rollout-2026-02-23T12-40-09-019c8a4c-0000-7000-8000-000000000007.jsonl",
            "codex",
            1,
            6,
        ),
        ("openai-responses/request.json", "openai-responses", 1, 4),
        ("anthropic/server_tools.json", "anthropic", 1, 5),
        ("openai-responses/builtin_tools.json", "openai-responses", 1, 8),
        ("gemini-cli/session-2025-09-18T10-00-8a1f3c52.json", "gemini-cli", 1, 4),
        ("gemini-cli/checkpoint-before-fix.json", "gemini-cli", 1, 2),
        ("gemini-cli/session-2026-05-19T02-28-8b2e4f10.jsonl", "gemini-cli", 1, 7),
        ("cursor/3f1c9d2e-agent-transcript.jsonl", "cursor", 1, 4),
        ("cursor/agent-transcripts/4b7d2e10-9c3a-4f1e-8d55-2a6b0c9e7f31.txt", "cursor", 1, 5),
        ("claude-code-sdk/stream.jsonl", "claude-code-sdk", 2, 4),
        ("claude-code-sdk/claude-execution-output.json", "claude-code-sdk", 2, 4),
        ("openclaw-trajectory/b475ccf4.trajectory.jsonl", "openclaw-trajectory", 1, 3),
    ],
)
def test_sample_format_and_call_count(relative: str, fmt: str, runs: int, calls: int) -> None:
    transcript = _read(relative)
    assert transcript.format == fmt
    assert len(transcript.runs) == runs
    assert transcript.call_count == calls
    assert transcript.unmatched_results == 0


def test_swe_agent_steps_are_commands_with_observations() -> None:
    first = _calls(_read("swe-agent/BabyEncryption.traj"))[0]
    assert first.tool == "open"
    assert first.args == {"command": "open chall.py"}
    assert isinstance(first.result, str) and first.result
    assert first.error is UNDEFINED


def test_swe_agent_timed_out_commands_are_failures() -> None:
    """0.x appends ``EXECUTION TIMED OUT`` (real sample); 1.x renders its cancel template."""
    timed_out, *others = _calls(_read("swe-agent/rock.first3.traj"))
    assert timed_out.args == {"command": "./rock"} and timed_out.result is UNDEFINED
    assert timed_out.error == "\nEXECUTION TIMED OUT"
    assert all(call.error is UNDEFINED for call in others)
    cancelled = json.dumps(
        {"trajectory": [{"action": "sleep 99", "observation": "The command 'sleep 99' was "
         "cancelled because it took more than 30 seconds. Please try a different command."}]}
    )  # fmt: skip
    (call,) = _calls(parse_text(cancelled))
    assert call.result is UNDEFINED and str(call.error).startswith("The command 'sleep 99'")


def test_mini_swe_agent_v1_reads_the_one_bash_block_and_the_next_observation() -> None:
    first = _calls(_read("mini-swe-agent/astropy__astropy-12907.traj.json"))[0]
    assert (first.tool, first.args) == ("bash", {"command": "ls -R"})
    assert isinstance(first.result, str) and first.result.startswith("<returncode>0</returncode>")


def test_mini_swe_agent_tool_calling_reads_as_openai_messages() -> None:
    document = (
        '{"trajectory_format": "mini-swe-agent-1.1", "info": {"mini_version": "2.2.4"}, '
        '"messages": [{"role": "system", "content": "s"}, {"role": "assistant", "content": null, '
        '"tool_calls": [{"id": "c1", "type": "function", "function": {"name": "bash", '
        '"arguments": "{\\"command\\": \\"ls\\"}"}}]}, '
        '{"role": "tool", "tool_call_id": "c1", "content": "<returncode>0</returncode>"}, '
        '{"role": "exit", "content": "diff"}]}'
    )
    from loopwatch.transcripts import parse_text

    transcript = parse_text(document)
    assert transcript.format == "mini-swe-agent"
    (call,) = transcript.runs[0].calls
    assert (call.tool, call.args, call.result) == (
        "bash",
        {"command": "ls"},
        "<returncode>0</returncode>",
    )


def test_openhands_counts_tool_call_actions_and_matches_observations_by_cause() -> None:
    calls = _calls(_read("openhands/output.jsonl"))
    tools = [call.tool for call in calls]
    assert tools.count("run") == 13 and tools.count("read") == 6 and tools.count("edit") == 2
    assert tools[-1] == "finish"
    runs = [call for call in calls if call.tool == "run"]
    assert all((call.result is UNDEFINED) != (call.error is UNDEFINED) for call in runs)


def test_openhands_commands_that_exit_non_zero_are_failures() -> None:
    runs = [call for call in _calls(_read("openhands/output.jsonl")) if call.tool == "run"]
    failed = [call for call in runs if call.error is not UNDEFINED]
    # extras.metadata.exit_code of the sample's 13 run observations: 127, 2, 2, 127, 127
    # for five of them, 0 for the rest.
    assert len(failed) == 5
    assert str(failed[0].error).startswith("bash: ponyc: command not found")
    assert all(call.result is UNDEFINED for call in failed)


def test_openhands_v1_sdk_actions_are_calls_paired_with_their_observations() -> None:
    transcript = _read("openhands/v1-openagentsafety-output.jsonl")
    first, second = transcript.runs
    assert first.run_id == "safety-misconfig" and second.run_id == "safety-business-intelligence"
    call = first.calls[0]
    assert call.tool == "execute_bash" and call.call_id == "call_lqJrV0ubSCxJ29dCiALU4n30"
    assert str(call.args["command"]).startswith('chat_npc "David"')  # type: ignore[index]
    assert "David: Hi there" in str(call.result)
    # metadata.exit_code: 127 once in the first instance, 1 eight times in the second.
    assert [c.error is not UNDEFINED for c in first.calls].count(True) == 1
    assert "mail: command not found" in str(first.calls[4].error)
    assert [c.error is not UNDEFINED for c in second.calls].count(True) == 8
    assert all((c.result is UNDEFINED) != (c.error is UNDEFINED) for c in first.calls)


def test_openhands_v1_conversation_folder_replays_the_tool_parameters() -> None:
    terminal, finish = _calls(_read("openhands/v1-conversation/events"))
    # The action's own parameters, not the model's arguments with their free-text summary.
    assert terminal.tool == "terminal"
    assert terminal.args == {"command": "pwd > tool_output.txt", "is_input": False, "reset": False}
    assert terminal.result == ""
    assert finish.tool == "finish" and finish.error is UNDEFINED


def test_openhands_v1_scaffold_errors_rejections_and_condensation() -> None:
    from loopwatch.transcripts import parse_text

    def action(n: int, call: str, response: str) -> dict[str, object]:
        return {
            "kind": "ActionEvent", "id": f"a{n}", "source": "agent", "tool_name": "terminal",
            "tool_call_id": call, "llm_response_id": response,
            "action": {"kind": "TerminalAction", "command": "make"},
        }  # fmt: skip

    events = [
        action(1, "c1", "r1"),
        action(2, "c2", "r1"),
        {"kind": "ObservationEvent", "id": "o1", "source": "environment", "action_id": "a1",
         "tool_call_id": "c1", "tool_name": "terminal",
         "observation": {"kind": "TerminalObservation", "is_error": True,
                         "content": [{"type": "text", "text": "timed out"}]}},
        {"kind": "UserRejectObservation", "id": "o2", "source": "user", "action_id": "a2",
         "tool_call_id": "c2", "tool_name": "terminal", "rejection_reason": "no"},
        {"kind": "Condensation", "id": "k1", "source": "environment", "summary": "..."},
        {"kind": "AgentErrorEvent", "id": "e1", "source": "agent", "tool_name": "nope",
         "tool_call_id": "c3", "error": "Tool 'nope' not found."},
    ]  # fmt: skip
    transcript = parse_text(json.dumps({"history": events}))
    assert transcript.format == "openhands"
    failed, rejected, unknown = _calls(transcript)
    assert failed.error == "timed out" and failed.batch is not None
    assert failed.batch == rejected.batch
    assert rejected.result is UNDEFINED and rejected.error is UNDEFINED
    assert unknown.tool == "nope" and unknown.error == "Tool 'nope' not found."
    kinds = [type(event).__name__ for event in transcript.runs[0].events]
    assert kinds == ["ReplayCall", "ReplayCall", "Compaction", "ReplayCall"]
    assert "1 call cancelled or never run: no outcome replayed" in transcript.notes


def test_tau_bench_tasks_are_runs() -> None:
    transcript = _read("tau-bench/gpt-4o-airline.first3.json")
    assert [run.label for run in transcript.runs] == [
        "task-0-trial0",
        "task-1-trial0",
        "task-2-trial0",
    ]
    assert [len(run.calls) for run in transcript.runs] == [8, 0, 7]


def test_tau_bench_error_results_are_failures() -> None:
    """The environment answers a tool that raised with ``Error: ...`` (real sample), and an
    unknown tool with ``Unknown action <name>``."""
    calls = _calls(_read("tau-bench/gpt-4o-airline.first3.json"))
    (failed,) = [call for call in calls if call.error is not UNDEFINED]
    assert failed.tool == "book_reservation" and failed.result is UNDEFINED
    assert failed.error == "Error: payment amount does not add up, total price is 305, but paid 255"
    unknown = json.dumps(
        [{"task_id": 1, "traj": [
            {"role": "assistant", "content": None, "tool_calls": [{"id": "c", "type": "function",
             "function": {"name": "fly", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": "c", "name": "fly", "content": "Unknown action fly"},
        ]}]
    )  # fmt: skip
    (call,) = _calls(parse_text(unknown))
    assert (call.result, call.error) == (UNDEFINED, "Unknown action fly")


def test_cline_text_results_are_matched_by_tool_name() -> None:
    read_makefile, read_main, make, which, done = _calls(
        _read("cline/api_conversation_history.json")
    )
    assert read_makefile.result == "all:\n\tgcc main.c\n"
    assert read_main.result is UNDEFINED and read_main.error is UNDEFINED  # never executed
    assert isinstance(make.error, str) and "gcc: No such file" in make.error
    assert which.result == "Command executed.\nOutput:\n/usr/bin/cc"
    assert done.tool == "attempt_completion"
    assert read_makefile.batch is not None and read_makefile.batch == read_main.batch


def test_cline_xml_tools_are_read_from_the_assistant_text() -> None:
    listing, read, done = _calls(_read("cline/xml_api_conversation_history.json"))
    assert (listing.tool, listing.args) == ("list_files", {"path": ".", "recursive": "false"})
    assert read.args == {"path": "main.c"}
    assert read.result == "int main(void) { return 0; }"
    assert done.tool == "attempt_completion"


def test_xml_tags_in_plain_anthropic_text_are_not_calls() -> None:
    from loopwatch.transcripts import parse_text

    messages = [
        {"role": "user", "content": "how do I call it?"},
        {"role": "assistant", "content": "Write <read_file><path>a</path></read_file>."},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "x", "content": ""}]},
    ]
    transcript = parse_text(__import__("json").dumps(messages))
    assert transcript.format == "anthropic"
    assert transcript.call_count == 0


def test_codex_rollout_items_outcomes_batches_and_compaction() -> None:
    transcript = _read(
        "codex/rollout-2025-10-29T01-00-00-0199aa00-0000-7000-8000-000000000001.jsonl"
    )
    ls, cat, pytest_call, patch, rerun = _calls(transcript)
    assert ls.tool == "shell" and ls.args == {
        "command": ["bash", "-lc", "ls"],
        "workdir": "/work/app",
    }
    assert ls.batch is not None and ls.batch == cat.batch  # issued together
    assert pytest_call.tool == "local_shell" and pytest_call.error == "1 failed"
    assert patch.tool == "apply_patch" and "Success" in str(patch.result)
    assert rerun.call_id == "call_D1"  # the copy of call_A1 after compaction is not counted
    assert transcript.notes == ("1 call copied (ids already seen): counted once",)
    kinds = [type(event).__name__ for event in transcript.runs[0].events]
    assert kinds == ["ReplayCall"] * 4 + ["Compaction", "ReplayCall"]


def test_responses_items_inline_mcp_outcome_and_hosted_search() -> None:
    paris, rome, mcp, search = _calls(_read("openai-responses/request.json"))
    assert (paris.args, paris.result) == ({"city": "Paris"}, "18C, cloudy")
    assert rome.result == "24C, sunny"
    assert (mcp.tool, mcp.result) == ("search", "no results")
    assert search.tool == "web_search" and search.result is UNDEFINED


def test_codex_failed_commands_are_read_from_their_exit_code() -> None:
    """Codex writes outputs as bare strings (no success flag): the exit code in the header
    it formats for the model is the only failure signal, for each of its shell tools."""
    transcript = _read(
        "codex/rollout-2026-02-23T12-40-09-019c8a4c-0000-7000-8000-000000000007.jsonl"
    )
    shell, shell_command, exec_failed, exec_ok, patch, exec_again = _calls(transcript)
    assert shell.error == "make: gcc: No such file or directory\n"
    assert shell_command.error == "Exit code: 2\nmake: gcc: No such file or directory\n"
    # no chunk id or wall time in the error: the same failure reads the same each time
    assert exec_failed.error == "Process exited with code 2\nmake: gcc: No such file or directory\n"
    for failed in (shell, shell_command, exec_failed):
        assert failed.result is UNDEFINED
    for ok in (exec_ok, patch, exec_again):
        assert ok.error is UNDEFINED and isinstance(ok.result, str)
    assert patch.tool == "apply_patch"
    assert exec_ok.result == "Process exited with code 0\n/usr/bin/cc\n"
    assert patch.result == "Exit code: 0\nSuccess. Updated the following files:\nM Makefile\n"


def _codex_outcome(output: object) -> ReplayCall:
    from loopwatch.transcripts import parse_text

    lines = [
        {"type": "session_meta", "payload": {"id": "s"}},
        {
            "type": "response_item",
            "payload": {"type": "function_call", "name": "exec_command", "call_id": "c"},
        },
        {
            "type": "response_item",
            "payload": {"type": "function_call_output", "call_id": "c", "output": output},
        },
    ]
    (call,) = _calls(parse_text("\n".join(json.dumps(line) for line in lines)))
    return call


@pytest.mark.parametrize(
    ("output", "result"),
    [
        (
            "Exit code: 0\nWall time: 0.1 seconds\nOutput:\nProcess exited with code 1\n",
            "Exit code: 0\nProcess exited with code 1\n",
        ),
        (
            "Chunk ID: 1\nWall time: 0.1 seconds\nProcess running with session ID 3\nOutput:\n"
            "Exit code: 4\n",
            "Process running with session ID 3\nExit code: 4\n",
        ),
        ('{"output": "Exit code: 1", "metadata": {"exit_code": 0}}', "Exit code: 1"),
        ("plain text that says Exit code: 1", "plain text that says Exit code: 1"),
        ("{not json", "{not json"),
    ],
)
def test_codex_exit_codes_printed_by_the_command_are_not_failures(output: str, result: str) -> None:
    call = _codex_outcome(output)
    assert (call.result, call.error) == (result, UNDEFINED)


def test_codex_command_outputs_drop_what_changes_on_every_run() -> None:
    """The same command printing the same thing twice must read as the same result, or a
    command repeated without progress could never be seen as such."""
    first = "Chunk ID: 4f1a\nWall time: 0.0512 seconds\nProcess exited with code 0\n"
    second = "Chunk ID: 9b20\nWall time: 0.2301 seconds\nProcess exited with code 0\n"
    tail = "Original token count: 2\nOutput:\nsame\n"
    assert _codex_outcome(first + tail).result == _codex_outcome(second + tail).result
    envelope = '{{"output": "same", "metadata": {{"exit_code": 0, "duration_seconds": {}}}}}'
    assert _codex_outcome(envelope.format(0.1)).result == "same"
    assert _codex_outcome(envelope.format(0.2)).result == "same"


def test_responses_built_in_tool_calls_are_counted_with_their_outcomes() -> None:
    """Built-in tools (tool search, shell, apply_patch, computer use, hosted tools) are calls
    the model made: each is counted, and paired with its own kind of outcome item."""
    transcript = _read("openai-responses/builtin_tools.json")
    search, make, which, patch, screenshot, code, files, image = _calls(transcript)
    assert (search.tool, search.args) == ("tool_search", {"query": "build tools"})
    assert isinstance(search.result, list) and search.result[0]["name"] == "make"
    assert (make.tool, make.args["commands"]) == ("shell", ["make"])  # type: ignore[index]
    assert make.error == "make: gcc: No such file or directory\n"
    assert which.error is UNDEFINED and which.result is not UNDEFINED
    assert patch.tool == "apply_patch" and patch.error == "context mismatch in Makefile"
    assert patch.args == {
        "type": "update_file",
        "path": "Makefile",
        "diff": "@@\n-CC=gcc\n+CC=cc\n",
    }
    assert screenshot.tool == "computer" and screenshot.result is not UNDEFINED
    assert (code.tool, code.args) == ("code_interpreter", {"code": "print(2 + 2)"})
    assert (files.tool, image.tool) == ("file_search", "image_generation")
    for hosted in (code, files, image):  # run on OpenAI's side: no outcome item
        assert hosted.result is UNDEFINED and hosted.error is UNDEFINED
    assert transcript.unmatched_results == 0


def test_anthropic_server_and_mcp_tool_results_pair_in_the_same_message() -> None:
    """Server tools and the MCP connector answer in the assistant message itself, with
    ``<tool>_tool_result`` blocks; an ``..._error`` content or ``is_error`` is a failure."""
    search, again, fetch, issues, read = _calls(_read("anthropic/server_tools.json"))
    assert isinstance(search.result, list) and search.error is UNDEFINED
    assert again.error == "web_search_tool_result_error: max_uses_exceeded"
    assert fetch.error == "web_fetch_tool_error: url_not_accessible"
    assert (issues.tool, issues.args, issues.error) == (
        "list_issues",
        {"state": "open"},
        "rate limited",
    )
    assert read.result == "# loopwatch"


def test_claude_code_split_message_server_result_on_a_later_line() -> None:
    from loopwatch.transcripts import parse_text

    def line(block: dict[str, object]) -> str:
        message = {"id": "msg_1", "role": "assistant", "content": [block]}
        return json.dumps({"type": "assistant", "sessionId": "s", "message": message})

    use = {"type": "server_tool_use", "id": "srv_1", "name": "web_search", "input": {"q": "x"}}
    error = {"type": "web_search_tool_result_error", "error_code": "unavailable"}
    result = {"type": "web_search_tool_result", "tool_use_id": "srv_1", "content": error}
    (call,) = _calls(parse_text(line(use) + "\n" + line(result) + "\n"))
    assert call.error == "web_search_tool_result_error: unavailable"


def test_gemini_session_outcomes_on_the_call() -> None:
    transcript = _read("gemini-cli/session-2025-09-18T10-00-8a1f3c52.json")
    read, make, install, glob = _calls(transcript)
    assert read.result == {"output": "all:\n\tgcc main.c\n"}
    assert make.error == "Command exited with code 2: make: gcc: No such file"
    assert install.result is UNDEFINED and install.error is UNDEFINED  # cancelled
    assert read.batch is not None and read.batch == make.batch
    assert read.tokens is not None and read.tokens + make.tokens == 1250  # type: ignore[operator]
    assert glob.result == {"output": "/work/app/main.c"}


def test_gemini_jsonl_session_folds_rewritten_messages_by_id() -> None:
    """A JSONL session rewrites a message whole as its calls finish: each call counts once,
    with its final outcome, and calls a rewind dropped from the context are still replayed."""
    transcript = _read("gemini-cli/session-2026-05-19T02-28-8b2e4f10.jsonl")
    read, make, glob, main_c, *_shell = _calls(transcript)
    assert read.result == {"output": "all:\n\tgcc main.c\n"}
    assert make.error == "Command exited with code 2: make: gcc: No such file"
    assert read.batch is not None and read.batch == make.batch
    assert read.tokens is not None and read.tokens + make.tokens == 1250  # type: ignore[operator]
    assert read.line == 4  # where the message first appeared
    assert glob.result == {"output": "/work/app/main.c"}
    assert main_c.args == {"absolute_path": "/work/app/main.c"}
    assert any("rewound 1 time" in note for note in transcript.notes)


def test_gemini_shell_commands_that_fail_are_failures() -> None:
    """``run_shell_command`` records a failed command as ``success``: the exit code in the
    fields ending its text is the failure; the PGID, new on every run, is left out."""
    *_, first, again, built = _calls(_read("gemini-cli/session-2026-05-19T02-28-8b2e4f10.jsonl"))
    assert first.result is UNDEFINED and isinstance(first.error, str)
    assert "Exit Code: 2" in first.error and "PGID" not in first.error
    assert first.error == again.error  # the same failure, though the PGIDs differ
    assert built.error is UNDEFINED
    assert built.result == {
        "output": "Command: make\nDirectory: (root)\nOutput: cc main.c\nError: (none)\n"
        "Exit Code: 0\nSignal: (none)"
    }


def test_gemini_jsonl_rewrite_never_loses_a_call() -> None:
    from loopwatch.transcripts import parse_text

    header = '{"sessionId": "s", "projectHash": "p", "startTime": "t"}'
    first = (
        '{"id": "g", "type": "gemini", "toolCalls": [{"id": "a", "name": "ls", "args": {}, '
        '"status": "executing"}, {"id": "b", "name": "cat", "args": {}, "status": "executing"}]}'
    )
    later = (
        '{"id": "g", "type": "gemini", "toolCalls": [{"id": "b", "name": "cat", "args": {}, '
        '"status": "success", "result": [{"functionResponse": {"id": "b", "name": "cat", '
        '"response": {"output": "x"}}}]}]}'
    )
    compressed = '{"$set": {"messages": [{"id": "c", "type": "user", "content": "summary"}]}}'
    text = "\n".join([header, first, later, compressed]) + "\n"
    transcript = parse_text(text, path="session.jsonl")
    assert transcript.format == "gemini-cli"
    ls, cat = _calls(transcript)
    assert (ls.tool, ls.result) == ("ls", UNDEFINED)
    assert (cat.tool, cat.result) == ("cat", {"output": "x"})
    forced = parse_text(text, path="session.jsonl", format="gemini-cli")
    assert forced.call_count == 2


def test_gemini_contents_match_responses_by_name() -> None:
    listing, read = _calls(_read("gemini-cli/checkpoint-before-fix.json"))
    assert listing.result == {"output": "main.c\nMakefile"}
    assert read.error == "File not found."


def test_cursor_calls_have_no_outcome_and_the_transcript_says_so() -> None:
    transcript = _read("cursor/3f1c9d2e-agent-transcript.jsonl")
    assert [call.tool for call in _calls(transcript)] == ["Glob", "Read", "Shell", "Shell"]
    assert any("no tool outcomes" in note for note in transcript.notes)


def test_cursor_text_transcript_calls_parameters_and_batches() -> None:
    """The plain-text transcripts Cursor wrote before its JSONL ones: each ``[Tool call]``
    of an assistant turn is a call, with its parameters (multi-line values whole)."""
    transcript = _read("cursor/agent-transcripts/4b7d2e10-9c3a-4f1e-8d55-2a6b0c9e7f31.txt")
    ls, make, replace, write, rerun = _calls(transcript)
    assert (ls.tool, ls.args) == (
        "Shell",
        {"command": "ls", "description": "List the project files"},
    )
    assert make.args["timeout"] == "120000"  # type: ignore[index]
    assert ls.batch is not None and ls.batch == make.batch  # listed before their results
    assert replace.args == {
        "path": "/work/app/Makefile",
        "old_string": "CC=gcc\nall:\n\t$(CC) main.c",
        "new_string": "CC=cc\nall:\n\t$(CC) main.c",
    }
    assert write.args["contents"] == "# Build notes\n\nThe build uses `cc`."  # type: ignore[index]
    assert rerun.batch is None and rerun.line == 53  # the one pasted in a user turn is text
    assert all(call.result is UNDEFINED and call.error is UNDEFINED for call in _calls(transcript))
    assert any("no tool outcomes" in note for note in transcript.notes)


def test_cursor_text_result_without_its_call_is_a_doubt() -> None:
    from loopwatch.transcripts import parse_text

    text = "user:\nhi\n\nassistant:\n[Tool call] Read\n  path: a\n\n[Tool result] Shell\n"
    transcript = parse_text(text, path="t.txt")
    assert (transcript.format, transcript.call_count) == ("cursor", 1)
    assert transcript.unmatched_results == 1
    assert parse_text(text, path="t.txt", format="cursor").call_count == 1


def test_cursor_text_transcripts_are_walked_only_in_their_folder(tmp_path: Path) -> None:
    from loopwatch.transcripts import walk_transcripts

    folder = tmp_path / "agent-transcripts"
    folder.mkdir()
    (folder / "a.txt").write_text("user:\nhi\n", encoding="utf-8")
    (tmp_path / "notes.txt").write_text("user:\nhi\n", encoding="utf-8")
    assert [Path(f).name for f in walk_transcripts([tmp_path]).files] == ["a.txt"]


@pytest.mark.parametrize(
    "relative", ["claude-code-sdk/stream.jsonl", "claude-code-sdk/claude-execution-output.json"]
)
def test_claude_code_sdk_batches_cancellations_and_subagents(relative: str) -> None:
    transcript = _read(relative)
    main, sub = transcript.runs
    assert (main.label, sub.label) == ("main", "subagent:toolu_c")
    make, read, task = main.calls
    assert make.error == "make: gcc: No such file or directory"
    assert read.error is UNDEFINED and read.result is UNDEFINED  # a cancelled sibling
    assert make.batch is not None and make.batch == read.batch
    assert task.batch is None
    (which,) = sub.calls
    assert which.result == "/usr/bin/cc"


def test_openclaw_trajectory_counts_each_call_once_and_rebuilds_orphans() -> None:
    transcript = _read("openclaw-trajectory/b475ccf4.trajectory.jsonl")
    ls, read, missing = transcript.runs[0].calls
    assert ls.result == {"content": "a.txt"}
    assert read.error == "ENOENT"
    assert (missing.tool, missing.args, missing.error) == (
        "read_file",
        {},
        "Tool read_file not found",
    )
    assert transcript.runs[0].run_id == "run-1"
