"""Failures: what a result or an error tells about a failed call, and its error class.

A tool may raise, or report its failure in-band (``ERROR: …``, a non-zero exit, MCP's
``isError``). The error class is a digest of the failure text with everything call-specific
removed, so "the same error with slightly different arguments" collides.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Final

from loopwatch.core.fingerprint import raw_text_digest
from loopwatch.core.lazyre import lazy_compile
from loopwatch.core.naming import plain_str

_SOFT_FAILURE_PREFIX: Final = lazy_compile(r"\A\s*(?:ERROR|Error|error)\s*[:!]")
# SWE-agent's edit command: the edit was rejected and not applied.
_SWE_AGENT_REJECTED: Final = lazy_compile(r"Your proposed edit has introduced new syntax error")
# mini-swe-agent: a non-zero exit wrapped into the observation.
_RETURNCODE: Final = lazy_compile(r"\A\s*<returncode>\s*[1-9]\d*\s*</returncode>")
# OpenClaw exec: the exit status appended to the output.
_EXITED_WITH: Final = lazy_compile(r"\(Command exited with code [1-9]\d*\)\s*\Z")
#: How far into a result the in-band failure markers are looked for (they come first, or, for
#: the exit status, in the last 200 characters): a huge output costs no more than a small one.
_SOFT_SCAN_CHARS: Final = 20_000
_EXIT_TAIL_CHARS: Final = 200
_FAILED_STATUSES: Final = frozenset({"error", "failed", "failure"})


def _result_text(result: object) -> str | None:
    """The text a result shows the model: a string, or the text parts of ``content``."""
    if isinstance(result, str):
        return plain_str(result)
    if type(result) is not dict and not isinstance(result, Mapping):
        return None
    content = result.get("content")
    parts: list[str] = []
    if isinstance(content, str):
        parts.append(plain_str(content))
    elif isinstance(content, (list, tuple)):
        for entry in content:
            if (type(entry) is dict or isinstance(entry, Mapping)) and isinstance(
                entry.get("text"), str
            ):
                parts.append(plain_str(entry["text"]))
    return "\n".join(parts) if parts else None


def result_failure_text(result: object) -> str | None:
    """The failure a *result* reports, when the tool signalled it in-band instead of raising.

    Recognised (conservative, every rule documented): a result text starting with
    ``ERROR:`` / ``Error:`` (OpenHands' editor and many MCP servers), SWE-agent's rejected
    edit, a non-zero ``<returncode>``, OpenClaw exec's ``(Command exited with code N)``,
    ``isError: true`` (MCP), ``details.status`` of ``error`` / ``failed`` and a non-zero
    ``details.exitCode`` (OpenClaw exec).

    Returns:
        The failure's text (possibly ``""``), or ``None`` when the result reports success.
    """
    return failure_text_in(result, _result_text(result))


def failure_text_in(result: object, text: str | None) -> str | None:
    """:func:`result_failure_text` of a result whose text (``_result_text(result)``) is
    known: :func:`~loopwatch.detectors.adaptive.facts.build_adaptive_record` needs both, and
    joining a result's text parts once is enough."""
    # (a plain ``str``, the commonest result, is no mapping: told without the ABC check)
    if type(result) is not str and (type(result) is dict or isinstance(result, Mapping)):
        details = result.get("details")
        details = details if (type(details) is dict or isinstance(details, Mapping)) else {}
        status = details.get("status")
        exit_code = details.get("exitCode")
        if (
            result.get("isError") is True
            or (isinstance(status, str) and status in _FAILED_STATUSES)
            or (isinstance(exit_code, int) and not isinstance(exit_code, bool) and exit_code != 0)
        ):
            return text or ""
    if text is None:
        return None
    if (
        _SOFT_FAILURE_PREFIX.match(text)
        or _SWE_AGENT_REJECTED.search(text, 0, _SOFT_SCAN_CHARS)
        or _RETURNCODE.match(text)
        or _EXITED_WITH.search(text[-_EXIT_TAIL_CHARS:])
    ):
        return text
    return None


_QUOTED: Final = lazy_compile(r"'[^'\n]{0,400}'|\"[^\"\n]{0,400}\"|`[^`\n]{0,400}`")
_UUID: Final = lazy_compile(
    r"\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b"
)
_HEX: Final = lazy_compile(
    r"\b0x[0-9a-fA-F]+\b|\b(?=[0-9a-fA-F]*\d)(?=[0-9a-fA-F]*[a-fA-F])[0-9a-fA-F]{8,}\b"
)
# A path starts where a token starts: trying every position inside a long token would be
# quadratic in its length.
_PATH: Final = lazy_compile(r"(?<![\w.~…-])(?:[A-Za-z]:)?[\w.~…-]*(?:[\\/](?:[\w.~…-]*[\w~…-])?)+")
_NUMBER: Final = lazy_compile(r"[-+]?\d+(?:\.\d+)?")
_SPACES: Final = lazy_compile(r"\s+")
#: A run this long without whitespace is data, not words (linear: at most 120 steps a start).
_LONG_TOKEN: Final = lazy_compile(r"\S{120,}")
_BARE_STATUS: Final = lazy_compile(
    r"(?:(?:command )?(?:return ?code|exit(?:ed with)? (?:code|status)|status|code)\s*:?\s*)?"
    r"(?:<n>)?|(?:timeout|timed out|error|failed|failure|aborted)"
)
#: Longest normalised error text kept for the digest (tracebacks differ only further down).
_ERROR_CLASS_CHARS: Final = 400
#: Longest error text normalised (a traceback's head names the error; 400 normalised
#: characters are kept, so more would only cost time).
_ERROR_SCAN_CHARS: Final = 2_000
_MIN_ECHO_CHARS: Final = 3
_MAX_ECHO_VALUES: Final = 64


def _arg_strings(params: object) -> list[str]:
    """String values of the params (nested), longest first: the candidates for echoes."""
    found: list[str] = []
    stack: list[tuple[object, int]] = [(params, 0)]
    while stack and len(found) < _MAX_ECHO_VALUES:
        value, depth = stack.pop()
        if isinstance(value, str):
            value = plain_str(value)  # (a subclass's methods are the host's code)
            if len(value) >= _MIN_ECHO_CHARS:
                found.append(value)
        elif depth < 4 and isinstance(value, Mapping):
            stack.extend((item, depth + 1) for item in value.values())
        elif depth < 4 and isinstance(value, (list, tuple)):
            stack.extend((item, depth + 1) for item in value)
    return sorted(set(found), key=len, reverse=True)


def _echo_placeholder(value: str) -> str:
    """What an echoed argument becomes: the placeholder its own shape would get anyway."""
    if _PATH.fullmatch(value):
        return "<path>"
    if _NUMBER.fullmatch(value):
        return "<n>"
    return "<arg>"


def _unwrap_json_error(text: str) -> str:
    """``{"status": "error", "error": "File not found: …"}`` → ``File not found: …``."""
    stripped = text.strip()
    if not stripped.startswith("{"):
        return text
    try:
        value = json.loads(stripped)
    except ValueError:
        return text
    if isinstance(value, dict):
        for key in ("error", "message", "detail"):
            inner = value.get(key)
            if isinstance(inner, str) and inner.strip():
                return inner
    return text


def normalize_error_text(text: str, params: object = None) -> str:
    """The error with everything call-specific removed, lower-cased, whitespace collapsed.

    Steps, in order: unwrap a JSON error object; replace echoed argument strings by
    ``<arg>``; quoted strings by ``<q>``; UUIDs by ``<id>``; hex ids by ``<hex>``; paths
    by ``<path>``; numbers by ``<n>``; a final full stop is dropped.

    Args:
        text: the error text (SPEC §3.3 step 1) or a result's failure text.
        params: the call's params, whose string values are removed where echoed.

    Returns:
        The normalised text (at most 400 characters).
    """
    text = _unwrap_json_error(text[:_ERROR_SCAN_CHARS])
    for value in _arg_strings(params):
        if value in text:
            text = text.replace(value, _echo_placeholder(value))
    # Long unbroken runs (base64, minified data) first: the patterns below would each rescan
    # such a run from every position in it.
    text = _LONG_TOKEN.sub("<blob>", text)
    text = _QUOTED.sub("<q>", text)
    text = _UUID.sub("<id>", text)
    text = _HEX.sub("<hex>", text)
    text = _PATH.sub("<path>", text)
    text = _NUMBER.sub("<n>", text)
    text = _SPACES.sub(" ", text).strip().rstrip(".").lower()
    return text[:_ERROR_CLASS_CHARS]


def classify_error(text: str, params: object = None) -> str | None:
    """The ``error_class`` digest of a failure text, or ``None`` when it is uninformative.

    A bare exit status (``returncode 1``, ``exit code 2``, ``timeout``) says nothing about
    *which* error happened: two unrelated failing shell commands must not look like "the
    same error", so such texts get no class.
    """
    normalised = normalize_error_text(text, params)
    if _BARE_STATUS.fullmatch(normalised):
        return None
    return "errclass:" + raw_text_digest(normalised)[:32]


# --- failures that are not the tool's: rejections, cancellations, interrupts ---------------

#: Texts that say the *user* (or the host on the user's behalf) stopped the call: it never
#: ran, so it is not a failure, and repeating it after the user approves is not a loop.
#: Claude Code: "The user doesn't want to proceed with this tool use." / "… to take this
#: action right now", "[Request interrupted by user]", "[Request interrupted by user for tool
#: use]", and "Cancelled: parallel tool call … errored" (a sibling of a failed call in the same
#: batch); Codex: "exec command rejected by user", "patch rejected by user"; Cline / Roo:
#: "The user denied this operation." and "Tool [read_file] was not executed because a tool has
#: already been used in this message" (Cline runs one tool per message and cancels the rest of
#: the batch); OpenHands: "Action has been rejected by the user" and
#: "[Last action has been rejected by the user]"; generic "User rejected …", "… denied by
#: the user", "… cancelled/aborted/interrupted by the user". Not matched on purpose:
#: "Permission denied" (a file mode or a sandbox: retrying fails again) and Claude Code's
#: "Permission for this tool use was denied" (a standing rule, not a prompt answered no).
_DISMISSED: Final = lazy_compile(
    r"the user doesn't want to (?:proceed with this tool use|take this action)"
    r"|\[request interrupted by user"
    r"|cancell?ed: parallel tool call"
    r"|was not executed because a tool has already been used in this message"
    r"|\buser rejected\b"
    r"|\brejected by (?:the )?user\b"
    r"|\bthe user denied this operation"
    r"|\b(?:denied|declined|cancell?ed|aborted|interrupted) by (?:the )?user\b",
    re.IGNORECASE,
)
#: How much of a failure text is searched for a dismissal (they open the text).
_DISMISS_SCAN_CHARS: Final = 600


def is_dismissal(text: str) -> bool:
    """Whether a failure text says the user rejected, cancelled or interrupted the call."""
    return _DISMISSED.search(text, 0, _DISMISS_SCAN_CHARS) is not None


# --- the failure's identity, volatile spans masked -----------------------------------------

#: Spans that differ between two runs of the same failing command: ISO timestamps, clock
#: times, retry counters, durations, process ids (OpenClaw 8.1's ``failureIdentityHash``).
#: The leading lookaheads change no match: every alternative starts with a digit or with
#: ``a``, ``r``, ``t`` or ``p`` (attempt, retry, try, pid), so a position holding anything
#: else is rejected by one class test instead of five alternatives (masking a failure took
#: 2.5x longer without it); and a keyword starts a word with ``att``, ``ret``, ``try``,
#: ``pid`` or ``ppi``, so the second rejects the many other a, r, t and p of prose (a fifth
#: less time on the corpus's failures). ``tests/core/test_adaptive_prescreens.py`` checks
#: the forms agree.
_VOLATILE: Final = lazy_compile(
    r"(?=[\dartp])(?=\d|\b(?:att|ret|try|pid|ppi))(?:"
    r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(?::\d{2}(?:[.,]\d{1,9})?)?(?:Z|[+-]\d{2}:?\d{2})?"
    r"|\b\d{1,2}:\d{2}(?::\d{2}(?:[.,]\d{1,9})?)?\b"
    r"|\b(?:attempt|retry|retries|try)\s{0,3}#?\s{0,3}\d{1,9}(?:\s{0,3}(?:/|of)\s{0,3}\d{1,9})?"
    r"|\b\d{1,12}(?:\.\d{1,9})?\s{0,3}(?:ms|msec|milliseconds?|s|secs?|seconds?|mins?|minutes?"
    r"|h|hrs?|hours?)\b"
    r"|\b(?:pid|ppid)\s{0,3}[:=#]?\s{0,3}\d{1,9}"
    r")",
    re.IGNORECASE,
)
#: How much of a text's head and tail is masked (the error and its summary live there); the
#: middle of a longer text is kept as it is, so the cost stays bounded and nothing is lost.
_IDENTITY_HEAD_CHARS: Final = 2_000
_IDENTITY_TAIL_CHARS: Final = 1_000


def mask_volatile(text: str) -> str:
    """The text with timestamps, clock times, retry counts, durations and pids as ``#``.

    Only the first 2,000 and the last 1,000 characters are masked; the middle of a longer
    text is kept unchanged.
    """
    if len(text) <= _IDENTITY_HEAD_CHARS + _IDENTITY_TAIL_CHARS:
        return _VOLATILE.sub("#", text)
    head = _VOLATILE.sub("#", text[:_IDENTITY_HEAD_CHARS])
    tail = _VOLATILE.sub("#", text[-_IDENTITY_TAIL_CHARS:])
    return head + text[_IDENTITY_HEAD_CHARS:-_IDENTITY_TAIL_CHARS] + tail


# --- typed errors: one error code across varying arguments ---------------------------------

_ERROR_CODES: Final = (
    ("errno", lazy_compile(r"\[Errno (\d{1,5})\]")),
    (
        "errno",
        lazy_compile(
            r"\b(E(?:NOENT|ACCES|PERM|EXIST|NOTDIR|ISDIR|NOTEMPTY|CONNREFUSED|CONNRESET|TIMEDOUT"
            r"|ADDRINUSE|NOSPC|ROFS|AGAIN|BUSY|PIPE|MFILE|HOSTUNREACH|NETUNREACH|INVAL|NOTFOUND))\b"
        ),
    ),
    (
        "http",
        lazy_compile(r"\bHTTP(?:/\d(?:\.\d)?)?\s{0,3}(?:status\s{0,3})?:?\s{0,3}([1-5]\d\d)\b"),
    ),
    (
        "http",
        lazy_compile(
            r"\bstatus(?:[ _]?code)?\\?\"?\s{0,3}[=:]\s{0,3}\"?([1-5]\d\d)\b", re.IGNORECASE
        ),
    ),
    (
        "http",
        lazy_compile(
            r"\b([45]\d\d)\s(?:Not Found|Forbidden|Unauthorized|Bad Request|Conflict|Gone"
            r"|Too Many Requests|Internal Server Error|Bad Gateway|Service Unavailable"
            r"|Gateway Timeout|Unprocessable)"
        ),
    ),
    (
        "code",
        lazy_compile(
            r"\b(?:error[ _]?)?code\\?\"?\s{0,3}[=:]\s{0,3}\\?[\"']?([A-Za-z][\w.-]{1,39})"
        ),
    ),
)
#: How much of a failure text is searched for an error code (codes come early).
_CODE_SCAN_CHARS: Final = 2_000


def error_code(text: str) -> str | None:
    """The typed error a failure names: ``errno:2``, ``errno:ENOENT``, ``http:404``,
    ``code:RATE_LIMITED`` (the first found, in that order of kinds), or ``None``.

    Only codes that are names count for ``code=…`` (a number there is usually an exit
    status, which says nothing about which error happened).
    """
    head = text[:_CODE_SCAN_CHARS]
    for kind, pattern in _ERROR_CODES:
        match = pattern.search(head)
        if match is not None:
            return f"{kind}:{match.group(1)}"
    return None


# --- the action an error asks for -----------------------------------------------------------

#: "Read it first": Claude Code's ``Edit``/``Write`` refuse a file not read in this session
#: ("File has not been read yet. Read it first before writing to it.") or changed since
#: ("File has been modified since read … Read it again …"); a read of that file answers it.
_NEEDS_READ: Final = lazy_compile(
    r"has not been read yet|read it (?:first|again)|must (?:first )?read (?:the|this) file"
    r"|modified since (?:it was )?(?:last )?read",
    re.IGNORECASE,
)


def asks_for_read(text: str) -> bool:
    """Whether a failure asks the agent to read the file before trying again."""
    return _NEEDS_READ.search(text, 0, _DISMISS_SCAN_CHARS) is not None
