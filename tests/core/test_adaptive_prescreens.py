"""The adaptive profile's cheap screens and memos against the plain searches they stand for.

Each screen may only say "cannot match" when the plain regular expression finds nothing, and
each memo only returns what the plain function returns: checked on generated text, and, for
the character classes, on every Unicode character (case-insensitive matching folds a few
non-ASCII characters onto ASCII letters).
"""

from __future__ import annotations

import re
import sys

from hypothesis import given, settings
from hypothesis import strategies as st
from test_adaptive_screens import _plain_edits_in_place  # the plain in-place scan, shared

from loopwatch.detectors.adaptive import shell_text
from loopwatch.detectors.adaptive.failures import _VOLATILE, mask_volatile
from loopwatch.detectors.adaptive.progress import (
    _UNCHANGED_SCAN_CHARS,
    _UNCHANGED_TEXT,
    _UNCHANGED_WORDS,
    reports_unchanged,
)
from loopwatch.detectors.adaptive.shell_text import (
    _CODE_WRITE_WORDS,
    _CODE_WRITES,
    _INLINE_SHELL,
    _INLINE_WORDS,
    READ_ONLY_COMMANDS,
    ReadOnlyMemo,
    _code_writes,
    _may_match,
    shell_command_is_read_only,
    shell_command_mutates,
)

#: Every Unicode character but the surrogates, in one string.
_ALL_CHARS = "".join(chr(code) for code in range(sys.maxunicode + 1) if not 0xD800 <= code < 0xE000)

# --- mask_volatile: the leading lookahead ---------------------------------------------------

_LOOKAHEAD = r"(?=[\dartp])(?=\d|\b(?:att|ret|try|pid|ppi))(?:"
_PLAIN_VOLATILE = re.compile(
    _VOLATILE.pattern.removeprefix(_LOOKAHEAD).removesuffix(")"), _VOLATILE.flags
)

_VOLATILE_FRAGMENTS = (
    "2024-05-01T10:00:00Z",
    "2024-05-01 10:00:00.123+02:00",
    "10:22",
    "1:02:03,5",
    "attempt 3 of 5",
    "Retry #2",
    "TRIES 4",
    "try 1/3",
    "120ms",
    "3 seconds",
    "1.5 h",
    "pid=4242",
    "PPID: 7",
    "12",
    " ",
    "\n",
    "x",
    "é",
    "ſ",
    "K",
    "İ",
    "٣",
    "-",
    ":",
    "/",
    "of",
    "apart",
    "trap",
    "ATTEMPT 2",
    "attempts",
    "pretry 3",
    "re-try 1",
    "ppid 9",
    "Pid#4",
    "a1",
    "t 5s",
    "_",
)


def test_the_lookahead_is_a_prefix_of_the_plain_pattern() -> None:
    assert _VOLATILE.pattern.startswith(_LOOKAHEAD)
    assert _PLAIN_VOLATILE.pattern.startswith(r"\d{4}")


def test_every_keyword_starts_with_a_prefix_of_the_second_lookahead() -> None:
    # The keyword alternatives (each after a word boundary), and the prefixes the second
    # lookahead accepts at one: each keyword starts with one of them.
    for keyword in ("attempt", "retry", "retries", "try", "pid", "ppid"):
        assert keyword[:3] in ("att", "ret", "try", "pid", "ppi"), keyword
    assert r"\b(?:attempt|retry|retries|try)" in _VOLATILE.pattern
    assert r"\b(?:pid|ppid)" in _VOLATILE.pattern
    # every other alternative starts with a digit
    body = _PLAIN_VOLATILE.pattern
    assert body.startswith(r"\d{4}") and r"|\b\d{1,2}:" in body and r"|\b\d{1,12}" in body


def test_every_character_that_can_start_a_volatile_span_passes_the_lookahead() -> None:
    # The first character of a match is a digit or the first letter of a keyword,
    # matched case-insensitively as the pattern matches it.
    flags = _VOLATILE.flags
    lookahead = re.compile(r"[\dartp]", flags)
    starts = set(re.findall(r"\d", _ALL_CHARS, flags))
    for letter in "artp":
        starts |= set(re.findall(letter, _ALL_CHARS, flags))
    assert {char for char in starts if not lookahead.fullmatch(char)} == set()


@settings(max_examples=800)
@given(st.lists(st.sampled_from(_VOLATILE_FRAGMENTS), max_size=12).map("".join))
def test_masking_with_the_lookahead_equals_the_plain_pattern(text: str) -> None:
    assert _VOLATILE.sub("#", text) == _PLAIN_VOLATILE.sub("#", text)


@settings(max_examples=300)
@given(st.text(max_size=60))
def test_masking_with_the_lookahead_equals_the_plain_pattern_on_any_text(text: str) -> None:
    assert _VOLATILE.sub("#", text) == _PLAIN_VOLATILE.sub("#", text)


def test_mask_volatile_examples() -> None:
    assert mask_volatile("at 10:22:33 retry #2 after 3 seconds, pid=42") == ("at # # after #, #")


# --- reports_unchanged: the word screen -----------------------------------------------------

_UNCHANGED_FRAGMENTS = (
    "No changes made",
    "no changes were applied",
    "NO CHANGES WAS NEEDED",
    "file is unchanged",
    "File Unchanged",
    "content already up to date",
    "file is already identical",
    "nothing to change",
    "Nothing To Change",
    "chang",
    "already",
    "alreadY",
    "ſ",
    "İ",
    "K",
    " ",
    "\n",
    ".",
    "x",
)


def test_the_unchanged_words_fold_only_onto_their_own_upper_case() -> None:
    flags = _UNCHANGED_TEXT.flags
    for letter in set("".join(_UNCHANGED_WORDS)):
        assert set(re.findall(letter, _ALL_CHARS, flags)) == {letter, letter.upper()}


def _top_level_alternatives(pattern: str) -> list[str]:
    """The alternatives of a pattern's outermost level (``|`` outside any group)."""
    parts, depth, start = [], 0, 0
    for index, char in enumerate(pattern):
        if char == "(" and pattern[index - 1 : index] != "\\":
            depth += 1
        elif char == ")" and pattern[index - 1 : index] != "\\":
            depth -= 1
        elif char == "|" and depth == 0:
            parts.append(pattern[start:index])
            start = index + 1
    return [*parts, pattern[start:]]


def test_every_unchanged_alternative_spells_a_screen_word() -> None:
    # Each alternative, as written, holds one of the words as literal text (no group or
    # class inside the word), so each of its matches holds the word, in some case.
    body = _UNCHANGED_TEXT.pattern.removeprefix(r"\b(?:").removesuffix(r")\b")
    alternatives = _top_level_alternatives(body)
    assert len(alternatives) == 4
    for alternative in alternatives:
        assert any(word in alternative for word in _UNCHANGED_WORDS), alternative


@settings(max_examples=800)
@given(st.lists(st.sampled_from(_UNCHANGED_FRAGMENTS), max_size=10).map("".join))
def test_no_unchanged_word_no_match(text: str) -> None:
    if _UNCHANGED_TEXT.search(text) is not None:
        assert _may_match(text.lower(), _UNCHANGED_WORDS)


@settings(max_examples=300)
@given(st.text(max_size=80), st.sampled_from(_UNCHANGED_FRAGMENTS[:9]))
def test_reports_unchanged_equals_the_plain_search(prefix: str, phrase: str) -> None:
    for text in (prefix, prefix + phrase, phrase + prefix, prefix[:40] + phrase.upper()):
        plain = _UNCHANGED_TEXT.search(text[:_UNCHANGED_SCAN_CHARS]) is not None
        assert reports_unchanged(text, text) is plain


# --- ReadOnlyMemo: the shell read-only judgement, memoised --------------------------------

_COMMAND_FRAGMENTS = (
    "ls",
    "cat a.txt",
    "git status",
    "git stash",
    "git branch -a",
    "sed -i s/a/b/ f",
    "sed -n 1p f",
    "rm x",
    "kubectl get pods",
    "sleep 2",
    "timeout 5 ls",
    "echo 'a > b'",
    " > out",
    " 2>&1",
    " | tee f",
    " | grep x",
    " && ",
    "; ",
    "\n",
    "$(",
    ")",
    "<<EOF\nrm -rf /\nEOF\n",
    'bash -c "touch f"',
    'python -c \'open("f", "w")\'',
    '"',
    "'",
)


class _Text(str):
    """A ``str`` subclass: judged every time, never remembered."""


@settings(max_examples=400)
@given(
    st.lists(
        st.lists(st.sampled_from(_COMMAND_FRAGMENTS), max_size=6).map("".join),
        min_size=1,
        max_size=20,
    ),
    st.sampled_from([READ_ONLY_COMMANDS, READ_ONLY_COMMANDS | {"kubectl"}]),
    st.integers(min_value=1, max_value=8),
)
def test_the_memo_answers_as_the_plain_judgement(
    commands: list[str], read_only: frozenset[str], size: int
) -> None:
    memo = ReadOnlyMemo(read_only)
    original = shell_text.READ_ONLY_MEMO_SIZE
    shell_text.READ_ONLY_MEMO_SIZE = size  # type: ignore[misc]  # a tiny memo: clears often
    try:
        for command in commands + commands[::-1] + [_Text(c) for c in commands]:
            assert memo(command) is shell_command_is_read_only(command, read_only)
        assert len(memo._memo) <= size
        assert all(type(key) is str for key in memo._memo)
    finally:
        shell_text.READ_ONLY_MEMO_SIZE = original  # type: ignore[misc]


def test_the_memo_keeps_no_long_command() -> None:
    memo = ReadOnlyMemo()
    long = "ls " + "x" * 10_000
    assert memo(long) is False
    assert memo("ls") is True
    assert list(memo._memo) == ["ls"]


def test_the_adaptive_profile_judges_shell_commands_through_its_memo() -> None:
    import loopwatch

    guard = loopwatch.LoopGuard({"enabled": True}, profile="adaptive")
    for index in range(3):
        call_id = f"c{index}"
        guard.before_call("exec", {"command": "ls -la"}, session_key="s", tool_call_id=call_id)
        guard.after_call(
            "exec", {"command": "ls -la"}, session_key="s", tool_call_id=call_id, result="x"
        )
    memo = guard.detector_profile._reads  # type: ignore[attr-defined]
    assert memo._memo == {"ls -la": True}


# --- the inline-code and ``sh -c`` screens of the write search ------------------------------

_CODE_FRAGMENTS = (
    "open(",
    "open('a', 'w')",
    'open("a", mode="a+")',
    "open(p, 'rb')",
    ".write(",
    ".write_text(",
    ".write_bytes(",
    ".writelines(",
    "sys.stdout.write(",
    "shutil.copy(",
    "shutil.copyfile(",
    "shutil.move(",
    "shutil.rmtree(",
    "os.remove(",
    "os.makedirs(",
    "os.replace(",
    ".unlink(",
    ".mkdir(",
    ".rename(",
    ".touch(",
    ".rmdir(",
    "json.dump(",
    "json.dumps(",
    "fs.writeFileSync",
    "fs.rmSync(",
    "(",
    ")",
    ".",
    ",",
    "'",
    "w",
    "os",
    "fs",
    "open",
    "shutil",
    " ",
    "\n",
)


@settings(max_examples=1000)
@given(st.lists(st.sampled_from(_CODE_FRAGMENTS), max_size=10).map("".join))
def test_code_without_a_code_write_word_matches_no_code_write(text: str) -> None:
    if not _may_match(text, _CODE_WRITE_WORDS):
        assert all(pattern.search(text) is None for pattern in _CODE_WRITES), text
        assert not _code_writes(text)


_INLINE_FRAGMENTS = (
    "bash -c ",
    "sh -c ",
    "zsh -lc ",
    "dash -ec ",
    "sh",
    "-",
    "-c",
    " ",
    "\n",
    "'",
    '"',
    "\\",
    "rm x",
    "echo hi > f",
    "ls",
)


@settings(max_examples=1000)
@given(st.lists(st.sampled_from(_INLINE_FRAGMENTS), max_size=10).map("".join))
def test_shell_text_without_the_inline_words_has_no_inline_script(text: str) -> None:
    if not all(map(text.__contains__, _INLINE_WORDS)):
        assert _INLINE_SHELL.search(text) is None, text


def test_the_inline_script_is_still_judged() -> None:
    assert shell_command_mutates('bash -c "rm x"')
    assert shell_command_mutates("sh -c 'echo hi > f'")
    assert not shell_command_mutates("sh -c 'ls -la'")
    assert shell_command_mutates("python - <<EOF\nimport pathlib\npathlib.Path('a').touch()\nEOF")


# --- shell_command_is_read_only: the simple commands judged before the write searches ----


def _simple_command_reads_plain(words: list[str], read_only: frozenset[str]) -> bool:
    """``shell_text._simple_command_reads`` without its screens (every word tried, a copy)."""
    index = 0
    while index < len(words) and (
        words[index] in shell_text._PREFIX_WORDS or shell_text._ASSIGNMENT.match(words[index])
    ):
        index += 1
    if index < len(words) and words[index] == "timeout":
        index += 1
        while index < len(words) and (words[index].startswith("-") or words[index][:1].isdigit()):
            index += 1
    words = words[index:]
    if not words or all(word in shell_text._CLOSING_WORDS for word in words):
        return True
    name = words[0].rsplit("/", 1)[-1]
    if name not in read_only:
        name = name.lower()
    if name in ("for", "case", "select"):
        return True
    if name not in read_only:
        return False
    if name == "git":
        return shell_text._git_reads(words)
    if name == "find":
        return not any(word in shell_text._FIND_ACTIONS for word in words)
    return True


def _read_only_writes_first(command: str, read_only: frozenset[str]) -> bool:
    """The judgement in its plain order and without screens: no write anywhere, then every
    simple command reads."""
    if len(command) > 10_000:
        return False
    if shell_command_mutates(command):
        return False
    shell, _bodies = shell_text._split_heredocs(command)
    unquoted = shell_text._QUOTED.sub("Q", shell)
    return all(
        _simple_command_reads_plain(part.split(), read_only)
        for part in shell_text._SIMPLE_SPLIT.split(shell_text._FD_REDIRECT.sub(" ", unquoted))
    )


@settings(max_examples=1500)
@given(
    st.lists(st.sampled_from(_COMMAND_FRAGMENTS + _INLINE_FRAGMENTS), max_size=10).map("".join),
    st.sampled_from([READ_ONLY_COMMANDS, READ_ONLY_COMMANDS | {"kubectl", "python"}]),
)
def test_reads_first_judges_as_writes_first(command: str, read_only: frozenset[str]) -> None:
    assert shell_command_is_read_only(command, read_only) is _read_only_writes_first(
        command, read_only
    )


@given(st.text(max_size=40), st.sampled_from(_COMMAND_FRAGMENTS))
def test_reads_first_judges_as_writes_first_on_any_text(prefix: str, fragment: str) -> None:
    for command in (prefix + fragment, fragment + prefix, "ls " + prefix):
        assert shell_command_is_read_only(command) is _read_only_writes_first(
            command, READ_ONLY_COMMANDS
        )


_WORD_FRAGMENTS = (
    "ls",
    "git",
    "status",
    "stash",
    "find",
    "-delete",
    "sudo",
    "timeout",
    "5",
    "-s",
    "A=1",
    "_x=",
    "=y",
    "1=2",
    "a-b=c",
    "fi",
    "done",
    ")",
    "for",
    "/bin/cat",
    "Get-Content",
    "kubectl",
    "python",
    "ſed",
)


@settings(max_examples=1500)
@given(
    st.lists(st.sampled_from(_WORD_FRAGMENTS), max_size=8),
    st.sampled_from([READ_ONLY_COMMANDS, READ_ONLY_COMMANDS | {"kubectl"}]),
)
def test_simple_command_reads_answers_as_the_plain_test(
    words: list[str], read_only: frozenset[str]
) -> None:
    assert shell_text._simple_command_reads(list(words), read_only) is _simple_command_reads_plain(
        list(words), read_only
    )


@given(st.text(max_size=20))
def test_an_assignment_holds_an_equals_sign(word: str) -> None:
    if "=" not in word:
        assert shell_text._ASSIGNMENT.match(word) is None


@given(st.text(max_size=40))
def test_text_without_a_quote_or_an_ampersand_has_nothing_to_replace(text: str) -> None:
    if "'" not in text and '"' not in text:
        assert shell_text._QUOTED.sub("Q", text) == text == shell_text._strip_quotes(text)
    if "&" not in text:
        assert shell_text._FD_REDIRECT.sub(" ", text) == text
    assert shell_text._strip_quotes(text) == shell_text._QUOTED.sub("Q", text)


def test_reads_first_still_finds_the_writes_of_a_reading_command() -> None:
    assert shell_command_is_read_only("ls | grep x") is True
    assert shell_command_is_read_only("ls > out") is False  # every command reads, one writes
    assert shell_command_is_read_only("cat f | tee g") is False
    assert shell_command_is_read_only("python t.py") is False  # judged without the searches
    assert shell_command_is_read_only('echo x && bash -c "ls"') is False  # bash does not read


# --- _edits_in_place: simple commands without an editor skipped, options told apart ------


_IN_PLACE_FRAGMENTS = (
    "sed",
    "perl",
    "tee",
    "-i",
    "-i.bak",
    "--in-place",
    "--in-place=.orig",
    "-pi",
    "-pie",
    "-n",
    "-e",
    "-a",
    "s/a/b/",
    "f.py",
    "/dev/null",
    "i",
    "x-i",
    "sedx",
    "tees",
    " ",
    "\t",
    "\n",
    ";",
    "|",
    "&",
)


@settings(max_examples=1500)
@given(st.lists(st.sampled_from(_IN_PLACE_FRAGMENTS), max_size=14).map("".join))
def test_edits_in_place_answers_as_the_plain_pass(shell: str) -> None:
    assert shell_text._edits_in_place(shell) is _plain_edits_in_place(shell)


@given(st.text(max_size=30))
def test_edits_in_place_answers_as_the_plain_pass_on_any_text(text: str) -> None:
    for shell in (text, "sed " + text + " -i", text + " | tee f", "perl -pi " + text):
        assert shell_text._edits_in_place(shell) is _plain_edits_in_place(shell)


@given(st.text(max_size=12))
def test_only_an_option_is_an_in_place_option(word: str) -> None:
    if not word.startswith("-"):
        assert not any(option.fullmatch(word) for option in shell_text._IN_PLACE.values())


# --- a plain str result is told from a mapping without the ABC check ---------------------


@given(
    st.one_of(
        st.text(max_size=40),
        st.sampled_from(
            ["ERROR: x", "<returncode>1</returncode>", "No changes made", "ok", "File unchanged"]
        ),
    )
)
def test_a_str_result_is_judged_as_its_text(text: str) -> None:
    from loopwatch.detectors.adaptive.failures import _result_text, failure_text_in

    class Text(str):
        """A ``str`` subclass: takes the path of every other type."""

    assert failure_text_in(text, _result_text(text)) == failure_text_in(Text(text), text)
    assert reports_unchanged(text, text) is reports_unchanged(Text(text), text)
