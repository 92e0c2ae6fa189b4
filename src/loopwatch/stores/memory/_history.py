"""The memory store's session history: every run's records in one list, and the runs.

What the memory store keeps per session, shaped so that a guarded call costs the same
whatever the history size, and so that a record costs about 250 bytes instead of 430:

- :class:`~loopwatch.stores.memory._compact.CompactRecord` (in ``_compact``): one record,
  its two digests and its timestamp packed into one ``bytes`` object.
- :class:`~loopwatch.stores.memory._runs.RunRecords` (in ``_runs``): the records of one
  run, and :class:`~loopwatch.stores.memory._runs.RunView`, the detectors' view of them.
- :class:`SessionHistory` (here): every run's records in one list (trimming is global,
  SPEC §1), the runs that have records, and the writes that keep both.

Equality is exact throughout: two records have equal keys exactly when their hash
strings are equal, so the answers are those of a scan over the public records
(``tests/core/test_incremental.py`` checks this on generated histories).
"""

from __future__ import annotations

from collections.abc import Iterable

from loopwatch.core.records import ToolCallRecord
from loopwatch.stores.base import OutcomeWrite
from loopwatch.stores.memory._compact import CompactRecord
from loopwatch.stores.memory._runs import INDEX_FROM, NO_RECORDS, RunRecords, RunView


def _head(record: CompactRecord) -> int:
    """The record's entry in ``heads``: the first byte of its :func:`call_key`, else 0."""
    packed = record.packed
    if packed is not None:
        return packed[0]
    key = record.key
    return key[0] if isinstance(key, bytes) and key else 0


class SessionHistory:
    """A session's records, all runs, oldest first, and each run's records (SPEC §1)."""

    __slots__ = ("heads", "records", "runs")

    def __init__(self) -> None:
        self.records: list[CompactRecord] = []
        #: :attr:`RunRecords.heads` of ``records``.
        self.heads = bytearray()
        #: The runs that have records (a partition of ``records``).
        self.runs: dict[str | None, RunRecords] = {}

    def view(
        self, run_id: str | None, query: tuple[str, str, bytes | str] | None = None
    ) -> RunView:
        """The run's records, live: valid until the history changes. ``query``: the call
        the detectors will ask about, with its :func:`call_key`, when the caller has it."""
        return RunView(self.runs.get(run_id, NO_RECORDS), query)

    def public(self) -> tuple[ToolCallRecord, ...]:
        return tuple(record.public() for record in self.records)

    # --- writes ---------------------------------------------------------------------------

    def append(
        self, record: ToolCallRecord, history_size: int, key: bytes | str | None = None
    ) -> None:
        """Append ``begin_call``'s record (whose :func:`call_key` is ``key``, if known), then
        trim (SPEC §3.6 "record call")."""
        self._add(CompactRecord(record, key, keep=True))
        self.trim(history_size)

    def add_filled(self, record: ToolCallRecord, key: bytes | str) -> None:
        """Append a record whose :func:`call_key` is ``key``, packed as its final form (no
        trim): what :meth:`append` of its pending form and ``fill`` of its outcome leave."""
        self._add(CompactRecord.filled(record, key))

    def append_filled(self, record: ToolCallRecord, key: bytes | str, history_size: int) -> None:
        """:meth:`add_filled`, then :meth:`trim` to ``history_size``: a filled outcome's
        record, as the memory store appends it on every guarded call.

        The usual append takes one step. It stands for :meth:`_add` of a run that is the
        session's only one (it shares the session's lists) and stays short of its index,
        then :meth:`trim` of at most the oldest record (which is then of that run too).
        Anything else takes those steps.
        """
        compact = CompactRecord.filled(record, key)
        records = self.records
        run = self.runs.get(compact.run_id)
        if (
            run is None
            or run.records is not records
            or run.calls is not None
            or len(records) >= INDEX_FROM
        ):
            self._add(compact)
            self.trim(history_size)
            return
        # _add's append to the shared lists (no index: the run stays within INDEX_FROM).
        compact.run_id = run.run_id  # one run id object per run
        packed = compact.packed
        records.append(compact)
        self.heads.append(_head(compact) if packed is None else packed[0])
        excess = len(records) - history_size
        if excess == 1:  # trim's usual step: the oldest record, of this very run, goes
            del records[0]
            del self.heads[0]
            if not records:
                self._forget_runs((run.run_id,))
        elif excess > 0:
            self.trim(history_size)

    def _add(self, record: CompactRecord) -> None:
        runs = self.runs
        run = runs.get(record.run_id)
        if run is None:
            if len(runs) == 1:  # the only run so far stops sharing the session's lists
                only = next(iter(runs.values()))
                only.records = list(self.records)
                only.heads = bytearray(self.heads)
            if runs:
                run = RunRecords(record.run_id, [], bytearray())
            else:
                run = RunRecords(record.run_id, self.records, self.heads)
            runs[record.run_id] = run
        record.run_id = run.run_id  # one run id object per run
        packed = record.packed
        head = _head(record) if packed is None else packed[0]
        self.records.append(record)
        self.heads.append(head)
        if run.records is not self.records:
            run.records.append(record)
            run.heads.append(head)
        if run.calls is not None or len(run.records) > INDEX_FROM:
            run.added(record)

    def trim(self, history_size: int) -> None:
        """Keep the newest ``history_size`` records, across all runs."""
        records = self.records
        excess = len(records) - history_size
        if excess <= 0:
            return
        if excess == 1:
            record = records[0]
            run = self.runs[record.run_id]
            if run.records is records:
                # The usual trim once the history is full: one record of the only run
                # (which shares the session's lists), what the loop below does for it.
                del records[0]
                del self.heads[0]
                if run.calls is not None:
                    run.removed(record)
                if not records:
                    self._forget_runs((run.run_id,))
                return
        dropped = records[:excess]
        del self.records[:excess]
        del self.heads[:excess]
        emptied = []
        for record in dropped:
            run = self.runs[record.run_id]
            if run.records is not self.records:
                assert run.records[0] is record  # a run's oldest record goes first
                del run.records[0]
                del run.heads[0]
            if run.calls is not None:  # (removed has nothing to do otherwise)
                run.removed(record)
            if not run.records:
                emptied.append(run.run_id)
        if emptied:
            self._forget_runs(emptied)

    def cancel(self, pending: ToolCallRecord) -> None:
        """Remove the record that is ``pending`` (the very object), if it is still here."""
        records = self.records
        for index in range(len(records) - 1, -1, -1):
            record = records[index]
            if record.extra is pending:
                del records[index]
                del self.heads[index]
                run = self.runs[record.run_id]
                if run.records is not records:
                    at = next(i for i, r in enumerate(run.records) if r is record)
                    del run.records[at]
                    del run.heads[at]
                run.removed(record)
                if not run.records:
                    self._forget_runs((record.run_id,))
                return

    def _forget_runs(self, run_ids: Iterable[str | None]) -> None:
        """Drop runs left without records (a run id may come more than once)."""
        for run_id in run_ids:
            self.runs.pop(run_id, None)
        if len(self.runs) == 1:  # the run left holds every record: it shares the list again
            only = next(iter(self.runs.values()))
            if only.records is not self.records:
                assert len(only.records) == len(self.records)
                only.records = self.records
                only.heads = self.heads

    def record_outcome(self, write: OutcomeWrite) -> ToolCallRecord:
        """Fill the newest matching pending record, or append a complete one, then trim.

        :func:`loopwatch.core.records.apply_outcome` on this history (SPEC §3.6), for an outcome
        that has a hash; returns the record now in the history.
        """
        result_hash = write.outcome.result_hash
        assert result_hash is not None
        unknown = write.outcome.unknown_tool_name
        run = self.runs.get(write.run_id)
        pending = None
        if run is not None:
            pending = run.find_pending(write.tool_name, write.args_hash, write.tool_call_id)
        if pending is not None:
            record = pending.fill(result_hash, unknown, write.facts)
        else:
            record = ToolCallRecord(
                write.tool_name,
                write.args_hash,
                write.tool_call_id,
                write.run_id,
                result_hash,
                unknown,
                write.timestamp,
                write.facts,
            )
            self._add(CompactRecord(record))
        self.trim(write.history_size)
        return record


__all__ = ["SessionHistory"]
