"""The messages the OpenCode plugin sends for the 2.x API read as the 1.x ones do.

OpenCode 2's hooks (``ctx.tool.hook("execute.before" | "execute.after")``) carry the call id
as ``id`` and the arguments as ``input``; the plugin translates them to the one protocol of
:mod:`loopwatch.hooks.opencode` (``callID``; ``args`` in the after-event's input; the text
of ``result.content`` as ``output.output``; ``error`` for ``status: "error"``; a
``session.compacted`` event for a compaction). These are the exact shapes it sends
(``src/loopwatch/cli/_opencode_plugin.py``, ``setup``).
"""

from __future__ import annotations

from loopwatch.core._undefined import UNDEFINED
from loopwatch.hooks import opencode
from loopwatch.hooks._core import Outcome

ARGS = {"command": "make test"}


def test_a_2x_before_event() -> None:
    event = opencode.parse(
        {
            "event": "tool.execute.before",
            "input": {"tool": "shell", "sessionID": "ses_1", "callID": "call_1"},
            "output": {"args": ARGS},
        }
    )
    assert (event.kind, event.session, event.tool, event.call_id) == (
        "before",
        "ses_1",
        "shell",
        "call_1",
    )
    assert event.params == ARGS


def test_a_2x_completed_after_event() -> None:
    event = opencode.parse(
        {
            "event": "tool.execute.after",
            "input": {"tool": "shell", "sessionID": "ses_1", "callID": "call_1", "args": ARGS},
            "output": {"output": "FAILED test_login"},
        }
    )
    assert (event.kind, event.call_id, event.params) == ("after", "call_1", ARGS)
    assert event.result == "FAILED test_login" and event.error is UNDEFINED


def test_a_2x_failed_after_event() -> None:
    event = opencode.parse(
        {
            "event": "tool.execute.after",
            "input": {"tool": "read", "sessionID": "ses_1", "callID": "call_2", "args": {}},
            "output": {},
            "error": "ENOENT: /nope",
        }
    )
    assert event.kind == "after"
    assert event.error == "ENOENT: /nope" and event.result is UNDEFINED


def test_a_2x_compaction_event() -> None:
    event = opencode.parse({"event": "session.compacted", "input": {"sessionID": "ses_1"}})
    assert (event.kind, event.session) == ("compaction", "ses_1")


def test_the_answers_the_plugin_reads() -> None:
    before = opencode.parse(
        {"event": "tool.execute.before", "input": {"sessionID": "s", "callID": "c"}}
    )
    after = opencode.parse({"event": "tool.execute.after", "input": {"sessionID": "s"}})
    assert opencode.render(before, Outcome(block="CRITICAL: x")).stdout == (
        '{"action": "block", "message": "CRITICAL: x"}'
    )
    assert opencode.render(after, Outcome(warning="WARNING: y")).stdout == (
        '{"action": "allow", "warning": "WARNING: y"}'
    )


def test_a_bash_call_that_exited_non_zero_is_a_failure() -> None:
    # OpenCode completes a failing command as a plain result with metadata.exit: the hook
    # records it as failed, as scan reads the stored part (one rule, host_outcome).
    def after(tool: str, metadata: object, output: object = "FAILED test_login") -> object:
        return opencode.parse(
            {
                "event": "tool.execute.after",
                "input": {"tool": tool, "sessionID": "s", "callID": "c", "args": ARGS},
                "output": {"output": output, "metadata": metadata},
            }
        )

    failed = after("bash", {"exit": 1})
    assert failed.error == "FAILED test_login" and failed.result is UNDEFINED
    assert after("bash", {"exit": 2}, output="").error == "exit code non-zero"
    passed = after("bash", {"exit": 0})
    assert passed.result == "FAILED test_login" and passed.error is UNDEFINED
    killed = after("bash", {"exit": None}, output="partial\n(Command timed out after 120000 ms)")
    assert killed.error is not UNDEFINED
    for other in (after("read", {"exit": 1}), after("bash", {"exit": True}), after("bash", "1")):
        assert other.error is UNDEFINED and other.result == "FAILED test_login"
