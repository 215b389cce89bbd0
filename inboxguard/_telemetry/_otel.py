"""The OpenTelemetry instruments, made once per process on the global providers.

``opentelemetry-api`` is imported the first time an enabled :class:`Telemetry`
records something; when it is not installed nothing is imported and every
call is a no-op. The instruments live on the global (proxy) meter and tracer,
so they cost a no-op call until the application installs an SDK, and start
reporting as soon as it does, without being made again.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = ["Instruments", "instruments", "reset"]

logger = logging.getLogger("inboxguard.telemetry")

#: The instrumentation scope every instrument and span is reported under.
SCOPE = "inboxguard"
#: Where ``opentelemetry.trace`` keeps the provider the application installed.
_GLOBAL = "_TRACER_PROVIDER"
#: Where ``opentelemetry.metrics`` keeps the meter provider the application installed.
_METER_GLOBAL = "_METER_PROVIDER"


@dataclass(frozen=True, slots=True)
class Instruments:
    """The tracer and every counter and histogram inboxguard records."""

    tracer: Any
    trace: Any  # the ``opentelemetry.trace`` module (use_span, Status)
    context: Any  # the ``opentelemetry.context`` module (attach, detach)
    claims: Any
    claim_duration: Any
    purge_rows: Any
    purge_duration: Any
    outbox_sends: Any
    outbox_failures: Any
    outbox_dead: Any
    outbox_lag: Any
    reconciliations: Any
    #: False while spans would go nowhere (no SDK installed): skip making them.
    tracing: Callable[[], bool] = lambda: True
    #: False while measurements would go nowhere (no meter provider installed).
    metering: Callable[[], bool] = lambda: True


_lock = threading.Lock()
_made: list[Instruments | None] = []  # empty: not tried yet; [None]: no OpenTelemetry


def instruments() -> Instruments | None:
    """The process's instruments, or None without ``opentelemetry-api`` (or
    when making them failed: logged once)."""
    if _made:
        return _made[0]
    with _lock:
        if not _made:
            _made.append(_make())
    return _made[0]


def reset(made: Instruments | None = None, *, forget: bool = True) -> None:
    """Forget the instruments (tests), or replace them with ``made``."""
    with _lock:
        _made.clear()
        if not forget:
            _made.append(made)


def _make() -> Instruments | None:
    try:
        from opentelemetry import context, metrics, trace  # noqa: PLC0415
    except ImportError:
        return None
    try:
        made = build(metrics.get_meter(SCOPE), trace.get_tracer(SCOPE), trace, context)
    except Exception:
        logger.warning("inboxguard telemetry is off: making its instruments failed", exc_info=True)
        return None
    return dataclasses.replace(
        made, tracing=_tracing_check(trace), metering=_metering_check(metrics)
    )


def _tracing_check(trace: Any) -> Callable[[], bool]:
    """Whether the application installed a tracer provider (spans go nowhere
    before it does), in a fraction of what ``get_tracer_provider()`` costs.

    The API keeps the installed provider in a module global that stays None
    until ``set_tracer_provider``; a provider named by the environment is
    resolved by the API itself, so spans are then always made. Should the
    global ever move, spans are always made too: correct, a little slower.
    """
    if os.environ.get("OTEL_PYTHON_TRACER_PROVIDER") or not hasattr(trace, _GLOBAL):
        return lambda: True
    return lambda: getattr(trace, _GLOBAL) is not None


def _metering_check(metrics: Any) -> Callable[[], bool]:
    """Whether the application installed a meter provider: until it does, the
    instruments are the API's proxies and every measurement is dropped.

    As for spans (:func:`_tracing_check`): the API keeps the installed
    provider in a module global, None until ``set_meter_provider``; with a
    provider named by the environment, or should the global move, every
    measurement is made."""
    internal = getattr(metrics, "_internal", None)
    if os.environ.get("OTEL_PYTHON_METER_PROVIDER") or not hasattr(internal, _METER_GLOBAL):
        return lambda: True
    return lambda: getattr(internal, _METER_GLOBAL) is not None


def build(meter: Any, tracer: Any, trace: Any, context: Any) -> Instruments:
    """Make every instrument on ``meter`` (tests pass a meter of their own)."""
    return Instruments(
        tracer=tracer,
        trace=trace,
        context=context,
        claims=meter.create_counter(
            "inboxguard.claims", unit="{claim}", description="Guarded deliveries by outcome"
        ),
        claim_duration=meter.create_histogram(
            "inboxguard.claim.duration", unit="s", description="From the claim to its verdict"
        ),
        purge_rows=meter.create_counter(
            "inboxguard.purge.rows", unit="{row}", description="Rows deleted by purges"
        ),
        purge_duration=meter.create_histogram(
            "inboxguard.purge.duration", unit="s", description="Duration of one purge"
        ),
        outbox_sends=meter.create_counter(
            "inboxguard.outbox.sends", unit="{message}", description="Outbox rows delivered"
        ),
        outbox_failures=meter.create_counter(
            "inboxguard.outbox.failures", unit="{message}", description="Failed sends (retried)"
        ),
        outbox_dead=meter.create_counter(
            "inboxguard.outbox.dead", unit="{message}", description="Outbox rows marked dead"
        ),
        outbox_lag=meter.create_histogram(
            "inboxguard.outbox.dispatch_lag",
            unit="s",
            description="From the row's commit to its send",
        ),
        reconciliations=meter.create_counter(
            "inboxguard.effects.reconciliations",
            unit="{effect}",
            description="Effects examined by reconcile, by verdict",
        ),
    )
