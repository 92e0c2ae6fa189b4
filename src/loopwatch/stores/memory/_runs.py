"""A run's records in the memory store, and what the detectors ask of them.

- :class:`RunRecords`: the records of one run of a session, oldest first, with the first
  byte of each record's call key (``heads``) and, once the run is longer than
  :data:`INDEX_FROM`, an index from each call signature to its records.
- :class:`RunView`: what ``begin_call`` returns: a run's records as a sequence of public
  records, and a :class:`~loopwatch.detectors.RunHistory` answering the detectors'
  questions from the run list and the index instead of a copy of the history.

The session's writes (append, fill, trim, cancel) keep these lists; they live in
:mod:`~loopwatch.stores.memory._history`. Equality is exact throughout: two records have
equal keys exactly when their hash strings are equal, so the answers are those of a scan
over the public records (``tests/core/test_incremental.py`` checks this on generated
histories).
"""

from __future__ import annotations

from collections.abc import Hashable, Iterator, Sequence
from typing import Final, overload

from loopwatch.core.records import ToolCallRecord
from loopwatch.detectors.reference import (
    NO_PING_PONG,
    PingPong,
    RunHistory,
    no_progress_evidence,
)
from loopwatch.stores.memory._compact import (
    CONTENT_KEY,
    KIND_AT,
    PENDING,
    RESULT_KEY,
    CompactRecord,
    call_key,
    result_hash_of,
    same_args_as,
)

#: A run longer than this gets its index by call signature. Shorter runs are scanned: a
#: scan of a few dozen records costs about what the index costs to maintain, and no memory
#: (an index entry costs more than the record itself, so the default history of 30 has none).
INDEX_FROM: Final = 32


class RunRecords:
    """The records of one run of a session, oldest first, and their index once it is long.

    ``records`` is the session's own list while this run is the session's only run with
    records (the common case: one list instead of two per session).
    ``calls`` maps tool name → :func:`call_key` → the records of that call signature:
    the record itself while it is the only one (most signatures of a healthy run occur
    once, and a list would cost 88 bytes more each), else a list of them, oldest first;
    ``None`` until the run grows past :data:`INDEX_FROM` records.
    """

    __slots__ = ("calls", "heads", "records", "run_id")

    def __init__(self, run_id: str | None, records: list[CompactRecord], heads: bytearray) -> None:
        self.run_id = run_id
        self.records = records
        #: The first byte of each record's :func:`call_key` (0 for a ``str`` key), in the
        #: order of ``records``: a scan for one call signature runs in C over these (one
        #: byte a record) and looks only at the records whose byte matches.
        self.heads = heads
        self.calls: dict[str, dict[bytes | str, CompactRecord | list[CompactRecord]]] | None = None

    def added(self, record: CompactRecord) -> None:
        """Index a record just appended to ``records``."""
        if self.calls is not None:
            self._index(record)
        elif len(self.records) > INDEX_FROM:
            self.calls = {}
            for old in self.records:
                self._index(old)

    def _index(self, record: CompactRecord) -> None:
        assert self.calls is not None
        by_key = self.calls.setdefault(record.tool_name, {})
        key = record.key
        same = by_key.setdefault(key, record)
        if same is record:
            return
        if isinstance(same, list):
            same.append(record)
        else:
            by_key[key] = [same, record]

    def removed(self, record: CompactRecord) -> None:
        """Forget a record just removed from ``records``."""
        if self.calls is None:
            return
        by_key = self.calls[record.tool_name]
        key = record.key
        same = by_key[key]
        if isinstance(same, list):
            for index, candidate in enumerate(same):  # the oldest, when trimming
                if candidate is record:
                    del same[index]
                    break
            if len(same) == 1:
                by_key[key] = same[0]
            return
        if same is record:
            del by_key[key]
            if not by_key:
                del self.calls[record.tool_name]

    def same_call(self, tool_name: str, key: bytes | str) -> Sequence[CompactRecord]:
        """The records of one call signature, oldest first: looked up, or found by a scan."""
        calls = self.calls
        if calls is not None:
            by_key = calls.get(tool_name)
            same = None if by_key is None else by_key.get(key)
            if same is None:
                return ()
            return same if isinstance(same, list) else (same,)
        if isinstance(key, str):  # a hash of another form: only records kept whole have one
            return [r for r in self.records if r.packed is None and r.matches(tool_name, key)]
        found = []
        records = self.records
        heads = self.heads
        head = key[0]
        at = heads.find(head)
        while at >= 0:
            record = records[at]
            if record.matches(tool_name, key):
                found.append(record)
            at = heads.find(head, at + 1)
        return found

    def find_pending(
        self, tool_name: str, args_hash: str, tool_call_id: str | None
    ) -> CompactRecord | None:
        """The newest pending record of this call (and of this id when it is truthy)."""
        if self.records:
            # Usually the call's own record, appended by its before_call: the newest one. A
            # pending record keeps its public form, so the strings compare directly.
            newest = self.records[-1].extra
            if (
                isinstance(newest, ToolCallRecord)
                and newest.result_hash is None
                and newest.args_hash == args_hash
                and newest.tool_name == tool_name
                and (not tool_call_id or newest.tool_call_id == tool_call_id)
            ):
                return self.records[-1]
        for record in reversed(self.same_call(tool_name, call_key(tool_name, args_hash))):
            if record.pending and (not tool_call_id or record.call_id == tool_call_id):
                return record
        return None


#: The records of a run that has none (shared, never changed).
NO_RECORDS: Final = RunRecords(None, [], bytearray())


def _no_progress_of(same: Sequence[CompactRecord]) -> tuple[int, str | None, int]:
    """:meth:`RunView.no_progress` from the records of the call, oldest first."""
    streak = 0
    latest: bytes | str | None = None
    for record in reversed(same):
        packed = record.packed
        if packed is None:
            result = record.result
        elif packed[KIND_AT] == PENDING:
            result = None
        else:
            result = packed[RESULT_KEY]
        if result is None:
            continue  # a pending record neither counts in nor breaks the streak
        if latest is None:
            latest, streak = result, 1
        elif result == latest:
            streak += 1
        else:
            break
    return streak, None if latest is None else result_hash_of(latest), len(same)


class RunView(Sequence[ToolCallRecord], RunHistory):
    """A run's records as ``begin_call`` returns them, answering the detectors directly.

    As a sequence it yields public records, built on access. It is live: it reflects the
    run until the next change of the history, so its user reads it first (the memory
    store postpones ``begin_call``'s own append until its next operation for this).
    """

    __slots__ = ("_query", "_run")

    def __init__(self, run: RunRecords, query: tuple[str, str, bytes | str] | None = None) -> None:
        self._run = run
        #: The last call asked about, ``(tool_name, args_hash, call_key)``.
        self._query = query

    def __len__(self) -> int:
        return len(self._run.records)

    @overload
    def __getitem__(self, index: int) -> ToolCallRecord: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[ToolCallRecord]: ...

    def __getitem__(self, index: int | slice) -> ToolCallRecord | Sequence[ToolCallRecord]:
        if isinstance(index, slice):
            return [record.public() for record in self._run.records[index]]
        return self._run.records[index].public()

    def __iter__(self) -> Iterator[ToolCallRecord]:
        return (record.public() for record in self._run.records)

    def __repr__(self) -> str:
        return f"RunView({list(self)!r})"

    # --- RunHistory -----------------------------------------------------------------------

    def fields(self) -> Sequence[CompactRecord]:
        return self._run.records

    def content_keys(self, start: int) -> Sequence[Hashable]:
        # A record is its tool name, its packed digests and timestamp (None when it has no
        # packed form), and its notes or its public form (kept while pending, or when it
        # has no packed form): equal keys, equal records. Built at C speed.
        return list(map(CONTENT_KEY, self._run.records[start:]))

    def unknown_tool_streak(self, tool_name: str) -> tuple[int, str | None]:
        records = self._run.records
        # The newest record, first: another tool's, or one without notes (nearly every
        # call), ends the streak before it starts, as in the loop below.
        if not records or records[-1].extra is None or records[-1].tool_name != tool_name:
            return 0, None
        name: str | None = None
        count = 0
        for record in reversed(records):
            if record.tool_name != tool_name:
                break
            extra = record.extra
            if extra is None:  # no notes: no unknown tool name (the usual record)
                break
            unknown = record.unknown_tool_name
            if unknown is None:
                break
            if name is None:
                name = unknown
            elif unknown != name:
                break
            count += 1
        return count, name

    def repeat_bound(self, tool_name: str, current_hash: str) -> int | None:
        # (see RunHistory.repeat_bound)
        records = self._run.records
        if records:
            newest = records[-1]
            if newest.extra is not None and newest.tool_name == tool_name:
                return None  # (an unknown-tool streak may start at the newest record)
        key = self._key(tool_name, current_hash)
        run = self._run
        if run.calls is not None or type(key) is not bytes:
            return None
        if len(records) >= 2:
            # ping_pong's first test: the record before the newest, packed, is not of the
            # call (another tool, or another digest), so no alternation is continued.
            other = records[-2]
            packed = other.packed
            if packed is None or (other.tool_name == tool_name and packed.startswith(key)):
                return None
        # no_progress counts only records whose entry in heads is the key's first byte.
        return run.heads.count(key[0])

    def _key(self, tool_name: str, args_hash: str) -> bytes | str:
        """The upcoming call's :func:`call_key` (every question about it needs it)."""
        query = self._query
        if query is None or query[1] != args_hash or query[0] != tool_name:
            query = self._query = (tool_name, args_hash, call_key(tool_name, args_hash))
        return query[2]

    def no_progress(self, tool_name: str, args_hash: str) -> tuple[int, str | None, int]:
        run = self._run
        key = self._key(tool_name, args_hash)
        if run.calls is not None or type(key) is not bytes:
            return _no_progress_of(run.same_call(tool_name, key))
        # RunRecords.same_call's scan, run newest first and folded into _no_progress_of's
        # loop: no list of the records, no call per record.
        records = run.records
        heads = run.heads
        head = key[0]
        streak = recent = 0
        latest: bytes | str | None = None
        streak_open = True
        at = heads.rfind(head)
        while at >= 0:
            record = records[at]
            at = heads.rfind(head, 0, at)
            if record.tool_name != tool_name:
                continue
            packed = record.packed
            # (record.matches(tool_name, key) and record.result, inlined)
            if packed is None:
                if record.key != key:
                    continue
                result = record.result
            elif not packed.startswith(key):
                continue
            elif packed[KIND_AT] == PENDING:
                result = None
            else:
                result = packed[RESULT_KEY]
            recent += 1
            if result is None or not streak_open:
                # A pending record neither counts in nor breaks the streak; past the
                # streak's end only the count goes on.
                continue
            if latest is None:
                latest, streak = result, 1
            elif result == latest:
                streak += 1
            else:
                streak_open = False
        return streak, None if latest is None else result_hash_of(latest), recent

    def ping_pong(self, tool_name: str, current_hash: str) -> PingPong:
        records = self._run.records
        newest = len(records) - 1
        if newest < 1:
            return NO_PING_PONG
        other = records[newest - 1]
        # The upcoming call must continue the alternation: have the args hash of the record
        # before the newest ("other", when the tail is 2 long). Checked first: it rules out
        # nearly every call.
        key = self._key(tool_name, current_hash)
        other_packed = other.packed
        if other_packed is not None and isinstance(key, bytes):
            # (other.matches(tool_name, key), inlined: other is packed)
            if other.tool_name != tool_name or not other_packed.startswith(key):
                return NO_PING_PONG
        elif other.args_hash != current_hash:
            return NO_PING_PONG
        last = records[newest]
        # The tail is 2 long only when the record before the newest is "other" (the newest
        # earlier record with other args): else there is no alternation to look for.
        last_packed = last.packed
        if last_packed is not None and other_packed is not None:
            # Both hashes are "<tool>:<hex digest>": equal exactly when both parts are.
            same = other.tool_name == last.tool_name and other_packed[:32] == last_packed[:32]
        else:
            same = other.args_hash == last.args_hash
        if same or other.tool_name == "":
            return NO_PING_PONG
        if last_packed is not None and other_packed is not None:
            # The walk below and no_progress_evidence, in one pass without a closure or a
            # set: each side's outcomes are one and the same, none pending, exactly when the
            # newest of the side has one and every older record of it has that one too.
            # (last.result and other.result, inlined: both are packed)
            last_result = None if last_packed[KIND_AT] == PENDING else last_packed[RESULT_KEY]
            other_result = None if other_packed[KIND_AT] == PENDING else other_packed[RESULT_KEY]
            sides = (
                (last_packed[:32], last.tool_name, last_result),
                (other_packed[:32], other.tool_name, other_result),
            )
            evidence = last_result is not None and other_result is not None
            tail = 2
            while tail <= newest:
                record = records[newest - tail]
                digest, name, result = sides[tail & 1]
                packed = record.packed
                # (same_args_as(last or other)(record), inlined)
                if packed is None:
                    if record.args_hash != (last, other)[tail & 1].args_hash:
                        break
                elif record.tool_name != name or not packed.startswith(digest):
                    break
                if evidence and record.result != result:
                    evidence = False
                tail += 1
            return PingPong(tail + 1, evidence, last.tool_name, last.args_hash)
        tests = (same_args_as(last), same_args_as(other))
        tail = 2
        while tail <= newest and tests[tail % 2](records[newest - tail]):
            tail += 1
        last_side = {records[newest - i].result for i in range(0, tail, 2)}
        other_side = {records[newest - i].result for i in range(1, tail, 2)}
        return PingPong(
            tail + 1, no_progress_evidence(last_side, other_side), last.tool_name, last.args_hash
        )


__all__ = ["INDEX_FROM", "NO_RECORDS", "RunRecords", "RunView"]
