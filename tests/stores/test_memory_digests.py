"""The digests the guard hands the memory store as bytes are those it would parse back.

``hash_tool_call`` and ``hash_tool_outcome`` remember the 32 bytes behind the newest hash
they made (``signature_digest``, ``result_digest``), so that the memory store's
``call_key`` / ``result_key`` do not parse the hex digits back on every guarded call. The
shortcut is taken only for the very string object made last; these tests check that its
answer is the parsed one for every such string, and that any other string (an equal copy,
another tool name) goes the parsing way.
"""

from __future__ import annotations

import threading

from hypothesis import given, settings
from hypothesis import strategies as st

from loopwatch import UNDEFINED
from loopwatch.core.fingerprint import (
    details_and_text_bytes,
    digest,
    digest_bytes,
    digest_details_and_text,
    digest_pure,
    hash_tool_call,
    signature_digest,
)
from loopwatch.core.outcomes import hash_tool_outcome, result_digest
from loopwatch.stores.memory._compact import call_key, result_key

_scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text()
_values = st.recursive(
    _scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner, max_size=3),
    max_leaves=8,
)
_tools = st.sampled_from(["read", "exec", "process", "web_search"]) | st.text(max_size=12)


def _copy(text: str) -> str:
    """An equal string that is another object (defeats the identity shortcut)."""
    copy = "".join(list(text))
    assert copy == text and (copy is not text or not text)
    return copy


@settings(max_examples=300)
@given(tool=_tools, params=_values, other=_tools)
def test_call_key_of_the_newest_signature_is_the_parsed_one(
    tool: str, params: object, other: str
) -> None:
    signature = hash_tool_call(tool, params)
    assert signature_digest(tool, signature) == bytes.fromhex(signature[len(tool) + 1 :])
    fast = call_key(tool, signature)
    assert fast == call_key(tool, _copy(signature))
    assert isinstance(fast, bytes) and len(fast) == 32
    # The same string under another tool name: never the shortcut's bytes unless parsing
    # gives them too.
    assert call_key(other, signature) == call_key(other, _copy(signature))


@settings(max_examples=300)
@given(tool=_tools, params=_values, result=_values | st.text(), failed=st.booleans())
def test_result_key_of_the_newest_outcome_is_the_parsed_one(
    tool: str, params: object, result: object, failed: bool
) -> None:
    if failed:
        outcome = hash_tool_outcome(tool, params, error=str(result))
    else:
        outcome = hash_tool_outcome(tool, params, result=result)
    result_hash = outcome.result_hash
    if result_hash is None:  # the loop veto: nothing to key
        assert result_digest("") is None
        return
    fast = result_key(result_hash)
    assert fast == result_key(_copy(result_hash))
    assert isinstance(fast, bytes) and len(fast) == 33
    assert result_digest(result_hash) == fast[:32]


def test_a_content_result_and_an_error_are_keyed_as_parsed() -> None:
    for outcome in (
        hash_tool_outcome("read", {"p": 1}, result={"content": [{"type": "text", "text": "x\n"}]}),
        hash_tool_outcome("exec", {"c": "ls"}, result={"details": {"exitCode": 1}}),
        hash_tool_outcome("read", {"p": 1}, error=ValueError("nope")),
        hash_tool_outcome("read", {"p": 1}, error=None),
    ):
        assert outcome.result_hash is not None
        assert result_key(outcome.result_hash) == result_key(_copy(outcome.result_hash))
    assert hash_tool_outcome("read", {}, result=UNDEFINED).result_hash is None


def test_only_the_newest_hash_takes_the_shortcut() -> None:
    first = hash_tool_call("read", {"path": "a"})
    second = hash_tool_call("read", {"path": "b"})
    assert signature_digest("read", first) is None
    assert signature_digest("read", _copy(second)) is None
    assert signature_digest("write", second) is None
    assert signature_digest("read", second) is not None
    assert call_key("read", first) == bytes.fromhex(first[5:])
    one = hash_tool_outcome("read", {}, result="a").result_hash
    two = hash_tool_outcome("read", {}, result="b").result_hash
    assert one is not None and two is not None
    assert result_digest(one) is None and result_digest(two) is not None


def test_threads_hashing_at_once_never_get_another_calls_bytes() -> None:
    errors: list[str] = []

    def work(name: str) -> None:
        for index in range(2000):
            signature = hash_tool_call(name, {"i": index})
            key = call_key(name, signature)
            if key != bytes.fromhex(signature[len(name) + 1 :]):
                errors.append(signature)

    threads = [threading.Thread(target=work, args=(f"tool{n}",)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []


@settings(max_examples=200)
@given(value=_values, text=st.text())
def test_the_byte_digests_are_the_hex_ones(value: object, text: str) -> None:
    try:
        expected = digest_pure(value)
    except TypeError:
        return
    assert digest_bytes(value).hex() == expected == digest(value)
    details = {"status": value}
    assert details_and_text_bytes(details, text).hex() == digest_details_and_text(details, text)


def test_before_any_hash_the_empty_hashes_are_parsed_too() -> None:
    """In a fresh process, before anything was hashed, the remembered hash is no string a
    caller can pass: an empty args or result hash (the empty string is one shared object)
    was once read as empty digest bytes, and came back from the store as zeros."""
    import subprocess
    import sys

    script = """
from loopwatch.core import fingerprint, outcomes
from loopwatch.core.records import ToolCallRecord
from loopwatch.stores.memory._compact import CompactRecord, call_key, result_key
assert call_key("", "") == "" and result_key("") == ""
assert fingerprint.signature_digest("", "") is None and outcomes.result_digest("") is None
record = ToolCallRecord("read", "read:" + "ab" * 32, None, None, "", None, 7, None)
assert CompactRecord.filled(record, call_key("read", record.args_hash)).public() == record
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
