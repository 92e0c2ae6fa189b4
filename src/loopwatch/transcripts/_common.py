"""Parsing helpers shared by the readers: decoding, JSON lines, usage, run assembly.

Every reader turns *any* input into either runs or a :class:`TranscriptError`; these helpers
are where Python's own exceptions (``UnicodeDecodeError``, ``json.JSONDecodeError``, the
``ValueError`` of a 5,000-digit integer, ``RecursionError`` on deep nesting) are converted,
so no reader can leak one.
"""

from __future__ import annotations

import json
import numbers
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from loopwatch.core._undefined import UNDEFINED
from loopwatch.transcripts.model import Compaction, ReplayCall, ReplayEvent, Run, TranscriptError

#: Label of the run holding calls without a run id, in a transcript that also has run ids.
NO_RUN_ID_LABEL: Final = "(no run id)"


#: Leading bytes of the compressed formats a transcript may be archived in.
_COMPRESSED: Final = (
    (b"\x1f\x8b", "gzip"),
    (b"\x28\xb5\x2f\xfd", "zstd"),
    (b"BZh", "bzip2"),
    (b"\xfd7zXZ\x00", "xz"),
    (b"PK\x03\x04", "zip"),
)


def decode_text(data: bytes, path: str) -> str:
    """Decode a transcript as UTF-8 (a BOM is ignored).

    Raises:
        TranscriptError: the bytes are compressed (named, so the user knows to
            decompress them) or not UTF-8; the line of the first bad byte is named.
    """
    for magic, name in _COMPRESSED:
        if data.startswith(magic) and (name != "bzip2" or data[3:4].isdigit()):
            raise TranscriptError(
                path, None, f"{name}-compressed: not read (decompress it to scan it)"
            )
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


def text_lines(text: str) -> Iterator[tuple[int, str]]:
    """Every line of ``text`` with its 1-based number, split on ``\\n`` only, lazily.

    ``str.splitlines`` would also split on U+2028 and friends, which JSON allows raw inside
    strings; ``str.split`` would hold a second copy of a large file as a list of lines.
    """
    start = 0
    number = 1
    while True:
        end = text.find("\n", start)
        if end < 0:
            yield number, text[start:]
            return
        yield number, text[start:end]
        start = end + 1
        number += 1


def json_lines(text: str, path: str) -> Iterator[tuple[int, object]]:
    """The JSON value of every non-blank line, with its 1-based line number."""
    for index, raw in text_lines(text):
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
    batch: int | None = None

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
            batch=self.batch,
        )


class RunAssembler:
    """Collects events per run key, in order of first appearance, then freezes the runs."""

    def __init__(self) -> None:
        self._runs: dict[str | None, list[CallDraft | Compaction]] = {}

    def add(self, run_id: str | None, event: CallDraft | Compaction) -> None:
        """Append an event to its run (created on first use)."""
        self._runs.setdefault(run_id, []).append(event)

    def open(self, run_id: str | None) -> None:
        """Make sure the run exists (so a run without calls is still reported)."""
        self._runs.setdefault(run_id, [])

    def has(self, run_id: str | None) -> bool:
        """Whether the run exists."""
        return run_id in self._runs

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


def decode_arguments(raw: object) -> object:
    """Decode JSON-string arguments; keep anything undecodable as the model sent it."""
    if not isinstance(raw, str):
        return {} if raw is None else raw
    try:
        return json.loads(raw)
    except (ValueError, RecursionError):
        return raw


#: Texts hosts give a tool call they never ran because a sibling in the same batch failed
#: or only one tool may run per message. Such a call did nothing, so replay records no
#: outcome for it (it is still a call the model made, and counted).
_NOT_RUN_MARKERS: Final = (
    "Cancelled: parallel tool call",
    "was not executed because",
    "Sibling tool call errored",
)


def not_run(text: object) -> bool:
    """Whether a tool result says the call was cancelled or never executed."""
    if not isinstance(text, str):
        text = content_text(text)
    head = text[:400]
    return any(marker in head for marker in _NOT_RUN_MARKERS)


def _calls(count: int) -> str:
    return f"{count} call" if count == 1 else f"{count} calls"


@dataclass(frozen=True, slots=True)
class Read:
    """What a reader found: the runs, results it could not match, calls it skipped, notes.

    Attributes:
        runs: the runs.
        unmatched: results that answer no call read.
        notes: plain-words notes for the scan report.
        skipped: records that hold tool calls of a kind the reader does not know (a newer
            host version's item type): not replayed, so the file is no all-clear.
    """

    runs: tuple[Run, ...]
    unmatched: int = 0
    notes: tuple[str, ...] = ()
    skipped: int = 0

    def with_notes(self, *notes: str) -> Read:
        """This read with ``notes`` added after its own."""
        return Read(self.runs, self.unmatched, (*self.notes, *notes), self.skipped)


class CallBook:
    """The calls of one session: pending outcomes by id, each call once, batches.

    Readers of formats whose hosts re-append history (OpenClaw compaction branches,
    Claude Code sub-agent copies, resumed Codex rollouts) record a call id once: a second
    call with an id already seen is a copy, not a new call. Results that answer no call
    are counted, so the scan can say the file was not fully understood.

    Args:
        runs: where calls go.
        dedupe: drop calls whose id was seen before in this session.
    """

    def __init__(self, runs: RunAssembler, *, dedupe: bool = True) -> None:
        self.runs = runs
        self.dedupe = dedupe
        self.pending: dict[str, CallDraft] = {}
        self.seen: set[str] = set()
        self.unmatched = 0
        self.duplicates = 0
        self.not_run = 0
        self.synthesised = 0
        #: Call records of kinds the reader does not know, by kind (not replayed).
        self.skipped: Counter[str] = Counter()
        #: Other records of kinds the reader does not know, by kind (no calls expected).
        self.ignored: Counter[str] = Counter()
        self._batches = 0

    def batch_for(self, size: int) -> int | None:
        """A fresh batch number for ``size`` calls issued together (``None`` for one)."""
        if size < 2:
            return None
        self._batches += 1
        return self._batches

    def mark_batch(self, drafts: Sequence[CallDraft]) -> None:
        """Put ``drafts``, calls issued together, in one batch (a call alone stays unbatched).

        A group that grew keeps the batch its first calls already had (Claude Code writes
        one response over several lines), so its earlier and later calls stay together.
        """
        if len(drafts) < 2:
            return
        batch = drafts[0].batch or self.batch_for(len(drafts))
        for draft in drafts:
            draft.batch = batch

    def mark_batches(self, groups: Mapping[str, Sequence[CallDraft]]) -> None:
        """:meth:`mark_batch` for every group (calls keyed by the response that issued them)."""
        for drafts in groups.values():
            self.mark_batch(drafts)

    def call(
        self,
        run_id: str | None,
        tool: str,
        args: object,
        call_id: str | None,
        *,
        tokens: int | None = None,
        line: int | None = None,
        batch: int | None = None,
    ) -> CallDraft | None:
        """Record a call; ``None`` when it is a copy of one already recorded."""
        if call_id and self.dedupe and call_id in self.seen:
            self.duplicates += 1
            return None
        draft = CallDraft(tool, args, call_id, run_id, tokens, line, batch=batch)
        self.runs.add(run_id, draft)
        if call_id:
            self.seen.add(call_id)
            self.pending[call_id] = draft
        return draft

    def answer(self, call_id: object) -> CallDraft | None:
        """The call a result answers, or ``None`` (a copy's result, or an orphan: counted)."""
        key = call_id if isinstance(call_id, str) else str(call_id)
        draft = self.pending.pop(key, None)
        if draft is None and key not in self.seen:
            self.unmatched += 1
        return draft

    def settle(self, draft: CallDraft, result: object, error: object, text: object) -> None:
        """Give ``draft`` its outcome, unless ``text`` says the call never ran."""
        if not_run(text):
            self.not_run += 1
            return
        draft.result = result
        draft.error = error

    def skip(self, kind: str, *, call: bool, call_id: object = None) -> None:
        """Count a record of a kind the reader does not know.

        Args:
            kind: the record's type, as the file names it.
            call: the record looks like a tool call or its outcome (``*_call``,
                ``*_output``): a call the scan did not check, so the file is a doubt.
                Otherwise it is only noted.
            call_id: the skipped call's id: a copy of it is not counted again, and a
                result answering it is no orphan (it belongs to the skipped call).
        """
        if isinstance(call_id, str) and call_id:
            if call_id in self.seen:
                return
            self.seen.add(call_id)
        (self.skipped if call else self.ignored)[kind[:_KIND_CHARS]] += 1

    def finish(self, *, keep_empty: bool = True, none_label: str = NO_RUN_ID_LABEL) -> Read:
        """The runs (see :meth:`RunAssembler.finish`) with the book's counts and notes."""
        runs = self.runs.finish(keep_empty=keep_empty, none_label=none_label)
        return Read(runs, self.unmatched, self.notes(), sum(self.skipped.values()))

    def notes(self) -> tuple[str, ...]:
        """Plain-words notes on what the book dropped or made up."""
        notes: list[str] = []
        if self.duplicates:
            notes.append(f"{_calls(self.duplicates)} copied (ids already seen): counted once")
        if self.not_run:
            notes.append(f"{_calls(self.not_run)} cancelled or never run: no outcome replayed")
        if self.synthesised:
            notes.append(f"{_calls(self.synthesised)} rebuilt from results without their call")
        if self.skipped:
            notes.append("call records of kinds not read (not replayed): " + _kinds(self.skipped))
        if self.ignored:
            notes.append(
                f"{_records(self.ignored)} of unknown kinds ignored (no calls expected in "
                "them): " + _kinds(self.ignored)
            )
        return tuple(notes)


#: Longest record kind kept for a note (a kind is the file's text: bounded).
_KIND_CHARS: Final = 60
#: Kinds a note names, most frequent first; the rest are summed up.
_KINDS_SHOWN: Final = 5


def _records(kinds: Counter[str]) -> str:
    count = sum(kinds.values())
    return f"{count} record" if count == 1 else f"{count} records"


def _kinds(kinds: Counter[str]) -> str:
    shown = [f"{kind} ({count})" for kind, count in kinds.most_common(_KINDS_SHOWN)]
    if len(kinds) > _KINDS_SHOWN:
        shown.append(f"{len(kinds) - _KINDS_SHOWN} more kinds")
    return ", ".join(shown)


__all__ = [
    "NO_RUN_ID_LABEL",
    "CallBook",
    "CallDraft",
    "Read",
    "RunAssembler",
    "as_mapping",
    "content_text",
    "decode_arguments",
    "decode_text",
    "json_lines",
    "not_run",
    "optional_id",
    "parse_json",
    "split_tokens",
    "text_lines",
    "usage_tokens",
]
