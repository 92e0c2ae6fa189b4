"""OpenTelemetry listener: span events on the current span, a decisions counter, no raw args."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from loopwatch import LoopGuard
from loopwatch.integrations.otel import DECISIONS_METRIC, OtelListener, event_attributes
from loopwatch.testing import ScriptedCall, drive

SECRET = "s3cr3t-token-value"


@pytest.fixture
def otel() -> tuple[Any, InMemorySpanExporter, InMemoryMetricReader, MeterProvider]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    reader = InMemoryMetricReader()
    meters = MeterProvider(metric_readers=[reader])
    return provider.get_tracer("test"), exporter, reader, meters


def counts(reader: InMemoryMetricReader) -> dict[tuple[str, str], int]:
    data = reader.get_metrics_data()
    found: dict[tuple[str, str], int] = {}
    for resource in data.resource_metrics if data else ():
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                if metric.name == DECISIONS_METRIC:
                    for point in metric.data.data_points:
                        key = (point.attributes["action"], point.attributes["detector"])
                        found[key] = point.value
    return found


def test_span_events_and_counts(otel: Any) -> None:
    tracer, exporter, reader, meters = otel
    guard = LoopGuard({"enabled": True}, listeners=[OtelListener(meter_provider=meters)])
    calls = [ScriptedCall("read_file", {"token": SECRET}, result=f"x {SECRET}")] * 25
    with tracer.start_as_current_span("agent-run"):
        drive(guard, calls)
    (span,) = exporter.get_finished_spans()
    names = [e.name for e in span.events]
    # 1 emitted warning, then 5 blocks (each a tool.loop and a tool.execution.blocked)
    assert names == ["tool.loop"] + ["tool.loop", "tool.execution.blocked"] * 5
    first = dict(span.events[0].attributes or {})
    assert first["loopwatch.action"] == "warn"
    assert first["loopwatch.detector"] == "generic_repeat"
    assert first["loopwatch.count"] == 10
    assert first["loopwatch.toolName"] == "read_file"
    blocked = dict(span.events[2].attributes or {})
    assert blocked["loopwatch.paramsSummary.kind"] == "object"
    assert blocked["loopwatch.toolCallId"] == "call-20"
    for event in span.events:
        assert all(SECRET not in str(v) for v in (event.attributes or {}).values())
    assert counts(reader) == {("warn", "generic_repeat"): 1, ("block", "generic_repeat"): 5}


def test_no_current_span_still_counts(otel: Any) -> None:
    _, exporter, reader, meters = otel
    guard = LoopGuard({"enabled": True}, listeners=[OtelListener(meter_provider=meters)])
    drive(
        guard,
        [
            ScriptedCall("a", {}, result="r") if i % 2 else ScriptedCall("b", {}, result="q")
            for i in range(20)
        ],
    )
    assert exporter.get_finished_spans() == ()
    assert counts(reader) == {("warn", "ping_pong"): 1, ("block", "ping_pong"): 1}


def test_a_failing_meter_never_raises(caplog: pytest.LogCaptureFixture) -> None:
    listener = OtelListener()

    class Broken:
        def add(self, *args: object, **kwargs: object) -> None:
            raise RuntimeError("exporter down")

    listener.decisions = Broken()  # type: ignore[assignment]
    guard = LoopGuard({"enabled": True}, listeners=[listener])
    drive(guard, [ScriptedCall("t", {}, result="r")] * 11)
    assert "OpenTelemetry listener failed" in caplog.text


@given(
    st.dictionaries(
        st.text(min_size=1, max_size=5),
        st.recursive(
            st.none()
            | st.booleans()
            | st.integers()
            | st.text(max_size=5)
            | st.floats(allow_nan=False),
            lambda inner: (
                st.lists(inner, max_size=3)
                | st.dictionaries(st.text(max_size=3), inner, max_size=3)
            ),
            max_leaves=8,
        ),
        max_size=5,
    )
)
def test_event_attributes_are_always_valid_otel_values(payload: dict[str, Any]) -> None:
    class Event:
        type = "tool.loop"

        def to_dict(self) -> dict[str, Any]:
            return {"type": self.type, **payload}

    for key, value in event_attributes(Event()).items():  # type: ignore[arg-type]
        assert key.startswith("loopwatch.")
        assert isinstance(value, (str, bool, int, float)) or (
            isinstance(value, list) and all(isinstance(v, str) for v in value)
        )
