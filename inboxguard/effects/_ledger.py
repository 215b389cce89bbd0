"""The effect ledger: prepare and commit, send, record; settle the ambiguous."""

from __future__ import annotations

import datetime as dt
import logging
import os
import socket
import uuid
from collections.abc import Callable, Iterable
from typing import Any

from sqlalchemy.engine import Engine

from inboxguard._core import faults
from inboxguard._core.checks import check_clock, check_table_prefix
from inboxguard._core.clock import Clock, checked_now
from inboxguard._core.digest import digest_of
from inboxguard._core.identity import validate_identity
from inboxguard._telemetry import check_switch, telemetry_for
from inboxguard.effects._guarded import refuse_inside_sqlite_guard
from inboxguard.effects._recorder import Recorder
from inboxguard.effects._records import EffectRecord, ReconcileReport, parse_cursor
from inboxguard.effects._rules import (
    check_digest,
    check_lease,
    contract_of,
    provider_name,
    refuse_if_leased,
    settled,
    why_takeover,
)
from inboxguard.effects._store import Held, Store, prepared_row
from inboxguard.effects.provider import Provider, ProviderContract, Receipt
from inboxguard.effects.state import EffectState
from inboxguard.errors import (
    ConfigurationError,
    EffectOutcomeUnknownError,
    ProviderRejectedError,
    ReconciliationRequiredError,
)
from inboxguard.sql.clock import ServerClock
from inboxguard.sql.connection import check_engine, refuse_shared_pool
from inboxguard.sql.errors import LEDGER_SCHEMA
from inboxguard.sql.schema import check_tables
from inboxguard.sql.tables import effect_tables

__all__ = ["DEFAULT_LEASE", "EffectLedger"]

logger = logging.getLogger("inboxguard.effects")
#: Default lease: longer than any provider call should take.
DEFAULT_LEASE = dt.timedelta(seconds=30)


class EffectLedger:
    """Executes each external effect once per effect key, as far as the
    provider's idempotency contract allows, and records durably when it
    cannot know.

    ``execute`` commits ``prepared`` (with a lease and a fencing token) before
    calling the provider, passes the effect key as the provider's idempotency
    key, and records ``confirmed``, ``rejected`` or ``unknown`` afterwards.
    A later call for the same key returns the stored receipt, or settles an
    ambiguous outcome by lookup or by a same-key re-send inside the provider's
    idempotency window, and never re-sends blindly after it.

    Args:
        engine: the database (PostgreSQL, MariaDB/MySQL or SQLite) holding the
            ledger's tables; each step commits in a transaction of its own,
            so the engine's pool must hand out connections other than the
            caller's (not ``SingletonThreadPool`` or ``StaticPool``).
        table_prefix: prefix of the ledger's tables (``<prefix>effects`` and
            ``<prefix>effect_history``).
        clock: zero-argument callable returning an aware datetime; leases,
            ``first_sent_at`` and windows are measured with it. Default: the
            database server's time (:class:`~inboxguard.ServerClock`), which
            every worker on the database shares; pass one only in tests.
        actor: who is recorded in the history (default: ``host:pid``).
        telemetry: count reconciliations by verdict with OpenTelemetry when
            ``opentelemetry-api`` is installed; ``False`` turns it off.

    Raises:
        ConfigurationError: a bad argument, or an engine whose pool shares one
            connection (returning it would roll back the caller's transaction).
    """

    def __init__(
        self,
        engine: Engine,
        *,
        table_prefix: str = "inboxguard_",
        clock: Clock | None = None,
        actor: str | None = None,
        telemetry: bool = True,
    ) -> None:
        check_engine(engine)
        check_switch("telemetry", telemetry)
        check_table_prefix(table_prefix)
        check_clock(clock)
        self.tables = effect_tables(table_prefix)  # the prefix's length is named first
        refuse_shared_pool(engine, "the effect ledger")
        if actor is not None and (not isinstance(actor, str) or not actor):
            msg = f"actor must be a non-empty str or None, got {actor!r}"
            raise ConfigurationError(msg)
        self.engine = engine
        self.table_prefix = table_prefix
        self.clock: Clock = clock or ServerClock(engine)
        self._actor = actor
        self._telemetry = telemetry_for(telemetry)
        self._store = Store(engine, self.tables)
        self._rec = Recorder(self._store, lambda: checked_now(self.clock), lambda: self.actor)

    def __repr__(self) -> str:
        """Show the database and prefix."""
        return f"<EffectLedger {self.engine.url.render_as_string()} {self.table_prefix!r}>"

    @property
    def actor(self) -> str:
        """Who this process is in the history (``host:pid`` unless given)."""
        return self._actor or f"{socket.gethostname()}:{os.getpid()}"

    # -- schema -------------------------------------------------------------------------

    def create_schema(self) -> None:
        """Create the effects and history tables if they do not exist (idempotent)."""
        self.tables.metadata.create_all(self.engine)

    def check_schema(self) -> None:
        """Refuse a database without the ledger's tables (call it at start-up).

        Raises:
            ConfigurationError: a table is missing; the message names
                ``create_schema()`` and the Alembic branch that create it.
        """
        check_tables(self.engine, [self.tables.effects, self.tables.history], LEDGER_SCHEMA)

    def drop_schema(self) -> None:
        """Drop the ledger's tables, with every record in them."""
        self.tables.metadata.drop_all(self.engine)

    # -- reading --------------------------------------------------------------------------

    def get(self, effect_key: str) -> EffectRecord | None:
        """The committed record of an effect, with its history, or None."""
        return self._store.read(validate_identity(effect_key, "effect_key"), history=True)

    def effects(
        self, *, state: EffectState | str | None = None, limit: int = 100, after: str | None = None
    ) -> list[EffectRecord]:
        """Records (without history), least recently updated first, then by
        key; ``after`` (the :attr:`~EffectRecord.cursor` of the last record of
        a page) gives the next page. A record updated while paging moves to
        the end of the order, so it is listed again on a later page, never
        skipped.

        Raises:
            ConfigurationError: ``state`` names no state, or ``after`` is not
                a cursor.
        """
        cursor = None if after is None else parse_cursor(after)
        return self._store.select(states=_states(state), limit=limit, after=cursor)

    def count(self, *, state: EffectState | str | None = None) -> int:
        """How many records :meth:`effects` would list without a limit.

        Raises:
            ConfigurationError: ``state`` names no state.
        """
        return self._store.count(_states(state))

    # -- execute --------------------------------------------------------------------------

    def execute(
        self,
        effect_key: str,
        provider: Provider,
        payload: Any,
        *,
        lease: dt.timedelta = DEFAULT_LEASE,
        exclude: Iterable[str] = (),
    ) -> Receipt:
        """Perform ``payload`` at ``provider`` once for ``effect_key``; return its receipt.

        ``effect_key`` belongs to the business intent (``"invoice-42/charge"``),
        never to an attempt; it is the provider's idempotency key. ``lease``
        bounds how long this call owns the effect: it must outlast the
        provider call. ``exclude`` names volatile payload fields left out of
        the digest.

        Raises:
            EffectPayloadConflictError: the key was recorded with another
                payload; nothing is sent.
            ProviderRejectedError: the provider refused (now, or before).
            EffectOutcomeUnknownError: the call ended ambiguously, or another
                worker holds the lease; retry later (retryable).
            ReconciliationRequiredError: the outcome is unknown, the window for
                a same-key re-send has passed and no lookup found it; nothing
                was sent.
            ConfigurationError: called inside an inbox guard whose transaction
                holds the write lock of the ledger's SQLite database (call
                ``execute`` before opening the guarded transaction).
            StaleLeaseError: this call's lease was taken over before it could
                record the outcome (retryable).
        """
        key = validate_identity(effect_key, "effect_key")
        contract = contract_of(provider)
        check_lease(lease)
        digest = digest_of(payload, exclude=exclude)
        refuse_inside_sqlite_guard(self.engine, key)
        owner = f"{self.actor}/{uuid.uuid4().hex[:12]}"
        for _ in range(3):
            now = checked_now(self.clock)
            # Read first (a redelivery is common and costs one SELECT); insert
            # only when absent. A concurrent insert that wins is read next round.
            record = self._store.read(key)
            if record is None:
                held = self._store.insert_prepared(
                    prepared_row(key, provider_name(provider, contract), digest, owner, now, lease),
                    self._rec.event("prepare", now),
                )
                if held is not None:
                    return self._dispatch(held, provider, payload, lease)
                continue
            check_digest(record, digest)
            receipt = settled(record)
            if receipt is not None:
                return receipt
            refuse_if_leased(record, now)
            held = self._rec.take_over(record, owner, lease, why_takeover(record))
            if held is not None:
                return self._recover(held, provider, contract, payload, lease)
        msg = f"effect {key!r} is contended by other workers; retry later"
        raise EffectOutcomeUnknownError(msg, effect_key=key, state="contended")

    def _dispatch(
        self, held: Held, provider: Provider, payload: Any, lease: dt.timedelta
    ) -> Receipt:
        try:
            receipt = provider.send(held.key, payload)
        except ProviderRejectedError as error:
            error.effect_key = held.key
            self._rec.finish(held, applied=False, error=error)
            raise
        except (TimeoutError, ConnectionError) as error:
            self._rec.to_unknown(held, "send", error)
            msg = (
                f"effect {held.key!r}: the provider call ended ambiguously ({error!r}); it is"
                " recorded as unknown; retry later: the retry looks it up or re-sends with"
                " the same idempotency key while the provider's window is open"
            )
            raise EffectOutcomeUnknownError(msg, effect_key=held.key, state="unknown") from error
        except BaseException as error:
            # Anything else, including KeyboardInterrupt, SystemExit and a
            # green-thread Timeout: the request may have reached the provider.
            self._rec.to_unknown(held, "send", error)
            raise
        if not isinstance(receipt, Receipt):
            bad = ConfigurationError(
                f"{type(provider).__name__}.send returned {receipt!r}; it must return a Receipt"
            )
            self._rec.to_unknown(held, "send", bad)
            raise bad
        if faults.hook is not None:
            faults.reach(faults.FaultPoint.PROVIDER_ACCEPTED, held.key)
        self._rec.confirm(held, receipt)
        return receipt

    def _recover(
        self,
        held: Held,
        provider: Provider,
        contract: ProviderContract,
        payload: Any,
        lease: dt.timedelta,
    ) -> Receipt:
        """Settle a taken-over ``prepared`` or ``unknown`` effect before any re-send."""
        if contract.supports_lookup:
            found = self._rec.lookup(held, provider)
            if found is not None:
                self._rec.finish(held, applied=True, receipt=found, note="found by lookup")
                return found
        now = checked_now(self.clock)
        window_end = contract.window_end(held.first_sent_at)
        if window_end is None or now + lease < window_end:
            resent = self._rec.write(
                held,
                held.state,
                {"attempts": self.tables.effects.c.attempts + 1},
                self._rec.event("resend", now, "same idempotency key, inside the window"),
            )
            return self._dispatch(resent, provider, payload, lease)
        searched = "a lookup found nothing" if contract.supports_lookup else "it has no lookup"
        closed = f"the idempotency window has closed and {searched}: nothing re-sent"
        self._rec.to_unknown(held, "takeover", None, note=closed)
        msg = (
            f"effect {held.key!r} may or may not have been applied: the provider's idempotency"
            f" window closed at {window_end.isoformat()} and {searched}, so a re-send could"
            " repeat it; nothing was sent; reconcile it by hand (ledger.resolve) after"
            " checking the provider"
        )
        raise ReconciliationRequiredError(msg, effect_key=held.key, window_ends_at=window_end)

    # -- operators ------------------------------------------------------------------------

    def reconcile(
        self,
        provider: Provider,
        *,
        older_than: dt.timedelta = dt.timedelta(minutes=5),
        limit: int = 1000,
        lease: dt.timedelta = DEFAULT_LEASE,
    ) -> ReconcileReport:
        """Settle this provider's ``unknown`` effects (and ``prepared`` ones whose
        lease expired) last touched at least ``older_than`` ago, by lookup.

        A found effect becomes ``reconciled`` (or ``confirmed`` from
        ``prepared``); nothing is ever sent. See :class:`ReconcileReport`.
        """
        from inboxguard.effects._operations import reconcile  # noqa: PLC0415

        report = reconcile(self._rec, provider, older_than=older_than, limit=limit, lease=lease)
        for verdict in ("reconciled", "pending", "needs_operator", "skipped", "failed"):
            found = len(getattr(report, verdict))
            self._telemetry.add("reconciliations", found, {"inboxguard.verdict": verdict})
        return report

    def compensate(
        self,
        effect_key: str,
        compensator: Callable[[EffectRecord], Receipt | None],
        *,
        lease: dt.timedelta = DEFAULT_LEASE,
    ) -> EffectRecord:
        """Undo an applied effect (``confirmed``, or ``reconciled`` as applied):
        run ``compensator(record)`` under the lease, then record ``compensated``
        with the receipt it returns.

        A charge that once timed out and was settled by a lookup or a same-key
        re-send is ``reconciled``; it is undone exactly like one confirmed at
        once, so a refund flow need not know which path the charge took.

        Idempotent: an already compensated effect is returned as is, without
        calling ``compensator``. The compensator should itself be idempotent
        (use ``f"{record.effect_key}:compensate"`` as its provider key), since a
        crash between its call and the record repeats it.

        Raises:
            InvalidTransitionError: the effect is neither ``confirmed`` nor
                ``reconciled`` as applied.
            EffectOutcomeUnknownError: another worker is compensating it.
        """
        from inboxguard.effects._operations import compensate  # noqa: PLC0415

        return compensate(
            self._rec, validate_identity(effect_key, "effect_key"), compensator, lease=lease
        )

    def resolve(
        self,
        effect_key: str,
        *,
        applied: bool,
        receipt: Receipt | None = None,
        note: str,
    ) -> EffectRecord:
        """Record an operator's verdict on an ``unknown`` effect: ``reconciled``,
        applied or not, with the receipt found at the provider.

        Raises:
            InvalidTransitionError: the effect is not ``unknown``.
            EffectOutcomeUnknownError: a worker holds its lease right now.
            ConfigurationError: ``applied`` is true but no ``receipt`` is given.
        """
        from inboxguard.effects._operations import resolve  # noqa: PLC0415

        return resolve(
            self._rec,
            validate_identity(effect_key, "effect_key"),
            applied=applied,
            receipt=receipt,
            note=note,
        )


def _states(state: EffectState | str | None) -> tuple[EffectState, ...] | None:
    try:
        return None if state is None else (EffectState(state),)
    except ValueError:
        names = ", ".join(s.value for s in EffectState)
        msg = f"state {state!r} is not an effect state; use one of {names}"
        raise ConfigurationError(msg) from None
