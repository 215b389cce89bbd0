"""A handler's guarantee table, as data: the seven fields the architecture
review asks for, plus the layer they hold at.

:class:`Guarantee` is both what a user declares (``guarantee=`` on an adapter
or :meth:`inboxguard.Inbox.handler`: only what inboxguard cannot see, such as
the provider's behaviour, compensation and terminal states) and what
:func:`inboxguard.guarantees_of` returns (every field filled in, derived from
the running configuration). Each field is a :class:`GuaranteeFact`: what
holds, whether it was derived or declared, and the settings it was read from.
A fact nobody can know is *unknown* (``value`` None), never guessed.

Imports the standard library only.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from inboxguard.errors import ConfigurationError

__all__ = [
    "DECLARABLE",
    "DERIVED_ONLY",
    "FIELDS",
    "Guarantee",
    "GuaranteeFact",
    "Setting",
    "check_declared_guarantee",
]

#: A setting's value in a table: JSON scalars only (``None``: unknown).
Setting = str | int | float | bool | None
#: The table's fields, in the order they are shown.
FIELDS = (
    "layer",
    "transaction_boundary",
    "delivery_mode",
    "identity",
    "provider_behaviour",
    "dedup_window",
    "reconciliation",
    "terminal_states",
)
#: Fields a user may declare (what inboxguard cannot see).
DECLARABLE = ("delivery_mode", "provider_behaviour", "reconciliation", "terminal_states")
#: Fields inboxguard always derives; a declaration of one is refused.
DERIVED_ONLY = ("transaction_boundary", "identity", "dedup_window", "layer")
_SOURCES = ("derived", "declared", "unknown")


@dataclass(frozen=True, slots=True)
class GuaranteeFact:
    """One cell of a guarantee table: what holds, and what it was read from.

    ``value`` is a sentence, or None when nobody can know it (shown as
    *unknown*, never guessed). ``source`` says whether inboxguard derived it
    from the running configuration, the user declared it, or it is unknown.
    ``settings`` names each setting the fact depends on and its value, so a
    change of one of them shows up, by name, in a lock-file check.
    """

    value: str | None
    source: str = "derived"
    settings: Mapping[str, Setting] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.value is not None and not isinstance(self.value, str):
            msg = f"GuaranteeFact.value must be a str or None, got {self.value!r}"
            raise ConfigurationError(msg)
        if self.source not in _SOURCES:
            msg = f"GuaranteeFact.source must be one of {', '.join(_SOURCES)}, got {self.source!r}"
            raise ConfigurationError(msg)
        settings = dict(self.settings)
        for name, value in settings.items():
            if not isinstance(name, str) or not isinstance(value, str | int | float | bool | None):
                msg = (
                    f"GuaranteeFact setting {name!r} must map a str to a str, number, bool"
                    f" or None, got {value!r}"
                )
                raise ConfigurationError(msg)
        plain = {name: _plain(value) for name, value in sorted(settings.items())}
        object.__setattr__(self, "settings", plain)

    @classmethod
    def unknown(cls, why: str, **settings: Setting) -> GuaranteeFact:
        """A fact nobody can know from the configuration, with the reason and the fix."""
        return cls(None, "unknown", {"why": why, **settings})

    @property
    def known(self) -> bool:
        """Whether the fact has a value."""
        return self.value is not None

    def to_json(self) -> dict[str, Any]:
        """``{"value": ..., "source": ..., "settings": {...}}``."""
        return {"value": self.value, "source": self.source, "settings": dict(self.settings)}

    @classmethod
    def from_json(cls, data: object, where: str) -> GuaranteeFact:
        """Read :meth:`to_json`'s form back (a lock file).

        Raises:
            ConfigurationError: ``data`` is not that form; the message names ``where``.
        """
        if not isinstance(data, Mapping) or not {"value", "source", "settings"} <= set(data):
            msg = f"{where} must be an object with value, source and settings, got {data!r}"
            raise ConfigurationError(msg)
        settings = data["settings"]
        if not isinstance(settings, Mapping):
            msg = f"{where}.settings must be an object, got {settings!r}"
            raise ConfigurationError(msg)
        return cls(data["value"], data["source"], dict(settings))


def _plain(value: Setting) -> Setting:
    """A setting as the JSON type it is written as: a ``str`` subclass (a
    SQLAlchemy ``quoted_name``, an enum) compares equal to what a lock reads back."""
    for kind in (bool, str, int, float):
        if isinstance(value, kind):
            return kind(value)
    return value


@dataclass(frozen=True, kw_only=True)
class Guarantee:
    """A handler's guarantee table: the seven fields of the architecture review
    plus the layer each holds at.

    Declared with ``guarantee=`` (Celery ``inbox_task``/``inbox_guarantee``,
    Dramatiq actor option ``inbox_guarantee``, kombu and aio-pika ``guarded``,
    :meth:`inboxguard.Inbox.handler`) for what only the user knows:
    ``provider_behaviour``, ``reconciliation``, ``terminal_states`` (strings, or a
    sequence of state names), ``delivery_mode`` where the adapter cannot see
    the acks (``Inbox.handler``), and ``provider`` (a ``Provider`` or its
    ``ProviderContract``), ``ledger`` (the ``EffectLedger`` the effect goes
    through), ``compensation``, ``no_external_effect=True``, and the two
    examples. ``transaction_boundary``, ``identity``, ``dedup_window`` and
    ``layer`` are always derived from the running configuration
    (:func:`inboxguard.guarantees_of` returns them filled in), so declaring one
    is refused.

    Raises:
        ConfigurationError: a field of the wrong type, a provider with no
            contract, a ledger that is not one, or ``provider`` together with
            ``no_external_effect``.
    """

    handler: str | None = None
    consumer: str | None = None
    layer: GuaranteeFact | None = None
    transaction_boundary: GuaranteeFact | None = None
    delivery_mode: GuaranteeFact | str | None = None
    identity: GuaranteeFact | None = None
    provider_behaviour: GuaranteeFact | str | None = None
    dedup_window: GuaranteeFact | None = None
    reconciliation: GuaranteeFact | str | None = None
    terminal_states: GuaranteeFact | Sequence[str] | str | None = None
    #: The provider the handler's effect goes to (a Provider or a ProviderContract).
    provider: Any = None
    #: The EffectLedger the handler's effect goes through.
    ledger: Any = None
    #: How an applied effect is undone (a refund, a cancellation), if it can be.
    compensation: str | None = None
    #: The handler calls no outside system: its effects are its database writes.
    no_external_effect: bool = False
    #: A case that succeeds after a lost acknowledgement (derived when None).
    lost_ack_example: str | None = None
    #: A case whose outcome remains unknown (derived when None).
    unknown_case: str | None = None

    def __post_init__(self) -> None:
        for name in ("delivery_mode", "provider_behaviour", "reconciliation"):
            _coerce_text(self, name)
        _coerce_states(self)
        for name in DERIVED_ONLY:
            value = getattr(self, name)
            if value is not None and not isinstance(value, GuaranteeFact):
                msg = f"Guarantee.{name} must be a GuaranteeFact, got {value!r}"
                raise ConfigurationError(msg)
        for name in ("handler", "consumer"):
            value = getattr(self, name)
            if value is not None and not isinstance(value, str):
                msg = f"Guarantee.{name} must be a str, got {value!r}"
                raise ConfigurationError(msg)
        for name in ("compensation", "lost_ack_example", "unknown_case"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, str) or not value.strip()):
                msg = f"Guarantee.{name} must be a non-empty str or None, got {value!r}"
                raise ConfigurationError(msg)
        if not isinstance(self.no_external_effect, bool):
            msg = f"Guarantee.no_external_effect must be a bool, got {self.no_external_effect!r}"
            raise ConfigurationError(msg)
        _check_provider(self.provider, self.no_external_effect)
        if self.ledger is not None and not callable(getattr(self.ledger, "execute", None)):
            msg = f"Guarantee.ledger must be an inboxguard.EffectLedger, got {self.ledger!r}"
            raise ConfigurationError(msg)

    def fact(self, name: str) -> GuaranteeFact | None:
        """The :class:`GuaranteeFact` of field ``name`` (one of :data:`FIELDS`), or None."""
        value = getattr(self, name)
        return value if isinstance(value, GuaranteeFact) else None

    def to_json(self) -> dict[str, Any]:
        """The table as JSON: ``handler``, ``consumer`` and one object per field
        (``value`` null: unknown)."""
        out: dict[str, Any] = {"handler": self.handler, "consumer": self.consumer}
        for name in FIELDS:
            fact = self.fact(name)
            out[name] = (fact or GuaranteeFact.unknown("not derived")).to_json()
        return out


def _coerce_text(guarantee: Guarantee, name: str) -> None:
    value = getattr(guarantee, name)
    if isinstance(value, str):
        if not value.strip():
            msg = f"Guarantee.{name} must not be empty; leave it out to have it derived"
            raise ConfigurationError(msg)
        object.__setattr__(guarantee, name, GuaranteeFact(value, "declared"))
    elif value is not None and not isinstance(value, GuaranteeFact):
        msg = f"Guarantee.{name} must be a str, got {type(value).__name__} {value!r}"
        raise ConfigurationError(msg)


def _coerce_states(guarantee: Guarantee) -> None:
    value = guarantee.terminal_states
    if value is None or isinstance(value, GuaranteeFact):
        return
    states = [value] if isinstance(value, str) else value
    try:
        names = [str(state) for state in states if isinstance(state, str) and state.strip()]
        count = len(list(states))
    except TypeError:
        names, count = [], -1
    if not names or len(names) != count:
        msg = (
            "Guarantee.terminal_states must be non-empty state names, e.g."
            f" ('charged', 'declined', 'refunded'), got {value!r}"
        )
        raise ConfigurationError(msg)
    fact = GuaranteeFact(", ".join(names), "declared")
    object.__setattr__(guarantee, "terminal_states", fact)


def _check_provider(provider: object, no_external_effect: bool) -> None:
    if provider is None:
        return
    if no_external_effect:
        msg = "Guarantee: give provider= or no_external_effect=True, not both"
        raise ConfigurationError(msg)
    contract = getattr(provider, "contract", provider)
    if not hasattr(contract, "supports_lookup") or not hasattr(contract, "idempotency_window"):
        msg = (
            "Guarantee.provider must be an inboxguard.Provider (with a contract) or an"
            f" inboxguard.ProviderContract, got {provider!r}; e.g."
            " provider=inboxguard.known_contract('stripe')"
        )
        raise ConfigurationError(msg)


def check_declared_guarantee(
    value: object, where: str, *, delivery_derived: bool
) -> Guarantee | None:
    """Return a declared ``guarantee=`` if it can be used by this handler.

    ``delivery_derived`` is true where the adapter reads the delivery mode
    from the framework's settings (every adapter; not ``Inbox.handler``).

    Raises:
        ConfigurationError: ``value`` is not a Guarantee, or declares a field
            inboxguard derives here; the message names the field and its source.
    """
    if value is None:
        return None
    if not isinstance(value, Guarantee):
        msg = f"{where}: guarantee must be an inboxguard.Guarantee, got {value!r}"
        raise ConfigurationError(msg)
    derived = [*DERIVED_ONLY, "handler", "consumer"]
    if delivery_derived:
        derived.append("delivery_mode")
    given = [name for name in derived if getattr(value, name) is not None]
    if given:
        msg = (
            f"{where}: Guarantee({given[0]}=...) is derived from the running configuration"
            " (the engine and tables, the acks settings, the command-ID spec, the retention"
            " and replay windows); leave it out: declare only provider_behaviour,"
            " reconciliation, terminal_states, provider, ledger, compensation (and"
            " delivery_mode on Inbox.handler)"
        )
        raise ConfigurationError(msg)
    return value
