"""Tests' control of when the memory store indexes a run (``INDEX_FROM``).

The threshold is read in two modules: ``_runs`` (a run builds its index once it grows
past it) and ``_history`` (the session's appends skip the index below it), so a test that
moves it moves both.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from unittest import mock

from loopwatch.stores.memory import _history, _runs


@contextmanager
def index_from(size: int) -> Iterator[None]:
    """Within the block, runs longer than ``size`` records are indexed."""
    with (
        mock.patch.object(_runs, "INDEX_FROM", size),
        mock.patch.object(_history, "INDEX_FROM", size),
    ):
        yield
