"""Shared paths for the CLI and transcript tests."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DATA = REPO / "tests" / "data" / "transcripts"
EXAMPLES = REPO / "examples" / "runs"
CORPUS = REPO.parent / "shared" / "corpus" / "traj"


@pytest.fixture
def data() -> Path:
    """The hand-made transcript fixtures."""
    return DATA


@pytest.fixture
def examples() -> Path:
    """The real runs shipped in ``examples/runs``."""
    return EXAMPLES


@pytest.fixture
def corpus() -> Path:
    """The shared corpus of real runs (skips when this checkout has none beside it)."""
    if not CORPUS.is_dir():
        pytest.skip("shared/corpus/traj is not beside this checkout")
    return CORPUS
