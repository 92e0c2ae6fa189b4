"""tau2-bench simulations (sierra-research/tau2-bench ``src/tau2/data_model``).

tau2-bench saves a run as a ``Results`` document ``{"timestamp", "info", "tasks",
"simulations": [...]}`` (the ``json`` format), or as ``results.json`` without the
simulations plus one ``simulations/<id>.json`` file per simulation (the ``dir`` format);
leaderboard submissions hold a JSON list of simulations. Each simulation is a
``SimulationRun`` ``{"id", "task_id", "trial", "termination_reason", "messages", "ticks",
...}`` and is one run here, labelled ``task-<task_id>-trial<trial>``.

- ``messages`` (half-duplex runs): an ``assistant`` message carries ``tool_calls``, each
  ``{"id", "name", "arguments": {...}, "requestor"}`` with ``arguments`` already an object;
  the result is a ``tool`` message ``{"id", "content", "requestor", "error"}`` with the
  call's id (or several, grouped in a ``tool_messages`` list). ``error: true`` is a failure
  (the environment then shows ``Error: ...``). The calls of one message form a batch.
- ``ticks`` (full-duplex voice runs, when ``messages`` was not stored): each tick lists the
  ``agent_tool_calls`` made and the ``agent_tool_results`` returned during it.

Calls the simulated user makes on its own tools (``requestor: "user"``, e.g. toggling
airplane mode in the telecom domain) are not the agent's and are left out, with a note.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from loopwatch.core._undefined import UNDEFINED
from loopwatch.transcripts._common import CallBook, Read, RunAssembler, optional_id
from loopwatch.transcripts.model import TranscriptError


def _by_user(item: Mapping[str, object]) -> bool:
    return item.get("requestor") == "user"


class _Reader:
    def __init__(self, path: str) -> None:
        self.path = path
        self.book = CallBook(RunAssembler(), dedupe=False)
        self.user_calls = 0

    def simulation(self, index: int, simulation: object) -> None:
        if not isinstance(simulation, Mapping):
            raise TranscriptError(
                self.path, None, f"simulation {index + 1}: expected a JSON object"
            )
        label = f"task-{simulation.get('task_id', index)}"
        trial = simulation.get("trial")
        if isinstance(trial, int) and not isinstance(trial, bool):
            label += f"-trial{trial}"
        if self.book.runs.has(label):
            label += f"#{index + 1}"
        self.book.runs.open(label)
        messages = simulation.get("messages")
        ticks = simulation.get("ticks")
        if isinstance(messages, list):
            for number, message in enumerate(messages, start=1):
                self._message(label, number, message)
        elif isinstance(ticks, list):
            for number, tick in enumerate(ticks, start=1):
                if isinstance(tick, Mapping):
                    self._calls(label, number, tick.get("agent_tool_calls"))
                    self._results(tick.get("agent_tool_results"))

    def _message(self, label: str, number: int, message: object) -> None:
        if not isinstance(message, Mapping):
            raise TranscriptError(self.path, None, f"{label} message {number}: expected an object")
        role = message.get("role")
        if role == "assistant":
            self._calls(label, number, message.get("tool_calls"))
        elif role == "user":
            calls = message.get("tool_calls")
            if isinstance(calls, list):
                self.user_calls += len(calls)
        elif role == "tool":
            grouped = message.get("tool_messages")
            self._results(grouped if isinstance(grouped, list) else [message])

    def _calls(self, label: str, number: int, raw: object) -> None:
        if raw is None:
            return
        if not isinstance(raw, list):
            raise TranscriptError(
                self.path, None, f'{label} message {number}: "tool_calls" must be a list'
            )
        calls: list[tuple[str, object, str | None]] = []
        for call in raw:
            if not isinstance(call, Mapping) or not isinstance(call.get("name"), str):
                raise TranscriptError(
                    self.path, None, f'{label} message {number}: a tool call needs a string "name"'
                )
            if _by_user(call):
                self.user_calls += 1
                continue
            arguments = call.get("arguments")
            call_id = optional_id(call.get("id"), self.path, None, "id")
            calls.append((str(call["name"]), {} if arguments is None else arguments, call_id))
        batch = self.book.batch_for(len(calls))
        for name, arguments, call_id in calls:
            self.book.call(label, name, arguments, call_id or None, line=number, batch=batch)

    def _results(self, raw: object) -> None:
        for result in raw if isinstance(raw, list) else []:
            if not isinstance(result, Mapping) or _by_user(result):
                continue
            target = self.book.answer(result.get("id"))
            if target is None:
                continue
            content = result.get("content")
            if result.get("error") is True:
                self.book.settle(target, UNDEFINED, content, content)
            else:
                self.book.settle(target, content, UNDEFINED, content)

    def finish(self) -> Read:
        read = self.book.finish(keep_empty=True)
        if not self.user_calls:
            return read
        word = "call" if self.user_calls == 1 else "calls"
        note = f"{self.user_calls} tool {word} of the simulated user left out (not the agent's)"
        return read.with_notes(note)


def read_tau2(simulations: Sequence[object], path: str) -> Read:
    """Read tau2-bench simulations, one run each.

    Raises:
        TranscriptError: a simulation, message or tool call of the wrong shape.
    """
    reader = _Reader(path)
    for index, simulation in enumerate(simulations):
        reader.simulation(index, simulation)
    return reader.finish()


def is_tau2_simulation(value: object) -> bool:
    """Whether a JSON value is one tau2-bench ``SimulationRun``."""
    return (
        isinstance(value, Mapping)
        and "task_id" in value
        and "termination_reason" in value
        and (isinstance(value.get("messages"), list) or isinstance(value.get("ticks"), list))
    )


def tau2_simulations(document: Mapping[str, object]) -> list[object] | None:
    """The simulations of a tau2-bench document, or ``None`` when it is none.

    A ``Results`` document (``simulations`` beside ``tasks`` / ``info``), one simulation
    file, or the dataset example ``{"task", "simulation_run"}``.
    """
    simulations = document.get("simulations")
    if isinstance(simulations, list) and ("tasks" in document or "info" in document):
        return simulations
    if is_tau2_simulation(document):
        return [document]
    example = document.get("simulation_run")
    if is_tau2_simulation(example):
        return [example]
    return None


__all__ = ["is_tau2_simulation", "read_tau2", "tau2_simulations"]
