"""Decoding of the value tags used by ``../shared/spec/examples`` (see its README)."""

from __future__ import annotations

import base64
from typing import Any

from loopwatch import UNDEFINED


def decode_value(obj: Any) -> Any:
    """Turn the tagged JSON of the examples into the Python values they stand for."""
    if isinstance(obj, dict):
        if len(obj) == 1:
            ((key, value),) = obj.items()
            if key == "$undefined":
                return UNDEFINED
            if key == "$nan":
                return float("nan")
            if key == "$inf":
                return float("inf") if value > 0 else float("-inf")
            if key == "$negzero":
                return -0.0
            if key == "$bytes":
                return base64.b64decode(value)
        return {k: decode_value(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [decode_value(v) for v in obj]
    return obj
