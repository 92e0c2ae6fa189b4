"""Progress: which successful calls change state, so that they reset the no-progress counts.

The tool sets are plain constants (normalised names, SPEC §5.1); what a shell command's
text does is :mod:`loopwatch.detectors.adaptive.shell_text`'s. Standard library only at run
time, so :mod:`loopwatch.detectors.adaptive.settings` can build on it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Final

from loopwatch.core.lazyre import lazy_compile
from loopwatch.core.naming import plain_str
from loopwatch.detectors.adaptive.shell_text import shell_command_is_read_only

if TYPE_CHECKING:
    from loopwatch.detectors.adaptive.settings import AdaptiveConfig

#: Tools whose successful call changes files or state: progress that resets the counts.
DEFAULT_MUTATING_TOOLS: Final[frozenset[str]] = frozenset(
    {
        "apply_patch",
        "create",
        "create_file",
        "delete_file",
        "edit",
        "edit_file",
        # OpenHands SDK's editors (tool names from their class names; str_replace_editor
        # is the legacy name of file_editor)
        "file_editor",
        "insert",
        "move_file",
        "multi_edit",
        "multiedit",
        "notebook_edit",
        "patch",
        "planning_file_editor",
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
#: ``shell_text.shell_command_mutates``). ``bash`` is normalised to ``exec`` (SPEC §5.1).
DEFAULT_SHELL_TOOLS: Final[frozenset[str]] = frozenset(
    {
        "bash",
        "exec",
        "execute_bash",
        "execute_command",
        "powershell",
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


def _command_text(params: object) -> str | None:
    if isinstance(params, str):
        return plain_str(params)
    if type(params) is dict or isinstance(params, Mapping):
        for key in _COMMAND_KEYS:
            value = params.get(key)
            if isinstance(value, str):
                return plain_str(value)
    return None


def _action_of(params: object) -> str | None:
    if type(params) is dict or isinstance(params, Mapping):
        for key in ("command", "action"):
            value = params.get(key)
            if isinstance(value, str):
                return plain_str(value).strip().lower()
    return None


def is_mutating_call(
    tool_name: str,
    params: object,
    config: AdaptiveConfig,
    *,
    reads: Callable[[str], bool] | None = None,
) -> bool:
    """Whether a *successful* call of ``tool_name`` with ``params`` could change state.

    A tool of ``config.all_mutating_tools`` mutates unless its ``command``/``action`` is a
    read (``view``, ``read``, ``list``…). A shell tool mutates unless its command is
    read-only (:func:`shell_command_is_read_only`): configuration and VCS commands
    (``git config``, ``git remote set-url``, ``git add``), installs, builds and scripts all
    could have fixed what made the previous attempt fail.

    Args:
        tool_name: the normalised tool name.
        params: the call's params.
        config: the adaptive settings (tool sets, read-only command names).
        reads: the read-only test of a command text, when the caller keeps one that
            answers as ``shell_command_is_read_only(command,
            config.all_read_only_commands)`` does (a ``shell_text.ReadOnlyMemo``).
    """
    if tool_name in config.all_mutating_tools:
        action = _action_of(params)
        return action is None or action not in READ_ONLY_ACTIONS
    if tool_name in config.all_shell_tools:
        command = _command_text(params)
        if command is None:
            return False
        if reads is not None:
            return not reads(command)
        return not shell_command_is_read_only(command, config.all_read_only_commands)
    return False


# --- polls, reads and writes that change nothing --------------------------------------------

#: Tools whose calls wait or poll: a repeat with unchanged output is a poll, judged by the
#: poll detector instead of the streak detector (SPEC §4 ``knownPoll``: ``command_status``,
#: ``process`` with ``action`` ``poll``/``log``, are always polls).
DEFAULT_POLL_TOOLS: Final[frozenset[str]] = frozenset(
    {
        "await", "bash_output", "check_status", "command_status", "get_status", "job_status",
        "poll", "sleep", "task_output", "task_status", "wait", "wait_for",
    }
)  # fmt: skip
_SLEEP_FIRST: Final = lazy_compile(r"\A\s*sleep\s+\d")


def is_poll_call(
    tool_name: str,
    params: object,
    config: AdaptiveConfig,
    *,
    reads: Callable[[str], bool] | None = None,
) -> bool:
    """A poll: a known poll (SPEC §4), a waiting tool, or a shell ``sleep N …`` that reads.

    ``reads``: as for :func:`is_mutating_call`.
    """
    if tool_name in config.all_poll_tools:
        return True
    if tool_name == "process" and (type(params) is dict or isinstance(params, Mapping)):
        return params.get("action") in ("poll", "log")
    if tool_name in config.all_shell_tools:
        command = _command_text(params)
        if command is None or _SLEEP_FIRST.match(command) is None:
            return False
        if reads is not None:
            return reads(command)
        return shell_command_is_read_only(command, config.all_read_only_commands)
    return False


#: Tools that read one file; a successful read is what a "read it first" error asks for.
READ_TOOLS: Final[frozenset[str]] = frozenset(
    {"cat", "get_file_contents", "open_file", "read", "read_file", "read_text_file", "view",
     "view_file"}
)  # fmt: skip
_PATH_KEYS: Final = ("file_path", "path", "filePath", "file", "target_file", "absolute_path")


def target_path(params: object) -> str | None:
    """The file a call names (``file_path``, ``path``, …), stripped; ``None`` if none."""
    if type(params) is dict or isinstance(params, Mapping):
        for key in _PATH_KEYS:
            value = params.get(key)
            if isinstance(value, str) and plain_str(value).strip():
                return plain_str(value).strip()
    return None


def read_target(tool_name: str, params: object, config: AdaptiveConfig) -> str | None:
    """The file a successful call read (a read tool, or an editor's ``view``), if any."""
    if tool_name in READ_TOOLS or (
        tool_name in config.all_mutating_tools and _action_of(params) in READ_ONLY_ACTIONS
    ):
        return target_path(params)
    return None


_UNCHANGED_TEXT: Final = lazy_compile(
    r"\b(?:no changes (?:were |was )?(?:made|applied|needed)|file (?:is )?unchanged"
    r"|(?:content|file) (?:is )?already (?:up to date|identical)|nothing to change)\b",
    re.IGNORECASE,
)
#: How much of a result's text is searched for "no change" (it comes first).
_UNCHANGED_SCAN_CHARS: Final = 300
#: Text every match of :data:`_UNCHANGED_TEXT` holds, lower-cased: "chang" (no changes,
#: unchanged, nothing to change) or "already". Their letters fold onto no character but
#: their own upper case (checked on every Unicode character by
#: ``tests/core/test_adaptive_prescreens.py``), so a text whose lower-cased head holds
#: neither cannot match, and is told so without the case-insensitive search.
_UNCHANGED_WORDS: Final = ("chang", "already")


def reports_unchanged(result: object, text: str | None) -> bool:
    """A write that reports it changed nothing (OpenClaw's ``details.changed === false``).

    Recognised: ``changed: false`` or ``status: "unchanged"`` on the result or its
    ``details``, and a result text starting with "No changes made" / "File unchanged" /
    "Content already identical" and the like (the first 300 characters are read).
    """
    # (a plain ``str``, the commonest result, is no mapping: told without the ABC check)
    if type(result) is not str and (type(result) is dict or isinstance(result, Mapping)):
        for holder in (result, result.get("details")):
            if (type(holder) is dict or isinstance(holder, Mapping)) and (
                holder.get("changed") is False or holder.get("status") == "unchanged"
            ):
                return True
    if text is None:
        return False
    head = text[:_UNCHANGED_SCAN_CHARS]
    lowered = head.lower()
    may_match = any(map(lowered.__contains__, _UNCHANGED_WORDS))
    return may_match and _UNCHANGED_TEXT.search(head) is not None
