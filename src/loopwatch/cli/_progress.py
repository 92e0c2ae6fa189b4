"""A minimal progress bar on stderr, for long scans on a terminal only.

It never writes to a pipe or a file (CI logs stay clean) and never to stdout (the table
and ``--json`` stay parseable).
"""

from __future__ import annotations

from typing import Final, TextIO

#: Fewer files than this finish before a bar would be worth reading.
MIN_FILES_FOR_PROGRESS: Final = 20
_BAR_WIDTH: Final = 30


def wants_progress(stream: TextIO, total: int, *, disabled: bool = False) -> bool:
    """Whether to draw a bar: many files, and ``stream`` is a terminal."""
    if disabled or total < MIN_FILES_FOR_PROGRESS:
        return False
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


class Progress:
    """Redraws one line (``[#####-----] 34/136 files``) in place with ``\\r``.

    Args:
        stream: where to draw (stderr).
        total: the number of steps.
        unit: what is counted.
        enabled: ``False`` makes every method a no-op.
    """

    def __init__(self, stream: TextIO, total: int, *, unit: str, enabled: bool) -> None:
        self._stream = stream
        self._total = max(total, 1)
        self._unit = unit
        self._enabled = enabled
        self._done = 0

    def advance(self) -> None:
        """Count one step and redraw."""
        if not self._enabled:
            return
        self._done += 1
        filled = _BAR_WIDTH * self._done // self._total
        bar = "#" * filled + "-" * (_BAR_WIDTH - filled)
        self._stream.write(f"\r[{bar}] {self._done}/{self._total} {self._unit}")
        self._stream.flush()

    def close(self) -> None:
        """Erase the bar so the next line starts clean."""
        if self._enabled:
            self._stream.write("\r" + " " * (_BAR_WIDTH + 40) + "\r")
            self._stream.flush()


__all__ = ["MIN_FILES_FOR_PROGRESS", "Progress", "wants_progress"]
