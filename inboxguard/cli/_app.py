"""``module:attr`` arguments, resolved the way ``celery -A`` resolves them.

The current directory is put first on ``sys.path`` (a command run from the
project's root finds the project's modules without ``PYTHONPATH=.``), the
module is imported and the dotted attribute path is followed. Every failure
is a :class:`~inboxguard.ConfigurationError` naming the option and the fix.
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Sequence
from typing import Any

from inboxguard.errors import ConfigurationError

__all__ = ["import_from_cwd", "resolve_object"]


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
    cwd: str | None = None,
) -> Any:
    """The object ``spec`` names: ``package.module:attr`` (``attr`` may be
    dotted: ``module:holder.app``). A bare ``package.module`` is accepted when
    ``default_attrs`` is given: its first attribute found is used (as
    ``celery -A proj`` looks for ``proj.app`` and ``proj.celery``).

    Raises:
        ConfigurationError: ``spec`` is malformed, its module cannot be
            imported, or it has no such attribute; the message names
            ``option``.
    """
    module_name, sep, attr = spec.partition(":")
    if not module_name or (sep and not attr) or (not sep and not default_attrs):
        msg = f"{option} {spec!r} must look like MODULE:ATTR, e.g. myproject.worker:app"
        raise ConfigurationError(msg)
    try:
        module = import_from_cwd(module_name, cwd=cwd)
    except ModuleNotFoundError as error:
        if error.name is not None and module_name.startswith(error.name):
            msg = (
                f"{option} {spec!r}: no module named {error.name!r} from"
                f" {os.path.abspath(cwd or os.getcwd())} (run the command from your"
                " project's root, or put the module on PYTHONPATH)"
            )
        else:
            msg = f"{option} {spec!r}: importing {module_name!r} failed: {error}"
        raise ConfigurationError(msg) from error
    except Exception as error:  # the user's module raised while importing
        msg = (
            f"{option} {spec!r}: importing {module_name!r} failed: {type(error).__name__}: {error}"
        )
        raise ConfigurationError(msg) from error
    if not sep:
        for name in default_attrs:
            if hasattr(module, name):
                return getattr(module, name)
        tried = ", ".join(repr(n) for n in default_attrs)
        msg = f"{option} {spec!r}: the module has none of {tried}; name it as MODULE:ATTR"
        raise ConfigurationError(msg)
    value: Any = module
    for part in attr.split("."):
        try:
            value = getattr(value, part)
        except AttributeError as error:
            msg = f"{option} {spec!r}: {module_name!r} has no attribute {attr!r} ({error})"
            raise ConfigurationError(msg) from error
    return value
