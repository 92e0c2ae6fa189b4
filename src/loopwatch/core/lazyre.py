"""Regular expressions compiled on first use, for modules a hook process imports.

Compiling is the one part of a module's import that bytecode caching cannot save: the
adaptive profile's 47 patterns cost about 16 ms of CPU in every ``loopwatch hook`` process
(measured on the issue 14 machine, where the whole in-process hook is about 170 ms), and a
``PreToolUse`` event uses none of them. :func:`lazy_compile` defers each pattern to its
first use; after that, the methods are the compiled pattern's own bound methods, stored on
the object, so a call costs what ``re.Pattern``'s does (measured: 0.24 µs either way).
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable, Iterator
from typing import Any

#: The ``re.Pattern`` attributes a lazy pattern forwards (everything loopwatch uses).
_FORWARDED = ("search", "match", "fullmatch", "sub", "subn", "finditer", "findall", "split")


class LazyPattern:
    """A ``re.Pattern[str]`` that compiles itself when one of its methods is first used.

    Each method below runs once: it compiles the pattern and stores the compiled
    pattern's bound methods on the instance, where attribute lookup finds them before
    these (functions are non-data descriptors), so later calls go straight to ``re``.
    """

    def __init__(self, pattern: str, flags: int = 0) -> None:
        self.pattern = pattern
        self.flags = flags

    def compiled(self) -> re.Pattern[str]:
        """The compiled pattern (``re`` caches it too)."""
        return re.compile(self.pattern, self.flags)

    def _bind(self) -> re.Pattern[str]:
        compiled = self.compiled()
        for method in _FORWARDED:
            setattr(self, method, getattr(compiled, method))
        return compiled

    def search(self, string: str, pos: int = 0, endpos: int = sys.maxsize) -> re.Match[str] | None:
        return self._bind().search(string, pos, endpos)

    def match(self, string: str, pos: int = 0, endpos: int = sys.maxsize) -> re.Match[str] | None:
        return self._bind().match(string, pos, endpos)

    def fullmatch(
        self, string: str, pos: int = 0, endpos: int = sys.maxsize
    ) -> re.Match[str] | None:
        return self._bind().fullmatch(string, pos, endpos)

    def sub(self, repl: str | Callable[[re.Match[str]], str], string: str, count: int = 0) -> str:
        return self._bind().sub(repl, string, count)

    def subn(
        self, repl: str | Callable[[re.Match[str]], str], string: str, count: int = 0
    ) -> tuple[str, int]:
        return self._bind().subn(repl, string, count)

    def finditer(
        self, string: str, pos: int = 0, endpos: int = sys.maxsize
    ) -> Iterator[re.Match[str]]:
        return self._bind().finditer(string, pos, endpos)

    def findall(self, string: str, pos: int = 0, endpos: int = sys.maxsize) -> list[Any]:
        return self._bind().findall(string, pos, endpos)

    def split(self, string: str, maxsplit: int = 0) -> list[str | Any]:
        return self._bind().split(string, maxsplit)

    def __repr__(self) -> str:
        return f"lazy_compile({self.pattern!r}, {self.flags!r})"


def lazy_compile(pattern: str, flags: int = 0) -> LazyPattern:
    """``re.compile(pattern, flags)``, deferred to the first search, match, sub ..."""
    return LazyPattern(pattern, flags)


__all__ = ["LazyPattern", "lazy_compile"]
