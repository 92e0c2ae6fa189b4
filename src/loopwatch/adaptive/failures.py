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

from loopwatch.fingerprint import sha256_hex

_SOFT_FAILURE_PREFIX: Final = re.compile(r"\A\s*(?:ERROR|Error|error)\s*[:!]")
_SOFT_FAILURE_MARKERS: Final = (
    # SWE-agent's edit command: the edit was rejected and not applied.
    re.compile(r"Your proposed edit has introduced new syntax error"),
    # mini-swe-agent: a non-zero exit wrapped into the observation.
    re.compile(r"\A\s*<returncode>\s*[1-9]\d*\s*</returncode>"),
    # OpenClaw exec: the exit status appended to the output.
    re.compile(r"\(Command exited with code [1-9]\d*\)\s*\Z"),
)
_FAILED_STATUSES: Final = frozenset({"error", "failed", "failure"})


def _result_text(result: object) -> str | None:
    """The text a result shows the model: a string, or the text parts of ``content``."""
    if isinstance(result, str):
        return result
    if not isinstance(result, Mapping):
        return None
    content = result.get("content")
    parts: list[str] = []
    if isinstance(content, str):
        parts.append(content)
    elif isinstance(content, (list, tuple)):
        for entry in content:
            if isinstance(entry, Mapping) and isinstance(entry.get("text"), str):
                parts.append(entry["text"])
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
    text = _result_text(result)
    if isinstance(result, Mapping):
        details = result.get("details")
        details = details if isinstance(details, Mapping) else {}
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
    if _SOFT_FAILURE_PREFIX.match(text) or any(p.search(text) for p in _SOFT_FAILURE_MARKERS):
        return text
    return None


_QUOTED: Final = re.compile(r"'[^'\n]{0,400}'|\"[^\"\n]{0,400}\"|`[^`\n]{0,400}`")
_UUID: Final = re.compile(
    r"\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b"
)
_HEX: Final = re.compile(
    r"\b0x[0-9a-fA-F]+\b|\b(?=[0-9a-fA-F]*\d)(?=[0-9a-fA-F]*[a-fA-F])[0-9a-fA-F]{8,}\b"
)
_PATH: Final = re.compile(r"(?:[A-Za-z]:)?[\w.~…-]*(?:[\\/](?:[\w.~…-]*[\w~…-])?)+")
_NUMBER: Final = re.compile(r"[-+]?\d+(?:\.\d+)?")
_SPACES: Final = re.compile(r"\s+")
_BARE_STATUS: Final = re.compile(
    r"(?:(?:command )?(?:return ?code|exit(?:ed with)? (?:code|status)|status|code)\s*:?\s*)?"
    r"(?:<n>)?|(?:timeout|timed out|error|failed|failure|aborted)"
)
#: Longest normalised error text kept for the digest (tracebacks differ only further down).
_ERROR_CLASS_CHARS: Final = 400
#: Longest error text normalised (a traceback's head names the error).
_ERROR_SCAN_CHARS: Final = 4_000
_MIN_ECHO_CHARS: Final = 3
_MAX_ECHO_VALUES: Final = 64


def _arg_strings(params: object) -> list[str]:
    """String values of the params (nested), longest first: the candidates for echoes."""
    found: list[str] = []
    stack: list[tuple[object, int]] = [(params, 0)]
    while stack and len(found) < _MAX_ECHO_VALUES:
        value, depth = stack.pop()
        if isinstance(value, str):
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
    return "errclass:" + sha256_hex(normalised)[:32]
