"""Regular expressions compiled on first use, for modules a hook process imports.

Compiling is the one part of a module's import that bytecode caching cannot save: the
adaptive profile's 47 patterns cost about 16 ms of CPU in every ``loopwatch hook`` process
(measured on the issue 14 machine, where the whole in-process hook is about 170 ms), and a
``PreToolUse`` event uses none of them. :func:`lazy_compile` defers each pattern to its
first use; after that, the methods are the compiled pattern's own bound methods, stored on
the object, so a call costs what ``re.Pattern``'s does.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import Any

#: The ``re.Pattern`` attributes a lazy pattern forwards (everything loopwatch uses).
_FORWARDED = ("search", "match", "fullmatch", "sub", "subn", "finditer", "findall", "split")


class LazyPattern:
    """A ``re.Pattern[str]`` that compiles itself when one of its methods is first used."""

    # Declared for type checkers only: the instance gets them on first use (__getattr__).
    search: Callable[..., re.Match[str] | None]
    match: Callable[..., re.Match[str] | None]
    fullmatch: Callable[..., re.Match[str] | None]
    sub: Callable[..., str]
    subn: Callable[..., tuple[str, int]]
    finditer: Callable[..., Iterator[re.Match[str]]]
    findall: Callable[..., list[Any]]
    split: Callable[..., list[str | Any]]

    def __init__(self, pattern: str, flags: int = 0) -> None:
        self.pattern = pattern
        self.flags = flags

    def compiled(self) -> re.Pattern[str]:
        """The compiled pattern (``re`` caches it too)."""
        return re.compile(self.pattern, self.flags)

    def __getattr__(self, name: str) -> Any:
        # Only reached while the instance lacks the attribute: once per pattern.
        if name not in _FORWARDED:
            raise AttributeError(name)
        compiled = self.compiled()
        for method in _FORWARDED:
            setattr(self, method, getattr(compiled, method))
        return getattr(compiled, name)

    def __repr__(self) -> str:
        return f"lazy_compile({self.pattern!r}, {self.flags!r})"


def lazy_compile(pattern: str, flags: int = 0) -> LazyPattern:
    """``re.compile(pattern, flags)``, deferred to the first search, match, sub ..."""
    return LazyPattern(pattern, flags)


__all__ = ["LazyPattern", "lazy_compile"]
