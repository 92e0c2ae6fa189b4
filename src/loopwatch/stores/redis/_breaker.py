"""The Redis store's circuit breaker: after a timeout, skip Redis for a cool-down.

A hanging Redis would otherwise cost one full socket timeout per tool call; with the
breaker it costs one per cool-down, and in between every operation fails at once (the
guard's failure policy then applies). Connection errors are fast already and do not open
it. Client errors become one :class:`~loopwatch.stores.base.StoreError` here, with a
bounded text, since it is logged and put in events.
"""

from __future__ import annotations

import time
from typing import Final

from loopwatch.stores.base import StoreError

#: After a call timed out, how long the store skips Redis (every operation fails at once,
#: and the failure policy applies): a hanging Redis then costs one timeout per cool-down,
#: not one per call. Connection errors are fast already and do not open the breaker.
DEFAULT_BREAKER_COOLDOWN_S: Final = 1.0


def _is_timeout(exc: BaseException) -> bool:
    """A reply that did not come in time (redis-py and valkey name it ``TimeoutError``)."""
    return isinstance(exc, TimeoutError) or type(exc).__name__ == "TimeoutError"


def _brief(exc: BaseException) -> str:
    """A client error's text, bounded (it is logged and put in events)."""
    try:
        text = str(exc)
    except Exception:
        return "?"
    return text if len(text) <= 300 else text[:300] + "…"


class Breaker:
    """Open for ``cooldown_s`` seconds after a timeout; ``0`` never opens.

    Not locked: two threads that time out together both set about the same deadline, and
    a reader that sees the old one makes one more attempt, which is harmless.
    """

    __slots__ = ("_skip_until", "cooldown_s")

    def __init__(self, cooldown_s: float) -> None:
        self.cooldown_s = cooldown_s
        #: ``time.monotonic()`` until which Redis is skipped (0: not skipping).
        self._skip_until = 0.0

    def check(self, operation: str) -> None:
        """Fail at once while the breaker is open.

        Raises:
            StoreError: Redis timed out less than ``cooldown_s`` ago.
        """
        until = self._skip_until
        if until and time.monotonic() < until:
            raise StoreError(
                f"redis {operation} skipped: Redis timed out less than "
                f"{self.cooldown_s:g}s ago (breaker open)"
            )

    def failure(self, operation: str, exc: BaseException) -> StoreError:
        """The error to raise for a client failure; a timeout opens the breaker."""
        if self.cooldown_s and _is_timeout(exc):
            self._skip_until = time.monotonic() + self.cooldown_s
        return StoreError(f"redis {operation} failed: {type(exc).__name__}: {_brief(exc)}")
