"""The one way the operator commands (``stats``, ``explain``, ``quarantine``)
name a Redis inbox: ``--redis URL`` (or ``$INBOXGUARD_REDIS_URL``) and
``--key-prefix P``, instead of ``--db`` and ``--prefix``.

An explicit option beats an environment variable; ``--db`` and ``--redis``
together, or both variables set with neither option, is refused as
ambiguous. The URL is never printed with its password (:func:`redact`).
"""

from __future__ import annotations

import argparse
import datetime as dt
import os

from inboxguard import RedisInbox
from inboxguard.cli._args import add_database
from inboxguard.cli._db import ENV_VAR, redact
from inboxguard.cli._output import UsageError
from inboxguard.inbox.redis import client_from_url

__all__ = ["DEFAULT_KEY_PREFIX", "REDIS_ENV_VAR", "add_inbox_target", "open_redis", "redis_url"]

#: Where ``--redis`` is read from when no option names the inbox.
REDIS_ENV_VAR = "INBOXGUARD_REDIS_URL"
#: ``RedisInbox``'s default key prefix.
DEFAULT_KEY_PREFIX = "inboxguard:"
#: The table prefix ``--prefix`` defaults to (meaningless for Redis).
_TABLE_PREFIX = "inboxguard_"
#: Operators read the evidence, never guard with it: the retention is not consulted.
_UNCONSULTED_RETENTION = dt.timedelta(days=1)


def add_inbox_target(parser: argparse.ArgumentParser, what: str = "inbox") -> None:
    """``--db``/``--prefix`` (a SQL inbox) or ``--redis``/``--key-prefix`` (a Redis one)."""
    add_database(parser, what)
    parser.add_argument(
        "--redis",
        metavar="URL",
        default=None,
        help=f"redis:// URL of a RedisInbox's server, instead of --db (default:"
        f" ${REDIS_ENV_VAR}); its password is never printed",
    )
    parser.add_argument(
        "--key-prefix",
        default=None,
        metavar="P",
        help=f"the RedisInbox's key_prefix (default: {DEFAULT_KEY_PREFIX})",
    )


def redis_url(args: argparse.Namespace) -> str | None:
    """The Redis URL the command works on, or None for the database of ``--db``.

    Raises:
        UsageError: both kinds named, or an option of one used with the other.
    """
    flag = getattr(args, "redis", None)
    db = getattr(args, "db", None)
    db_explicit = bool(db) and db != os.environ.get(ENV_VAR)
    from_env = os.environ.get(REDIS_ENV_VAR) or None
    if flag and db_explicit:
        msg = "give --db (a SQL inbox) or --redis (a RedisInbox), not both"
        raise UsageError(msg)
    if flag:
        chosen: str | None = flag
    elif db_explicit:
        chosen = None
    elif from_env and db:
        msg = (
            f"both ${ENV_VAR} and ${REDIS_ENV_VAR} are set: pass --db or --redis to say"
            " which inbox to use"
        )
        raise UsageError(msg)
    else:
        chosen = from_env
    _check_prefixes(args, redis=chosen is not None)
    return chosen


def _check_prefixes(args: argparse.Namespace, *, redis: bool) -> None:
    if redis and getattr(args, "prefix", _TABLE_PREFIX) != _TABLE_PREFIX:
        msg = "--prefix is a SQL table prefix; a RedisInbox's prefix is --key-prefix"
        raise UsageError(msg)
    if not redis and getattr(args, "key_prefix", None) is not None:
        msg = "--key-prefix names a RedisInbox's keys: use it with --redis (or --prefix with --db)"
        raise UsageError(msg)


def open_redis(url: str, key_prefix: str | None) -> RedisInbox:
    """A :class:`~inboxguard.RedisInbox` on the server of ``url``, for reading
    and settling: an evicting server is accepted (``stats`` shows its
    policy), telemetry is off.

    Raises:
        UsageError: the ``redis`` package is missing, or the URL is unusable.
        ConfigurationError: the key prefix is unusable.
    """
    try:
        client = client_from_url(url)
    except ImportError:
        msg = "--redis needs the redis package: pip install 'inboxguard[redis]'"
        raise UsageError(msg) from None
    except ValueError as error:
        msg = f"--redis {redact(url)} is not a Redis URL ({error}); e.g. redis://host:6379/0"
        raise UsageError(msg) from None
    return RedisInbox(
        client,
        retention=_UNCONSULTED_RETENTION,
        key_prefix=key_prefix or DEFAULT_KEY_PREFIX,
        allow_eviction=True,
        telemetry=False,
    )
