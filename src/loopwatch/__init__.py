"""loopwatch: detect and stop tool-call loops in LLM agents."""

from loopwatch._undefined import UNDEFINED

__all__ = ["UNDEFINED"]
