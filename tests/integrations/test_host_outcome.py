"""A host's structured tool result is compared whole (loopwatch.host_outcome).

The outcome hash reads a mapping as an OpenClaw result (its ``content`` text and its
``details``), as the reference does; a plain ``dict`` a framework's tool returns has
neither, so, passed as it is, every result hashed alike and a status polled while it
changed was blocked as a loop. Adapters pass results through ``as_outcome``.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from loopwatch import LoopGuard
from loopwatch.core.outcomes import hash_tool_outcome
from loopwatch.host_outcome import VOLATILE_RESULT_KEYS, as_outcome, is_openclaw_shaped

S = "session"


def _outcome_hash(result: object) -> str | None:
    return hash_tool_outcome("job_status", {"job": "b"}, result=as_outcome(result)).result_hash


def test_two_different_structured_results_have_different_outcomes() -> None:
    first = {"state": "running", "progress": 40}
    second = {"state": "running", "progress": 50}
    # The reference rule alone reads neither: both are the empty OpenClaw result.
    assert hash_tool_outcome("t", {}, result=first) == hash_tool_outcome("t", {}, result=second)
    assert _outcome_hash(first) != _outcome_hash(second)
    assert _outcome_hash(first) == _outcome_hash({"progress": 40, "state": "running"})


def test_timings_and_per_call_ids_do_not_make_identical_results_differ() -> None:
    first = {"files": ["a.py"], "durationMs": 12, "meta": [{"tool_use_id": "x1", "n": 1}]}
    again = {"files": ["a.py"], "durationMs": 99, "meta": [{"tool_use_id": "x2", "n": 1}]}
    other = {"files": ["b.py"], "durationMs": 12, "meta": [{"tool_use_id": "x1", "n": 1}]}
    assert _outcome_hash(first) == _outcome_hash(again)
    assert _outcome_hash(first) != _outcome_hash(other)
    assert "durationMs" in VOLATILE_RESULT_KEYS


@pytest.mark.parametrize(
    "result",
    [
        {"content": [{"type": "text", "text": "ok"}]},
        {"details": {"status": "ok"}},
        {"content": [{"type": "text", "text": "7"}], "isError": False},  # MCP CallToolResult
        {"content": [{"type": "image", "data": "..."}]},
        "plain text",
        ["a", "list"],
        None,
        42,
    ],
)
def test_openclaw_shaped_results_and_non_mappings_pass_unchanged(result: object) -> None:
    assert as_outcome(result) is result


@pytest.mark.parametrize(
    ("first", "second"),
    [
        ({"content": "one"}, {"content": "two"}),
        ({"content": ["a"]}, {"content": ["b"]}),
        (
            {"content": [], "structuredContent": {"x": 1}},
            {"content": [], "structuredContent": {"x": 2}},
        ),
    ],
)
def test_a_content_without_typed_blocks_is_compared_whole(
    first: dict[str, Any], second: dict[str, Any]
) -> None:
    assert not is_openclaw_shaped(first)
    assert _outcome_hash(first) != _outcome_hash(second)


class _BrokenMapping(Mapping[str, Any]):
    """A host mapping whose reading fails."""

    def __getitem__(self, key: str) -> Any:
        raise RuntimeError("boom")

    def __iter__(self) -> Iterator[str]:
        raise RuntimeError("boom")

    def __len__(self) -> int:
        return 1


def test_a_mapping_that_cannot_be_read_is_kept_as_it_is() -> None:
    broken = _BrokenMapping()
    assert as_outcome(broken) is broken


def test_values_without_a_json_form_still_give_a_text() -> None:
    class Opaque:
        def __str__(self) -> str:
            return "opaque"

    cyclic: dict[str, Any] = {"n": 1}
    cyclic["self"] = cyclic
    assert isinstance(as_outcome({"value": Opaque()}), str)
    assert isinstance(as_outcome(cyclic), str)
    assert isinstance(as_outcome({"nan": math.nan, "bytes": b"\x00\xff"}), str)


JSONISH = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats()
    | st.text()
    | st.binary(max_size=8)
    | st.sampled_from(sorted(VOLATILE_RESULT_KEYS)),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(
            st.text(max_size=6) | st.sampled_from(sorted(VOLATILE_RESULT_KEYS)), inner
        )
    ),
    max_leaves=20,
)


@given(st.dictionaries(st.text(max_size=6), JSONISH, max_size=5))
def test_any_mapping_gives_a_text_or_itself_and_never_raises(result: dict[str, Any]) -> None:
    shaped = as_outcome(result)
    assert shaped is result if is_openclaw_shaped(result) else isinstance(shaped, str)
    assert as_outcome(result) == shaped  # deterministic


@given(JSONISH)
def test_a_volatile_key_never_changes_the_outcome(value: object) -> None:
    base = {"data": value}
    assert as_outcome(base) == as_outcome({**base, "durationMs": 1234, "tool_use_id": "t"})


# --- through a guard ---------------------------------------------------------------------


def _poll(profile: str, changing: bool) -> tuple[int, int]:
    """A tool function returning a dict, called 40 times with the same args: (ran, blocked)."""
    guard = LoopGuard({"enabled": True}, profile=profile)  # type: ignore[arg-type]
    ran = {"n": 0}

    @guard.tool(session_key=S, name="job_status")
    def job_status(job: str) -> dict[str, Any]:
        ran["n"] += 1
        progress = ran["n"] if changing else 5
        return {"state": "running", "progress": progress, "durationMs": ran["n"] * 7}

    blocked = 0
    for _ in range(40):
        before = ran["n"]
        job_status(job="build-1")
        blocked += ran["n"] == before
    return ran["n"], blocked


@pytest.mark.parametrize("profile", ["reference", "adaptive"])
def test_a_status_polled_while_it_changes_is_never_blocked(profile: str) -> None:
    assert _poll(profile, changing=True) == (40, 0)


@pytest.mark.parametrize("profile", ["reference", "adaptive"])
def test_a_status_polled_while_nothing_changes_is_blocked(profile: str) -> None:
    ran, blocked = _poll(profile, changing=False)
    assert ran < 40 and blocked == 40 - ran
