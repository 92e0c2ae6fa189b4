"""The one scenario table every framework adapter is tested against (issue 16).

Each framework module turns a :class:`Scenario` into a real agent with a scripted model,
runs it (sync or async), and hands back a :class:`Run`: what the model read for each tool
call, how often the real tool ran, the guard's events, and the exception that ended the
run. :func:`check` then asserts the same things for every framework.

The scripted model follows :func:`next_calls`: each turn it sends the scenario's calls
for that turn, until it has read ``turns`` tool answers, or (when the scenario says so)
as soon as it reads a block.
"""

from __future__ import annotations

import json
from collections import Counter as Tally
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from integration_support import ARGS, CONFIG, CRITICAL, RESULT, TOOL, WARNING

from loopwatch import LoopDetectedError, LoopEvent, LoopGuard
from loopwatch import messages as texts
from loopwatch.detectors.reference import LoopVerdict
from loopwatch.guard import Decision, blocked_result
from loopwatch.integrations._shared import recovery_message

#: The missing tool of the unknown-tool scenario, and its threshold.
MISSING: Final = "open_file"
UNKNOWN_THRESHOLD: Final = 3
#: The second tool of the ping-pong scenario.
OTHER: Final = "list_dir"
OTHER_ARGS: Final = {"path": "."}
#: The error the failing tool raises.
FAILURE: Final = "disk on fire"
#: What the batch stand-in answers for a blocked batch.
BATCH_BLOCKED: Final = "CRITICAL: 5 identical calls in one turn"
PARALLEL: Final = 5

Call = tuple[str, dict[str, Any]]


@dataclass(frozen=True)
class Scenario:
    """One row of the matrix: what the model does, and what must come of it."""

    name: str
    #: The calls of the model's ``n``-th tool-calling message (0-based).
    calls: Callable[[int], list[Call]]
    #: The model stops after reading this many tool answers.
    turns: int
    #: Expected: how often the real tool ran.
    runs: int
    #: Expected: the index (in the answers the model read) of the first one carrying
    #: ``warning``, or ``None`` for no warning at all.
    warn_at: int | None = None
    warning: str = WARNING
    #: Expected: the index of the first blocked answer and the text it holds.
    block_at: int | None = None
    blocked: str = CRITICAL
    #: Expected: the exception ending the run (``None``: the run ends normally).
    raises: type[BaseException] | None = None
    stop_on_block: bool = True
    tool_fails: bool = False
    on_critical: str = "block_call"
    config: dict[str, Any] = field(default_factory=lambda: dict(CONFIG))
    profile: str | None = None
    #: Use :class:`BatchGuard` (a stand-in for ``LoopGuard.before_batch``).
    batch_guard: bool = False
    #: The tool is itself a ``guard.tool`` function on the same guard and session.
    decorated: bool = False


def same(_: int) -> list[Call]:
    return [(TOOL, dict(ARGS))]


def ping_pong(n: int) -> list[Call]:
    return [(TOOL, dict(ARGS))] if n % 2 == 0 else [(OTHER, dict(OTHER_ARGS))]


def missing(_: int) -> list[Call]:
    return [(MISSING, {"path": "notes.txt"})]


def parallel(_: int) -> list[Call]:
    return [(TOOL, dict(ARGS)) for _ in range(PARALLEL)]


SCENARIOS: Final = [
    # Warning reaches the model at call 11, the tool runs 12 times, call 13 is blocked.
    Scenario("warning_then_block", same, turns=20, runs=12, warn_at=10, block_at=12),
    Scenario(
        "end_run",
        same,
        turns=20,
        runs=12,
        warn_at=10,
        on_critical="end_run",
        raises=LoopDetectedError,
    ),
    # The first critical blocks with a recovery message; the model ignores it; the second
    # critical of the run ends it.
    Scenario(
        "recover",
        same,
        turns=20,
        runs=12,
        warn_at=10,
        block_at=12,
        blocked=recovery_message(CRITICAL),
        on_critical="recover",
        stop_on_block=False,
        raises=LoopDetectedError,
    ),
    # The adaptive profile: the 2nd identical failure is warned, the 3rd blocked.
    Scenario(
        "failing_tool",
        same,
        turns=10,
        runs=2,
        # The adaptive profile blocks the 3rd identical failure with no warning before it
        # (one retry of a failed call is healthy; issue 15).
        warn_at=None,
        block_at=2,
        tool_fails=True,
        profile="adaptive",
        config={"enabled": True},
        warning="",
        blocked="",
    ),
    Scenario(
        "ping_pong",
        ping_pong,
        turns=20,
        runs=11,
        warn_at=9,
        block_at=11,
        warning="",
        blocked="",
    ),
    Scenario(
        "unknown_tool",
        missing,
        turns=20,
        runs=0,
        config={**CONFIG, "unknownToolThreshold": UNKNOWN_THRESHOLD},
    ),
    Scenario(
        "unknown_tool_end_run",
        missing,
        turns=20,
        runs=0,
        on_critical="end_run",
        config={**CONFIG, "unknownToolThreshold": UNKNOWN_THRESHOLD},
        raises=LoopDetectedError,
    ),
    # One turn of 5 identical calls, admitted together: blocked whole, nothing runs.
    Scenario(
        "parallel_identical",
        parallel,
        turns=PARALLEL,
        runs=0,
        block_at=0,
        blocked=BATCH_BLOCKED,
        batch_guard=True,
    ),
    # The same turns of 5 identical calls through the real ``LoopGuard.before_batch``: the
    # 3rd turn (calls 11-15) holds the 12-call streak's critical (call 13), so the whole
    # turn is blocked before anything of it runs: 10 runs (12 when decided call by call),
    # no warning reaches the model (call 11's rides in the blocked turn).
    Scenario(
        "parallel_batch",
        parallel,
        turns=PARALLEL * 4,
        runs=10,
        block_at=10,
        blocked=texts.BATCH_SIBLING_BLOCKED,
    ),
    # Issue 16.1: a guard.tool function as the tool of the guarded agent: counted once,
    # so with the default thresholds the tool runs 20 of 60 times.
    Scenario(
        "decorated_tool",
        same,
        turns=60,
        runs=20,
        warn_at=10,
        block_at=20,
        stop_on_block=False,
        config={"enabled": True},
        decorated=True,
        warning="",
        blocked="",
    ),
]

IDS: Final = [s.name for s in SCENARIOS]


def next_calls(scenario: Scenario, read: Sequence[str], turn: int) -> list[Call] | None:
    """The model's next tool calls, or ``None`` to answer in text and stop."""
    if len(read) >= scenario.turns:
        return None
    if scenario.stop_on_block and read and is_block(read[-1]):
        return None
    return scenario.calls(turn)


def is_block(text: str) -> bool:
    return "CRITICAL" in text or "blocked" in text.lower()


@dataclass
class Run:
    """What came of running one scenario with one framework."""

    read: list[str]
    runs: int
    events: list[LoopEvent]
    guard: LoopGuard
    error: BaseException | None = None


class BatchGuard(LoopGuard):
    """A stand-in for ``LoopGuard.before_batch`` (the lead's, issue 16): a turn holding
    three or more identical calls is blocked whole; a smaller one is decided call by call.
    Records every batch it was asked about."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.batches: list[list[tuple[str, object, object]]] = []

    def before_batch(
        self,
        calls: Sequence[tuple[str, object, object]],
        *,
        session_key: object,
        run_id: object = None,
        agent_id: object = None,
    ) -> list[Decision]:
        self.batches.append(list(calls))
        tally = Tally((name, json.dumps(params, sort_keys=True)) for name, params, _ in calls)
        if max(tally.values()) >= 3:
            verdict = LoopVerdict(
                stuck=True,
                level="critical",
                detector="generic_repeat",
                count=len(calls),
                message=BATCH_BLOCKED,
            )
            return [
                Decision("block", verdict, True, blocked_result(BATCH_BLOCKED), True) for _ in calls
            ]
        return [
            self.before_call(
                n, p, session_key=session_key, run_id=run_id, tool_call_id=i, agent_id=agent_id
            )
            for n, p, i in calls
        ]

    async def abefore_batch(
        self,
        calls: Sequence[tuple[str, object, object]],
        *,
        session_key: object,
        run_id: object = None,
        agent_id: object = None,
    ) -> list[Decision]:
        return self.before_batch(calls, session_key=session_key, run_id=run_id, agent_id=agent_id)


def make_guard(scenario: Scenario) -> tuple[LoopGuard, list[LoopEvent]]:
    events: list[LoopEvent] = []
    kwargs: dict[str, Any] = {"listeners": [events.append]}
    if scenario.profile is not None:
        kwargs["profile"] = scenario.profile
    cls = BatchGuard if scenario.batch_guard else LoopGuard
    return cls(scenario.config, **kwargs), events


class Tool:
    """The real tool: counts its runs; returns RESULT or raises ``error``."""

    def __init__(self, scenario: Scenario, error: Callable[[str], Exception]) -> None:
        self.scenario = scenario
        self.error = error
        self.runs = 0

    def __call__(self, *_: Any, **__: Any) -> str:
        self.runs += 1
        if self.scenario.tool_fails:
            raise self.error(FAILURE)
        return RESULT


def check(scenario: Scenario, run: Run, session: str) -> None:
    """The assertions every framework must pass for ``scenario``."""
    assert run.runs == scenario.runs, run.read
    if scenario.raises is None:
        assert run.error is None, run.error
    else:
        assert isinstance(run.error, scenario.raises), run.error
    warned = [i for i, text in enumerate(run.read) if "WARNING" in text]
    if scenario.warn_at is None:
        assert warned == []
    else:
        assert warned[:1] == [scenario.warn_at], run.read
        if scenario.warning:
            assert scenario.warning in run.read[scenario.warn_at]
    if scenario.block_at is not None:
        assert not any(is_block(t) for t in run.read[: scenario.block_at]), run.read
        assert is_block(run.read[scenario.block_at]), run.read
        if scenario.blocked:
            assert scenario.blocked in run.read[scenario.block_at]
    history = run.guard.history(session_key=session)
    types = [e.type for e in run.events]
    if scenario.name.startswith("unknown_tool"):
        assert [r.unknown_tool_name for r in history] == [MISSING] * UNKNOWN_THRESHOLD
        assert "tool.execution.blocked" in types  # the stop is evented
    if scenario.decorated:
        # Counted once: the history holds one record per run, not two.
        assert len(history) == scenario.runs
        assert len([t for t in run.read if not is_block(t)]) == scenario.runs
    if scenario.batch_guard:
        assert isinstance(run.guard, BatchGuard)
        assert [len(b) for b in run.guard.batches] == [PARALLEL]
        assert all(t == BATCH_BLOCKED or BATCH_BLOCKED in t for t in run.read), run.read
