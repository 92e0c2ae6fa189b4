"""Shared test setup: makes the helper modules in ``tests/`` importable by name."""

import pathlib
import sys

# Test helper modules (example_values, reference_examples) live beside this file; the
# tests import them by plain name, so the folder goes on the path once, here.
sys.path.insert(0, str(pathlib.Path(__file__).parent))

import os

from hypothesis import settings

# Hypothesis' per-example deadline is a wall-clock limit: on a shared, loaded machine it
# fails healthy tests at random, so the suite runs without it (timing lives in benchmarks/).
settings.register_profile("loopwatch", deadline=None)
settings.load_profile("loopwatch")

# Every guard of the suite is strict: an internal error of loopwatch's raises instead of
# being allowed and logged, so a bug can never pass as an allowed call. Tests of the
# fail-open policy itself build their guards with strict=False.
os.environ.setdefault("LOOPWATCH_STRICT", "1")
