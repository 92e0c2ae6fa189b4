"""The vendored fixtures are still what ``../shared`` holds (the ``corpus`` tier only).

``tests/data/spec_examples`` is a copy of ``../shared/spec/examples`` so that the default
suite needs nothing beside the checkout; this check, selected with ``-m corpus`` (``.ci/run``
does), fails when the two drift apart.
"""

from __future__ import annotations

import pathlib

import pytest

HERE = pathlib.Path(__file__).resolve().parent
VENDORED = HERE / "data" / "spec_examples"
SHARED = HERE.parents[1] / "shared" / "spec" / "examples"


@pytest.mark.corpus
def test_the_vendored_reference_examples_match_the_shared_ones() -> None:
    assert SHARED.is_dir(), f"the shared spec examples are missing: expected {SHARED}"
    shared = {p.name: p.read_bytes() for p in SHARED.iterdir() if p.is_file()}
    vendored = {p.name: p.read_bytes() for p in VENDORED.iterdir() if p.name != "SOURCE.md"}
    assert sorted(vendored) == sorted(shared)
    assert [name for name in shared if shared[name] != vendored[name]] == []
