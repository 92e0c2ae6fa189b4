"""How a host's tool result becomes what the outcome hash reads (SPEC §3.3, §11.1).

The outcome hash follows the reference exactly: it reads a mapping as an OpenClaw tool
result, its ``content`` text parts and its ``details``, and nothing else. Hosts other than
OpenClaw return their own structures: a Google ADK tool's ``dict``, a pydantic-ai or
smolagents tool's return value, Claude Code's ``tool_response`` of Bash (``{"stdout",
"stderr", "interrupted", ...}``). Hashed by the reference rule, every such result is the
same empty one, so two calls with different output count as identical, and a status polled
while it changes, or tests re-run while the code is fixed, end up blocked as a loop.

So what a host reports is passed through :func:`as_outcome` on its way to ``after_call``
(by :class:`~loopwatch.calls.ToolCall`, which every adapter uses, and by the coding-agent
hooks): a mapping that is not OpenClaw-shaped becomes its stable JSON text, the text the
model reads for it, without the keys that change on every identical call (timings, per-call
ids). The core's rule stays the reference's: a host calling ``LoopGuard.after_call``
directly passes the text the model is shown, or calls this function.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Mapping
from typing import Final

from loopwatch.core.fingerprint import stable_stringify

logger = logging.getLogger("loopwatch.tools")

#: Keys of a host's structured result that change from one identical call to the next, so
#: they are left out of its outcome: timings (Claude Code's Glob and WebFetch
#: ``durationMs``, WebSearch ``durationSeconds``, Agent ``totalDurationMs``) and the
#: per-call ids WebSearch puts in its results (``tool_use_id``).
VOLATILE_RESULT_KEYS: Final = frozenset(
    {"durationMs", "durationSeconds", "totalDurationMs", "duration_ms", "tool_use_id"}
)
#: Nesting beyond this is kept as the host sent it (volatile keys there stay).
MAX_OUTCOME_DEPTH: Final = 32


def _without_volatile(value: object, depth: int) -> object:
    if depth >= MAX_OUTCOME_DEPTH:
        return value
    if isinstance(value, Mapping):
        return {
            key: _without_volatile(item, depth + 1)
            for key, item in value.items()
            if not (isinstance(key, str) and key in VOLATILE_RESULT_KEYS)
        }
    if isinstance(value, list):
        return [_without_volatile(item, depth + 1) for item in value]
    return value


def is_openclaw_shaped(result: Mapping[object, object]) -> bool:
    """Whether the outcome hash reads ``result`` as the host means it: a ``details``
    mapping, or a non-empty ``content`` list of typed blocks (``{"type": ..., ...}``, as
    OpenClaw's results and MCP's ``CallToolResult`` hold).

    A ``content`` that is a list of plain values, or empty (an MCP result carrying only
    ``structuredContent``), says nothing the outcome hash reads: such a result is compared
    whole.
    """
    if isinstance(result.get("details"), Mapping):
        return True
    content = result.get("content")
    return (
        isinstance(content, list)
        and bool(content)
        and all(
            isinstance(block, Mapping) and isinstance(block.get("type"), str) for block in content
        )
    )


def as_outcome(result: object) -> object:
    """A host's result in a form whose outcome hash reads all of it; never raises.

    Strings, lists, other values and OpenClaw-shaped mappings (:func:`is_openclaw_shaped`)
    are returned as they are: the outcome hash reads them whole already. Any other mapping
    becomes its stable JSON text (SPEC §3.1, the keys sorted) without
    :data:`VOLATILE_RESULT_KEYS`, or, when it holds a value that has no JSON form, its
    ``json`` text with such values as their ``str``. When neither can be written, the
    result is returned as it is (and so hashed by the reference rule), and that is logged.
    """
    if type(result) is str or not isinstance(result, Mapping):  # (text, the usual result)
        return result
    try:
        if is_openclaw_shaped(result):
            return result
        kept = _without_volatile(result, 0)
        try:
            return stable_stringify(kept)
        except (TypeError, ValueError, RecursionError):
            return json.dumps(kept, sort_keys=True, ensure_ascii=False, default=str)
    except Exception as exc:  # a host's mapping whose reading fails: hashed as it is
        logger.debug("loopwatch: a structured tool result kept as it is: %s", exc)
        return result


def content_text(content: object) -> str:
    """The text parts of a ``content`` list (``{"type": "text", "text": ...}``, as MCP's
    ``CallToolResult`` and OpenHands' observations hold them), joined by newlines; ``""``
    when there are none."""
    parts = content if isinstance(content, list) else []
    return "\n".join(
        part["text"]
        for part in parts
        if isinstance(part, dict)
        and part.get("type") == "text"
        and isinstance(part.get("text"), str)
    )


# --- Gemini CLI's shell text --------------------------------------------------------------

#: The fields ``run_shell_command`` ends its text with (google-gemini/gemini-cli
#: ``packages/core/src/tools/shell.ts``; the last is always the process group id).
_SHELL_FIELD: Final = re.compile(
    r"(Error|Exit Code|Signal|Background PIDs|Process Group PGID): (.*)"
)
#: The fields that name this run's processes: a new number on every run of a command.
_VOLATILE_FIELDS: Final = frozenset({"Background PIDs", "Process Group PGID"})
_NONE: Final = "(none)"
#: How far from the end the PGID field is looked for (it is the last line).
_TAIL: Final = 200


#: The wrapper Gemini CLI puts around a tool's text for the model (``wrapUntrusted``).
_UNTRUSTED_OPEN: Final = "<untrusted_context>\n"
_UNTRUSTED_CLOSE: Final = "\n</untrusted_context>"


def gemini_shell_text(text: str) -> tuple[str, bool] | None:
    """A Gemini CLI shell result: its text without the process-id lines, and whether the
    command failed; ``None`` for a text that is not a shell result.

    Gemini CLI ends every ``run_shell_command`` text with ``Process Group PGID: N``, so two
    runs with the same output never had the same outcome, and it reports a failed command
    as a success whose text says ``Exit Code: 1`` (or ``Error: ...``, ``Signal: ...``).
    Only the trailing field lines are read (the command's own output above them may print
    anything); the text must end with the ``Process Group PGID`` field to be one, inside
    the ``<untrusted_context>`` wrapper of newer Gemini CLIs when it has one. Both the
    hook (``loopwatch hook gemini``) and the transcript reader use this.
    """
    if "Process Group PGID: " not in text[-_TAIL:]:
        return None  # not a shell command's text; and no need to split a long file read
    body = text.rstrip("\n")
    if body.startswith(_UNTRUSTED_OPEN) and body.endswith(_UNTRUSTED_CLOSE):
        # Gemini CLI since #27772 wraps the text (textUtils.wrapUntrusted): the fields are
        # read inside the wrapper, which the shown text keeps.
        inner = _shell_fields(body[len(_UNTRUSTED_OPEN) : -len(_UNTRUSTED_CLOSE)])
        if inner is None:
            return None
        return _UNTRUSTED_OPEN + inner[0] + _UNTRUSTED_CLOSE, inner[1]
    return _shell_fields(body)


def _shell_fields(text: str) -> tuple[str, bool] | None:
    """:func:`gemini_shell_text` of a text without the untrusted-context wrapper."""
    lines = text.rstrip("\n").split("\n")
    fields: dict[str, str] = {}
    volatile: set[int] = set()
    start = len(lines)
    while start > 0 and (match := _SHELL_FIELD.fullmatch(lines[start - 1])) is not None:
        if match.group(1) in fields:
            break  # a field seen already: the command's own output from here up
        start -= 1
        fields[match.group(1)] = match.group(2).strip()
        if match.group(1) in _VOLATILE_FIELDS:
            volatile.add(start)
    if "Process Group PGID" not in fields:
        return None
    shown = "\n".join(line for number, line in enumerate(lines) if number not in volatile)
    failed = (
        fields.get("Error", _NONE) != _NONE
        or fields.get("Exit Code", _NONE) not in (_NONE, "0")
        or fields.get("Signal", _NONE) != _NONE
    )
    return shown, failed


# --- Codex CLI's refusals ------------------------------------------------------------------

#: How the texts open that Codex gives the model for a call its harness refused or could
#: not run (``FunctionCallError::RespondToModel`` in ``codex-rs/core``: a patch that does
#: not apply, a command or patch the user declined, arguments that are no JSON, a tool
#: that does not exist). The rollout stores them as a bare string, as it stores every
#: output, so the text is the only sign of the failure; a successful ``apply_patch`` of
#: the same versions answers with the ``{"output", "metadata"}`` envelope instead.
_CODEX_REFUSAL: Final = re.compile(
    r"apply_patch verification failed"
    r"|apply_patch handler received unsupported payload"
    r"|patch rejected"
    r"|exec command rejected by user"
    r"|failed to parse function arguments: "
    r"|unsupported (?:custom tool )?call: "
    r"|unable to locate image at "
)


def codex_refusal(output: object) -> bool:
    """Whether a Codex output is the harness's refusal of the call (see ``_CODEX_REFUSAL``)."""
    return isinstance(output, str) and _CODEX_REFUSAL.match(output) is not None


#: The end of a ``bash`` output OpenCode cut off (timeout, abort), new and old wording.
_OPENCODE_BASH_KILLED: Final = re.compile(
    r"<bash_metadata>\n(?:.*\n)*?(?:Shell tool terminated command after exceeding timeout"
    r"|User aborted the command)"
    r"|\(Command timed out after \d+ ms\)|\(Command was aborted\)"
)
#: How many characters at the end of a bash output are searched for the kill note.
_OPENCODE_TAIL: Final = 400


def opencode_bash_failed(metadata: object, output: object) -> bool:
    """Whether an OpenCode ``bash`` call that completed failed: its ``metadata.exit`` is not
    0, or (no exit code) OpenCode killed the command and said so at the end of its output.

    One rule for ``loopwatch scan`` (the stored tool part) and ``loopwatch hook opencode``
    (``tool.execute.after``'s ``output.metadata``), so a live call and its replay agree.
    """
    exit_code = metadata.get("exit") if isinstance(metadata, Mapping) else None
    if isinstance(exit_code, int) and not isinstance(exit_code, bool):
        return exit_code != 0
    return (
        isinstance(output, str)
        and _OPENCODE_BASH_KILLED.search(output[-_OPENCODE_TAIL:]) is not None
    )


__all__ = [
    "MAX_OUTCOME_DEPTH",
    "VOLATILE_RESULT_KEYS",
    "as_outcome",
    "codex_refusal",
    "content_text",
    "gemini_shell_text",
    "is_openclaw_shaped",
    "opencode_bash_failed",
]
