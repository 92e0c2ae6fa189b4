"""Normaliser names and the ``update_plan`` reduction (SPEC §3.7, §9.1)."""

from __future__ import annotations

import hashlib
import types
from typing import Any

import pytest

from loopwatch.core._undefined import UNDEFINED
from loopwatch.core.fingerprint import hash_tool_call, stable_stringify
from loopwatch.core.normalizers import KNOWN_NORMALIZERS, reduce_update_plan, validate_normalizers


def sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def test_known_normalizers() -> None:
    assert frozenset({"update_plan"}) == KNOWN_NORMALIZERS


# --- validate_normalizers ---------------------------------------------------------------------

VALID: list[tuple[str, Any, frozenset[str]]] = [
    ("none", None, frozenset()),
    ("empty tuple", (), frozenset()),
    ("empty set", set(), frozenset()),
    ("list", ["update_plan"], frozenset({"update_plan"})),
    ("set", {"update_plan"}, frozenset({"update_plan"})),
    ("duplicates", ("update_plan", "update_plan"), frozenset({"update_plan"})),
    ("a plain str is one name", "update_plan", frozenset({"update_plan"})),
    ("generator", (n for n in ["update_plan"]), frozenset({"update_plan"})),
    ("dict keys", {"update_plan": True}.keys(), frozenset({"update_plan"})),
]


@pytest.mark.parametrize(("names", "expected"), [v[1:] for v in VALID], ids=[v[0] for v in VALID])
def test_validate_normalizers_accepts(names: Any, expected: frozenset[str]) -> None:
    result = validate_normalizers(names)
    assert result == expected
    assert type(result) is frozenset


def test_validate_normalizers_returns_a_valid_frozenset_as_is() -> None:
    # LoopGuard validates once and passes the frozenset on every call: no copy then.
    names = frozenset({"update_plan"})
    assert validate_normalizers(names) is names


INVALID: list[tuple[str, Any, list[str]]] = [
    ("unknown name", ["plan"], ["'plan'"]),
    ("unknown str is one name, not its characters", "upd", ["'upd'"]),
    ("case matters", {"Update_Plan"}, ["'Update_Plan'"]),
    ("mixed", ["update_plan", "exec", "zzz"], ["'exec'", "'zzz'"]),
    ("not a str", [1], ["1"]),
    ("empty name", [""], ["''"]),
]


@pytest.mark.parametrize(
    ("names", "mentioned"), [v[1:] for v in INVALID], ids=[v[0] for v in INVALID]
)
def test_validate_normalizers_rejects(names: Any, mentioned: list[str]) -> None:
    with pytest.raises(ValueError, match="unknown normalizer") as info:
        validate_normalizers(names)
    message = str(info.value)
    for text in mentioned:
        assert text in message
    assert "'update_plan'" in message.split("known:")[1]  # names what is allowed


def test_unknown_str_is_reported_whole() -> None:
    with pytest.raises(ValueError) as info:
        validate_normalizers("upd")
    assert "'u'" not in str(info.value)


# --- reduce_update_plan -------------------------------------------------------------------------


def reduced(
    length: int, statuses: list[Any], steps: list[bool], explanation: bool
) -> dict[str, Any]:
    return {
        "planLength": length,
        "statuses": statuses,
        "stepPresence": steps,
        "hasExplanation": explanation,
    }


NOT_MAPPINGS: list[tuple[str, object]] = [
    ("list", [{"step": "a"}]),
    ("str", "plan"),
    ("none", None),
    ("undefined", UNDEFINED),
    ("int", 3),
]


@pytest.mark.parametrize("value", [v[1] for v in NOT_MAPPINGS], ids=[v[0] for v in NOT_MAPPINGS])
def test_non_mappings_are_unchanged(value: object) -> None:
    assert reduce_update_plan(value) is value


REDUCTIONS: list[tuple[str, object, dict[str, Any]]] = [
    ("empty", {}, reduced(0, [], [], False)),
    (
        "typical",
        {
            "explanation": "Working through it",
            "plan": [
                {"step": "Read the code", "status": "completed"},
                {"step": "Write the fix", "status": "in_progress"},
                {"step": "Run tests", "status": "pending"},
            ],
        },
        reduced(3, ["completed", "in_progress", "pending"], [True, True, True], True),
    ),
    ("plan is a tuple", {"plan": ({"step": "a"},)}, reduced(1, [None], [True], False)),
    ("plan not an array", {"plan": {"step": "a"}}, reduced(0, [], [], False)),
    ("plan is a str", {"plan": "do it"}, reduced(0, [], [], False)),
    (
        "entries that are not mappings",
        {"plan": ["step one", None, 3, ["x"]]},
        reduced(4, [None, None, None, None], [False, False, False, False], False),
    ),
    (
        "non-str status and step",
        {"plan": [{"status": 1, "step": 2}, {"status": None, "step": None}]},
        reduced(2, [None, None], [False, False], False),
    ),
    ("missing fields", {"plan": [{}]}, reduced(1, [None], [False], False)),
    ("blank step", {"plan": [{"step": " \t\n", "status": ""}]}, reduced(1, [""], [False], False)),
    # JavaScript whitespace (SPEC §3.0): U+FEFF and U+3000 are blank, U+0085 and U+001C are not.
    (
        "javascript whitespace",
        {"plan": [{"step": "\ufeff\u3000"}, {"step": "\x85"}, {"step": "\x1c"}]},
        reduced(3, [None, None, None], [False, True, True], False),
    ),
    ("blank explanation", {"explanation": "\u2028 "}, reduced(0, [], [], False)),
    ("non-str explanation", {"explanation": ["why"]}, reduced(0, [], [], False)),
    ("explanation", {"explanation": " why "}, reduced(0, [], [], True)),
    (
        "mapping proxy",
        types.MappingProxyType({"plan": [types.MappingProxyType({"step": "s"})]}),
        reduced(1, [None], [True], False),
    ),
]


@pytest.mark.parametrize(
    ("value", "expected"), [r[1:] for r in REDUCTIONS], ids=[r[0] for r in REDUCTIONS]
)
def test_reduce_update_plan(value: object, expected: dict[str, Any]) -> None:
    assert reduce_update_plan(value) == expected


def test_reduction_canonical_string() -> None:
    value = {"plan": [{"step": "a", "status": "pending"}, "junk"], "explanation": ""}
    expected = (
        '{"hasExplanation":false,"planLength":2,"statuses":["pending",null],'
        '"stepPresence":[true,false]}'
    )
    assert stable_stringify(reduce_update_plan(value)) == expected
    assert hash_tool_call("update_plan", value, normalizers={"update_plan"}) == (
        f"update_plan:{sha(expected)}"
    )


def test_rewording_is_not_progress() -> None:
    first = {"plan": [{"step": "Fix the bug", "status": "in_progress"}], "explanation": "a"}
    second = {"plan": [{"step": "Fix that bug!", "status": "in_progress"}], "explanation": "b"}
    third = {"plan": [{"step": "Fix that bug!", "status": "completed"}], "explanation": "b"}
    on = ("update_plan",)
    assert hash_tool_call("update_plan", first, normalizers=on) == hash_tool_call(
        "update_plan", second, normalizers=on
    )
    assert hash_tool_call("update_plan", second, normalizers=on) != hash_tool_call(
        "update_plan", third, normalizers=on
    )
    # Without the normaliser, the wording is part of the hash (reference behaviour).
    assert hash_tool_call("update_plan", first) != hash_tool_call("update_plan", second)


def test_non_mapping_params_hash_as_they_are() -> None:
    canonical = '"text"'
    assert hash_tool_call("update_plan", "text", normalizers={"update_plan"}) == (
        f"update_plan:{sha(canonical)}"
    )
