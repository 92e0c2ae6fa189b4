"""The adaptive profile's shortcuts against the plain path they stand for.

``AdaptiveProfile`` answers some calls without decoding the window (``_cleared_and_new``):
on generated memory-store histories (every flag of the facts, pending records, several
runs, the call index on and off), the profile's verdict must be the one of the plain path,
``evaluate_adaptive`` on the decoded window, and the shortcut may only answer where that
finds nothing.
"""

from __future__ import annotations

import hashlib
from unittest import mock

from hypothesis import given, settings
from hypothesis import strategies as st

from loopwatch.core.records import ToolCallRecord
from loopwatch.detectors.adaptive import AdaptiveConfig, evaluate_adaptive, record_from_history
from loopwatch.detectors.profiles import AdaptiveProfile, UpcomingCall
from loopwatch.stores.memory import _runs
from loopwatch.stores.memory._compact import call_key
from loopwatch.stores.memory._history import SessionHistory
from memory_index import index_from

DIGESTS = [hashlib.sha256(str(i).encode()).hexdigest() for i in range(3)]
#: Calls of two tools, one args digest shared across them, one hash of another shape.
CALLS = [
    ("read", f"read:{DIGESTS[0]}"),
    ("read", f"read:{DIGESTS[1]}"),
    ("exec", f"exec:{DIGESTS[0]}"),
    ("exec", f"exec:{DIGESTS[2]}"),
    ("exec", "read:odd"),
    ("think", f"think:{DIGESTS[0]}"),
]
RESULTS = [None, DIGESTS[1], DIGESTS[2], "error:" + DIGESTS[1], "odd"]
#: Facts of every shape a record may carry: none (a reference guard's), each flag alone,
#: digests, an older version's shorter form.
FACTS = [
    None,
    "000000|||||",
    "100000|errclass:a|fh1|||",
    "100000||fh2|||",
    "010000|||||",
    "001000|||||",
    "000100|||||",
    "000010|||||",
    "000001|||||",
    "1000|errclass:b|fh1",
    "100100|errclass:a|fh1|code:x||",
]
Record = tuple[tuple[str, str], str | None, str | None, str | None]
RECORDS = st.tuples(
    st.sampled_from(CALLS),
    st.sampled_from(RESULTS),
    st.sampled_from(FACTS),
    st.sampled_from([None, None, "r2"]),
)


def _history_of(
    records: list[tuple[tuple[str, str], str | None, str | None, str | None]],
) -> SessionHistory:
    history = SessionHistory()
    for at, ((tool, args_hash), result_hash, facts, run_id) in enumerate(records):
        record = ToolCallRecord(tool, args_hash, None, run_id, result_hash, None, at, facts)
        if result_hash is None:
            history.append(record, 1000, call_key(tool, args_hash))  # a pending record
        else:
            history.add_filled(record, call_key(tool, args_hash))
    return history


@settings(max_examples=400, deadline=None)
@given(
    st.lists(RECORDS, max_size=14),
    st.sampled_from(CALLS),
    st.sampled_from([2, 3, 30]),
    st.sampled_from([0, 2, _runs.INDEX_FROM]),
    st.booleans(),
)
def test_the_quiet_shortcut_answers_as_the_detectors_do(
    records: list[Record],
    upcoming: tuple[str, str],
    window: int,
    index_size: int,
    warm: bool,
) -> None:
    config = AdaptiveConfig(window=window)
    profile = AdaptiveProfile(config)
    plain = AdaptiveProfile(config)
    tool, args_hash = upcoming
    call = UpcomingCall(tool, args_hash, None, False)
    with index_from(index_size):
        history = _history_of(records)
        view = history.view(None, (tool, args_hash, call_key(tool, args_hash)))
        if warm:  # the memo of decoded records holds the window already
            profile._detect_adaptive(view, call)
        source = view.fields()
        start = max(0, len(source) - window)
        decoded = [
            record_from_history(r.tool_name, r.args_hash, r.result_hash, r.facts, config)
            for r in source[start:]
        ]
        expected = evaluate_adaptive(decoded, tool, args_hash, config)
        if source and start < len(source) and profile._cleared_and_new(view, source, call):
            assert expected is None  # the shortcut only answers where nothing fires
        with mock.patch.object(AdaptiveProfile, "_cleared_and_new", return_value=False):
            slow = plain._detect_adaptive(view, call)
        assert profile._detect_adaptive(view, call) == slow
        assert (slow is None) == (expected is None)


def test_the_shortcut_is_taken_on_a_quiet_call() -> None:
    """The usual call (the newest record a success of its tool, the call new) is answered
    by the shortcut: the property above is not vacuous."""
    history = _history_of([(CALLS[2], DIGESTS[1], "000000|||||", None)])
    tool, args_hash = CALLS[3]
    view = history.view(None, (tool, args_hash, call_key(tool, args_hash)))
    call = UpcomingCall(tool, args_hash, None, False)
    profile = AdaptiveProfile()
    assert profile._cleared_and_new(view, view.fields(), call) is True
    again = UpcomingCall(*CALLS[2], None, False)  # the same call again: the detectors look
    assert profile._cleared_and_new(view, view.fields(), again) is False
