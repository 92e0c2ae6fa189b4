"""Pure primitives every layer builds on: JavaScript string semantics, names, records.

Nothing here does I/O or knows about detectors, stores or hosts (SPEC §1, §3.0, §5.1).
"""
