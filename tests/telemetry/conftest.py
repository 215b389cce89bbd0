"""An OpenTelemetry SDK of the test's own: in-memory metric reader and span
exporter, installed as inboxguard's instruments for one test (the global
providers are left alone; tests/telemetry/test_global_providers.py covers them
in a process of its own)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry import context, trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from inboxguard._telemetry import _otel


class Sdk:
    """What one test's SDK recorded."""

    def __init__(self) -> None:
        self.reader = InMemoryMetricReader()
        self.exporter = InMemorySpanExporter()
        self.meters = MeterProvider(metric_readers=[self.reader])
        self.tracers = TracerProvider()
        self.tracers.add_span_processor(SimpleSpanProcessor(self.exporter))

    def install(self) -> None:
        made = _otel.build(
            self.meters.get_meter("inboxguard"),
            self.tracers.get_tracer("inboxguard"),
            trace,
            context,
        )
        _otel.reset(made, forget=False)

    def points(self, name: str) -> list[Any]:
        """Every data point of the metric ``name``."""
        data = self.reader.get_metrics_data()
        found: list[Any] = []
        for resource in data.resource_metrics if data else ():
            for scope in resource.scope_metrics:
                for metric in scope.metrics:
                    if metric.name == name:
                        found.extend(metric.data.data_points)
        return found

    def total(self, name: str, **attributes: Any) -> float:
        """The sum of a counter (or the count of a histogram) over the points
        whose attributes include ``attributes`` (``inboxguard.`` prefix implied)."""
        want = {f"inboxguard.{k}": v for k, v in attributes.items()}
        out = 0.0
        for point in self.points(name):
            if want.items() <= dict(point.attributes).items():
                out += getattr(point, "value", None) if hasattr(point, "value") else point.count
        return out

    def spans(self, name: str | None = None) -> list[Any]:
        return [s for s in self.exporter.get_finished_spans() if name is None or s.name == name]


@pytest.fixture
def sdk() -> Iterator[Sdk]:
    made = Sdk()
    made.install()
    yield made
    _otel.reset()
    made.meters.shutdown()
    made.tracers.shutdown()
