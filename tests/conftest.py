"""Shared test setup: makes the helper modules in ``tests/`` importable by name."""

import pathlib
import sys

# Test helper modules (example_values, reference_examples) live beside this file; the
# tests import them by plain name, so the folder goes on the path once, here.
sys.path.insert(0, str(pathlib.Path(__file__).parent))
