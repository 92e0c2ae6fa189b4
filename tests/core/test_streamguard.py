"""The stream-level unknown-tool guard (SPEC §5.7).

The guard's state is the ``last_name`` / ``count`` pair named by the spec; the replacement
text is written out in full here.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from loopwatch import UnknownToolStreamGuard


def text(name: str) -> str:
    return (
        f"I can't use the tool \"{name}\" here because it isn't available. "
        "I need to stop retrying it and answer without that tool."
    )


BLANK = text("blank tool name")


def state(guard: UnknownToolStreamGuard) -> tuple[str | None, int]:
    return guard.last_name, guard.count


def first_replaced(
    guard: UnknownToolStreamGuard, name: str = "ghost", limit: int = 40
) -> int | None:
    """The 1-based index of the first consecutive ``[name]`` message that is replaced."""
    for i in range(1, limit + 1):
        if guard.observe([name]) is not None:
            return i
    return None


# =============================================================================================
# Threshold resolution
# =============================================================================================


@pytest.mark.parametrize(
    ("threshold", "first"),
    [
        pytest.param(10, 11, id="10"),
        pytest.param(1, 2, id="1"),
        pytest.param(3, 4, id="3"),
        pytest.param(2.0, 3, id="2.0"),
        pytest.param(2.5, 3, id="2.5-floors-to-2"),
        pytest.param(2.999, 3, id="2.999-floors-to-2"),
        pytest.param(Fraction(7, 2), 4, id="Fraction-7/2"),
        pytest.param(1.0, 2, id="1.0"),
        pytest.param(0.5, None, id="0.5-floors-to-0-unknown-part-off"),
        pytest.param(0.999, None, id="0.999-floors-to-0"),
        pytest.param(None, 11, id="None"),
        pytest.param(0, 11, id="0"),
        pytest.param(0.0, 11, id="0.0"),
        pytest.param(-1, 11, id="negative"),
        pytest.param(-0.5, 11, id="negative-fraction"),
        pytest.param(math.nan, 11, id="nan"),
        pytest.param(math.inf, 11, id="inf"),
        pytest.param(-math.inf, 11, id="-inf"),
        pytest.param(True, 11, id="True"),
        pytest.param(False, 11, id="False"),
        pytest.param("3", 11, id="str"),
        pytest.param([3], 11, id="list"),
    ],
)
def test_threshold_resolution(threshold: object, first: int | None) -> None:
    guard = UnknownToolStreamGuard(["read"], threshold=threshold)
    assert first_replaced(guard) == first


def test_default_threshold_is_ten() -> None:
    assert first_replaced(UnknownToolStreamGuard(["read"])) == 11


def test_huge_integer_threshold_is_used() -> None:
    guard = UnknownToolStreamGuard(["read"], threshold=10**400)
    assert first_replaced(guard, limit=20) is None


# =============================================================================================
# Exceeds, not reaches; counting and resets
# =============================================================================================


def test_the_eleventh_consecutive_message_is_the_first_replaced() -> None:
    guard = UnknownToolStreamGuard(["read"])
    assert state(guard) == (None, 0)
    for i in range(1, 11):
        assert guard.observe(["ghost"]) is None
        assert state(guard) == ("ghost", i)
    assert guard.observe(["ghost"]) == text("ghost")
    assert state(guard) == ("ghost", 11)
    assert guard.observe(["ghost"]) == text("ghost")  # and every one after it
    assert state(guard) == ("ghost", 12)


def test_a_different_unknown_name_restarts_the_count() -> None:
    guard = UnknownToolStreamGuard(["read"], threshold=2)
    guard.observe(["ghost"])
    guard.observe(["ghost"])
    assert guard.observe(["other"]) is None
    assert state(guard) == ("other", 1)
    assert guard.observe(["ghost"]) is None
    assert state(guard) == ("ghost", 1)


@pytest.mark.parametrize(
    ("message", "reset"),
    [
        pytest.param([], True, id="none"),
        pytest.param(["read"], True, id="allowed"),
        pytest.param([None], True, id="incomplete"),
        pytest.param(["ghost", "other"], True, id="two-unknowns"),
        pytest.param([""], False, id="malformed-keeps-state"),
    ],
)
def test_what_breaks_a_streak(message: list[object], reset: bool) -> None:
    guard = UnknownToolStreamGuard(["read"])
    for _ in range(10):
        guard.observe(["ghost"])
    guard.observe(message)
    assert guard.observe(["ghost"]) == (None if reset else text("ghost"))
    assert state(guard) == ("ghost", 1 if reset else 11)


def test_unknown_names_are_counted_and_shown_normalised() -> None:
    guard = UnknownToolStreamGuard(["read"], threshold=2)
    for name in ["Ghost", " GHOST ", "ghost\u3000"]:
        guard.observe([name])
    assert state(guard) == ("ghost", 3)
    assert guard.observe(["\ufeffGhost"]) == text("ghost")
    aliased = UnknownToolStreamGuard(["read"], threshold=1)
    aliased.observe(["bash"])
    assert aliased.observe([" BASH "]) == text("exec")


# =============================================================================================
# Classification (step 2 and 3) and effects, from a primed state ("ghost", 1), threshold 1
# =============================================================================================


def primed() -> UnknownToolStreamGuard:
    guard = UnknownToolStreamGuard(["read", "exec"], threshold=1)
    assert guard.observe(["ghost"]) is None
    assert state(guard) == ("ghost", 1)
    return guard


@pytest.mark.parametrize(
    ("message", "returned", "after"),
    [
        # none
        pytest.param([], None, (None, 0), id="no-names"),
        pytest.param((), None, (None, 0), id="no-names-tuple"),
        # allowed
        pytest.param(["read"], None, (None, 0), id="allowed"),
        pytest.param([" READ "], None, (None, 0), id="allowed-normalised"),
        pytest.param(["bash"], None, (None, 0), id="allowed-alias"),
        pytest.param(["read", "ghost"], None, (None, 0), id="allowed-beats-unknown"),
        pytest.param(["ghost", "read"], None, (None, 0), id="allowed-anywhere"),
        pytest.param(["read", ""], None, (None, 0), id="allowed-beats-blank"),
        pytest.param(["read", None], None, (None, 0), id="allowed-beats-incomplete"),
        pytest.param(["a", "b", "read"], None, (None, 0), id="allowed-beats-two-unknowns"),
        # unknown
        pytest.param(["ghost"], text("ghost"), ("ghost", 2), id="unknown-same"),
        pytest.param([" Ghost "], text("ghost"), ("ghost", 2), id="unknown-normalised"),
        pytest.param(("ghost",), text("ghost"), ("ghost", 2), id="tuple"),
        pytest.param(["ghost", "GHOST"], text("ghost"), ("ghost", 2), id="same-unknown-twice"),
        pytest.param(["", "ghost"], text("ghost"), ("ghost", 2), id="blank-plus-unknown"),
        pytest.param(["other"], None, ("other", 1), id="unknown-new-name"),
        pytest.param(["\x1c"], None, ("\x1c", 1), id="U+001C-is-not-blank"),
        # incomplete
        pytest.param([None], None, (None, 0), id="non-str"),
        pytest.param([5, "ghost"], None, (None, 0), id="non-str-plus-unknown"),
        pytest.param(["ghost", "other"], None, (None, 0), id="two-unknowns"),
        pytest.param(["ghost", "other", "ghost"], None, (None, 0), id="two-unknowns-3"),
        pytest.param(["", None], None, (None, 0), id="blank-plus-non-str"),
        pytest.param(["", "ghost", "other"], None, (None, 0), id="blank-plus-two-unknowns"),
        # malformed: answered, state unchanged
        pytest.param([""], BLANK, ("ghost", 1), id="empty-name"),
        pytest.param(["  \u3000\ufeff"], BLANK, ("ghost", 1), id="js-whitespace-name"),
        pytest.param(["", " "], BLANK, ("ghost", 1), id="two-blanks"),
    ],
)
def test_classification(
    message: Sequence[object], returned: str | None, after: tuple[str | None, int]
) -> None:
    guard = primed()
    assert guard.observe(message) == returned
    assert state(guard) == after


@pytest.mark.parametrize(
    ("message", "returned"),
    [
        ([], None),
        (["anything"], None),
        (["read"], None),
        ([None], None),
        (["a", "b"], None),
        ([""], BLANK),
        (["x", ""], BLANK),
        ([None, " "], BLANK),
    ],
)
def test_empty_allowed_tools_ignores_names(message: list[object], returned: str | None) -> None:
    guard = UnknownToolStreamGuard([], threshold=1)
    for _ in range(5):
        assert guard.observe(message) == returned
        assert state(guard) == (None, 0)


# =============================================================================================
# Allowed matching
# =============================================================================================


@pytest.mark.parametrize(
    ("allowed", "name", "is_allowed", "unknown_as"),
    [
        (["read"], "read", True, None),
        (["read"], " read ", True, None),
        (["read"], "\u3000read\ufeff", True, None),
        (["read"], "Read", True, None),
        (["Read"], "Read", True, None),
        (["Read"], "read", True, None),
        (["Read"], "READ", True, None),
        ([" read "], "read", True, None),
        ([" Read "], " READ ", True, None),
        (["exec"], "bash", True, None),
        (["exec"], "BASH", True, None),
        (["Exec"], "bash", True, None),
        (["bash"], "bash", True, None),
        (["bash"], "BASH", True, None),
        (["apply_patch"], "apply-patch", True, None),
        (["apply-patch"], "apply-patch", True, None),
        (["constructor"], "constructor", True, None),
        (["kelvin"], "\u212aelvin", True, None),
        (["\u212aelvin"], "kelvin", True, None),
        # exact matches win over ambiguity
        (["Read", "READ"], "Read", True, None),
        (["Read", "READ"], " READ ", True, None),
        (["read", " read"], "read", True, None),
        # ambiguous case-insensitive matches do not count
        (["Read", "READ"], "read", False, "read"),
        (["READ", " read"], "Read", False, "read"),
        (["Exec", "EXEC"], "bash", False, "exec"),
        (["Bash", "BASH"], "bash", False, "exec"),
        # no match
        (["read"], "rea", False, "rea"),
        (["read"], "reader", False, "reader"),
        (["read"], "re ad", False, "re ad"),
        (["exec"], "sh", False, "sh"),
    ],
)
def test_allowed_matching(
    allowed: list[str], name: str, is_allowed: bool, unknown_as: str | None
) -> None:
    guard = UnknownToolStreamGuard(allowed, threshold=1)
    guard.observe(["ghost"])
    assert guard.observe([name]) is None
    if is_allowed:
        assert state(guard) == (None, 0)
    else:
        assert state(guard) == (unknown_as, 1)
        assert guard.observe([name]) == text(unknown_as or "")


def test_allowed_tools_may_be_any_iterable() -> None:
    for allowed in ({"read"}, ("read",), (t for t in ["read"]), {"read": 1}.keys()):
        guard = UnknownToolStreamGuard(allowed, threshold=1)
        guard.observe(["ghost"])
        guard.observe(["read"])
        assert state(guard) == (None, 0)


def test_one_allowed_tool_given_as_a_string_is_one_name() -> None:
    # Not its letters: "read_file" then allows "r", "e", ..., and every call of read_file
    # itself counts as a call of an unknown tool.
    guard = UnknownToolStreamGuard("read_file", threshold=1)
    assert guard.allowed_tools == ("read_file",)
    guard.observe(["read_file"])
    assert state(guard) == (None, 0)
    guard.observe(["r"])
    assert state(guard) == ("r", 1)


# =============================================================================================
# Threshold 0 (a value between 0 and 1)
# =============================================================================================


@pytest.mark.parametrize(
    ("message", "returned"),
    [
        (["ghost"], None),
        (["ghost", "other"], None),
        ([None], None),
        ([], None),
        (["read"], None),
        ([""], BLANK),
        (["", "ghost"], None),
    ],
)
def test_threshold_zero_turns_off_the_unknown_part_only(
    message: list[object], returned: str | None
) -> None:
    guard = UnknownToolStreamGuard(["read"], threshold=0.5)
    for _ in range(15):
        assert guard.observe(message) == returned
        assert state(guard) == (None, 0)


# =============================================================================================
# Property: a model of §5.7 with allowed_tools = ["read"]
# =============================================================================================

NAMES: list[object] = ["read", "READ", "ghost", " Ghost", "other", "", " ", None, 3]


def model_classify(message: list[object]) -> tuple[str, str | None]:
    if not message:
        return "none", None
    allowed = blank = incomplete = False
    unknown: str | None = None
    for name in message:
        if not isinstance(name, str):
            incomplete = True
        elif name.strip() == "":
            blank = True
        elif name.strip().lower() == "read":
            allowed = True
        else:
            normalised = name.strip().lower()
            if unknown is not None and unknown != normalised:
                incomplete = True
            else:
                unknown = normalised
    if allowed:
        return "allowed", None
    if blank and not incomplete and unknown is None:
        return "malformed", None
    if incomplete:
        return "incomplete", None
    if unknown is None:
        return "none", None
    return "unknown", unknown


@settings(max_examples=100, deadline=None)
@given(
    threshold=st.integers(1, 4),
    messages=st.lists(st.lists(st.sampled_from(NAMES), max_size=3), max_size=30),
)
def test_guard_matches_a_model(threshold: int, messages: list[list[object]]) -> None:
    guard = UnknownToolStreamGuard(["read"], threshold=threshold)
    last: str | None = None
    count = 0
    for message in messages:
        kind, name = model_classify(message)
        expected: str | None = None
        if kind == "malformed":
            expected = BLANK
        elif kind == "unknown":
            count = count + 1 if name == last else 1
            last = name
            expected = text(name or "") if count > threshold else None
        else:
            last, count = None, 0
        assert guard.observe(message) == expected
        assert state(guard) == (last, count)
