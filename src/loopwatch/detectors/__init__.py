"""Verdicts: the reference detectors (SPEC §4), the detector profiles, the post-compaction
guard (SPEC §6) and the stream-level unknown-tool guard (SPEC §5.7).

``reference`` holds the pure reference detectors; ``profiles`` the seam the session engine
asks (which profile records what, decides how, warns when); the adaptive profile's own
detectors live in :mod:`loopwatch.detectors.adaptive` and are loaded only when it is chosen.
"""

from loopwatch.detectors.reference import (
    NOT_STUCK,
    LoopVerdict,
    RunHistory,
    ScannedRun,
    detect_tool_call_loop,
    evaluate,
)

__all__ = [
    "NOT_STUCK",
    "LoopVerdict",
    "RunHistory",
    "ScannedRun",
    "detect_tool_call_loop",
    "evaluate",
]
