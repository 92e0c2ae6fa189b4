"""The lenient value rules of SPEC §2, shared by resolution, the merge and the guard.

JavaScript truthiness and "a positive integral number, else the default": the reference reads
every setting through these two, so loopwatch does too, wherever a raw value is read.
"""

from __future__ import annotations

import numbers
from typing import Any

from loopwatch.config._schema import DEFAULT_WINDOW_SIZE
from loopwatch.core._undefined import UNDEFINED


def js_truthy(value: object) -> bool:
    """JavaScript truthiness of a config value (SPEC §2.4).

    Python's ``bool()`` would make ``[]`` and ``{}`` false; the reference treats every object as
    true, so only ``False``, ``None`` (``null``), ``UNDEFINED``, numbers equal to 0 (``-0.0``
    too), NaN and ``""`` are falsy here.

    Args:
        value: any value.

    Returns:
        Whether JavaScript would treat ``value`` as true.
    """
    if value is None or value is False or value is UNDEFINED:
        return False
    if isinstance(value, str):
        return value != ""
    if isinstance(value, numbers.Number) and not isinstance(value, bool):
        number: Any = value
        try:
            return not (number == 0 or number != number)
        except ArithmeticError:  # Decimal("sNaN") refuses to compare: it is a NaN.
            return False
    return True


def positive_int(value: object, default: int) -> int:
    """The lenient number rule of SPEC §2: a positive integral value, else ``default``."""
    if type(value) is int:
        return value if value > 0 else default
    if value is None or isinstance(value, bool):
        return default
    if isinstance(value, float):
        # ``is_integer`` is false for NaN and the infinities.
        return int(value) if value > 0 and value.is_integer() else default
    if isinstance(value, numbers.Integral):
        number = int(value)
        return number if number > 0 else default
    return default


def resolve_window_size(value: object) -> int:
    """Resolve ``postCompactionGuard.windowSize`` leniently (SPEC §6.1).

    Args:
        value: the raw setting (any type).

    Returns:
        ``value`` as an ``int`` when it is a positive integral number (``2.0`` → 2, so logs
        print ``2``), else the default 3.
    """
    return positive_int(value, DEFAULT_WINDOW_SIZE)
