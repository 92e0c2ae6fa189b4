"""Parsing helpers shared by the readers: decoding, JSON lines, usage, run assembly.

Every reader turns *any* input into either runs or a :class:`TranscriptError`; these helpers
are where Python's own exceptions (``UnicodeDecodeError``, ``json.JSONDecodeError``, the
``ValueError`` of a 5,000-digit integer, ``RecursionError`` on deep nesting) are converted,
so no reader can leak one.
"""

from __future__ import annotations

import json
import numbers
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from loopwatch.core._undefined import UNDEFINED
from loopwatch.transcripts.model import Compaction, ReplayCall, ReplayEvent, Run, TranscriptError

#: Label of the run holding calls without a run id, in a transcript that also has run ids.
NO_RUN_ID_LABEL: Final = "(no run id)"


def decode_text(data: bytes, path: str) -> str:
    """Decode a transcript as UTF-8 (a BOM is ignored).

    Raises:
        TranscriptError: the bytes are not UTF-8; the line of the first bad byte is named.
    """
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise TranscriptError(path, line, f"not valid UTF-8 (byte {exc.start})") from exc


def parse_json(text: str, path: str, line: int | None) -> object:
    """``json.loads`` with every failure turned into a :class:`TranscriptError`.

    ``line`` is the line the text starts on; a syntax error inside a multi-line document
    is reported at its own line.
    """
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        at = exc.lineno + (line - 1 if line is not None else 0)
        raise TranscriptError(path, at, f"invalid JSON: {exc.msg} (column {exc.colno})") from exc
    except RecursionError as exc:
        raise TranscriptError(path, line, "invalid JSON: nested too deeply") from exc
    except ValueError as exc:  # e.g. an integer with more digits than Python converts
        raise TranscriptError(path, line, f"invalid JSON: {exc}") from exc


def json_lines(text: str, path: str) -> Iterator[tuple[int, object]]:
    """The JSON value of every non-blank line, with its 1-based line number.

    Lines are split on ``\\n`` only: ``str.splitlines`` would also split on U+2028 and
    friends, which JSON allows raw inside strings.
    """
    for index, raw in enumerate(text.split("\n"), start=1):
        if raw.strip():
            yield index, parse_json(raw, path, index)


def as_mapping(value: object, path: str, line: int | None, what: str) -> Mapping[str, object]:
    """``value`` when it is a JSON object, else a :class:`TranscriptError` naming ``what``."""
    if not isinstance(value, Mapping):
        raise TranscriptError(path, line, f"{what}: expected a JSON object")
    return value


def optional_id(value: object, path: str, line: int | None, key: str) -> str | None:
    """An id field: a string, ``null``/absent, or a number (kept as its decimal text)."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        return str(int(value))
    raise TranscriptError(path, line, f'"{key}" must be a string or null')


def _count(value: object) -> int | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if isinstance(value, float) and not value.is_integer():
        return None
    number = int(value)
    return number if number >= 0 else None


_TOTAL_KEYS: Final = ("totalTokens", "total_tokens")
_PART_KEYS: Final = (
    # OpenClaw / pi-ai usage
    "input",
    "output",
    "cacheRead",
    "cacheWrite",
    # Anthropic / Claude Code usage
    "input_tokens",
    "output_tokens",
    "cache_creation_input_tokens",
    "cache_read_input_tokens",
    # OpenAI chat usage
    "prompt_tokens",
    "completion_tokens",
)


def usage_tokens(usage: object) -> int | None:
    """Tokens one model response cost, from whichever usage shape the transcript has.

    A stated total wins; otherwise the input, output and cache counts are added, because a
    looping call costs its whole context again, not only the new output.

    Returns:
        The count, or ``None`` when the transcript says nothing usable.
    """
    if not isinstance(usage, Mapping):
        return None
    for key in _TOTAL_KEYS:
        total = _count(usage.get(key))
        if total is not None:
            return total
    parts = [count for key in _PART_KEYS if (count := _count(usage.get(key))) is not None]
    return sum(parts) if parts else None


def split_tokens(total: int | None, parts: int) -> list[int | None]:
    """Share one response's tokens among the calls it issued (remainder to the first).

    Sums are preserved, so the tokens a loop wasted add up to what the responses cost.
    """
    if total is None or parts <= 0:
        return [None] * max(parts, 0)
    share, remainder = divmod(total, parts)
    shares: list[int | None] = [share + remainder]
    return shares + [share] * (parts - 1)


def content_text(content: object) -> str:
    """The text a tool-result ``content`` shows: a string, or its text blocks joined."""
    if isinstance(content, str):
        return content
    if isinstance(content, Sequence) and not isinstance(content, (bytes, bytearray)):
        texts = [
            block["text"]
            for block in content
            if isinstance(block, Mapping) and isinstance(block.get("text"), str)
        ]
        return "\n".join(texts)
    return ""


@dataclass(slots=True)
class CallDraft:
    """A call whose outcome may arrive later (chat formats put results in later messages)."""

    tool: str
    args: object
    call_id: str | None
    run_id: str | None
    tokens: int | None
    line: int | None
    result: object = UNDEFINED
    error: object = UNDEFINED

    def freeze(self) -> ReplayCall:
        """The immutable call."""
        return ReplayCall(
            tool=self.tool,
            args=self.args,
            result=self.result,
            error=self.error,
            call_id=self.call_id,
            run_id=self.run_id,
            tokens=self.tokens,
            line=self.line,
        )


class RunAssembler:
    """Collects events per run key, in order of first appearance, then freezes the runs."""

    def __init__(self) -> None:
        self._runs: dict[str | None, list[CallDraft | Compaction]] = {}

    def add(self, run_id: str | None, event: CallDraft | Compaction) -> None:
        """Append an event to its run (created on first use)."""
        self._runs.setdefault(run_id, []).append(event)

    def finish(
        self, *, keep_empty: bool = True, none_label: str = NO_RUN_ID_LABEL
    ) -> tuple[Run, ...]:
        """The runs, frozen and labelled.

        Args:
            keep_empty: keep runs without calls (``False`` drops them; formats that start a
                run per user message would otherwise list every chat turn).
            none_label: the label of the run without a run id, when there are several.

        Returns:
            At least one run: a transcript with nothing to replay is one empty run.
        """
        runs: list[Run] = []
        for run_id, events in self._runs.items():
            frozen: tuple[ReplayEvent, ...] = tuple(
                event.freeze() if isinstance(event, CallDraft) else event for event in events
            )
            if not keep_empty and not any(isinstance(e, ReplayCall) for e in frozen):
                continue
            runs.append(Run(run_id=run_id, label="", events=frozen))
        if not runs:
            return (Run(run_id=None, label=""),)
        if len(runs) == 1 and runs[0].run_id is None:
            return tuple(runs)
        return tuple(
            Run(run_id=run.run_id, label=run.run_id or none_label, events=run.events)
            for run in runs
        )


__all__ = [
    "NO_RUN_ID_LABEL",
    "CallDraft",
    "RunAssembler",
    "as_mapping",
    "content_text",
    "decode_text",
    "json_lines",
    "optional_id",
    "parse_json",
    "split_tokens",
    "usage_tokens",
]
