"""Metrics and spans, recorded so that they can never break a consumer.

Every service asks one :class:`Telemetry` (made by :func:`telemetry_for`) to
count, time or trace; it forwards to OpenTelemetry's global providers when
``opentelemetry-api`` is installed (see :mod:`._otel`) and does nothing
otherwise. Any exception raised by a meter, a tracer or an exporter is
caught here, logged once, and never reaches the caller; a disabled
``Telemetry`` returns before touching anything.

Imports only the standard library and :mod:`inboxguard.errors` at module level.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import Any

from inboxguard._telemetry._otel import Instruments, instruments
from inboxguard.errors import (
    BeyondRetentionError,
    ConfigurationError,
    InProgressError,
    PayloadMismatchError,
)

__all__ = [
    "CONSUMER",
    "OUTCOME",
    "ClaimProbe",
    "Telemetry",
    "check_switch",
    "claim_outcome",
    "telemetry_for",
]

logger = logging.getLogger("inboxguard.telemetry")

#: Attribute names (OpenTelemetry style, prefixed ``inboxguard.``).
CONSUMER = "inboxguard.consumer"
COMMAND_ID = "inboxguard.command_id"
OUTCOME = "inboxguard.outcome"

_REFUSALS: tuple[tuple[type[BaseException], str], ...] = (
    (BeyondRetentionError, "beyond_retention"),
    (PayloadMismatchError, "mismatch"),
    (InProgressError, "in_progress"),
)


def claim_outcome(error: BaseException) -> str | None:
    """The claim outcome a guard error stands for (``beyond_retention``,
    ``mismatch``, ``in_progress``), None for an error that is no verdict."""
    for kind, outcome in _REFUSALS:
        if isinstance(error, kind):
            return outcome
    return None


_warned: set[str] = set()


def _failed(what: str) -> None:
    """Log a telemetry failure once per kind; the caller carries on."""
    if what not in _warned:
        _warned.add(what)
        logger.warning(
            "inboxguard telemetry: %s failed; carrying on without it", what, exc_info=True
        )


class ClaimProbe:
    """Times one claim and reports its verdict once (counter, histogram, span)."""

    __slots__ = ("_attrs", "_ins", "_span", "_start")

    def __init__(self, ins: Instruments, consumer: str, command_id: str) -> None:
        self._ins = ins
        self._attrs = {CONSUMER: consumer, COMMAND_ID: command_id}
        self._start = time.perf_counter()
        self._span: Any = None
        try:
            if _tracing(ins):
                self._span = ins.tracer.start_span("inboxguard.claim", attributes=self._attrs)
        except Exception:
            _failed("starting the claim span")

    def decided(self, outcome: str) -> None:
        """Report a verdict: ``fresh``, ``duplicate`` or one of :func:`claim_outcome`."""
        elapsed = time.perf_counter() - self._start
        try:
            labels = {CONSUMER: self._attrs[CONSUMER], OUTCOME: outcome}
            self._ins.claims.add(1, labels)
            self._ins.claim_duration.record(elapsed, labels)
        except Exception:
            _failed("recording a claim")
        self._end(outcome, None)

    def failed(self, error: BaseException) -> None:
        """Report a claim that ended in ``error``: a refusal is a verdict;
        anything else only marks the span as failed."""
        outcome = claim_outcome(error)
        if outcome is not None:
            self.decided(outcome)
        else:
            self._end(None, error)

    def _end(self, outcome: str | None, error: BaseException | None) -> None:
        span, self._span = self._span, None
        if span is None:
            return
        try:
            if not span.is_recording():
                span.end()
                return
            if outcome is not None:
                span.set_attribute(OUTCOME, outcome)
            if error is not None and isinstance(error, Exception):
                span.record_exception(error)
                span.set_status(self._ins.trace.Status(self._ins.trace.StatusCode.ERROR))
            span.end()
        except Exception:
            _failed("ending the claim span")


class _NoProbe(ClaimProbe):
    __slots__ = ()

    def __init__(self) -> None:
        pass

    def decided(self, outcome: str) -> None:
        return None

    def failed(self, error: BaseException) -> None:
        return None


_NO_PROBE = _NoProbe()


class Telemetry:
    """The switch and the safe entry points every service records through."""

    __slots__ = ("enabled",)

    def __init__(self, *, enabled: bool) -> None:
        self.enabled = enabled

    def _instruments(self) -> Instruments | None:
        return instruments() if self.enabled else None

    def claim(self, consumer: str, command_id: str) -> ClaimProbe:
        """Start timing (and tracing) one claim; a probe that does nothing while
        neither a meter nor a tracer provider is installed (it would record nothing)."""
        ins = self._instruments()
        if ins is None or not (_metering(ins) or _tracing(ins)):
            return _NO_PROBE
        return ClaimProbe(ins, consumer, command_id)

    def add(self, instrument: str, amount: float, attributes: Mapping[str, Any]) -> None:
        """Add ``amount`` to the counter ``instrument`` (a field of ``Instruments``)."""
        ins = self._instruments()
        if ins is None or not amount:
            return
        try:
            getattr(ins, instrument).add(amount, dict(attributes))
        except Exception:
            _failed(f"counting {instrument}")

    def record(self, instrument: str, value: float, attributes: Mapping[str, Any]) -> None:
        """Record ``value`` in the histogram ``instrument``."""
        ins = self._instruments()
        if ins is None:
            return
        try:
            getattr(ins, instrument).record(value, dict(attributes))
        except Exception:
            _failed(f"recording {instrument}")

    def span(
        self, name: str, consumer: str, command_id: str, **attributes: Any
    ) -> AbstractContextManager[None]:
        """Run the block inside the span ``name`` (the current span while it
        runs); the block's own exceptions pass through untouched. Without a
        tracer provider installed, a context manager that does nothing."""
        ins = self._instruments()
        if ins is None or not _tracing(ins):
            return nullcontext()
        return _spanning(ins, name, {CONSUMER: consumer, COMMAND_ID: command_id, **attributes})


def _metering(ins: Instruments) -> bool:
    """Whether measurements would reach an installed meter provider."""
    try:
        return bool(ins.metering())
    except Exception:
        _failed("checking for a meter provider")
        return False


def _tracing(ins: Instruments) -> bool:
    """Whether spans would reach an installed tracer provider."""
    try:
        return bool(ins.tracing())
    except Exception:
        _failed("checking for a tracer provider")
        return False


@contextmanager
def _spanning(ins: Instruments, name: str, attributes: dict[str, Any]) -> Iterator[None]:
    span, token = _open(ins, name, attributes)
    try:
        yield
    except BaseException as error:
        _close(ins, span, token, error)
        raise
    _close(ins, span, token, None)


def _open(ins: Instruments, name: str, attributes: dict[str, Any]) -> tuple[Any, Any]:
    try:
        span = ins.tracer.start_span(name, attributes=attributes)
    except Exception:
        _failed(f"starting the span {name}")
        return None, None
    try:
        if not span.get_span_context().is_valid:  # a no-op tracer: nothing to propagate
            return span, None
        token = ins.context.attach(ins.trace.set_span_in_context(span))
    except Exception:
        _failed(f"making the span {name} current")
        token = None
    return span, token


def _close(ins: Instruments, span: Any, token: Any, error: BaseException | None) -> None:
    if span is None:
        return
    try:
        if token is not None:
            ins.context.detach(token)
        if isinstance(error, Exception) and span.is_recording():
            span.record_exception(error)
            span.set_status(ins.trace.Status(ins.trace.StatusCode.ERROR))
        span.end()
    except Exception:
        _failed("ending a span")


_SWITCH = {True: Telemetry(enabled=True), False: Telemetry(enabled=False)}


def check_switch(name: str, value: object) -> None:
    """Refuse a telemetry switch that is not a bool (``"false"`` would be true).

    Raises:
        ConfigurationError: ``value`` is not True or False.
    """
    if not isinstance(value, bool):
        msg = f"{name} must be True or False, got {value!r}"
        raise ConfigurationError(msg)


def telemetry_for(enabled: bool) -> Telemetry:
    """The shared :class:`Telemetry` that is on (``True``) or off."""
    return _SWITCH[bool(enabled)]
