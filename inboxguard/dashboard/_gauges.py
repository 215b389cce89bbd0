"""The database-derived figures as OpenTelemetry observable gauges.

One reading of the tables (``inboxguard.stats``) per collection serves every
gauge: the first callback of a collection reads, the others reuse that
reading for a second.
"""

from __future__ import annotations

import datetime as dt
import logging
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

from sqlalchemy.engine import Engine

from inboxguard.errors import ConfigurationError
from inboxguard.operations import Stats, stats

__all__ = ["observe_database"]

logger = logging.getLogger("inboxguard.telemetry")

_EXTRA = "observe_database() needs the 'otel' extra: pip install 'inboxguard[otel]'"
_FRESH_FOR = 1.0  # seconds a reading serves the other gauges of a collection


class _Reader:
    def __init__(self, engine: Engine, prefix: str) -> None:
        self.engine, self.prefix = engine, prefix
        self.lock = threading.Lock()
        self.taken = -_FRESH_FOR
        self.reading: Stats | None = None

    def __call__(self) -> Stats | None:
        with self.lock:
            if time.monotonic() - self.taken >= _FRESH_FOR:
                self.taken = time.monotonic()
                try:
                    self.reading = stats(self.engine, table_prefix=self.prefix)
                except Exception as error:
                    logger.warning("observe_database: reading failed: %s", type(error).__name__)
                    self.reading = None
            return self.reading


def observe_database(
    engine: Engine,
    *,
    table_prefix: str = "inboxguard_",
    horizon: dt.timedelta | None = None,
    meter_provider: Any = None,
) -> None:
    """Report the tables' figures as observable gauges, read at each collection.

    ``inboxguard.evidence.rows``, ``inboxguard.evidence.oldest_age`` (s) and
    ``inboxguard.quarantine.open`` per ``inboxguard.consumer``;
    ``inboxguard.evidence.horizon`` (s, when ``horizon`` is given);
    ``inboxguard.outbox.backlog``, ``inboxguard.outbox.oldest_unsent_age``
    (s), ``inboxguard.outbox.dead_rows``; ``inboxguard.effects.count`` per
    ``inboxguard.state`` and ``inboxguard.effects.oldest_unknown_age`` (s).
    Call it once, in one process per database (a monitoring sidecar, say);
    ``meter_provider`` defaults to the global one. A failed reading reports
    nothing for that collection and is logged.

    Raises:
        ConfigurationError: ``opentelemetry-api`` is not installed.
    """
    try:
        from opentelemetry import metrics  # noqa: PLC0415
    except ImportError:
        raise ConfigurationError(_EXTRA) from None
    provider = meter_provider or metrics.get_meter_provider()
    meter = provider.get_meter("inboxguard")
    read = _Reader(engine, table_prefix)

    def gauge(name: str, unit: str, doc: str, values: Callable[[Stats], Iterable[Any]]) -> None:
        def callback(_: Any) -> list[Any]:
            reading = read()
            if reading is None:
                return []
            return [metrics.Observation(v, a) for v, a in values(reading)]

        meter.create_observable_gauge(name, callbacks=[callback], unit=unit, description=doc)

    def consumers(field: Callable[[Any], float | None]) -> Callable[[Stats], Iterable[Any]]:
        return lambda s: [
            (value, {"inboxguard.consumer": c.consumer})
            for c in s.consumers or ()
            if (value := field(c)) is not None
        ]

    def seconds(delta: dt.timedelta | None) -> float:
        return delta.total_seconds() if delta is not None else 0.0

    gauge("inboxguard.evidence.rows", "{row}", "Evidence rows", consumers(lambda c: c.processed))
    gauge(
        "inboxguard.evidence.oldest_age",
        "s",
        "Age of the oldest evidence row",
        consumers(lambda c: c.oldest_evidence_age and c.oldest_evidence_age.total_seconds()),
    )
    gauge(
        "inboxguard.quarantine.open",
        "{record}",
        "Open quarantine records",
        consumers(lambda c: c.quarantined),
    )
    if horizon is not None:
        gauge(
            "inboxguard.evidence.horizon",
            "s",
            "Retention horizon",
            lambda s: [(horizon.total_seconds(), {})],
        )
    outbox: list[tuple[str, str, str, Callable[[Any], float]]] = [
        (
            "inboxguard.outbox.backlog",
            "{row}",
            "Outbox rows not yet delivered",
            lambda o: o.backlog,
        ),
        (
            "inboxguard.outbox.oldest_unsent_age",
            "s",
            "Age of the oldest unsent row",
            lambda o: seconds(o.oldest_unsent_age),
        ),
        ("inboxguard.outbox.dead_rows", "{row}", "Outbox rows marked dead", lambda o: o.dead),
    ]
    for name, unit, doc, field in outbox:
        gauge(name, unit, doc, _outbox_values(field))
    gauge(
        "inboxguard.effects.count",
        "{effect}",
        "Effects by ledger state",
        lambda s: (
            [(n, {"inboxguard.state": k}) for k, n in s.effects.by_state.items()]
            if s.effects
            else []
        ),
    )
    gauge(
        "inboxguard.effects.oldest_unknown_age",
        "s",
        "Age of the oldest unknown effect",
        lambda s: [(seconds(s.effects.oldest_unknown_age), {})] if s.effects else [],
    )


def _outbox_values(field: Callable[[Any], float]) -> Callable[[Stats], Iterable[Any]]:
    def values(reading: Stats) -> list[tuple[float, dict[str, str]]]:
        return [(field(reading.outbox), {})] if reading.outbox else []

    return values
