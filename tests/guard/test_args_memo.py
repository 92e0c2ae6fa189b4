"""``ArgsMemo.of`` against its plain definition: what params it pins, and how."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from loopwatch.guard._memo import ArgsMemo


class Text(str):
    """A ``str`` subclass: its instances may change what they read as, so never pinned."""


_IMMUTABLE = (str, int, float, bool, type(None))


def plain_of(params: object) -> tuple[tuple[tuple[str, object], ...] | None, int] | None:
    """What a memo pins (its items and characters), or ``None``: ArgsMemo.of, spelled out."""
    if type(params) in _IMMUTABLE:
        return None, len(params) if isinstance(params, str) else 0
    if type(params) is not dict:
        return None
    items = tuple(params.items())
    if not all(type(k) is str and type(v) in _IMMUTABLE for k, v in items):
        return None
    return items, sum(len(v) for _k, v in items if isinstance(v, str))


SCALARS = st.one_of(
    st.text(max_size=5),
    st.integers(),
    st.floats(allow_nan=False),
    st.booleans(),
    st.none(),
    st.builds(Text, st.text(max_size=3)),
)
VALUES = st.one_of(SCALARS, st.lists(SCALARS, max_size=2), st.dictionaries(st.text(), SCALARS))
PARAMS = st.one_of(
    SCALARS,
    st.dictionaries(st.one_of(st.text(max_size=4), st.builds(Text), st.integers()), VALUES),
    st.lists(SCALARS, max_size=2),
    st.tuples(SCALARS),
)


@given(PARAMS)
def test_a_memo_pins_exactly_what_the_plain_definition_does(params: Any) -> None:
    memo = ArgsMemo.of("read", params, "read:h")
    expected = plain_of(params)
    if expected is None:
        assert memo is None
        return
    assert memo is not None
    assert (memo.items, memo.chars) == expected
    assert (memo.tool, memo.params, memo.args_hash, memo.context) == (
        "read",
        params,
        "read:h",
        None,
    )
    assert memo.hash_of("read", params) == "read:h"
