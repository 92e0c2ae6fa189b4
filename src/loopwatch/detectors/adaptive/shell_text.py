"""What a shell command's text does: write files or state, or only read.

The adaptive profile counts a successful shell call as progress unless its command only
reads (:func:`shell_command_is_read_only`), and a command that visibly writes
(:func:`shell_command_mutates`) never does. Both read the text only, bounded, with
linear-time patterns, each searched only when the words its matches must hold occur:
this runs on every shell call the profile records. Standard library only.
"""

from __future__ import annotations

import re
from typing import Final

from loopwatch.core.lazyre import LazyPattern, lazy_compile

_HEREDOC_START: Final = lazy_compile(r"<<-?\s*(['\"]?)([A-Za-z_][A-Za-z0-9_]*)\1")

_CMD_POS: Final = (
    r"(?:^|[\n;&|(`]|\$\(|\b(?:sudo|xargs|then|do|else|nohup|time|command)\b)[ \t]*"
    r"(?:[A-Za-z_][A-Za-z0-9_]*=\S{0,200}[ \t]+){0,8}"
)
#: In-place editors, judged per simple command: ``sed … -i`` / ``--in-place``, ``perl … -i``
#: (regular expressions over whole commands would be quadratic on adversarial input).
_IN_PLACE: Final = {
    "sed": lazy_compile(r"-[A-Za-z]*i[\w.]*|--in-place(?:=\S*)?"),
    "perl": lazy_compile(r"-[A-Za-z0-9]*i\S*"),
}
_SIMPLE_COMMANDS: Final = lazy_compile(r"[^\n;|&]+")
_SHELL_WRITES: Final = (
    # output redirection to a file (not a descriptor, not /dev/null)
    lazy_compile(r"(?<![<>&\-=\d])(?:\d|&)?>>?(?![>&=(|])[ \t]*(?!/dev/null\b)[^\s|&;<>()]"),
    # file system verbs at a command position
    lazy_compile(
        _CMD_POS + r"(?:rm|rmdir|mv|cp|mkdir|touch|ln|chmod|chown|truncate|install|patch|dd|rsync"
        r"|unzip(?!\s+-[lvtZ]))(?=\s|$)",
        re.MULTILINE,
    ),
    lazy_compile(_CMD_POS + r"tar\s+-?[A-Za-z]*x", re.MULTILINE),
    lazy_compile(r"\bfind\b[^\n;|&]{0,400}?\s-(?:delete|exec\s+(?:rm|mv|sed|chmod))\b"),
    # version control that rewrites the working tree
    lazy_compile(
        r"\bgit\s+(?:-C\s+\S+\s+)?(?:apply|am|checkout|restore|reset|stash|commit|merge|rebase"
        r"|cherry-pick|revert|mv|rm|switch|pull|clean)\b"
    ),
    # package installs change the environment
    lazy_compile(
        r"\b(?:pip3?|uv\s+pip|python3?\s+-m\s+pip|conda|mamba|apt(?:-get)?|yum|dnf|apk|brew)"
        r"\s+(?:-\S{0,100}\s+){0,6}(?:install|add|uninstall|remove)\b"
    ),
    lazy_compile(r"\b(?:npm|pnpm|yarn|bun)\s+(?:install|i|ci|add|remove|uninstall)\b"),
    lazy_compile(r"\b(?:cargo|poetry|uv)\s+(?:add|install|remove)\b"),
)
_CODE_WRITES: Final = (
    lazy_compile(r"\bopen\([^)\n]{0,300},\s*(?:mode\s*=\s*)?['\"](?:[wax]|r\+)[bt+]*['\"]"),
    lazy_compile(r"\.write_(?:text|bytes)\("),
    lazy_compile(r"(?<!stdout)(?<!stderr)(?<!sys)\.(?:write|writelines)\("),
    lazy_compile(r"\bshutil\.(?:copy\w*|move|rmtree)\("),
    lazy_compile(r"\bos\.(?:remove|unlink|rename|replace|makedirs|mkdir|rmdir|truncate)\("),
    lazy_compile(r"\.(?:unlink|mkdir|rename|touch|rmdir)\("),
    lazy_compile(r"\bjson\.dump\("),
    lazy_compile(
        r"\bfs\.(?:writeFile|appendFile|writeFileSync|appendFileSync|rmSync|unlinkSync)\b"
    ),
)


def _any_of(patterns: tuple[re.Pattern[str] | LazyPattern, ...]) -> LazyPattern:
    """One pattern that finds a match exactly where one of ``patterns`` would (each keeps its
    own ``MULTILINE`` flag): one search instead of one per pattern (compiled on first use,
    as the others: a hook process that never asks pays nothing)."""
    parts: list[str] = []
    for pattern in patterns:
        assert pattern.flags & ~(re.UNICODE | re.MULTILINE) == 0, pattern.pattern
        scope = "m" if pattern.flags & re.MULTILINE else ""
        parts.append(f"(?{scope}:{pattern.pattern})")
    return lazy_compile("|".join(parts))


_ANY_CODE_WRITE: Final = _any_of(_CODE_WRITES)
#: Text every match of :data:`_SHELL_WRITES` contains, one of these at least (each pattern
#: spells one of them literally: ``>``, a verb, a tool name): a command with none of them
#: cannot match, and is told so by a few substring tests instead of a regex search.
_SHELL_WRITE_WORDS: Final = (
    ">",
    "rm",
    "mv",
    "cp",
    "mkdir",
    "touch",
    "ln",
    "chmod",
    "chown",
    "truncate",
    "install",
    "patch",
    "dd",
    "rsync",
    "unzip",
    "tar",
    "find",
    "git",
    "add",
    "remove",
    "npm",
    "yarn",
    "bun",
    "cargo",
    "poetry",
    "uv",
)
#: Each pattern of :data:`_SHELL_WRITES` with the words one of which every match of it
#: spells (their union is :data:`_SHELL_WRITE_WORDS`). A command that passes the union's
#: screen usually holds one or two of them (a ``>``, an ``rm`` inside ``format``): only the
#: patterns whose words it holds are searched, a third of the cost of the one pattern of
#: all eight alternatives, which tries every one of them at every position.
_SHELL_WRITE_SCREENS: Final = tuple(
    zip(
        (
            (">",),
            ("rm", "mv", "cp", "mkdir", "touch", "ln", "chmod", "chown", "truncate", "install",
             "patch", "dd", "rsync", "unzip"),
            ("tar",),
            ("find",),
            ("git",),
            ("install", "add", "remove"),
            ("npm", "yarn", "bun"),
            ("cargo", "poetry", "uv"),
        ),
        _SHELL_WRITES,
        strict=True,
    )
)  # fmt: skip


def _shell_writes(unquoted: str) -> bool:
    """Whether one of :data:`_SHELL_WRITES` matches the unquoted shell text."""
    return _SHELL_WRITE_WORD.search(unquoted) is not None and any(
        _may_match(unquoted, words) and pattern.search(unquoted) is not None
        for words, pattern in _SHELL_WRITE_SCREENS
    )


#: The same for :data:`_CODE_WRITES`, one word a pattern (or one a name of its alternation):
#: inline code that calls nothing of these cannot write. (``"("`` alone, every pattern's
#: last character but the ``fs.`` one's, let most heredocs and ``python -c`` through.)
_CODE_WRITE_WORDS: Final = (
    "open(",
    ".write",
    "shutil.",
    "os.",
    ".unlink(",
    ".mkdir(",
    ".rename(",
    ".touch(",
    ".rmdir(",
    "json.dump(",
    "fs.",
)


def _may_match(text: str, words: tuple[str, ...]) -> bool:
    """Whether ``text`` contains one of ``words`` (a pattern family's required text)."""
    return any(map(text.__contains__, words))


def _any_word(words: tuple[str, ...]) -> LazyPattern:
    """A pattern that finds a match exactly where ``text`` contains one of ``words``
    (:func:`_may_match`, for a family of many words): one scan of the text instead of one
    substring search a word (26 for the shell writes, 11 for the code writes), a fifth of
    the time on a 300-character command."""
    return lazy_compile("|".join(map(re.escape, words)))


#: :func:`_any_word` of :data:`_SHELL_WRITE_WORDS` and of :data:`_CODE_WRITE_WORDS`.
_SHELL_WRITE_WORD: Final = _any_word(_SHELL_WRITE_WORDS)
_CODE_WRITE_WORD: Final = _any_word(_CODE_WRITE_WORDS)


#: The words :func:`_edits_in_place` looks for.
_IN_PLACE_WORDS: Final = ("tee", *_IN_PLACE)

#: Longest command text inspected: the writes that matter come first, and the regular
#: expressions stay fast on huge heredocs.
_MAX_SCAN_CHARS: Final = 50_000
_INLINE_SHELL: Final = lazy_compile(
    r"\b(?:ba|z|da)?sh\s+-[A-Za-z]*c\s+(['\"])((?:\\.|(?!\1).)*)\1", re.DOTALL
)
#: Text every match of :data:`_INLINE_SHELL` holds, all of it: a shell text without ``sh``
#: or without ``-`` runs no ``sh -c`` (one corpus command in 500 has both).
_INLINE_WORDS: Final = ("sh", "-")


#: A quoted string of shell text: single quotes up to the next one, double quotes with
#: their backslash escapes; an unterminated quote (or a lone backslash ending the text
#: inside double quotes) runs to the end, as it would for the shell.
_QUOTED: Final = re.compile(r"'[^']*(?:'|\Z)|\"(?:\\.|[^\"\\])*(?:\"|\\?\Z)", re.DOTALL)


def _strip_quotes(shell: str) -> str:
    """Shell text with every quoted string replaced by ``Q``, in one pass (at C speed).

    ``echo "a > b"`` writes nothing; what is inside quotes is an argument, not syntax.
    Text without a quote character (most commands) has nothing to replace.
    """
    if "'" not in shell and '"' not in shell:
        return shell
    return _QUOTED.sub("Q", shell)


def _split_heredocs(command: str) -> tuple[str, str]:
    """(shell text, heredoc bodies): a heredoc's body is data, not shell syntax."""
    if "<<" not in command:
        return command, ""  # no heredoc can start (most commands): nothing to split
    shell: list[str] = []
    bodies: list[str] = []
    lines = command.split("\n")
    stripped: list[str] | None = None  # the lines stripped, made for the first heredoc
    count = len(lines)
    index = 0
    while index < count:
        line = lines[index]
        shell.append(line)
        index += 1
        if "<<" not in line:
            continue  # (no heredoc starts on this line)
        delimiters = [m.group(2) for m in _HEREDOC_START.finditer(_strip_quotes(line))]
        if not delimiters:
            delimiters = [m.group(2) for m in _HEREDOC_START.finditer(line)]
        for delimiter in delimiters:
            # The body runs to the first line that is the delimiter (found at C speed).
            if stripped is None:
                stripped = list(map(str.strip, lines))
            try:
                end = stripped.index(delimiter, index)
            except ValueError:
                end = count
            bodies.extend(lines[index:end])
            index = end + 1  # past the delimiter line
    return "\n".join(shell), "\n".join(bodies)


def _code_writes(text: str) -> bool:
    """Whether inline code in ``text`` writes (:data:`_CODE_WRITES`)."""
    return _CODE_WRITE_WORD.search(text) is not None and _ANY_CODE_WRITE.search(text) is not None


def _writes_in(command: str, shell: str, bodies: str, unquoted: str) -> bool:
    """:func:`shell_command_mutates` of ``command``, given its shell text and heredoc bodies
    (:func:`_split_heredocs` of its first 50,000 characters) and that shell text unquoted:
    :func:`shell_command_is_read_only` splits a command once for both of its questions."""
    if _edits_in_place(unquoted) or _shell_writes(unquoted) or _code_writes(shell + "\n" + bodies):
        return True
    # ``bash -c "…"``: the quoted script is shell syntax too.
    if not _may_run_inline(shell):
        return False
    return any(
        shell_command_mutates(_unescape_inline(match.group(2)))
        for match in _INLINE_SHELL.finditer(shell)
        if len(match.group(2)) < len(command)
    )


def _may_run_inline(shell: str) -> bool:
    """Whether shell text may hold a ``sh -c`` script (every word of :data:`_INLINE_WORDS`)."""
    return all(map(shell.__contains__, _INLINE_WORDS))


def shell_command_mutates(command: str) -> bool:
    """Whether a shell command visibly writes files or changes the environment.

    A deliberately generous heuristic (every write it misses can turn "edit, then re-run the
    test" into an apparent loop, while an extra reset only delays detection): in-place
    ``sed``/``perl``, output redirection to a file, ``tee``, file system verbs (``rm``,
    ``mv``, ``cp``, ``mkdir``, ``touch``, ``patch``, …), ``find -delete``, git commands that
    rewrite the working tree (``apply``, ``checkout``, ``restore``, ``stash``, …), package
    installs, and inline code (``python -c``, heredocs) that opens a file for writing or
    calls ``write_text`` / ``os.remove`` / ``shutil.move`` and the like. Running a script
    file that writes (``python fix.py``) is not visible in the command text.

    Args:
        command: the command text.

    Returns:
        ``True`` when the command writes.
    """
    shell, bodies = _split_heredocs(command[:_MAX_SCAN_CHARS])
    return _writes_in(command, shell, bodies, _strip_quotes(shell))


def _edits_in_place(shell: str) -> bool:
    """``sed -i``, ``perl -pi``, ``tee FILE``: one linear pass over the simple commands."""
    if not any(map(shell.__contains__, _IN_PLACE_WORDS)):
        return False  # none of the three words occurs (most commands): nothing to judge
    for segment in _SIMPLE_COMMANDS.finditer(shell):
        text = segment.group()
        if not any(map(text.__contains__, _IN_PLACE_WORDS)):
            continue  # (a simple command that names no editor and no tee edits nothing)
        after: set[str] = set()  # editors whose in-place option occurs later in the segment
        file_after = False  # a later word names a file (not an option, not /dev/null)
        for word in reversed(text.split()):
            if (word in _IN_PLACE and word in after) or (word == "tee" and file_after):
                return True
            if word.startswith("-"):  # every in-place option is an option: only these match
                after.update(
                    editor for editor, option in _IN_PLACE.items() if option.fullmatch(word)
                )
            elif word != "/dev/null":
                file_after = True
    return False


def _unescape_inline(script: str) -> str:
    return script.replace("\\n", "\n").replace('\\"', '"')


# --- read-only shell commands ---------------------------------------------------------------

#: Shell commands that only read. A command line is read-only when every simple command in it
#: starts with one of these (after variable assignments and wrappers such as ``sudo`` or
#: ``timeout 5``) and nothing in it writes (:func:`shell_command_mutates`: no redirection to a
#: file, no ``sed -i``, no ``find -delete``). Everything else counts as state-changing:
#: treating a read as progress only delays a warning, treating a fix as a read raises a false
#: alarm on a recovery.
READ_ONLY_COMMANDS: Final[frozenset[str]] = frozenset(
    {
        "ack", "ag", "awk", "basename", "bat", "cat", "cd", "cmp", "column", "comm", "cut",
        "date", "df", "diff", "dirname", "du", "echo", "egrep", "env", "eza", "exa", "false",
        "fd", "fgrep", "file", "find", "fold", "git", "grep", "head", "hexdump", "history",
        "hostname", "id", "jq", "less", "locate", "ls", "lsof", "md5sum", "more", "nl", "od",
        "pgrep", "printenv", "printf", "ps", "pwd", "readlink", "realpath", "rev", "rg", "sed",
        "sha1sum", "sha256sum", "shasum", "sleep", "sort", "stat", "strings", "tac", "tail",
        "test", "tr", "tree", "true", "type", "uname", "uniq", "wc", "whereis", "which",
        "whoami", "xxd", "yq", "zcat", "[", "[[",
        # PowerShell (matched case-insensitively, as PowerShell does)
        "dir", "gc", "gci", "get-childitem", "get-command", "get-content", "get-item",
        "get-location", "resolve-path", "select-string", "test-path", "write-host",
        "write-output",
    }
)  # fmt: skip

#: ``git`` subcommands that only read (``branch``, ``tag``, ``remote``, ``config`` and
#: ``stash`` read only in their listing forms, see :func:`_git_reads`).
READ_ONLY_GIT: Final[frozenset[str]] = frozenset(
    {
        "blame", "cat-file", "describe", "diff", "grep", "log", "ls-files", "ls-remote",
        "ls-tree", "reflog", "rev-list", "rev-parse", "shortlog", "show", "show-ref", "status",
        "whatchanged",
    }
)  # fmt: skip
_GIT_LISTING: Final = {
    "branch": frozenset({"-a", "-r", "-v", "-vv", "--list", "--all", "--show-current"}),
    "tag": frozenset({"-l", "--list", "-n"}),
    "remote": frozenset({"-v", "show", "get-url", "--verbose"}),
    "config": frozenset({"--get", "--get-all", "--list", "-l", "--get-regexp", "--show-origin"}),
    "stash": frozenset({"list", "show"}),
}
_GIT_OPTIONS_WITH_VALUE: Final = frozenset({"-C", "-c", "--git-dir", "--work-tree"})
#: Words that prefix a command without being it.
_PREFIX_WORDS: Final = frozenset(
    {"!", "{", "(", "if", "then", "elif", "else", "while", "until", "do", "time", "sudo",
     "command", "builtin", "nice", "xargs"}
)  # fmt: skip
#: Words that end a compound command; a simple command of only these is nothing.
_CLOSING_WORDS: Final = frozenset({"fi", "done", "esac", "}", ")", ";;"})
_FIND_ACTIONS: Final = frozenset(
    {"-delete", "-exec", "-execdir", "-ok", "-okdir", "-fprint", "-fprint0", "-fprintf", "-fls"}
)
#: Longest command judged read-only (longer ones are scripts, and count as state-changing).
_MAX_READ_ONLY_CHARS: Final = 10_000
_SIMPLE_SPLIT: Final = lazy_compile(r"\$\(|[\n;|&()`]")
_ASSIGNMENT: Final = lazy_compile(r"[A-Za-z_][A-Za-z0-9_]*=")
#: Descriptor redirections (``2>&1``, ``&>``, ``|&``): syntax, not command separators.
_FD_REDIRECT: Final = lazy_compile(r"\d*>&\d*-?|&>>?|\|&")


def _git_reads(words: list[str]) -> bool:
    """``git [-C dir] <subcommand> …``: a read-only subcommand, or a listing form."""
    index = 1
    while index < len(words) and words[index].startswith("-"):
        index += 2 if words[index] in _GIT_OPTIONS_WITH_VALUE else 1
    if index >= len(words):
        return True  # ``git`` alone prints its help
    sub, rest = words[index], words[index + 1 :]
    if sub in READ_ONLY_GIT:
        return True
    listing = _GIT_LISTING.get(sub)
    if listing is None:
        return False
    if sub == "stash":
        return bool(rest) and rest[0] in listing  # ``git stash`` alone stashes
    if sub == "remote" and rest:
        return rest[0] in listing
    return all(word in listing or not word.startswith("-") for word in rest) and (
        not rest or any(word in listing for word in rest)
    )


def _simple_command_reads(words: list[str], read_only: frozenset[str]) -> bool:
    index = 0
    count = len(words)
    # (an assignment holds a "=": the pattern is only tried on such words)
    while index < count and (
        words[index] in _PREFIX_WORDS or ("=" in words[index] and _ASSIGNMENT.match(words[index]))
    ):
        index += 1
    if index < count and words[index] == "timeout":
        index += 1
        while index < count and (words[index].startswith("-") or words[index][:1].isdigit()):
            index += 1
    if index:  # (most simple commands start with their command: no copy)
        words = words[index:]
    if _CLOSING_WORDS.issuperset(words):  # nothing, or only the ends of compound commands
        return True
    name = words[0].rsplit("/", 1)[-1]
    if name not in read_only:
        name = name.lower()
    if name in ("for", "case", "select"):
        return True  # the loop's own commands are the next simple commands
    if name not in read_only:
        return False
    if name == "git":
        return _git_reads(words)
    if name == "find":
        return not any(word in _FIND_ACTIONS for word in words)
    return True


def shell_command_is_read_only(
    command: str, read_only: frozenset[str] = READ_ONLY_COMMANDS
) -> bool:
    """Whether a shell command only reads (see :data:`READ_ONLY_COMMANDS`).

    Args:
        command: the command text; one longer than 10,000 characters is never read-only
            (judging it would cost more than it could save).
        read_only: the read-only command names (``AdaptiveConfig.all_read_only_commands``:
            the built-in ones and ``loopwatch.adaptive.readOnlyCommands``).

    Returns:
        ``True`` when every simple command reads and nothing writes.
    """
    if len(command) > _MAX_READ_ONLY_CHARS:
        return False  # a command this long is a script: count it as state-changing
    # ``not mutates and reads``, the cheaper half first: the write searches are most of
    # the cost, and a command whose simple commands do not all read (``python …``,
    # ``pytest``, ``cd x && make``: half of the corpus's) is not read-only whatever they
    # find. They are skipped only where none of them can fail either: without a ``sh -c``
    # script (whose recursive judgement could), they are plain searches.
    shell, bodies = _split_heredocs(command)  # (the whole command: it is short enough)
    unquoted = _strip_quotes(shell)
    # (every descriptor redirection holds a "&": text without one has none to blank)
    syntax = _FD_REDIRECT.sub(" ", unquoted) if "&" in unquoted else unquoted
    reads = True
    for part in _SIMPLE_SPLIT.split(syntax):  # (a loop: no generator for a few parts)
        if not _simple_command_reads(part.split(), read_only):
            reads = False
            break
    if not reads and (not _may_run_inline(shell) or _INLINE_SHELL.search(shell) is None):
        return False
    mutates = _writes_in(command, shell, bodies, unquoted)
    return not mutates and reads


#: How many command texts a :class:`ReadOnlyMemo` remembers (cleared when full): a loop
#: repeats its command within a window of 30 calls, across a few hundred sessions.
READ_ONLY_MEMO_SIZE: Final = 1024


class ReadOnlyMemo:
    """:func:`shell_command_is_read_only` for one set of read-only names, memoised by the
    command text.

    The judgement is a pure function of the text (and of the fixed names), and the slowest
    part of recording a successful shell call (a dozen searches and a split of every simple
    command); a stuck agent sends the same command again and again. Each adaptive profile
    keeps one (one per guard): a plain ``str`` of at most 10,000 characters is remembered,
    anything else is judged every time. A full memo is cleared, so it stays bounded.
    """

    __slots__ = ("_memo", "_read_only")

    def __init__(self, read_only: frozenset[str] = READ_ONLY_COMMANDS) -> None:
        self._read_only = read_only
        self._memo: dict[str, bool] = {}

    def __call__(self, command: str) -> bool:
        """``shell_command_is_read_only(command, read_only)``."""
        memo = self._memo
        found = memo.get(command) if type(command) is str else None
        if found is not None:
            return found
        found = shell_command_is_read_only(command, self._read_only)
        if type(command) is str and len(command) <= _MAX_READ_ONLY_CHARS:
            if len(memo) >= READ_ONLY_MEMO_SIZE:
                memo.clear()
            memo[command] = found
        return found


__all__ = [
    "READ_ONLY_COMMANDS",
    "READ_ONLY_GIT",
    "READ_ONLY_MEMO_SIZE",
    "ReadOnlyMemo",
    "shell_command_is_read_only",
    "shell_command_mutates",
]
