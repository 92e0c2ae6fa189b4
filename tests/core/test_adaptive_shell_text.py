"""The adaptive profile's shell-text helpers against their plain definitions."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from loopwatch.detectors.adaptive.shell_text import _strip_quotes


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


# --- the substring screens before the write searches ---------------------------------------

_FRAGMENTS = (
    " ",
    "\n",
    ";",
    "&&",
    "|",
    "(",
    ")",
    "$(",
    "`",
    ">",
    ">>",
    "2>",
    "&>",
    "/dev/null",
    "=",
    "-",
    "x",
    "a.txt",
    "rm",
    "rmdir",
    "mv",
    "cp",
    "mkdir",
    "touch",
    "ln",
    "chmod",
    "chown",
    "truncate",
    "install",
    "uninstall",
    "patch",
    "dd",
    "rsync",
    "unzip",
    "tar",
    "-xzf",
    "find",
    "-delete",
    "-exec",
    "git",
    "checkout",
    "pip",
    "pip3",
    "uv",
    "python -m pip",
    "conda",
    "apt",
    "add",
    "remove",
    "npm",
    "pnpm",
    "yarn",
    "bun",
    "i",
    "ci",
    "cargo",
    "poetry",
    "sudo",
    "then",
    "open(",
    "'w'",
    '"a"',
    "mode=",
    ".write(",
    ".write_text(",
    "shutil.move(",
    "os.remove(",
    ".unlink(",
    "json.dump(",
    "fs.",
    "writeFile",
    "sys.stdout",
    "FOO=1",
    "f",
    "s",
    "o",
    "p",
)


@settings(max_examples=800)
@given(st.lists(st.sampled_from(_FRAGMENTS), max_size=12).map("".join))
def test_a_text_without_a_family_word_matches_no_pattern_of_that_family(text: str) -> None:
    from loopwatch.detectors.adaptive import shell_text

    families = (
        (shell_text._SHELL_WRITES, shell_text._SHELL_WRITE_WORDS),
        (shell_text._CODE_WRITES, shell_text._CODE_WRITE_WORDS),
    )
    for patterns, words in families:
        if not shell_text._may_match(text, words):
            assert all(pattern.search(text) is None for pattern in patterns), text
    for words, pattern in shell_text._SHELL_WRITE_SCREENS:  # each shell pattern's own words
        if not shell_text._may_match(text, words):
            assert pattern.search(text) is None, (pattern.pattern, text)
    assert shell_text._shell_writes(text) == any(p.search(text) for p in shell_text._SHELL_WRITES)


def test_the_shell_write_screens_are_the_patterns_and_their_words() -> None:
    from loopwatch.detectors.adaptive import shell_text

    screens = shell_text._SHELL_WRITE_SCREENS
    assert tuple(pattern for _words, pattern in screens) == shell_text._SHELL_WRITES
    assert {word for words, _pattern in screens for word in words} == set(
        shell_text._SHELL_WRITE_WORDS
    )


def test_write_screens_keep_the_answers() -> None:
    from loopwatch.detectors.adaptive.shell_text import shell_command_mutates

    assert shell_command_mutates("echo hi > out.txt")
    assert shell_command_mutates("cd src && rm -rf build")
    assert shell_command_mutates("python -c \"open('a', 'w').write('x')\"")
    assert shell_command_mutates("node -e \"fs.writeFileSync('a', 'b')\"")
    assert shell_command_mutates("uv add requests")
    assert not shell_command_mutates("ls -la && cat a.txt | grep x")
    assert not shell_command_mutates("python -m pytest -q tests/test_a.py")


@settings(max_examples=800)
@given(
    st.one_of(
        st.lists(st.sampled_from(_FRAGMENTS), max_size=12).map("".join),
        st.text(max_size=60),
    )
)
def test_the_word_patterns_find_exactly_the_family_words(text: str) -> None:
    from loopwatch.detectors.adaptive import shell_text

    for pattern, words in (
        (shell_text._SHELL_WRITE_WORD, shell_text._SHELL_WRITE_WORDS),
        (shell_text._CODE_WRITE_WORD, shell_text._CODE_WRITE_WORDS),
    ):
        assert (pattern.search(text) is not None) is shell_text._may_match(text, words), text
