"""The adaptive profile's shell-text helpers against their plain definitions."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from loopwatch.detectors.adaptive.progress import _strip_quotes


def _strip_quotes_by_hand(shell: str) -> str:
    """The definition, one character at a time: quoted strings become ``Q``; inside
    double quotes a backslash escapes the next character; an open quote runs to the end."""
    out: list[str] = []
    quote = ""
    index = 0
    while index < len(shell):
        char = shell[index]
        if quote:
            if char == "\\" and quote == '"':
                index += 1
            elif char == quote:
                quote = ""
                out.append("Q")
        elif char in "'\"":
            quote = char
        else:
            out.append(char)
        index += 1
    if quote:
        out.append("Q")
    return "".join(out)


@settings(max_examples=500)
@given(st.text(alphabet=st.sampled_from("ab'\"\\\n $>;|"), max_size=40))
def test_strip_quotes_matches_its_definition(shell: str) -> None:
    assert _strip_quotes(shell) == _strip_quotes_by_hand(shell)


def test_strip_quotes_edge_cases() -> None:
    assert _strip_quotes('echo "a > b" > out') == "echo Q > out"
    assert _strip_quotes("echo 'it''s'") == "echo QQ"
    assert _strip_quotes('echo "open') == "echo Q"
    assert _strip_quotes('echo "ends in \\') == "echo Q"
    assert _strip_quotes('say "a \\" b" c') == "say Q c"
    assert _strip_quotes("x'\n'y") == "xQy"
