"""The shortcuts of the adaptive hot path give exactly the answers of the plain scans.

* Screens (:mod:`loopwatch.detectors.adaptive.screens`): a detector whose screen fails
  returns ``None``, and the screened evaluation equals the one where every detector scans.
* The stored facts keep every field of a record built from a call, so the profile may reuse
  the record it built instead of decoding it again.
* The shell heuristics' fast paths (heredoc split, one search per pattern family, the
  in-place scan) answer as the plain loops and searches do.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from loopwatch.core._undefined import UNDEFINED
from loopwatch.core.records import ToolCallRecord
from loopwatch.detectors.adaptive import (
    AdaptiveConfig,
    AdaptiveRecord,
    CycleSettings,
    DetectionContext,
    DetectorThresholds,
    build_adaptive_record,
    encode_facts,
    evaluate_adaptive,
    record_from_history,
    shell_text,
)
from loopwatch.detectors.adaptive.detectors import DETECTOR_TABLE, _evaluate
from loopwatch.detectors.adaptive.screens import SCREENS, WindowSummary, summarise
from loopwatch.detectors.adaptive.verdicts import segment_start
from loopwatch.detectors.profiles import AdaptiveProfile

# --- generated windows ---------------------------------------------------------------------

#: Few names and values, so that calls, outcomes, errors and codes repeat.
TOOLS = st.sampled_from(["exec", "bash", "read", "edit", "think", "process", "book"])
ARGS = st.sampled_from(["a1", "a2", "a3", "a4"])
OUTCOMES = st.sampled_from(["o1", "o2", "o3"])
DIGESTS = st.sampled_from([None, "d1", "d2"])


@st.composite
def record(draw: st.DrawFn) -> AdaptiveRecord:
    tool = draw(TOOLS)
    pending = draw(st.integers(0, 7)) == 0
    return AdaptiveRecord(
        tool_name=tool,
        args_hash=f"{tool}:{draw(ARGS)}",
        result_hash=None if pending else draw(OUTCOMES),
        error_class=draw(DIGESTS),
        failure_hash=draw(DIGESTS),
        failed=draw(st.booleans()),
        mutating=draw(st.booleans()),
        thinking=tool == "think" or draw(st.integers(0, 15)) == 0,
        polling=draw(st.integers(0, 3)) == 0,
        dismissed=draw(st.integers(0, 10)) == 0,
        unchanged=draw(st.integers(0, 4)) == 0,
        error_code=draw(DIGESTS),
        needs_read=draw(st.sampled_from([None, "p1", "p2"])),
        read_key=draw(st.sampled_from([None, "p1", "p2"])),
    )


@st.composite
def streaky_records(draw: st.DrawFn) -> list[AdaptiveRecord]:
    """A window with runs and laps: detectors fire on these, not only on random noise."""
    pool = draw(st.lists(record(), min_size=1, max_size=6))
    picks = draw(st.lists(st.integers(0, len(pool) - 1), max_size=40))
    noise = draw(st.lists(record(), max_size=6))
    records = [pool[pick] for pick in picks]
    for item in noise:
        records.insert(draw(st.integers(0, len(records))), item)
    return records


@st.composite
def variant_runs(draw: st.DrawFn) -> list[AdaptiveRecord]:
    """One tool's calls over a few argument variants sharing one outcome, with some noise:
    what the error-class, error-code, terminal-failure and churn detectors count."""
    tool = draw(st.sampled_from(["exec", "bash", "book", "edit"]))
    variants = draw(st.lists(ARGS, min_size=1, max_size=4, unique=True))
    failed = draw(st.booleans())
    shared = {
        "result_hash": draw(OUTCOMES),
        "error_class": draw(DIGESTS),
        "failure_hash": draw(DIGESTS),
        "error_code": draw(DIGESTS),
    }
    unchanged = not failed and draw(st.booleans())
    records = []
    for _ in range(draw(st.integers(0, 14))):
        deviate = draw(st.integers(0, 9)) == 0
        outcome = dict(shared)
        if deviate:  # one field of the shared outcome differs
            key = draw(st.sampled_from(sorted(outcome)))
            outcome[key] = draw(OUTCOMES if key == "result_hash" else DIGESTS)
        records.append(
            AdaptiveRecord(
                tool_name=tool,
                args_hash=f"{tool}:{draw(st.sampled_from(variants))}",
                failed=failed,
                unchanged=unchanged,
                mutating=deviate and draw(st.booleans()),
                **outcome,
            )
        )
    for item in draw(st.lists(record(), max_size=5)):
        records.insert(draw(st.integers(0, len(records))), item)
    return records


@st.composite
def laps(draw: st.DrawFn) -> list[AdaptiveRecord]:
    """A unit of a few calls repeated lap after lap (cycles), a lap sometimes cut short."""
    unit = [
        dataclasses.replace(
            item,
            result_hash=item.result_hash or "o1",
            polling=False,
            thinking=item.thinking and item.tool_name == "think",
            dismissed=False,
        )
        for item in draw(st.lists(record(), min_size=1, max_size=6))
    ]
    records = draw(st.lists(record(), max_size=4))
    for _ in range(draw(st.integers(1, 5))):
        records.extend(unit)
    del records[len(records) - draw(st.integers(0, len(unit) - 1)) :]
    for item in draw(st.lists(record(), max_size=2)):
        records.insert(draw(st.integers(0, len(records))), item)
    return records


def thresholds(draw: st.DrawFn) -> DetectorThresholds:
    warn = draw(st.integers(2, 6))
    return DetectorThresholds(
        enabled=draw(st.integers(0, 9)) > 0, warn=warn, block=warn + draw(st.integers(0, 3))
    )


@st.composite
def config(draw: st.DrawFn) -> AdaptiveConfig:
    min_period = draw(st.integers(2, 4))
    warn_laps = draw(st.integers(2, 3))
    return AdaptiveConfig(
        window=draw(st.integers(2, 40)),
        repeated_failure=thresholds(draw),
        same_error=thresholds(draw),
        identical_streak=thresholds(draw),
        cycle=CycleSettings(
            enabled=draw(st.integers(0, 9)) > 0,
            min_period=min_period,
            max_period=min_period + draw(st.integers(0, 4)),
            warn_laps=warn_laps,
            block_laps=warn_laps + draw(st.integers(1, 2)),
        ),
        argument_churn=thresholds(draw),
        terminal_failure=thresholds(draw),
        typed_error=thresholds(draw),
        unchanged_write=thresholds(draw),
        poll_no_progress=thresholds(draw),
        shell_tools=draw(st.sampled_from([(), ("book",)])),
    )


WINDOWS = st.one_of(st.lists(record(), max_size=40), streaky_records(), variant_runs(), laps())


def upcoming(draw: st.DrawFn, records: list[AdaptiveRecord]) -> tuple[str, str]:
    """Often a call of the window (the interesting case), sometimes a new one."""
    choice = draw(st.integers(0, 3))
    if records and choice:
        if choice == 1:  # one of the newest: what a cycle would continue
            chosen = records[-draw(st.integers(1, min(6, len(records))))]
        else:
            chosen = draw(st.sampled_from(records))
        return chosen.tool_name, chosen.args_hash
    tool = draw(TOOLS)
    return tool, f"{tool}:{draw(ARGS)}"


# --- screens -------------------------------------------------------------------------------


@settings(max_examples=800, deadline=None)
@given(WINDOWS, config(), st.data())
def test_a_failed_screen_means_its_detector_finds_nothing(
    records: list[AdaptiveRecord], config: AdaptiveConfig, data: st.DataObject
) -> None:
    tool, args_hash = upcoming(data.draw, records)
    start = max(0, len(records) - config.window)
    ctx = DetectionContext(
        records=records,
        tool=tool,
        args_hash=args_hash,
        config=config,
        start=start,
        segment=segment_start(records, start),
    )
    summary = summarise(records, start, tool, args_hash, config)
    full = WindowSummary(records, start, tool, args_hash, config, _newest(records, start))
    # ``summarise`` gives up early only on a quiet window, and agrees with the full summary.
    assert full.quiet or summary is not None
    if summary is not None:
        assert (summary.hits, summary.failures, summary.quiet) == (
            full.hits,
            full.failures,
            full.quiet,
        )
    assert full.hits == _plain_hits(records, start, tool, args_hash)
    assert full.failures == _plain_failures(records, start, tool)
    for name, detector in DETECTOR_TABLE:
        if detector(ctx) is not None:
            assert SCREENS[name](full), name
            assert not full.quiet, name


@settings(max_examples=800, deadline=None)
@given(WINDOWS, config(), st.data())
def test_screened_evaluation_equals_the_plain_scan(
    records: list[AdaptiveRecord], config: AdaptiveConfig, data: st.DataObject
) -> None:
    tool, args_hash = upcoming(data.draw, records)
    plain = _evaluate(records, tool, args_hash, config, screened=False)
    assert evaluate_adaptive(records, tool, args_hash, config) == plain


def test_every_detector_has_a_screen() -> None:
    assert set(SCREENS) == {name for name, _ in DETECTOR_TABLE}


def _newest(records: list[AdaptiveRecord], start: int) -> int:
    return next(
        (i for i in range(len(records) - 1, start - 1, -1) if not records[i].transparent), -1
    )


def _plain_hits(records: list[AdaptiveRecord], start: int, tool: str, args_hash: str) -> list[int]:
    return [
        index
        for index in range(len(records) - 1, start - 1, -1)
        if records[index].tool_name == tool and records[index].args_hash == args_hash
    ]


def _plain_failures(records: list[AdaptiveRecord], start: int, tool: str) -> list[int]:
    failures: list[int] = []
    for index in range(start, len(records)):
        item = records[index]
        if item.transparent or item.tool_name != tool or item.result_hash is None:
            continue
        if item.failed:
            failures.append(index)
        else:
            failures.clear()
    return failures[::-1]


# --- facts keep every field of a built record ----------------------------------------------


def tokens(*words: str, max_size: int) -> st.SearchStrategy[str]:
    """Texts made of the given characters and words (the markers the heuristics look for)."""
    return st.lists(st.sampled_from(words), max_size=max_size).map("".join)


TEXT = tokens(
    *"ab |:/.-0123456789\n'\"<>",
    "ERROR: ",
    "Errno 2",
    "sed -i ",
    "read it first",
    "No changes made",
    "HTTP 404",
    "user rejected",
    max_size=20,
)
PARAMS = st.one_of(
    st.dictionaries(st.sampled_from(["command", "path", "file_path", "action"]), TEXT, max_size=3),
    TEXT,
)
RESULTS = st.one_of(
    TEXT,
    st.fixed_dictionaries(
        {
            "content": st.lists(
                st.fixed_dictionaries({"type": st.just("text"), "text": TEXT}), max_size=2
            )
        },
        optional={
            "details": st.fixed_dictionaries(
                {},
                optional={
                    "status": st.sampled_from(["ok", "error", "unchanged"]),
                    "exitCode": st.integers(0, 2),
                    "changed": st.booleans(),
                },
            ),
            "isError": st.booleans(),
        },
    ),
)
MISSING: Any = object()


@settings(max_examples=500, deadline=None)
@given(
    st.sampled_from(["exec", "edit", "read", "think", "process", "sleep", "write"]),
    PARAMS,
    RESULTS,
    st.one_of(st.just(MISSING), TEXT),
)
def test_a_built_record_reads_back_from_its_facts(
    tool: str, params: object, result: object, error: object
) -> None:
    built = build_adaptive_record(
        tool, params, result=result, error=UNDEFINED if error is MISSING else error
    )
    facts = encode_facts(built)
    assert record_from_history(tool, built.args_hash, built.result_hash, facts) == built


@settings(max_examples=300, deadline=None)
@given(st.lists(record(), min_size=1, max_size=12), st.integers(0, 11), st.booleans())
def test_the_profile_decodes_as_record_from_history(
    built: list[AdaptiveRecord], newest: int, same: bool
) -> None:
    """Whatever record the profile built last, each history record decodes as it always did."""
    profile = AdaptiveProfile()
    last = built[newest % len(built)]
    facts = encode_facts(last)
    # The newest outcome's record, or one that differs from the history record in one field.
    profile._built = (facts, last if same else AdaptiveRecord(last.tool_name, "other"))
    window = [
        ToolCallRecord(
            item.tool_name,
            item.args_hash,
            f"id{n}",
            None,
            item.result_hash,
            None,
            n,
            encode_facts(item),
        )
        for n, item in enumerate(built)
    ]
    decoded = profile._decoded(window, None)
    assert decoded == [
        record_from_history(r.tool_name, r.args_hash, r.result_hash, r.facts, profile.config)
        for r in window
    ]


# --- shell heuristics ------------------------------------------------------------------------

SHELL = tokens(
    *"ab <>'\"\n;|&()`$-=/ie \t",
    "sed",
    "perl",
    "tee",
    "-i",
    "<<",
    "<<-",
    "EOF",
    "'EOF'",
    " EOF ",
    "git ",
    "rm ",
    "> f",
    "open(",
    "'w'",
    "bash -c ",
    "\\n",
    "cat",
    "python -c ",
    "|&",
    "2>&1",
    "tar -x",
    "mkdir x",
    max_size=40,
)


def _plain_split_heredocs(command: str) -> tuple[str, str]:
    """The heredoc split as a plain loop over every line."""
    shell: list[str] = []
    bodies: list[str] = []
    lines = command.split("\n")
    index = 0
    while index < len(lines):
        line = lines[index]
        shell.append(line)
        delimiters = [
            m.group(2) for m in shell_text._HEREDOC_START.finditer(shell_text._strip_quotes(line))
        ]
        if not delimiters:
            delimiters = [m.group(2) for m in shell_text._HEREDOC_START.finditer(line)]
        index += 1
        for delimiter in delimiters:
            while index < len(lines) and lines[index].strip() != delimiter:
                bodies.append(lines[index])
                index += 1
            index += 1
    return "\n".join(shell), "\n".join(bodies)


def _plain_edits_in_place(shell: str) -> bool:
    """The in-place scan without its shortcut."""
    for segment in shell_text._SIMPLE_COMMANDS.finditer(shell):
        after: set[str] = set()
        file_after = False
        for word in reversed(segment.group().split()):
            if (word in shell_text._IN_PLACE and word in after) or (word == "tee" and file_after):
                return True
            after.update(e for e, option in shell_text._IN_PLACE.items() if option.fullmatch(word))
            file_after = file_after or not (word.startswith("-") or word == "/dev/null")
    return False


@settings(max_examples=1000, deadline=None)
@given(SHELL)
def test_shell_shortcuts_answer_as_the_plain_scans(command: str) -> None:
    assert shell_text._split_heredocs(command) == _plain_split_heredocs(command)
    assert shell_text._edits_in_place(command) == _plain_edits_in_place(command)
    assert (shell_text._ANY_CODE_WRITE.search(command) is not None) == any(
        p.search(command) for p in shell_text._CODE_WRITES
    )
    assert shell_text._shell_writes(command) == any(
        p.search(command) for p in shell_text._SHELL_WRITES
    )


@pytest.mark.parametrize(
    ("command", "mutates"),
    [
        ("cat <<EOF > out.txt\nhello\nEOF", True),
        ("cat <<'EOF'\nrm -rf /\nEOF\necho done", False),  # a heredoc body is data
        ("python - <<EOF\nopen('f', 'w').write('x')\nEOF", True),
        ("cat <<A <<B\nx\nA\ny\nB\nls", False),
        ("cat <<EOF\nunterminated > body", False),
        ("sed -i 's/a/b/' f", True),
        ("echo used | grep sed", False),
        ("ls | tee out.log", True),
        ("git status", False),
    ],
)
def test_shell_writes_examples(command: str, mutates: bool) -> None:
    assert shell_text.shell_command_mutates(command) is mutates


def test_a_detector_without_a_screen_runs_on_every_call(monkeypatch: pytest.MonkeyPatch) -> None:
    from loopwatch.detectors.adaptive import detectors, screens

    unit = [AdaptiveRecord("read", f"read:{name}", f"o{name}") for name in "ab"]
    records = unit * 3  # three identical laps: the next "a" is blocked
    assert evaluate_adaptive(records, "read", "read:a").detector == "cycle"  # type: ignore[union-attr]
    never = dict(screens.SCREENS, cycle=lambda summary: False)
    monkeypatch.setattr(detectors, "SCREENS", never)
    assert evaluate_adaptive(records, "read", "read:a") is None  # the screen is obeyed
    del never["cycle"]
    monkeypatch.setattr(detectors, "_ALL_SCREENED", False)
    verdict = evaluate_adaptive(records, "read", "read:a")
    assert verdict is not None and verdict.detector == "cycle"
