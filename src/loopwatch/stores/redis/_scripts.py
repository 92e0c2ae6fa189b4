"""The Lua scripts of the Redis store, shipped as package data in ``lua/``.

Each script is the shared prelude (``_common.lua``: the key and record layout, the trim and
the expiry) followed by one operation, sent by its SHA1 with ``EVALSHA`` and again in full
with ``EVAL`` when the server has lost it (a restart, ``SCRIPT FLUSH``, a new cluster node).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import Final

_SCRIPT_NAMES: Final = (
    "begin_call",
    "cancel_call",
    "update_warning_bucket",
    "record_outcome",
    "arm_guard",
    "read_state",
)


@dataclass(frozen=True, slots=True)
class _Script:
    name: str
    source: str
    sha: str


@lru_cache(maxsize=1)
def _scripts() -> dict[str, _Script]:
    """Load the Lua scripts shipped as package data, each prefixed by the shared prelude."""
    folder = resources.files("loopwatch.stores.redis").joinpath("lua")
    prelude = folder.joinpath("_common.lua").read_text(encoding="utf-8")
    scripts: dict[str, _Script] = {}
    for name in _SCRIPT_NAMES:
        source = prelude + folder.joinpath(f"{name}.lua").read_text(encoding="utf-8")
        sha = hashlib.sha1(source.encode("utf-8")).hexdigest()
        scripts[name] = _Script(name, source, sha)
    return scripts


def _is_noscript(exc: BaseException) -> bool:
    """The server does not know the script (redis-py and valkey spell it the same)."""
    return type(exc).__name__ == "NoScriptError" or str(exc).startswith("NOSCRIPT")
