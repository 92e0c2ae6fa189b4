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
    """The shared corpus of real runs, which must sit beside this checkout (as in CI)."""
    assert CORPUS.is_dir(), f"the shared corpus is missing: expected {CORPUS}"
    return CORPUS
