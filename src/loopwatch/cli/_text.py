"""Plain-text helpers for the CLI: safe writing, labels, fixed-width tables.

Output is ANSI-free on purpose: it is pasted into issues, CI logs and READMEs.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from typing import Final, TextIO

#: Widest a run label gets in a table before its middle is elided.
MAX_LABEL_WIDTH: Final = 56


_CONTROL: Final = re.compile("[\x00-\x1f\x7f-\x9f]")
_CONTROL_BUT_LINES: Final = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def _escape_control(match: re.Match[str]) -> str:
    return f"\\x{ord(match.group()):02x}"


def safe_text(text: str, *, keep_lines: bool = False) -> str:
    """``text`` made safe to print: lone surrogates (which JSON allows) spelled as
    ``\\udxxx`` escapes, control characters (``ESC`` of terminal escape sequences,
    ``\\r``, newlines, C1 controls) as ``\\xNN``.

    Transcripts may hold either in tool names, file names or ids: printed raw, surrogates
    raise on every stream and escape sequences rewrite the user's terminal.
    ``keep_lines`` keeps newlines and tabs (for multi-line text in the HTML report).
    """
    pattern = _CONTROL_BUT_LINES if keep_lines else _CONTROL
    return pattern.sub(_escape_control, text.encode("utf-8", "backslashreplace").decode("utf-8"))


def write(stream: TextIO, text: str) -> None:
    """Write ``text`` so that it cannot fail on an encoding the stream lacks."""
    encoding = getattr(stream, "encoding", None) or "utf-8"
    stream.write(text.encode(encoding, "backslashreplace").decode(encoding, "replace"))


def elide(text: str, width: int = MAX_LABEL_WIDTH) -> str:
    """Shorten ``text`` to ``width`` by cutting its middle: run names differ at both ends."""
    if len(text) <= width:
        return text
    keep = width - 3
    head = keep // 2
    return text[:head] + "..." + text[len(text) - (keep - head) :]


def run_label(path: str, label: str) -> str:
    """How a run is named in reports: the file name, plus ``#run`` when the file has several."""
    name = os.path.basename(os.path.normpath(path)) or path
    if name == "events":  # an OpenHands session folder: name it by its session
        name = os.path.join(os.path.basename(os.path.dirname(os.path.normpath(path))), name)
    return safe_text(f"{name}#{label}" if label else name)


def table(header: Sequence[str], rows: Sequence[Sequence[str]], *, right: frozenset[int]) -> str:
    """A fixed-width text table.

    Args:
        header: the column titles.
        rows: the cells, as text.
        right: indexes of the columns to right-align (numbers).

    Returns:
        The table, one line per row, without a trailing newline.
    """
    widths = [len(title) for title in header]
    for row in rows:
        for index, cell in enumerate(row):
            widths[index] = max(widths[index], len(cell))

    def line(cells: Sequence[str]) -> str:
        parts = [
            cell.rjust(widths[i]) if i in right else cell.ljust(widths[i])
            for i, cell in enumerate(cells)
        ]
        return "  ".join(parts).rstrip()

    return "\n".join([line(header), *(line(row) for row in rows)])


__all__ = ["MAX_LABEL_WIDTH", "elide", "run_label", "safe_text", "table", "write"]
