"""The ``UNDEFINED`` sentinel: JavaScript's ``undefined`` in Python.

The reference distinguishes ``undefined`` (no value: no result, no error) from ``null``
(a real value). ``None`` is taken by ``null``, so loopwatch needs its own singleton that
survives copying and pickling unchanged.
"""

from __future__ import annotations

from typing import Any, Final, final


@final
class _UndefinedType:
    __slots__ = ()
    _instance: _UndefinedType | None = None

    def __new__(cls) -> _UndefinedType:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "loopwatch.UNDEFINED"

    def __bool__(self) -> bool:
        return False

    def __copy__(self) -> _UndefinedType:
        return self

    def __deepcopy__(self, memo: Any) -> _UndefinedType:
        return self

    def __reduce__(self) -> str:
        # Pickle by reference to the module-level name: unpickling yields the singleton.
        return "UNDEFINED"


UNDEFINED: Final = _UndefinedType()
UndefinedType = _UndefinedType

__all__ = ["UNDEFINED", "UndefinedType"]
