"""JavaScript string semantics (SPEC §3.0).

The reference runs on JavaScript strings; Python's ``str.strip`` and default ordering
differ in small ways that change hashes and keys. Everything that trims, compares or
measures text in loopwatch goes through here.
"""

from __future__ import annotations

from typing import Final

#: JavaScript's whitespace set for ``trim`` and regex ``\s``.
WS_CHARS: Final = (
    "\t\n\x0b\x0c\r \u00a0\u1680"
    "\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a"
    "\u2028\u2029\u202f\u205f\u3000\ufeff"
)

#: A regex character class equal to JavaScript's ``\s``.
WS_CLASS: Final = (
    "[\\t\\n\\x0b\\x0c\\r \\u00a0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000\\ufeff]"
)


def js_trim(s: str) -> str:
    """``String.prototype.trim``: strip the JavaScript whitespace set only."""
    return s.strip(WS_CHARS)


def is_blank(s: str) -> bool:
    """True when ``s`` is empty after :func:`js_trim`."""
    return not s.strip(WS_CHARS)


def utf16_len(s: str) -> int:
    """Length in UTF-16 code units, as JavaScript's ``.length`` (astral characters count 2)."""
    if s.isascii():
        return len(s)
    return len(s) + sum(1 for ch in s if ord(ch) > 0xFFFF)


def utf16_key(s: str) -> bytes:
    """Sort key that orders strings by UTF-16 code units, as JavaScript's default sort."""
    return s.encode("utf-16-be", "surrogatepass")


def js_lower(s: str) -> str:
    """``toLowerCase`` (locale independent); ``str.lower`` is accepted by the spec."""
    return s.lower()


__all__ = ["WS_CHARS", "WS_CLASS", "is_blank", "js_lower", "js_trim", "utf16_key", "utf16_len"]
