"""The session engine: ``LoopGuard`` around every tool call (SPEC §5, §6.2, §9.3).

``loopguard`` holds the public class and its async twins; the other modules hold the pieces
it is made of (typed store operations, the failure policy, the measured hot-path helpers).
"""

from loopwatch.guard.loopguard import Decision, LoopGuard, blocked_result

__all__ = ["Decision", "LoopGuard", "blocked_result"]
