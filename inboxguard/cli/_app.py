"""``module:attr`` arguments, resolved the way ``celery -A`` resolves them:
the one resolver of every ``--app``, ``--policy``, ``--transport`` and
``--provider`` option.

The current directory is put first on ``sys.path`` (a command run from the
project's root finds the project's modules without ``PYTHONPATH=.``), the
module is imported and the dotted attribute path is followed; ``attr()``
calls a factory, and an ``async def`` factory is run to completion. Every
failure, a ``SystemExit`` of the user's module included, is a
:class:`~inboxguard.ConfigurationError` naming the option and the fix.
"""

from __future__ import annotations

import asyncio
import importlib
import inspect
import os
import sys
from collections.abc import Awaitable, Sequence
from typing import Any

from inboxguard.errors import ConfigurationError

__all__ = ["import_from_cwd", "resolve_object"]

#: What to say when an application fails to import for want of a database
#: driver that inboxguard's extras do not install.
_DRIVER_HINTS = {
    "psycopg2": "; the postgresql extra installs psycopg 3: write postgresql+psycopg:// URLs",
    "MySQLdb": "; the mysql extra installs PyMySQL: write mysql+pymysql:// URLs",
}


def import_from_cwd(module_name: str, *, cwd: str | None = None) -> Any:
    """Import ``module_name`` with ``cwd`` (default: the current directory)
    first on ``sys.path``, as ``python -m`` and ``celery -A`` do.

    Raises:
        ImportError: the module (or one it imports) cannot be imported.
    """
    here = os.path.abspath(cwd or os.getcwd())
    if here not in (os.path.abspath(p or os.curdir) for p in sys.path):
        sys.path.insert(0, here)
    return importlib.import_module(module_name)


def resolve_object(
    spec: str,
    *,
    option: str = "--app",
    default_attrs: Sequence[str] = (),
    module_itself: bool = False,
    cwd: str | None = None,
) -> Any:
    """The object ``spec`` names: ``package.module:attr`` (``attr`` may be
    dotted: ``module:holder.app``). ``module:factory()`` calls the factory
    with no arguments and takes what it returns, after running it to
    completion when it is awaitable (an ``async def`` factory). A bare
    ``package.module`` is accepted when ``default_attrs`` is given (its first
    attribute found is used, as ``celery -A proj`` looks for ``proj.app`` and
    ``proj.celery``), or names the module itself when ``module_itself``.

    Raises:
        ConfigurationError: ``spec`` is malformed, its module cannot be
            imported, it has no such attribute, or importing it or calling
            the factory failed (``SystemExit`` included, as an application
            raises when its settings are missing); the message names
            ``option``.
    """
    module_name, sep, attr = spec.partition(":")
    call = attr.endswith("()")
    path = attr[:-2] if call else attr
    bare_ok = bool(default_attrs) or module_itself
    if not module_name or (sep and not path) or (not sep and not bare_ok):
        msg = (
            f"{option} {spec!r} must look like MODULE:ATTR, e.g. myproject.worker:app"
            " (MODULE:factory() calls a factory)"
        )
        raise ConfigurationError(msg)
    module = _import(spec, module_name, option, cwd)
    if not sep:
        return _default(spec, module, option, default_attrs, module_itself=module_itself)
    value: Any = module
    for part in path.split("."):
        try:
            value = getattr(value, part)
        except AttributeError as error:
            msg = (
                f"{option} {spec!r} could not be loaded: {module_name!r} has no attribute"
                f" {path!r} ({error})"
            )
            raise ConfigurationError(msg) from error
    return _called(spec, value, option) if call else value


def _import(spec: str, module_name: str, option: str, cwd: str | None) -> Any:
    try:
        return import_from_cwd(module_name, cwd=cwd)
    except ModuleNotFoundError as error:
        if error.name is not None and module_name.startswith(error.name):
            msg = (
                f"{option} {spec!r}: no module named {error.name!r} from"
                f" {os.path.abspath(cwd or os.getcwd())} (run the command from your"
                " project's root, or put the module on PYTHONPATH)"
            )
        else:
            msg = f"{option} {spec!r}: importing {module_name!r} failed: {error}"
            msg += _DRIVER_HINTS.get(error.name or "", "")
        raise ConfigurationError(msg) from error
    except (Exception, SystemExit) as error:  # the user's module raised while importing
        msg = (
            f"{option} {spec!r}: importing {module_name!r} failed: {type(error).__name__}: {error}"
        )
        raise ConfigurationError(msg) from error


def _default(
    spec: str, module: Any, option: str, default_attrs: Sequence[str], *, module_itself: bool
) -> Any:
    for name in default_attrs:
        if hasattr(module, name):
            return getattr(module, name)
    if module_itself:
        return module
    tried = ", ".join(repr(n) for n in default_attrs)
    msg = f"{option} {spec!r}: the module has none of {tried}; name it as MODULE:ATTR"
    raise ConfigurationError(msg)


def _called(spec: str, factory: Any, option: str) -> Any:
    if not callable(factory):
        msg = f"{option} {spec!r}: {factory!r} is not callable; drop the ()"
        raise ConfigurationError(msg)
    try:
        value = factory()
        if inspect.isawaitable(value):  # an async factory: run it to completion
            value = asyncio.run(_awaited(value))
    except (Exception, SystemExit) as error:  # the user's factory may fail any way
        msg = f"{option} {spec!r}: calling the factory failed: {type(error).__name__}: {error}"
        raise ConfigurationError(msg) from error
    return value


async def _awaited(value: Awaitable[Any]) -> Any:
    return await value
