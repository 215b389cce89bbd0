"""The handler decorators: a guard around ``fn(session, *args, **kwargs)``.

A fresh command runs ``fn`` and stores its return value; a duplicate returns
the stored value without running it. The sync and async forms differ only
in ``with`` / ``async with`` and ``await``.
"""

from __future__ import annotations

import datetime as dt
import functools
import inspect
from collections.abc import Awaitable, Callable, Iterable, Mapping
from contextlib import AbstractAsyncContextManager, AbstractContextManager
from typing import Any, TypeVar

from inboxguard._core.extract import CommandIdSpec, command_id_getter, payload_of
from inboxguard._core.guarantee import GuaranteeFact, check_declared_guarantee
from inboxguard._core.handlers import (
    HandlerFacts,
    Registration,
    describe_command_id,
    register_handler,
)
from inboxguard._core.identity import validate_identity
from inboxguard.errors import ConfigurationError
from inboxguard.inbox._records import InboxEntry

__all__ = ["SentAtSpec", "async_handler", "registering", "sync_handler"]

#: Where a handler's message carries its sent time: a callable over the
#: handler's arguments, or the name of one of them (a timezone-aware datetime,
#: or None when the message has none).
SentAtSpec = Callable[..., Any] | str

R = TypeVar("R")
Guard = Callable[..., AbstractContextManager[InboxEntry]]
AsyncGuard = Callable[..., AbstractAsyncContextManager[InboxEntry]]


def sync_handler(
    guard: Guard,
    *,
    consumer: str,
    command_id: CommandIdSpec,
    exclude: Iterable[str],
    sent_at: SentAtSpec | None = None,
) -> Callable[[Callable[..., R]], Callable[..., R]]:
    """The decorator of :meth:`inboxguard.Inbox.handler`, around ``guard``."""
    validate_identity(consumer, "consumer")
    excluded = tuple(exclude)

    def decorate(fn: Callable[..., R]) -> Callable[..., R]:
        get_id = command_id_getter(command_id, fn, skip=1)
        get_sent_at = _sent_at_getter(sent_at, fn)

        @functools.wraps(fn)
        def wrapper(session: Any, *args: Any, **kwargs: Any) -> R:
            with guard(
                session,
                consumer=consumer,
                command_id=get_id(args, kwargs),
                payload=payload_of(args, kwargs, fn, skip=1),
                exclude=excluded,
                sent_at=get_sent_at(args, kwargs),
            ) as entry:
                if entry.duplicate:
                    return entry.result  # type: ignore[no-any-return]
                entry.result = fn(session, *args, **kwargs)
                return entry.result  # type: ignore[no-any-return]

        return wrapper

    return decorate


def async_handler(
    guard: AsyncGuard,
    *,
    consumer: str,
    command_id: CommandIdSpec,
    exclude: Iterable[str],
    sent_at: SentAtSpec | None = None,
) -> Callable[[Callable[..., Awaitable[R]]], Callable[..., Awaitable[R]]]:
    """The decorator of :meth:`inboxguard.Inbox.handler_async`, around ``guard``."""
    validate_identity(consumer, "consumer")
    excluded = tuple(exclude)

    def decorate(fn: Callable[..., Awaitable[R]]) -> Callable[..., Awaitable[R]]:
        get_id = command_id_getter(command_id, fn, skip=1)
        get_sent_at = _sent_at_getter(sent_at, fn)

        @functools.wraps(fn)
        async def wrapper(session: Any, *args: Any, **kwargs: Any) -> R:
            async with guard(
                session,
                consumer=consumer,
                command_id=get_id(args, kwargs),
                payload=payload_of(args, kwargs, fn, skip=1),
                exclude=excluded,
                sent_at=get_sent_at(args, kwargs),
            ) as entry:
                if entry.duplicate:
                    return entry.result  # type: ignore[no-any-return]
                entry.result = await fn(session, *args, **kwargs)
                return entry.result  # type: ignore[no-any-return]

        return wrapper

    return decorate


def _sent_at_getter(
    spec: SentAtSpec | None, fn: Callable[..., Any]
) -> Callable[[tuple[Any, ...], Mapping[str, Any]], dt.datetime | None]:
    """A function of ``(args, kwargs)`` yielding the message's sent time.

    Raises:
        ConfigurationError: ``spec`` names no argument of ``fn``.
    """
    if spec is None:
        return lambda args, kwargs: None
    if callable(spec):
        return lambda args, kwargs: spec(*args, **kwargs)
    if not isinstance(spec, str):
        msg = f"sent_at must be a callable or an argument name, got {spec!r}"
        raise ConfigurationError(msg)
    params = list(inspect.signature(fn).parameters.values())[1:]
    if spec not in {p.name for p in params}:
        names = ", ".join(p.name for p in params) or "none"
        msg = f"sent_at={spec!r} names no argument of {fn.__qualname__} (arguments: {names})"
        raise ConfigurationError(msg)
    signature = inspect.signature(fn).replace(parameters=params)

    def getter(args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> dt.datetime | None:
        bound = signature.bind_partial(*args, **kwargs)
        bound.apply_defaults()
        return bound.arguments.get(spec)

    return getter


def registering(
    inbox: object,
    kind: str,
    decorate: Callable[[Any], Any],
    consumer: str,
    command_id: CommandIdSpec,
    exclude: Iterable[str],
    guarantee: object,
) -> Callable[[Any], Any]:
    """``decorate``, which also lists the decorated handler in the registry
    of guarded handlers (:func:`inboxguard.guarantees_of`).

    Raises:
        ConfigurationError: ``guarantee`` is not a Guarantee, or declares a
            field inboxguard derives.
    """
    declared = check_declared_guarantee(
        guarantee, f"{kind}(consumer={consumer!r})", delivery_derived=False
    )
    excluded = ", ".join(exclude) or "none"

    def register(fn: Any) -> Any:
        wrapped = decorate(fn)
        name = f"{getattr(fn, '__module__', '?')}.{getattr(fn, '__qualname__', fn)}"

        def facts() -> HandlerFacts:
            return HandlerFacts(
                kind=kind,
                handler=name,
                consumer=consumer,
                inbox=inbox,
                declared=declared,
                identity={"command_id": describe_command_id(command_id), "exclude": excluded},
                delivery=GuaranteeFact.unknown(
                    "the caller receives and acks the message, out of the handler's sight;"
                    " declare it with guarantee=Guarantee(delivery_mode=...)"
                ),
            )

        register_handler(inbox, Registration(kind, name, None, facts))
        return wrapped

    return register
