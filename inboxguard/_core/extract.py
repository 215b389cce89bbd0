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
    plain = _plain_parameters(fn, skip) if fn is not None else None
    if plain is not None and (bound_plain := plain.bind(args, kwargs)) is not None:
        return {
            "args": [],
            "kwargs": {
                name: value
                for name, value, default in bound_plain
                if not _is_default(value, default)
            },
        }
    passed = {"args": list(args), "kwargs": dict(kwargs)}
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


class _PlainParameters:
    """A signature whose parameters can all be named and none collects
    extras (no positional-only, ``*args`` or ``**kwargs``): a call is bound
    here the way ``Signature.bind`` binds it, without building a
    ``BoundArguments``. Every guarded call binds its arguments once for the
    payload and once for the command ID, so this is on the hot path."""

    __slots__ = ("index", "parameters", "positional")

    def __init__(self, parameters: list[inspect.Parameter]) -> None:
        #: Name and default of each parameter, in order.
        self.parameters = tuple((p.name, p.default) for p in parameters)
        self.index = {p.name: i for i, p in enumerate(parameters)}
        #: How many of them can be passed by position.
        self.positional = sum(p.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD for p in parameters)

    def fits(self, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> bool:
        """Whether no argument is extra, unknown or given twice (a missing
        one is ``bind``'s error alone, not ``bind_partial``'s)."""
        n = len(args)
        if n > self.positional:
            return False
        index = self.index
        for key in kwargs:
            i = index.get(key)
            if i is None or i < n:
                return False
        return True

    def bind(
        self, args: tuple[Any, ...], kwargs: Mapping[str, Any]
    ) -> list[tuple[str, Any, Any]] | None:
        """Name, value and default of each argument of the call, in the
        signature's order (as ``Signature.bind(...).arguments``); None where
        ``bind`` would raise ``TypeError``."""
        if not self.fits(args, kwargs):
            return None
        n = len(args)
        bound: list[tuple[str, Any, Any]] = []
        for i, (name, default) in enumerate(self.parameters):
            if i < n:
                bound.append((name, args[i], default))
            elif name in kwargs:
                bound.append((name, kwargs[name], default))
            elif default is inspect.Parameter.empty:
                return None  # a missing argument
        return bound


def _plain_parameters(fn: Callable[..., Any], skip: int) -> _PlainParameters | None:
    try:
        return _cached_plain_parameters(fn, skip)
    except TypeError:  # an unhashable callable
        return None


@functools.lru_cache(maxsize=512)
def _cached_plain_parameters(fn: Callable[..., Any], skip: int) -> _PlainParameters | None:
    signature = _read_signature(fn, skip)
    return None if signature is None else _plain_of(signature)


def _plain_of(signature: inspect.Signature) -> _PlainParameters | None:
    plain_kinds = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    parameters = list(signature.parameters.values())
    if any(p.kind not in plain_kinds for p in parameters):
        return None
    return _PlainParameters(parameters)


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
    plain = _plain_of(signature)

    def getter(args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> Any:
        if plain is not None and plain.fits(args, kwargs):
            i = plain.index[spec]
            if i < len(args):
                return as_id(args[i])
            default = plain.parameters[i][1]
            value = kwargs.get(spec, None if default is inspect.Parameter.empty else default)
            return as_id(value)
        bound = signature.bind_partial(*args, **kwargs)
        bound.apply_defaults()
        return as_id(bound.arguments.get(spec))

    return getter
