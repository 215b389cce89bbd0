"""Turning a handler's arguments into a command ID and a payload."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from typing import Any

from inboxguard._core.identity import as_id
from inboxguard.errors import ConfigurationError

__all__ = ["CommandIdSpec", "command_id_getter", "payload_of"]

#: A command ID source: a callable over the handler's arguments, or the name
#: of one of them.
CommandIdSpec = Callable[..., Any] | str
#: Extracts the command ID from ``(args, kwargs)``.
Getter = Callable[[tuple[Any, ...], Mapping[str, Any]], Any]


def payload_of(args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """The payload digested for a call: ``{"args": [...], "kwargs": {...}}``."""
    return {"args": list(args), "kwargs": dict(kwargs)}


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

    def getter(args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> Any:
        bound = signature.bind_partial(*args, **kwargs)
        bound.apply_defaults()
        return as_id(bound.arguments.get(spec))

    return getter
