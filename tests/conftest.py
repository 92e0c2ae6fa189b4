"""Shared test setup: makes the helper modules in ``tests/`` importable by name."""

import pathlib
import sys

# Test helper modules (example_values, reference_examples) live beside this file; the
# tests import them by plain name, so the folder goes on the path once, here.
sys.path.insert(0, str(pathlib.Path(__file__).parent))

import os

import pytest
from hypothesis import settings

from framework_python import ALL_FRAMEWORKS, NEEDS_PYTHON_311

# Hypothesis' per-example deadline is a wall-clock limit: on a shared, loaded machine it
# fails healthy tests at random, so the suite runs without it (timing lives in benchmarks/).
settings.register_profile("loopwatch", deadline=None)
settings.load_profile("loopwatch")

# Every guard of the suite is strict: an internal error of loopwatch's raises instead of
# being allowed and logged, so a bug can never pass as an allowed call. Tests of the
# fail-open policy itself build their guards with strict=False.
os.environ.setdefault("LOOPWATCH_STRICT", "1")

collect_ignore: list[str] = (
    [] if ALL_FRAMEWORKS else [path for paths, _ in NEEDS_PYTHON_311.values() for path in paths]
)


def _not_collected() -> str:
    names = ", ".join(NEEDS_PYTHON_311)
    return (
        f"Python {sys.version_info.major}.{sys.version_info.minor}: the {names} adapter tests "
        "and README snippets were not collected (those frameworks need Python 3.11+)"
    )


def pytest_report_header(config: pytest.Config) -> str | None:
    return None if ALL_FRAMEWORKS else _not_collected()


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    # Also at the end, where ``-q`` (which hides the header) still shows it.
    if not ALL_FRAMEWORKS:
        terminalreporter.write_line(_not_collected(), yellow=True)
