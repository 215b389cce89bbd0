"""Who a guarded FastStream handler is: its consumer name, command ID and
excluded payload keys, declared on the middleware or per handler.

FastStream 0.7 has no per-subscriber middlewares (``@broker.subscriber``
takes none; routers group them). :func:`inbox_consumer`, written under
``@broker.subscriber``, gives one handler its own consumer name and command
ID; the middleware reads them when a message for that handler arrives.

Imports no framework.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from inboxguard._core.digest import digest_of
from inboxguard._core.identity import as_id, validate_identity
from inboxguard.adapters._delivery import COMMAND_ID_HEADER, FromMessage, id_getter
from inboxguard.adapters._delivery import Delivery as _Delivery
from inboxguard.errors import ConfigurationError, InvalidCommandError, PayloadEncodingError

__all__ = [
    "ATTRIBUTE",
    "CommandId",
    "HandlerOptions",
    "handler_name",
    "handler_of",
    "handlers_of",
    "inbox_consumer",
    "options_for",
]

#: A body key, a callable over ``(body, headers)``, or None: the outbox's
#: ``x-inbox-command-id`` header.
CommandId = str | Callable[[Any, Mapping[str, Any]], Any] | FromMessage | None
#: The attribute :func:`inbox_consumer` sets on the handler function.
ATTRIBUTE = "__inboxguard_faststream__"
_UNSET: Any = object()
F = TypeVar("F", bound=Callable[..., Any])


@dataclass(frozen=True, slots=True)
class HandlerOptions:
    """One handler's guard settings, checked."""

    consumer: str
    get_id: Callable[[_Delivery], Any]
    exclude: tuple[str, ...]
    shared: bool = False
    #: The command-ID spec as given (for the guarantee tables).
    id_spec: object = None

    @classmethod
    def checked(
        cls,
        consumer: object,
        command_id: object,
        exclude: object,
        shared: object = False,
        where: str = "InboxMiddleware",
    ) -> HandlerOptions:
        """The options once each is valid.

        Raises:
            ConfigurationError: naming the field and what to pass instead.
        """
        if not isinstance(consumer, str):
            msg = (
                f"{where}: consumer must be a declared name (str) such as 'billing.charge',"
                f" got {consumer!r}; it is never derived from a module path"
            )
            raise ConfigurationError(msg)
        try:
            name = validate_identity(consumer, "consumer")
        except InvalidCommandError as error:
            msg = f"{where}: consumer {consumer!r} is not usable: {error.args[0]}"
            raise ConfigurationError(msg) from error
        if not isinstance(shared, bool):
            msg = f"{where}: shared_consumer must be True or False, got {shared!r}"
            raise ConfigurationError(msg)
        return cls(name, getter(command_id, where), excluded(exclude, where), shared, command_id)


def getter(spec: object, where: str) -> Callable[[_Delivery], Any]:
    """The command ID of a delivery, as ``spec`` says.

    Raises:
        ConfigurationError: ``spec`` is no body key, callable or None.
    """
    if callable(spec) and not isinstance(spec, FromMessage):
        fn = spec
        if _positional_arity(fn) < 2:
            msg = (
                f"{where}: a command_id callable takes the decoded body and the headers,"
                f" (body, headers) -> str; {fn!r} takes fewer arguments"
            )
            raise ConfigurationError(msg)
        return lambda delivery: as_id(fn(delivery.body, delivery.headers))
    if spec is None or isinstance(spec, str | FromMessage):
        return id_getter(spec)
    msg = (
        f"{where}: command_id must be the name of a body field (str), a callable"
        f" (body, headers) -> str, or None (the {COMMAND_ID_HEADER} header the outbox"
        f" stamps), got {spec!r}"
    )
    raise ConfigurationError(msg)


def _positional_arity(fn: Callable[..., Any]) -> int:
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return 2  # a builtin or C callable: trust it, a failure is refused per message
    if any(p.kind is p.VAR_POSITIONAL for p in params):
        return 2
    kinds = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    return sum(p.kind in kinds for p in params)


def excluded(value: object, where: str) -> tuple[str, ...]:
    """``exclude`` as a tuple of payload paths.

    Raises:
        ConfigurationError: not key names, or not a usable path.
    """
    items: Iterable[object] = (value,) if isinstance(value, str) else value  # type: ignore[assignment]
    try:
        found = tuple(items)
    except TypeError:
        found = (value,)
    if not all(isinstance(item, str) for item in found):
        msg = f"{where}: exclude must be payload key names (str), got {value!r}"
        raise ConfigurationError(msg)
    try:
        digest_of({}, exclude=found)  # type: ignore[arg-type]
    except PayloadEncodingError as error:
        msg = f"{where}: exclude: {error.args[0]} (e.g. 'trace_id' or 'meta.trace_id')"
        raise ConfigurationError(msg) from error
    return found  # type: ignore[return-value]


def inbox_consumer(
    consumer: str,
    *,
    command_id: CommandId = _UNSET,
    exclude: Iterable[str] = _UNSET,
    shared_consumer: bool = False,
) -> Callable[[F], F]:
    """Give one handler its own consumer name (and command ID, exclusions).

    Write it under ``@broker.subscriber(...)``; the broker's
    :class:`InboxMiddleware` then guards this handler's messages under
    ``consumer``. ``command_id`` and ``exclude`` default to the middleware's.
    ``shared_consumer=True`` on two handlers lets them share a name on purpose.

    Raises:
        ConfigurationError: a bad name, command ID or exclusion (at import).
    """
    checked = HandlerOptions.checked(
        consumer,
        None if command_id is _UNSET else command_id,
        () if exclude is _UNSET else exclude,
        shared_consumer,
        where=f"inbox_consumer({consumer!r})",
    )
    override = _Override(checked, command_id is not _UNSET, exclude is not _UNSET, checked.shared)

    def mark(fn: F) -> F:
        if getattr(fn, ATTRIBUTE, None) is not None:
            msg = f"inbox_consumer is applied twice to {fn!r}; keep one"
            raise ConfigurationError(msg)
        setattr(fn, ATTRIBUTE, override)
        return fn

    return mark


@dataclass(frozen=True, slots=True)
class _Override:
    options: HandlerOptions
    has_id: bool
    has_exclude: bool
    shared: bool

    def over(self, default: HandlerOptions) -> HandlerOptions:
        return HandlerOptions(
            self.options.consumer,
            self.options.get_id if self.has_id else default.get_id,
            self.options.exclude if self.has_exclude else default.exclude,
            self.shared,
            self.options.id_spec if self.has_id else default.id_spec,
        )


def options_for(fn: Any, default: HandlerOptions) -> HandlerOptions:
    """The options of handler ``fn``: its :func:`inbox_consumer` override over
    the middleware's ``default``."""
    override = getattr(inspect.unwrap(fn), ATTRIBUTE, None) if fn is not None else None
    if override is None and fn is not None:
        override = getattr(fn, ATTRIBUTE, None)
    return override.over(default) if isinstance(override, _Override) else default


def handler_of(call_next: Any, subscriber: Any) -> Any:
    """The user's function a message is about to reach, or None.

    FastStream chains the consume scopes with ``functools.partial`` around
    the handler's ``call_wrapped``; unwrap to the handler wrapper and take the
    function as it was declared. A subscriber with one handler answers
    directly.
    """
    calls = list(getattr(subscriber, "calls", ()) or ())
    if len(calls) == 1:
        return _declared(calls[0].handler)
    call = call_next
    while isinstance(call, functools.partial):
        call = call.args[-1] if call.args else call.func
    return _declared(getattr(call, "__self__", None))


def _declared(wrapper: Any) -> Any:
    if wrapper is None:
        return None
    for name in ("_declared_call", "_original_call"):
        fn = getattr(wrapper, name, None)
        if fn is not None:
            return fn
    return None


def handlers_of(subscriber: Any) -> list[Any]:
    """Every user function a subscriber dispatches to."""
    return [
        fn
        for fn in (_declared(c.handler) for c in getattr(subscriber, "calls", ()) or ())
        if fn is not None
    ]


def handler_name(fn: Any) -> str:
    """``module.qualname`` of a handler, for the consumer registry."""
    return f"{getattr(fn, '__module__', '?')}.{getattr(fn, '__qualname__', fn)}"
