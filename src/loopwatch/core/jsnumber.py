"""ECMAScript's text of a number, for hashes byte-identical to the reference's (SPEC §8.2).

The reference hashes ``JSON.stringify`` output, where a number is written by
``Number::toString``: ``1.0`` is ``1``, ``1e21`` is ``1e+21``, ``0.00001`` is ``1e-5``.
Python's ``repr`` finds the same shortest digits but places the point and the exponent
differently, and refuses ints of over 4,300 digits, so this module writes both the
reference's way: floats from ``repr``'s digits, ints of any size up to
:data:`MAX_INT_DIGITS` (a bound on the work, beyond which a value is unserialisable).
"""

from __future__ import annotations

import decimal
from typing import Final

#: Longest int (in decimal digits, about) that is hashed; Python's ``str()`` refuses ints
#: over 4,300 digits (``sys.get_int_max_str_digits``), these are formatted by
#: :func:`_big_int_text` instead. Longer ints are unserialisable.
MAX_INT_DIGITS: Final = 100_000

_INF: Final = float("inf")
#: Integral floats up to 2**53 print as their integer digits in JavaScript; the exact
#: ``int`` conversion is much cheaper than the general digit algorithm.
_SAFE_INT: Final = float(2**53)


class UnserializableError(TypeError):
    """A value the stable stringify cannot write (raised inside its walk, and here for an
    int too long to write); callers see a plain ``TypeError``."""


# --- ints ----------------------------------------------------------------------------------

#: Exact decimal arithmetic for :func:`_big_int_text` (libmpdec multiplies in n log n).
_BIG_CONTEXT: Final = decimal.Context(
    prec=decimal.MAX_PREC, Emax=decimal.MAX_EMAX, Emin=decimal.MIN_EMIN
)
#: Ints of at most this many bits print with ``int.__repr__`` (3,612 digits < 4,300).
_SMALL_INT_BITS: Final = 12_000
_MAX_INT_BITS: Final = int(MAX_INT_DIGITS * 3.3219280948873626) + 1


def int_text(n: int) -> str:
    """The decimal digits of an int, whatever its size up to :data:`MAX_INT_DIGITS`.

    ``int.__repr__`` for every int it accepts; beyond Python's 4,300-digit limit on
    int-to-text conversion, :func:`_big_int_text`. Without this, one huge int made the
    whole call unserialisable (so invisible to detection).

    Raises:
        UnserializableError: the int has more than about :data:`MAX_INT_DIGITS` digits.
    """
    try:
        return int.__repr__(n)
    except ValueError:
        return _big_int_text(int(n))


def _big_int_text(n: int) -> str:
    """Decimal digits of a huge int without ``str()`` (divide and conquer on its bits)."""
    if n.bit_length() > _MAX_INT_BITS:
        raise UnserializableError(
            f"int of {n.bit_length()} bits is longer than {MAX_INT_DIGITS} digits, "
            "the most loopwatch hashes"
        )
    negative = n < 0
    n = -n if negative else n
    ctx = _BIG_CONTEXT
    powers: dict[int, decimal.Decimal] = {}

    def convert(x: int, bits: int) -> decimal.Decimal:
        if bits <= _SMALL_INT_BITS:
            return decimal.Decimal(int.__repr__(x))
        half = bits >> 1
        power = powers.get(half)
        if power is None:
            power = powers[half] = ctx.power(decimal.Decimal(2), half)
        high = convert(x >> half, bits - half)
        return ctx.add(ctx.multiply(high, power), convert(x & ((1 << half) - 1), half))

    text = str(convert(n, n.bit_length()))
    return "-" + text if negative else text


# --- numbers -------------------------------------------------------------------------------


def format_js_number(x: float) -> str:
    """Format a float as ECMAScript ``Number::toString`` does (SPEC §8.2).

    Python's ``repr`` picks the same shortest round-trip digits as ECMAScript but places
    the decimal point and exponent differently (``1e+16`` vs ``10000000000000000``,
    ``1e-05`` vs ``0.00001``), so only the digits are taken from it.

    Args:
        x: Any float. Non-finite values give the unquoted words ``NaN``, ``Infinity``
            and ``-Infinity`` (error texts use them as they are; :func:`stable_stringify`
            quotes them).

    Returns:
        The JavaScript text of the number: ``1.0`` → ``1``, ``-0.0`` → ``0``,
        ``1e21`` → ``1e+21``, ``1e-7`` → ``1e-7``.
    """
    x = float(x)
    if x != x:
        return "NaN"
    if x == _INF:
        return "Infinity"
    if x == -_INF:
        return "-Infinity"
    if x.is_integer() and -_SAFE_INT <= x <= _SAFE_INT:
        return int.__repr__(int(x))  # also -0.0 → "0"
    return _format_finite(x)


def _format_finite(x: float) -> str:
    """Number::toString for a finite float that is not a small integer (SPEC §8.2)."""
    text = float.__repr__(x)
    if "e" not in text:
        # repr uses fixed notation for 1e-4 <= |x| < 1e16, where ECMAScript does too, with
        # the same shortest digits; only an integral value's ".0" differs.
        return text[:-2] if text.endswith(".0") else text
    text = text.lstrip("-")
    mantissa, _, exp_text = text.partition("e")
    int_part, _, frac_part = mantissa.partition(".")
    raw = int_part + frac_part
    digits = raw.lstrip("0")
    # The value is 0.<digits> × 10**n; each leading zero dropped moves the point left.
    n = len(int_part) + int(exp_text) - (len(raw) - len(digits))
    digits = digits.rstrip("0")
    k = len(digits)
    if k <= n <= 21:
        body = digits + "0" * (n - k)
    elif 0 < n <= 21:
        body = digits[:n] + "." + digits[n:]
    elif -6 < n <= 0:
        body = "0." + "0" * -n + digits
    else:
        mant = digits[0] + ("." + digits[1:] if k > 1 else "")
        body = f"{mant}e{'+' if n - 1 >= 0 else '-'}{abs(n - 1)}"
    return "-" + body if x < 0 else body


def float_text(x: float) -> str:
    """A float as a stable-stringify token: JavaScript digits, non-finite values quoted."""
    if x != x:
        return '"NaN"'
    if x == _INF:
        return '"Infinity"'
    if x == -_INF:
        return '"-Infinity"'
    if x.is_integer() and -_SAFE_INT <= x <= _SAFE_INT:
        return int.__repr__(int(x))
    return _format_finite(x)


__all__ = ["MAX_INT_DIGITS", "UnserializableError", "float_text", "format_js_number", "int_text"]
