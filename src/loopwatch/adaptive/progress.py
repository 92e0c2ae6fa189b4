"""Progress: which successful calls change state, so that they reset the no-progress counts.

The tool sets are plain constants (normalised names, SPEC §5.1); the shell heuristics read
a command's text only, bounded, with linear-time patterns. Standard library only at run time,
so :mod:`loopwatch.adaptive.settings` can build on it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from loopwatch.adaptive.settings import AdaptiveConfig

#: Tools whose successful call changes files or state: progress that resets the counts.
DEFAULT_MUTATING_TOOLS: Final[frozenset[str]] = frozenset(
    {
        "apply_patch",
        "create",
        "create_file",
        "delete_file",
        "edit",
        "edit_file",
        "insert",
        "move_file",
        "multi_edit",
        "multiedit",
        "notebook_edit",
        "patch",
        "remove_file",
        "rename_file",
        "replace_in_file",
        "search_replace",
        "str_replace",
        "str_replace_based_edit_tool",
        "str_replace_editor",
        "write",
        "write_file",
        "write_to_file",
    }
)

#: Tools that only think (scratch notes): transparent to every detector.
DEFAULT_THINKING_TOOLS: Final[frozenset[str]] = frozenset({"think"})

#: Shell tools: a successful call is progress when its command text writes (see
#: :func:`shell_command_mutates`). ``bash`` is normalised to ``exec`` (SPEC §5.1).
DEFAULT_SHELL_TOOLS: Final[frozenset[str]] = frozenset(
    {
        "bash",
        "exec",
        "execute_bash",
        "execute_command",
        "run_command",
        "run_shell_command",
        "run_terminal_cmd",
        "shell",
        "terminal",
    }
)

#: ``command`` / ``action`` values that make an editor-style tool call read-only
#: (``str_replace_editor`` with ``command: "view"``).
READ_ONLY_ACTIONS: Final[frozenset[str]] = frozenset(
    {"cat", "find", "get", "list", "ls", "read", "search", "show", "view"}
)


_COMMAND_KEYS: Final = ("command", "cmd", "script")
_HEREDOC_START: Final = re.compile(r"<<-?\s*(['\"]?)([A-Za-z_][A-Za-z0-9_]*)\1")

_CMD_POS: Final = (
    r"(?:^|[\n;&|(`]|\$\(|\b(?:sudo|xargs|then|do|else|nohup|time|command)\b)[ \t]*"
    r"(?:[A-Za-z_][A-Za-z0-9_]*=\S{0,200}[ \t]+){0,8}"
)
#: In-place editors, judged per simple command: ``sed … -i`` / ``--in-place``, ``perl … -i``
#: (regular expressions over whole commands would be quadratic on adversarial input).
_IN_PLACE: Final = {
    "sed": re.compile(r"-[A-Za-z]*i[\w.]*|--in-place(?:=\S*)?"),
    "perl": re.compile(r"-[A-Za-z0-9]*i\S*"),
}
_SIMPLE_COMMANDS: Final = re.compile(r"[^\n;|&]+")
_SHELL_WRITES: Final = (
    # output redirection to a file (not a descriptor, not /dev/null)
    re.compile(r"(?<![<>&\-=\d])(?:\d|&)?>>?(?![>&=(|])[ \t]*(?!/dev/null\b)[^\s|&;<>()]"),
    # file system verbs at a command position
    re.compile(
        _CMD_POS + r"(?:rm|rmdir|mv|cp|mkdir|touch|ln|chmod|chown|truncate|install|patch|dd|rsync"
        r"|unzip(?!\s+-[lvtZ]))(?=\s|$)",
        re.MULTILINE,
    ),
    re.compile(_CMD_POS + r"tar\s+-?[A-Za-z]*x", re.MULTILINE),
    re.compile(r"\bfind\b[^\n;|&]{0,400}?\s-(?:delete|exec\s+(?:rm|mv|sed|chmod))\b"),
    # version control that rewrites the working tree
    re.compile(
        r"\bgit\s+(?:-C\s+\S+\s+)?(?:apply|am|checkout|restore|reset|stash|commit|merge|rebase"
        r"|cherry-pick|revert|mv|rm|switch|pull|clean)\b"
    ),
    # package installs change the environment
    re.compile(
        r"\b(?:pip3?|uv\s+pip|python3?\s+-m\s+pip|conda|mamba|apt(?:-get)?|yum|dnf|apk|brew)"
        r"\s+(?:-\S{0,100}\s+){0,6}(?:install|add|uninstall|remove)\b"
    ),
    re.compile(r"\b(?:npm|pnpm|yarn|bun)\s+(?:install|i|ci|add|remove|uninstall)\b"),
    re.compile(r"\b(?:cargo|poetry|uv)\s+(?:add|install|remove)\b"),
)
_CODE_WRITES: Final = (
    re.compile(r"\bopen\([^)\n]{0,300},\s*(?:mode\s*=\s*)?['\"](?:[wax]|r\+)[bt+]*['\"]"),
    re.compile(r"\.write_(?:text|bytes)\("),
    re.compile(r"(?<!stdout)(?<!stderr)(?<!sys)\.(?:write|writelines)\("),
    re.compile(r"\bshutil\.(?:copy\w*|move|rmtree)\("),
    re.compile(r"\bos\.(?:remove|unlink|rename|replace|makedirs|mkdir|rmdir|truncate)\("),
    re.compile(r"\.(?:unlink|mkdir|rename|touch|rmdir)\("),
    re.compile(r"\bjson\.dump\("),
    re.compile(r"\bfs\.(?:writeFile|appendFile|writeFileSync|appendFileSync|rmSync|unlinkSync)\b"),
)


#: Longest command text inspected: the writes that matter come first, and the regular
#: expressions stay fast on huge heredocs.
_MAX_SCAN_CHARS: Final = 50_000
_INLINE_SHELL: Final = re.compile(
    r"\b(?:ba|z|da)?sh\s+-[A-Za-z]*c\s+(['\"])((?:\\.|(?!\1).)*)\1", re.DOTALL
)


def _strip_quotes(shell: str) -> str:
    """Shell text with every quoted string replaced by ``Q``, in one pass.

    ``echo "a > b"`` writes nothing; what is inside quotes is an argument, not syntax. An
    unterminated quote runs to the end, as it would for the shell.
    """
    out: list[str] = []
    quote = ""
    index = 0
    while index < len(shell):
        char = shell[index]
        if quote:
            if char == "\\" and quote == '"':
                index += 1  # an escaped character inside double quotes
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


def _split_heredocs(command: str) -> tuple[str, str]:
    """(shell text, heredoc bodies): a heredoc's body is data, not shell syntax."""
    shell: list[str] = []
    bodies: list[str] = []
    lines = command.split("\n")
    index = 0
    while index < len(lines):
        line = lines[index]
        shell.append(line)
        delimiters = [m.group(2) for m in _HEREDOC_START.finditer(_strip_quotes(line))]
        if not delimiters:
            delimiters = [m.group(2) for m in _HEREDOC_START.finditer(line)]
        index += 1
        for delimiter in delimiters:
            while index < len(lines) and lines[index].strip() != delimiter:
                bodies.append(lines[index])
                index += 1
            index += 1  # the delimiter line
    return "\n".join(shell), "\n".join(bodies)


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
    unquoted = _strip_quotes(shell)
    if _edits_in_place(unquoted) or any(pattern.search(unquoted) for pattern in _SHELL_WRITES):
        return True
    code = shell + "\n" + bodies
    if any(pattern.search(code) for pattern in _CODE_WRITES):
        return True
    # ``bash -c "…"``: the quoted script is shell syntax too.
    return any(
        shell_command_mutates(_unescape_inline(match.group(2)))
        for match in _INLINE_SHELL.finditer(shell)
        if len(match.group(2)) < len(command)
    )


def _edits_in_place(shell: str) -> bool:
    """``sed -i``, ``perl -pi``, ``tee FILE``: one linear pass over the simple commands."""
    for segment in _SIMPLE_COMMANDS.finditer(shell):
        after: set[str] = set()  # editors whose in-place option occurs later in the segment
        file_after = False  # a later word names a file (not an option, not /dev/null)
        for word in reversed(segment.group().split()):
            if (word in _IN_PLACE and word in after) or (word == "tee" and file_after):
                return True
            after.update(editor for editor, option in _IN_PLACE.items() if option.fullmatch(word))
            file_after = file_after or not (word.startswith("-") or word == "/dev/null")
    return False


def _unescape_inline(script: str) -> str:
    return script.replace("\\n", "\n").replace('\\"', '"')


def _command_text(params: object) -> str | None:
    if isinstance(params, str):
        return params
    if isinstance(params, Mapping):
        for key in _COMMAND_KEYS:
            value = params.get(key)
            if isinstance(value, str):
                return value
    return None


def _action_of(params: object) -> str | None:
    if isinstance(params, Mapping):
        for key in ("command", "action"):
            value = params.get(key)
            if isinstance(value, str):
                return value.strip().lower()
    return None


def is_mutating_call(tool_name: str, params: object, config: AdaptiveConfig) -> bool:
    """Whether a *successful* call of ``tool_name`` with ``params`` changes state.

    A tool of ``config.all_mutating_tools`` mutates unless its ``command``/``action`` is a
    read (``view``, ``read``, ``list``…); a shell tool mutates when its command text writes
    (:func:`shell_command_mutates`).
    """
    if tool_name in config.all_mutating_tools:
        action = _action_of(params)
        return action is None or action not in READ_ONLY_ACTIONS
    if tool_name in config.all_shell_tools:
        command = _command_text(params)
        return command is not None and shell_command_mutates(command)
    return False
