"""OpenTelemetry: a listener that puts loopwatch's events on the current span and counts them.

::

    from loopwatch import LoopGuard
    from loopwatch.integrations.otel import OtelListener

    guard = LoopGuard({"enabled": True}, listeners=[OtelListener()])

Install with ``pip install "loopwatch[otel]"`` (``opentelemetry-api`` only; the host brings
the SDK and its exporters, as for any instrumentation library). For every event the guard
emits (SPEC §10.2):

* a span event named after the event's ``type`` (``tool.loop``,
  ``tool.execution.blocked``, ``guard.armed``, ...) is added to the current span, if one is
  recording (an agent framework's tool span, or your own), with the event's payload as
  attributes under ``loopwatch.`` (nested values flattened with dots: ``paramsSummary.kind``
  becomes ``loopwatch.paramsSummary.kind``);
* each ``tool.loop`` event (an emitted warning or a block) adds 1 to the counter
  ``loopwatch.decisions``, with the attributes ``action`` (``warn`` / ``block``) and
  ``detector``.

The payload is the event's ``to_dict()``: tool names, counts, messages, the session key and a
``paramsSummary`` that says only what *kind* of value the arguments were. Raw tool
arguments and results never reach an event, so they never reach a span either.

A failing exporter or SDK cannot break the agent: the listener catches and logs its own
errors (``loopwatch.otel``), and the guard isolates listeners too.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any, Final

from opentelemetry import metrics, trace
from opentelemetry.util.types import AttributeValue

from loopwatch import LoopEvent

logger = logging.getLogger("loopwatch.otel")

#: The instrumentation scope of the tracer and meter.
SCOPE: Final = "loopwatch"
#: The decisions counter.
DECISIONS_METRIC: Final = "loopwatch.decisions"
#: Prefix of the span event attributes.
ATTRIBUTE_PREFIX: Final = "loopwatch."
#: The event type whose occurrences are counted.
DECISION_EVENT: Final = "tool.loop"
LOG_LISTENER_FAILED: Final = "loopwatch: the OpenTelemetry listener failed on a %s event"


def _flatten(prefix: str, value: object, out: dict[str, AttributeValue]) -> None:
    """Flatten ``value`` into OpenTelemetry attribute values (which are scalars or
    homogeneous sequences of scalars); ``None`` is left out."""
    if value is None:
        return
    if isinstance(value, (str, bool, int, float)):
        out[prefix] = value
    elif isinstance(value, Mapping):
        for key, item in value.items():
            _flatten(f"{prefix}.{key}", item, out)
    elif isinstance(value, Sequence) and all(isinstance(v, str) for v in value):
        out[prefix] = [str(v) for v in value]
    else:
        out[prefix] = str(value)


def event_attributes(event: LoopEvent) -> dict[str, AttributeValue]:
    """The span event attributes of a loopwatch event: its ``to_dict()`` payload, flat."""
    out: dict[str, AttributeValue] = {}
    for key, value in event.to_dict().items():
        if key != "type":
            _flatten(f"{ATTRIBUTE_PREFIX}{key}", value, out)
    return out


class OtelListener:
    """A ``LoopGuard`` listener recording events on spans and counting decisions.

    Args:
        meter_provider: where the counter lives (default: the global meter provider).
        span_events: add span events to the current span.
    """

    def __init__(
        self, *, meter_provider: metrics.MeterProvider | None = None, span_events: bool = True
    ) -> None:
        meter = metrics.get_meter(SCOPE, meter_provider=meter_provider)
        self.decisions = meter.create_counter(
            DECISIONS_METRIC,
            unit="{decision}",
            description="Warnings and blocks decided by loopwatch, by action and detector",
        )
        self.span_events = span_events

    def __call__(self, event: LoopEvent) -> None:
        """Record one event (never raises)."""
        try:
            payload: dict[str, Any] = event.to_dict()
            if self.span_events:
                span = trace.get_current_span()
                if span.is_recording():
                    span.add_event(event.type, attributes=event_attributes(event))
            if event.type == DECISION_EVENT:
                self.decisions.add(
                    1,
                    attributes={
                        "action": str(payload.get("action")),
                        "detector": str(payload.get("detector")),
                    },
                )
        except Exception:
            logger.warning(LOG_LISTENER_FAILED, getattr(event, "type", "?"), exc_info=True)


__all__ = ["DECISIONS_METRIC", "OtelListener", "event_attributes"]
