"""Turning a handler's arguments into a command ID and a payload."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Mapping
from typing import Any

from inboxguard._core.digest import digest_text
from inboxguard._core.identity import as_id
from inboxguard.errors import ConfigurationError, PayloadEncodingError

__all__ = ["CommandIdSpec", "command_id_getter", "payload_of"]

#: A command ID source: a callable over the handler's arguments, or the name
#: of one of them.
CommandIdSpec = Callable[..., Any] | str
#: Extracts the command ID from ``(args, kwargs)``.
Getter = Callable[[tuple[Any, ...], Mapping[str, Any]], Any]


def payload_of(
    args: tuple[Any, ...],
    kwargs: Mapping[str, Any],
    fn: Callable[..., Any] | None = None,
    *,
    skip: int = 0,
) -> dict[str, Any]:
    """The payload digested for a call of ``fn`` (minus its first ``skip``
    parameters): one call, one payload, however its arguments were passed.

    The arguments the call carried are bound to the signature. Every
    parameter that can be named lands in ``kwargs`` under its name, with the
    extra keyword arguments of a ``**kwargs`` parameter; positional-only
    parameters and the extra arguments of ``*args`` land in ``args``, in order.
    A default the code would fill in is never part of the payload, and an
    argument passed with its parameter's default value (equal by digest) is
    left out too. So ``f(s, "inv-9", 100)``, ``f(s, invoice_id="inv-9",
    amount=100)`` and the same call with a default written out give one
    payload, and a new version of ``f`` with one more defaulted parameter
    digests an earlier call as the earlier version did. Without ``fn``, or
    when the arguments do not fit the signature (the call itself will fail),
    the payload is the arguments as passed.
    """
    passed = {"args": list(args), "kwargs": dict(kwargs)}
    plain = _plain_of(fn, skip) if fn is not None else None
    if plain is not None:
        arguments = _bind_plain(plain, args, kwargs)
        if arguments is None:  # the call does not fit: Signature.bind would refuse it
            return passed
        return {
            "args": [],
            "kwargs": {
                name: value
                for (name, default), value in zip(plain, arguments, strict=True)
                if value is not _UNSET and not _is_default(value, default)
            },
        }
    signature = _signature(fn, skip) if fn is not None else None
    if signature is None:
        return passed
    try:
        bound = signature.bind(*args, **kwargs)
    except TypeError:
        return passed
    positional: list[Any] = []
    defaults: list[object] = []  # the default of each positional-only value, in order
    named: dict[str, Any] = {}
    extras = False
    for name, value in bound.arguments.items():
        parameter = signature.parameters[name]
        kind = parameter.kind
        if kind is inspect.Parameter.POSITIONAL_ONLY:
            positional.append(value)
            defaults.append(parameter.default)
        elif kind is inspect.Parameter.VAR_POSITIONAL:
            positional.extend(value)
            extras = extras or bool(value)
        elif kind is inspect.Parameter.VAR_KEYWORD:
            named.update(value)
        elif not _is_default(value, parameter.default):
            named[name] = value
    # A positional-only default can be left out only at the end (the others
    # keep their places), and only when no *args extras follow it.
    while not extras and positional and _is_default(positional[-1], defaults[-1]):
        positional.pop()
        defaults.pop()
    return {"args": positional, "kwargs": named}


def _is_default(value: object, default: object) -> bool:
    """Whether ``value`` is the parameter's default, by digest (``1`` and
    ``1.0`` alike, ``1`` and ``True`` not); a default with no digest is
    equal only to itself."""
    if default is inspect.Parameter.empty:
        return False
    if value is default:
        return True
    try:
        return digest_text(value) == digest_text(default)
    except PayloadEncodingError:
        return False


#: A parameter the call left to its default (:func:`_bind_plain`).
_UNSET: Any = object()
#: The (name, default) of each parameter of a signature whose parameters are
#: all positional-or-keyword.
_Plain = tuple[tuple[str, Any], ...]


def _plain_parameters(signature: inspect.Signature) -> _Plain | None:
    """``signature``'s parameters as (name, default) pairs when every one is
    positional-or-keyword (most handlers), so a call binds without
    ``Signature.bind``; else None."""
    params = signature.parameters.values()
    if all(p.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD for p in params):
        return tuple((p.name, p.default) for p in params)
    return None


def _plain_of(fn: Callable[..., Any], skip: int) -> _Plain | None:
    """:func:`_plain_parameters` of ``fn``'s signature (minus ``skip``), cached
    like the signature; None without a signature."""
    try:
        return _cached_plain(fn, skip)
    except TypeError:  # an unhashable callable
        signature = _read_signature(fn, skip)
    return None if signature is None else _plain_parameters(signature)


@functools.lru_cache(maxsize=512)
def _cached_plain(fn: Callable[..., Any], skip: int) -> _Plain | None:
    signature = _cached_signature(fn, skip)
    return None if signature is None else _plain_parameters(signature)


def _bind_plain(
    plain: _Plain, args: tuple[Any, ...], kwargs: Mapping[str, Any]
) -> list[Any] | None:
    """Each parameter's value as ``Signature.bind`` would bind it (``_UNSET``
    for one left to its default), or None where ``bind`` raises TypeError
    (too many arguments, one passed twice or unknown, a required one missing)."""
    if len(args) > len(plain):
        return None
    values: list[Any] = list(args)
    used = 0
    for name, default in plain[len(args) :]:
        if name in kwargs:
            values.append(kwargs[name])
            used += 1
        elif default is inspect.Parameter.empty:
            return None
        else:
            values.append(_UNSET)
    if used != len(kwargs):  # an unknown name, or a positional one passed again
        return None
    return values


def _names(plain: _Plain, args: tuple[Any, ...]) -> set[str]:
    """The parameter names a call with ``args`` positionally may still pass by name."""
    return {name for name, _ in plain[len(args) :]}


def _signature(fn: Callable[..., Any], skip: int) -> inspect.Signature | None:
    try:
        return _cached_signature(fn, skip)
    except TypeError:  # an unhashable callable
        return _read_signature(fn, skip)


@functools.lru_cache(maxsize=512)
def _cached_signature(fn: Callable[..., Any], skip: int) -> inspect.Signature | None:
    return _read_signature(fn, skip)


def _read_signature(fn: Callable[..., Any], skip: int) -> inspect.Signature | None:
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):  # pragma: no cover - builtins without signatures
        return None
    return signature.replace(parameters=list(signature.parameters.values())[skip:])


def command_id_getter(spec: CommandIdSpec, fn: Callable[..., Any], *, skip: int = 0) -> Getter:
    """Return a function of ``(args, kwargs)`` that yields the command ID.

    ``spec`` is a callable called with the same arguments as ``fn`` (minus the
    first ``skip``), or the name of one of ``fn``'s parameters. An int value is
    turned into its decimal string.

    Raises:
        ConfigurationError: ``spec`` names no parameter of ``fn``.
    """
    if callable(spec):
        return lambda args, kwargs: as_id(spec(*args, **kwargs))
    if not isinstance(spec, str):
        msg = f"command_id must be a callable or an argument name, got {spec!r}"
        raise ConfigurationError(msg)
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):  # pragma: no cover - builtins without signatures
        return lambda args, kwargs: as_id(kwargs[spec])
    params = list(signature.parameters.values())[skip:]
    if spec not in {p.name for p in params}:
        names = ", ".join(p.name for p in params) or "none"
        msg = f"command_id={spec!r} names no argument of {fn.__qualname__} (arguments: {names})"
        raise ConfigurationError(msg)
    signature = signature.replace(parameters=params)
    plain = _plain_parameters(signature)
    if plain is not None:
        index = [name for name, _ in plain].index(spec)
        default = plain[index][1]
        unset = None if default is inspect.Parameter.empty else default

        def plain_getter(args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> Any:
            if len(args) > len(plain) or (kwargs and not kwargs.keys() <= _names(plain, args)):
                signature.bind_partial(*args, **kwargs)  # raises the TypeError bind_partial does
            value = args[index] if index < len(args) else kwargs.get(spec, unset)
            return as_id(value)

        return plain_getter

    def getter(args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> Any:
        bound = signature.bind_partial(*args, **kwargs)
        bound.apply_defaults()
        return as_id(bound.arguments.get(spec))

    return getter
