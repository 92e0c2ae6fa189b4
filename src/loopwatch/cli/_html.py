"""``loopwatch scan --html FILE``: a self-contained report (inline CSS and SVG, no scripts,
no network), so it can be attached to an issue or opened from an air-gapped machine.

Each run gets a timeline: one column per call, one lane per call signature that repeats
(the tool and its exact arguments), so a loop shows as a horizontal streak and a ping-pong
as two interleaved ones; calls whose signature occurs once share the bottom lane. Colours
give the decision (allowed, warned, blocked, aborted, not replayed), dashed lines the
compactions, and a shaded band the calls loopwatch would have saved. Hovering a call shows
its number, tool, decision and a short preview of its arguments.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from html import escape
from typing import Final

from loopwatch.core.naming import normalize_tool_name
from loopwatch.replay import CallDecision, RunReplay
from loopwatch.transcripts import Compaction

from ._scan import ArgsPreview, ScanResult, describe_setup
from ._scan_report import header_line, totals
from ._text import run_label, safe_text

#: Lanes drawn per run; rarer repeated signatures join the bottom lane.
MAX_LANES: Final = 14
_LANE_HEIGHT: Final = 16
_LABEL_WIDTH: Final = 190
_MAX_PLOT_WIDTH: Final = 900
_PREVIEW_CHARS: Final = 100

_CSS: Final = """
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,sans-serif;margin:2rem auto;max-width:72rem;
color:#1d2330;padding:0 1rem}
h1{font-size:1.5rem;margin-bottom:.2rem}h2{font-size:1.1rem;margin:0 0 .3rem;word-break:break-all}
.meta{color:#5a6273;margin:.15rem 0}
table{border-collapse:collapse;margin:.6rem 0}
th,td{padding:.2rem .6rem;border-bottom:1px solid #e3e6ec;text-align:left;vertical-align:top}
th{background:#f4f6f9;font-weight:600}td.n{text-align:right;font-variant-numeric:tabular-nums}
.run{border:1px solid #dfe3ea;border-radius:6px;padding:.8rem 1rem;margin:1rem 0}
.timeline{overflow-x:auto;margin:.5rem 0}
.legend span{display:inline-block;margin-right:1rem;font-size:12px}
.legend i{display:inline-block;width:10px;height:10px;margin-right:4px;vertical-align:-1px}
.allow{fill:#9fb3c8;background:#9fb3c8}.warn{fill:#f0a500;background:#f0a500}
.block{fill:#d62828;background:#d62828}.abort{fill:#5c0a0a;background:#5c0a0a}
.not-replayed{fill:#e6e9ee;background:#e6e9ee}
.wasted{fill:#fde3e3;background:#fde3e3}.compaction{stroke:#5b3cc4;stroke-dasharray:3 2}
.lane{font:11px ui-monospace,SFMono-Regular,Menlo,monospace;fill:#3d4452}
.tick{font:10px system-ui,sans-serif;fill:#7a8190}
.badge{display:inline-block;padding:0 .45rem;border-radius:3px;color:#fff;font-size:12px}
.msg{max-width:44rem}details summary{cursor:pointer;margin:1rem 0}
pre.excerpt{white-space:pre-wrap;word-break:break-all;background:#f4f6f9;padding:.4rem .6rem;
border-radius:4px;max-width:60rem}
"""

_LEGEND: Final = (
    '<p class="legend"><span><i class="allow"></i>allowed</span>'
    '<span><i class="warn"></i>warned</span><span><i class="block"></i>blocked</span>'
    '<span><i class="abort"></i>aborted the run</span>'
    '<span><i class="not-replayed"></i>not replayed (after an abort)</span>'
    '<span><i class="wasted"></i>would have been saved</span>'
    '<span><i style="border-left:2px dashed #5b3cc4;width:0"></i>compaction</span></p>'
)


def _e(text: object) -> str:
    return escape(safe_text(str(text), keep_lines=True), quote=True)


def _tool(name: str) -> str:
    """A tool name as the guard's messages spell it (``Bash`` is ``exec`` there), with the
    name the transcript recorded when they differ, so the report and the messages agree."""
    seen = normalize_tool_name(name)
    return seen if seen == name else f"{seen} (recorded as {name})"


def _preview(args: object) -> str:
    if isinstance(args, ArgsPreview):
        return args.text
    try:
        text = json.dumps(args, ensure_ascii=True, sort_keys=True, default=str)
    except (TypeError, ValueError, RecursionError):
        text = "<unprintable>"
    return text if len(text) <= _PREVIEW_CHARS else text[: _PREVIEW_CHARS - 3] + "..."


def _lanes(decisions: Sequence[CallDecision]) -> tuple[list[str | None], dict[str | None, int]]:
    """The lanes (repeated signatures, most frequent first; ``None`` = the shared lane)."""
    counts = Counter(d.signature for d in decisions if d.signature is not None)
    repeated = [sig for sig, n in counts.most_common() if n >= 2][:MAX_LANES]
    order: list[str | None] = [*repeated, None]
    return order, {sig: index for index, sig in enumerate(order)}


def _compaction_points(replay: RunReplay) -> list[int]:
    """How many calls precede each compaction of the run."""
    points: list[int] = []
    calls = 0
    for event in replay.run.events:
        if isinstance(event, Compaction):
            points.append(calls)
        else:
            calls += 1
    return points


def _tooltip(decision: CallDecision, args: object) -> str:
    text = f"#{decision.index} {_tool(decision.tool)}: {decision.action}"
    if decision.detector:
        text += f" ({decision.detector}, count {decision.count})"
    return f"{text}\nargs: {_preview(args)}"


def timeline_svg(replay: RunReplay) -> str:
    """The timeline picture of one run (an inline ``<svg>``)."""
    decisions = replay.decisions
    n = max(len(decisions), 1)
    cell = max(3, min(14, _MAX_PLOT_WIDTH // n))
    order, lane_of = _lanes(decisions)
    width = _LABEL_WIDTH + cell * n + 10
    height = _LANE_HEIGHT * len(order) + 22
    parts = [f'<svg width="{width}" height="{height}" role="img" aria-label="call timeline">']
    stop = replay.first_stop
    if stop is not None:
        start = stop.index - 1 if stop.action == "block" else stop.index
        x = _LABEL_WIDTH + start * cell
        band = (n - start) * cell
        parts.append(
            f'<rect class="wasted" x="{x}" y="0" width="{band}" '
            f'height="{_LANE_HEIGHT * len(order)}"/>'
        )
    tools = {d.signature: d.tool for d in decisions}
    for lane, signature in enumerate(order):
        y = lane * _LANE_HEIGHT
        if signature is None:
            name = "other calls"
        else:
            digest = signature.rsplit(":", 1)[-1][:8]
            name = f"{normalize_tool_name(tools.get(signature, '?'))} {digest}"
        parts.append(
            f'<text class="lane" x="{_LABEL_WIDTH - 6}" y="{y + 12}" '
            f'text-anchor="end">{_e(name[:28])}</text>'
        )
    calls = replay.run.calls
    for decision in decisions:
        lane = lane_of.get(decision.signature, len(order) - 1)
        x = _LABEL_WIDTH + (decision.index - 1) * cell
        args = calls[decision.index - 1].args if decision.index <= len(calls) else None
        parts.append(
            f'<rect class="{decision.action}" x="{x}" y="{lane * _LANE_HEIGHT + 2}" '
            f'width="{max(cell - 1, 2)}" height="{_LANE_HEIGHT - 4}">'
            f"<title>{_e(_tooltip(decision, args))}</title></rect>"
        )
    plot_bottom = _LANE_HEIGHT * len(order)
    for point in _compaction_points(replay):
        x = _LABEL_WIDTH + point * cell
        parts.append(
            f'<line class="compaction" x1="{x}" y1="0" x2="{x}" y2="{plot_bottom}">'
            f"<title>compaction after call {point}</title></line>"
        )
    step = 10 if n <= 200 else 50
    for tick in range(1, n + 1):
        if tick == 1 or tick % step == 0:
            x = _LABEL_WIDTH + (tick - 1) * cell
            parts.append(f'<text class="tick" x="{x}" y="{plot_bottom + 14}">{tick}</text>')
    parts.append("</svg>")
    return "".join(parts)


def _decision_rows(replay: RunReplay) -> str:
    rows = [
        f"<tr><td class='n'>#{d.index}</td><td>{_e(_tool(d.tool))}</td>"
        f"<td><span class='badge {_e(d.action)}'>{_e(d.action)}</span></td>"
        f"<td>{_e(d.detector or '-')}</td><td class='n'>{d.count}</td>"
        f"<td>{'yes' if d.emitted else 'no'}</td><td class='msg'>{_e(d.message or '')}</td></tr>"
        for d in replay.decisions
        if d.action in ("warn", "block", "abort")
    ]
    if not rows:
        return "<p class='meta'>Every call was allowed.</p>"
    return (
        "<table><tr><th>call</th><th>tool</th><th>decision</th><th>detector</th>"
        "<th>count</th><th>emitted</th><th>message</th></tr>" + "".join(rows) + "</table>"
    )


def _status(replay: RunReplay) -> str:
    stop = replay.first_stop
    if stop is not None:
        where = f"{stop.action} at call #{stop.index} ({stop.detector})"
        return f"{where}; {replay.wasted_calls} calls wasted"
    warning = replay.first_warning
    if warning is not None:
        return f"warned from call #{warning.index} ({warning.detector})"
    return "no findings"


def _excerpt_block(excerpt: str | None) -> str:
    if not excerpt:
        return ""
    return (
        "<p class='meta'>The outcome the loop repeated (excerpt):</p>"
        f"<pre class='excerpt'>{_e(excerpt)}</pre>"
    )


def _run_section(
    anchor: str, path: str, fmt: str, replay: RunReplay, excerpt: str | None = None
) -> str:
    tokens = replay.wasted_tokens
    token_text = f", {tokens} tokens" if tokens else ""
    return (
        f"<section class='run' id='{anchor}'><h2>{_e(run_label(path, replay.run.label))}</h2>"
        f"<p class='meta'>{_e(path)} · {_e(fmt)} · {replay.calls} calls · "
        f"{_e(_status(replay))}{_e(token_text)}</p>"
        f"<div class='timeline'>{timeline_svg(replay)}</div>{_decision_rows(replay)}"
        f"{_excerpt_block(excerpt)}</section>"
    )


def _overview(entries: Sequence[tuple[str, str, str, RunReplay, str | None]]) -> str:
    rows = []
    for anchor, path, fmt, replay, _excerpt in entries:
        warning = replay.first_warning
        stop = replay.first_stop
        rows.append(
            f"<tr><td><a href='#{anchor}'>{_e(run_label(path, replay.run.label))}</a></td>"
            f"<td>{_e(fmt)}</td><td class='n'>{replay.calls}</td>"
            f"<td class='n'>{'#' + str(warning.index) if warning else '-'}</td>"
            f"<td>{_e(f'#{stop.index} {stop.action}') if stop else '-'}</td>"
            f"<td>{_e(replay.detector or '-')}</td><td class='n'>{replay.wasted_calls}</td></tr>"
        )
    return (
        "<table><tr><th>run</th><th>format</th><th>calls</th><th>first warn</th>"
        "<th>first block/abort</th>"
        "<th>detector</th><th>wasted</th></tr>" + "".join(rows) + "</table>"
    )


def _problems(title: str, problems: Sequence[object]) -> str:
    if not problems:
        return ""
    items = "".join(
        f"<li>{_e(getattr(exc, 'location', ''))}: {_e(getattr(exc, 'reason', ''))}</li>"
        for exc in problems
    )
    return f"<h2>{_e(title)}</h2><ul>{items}</ul>"


def _notes(result: ScanResult) -> str:
    items = [
        f"<li>{_e(report.path)}: {_e(note)}</li>"
        for report in result.files
        for note in (*report.doubts, *report.notes)
    ]
    return f"<h2>Notes</h2><ul>{''.join(items)}</ul>" if items else ""


def render_html(result: ScanResult, version: str, *, excerpts: bool = True) -> str:
    """The whole report as one HTML document.

    Runs with findings come first, in full, each with an excerpt of the outcome its loop
    repeated (escaped and cut short; ``excerpts=False`` leaves them out); runs without
    findings follow in a collapsed section with their timelines, so the report stays
    readable for a whole corpus.
    """
    pairs = [
        (report, replay, (report.excerpts[i] if i < len(report.excerpts) else None))
        for report in result.files
        for i, replay in enumerate(report.replays)
    ]
    entries = [
        (f"run-{index}", report.path, report.format, replay, excerpt if excerpts else None)
        for index, (report, replay, excerpt) in enumerate(pairs, start=1)
    ]
    flagged = [e for e in entries if e[3].warned or e[3].blocked or e[3].aborted]
    clean = [e for e in entries if not (e[3].warned or e[3].blocked or e[3].aborted)]
    t = totals(result)
    summary = (
        f"{header_line(result, '').lstrip(': ')}: {t['runs_warned']} warned, "
        f"{t['runs_blocked']} blocked, {t['runs_aborted']} aborted; "
        f"{t['wasted_calls']} calls wasted"
    )
    body = [
        "<h1>loopwatch scan</h1>",
        *(f"<p class='meta'>{_e(line)}</p>" for line in describe_setup(result.setup)),
        f"<p><strong>{_e(summary)}</strong></p>",
        _LEGEND,
    ]
    if flagged:
        body += ["<h2>Runs with findings</h2>", _overview(flagged)]
        body += [_run_section(*entry) for entry in flagged]
    else:
        body.append("<p>No run warned, blocked or aborted.</p>")
    if clean:
        body.append(
            f"<details><summary>{len(clean)} runs without findings</summary>"
            + _overview(clean)
            + "".join(_run_section(*entry) for entry in clean)
            + "</details>"
        )
    body.append(_notes(result))
    body.append(_problems("Skipped files", result.skipped))
    body.append(_problems("Ignored files", result.ignored))
    body.append(f"<p class='meta'>Generated by loopwatch {_e(version)}.</p>")
    return (
        "<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'>"
        "<meta name='viewport' content='width=device-width, initial-scale=1'>"
        f"<title>loopwatch scan report</title><style>{_CSS}</style></head><body>"
        + "\n".join(body)
        + "</body></html>\n"
    )


__all__ = ["MAX_LANES", "render_html", "timeline_svg"]
