"""Names and ids (SPEC §1, §5.1), the ``UNDEFINED`` sentinel and ``LoopDetectedError`` (§9.1),
and the params summary that events carry (§5.5, which uses §3.0 lengths).
"""

from __future__ import annotations

import collections
import copy
import pickle
from typing import NamedTuple

import pytest

import loopwatch
from loopwatch import UNDEFINED, LoopDetectedError, LoopVerdict
from loopwatch.core._undefined import UNDEFINED as PRIVATE_UNDEFINED
from loopwatch.core._undefined import UndefinedType
from loopwatch.core.naming import normalize_run_id, normalize_tool_call_id, normalize_tool_name
from loopwatch.events import params_summary

# =============================================================================================
# Tool names (§5.1)
# =============================================================================================


@pytest.mark.parametrize(
    ("raw", "normalised"),
    [
        # the fallback applies before trimming, with Python truthiness
        (None, "tool"),
        ("", "tool"),
        (0, "tool"),
        (False, "tool"),
        ([], "tool"),
        # whitespace-only names trim to "", not "tool"
        (" ", ""),
        ("\t\n", ""),
        ("\u3000", ""),
        ("\ufeff", ""),
        # trim (JavaScript whitespace set) and lower-case
        ("Read", "read"),
        ("  Read  ", "read"),
        ("\u00a0read\u2028", "read"),
        ("\ufeffread\ufeff", "read"),
        ("\x1cread", "\x1cread"),
        ("read\x85", "read\x85"),
        ("WEB_SEARCH", "web_search"),
        ("\u212aelvin", "kelvin"),
        ("\u0130", "\u0130".lower()),
        # aliases, by exact lookup after trimming and lower-casing
        ("bash", "exec"),
        ("BASH", "exec"),
        (" Bash ", "exec"),
        ("bash\u00a0", "exec"),
        ("apply-patch", "apply_patch"),
        ("Apply-Patch", "apply_patch"),
        ("apply_patch", "apply_patch"),
        ("exec", "exec"),
        ("sh", "sh"),
        ("bash2", "bash2"),
        ("ba sh", "ba sh"),
        ("constructor", "constructor"),
        ("toString", "tostring"),
        ("__proto__", "__proto__"),
        # non-str values go through str()
        (5, "5"),
        (True, "true"),
        (1.5, "1.5"),
        (["A"], "['a']"),
    ],
)
def test_normalize_tool_name(raw: object, normalised: str) -> None:
    assert normalize_tool_name(raw) == normalised


# =============================================================================================
# Run ids (§1) and tool-call ids (§5.1)
# =============================================================================================


@pytest.mark.parametrize(
    ("raw", "run_id"),
    [
        (None, None),
        ("", None),
        ("   ", None),
        ("\u3000\ufeff\u00a0", None),
        (" run-1 ", "run-1"),
        ("run-1", "run-1"),
        ("\tR\n", "R"),
        ("\x1cr", "\x1cr"),
        ("r\x85", "r\x85"),
        ("a b", "a b"),
        (5, None),
        (0, None),
        (True, None),
        (b"run", None),
        (["run"], None),
        (UNDEFINED, None),
    ],
)
def test_normalize_run_id(raw: object, run_id: str | None) -> None:
    assert normalize_run_id(raw) == run_id


@pytest.mark.parametrize(
    ("raw", "stored"),
    [
        (None, None),
        ("", ""),
        ("c1", "c1"),
        (" c1 ", " c1 "),
        (5, "5"),
        (0, "0"),
        (False, "False"),
    ],
)
def test_normalize_tool_call_id(raw: object, stored: str | None) -> None:
    assert normalize_tool_call_id(raw) == stored


# =============================================================================================
# UNDEFINED (§9.1)
# =============================================================================================


def test_undefined_is_one_public_singleton() -> None:
    assert loopwatch.UNDEFINED is PRIVATE_UNDEFINED is UNDEFINED
    assert "UNDEFINED" in loopwatch.__all__
    assert UndefinedType() is UNDEFINED
    assert type(UNDEFINED)() is UNDEFINED


def test_undefined_is_falsy_and_not_none() -> None:
    assert not UNDEFINED
    assert bool(UNDEFINED) is False
    assert UNDEFINED is not None
    assert UNDEFINED != None  # noqa: E711
    assert UNDEFINED == UNDEFINED


def test_undefined_repr() -> None:
    assert repr(UNDEFINED) == "loopwatch.UNDEFINED"
    assert repr([UNDEFINED]) == "[loopwatch.UNDEFINED]"


def test_undefined_survives_copy_deepcopy_and_pickle() -> None:
    assert copy.copy(UNDEFINED) is UNDEFINED
    assert copy.deepcopy(UNDEFINED) is UNDEFINED
    nested = copy.deepcopy({"a": [UNDEFINED, (UNDEFINED,)]})
    assert nested["a"][0] is UNDEFINED and nested["a"][1][0] is UNDEFINED
    for protocol in range(pickle.HIGHEST_PROTOCOL + 1):
        assert pickle.loads(pickle.dumps(UNDEFINED, protocol=protocol)) is UNDEFINED
        loaded = pickle.loads(pickle.dumps({"k": [UNDEFINED]}, protocol=protocol))
        assert loaded["k"][0] is UNDEFINED


def test_undefined_is_hashable_and_usable_as_a_key() -> None:
    assert {UNDEFINED: 1}[UNDEFINED] == 1
    assert len({UNDEFINED, copy.deepcopy(UNDEFINED)}) == 1


# =============================================================================================
# LoopDetectedError (§9.1, §11.4)
# =============================================================================================


def critical_verdict() -> LoopVerdict:
    return LoopVerdict(
        stuck=True,
        level="critical",
        detector="generic_repeat",
        count=20,
        message="CRITICAL: Called read with identical arguments and identical outcomes 20 "
        "times. Session execution blocked to prevent runaway loops.",
        warning_key="generic:read:read:x:y",
    )


def test_loop_detected_error() -> None:
    verdict = critical_verdict()
    err = LoopDetectedError(verdict)
    # Not a RuntimeError (issue 16): an agent loop's ``except RuntimeError`` must not
    # swallow the end of a run; every deliberate loopwatch error is a LoopwatchError.
    assert not isinstance(err, RuntimeError)
    assert isinstance(err, loopwatch.LoopwatchError)
    assert err.verdict is verdict
    assert str(err) == verdict.message
    with pytest.raises(LoopDetectedError) as info:
        raise err
    assert info.value.verdict is verdict
    assert "LoopDetectedError" in loopwatch.__all__


def test_loop_detected_error_without_message() -> None:
    err = LoopDetectedError(LoopVerdict(stuck=False))
    assert str(err) == ""


# =============================================================================================
# paramsSummary (§5.5): kinds, and lengths in UTF-16 code units (§3.0)
# =============================================================================================


class Point(NamedTuple):
    x: int
    y: int


LegacyPoint = collections.namedtuple("LegacyPoint", ["x", "y"])


class Plain:
    pass


def a_function() -> None:
    pass


@pytest.mark.parametrize(
    ("params", "summary"),
    [
        (None, {"kind": "null"}),
        (UNDEFINED, {"kind": "undefined"}),
        (True, {"kind": "boolean"}),
        (False, {"kind": "boolean"}),
        (0, {"kind": "number"}),
        (2.5, {"kind": "number"}),
        (float("nan"), {"kind": "number"}),
        ("", {"kind": "string", "length": 0}),
        ("abc", {"kind": "string", "length": 3}),
        ("\U0001f600", {"kind": "string", "length": 2}),
        ("a\U0001f600\uff21", {"kind": "string", "length": 4}),
        (Point(1, 2), {"kind": "object"}),
        (LegacyPoint(1, 2), {"kind": "object"}),
        ([], {"kind": "array", "length": 0}),
        ([1, 2, 3], {"kind": "array", "length": 3}),
        ((1,), {"kind": "array", "length": 1}),
        ({1, 2}, {"kind": "array", "length": 2}),
        (frozenset(), {"kind": "array", "length": 0}),
        ({}, {"kind": "object"}),
        ({"a": 1}, {"kind": "object"}),
        (a_function, {"kind": "other"}),
        (Plain, {"kind": "other"}),
        (Plain(), {"kind": "object"}),
        (b"bytes", {"kind": "object"}),
    ],
)
def test_params_summary(params: object, summary: dict[str, object]) -> None:
    assert params_summary(params) == summary


def test_one_exception_tree() -> None:
    """Every deliberate error derives from LoopwatchError; config errors stay ValueErrors."""
    for name in (
        "ConfigError",
        "StoreError",
        "LoopDetectedError",
        "PostCompactionLoopPersistedError",
    ):
        cls = getattr(loopwatch, name)
        assert issubclass(cls, loopwatch.LoopwatchError), name
        assert not issubclass(cls, RuntimeError), name
    assert issubclass(loopwatch.ConfigError, ValueError)
    assert not issubclass(loopwatch.LoopwatchError, RuntimeError)
    import pickle

    err = LoopDetectedError(critical_verdict())
    again = pickle.loads(pickle.dumps(err))
    assert str(again) == str(err) and again.verdict == err.verdict
