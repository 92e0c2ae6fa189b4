"""Optional, opt-in normalisers that reduce a tool's params or details before hashing.

The reference hashes everything byte for byte, so loopwatch does too by default. A
normaliser trades that conformance for better loop detection on one tool: with
``update_plan`` on, a model that keeps rewording the same plan is no longer "making
progress" (SPEC §3.7). Names are validated once, where they enter the library, so a typo
fails loudly instead of silently turning the normaliser off.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Final

from loopwatch.core.jsstr import is_blank

#: Every normaliser name loopwatch knows (SPEC §3.7, §9.1).
KNOWN_NORMALIZERS: Final[frozenset[str]] = frozenset({"update_plan"})


def validate_normalizers(names: Iterable[str] | None) -> frozenset[str]:
    """Check a collection of normaliser names and freeze it.

    A plain ``str`` is read as one name: ``normalizers="update_plan"`` is an easy mistake,
    and iterating it character by character would report eleven unknown names instead of
    doing what the caller meant.

    Args:
        names: Normaliser names, a single name, or ``None`` for none.

    Returns:
        The names as a ``frozenset`` (the same object when it already is a valid one, so
        callers on the hot path can validate on every call at no cost).

    Raises:
        ValueError: When a name is not in :data:`KNOWN_NORMALIZERS`; the message lists the
            unknown names and the known ones.
    """
    if names is None:
        return frozenset()
    if isinstance(names, frozenset) and names <= KNOWN_NORMALIZERS:
        return names
    given: frozenset[object] = frozenset((names,)) if isinstance(names, str) else frozenset(names)
    unknown = given - KNOWN_NORMALIZERS
    if unknown:
        listed = ", ".join(sorted(repr(name) for name in unknown))
        known = ", ".join(sorted(repr(name) for name in KNOWN_NORMALIZERS))
        raise ValueError(f"unknown normalizer(s): {listed} (known: {known})")
    return frozenset(name for name in given if isinstance(name, str))


def reduce_update_plan(value: object) -> object:
    """Reduce ``update_plan`` params (or outcome details) to their shape (SPEC §3.7).

    Only the number of steps, their statuses, which steps have text and whether there is an
    explanation survive; the wording does not. So a model that rewrites the same plan over
    and over produces the same hash, and the repeat detectors can see the loop.

    Args:
        value: The params or ``details`` of an ``update_plan`` call, of any type.

    Returns:
        ``value`` itself when it is not a mapping; otherwise a new dict
        ``{planLength, statuses, stepPresence, hasExplanation}``.
    """
    if not isinstance(value, Mapping):
        return value
    plan = value.get("plan")
    entries: list[object] | tuple[object, ...] = plan if isinstance(plan, (list, tuple)) else []
    statuses: list[str | None] = []
    step_presence: list[bool] = []
    for entry in entries:
        if isinstance(entry, Mapping):
            status = entry.get("status")
            step = entry.get("step")
            statuses.append(status if isinstance(status, str) else None)
            step_presence.append(isinstance(step, str) and not is_blank(step))
        else:
            statuses.append(None)
            step_presence.append(False)
    explanation = value.get("explanation")
    return {
        "planLength": len(entries),
        "statuses": statuses,
        "stepPresence": step_presence,
        "hasExplanation": isinstance(explanation, str) and not is_blank(explanation),
    }


__all__ = ["KNOWN_NORMALIZERS", "reduce_update_plan", "validate_normalizers"]
