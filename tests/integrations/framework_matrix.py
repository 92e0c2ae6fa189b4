"""The scenario matrix every new adapter's test runs against its real framework.

A scripted offline model (``loopwatch.testing.LoopScript``) plays each scenario through a
real agent under ``LoopGuard({"enabled": True})`` (the default thresholds: warning 10,
critical 20, unknown tool 10). The expected figures are what ``loopwatch.testing.drive``
gives for the same calls (checked in ``test_the_matrix_matches_drive``), so an adapter that
loses a record, records twice, appends a warning before recording or runs a blocked tool
gets a different count:

* ``repeat``: 60 identical calls of ``read_file``: the warning rides on the 11th result,
  the tool runs 20 times, the other 40 calls are blocked.
* ``unknown``: 60 calls of ``open_file``, which no agent has: 10 recorded misses, then 50
  blocked calls (``unknown_tool_repeat``).
* ``failing``: 60 identical calls of ``flaky_read``, which always raises: the same as
  ``repeat`` for a framework that shows the error to the model.
* ``ping_pong``: ``read_file`` and ``list_dir`` alternating, 60 calls: the ping-pong
  warning on the 10th result, blocks at calls 20, 40 and 60 (57 runs).
* ``recover`` (``on_critical="recover"``): ``repeat`` until the 21st call, which is blocked
  with the recovery message; the model ignores it, and the 22nd call (the run's second
  critical) ends the run with a ``LoopDetectedError`` the model never reads.
* ``parallel``: ``repeat`` with three identical calls in every model message. Admitted as
  one batch (``guard.before_batch``), the 7th message (calls 19-21) is blocked whole, since
  its third call is the 20th repeat: 18 runs, 42 blocks, the first block at call 19 with
  the sibling note and the critical itself at call 21. A framework that runs a message's
  calls one after another, each decided alone, gives ``repeat``'s 20 / 40 instead; each
  module says which its framework does.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from loopwatch import LoopDetectedError, LoopEvent, LoopGuard
from loopwatch import messages as texts
from loopwatch.integrations._shared import recovery_message
from loopwatch.testing import LoopScript, ScriptedCall, loop_script

CONFIG: Final = {"enabled": True}
ARGS: Final = {"path": "notes.txt"}
READ_RESULT: Final = "the same text"
LIST_RESULT: Final = "a.txt b.txt"
FAILURE: Final = "disk on fire"
#: The calls in each model message of the ``parallel`` scenario.
PER_TURN: Final = 3
CRITICAL_20: Final = texts.GENERIC_CRITICAL.format(tool="read_file", count=20)


@dataclass(frozen=True)
class Scenario:
    """One row of the matrix: a script and what a correct adapter makes of it."""

    name: str
    script: LoopScript
    executions: int
    blocks: int
    warned_at: int | None = None
    warning: str | None = None
    blocked_message: str | None = None
    #: The adapter's ``on_critical``.
    on_critical: str = "block_call"
    #: True when the run ends with a ``LoopDetectedError`` (in the framework's wrapping).
    ends_run: bool = False
    #: How many tool answers the model reads.
    reads: int = 60
    #: The index of the first answer that is a block, and its text.
    first_block: int | None = None
    first_block_message: str | None = None


SCENARIOS: Final = (
    Scenario(
        "repeat",
        loop_script("read_file", ARGS),
        executions=20,
        blocks=40,
        warned_at=10,
        warning=texts.GENERIC_WARNING.format(tool="read_file", count=10),
        blocked_message=CRITICAL_20,
        first_block=20,
        first_block_message=CRITICAL_20,
    ),
    Scenario(
        "unknown",
        loop_script("open_file", ARGS),
        executions=0,
        blocks=50,
        blocked_message=texts.UNKNOWN_TOOL_CRITICAL.format(name="open_file", count=10),
    ),
    Scenario(
        "failing",
        loop_script("flaky_read", ARGS),
        executions=20,
        blocks=40,
        warned_at=10,
        warning=texts.GENERIC_WARNING.format(tool="flaky_read", count=10),
    ),
    Scenario(
        "ping_pong",
        LoopScript(calls=(("read_file", ARGS), ("list_dir", ARGS))),
        executions=57,
        blocks=3,
        warned_at=9,
        warning=texts.PING_PONG_WARNING.format(count=10),
    ),
    Scenario(
        "recover",
        loop_script("read_file", ARGS),
        executions=20,
        blocks=2,
        warned_at=10,
        warning=texts.GENERIC_WARNING.format(tool="read_file", count=10),
        blocked_message=recovery_message(CRITICAL_20),
        on_critical="recover",
        ends_run=True,
        reads=21,
        first_block=20,
        first_block_message=recovery_message(CRITICAL_20),
    ),
    Scenario(
        "parallel",
        loop_script("read_file", ARGS, per_turn=PER_TURN),
        executions=18,
        blocks=42,
        warned_at=10,
        warning=texts.GENERIC_WARNING.format(tool="read_file", count=10),
        blocked_message=CRITICAL_20,
        first_block=18,
        first_block_message=texts.BATCH_SIBLING_BLOCKED,
    ),
)
#: What a framework that decides each call of a message alone gives for ``parallel``.
SEQUENTIAL_PARALLEL: Final = (20, 40)
BY_NAME: Final = {s.name: s for s in SCENARIOS}
#: The rows of one call per message under ``on_critical="block_call"``.
SINGLE: Final = [s for s in SCENARIOS if s.on_critical == "block_call" and s.script.per_turn == 1]


class Tools:
    """The agent's tools, counting how often each really ran."""

    def __init__(self) -> None:
        self.runs: dict[str, int] = {"read_file": 0, "list_dir": 0, "flaky_read": 0}

    @property
    def total(self) -> int:
        return sum(self.runs.values())

    def read_file(self, path: str) -> str:
        self.runs["read_file"] += 1
        return READ_RESULT

    def list_dir(self, path: str) -> str:
        self.runs["list_dir"] += 1
        return LIST_RESULT

    def flaky_read(self, path: str) -> str:
        self.runs["flaky_read"] += 1
        raise RuntimeError(FAILURE)


def make_guard(
    config: dict[str, object] = CONFIG, **kwargs: object
) -> tuple[LoopGuard, list[LoopEvent]]:
    """A guard (default config) and the list its listener fills."""
    events: list[LoopEvent] = []
    return LoopGuard(config, listeners=[events.append], **kwargs), events  # type: ignore[arg-type]


def blocks(events: list[LoopEvent]) -> int:
    """How many calls were blocked."""
    return sum(1 for e in events if e.type == "tool.execution.blocked")


def reference_calls(scenario: Scenario) -> list[ScriptedCall]:
    """The scenario as ``drive`` plays it."""
    outcome = {
        "read_file": {"result": READ_RESULT},
        "list_dir": {"result": LIST_RESULT},
        "flaky_read": {"error": RuntimeError(FAILURE)},
        "open_file": {"error": texts.UNKNOWN_TOOL_ERROR.format(name="open_file")},
    }
    script = scenario.script
    return [
        ScriptedCall(name, args, **outcome[name])  # type: ignore[arg-type]
        for name, args in (script.calls[i % len(script.calls)] for i in range(script.times))
    ]


def loop_error(error: BaseException | None) -> LoopDetectedError | None:
    """The ``LoopDetectedError`` behind ``error`` (frameworks wrap what a hook raises)."""
    seen = error
    while seen is not None:
        if isinstance(seen, LoopDetectedError):
            return seen
        seen = seen.__cause__ or seen.__context__
    return None


def is_block(text: str) -> bool:
    """True for an answer that says the call was not run."""
    return "CRITICAL" in text or text.startswith(texts.BATCH_SIBLING_BLOCKED)


def check_answers(
    scenario: Scenario,
    read: Sequence[str],
    tools: Tools,
    events: list[LoopEvent],
    error: BaseException | None,
    *,
    stopped: bool = False,
) -> None:
    """What every framework must show for a row, given what its model read as text.

    ``stopped``: the framework ended the run its own way, with no exception (a hook's
    ``continue: false``)."""
    assert tools.total == scenario.executions, read
    assert blocks(events) == scenario.blocks
    assert len(read) == scenario.reads, read
    if scenario.ends_run and not stopped:
        assert loop_error(error) is not None, error
    else:
        assert error is None, error
    per_turn = scenario.script.per_turn
    if scenario.warned_at is not None:
        # The calls of one message may be answered in any order (they ran concurrently):
        # the warning must ride on an answer of the right message.
        warned = [i // per_turn for i, text in enumerate(read) if str(scenario.warning) in text]
        assert warned[:1] == [scenario.warned_at // per_turn], read
    if scenario.first_block is not None:
        first = next(i for i, text in enumerate(read) if is_block(text))
        assert first == scenario.first_block, read
        turn = read[first : first + per_turn]
        assert any(str(scenario.first_block_message) in text for text in turn), read
    if scenario.blocked_message is not None:
        assert any(scenario.blocked_message in text for text in read)


def drive_batches(guard: LoopGuard, scenario: Scenario, session: str = "s") -> list[str]:
    """Play ``scenario`` message by message through ``guard.before_batch``, as an adapter
    that admits each model message whole does; what the model reads, as text."""
    script, read = scenario.script, []
    while calls := script.next_calls(read):
        batch = [(name, args, f"call-{len(read) + i}") for i, (name, args) in enumerate(calls)]
        for (name, args, call_id), decision in zip(
            batch, guard.before_batch(batch, session_key=session), strict=True
        ):
            if decision.tool_result is not None:
                guard.after_call(
                    name,
                    args,
                    result=decision.tool_result,
                    session_key=session,
                    tool_call_id=call_id,
                )
                read.append(decision.verdict.message)
                continue
            guard.after_call(
                name, args, result=READ_RESULT, session_key=session, tool_call_id=call_id
            )
            warned = decision.action == "warn" and decision.emitted
            read.append(f"{READ_RESULT}\n\n{decision.verdict.message}" if warned else READ_RESULT)
    return read
