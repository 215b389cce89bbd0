"""Claims counted by outcome, and the claim and handler spans, with the
OpenTelemetry SDK's in-memory reader and exporter (swap in OTLP in production)."""

import datetime as dt

from opentelemetry import metrics, trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from sqlalchemy import create_engine
from sqlalchemy.orm import Session

import inboxguard

# The application installs an SDK once, at start-up; inboxguard's instruments
# live on the global providers and report to whatever is installed.
reader, exporter = InMemoryMetricReader(), InMemorySpanExporter()
metrics.set_meter_provider(MeterProvider(metric_readers=[reader]))
tracing = TracerProvider()
tracing.add_span_processor(SimpleSpanProcessor(exporter))
trace.set_tracer_provider(tracing)

engine = create_engine("sqlite://")
inbox = inboxguard.Inbox(engine, retention=dt.timedelta(days=7))
inbox.create_schema()

for _ in range(2):  # the second delivery is a duplicate
    with Session(engine) as session, session.begin():
        with inbox.guard(session, consumer="billing", command_id="inv-1", payload={"n": 1}):
            pass

claims = {
    dict(point.attributes)["inboxguard.outcome"]: point.value
    for resource in reader.get_metrics_data().resource_metrics
    for scope in resource.scope_metrics
    for metric in scope.metrics
    if metric.name == "inboxguard.claims"
    for point in metric.data.data_points
}
print("claims:", claims)
print("spans:", [span.name for span in exporter.get_finished_spans()])
assert claims == {"fresh": 1, "duplicate": 1}
