"""Outcome hashing and unknown-tool extraction (SPEC §3.3, §3.4, §3.5, §3.7, §9.1).

One table per step of the §3.3 decision list. Every expected hash is computed here with
``hashlib`` from a canonical string written out by hand (or, in the properties, built with
``json.dumps`` as an independent oracle); loopwatch's own stringify is never used to make
an expectation.
"""

from __future__ import annotations

import dataclasses
import decimal
import fractions
import hashlib
import json
import math
import types
from typing import Any

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from loopwatch import UNDEFINED, OutcomeHash, hash_tool_outcome
from loopwatch.core.outcomes import error_text, extract_unknown_tool_name, strip_send_ids

#: JavaScript's whitespace set (SPEC §3.0), spelled out independently of ``loopwatch.core.jsstr``.
JS_WS = (
    "\t\n\x0b\x0c\r \u00a0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009"
    "\u200a\u2028\u2029\u202f\u205f\u3000\ufeff"
)


def sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def err(canonical: str) -> str:
    """``"error:"`` + the digest of the JSON-quoted error text, given as its canonical form."""
    return "error:" + sha(canonical)


def outcome(tool: str, params: object = None, **kwargs: Any) -> str | None:
    return hash_tool_outcome(tool, params, **kwargs).result_hash


def text_result(*texts: str, details: object = UNDEFINED) -> dict[str, object]:
    result: dict[str, object] = {"content": [{"type": "text", "text": t} for t in texts]}
    if details is not UNDEFINED:
        result["details"] = details
    return result


# =============================================================================================
# Step 1: error present
# =============================================================================================


class Boom(Exception):
    pass


@pytest.mark.parametrize(
    ("error", "canonical"),
    [
        pytest.param("boom", '"boom"', id="str-is-json-quoted"),
        pytest.param("", '""', id="empty-str"),
        pytest.param('say "hi"\n', '"say \\"hi\\"\\n"', id="str-escaped"),
        pytest.param(None, '"null"', id="None-is-an-error"),
        pytest.param(ValueError("bad input"), '"bad input"', id="exception-message"),
        pytest.param(ValueError(), '"ValueError"', id="exception-empty-message-class-name"),
        pytest.param(Boom(""), '"Boom"', id="custom-exception-empty-message"),
        pytest.param(KeyError("k"), "\"'k'\"", id="KeyError-str-has-quotes"),
        pytest.param(True, '"true"', id="bool-true"),
        pytest.param(False, '"false"', id="bool-false"),
        pytest.param(0, '"0"', id="int-zero"),
        pytest.param(42, '"42"', id="int"),
        pytest.param(-7, '"-7"', id="negative-int"),
        pytest.param(2.0, '"2"', id="float-integral"),
        pytest.param(-0.0, '"0"', id="negative-zero"),
        pytest.param(1.5, '"1.5"', id="float"),
        pytest.param(1e21, '"1e+21"', id="float-exponent"),
        pytest.param(1e-7, '"1e-7"', id="float-small"),
        pytest.param(math.nan, '"NaN"', id="nan-unquoted-text"),
        pytest.param(math.inf, '"Infinity"', id="inf"),
        pytest.param(-math.inf, '"-Infinity"', id="-inf"),
        pytest.param(fractions.Fraction(1, 4), '"0.25"', id="numbers.Real"),
        pytest.param({"code": 1}, '"{\\"code\\":1}"', id="mapping-stringified-then-quoted"),
        pytest.param([1, "a"], '"[1,\\"a\\"]"', id="list-stringified-then-quoted"),
        pytest.param(decimal.Decimal("1.5"), '"\\"1.5\\""', id="Decimal-is-a-string-value"),
    ],
)
def test_error_hash(error: object, canonical: str) -> None:
    assert hash_tool_outcome("read", {}, error=error) == OutcomeHash(err(canonical), None)


@pytest.mark.parametrize(
    ("error", "text"),
    [
        ("boom", "boom"),
        (None, "null"),
        (ValueError("x"), "x"),
        (RuntimeError(), "RuntimeError"),
        (True, "true"),
        (False, "false"),
        (12, "12"),
        (2.0, "2"),
        (-0.0, "0"),
        (0.1, "0.1"),
        (math.nan, "NaN"),
        (math.inf, "Infinity"),
        (-math.inf, "-Infinity"),
        ({"b": 1, "a": None}, '{"a":null,"b":1}'),
        (["x"], '["x"]'),
        (decimal.Decimal("3"), '"3"'),
    ],
)
def test_error_text(error: object, text: str) -> None:
    assert error_text(error) == text


def test_error_wins_over_any_result_and_over_the_loop_veto() -> None:
    veto = {"details": {"status": "blocked", "deniedReason": "tool-loop"}}
    expected = err('"boom"')
    assert outcome("read", {}, error="boom", result={"content": []}) == expected
    assert outcome("read", {}, error="boom", result=veto) == expected
    assert outcome("exec", {}, error="boom", result={"details": {"status": "running"}}) == expected
    assert outcome("message", {"action": "send"}, error="boom", result={}) == expected


def test_error_hash_ignores_tool_and_params() -> None:
    hashes = {
        outcome(tool, params, error="x")
        for tool, params in [("a", None), ("exec", {"c": 1}), ("update_plan", [])]
    }
    assert hashes == {err('"x"')}


def test_error_undefined_means_no_error() -> None:
    assert outcome("read", {}, error=UNDEFINED, result="ok") == sha('"ok"')


def test_error_none_and_error_string_null_collide() -> None:
    # ``None`` stringifies to ``null``; its text is then hashed as a JSON string.
    assert outcome("t", error=None) == outcome("t", error="null") == err('"null"')


def test_unserialisable_error_raises_type_error() -> None:
    class BadStr(Exception):
        def __str__(self) -> str:
            raise RuntimeError("no text")

    with pytest.raises(TypeError):
        hash_tool_outcome("t", {}, error=BadStr())


def test_unserialisable_result_raises_type_error() -> None:
    # Keys 1 and "1" collide once converted (SPEC §8.4, §8.5).
    with pytest.raises(TypeError):
        hash_tool_outcome("t", {}, result={"details": {1: "a", "1": "b"}})


@pytest.mark.parametrize(
    ("error", "name"),
    [
        ("Unknown tool: Foo_Bar", "foo_bar"),
        (ValueError("Tool exec not found"), "exec"),
        ("tool 'x.y' is not available", "x.y"),
        (None, None),
        ("boom", None),
        (["Unknown tool:\nx"], None),
    ],
)
def test_error_outcome_carries_unknown_tool_name(error: object, name: str | None) -> None:
    assert hash_tool_outcome("t", {}, error=error).unknown_tool_name == name


def test_unknown_tool_name_is_only_read_from_errors() -> None:
    result = text_result("Unknown tool: foo", details={"error": "Unknown tool: foo"})
    assert hash_tool_outcome("t", {}, result=result).unknown_tool_name is None


# =============================================================================================
# Step 2: result is not a plain object
# =============================================================================================


@dataclasses.dataclass
class Pair:
    b: int
    a: str


@pytest.mark.parametrize(
    ("result", "canonical"),
    [
        pytest.param(None, "null", id="None"),
        pytest.param("ok", '"ok"', id="str"),
        pytest.param("", '""', id="empty-str"),
        pytest.param(5, "5", id="int"),
        pytest.param(2.5, "2.5", id="float"),
        pytest.param(math.nan, '"NaN"', id="nan"),
        pytest.param(True, "true", id="bool"),
        pytest.param([1, "a", None], '[1,"a",null]', id="list"),
        pytest.param(({"type": "text", "text": "x"},), '[{"text":"x","type":"text"}]', id="tuple"),
        pytest.param([UNDEFINED], "[undefined]", id="list-of-undefined"),
        pytest.param(Pair(b=1, a="x"), '{"a":"x","b":1}', id="dataclass"),
    ],
)
def test_non_plain_result_hashes_its_stringify_without_prefix(
    result: object, canonical: str
) -> None:
    assert hash_tool_outcome("read", {}, result=result) == OutcomeHash(sha(canonical), None)


@pytest.mark.parametrize("tool", ["exec", "process", "message", "sessions_send", "update_plan"])
def test_non_plain_result_skips_every_tool_rule(tool: str) -> None:
    params = {"action": "send"} if tool == "message" else {"action": "poll"}
    assert outcome(
        tool, params, result="out", send_tools={tool}, normalizers={"update_plan"}
    ) == sha('"out"')


@pytest.mark.parametrize("tool", ["read", "exec", "message", "sessions_send"])
def test_undefined_result_has_no_hash(tool: str) -> None:
    assert hash_tool_outcome(tool, {"action": "send"}) == OutcomeHash(None, None)
    assert hash_tool_outcome(tool, {}, result=UNDEFINED) == OutcomeHash(None, None)


# =============================================================================================
# Step 3: details and text (seen through the default rule, step 8)
# =============================================================================================


@pytest.mark.parametrize(
    ("result", "canonical"),
    [
        pytest.param({}, '{"details":{},"text":""}', id="empty"),
        pytest.param(text_result("ok"), '{"details":{},"text":"ok"}', id="one-part"),
        pytest.param(text_result("a", "b"), '{"details":{},"text":"a\\nb"}', id="joined-by-nl"),
        pytest.param(
            text_result("a", "", "b"), '{"details":{},"text":"a\\n\\nb"}', id="empty-part-kept"
        ),
        pytest.param(
            text_result(" a ", " b "), '{"details":{},"text":"a \\n b"}', id="only-ends-trimmed"
        ),
        pytest.param(
            text_result("", "b"), '{"details":{},"text":"b"}', id="leading-nl-trimmed-away"
        ),
        pytest.param(
            text_result("\ufeff\u3000x\u00a0\u2028"),
            '{"details":{},"text":"x"}',
            id="js-whitespace-trimmed",
        ),
        pytest.param(
            text_result("\x1cx\x85"),
            '{"details":{},"text":"\\u001cx\x85"}',
            id="U+001C-and-U+0085-are-not-whitespace",
        ),
        pytest.param(text_result("  \n "), '{"details":{},"text":""}', id="blank-text"),
        pytest.param(
            {"content": [{"type": "image", "text": "alt"}]},
            '{"details":{},"text":"alt"}',
            id="any-str-type",
        ),
        pytest.param(
            {
                "content": [
                    "loose string",
                    None,
                    ["nested"],
                    {"text": "no type"},
                    {"type": 1, "text": "int type"},
                    {"type": None, "text": "null type"},
                    {"type": "text"},
                    {"type": "text", "text": 5},
                    {"type": "text", "text": None},
                    {"type": "text", "text": "kept"},
                ]
            },
            '{"details":{},"text":"kept"}',
            id="malformed-parts-skipped",
        ),
        pytest.param(
            {"content": ({"type": "text", "text": "t"},)},
            '{"details":{},"text":"t"}',
            id="tuple-content",
        ),
        pytest.param({"content": "hello"}, '{"details":{},"text":""}', id="str-content"),
        pytest.param(
            {"content": {"type": "text", "text": "x"}},
            '{"details":{},"text":""}',
            id="mapping-content",
        ),
        pytest.param({"content": None}, '{"details":{},"text":""}', id="null-content"),
        pytest.param(
            {"details": {"b": 1, "a": [True, None]}},
            '{"details":{"a":[true,null],"b":1},"text":""}',
            id="details-keys-sorted",
        ),
        pytest.param({"details": "x"}, '{"details":{},"text":""}', id="str-details"),
        pytest.param({"details": [1]}, '{"details":{},"text":""}', id="list-details"),
        pytest.param({"details": None}, '{"details":{},"text":""}', id="null-details"),
        pytest.param(
            {"details": {}, "isError": True, "extra": [1], "content": []},
            '{"details":{},"text":""}',
            id="other-result-keys-ignored",
        ),
        pytest.param(
            {"details": {"k": UNDEFINED}},
            '{"details":{"k":undefined},"text":""}',
            id="undefined-value-kept",
        ),
    ],
)
def test_default_rule_hashes_details_and_text(result: object, canonical: str) -> None:
    assert hash_tool_outcome("read", {"path": "a"}, result=result) == OutcomeHash(
        sha(canonical), None
    )


def test_any_mapping_is_a_plain_object() -> None:
    proxy = types.MappingProxyType(
        {"content": [types.MappingProxyType({"type": "text", "text": "x"})], "details": {}}
    )
    assert outcome("read", {}, result=proxy) == sha('{"details":{},"text":"x"}')


# =============================================================================================
# Step 4: the loop veto
# =============================================================================================


VETO = {"status": "blocked", "deniedReason": "tool-loop"}


@pytest.mark.parametrize(
    ("tool", "params"),
    [
        ("read", {}),
        ("exec", {"command": "ls"}),
        ("process", {"action": "poll"}),
        ("message", {"action": "send"}),
        ("sessions_send", {}),
        ("telegram", {}),
        ("update_plan", {}),
    ],
)
def test_loop_veto_is_never_hashed(tool: str, params: object) -> None:
    blocked = {
        "content": [{"type": "text", "text": "CRITICAL: ..."}],
        "details": {**VETO, "reason": "CRITICAL: ..."},
    }
    got = hash_tool_outcome(
        tool, params, result=blocked, send_tools={"telegram"}, normalizers={"update_plan"}
    )
    assert got == OutcomeHash(None, None)


@pytest.mark.parametrize(
    ("details", "canonical"),
    [
        (
            {"status": "blocked", "deniedReason": "plugin-before-tool-call"},
            '{"details":{"deniedReason":"plugin-before-tool-call","status":"blocked"},"text":""}',
        ),
        (
            {"status": "blocked", "deniedReason": "approval"},
            '{"details":{"deniedReason":"approval","status":"blocked"},"text":""}',
        ),
        ({"status": "blocked"}, '{"details":{"status":"blocked"},"text":""}'),
        ({"deniedReason": "tool-loop"}, '{"details":{"deniedReason":"tool-loop"},"text":""}'),
        (
            {"status": "Blocked", "deniedReason": "tool-loop"},
            '{"details":{"deniedReason":"tool-loop","status":"Blocked"},"text":""}',
        ),
        (
            {"status": "blocked", "deniedReason": "Tool-Loop"},
            '{"details":{"deniedReason":"Tool-Loop","status":"blocked"},"text":""}',
        ),
    ],
)
def test_other_blocked_results_are_hashed_normally(details: object, canonical: str) -> None:
    assert outcome("read", {}, result={"details": details}) == sha(canonical)


def test_veto_outside_details_is_an_ordinary_result() -> None:
    assert outcome("read", {}, result=dict(VETO)) == sha('{"details":{},"text":""}')


# =============================================================================================
# Step 5: exec
# =============================================================================================


RUNNING = '{"status":"running","tail":"%s"}'


@pytest.mark.parametrize(
    ("details", "text", "canonical"),
    [
        pytest.param(
            {"status": "running", "tail": "abc", "sessionId": "s1", "pid": 3, "cwd": "/x"},
            "Command still running (session s1, pid 3)",
            RUNNING % "abc",
            id="running-keeps-tail-only",
        ),
        pytest.param({"status": "running"}, "t", RUNNING % "", id="running-missing-tail"),
        pytest.param({"status": "running", "tail": 5}, "t", RUNNING % "", id="running-int-tail"),
        pytest.param(
            {"status": "running", "tail": "  x  "}, "", RUNNING % "  x  ", id="tail-not-trimmed"
        ),
        pytest.param(
            {
                "status": "completed",
                "exitCode": 0,
                "aggregated": "  out\n",
                "durationMs": 12,
                "cwd": "/",
                "pid": 9,
            },
            "ignored",
            '{"exitCode":0,"output":"out","status":"completed","timedOut":false}',
            id="completed",
        ),
        pytest.param(
            {"status": "failed", "exitCode": 2, "aggregated": "err", "timedOut": True},
            "",
            '{"exitCode":2,"output":"err","status":"failed","timedOut":true}',
            id="failed-timed-out",
        ),
        pytest.param(
            {"status": "completed", "exitCode": True, "aggregated": "o"},
            "",
            '{"exitCode":null,"output":"o","status":"completed","timedOut":false}',
            id="exitCode-bool-is-null",
        ),
        pytest.param(
            {"status": "completed", "exitCode": "0", "aggregated": "o"},
            "",
            '{"exitCode":null,"output":"o","status":"completed","timedOut":false}',
            id="exitCode-str-is-null",
        ),
        pytest.param(
            {"status": "completed", "aggregated": "o"},
            "",
            '{"exitCode":null,"output":"o","status":"completed","timedOut":false}',
            id="exitCode-missing-is-null",
        ),
        pytest.param(
            {"status": "completed", "exitCode": None, "aggregated": "o"},
            "",
            '{"exitCode":null,"output":"o","status":"completed","timedOut":false}',
            id="exitCode-None-is-null",
        ),
        pytest.param(
            {"status": "completed", "exitCode": 1.0, "aggregated": "o"},
            "",
            '{"exitCode":1,"output":"o","status":"completed","timedOut":false}',
            id="exitCode-float",
        ),
        pytest.param(
            {"status": "completed", "exitCode": 0, "aggregated": "o", "timedOut": "true"},
            "",
            '{"exitCode":0,"output":"o","status":"completed","timedOut":false}',
            id="timedOut-str-is-false",
        ),
        pytest.param(
            {"status": "completed", "exitCode": 0, "aggregated": "o", "timedOut": 1},
            "",
            '{"exitCode":0,"output":"o","status":"completed","timedOut":false}',
            id="timedOut-1-is-false",
        ),
        pytest.param(
            {"status": "completed", "exitCode": 0, "aggregated": " \n\u3000"},
            " from text ",
            '{"exitCode":0,"output":"from text","status":"completed","timedOut":false}',
            id="blank-aggregated-uses-text",
        ),
        pytest.param(
            {"status": "completed", "exitCode": 0, "aggregated": ["x"]},
            "t",
            '{"exitCode":0,"output":"t","status":"completed","timedOut":false}',
            id="non-str-aggregated-uses-text",
        ),
        pytest.param(
            {"status": "completed", "exitCode": 0},
            "",
            '{"exitCode":0,"output":"","status":"completed","timedOut":false}',
            id="no-output-at-all",
        ),
        pytest.param(
            {
                "status": "approval-pending",
                "reason": "r",
                "host": "h",
                "command": "rm -rf /",
                "warningText": "w",
                "approvalId": "a1",
                "expiresAt": 5,
            },
            "Awaiting approval",
            '{"command":"rm -rf /","host":"h","reason":"r","status":"approval-pending",'
            '"warningText":"w"}',
            id="approval-pending",
        ),
        pytest.param(
            {"status": "approval-unavailable"},
            "t",
            '{"command":"","host":null,"reason":null,"status":"approval-unavailable",'
            '"warningText":""}',
            id="approval-unavailable-missing-fields",
        ),
        pytest.param(
            {
                "status": "approval-pending",
                "reason": 1,
                "host": None,
                "command": ["ls"],
                "warningText": False,
            },
            "",
            '{"command":"","host":null,"reason":null,"status":"approval-pending","warningText":""}',
            id="approval-non-str-fields",
        ),
    ],
)
def test_exec_rule(details: dict[str, object], text: str, canonical: str) -> None:
    result = text_result(text, details=details)
    assert hash_tool_outcome("exec", {"command": "x"}, result=result) == OutcomeHash(
        sha(canonical), None
    )


@pytest.mark.parametrize(
    ("details", "canonical_details"),
    [
        ({"status": "queued", "pid": 1}, '{"pid":1,"status":"queued"}'),
        ({"status": "Running", "tail": "x"}, '{"status":"Running","tail":"x"}'),
        ({"status": 1}, '{"status":1}'),
        ({"status": None, "tail": "x"}, '{"status":null,"tail":"x"}'),
        ({"tail": "x"}, '{"tail":"x"}'),
    ],
)
def test_exec_other_or_non_str_status_falls_to_default(
    details: dict[str, object], canonical_details: str
) -> None:
    expected = sha('{"details":' + canonical_details + ',"text":"t"}')
    assert outcome("exec", {}, result=text_result("t", details=details)) == expected
    # Step 5 falls through to step 8, never to the send rule of step 7.
    assert (
        outcome("exec", {}, result=text_result("t", details=details), send_tools={"exec"})
        == expected
    )


@pytest.mark.parametrize("tool", ["Exec", "bash", "EXEC", " exec"])
def test_exec_rule_is_exact_and_case_sensitive(tool: str) -> None:
    details = {"status": "running", "tail": "abc", "pid": 3}
    expected = sha('{"details":{"pid":3,"status":"running","tail":"abc"},"text":"t"}')
    assert outcome(tool, {}, result=text_result("t", details=details)) == expected


def test_exec_volatile_fields_do_not_change_the_hash() -> None:
    def run(pid: int, duration: int, text: str) -> str | None:
        details = {
            "status": "completed",
            "exitCode": 0,
            "aggregated": "same",
            "pid": pid,
            "durationMs": duration,
            "cwd": f"/tmp/{pid}",
            "sessionId": f"s{pid}",
            "startedAt": duration * 7,
        }
        return outcome("exec", {"command": "x"}, result=text_result(text, details=details))

    assert run(1, 10, "a") == run(2, 99, "b")


# =============================================================================================
# Step 6: process poll / log
# =============================================================================================


@pytest.mark.parametrize(
    ("action", "details", "text", "canonical"),
    [
        pytest.param(
            "poll",
            {
                "status": "running",
                "exitCode": None,
                "aggregated": "x",
                "sessionId": "s",
                "name": "n",
            },
            "t",
            '{"action":"poll","aggregated":"x","exitCode":null,"exitSignal":null,'
            '"status":"running","text":"t"}',
            id="poll",
        ),
        pytest.param(
            "poll",
            {},
            "",
            '{"action":"poll","aggregated":null,"exitCode":null,"exitSignal":null,'
            '"status":undefined,"text":""}',
            id="poll-missing-status-is-undefined",
        ),
        pytest.param(
            "poll",
            {"status": None},
            "",
            '{"action":"poll","aggregated":null,"exitCode":null,"exitSignal":null,'
            '"status":null,"text":""}',
            id="poll-null-status-is-null",
        ),
        pytest.param(
            "poll",
            {"status": UNDEFINED, "exitCode": UNDEFINED, "aggregated": UNDEFINED},
            "",
            '{"action":"poll","aggregated":null,"exitCode":null,"exitSignal":null,'
            '"status":undefined,"text":""}',
            id="poll-undefined-fields-are-null",
        ),
        pytest.param(
            "poll",
            {"status": 3, "exitCode": 0, "exitSignal": "", "aggregated": False},
            "",
            '{"action":"poll","aggregated":false,"exitCode":0,"exitSignal":"",'
            '"status":3,"text":""}',
            id="poll-falsy-values-kept",
        ),
        pytest.param(
            "log",
            {
                "status": "exited",
                "totalLines": 3,
                "totalChars": 40,
                "truncated": False,
                "exitCode": 1,
                "exitSignal": "SIGTERM",
                "aggregated": "ignored",
                "offset": 0,
            },
            "line",
            '{"action":"log","exitCode":1,"exitSignal":"SIGTERM","status":"exited",'
            '"text":"line","totalChars":40,"totalLines":3,"truncated":false}',
            id="log",
        ),
        pytest.param(
            "log",
            {},
            "",
            '{"action":"log","exitCode":null,"exitSignal":null,"status":undefined,'
            '"text":"","totalChars":null,"totalLines":null,"truncated":null}',
            id="log-missing-fields",
        ),
    ],
)
def test_process_rule(action: str, details: object, text: str, canonical: str) -> None:
    result = text_result(text, details=details) if text else {"details": details}
    params = {"action": action, "sessionId": "s"}
    assert hash_tool_outcome("process", params, result=result) == OutcomeHash(sha(canonical), None)


@pytest.mark.parametrize(
    "params",
    [
        {"action": "Poll"},
        {"action": "list"},
        {"action": "kill"},
        {"action": None},
        {},
        None,
        "poll",
        ["poll"],
    ],
)
def test_process_other_actions_fall_to_default(params: object) -> None:
    result = text_result("t", details={"status": "running"})
    expected = sha('{"details":{"status":"running"},"text":"t"}')
    assert outcome("process", params, result=result) == expected


def test_process_poll_beats_send_tools_but_other_actions_use_them() -> None:
    details = {"status": "running", "messageId": "m"}
    poll = outcome(
        "process", {"action": "poll"}, result={"details": details}, send_tools={"process"}
    )
    assert poll == sha(
        '{"action":"poll","aggregated":null,"exitCode":null,"exitSignal":null,'
        '"status":"running","text":""}'
    )
    other = outcome(
        "process", {"action": "list"}, result={"details": details}, send_tools={"process"}
    )
    assert other == sha('{"status":"running"}')


def test_command_status_is_hashed_by_the_default_rule() -> None:
    result = text_result("still running", details={"status": "running", "elapsed": 3})
    expected = sha('{"details":{"elapsed":3,"status":"running"},"text":"still running"}')
    assert outcome("command_status", {"id": "c1"}, result=result) == expected
    assert outcome("command_status", {"action": "poll"}, result=result) == expected


# =============================================================================================
# Step 7: volatile send results
# =============================================================================================


SEND_ACTIONS = [
    "send",
    "broadcast",
    "reply",
    "thread-reply",
    "sendWithEffect",
    "sendAttachment",
    "upload-file",
    "sticker",
    "poll",
]

VOLATILE_KEYS = [
    "messageId",
    "message_id",
    "messageIds",
    "platformMessageId",
    "platformMessageIds",
    "fileId",
    "file_id",
    "fileKey",
    "pollId",
    "poll_id",
    "receipt",
    "runId",
    "idempotencyKey",
    "ts",
    "timestamp",
    "sentAt",
    "deliveredAt",
    "createdAt",
]

SEND_RESULT = text_result(
    "Sent message 123 at 10:00",
    details={
        "ok": True,
        "messageId": "m1",
        "ts": 5,
        "nested": {"receipt": {"a": 1}, "keep": 1},
        "list": [{"fileId": "f", "name": "n"}, ("x", {"createdAt": 1})],
    },
)
SEND_CANONICAL = '{"list":[{"name":"n"},["x",{}]],"nested":{"keep":1},"ok":true}'


@pytest.mark.parametrize("action", SEND_ACTIONS)
def test_message_send_actions_hash_stripped_details_only(action: str) -> None:
    got = hash_tool_outcome("message", {"action": action, "to": "x"}, result=SEND_RESULT)
    assert got == OutcomeHash(sha(SEND_CANONICAL), None)


@pytest.mark.parametrize("key", VOLATILE_KEYS)
def test_each_volatile_key_is_dropped_at_any_depth(key: str) -> None:
    details = {key: "v", "ok": True, "deep": [{"x": {key: 1, "y": 2}}]}
    expected = sha('{"deep":[{"x":{"y":2}}],"ok":true}')
    assert outcome("sessions_send", {}, result={"details": details}) == expected


def test_the_volatile_key_list_is_exactly_eighteen_keys() -> None:
    assert len(set(VOLATILE_KEYS)) == 18
    near_misses = {"messageID": 1, "MessageId": 2, "message-id": 3, "sent_at": 4, "uuid": 5}
    assert outcome("sessions_send", {}, result={"details": near_misses}) == sha(
        '{"MessageId":2,"message-id":3,"messageID":1,"sent_at":4,"uuid":5}'
    )


@pytest.mark.parametrize(
    "params",
    [
        {"action": "Send"},
        {"action": "SEND"},
        {"action": "read"},
        {"action": "channel-create"},
        {"action": " send"},
        {"action": 1},
        {"action": None},
        {},
        None,
        "send",
        ["send"],
    ],
)
def test_message_non_send_actions_fall_to_default(params: object) -> None:
    result = text_result("t", details={"messageId": "m1"})
    assert outcome("message", params, result=result) == sha(
        '{"details":{"messageId":"m1"},"text":"t"}'
    )


@pytest.mark.parametrize("params", [None, {}, {"action": "read"}, "x", 5])
def test_sessions_send_is_a_send_whatever_its_params(params: object) -> None:
    assert outcome("sessions_send", params, result=SEND_RESULT) == sha(SEND_CANONICAL)


@pytest.mark.parametrize("params", [None, {}, {"action": "read"}, "x"])
def test_send_tools_registry_applies_whatever_the_params(params: object) -> None:
    assert outcome("telegram", params, result=SEND_RESULT, send_tools={"telegram"}) == sha(
        SEND_CANONICAL
    )
    assert outcome("telegram", params, result=SEND_RESULT, send_tools=("telegram",)) == sha(
        SEND_CANONICAL
    )


def test_send_tools_names_are_compared_exactly() -> None:
    result = text_result("t", details={"messageId": "m"})
    default = sha('{"details":{"messageId":"m"},"text":"t"}')
    assert outcome("Telegram", {}, result=result, send_tools={"telegram"}) == default
    assert outcome("telegram", {}, result=result) == default


def test_message_in_send_tools_still_needs_a_send_action() -> None:
    result = text_result("t", details={"messageId": "m"})
    assert outcome("message", {"action": "read"}, result=result, send_tools={"message"}) == sha(
        '{"details":{"messageId":"m"},"text":"t"}'
    )


def test_send_with_non_mapping_details_hashes_empty_object() -> None:
    assert outcome("sessions_send", {}, result=text_result("t", details="x")) == sha("{}")
    assert outcome("sessions_send", {}, result={}) == sha("{}")


MESSAGE = {"id": "m1", "text": "hi"}


@pytest.mark.parametrize(
    ("extra", "canonical"),
    [
        pytest.param({"direction": "outbound"}, '{"direction":"outbound","text":"hi"}', id="dir"),
        pytest.param({"senderId": "u1"}, '{"senderId":"u1","text":"hi"}', id="senderId"),
        pytest.param({"accountId": "a1"}, '{"accountId":"a1","text":"hi"}', id="accountId"),
        pytest.param(
            {"conversation": {"id": "c1"}},
            '{"conversation":{"id":"c1"},"text":"hi"}',
            id="conversation-mapping-keeps-its-id",
        ),
        pytest.param({}, '{"id":"m1","text":"hi"}', id="no-qualifier-keeps-id"),
        pytest.param(
            {"direction": 1}, '{"direction":1,"id":"m1","text":"hi"}', id="non-str-direction"
        ),
        pytest.param(
            {"senderId": None}, '{"id":"m1","senderId":null,"text":"hi"}', id="null-senderId"
        ),
        pytest.param(
            {"conversation": "c1"},
            '{"conversation":"c1","id":"m1","text":"hi"}',
            id="str-conversation",
        ),
        pytest.param(
            {"route": {"id": "r1"}},
            '{"id":"m1","route":{"id":"r1"},"text":"hi"}',
            id="route-is-no-qualifier",
        ),
    ],
)
def test_message_object_id_is_dropped(extra: dict[str, object], canonical: str) -> None:
    details = {"message": {**MESSAGE, **extra}}
    assert outcome("sessions_send", {}, result={"details": details}) == sha(
        '{"message":' + canonical + "}"
    )


@pytest.mark.parametrize(
    ("message", "canonical"),
    [
        ({"id": 5, "text": "hi", "direction": "out"}, '{"direction":"out","id":5,"text":"hi"}'),
        ({"id": "m", "text": 5, "direction": "out"}, '{"direction":"out","id":"m","text":5}'),
        ({"id": "m", "direction": "out"}, '{"direction":"out","id":"m"}'),
    ],
)
def test_not_a_message_object_keeps_its_id(message: object, canonical: str) -> None:
    assert outcome("sessions_send", {}, result={"details": {"m": message}}) == sha(
        '{"m":' + canonical + "}"
    )


def test_conversation_and_route_ids_survive_beside_a_message_object() -> None:
    details = {
        "id": "top",
        "text": "hi",
        "direction": "outbound",
        "conversation": {"id": "c1", "kind": "dm"},
        "route": {"id": "r1", "channel": "tg"},
        "messages": [{"id": "m2", "text": "x", "accountId": "a"}],
    }
    expected = sha(
        '{"conversation":{"id":"c1","kind":"dm"},"direction":"outbound",'
        '"messages":[{"accountId":"a","text":"x"}],"route":{"channel":"tg","id":"r1"},"text":"hi"}'
    )
    assert outcome("message", {"action": "reply"}, result={"details": details}) == expected


def test_send_text_is_ignored_but_other_details_are_not() -> None:
    a = outcome("sessions_send", {}, result=text_result("a", details={"messageId": 1, "ok": 1}))
    b = outcome("sessions_send", {}, result=text_result("b", details={"messageId": 2, "ok": 1}))
    c = outcome("sessions_send", {}, result=text_result("a", details={"messageId": 1, "ok": 2}))
    assert a == b != c


def test_strip_send_ids_direct() -> None:
    assert strip_send_ids("x") == "x"
    assert strip_send_ids(None) is None
    assert strip_send_ids(({"ts": 1, "a": 2},)) == [{"a": 2}]
    assert strip_send_ids({"id": "m", "text": "t", "senderId": "u"}) == {
        "text": "t",
        "senderId": "u",
    }
    original = {"messageId": 1, "k": {"ts": 2}}
    strip_send_ids(original)
    assert original == {"messageId": 1, "k": {"ts": 2}}  # the input is not mutated


# =============================================================================================
# Step 8 with the update_plan normaliser (§3.7)
# =============================================================================================


PLAN_DETAILS = {"plan": [{"step": "write tests", "status": "in_progress"}], "explanation": "x"}
PLAN_RESULT = text_result("Plan updated", details=PLAN_DETAILS)


def test_update_plan_off_by_default_hashes_everything() -> None:
    expected = sha(
        '{"details":{"explanation":"x","plan":[{"status":"in_progress","step":"write tests"}]},'
        '"text":"Plan updated"}'
    )
    assert outcome("update_plan", {}, result=PLAN_RESULT) == expected


def test_update_plan_on_hashes_the_reduction_and_no_text() -> None:
    expected = sha(
        '{"details":{"hasExplanation":true,"planLength":1,"statuses":["in_progress"],'
        '"stepPresence":[true]},"text":""}'
    )
    assert outcome("update_plan", {}, result=PLAN_RESULT, normalizers={"update_plan"}) == expected
    assert outcome("update_plan", {}, result=PLAN_RESULT, normalizers=("update_plan",)) == expected


@pytest.mark.parametrize(
    ("details", "canonical"),
    [
        pytest.param(
            {},
            '{"hasExplanation":false,"planLength":0,"statuses":[],"stepPresence":[]}',
            id="empty",
        ),
        pytest.param(
            "not a mapping",
            '{"hasExplanation":false,"planLength":0,"statuses":[],"stepPresence":[]}',
            id="non-mapping-details-is-empty-object",
        ),
        pytest.param(
            {"plan": "x", "explanation": "  "},
            '{"hasExplanation":false,"planLength":0,"statuses":[],"stepPresence":[]}',
            id="non-array-plan-blank-explanation",
        ),
        pytest.param(
            {
                "plan": [
                    {"step": "a", "status": "done"},
                    {"step": " \u3000", "status": 1},
                    "loose",
                    None,
                    {"step": 5},
                ],
                "explanation": 1,
            },
            '{"hasExplanation":false,"planLength":5,"statuses":["done",null,null,null,null],'
            '"stepPresence":[true,false,false,false,false]}',
            id="entries",
        ),
        pytest.param(
            {"plan": ({"step": "s", "status": "x"},)},
            '{"hasExplanation":false,"planLength":1,"statuses":["x"],"stepPresence":[true]}',
            id="tuple-plan",
        ),
    ],
)
def test_update_plan_reduction(details: object, canonical: str) -> None:
    got = outcome(
        "update_plan", {}, result=text_result("t", details=details), normalizers={"update_plan"}
    )
    assert got == sha('{"details":' + canonical + ',"text":""}')


def test_update_plan_rewording_is_not_progress_only_when_on() -> None:
    def plan(step: str) -> dict[str, object]:
        return text_result(step, details={"plan": [{"step": step, "status": "pending"}]})

    on = {"update_plan"}
    assert outcome("update_plan", {}, result=plan("a"), normalizers=on) == outcome(
        "update_plan", {}, result=plan("b"), normalizers=on
    )
    assert outcome("update_plan", {}, result=plan("a")) != outcome(
        "update_plan", {}, result=plan("b")
    )


def test_update_plan_normaliser_keeps_earlier_steps_and_exact_name() -> None:
    on = {"update_plan"}
    assert outcome("update_plan", {}, error="e", normalizers=on) == err('"e"')
    assert outcome("update_plan", {}, result="s", normalizers=on) == sha('"s"')
    assert hash_tool_outcome("update_plan", {}, result={"details": VETO}, normalizers=on) == (
        OutcomeHash(None, None)
    )
    assert outcome("Update_Plan", {}, result=PLAN_RESULT, normalizers=on) == outcome(
        "Update_Plan", {}, result=PLAN_RESULT
    )
    assert outcome("read", {}, result=PLAN_RESULT, normalizers=on) == outcome(
        "read", {}, result=PLAN_RESULT
    )


@pytest.mark.parametrize(
    "call",
    [
        pytest.param(
            lambda n: hash_tool_outcome("read", {}, result={}, normalizers=n), id="result"
        ),
        pytest.param(lambda n: hash_tool_outcome("read", {}, error="e", normalizers=n), id="error"),
        pytest.param(lambda n: hash_tool_outcome("read", {}, normalizers=n), id="undefined"),
    ],
)
def test_unknown_normaliser_name_raises_value_error(call: Any) -> None:
    with pytest.raises(ValueError):
        call({"update_plna"})


# =============================================================================================
# §3.5 unknown-tool name extraction
# =============================================================================================


@pytest.mark.parametrize(
    ("text", "name"),
    [
        # The table of §3.5, row by row.
        ("Unknown tool: Foo_Bar", "foo_bar"),
        ("Tool exec not found", "exec"),
        ("tool 'x.y' is not available", "x.y"),
        ('xx unknown tool:  "FOO.bar" yy', "foo.bar"),
        ("tool x.y\u3000not found", "x.y"),
        ("Tool \u017ftop not found.", None),
        ("tool \u212aelvin\u3000not found", None),
        ("unknown  tool: foo", None),
        ("Unknown tool: ''", None),
        ('["Unknown tool:\\nx"]', None),
        # More.
        ("", None),
        ("   \u3000", None),
        ("UNKNOWN TOOL:FOO", "foo"),
        ("unknown tool foo", "foo"),
        ("unknown tool:\tfoo", "foo"),
        ("unknown tool:\u00a0foo", "foo"),
        ("unknown tool:\ufefffoo", "foo"),
        ("unknown tool\u2028foo", "foo"),
        ("unknown tool\x1cfoo", None),
        ("unknown tool\x85foo", None),
        ("unknown\ttool: foo", None),
        ("unknown\u00a0tool: foo", None),
        ("unknowntool: foo", None),
        ("unknown tool:", None),
        ("unknown tool: !", None),
        ("xunknown tool: foo", "foo"),
        ("error=unknown tool:'bar'.", "bar"),
        ('unknown tool: "Foo"', "foo"),
        ("Unknown tool: foo-bar.baz_9!", "foo-bar.baz_9"),
        ("Unknown tool: caf\u00e9", "caf"),
        ("Unknown tool: \u017foo", None),
        ("Unknown tool: \u212aelvin", None),
        ("Unknown tool: x\u0130", "x"),
        ("UN\u212aNOWN TOOL: foo", None),
        ("mytool foo not found", "foo"),
        ("Tool FOO is not available", "foo"),
        ("tool foo  not found", "foo"),
        ("tool\u3000foo\u3000is not available", "foo"),
        ("tool foo not  found", None),
        ("tool foo is not  available", None),
        ("tool foo not\u00a0found", None),
        ("tool foo iſ not available", None),
        ("tool foo NOT FOUND", "foo"),
        ("tool 'foo' not found", "foo"),
        ("tool foo bar not found", None),
        ("no such tool: foo", None),
        ("  unknown tool: foo  ", "foo"),
    ],
)
def test_extract_unknown_tool_name(text: str, name: str | None) -> None:
    assert extract_unknown_tool_name(text) == name


def test_first_pattern_wins_over_a_more_leftward_second_pattern() -> None:
    assert extract_unknown_tool_name("Tool bar not found (unknown tool: baz)") == "baz"


def test_leftmost_match_of_a_pattern_wins() -> None:
    assert extract_unknown_tool_name("unknown tool: a; unknown tool: b") == "a"
    assert extract_unknown_tool_name("tool a not found, tool b not found") == "a"


def test_list_error_newline_becomes_two_characters() -> None:
    got = hash_tool_outcome("t", {}, error=["Unknown tool:\nx"])
    assert got == OutcomeHash(err('"[\\"Unknown tool:\\\\nx\\"]"'), None)


# =============================================================================================
# Properties (json.dumps as an independent oracle; ASCII keys so code-point and UTF-16 order agree)
# =============================================================================================


def canonical(value: object) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def js_trim(s: str) -> str:
    return s.strip(JS_WS)


json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**53), max_value=2**53)
    | st.text(max_size=8)
)
json_values = st.recursive(
    json_scalars,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(st.text(alphabet="abcxyzAZ_-", max_size=6), inner, max_size=4)
    ),
    max_leaves=8,
)
details_strategy = st.dictionaries(st.text(alphabet="abcdeXY_", max_size=6), json_values)


@settings(max_examples=60, deadline=None)
@given(details=details_strategy, texts=st.lists(st.text(max_size=10), max_size=4))
def test_default_rule_matches_json_oracle(details: dict[str, Any], texts: list[str]) -> None:
    assume(not (details.get("status") == "blocked" and details.get("deniedReason") == "tool-loop"))
    result = {"content": [{"type": "text", "text": t} for t in texts], "details": details}
    expected = sha(canonical({"details": details, "text": js_trim("\n".join(texts))}))
    assert outcome("generic_tool", {"x": 1}, result=result) == expected


@settings(max_examples=150, deadline=None)
@given(text=st.text(max_size=40))
def test_string_error_matches_json_oracle(text: str) -> None:
    assert outcome("t", {}, error=text) == "error:" + sha(canonical(text))
    assert outcome("t", {}, error=ValueError(text)) == "error:" + sha(
        canonical(text or "ValueError")
    )


@settings(max_examples=40, deadline=None)
@given(
    details=details_strategy,
    noise=st.dictionaries(st.sampled_from(VOLATILE_KEYS), json_values, max_size=5),
    texts=st.tuples(st.text(max_size=5), st.text(max_size=5)),
)
def test_send_ignores_volatile_keys_and_text(
    details: dict[str, Any], noise: dict[str, Any], texts: tuple[str, str]
) -> None:
    # The alphabets above cannot spell a volatile key, "id" or "text": ``details`` is clean.
    clean_details = {**details, "deep": [{}]}
    noisy_details = {**details, **noise, "deep": [noise]}
    clean = outcome("sessions_send", {}, result=text_result(texts[0], details=clean_details))
    noisy = outcome("sessions_send", {}, result=text_result(texts[1], details=noisy_details))
    assert noisy == clean == sha(canonical(clean_details))


@settings(max_examples=50, deadline=None)
@given(
    result=json_values,
    error=st.one_of(st.none(), st.text(max_size=10), st.integers(), st.floats()),
)
def test_hash_shape(result: object, error: object) -> None:
    got = hash_tool_outcome("t", {}, result=result)
    assert got.result_hash is not None
    assert len(got.result_hash) == 64
    assert got.unknown_tool_name is None
    failed = hash_tool_outcome("t", {}, result=result, error=error).result_hash
    assert failed is not None
    assert failed.startswith("error:")
    assert len(failed) == len("error:") + 64
