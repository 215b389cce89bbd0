"""The frame every database subcommand runs in: open the engine, map each
failure to its exit status and a one-line message, dispose of the engine.
The operator commands that also read a Redis inbox run in
:func:`run_on_inbox`, which opens one or the other."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable

from sqlalchemy.engine import Engine, make_url
from sqlalchemy.exc import DBAPIError, OperationalError

from inboxguard import InboxStore
from inboxguard.cli._db import SECRET_KEYS, open_engine, redact
from inboxguard.cli._output import EXIT_UNREACHABLE, EXIT_USAGE, UsageError
from inboxguard.cli._redis import open_redis, redis_url
from inboxguard.errors import InboxGuardError
from inboxguard.inbox.redis import error_kind

__all__ = ["Action", "InboxAction", "fail", "run_on_database", "run_on_inbox", "scrub"]

#: A subcommand's body: the engine and the parsed arguments; the exit status.
Action = Callable[[Engine, argparse.Namespace], int]
#: The body of a command that works on either kind of inbox.
InboxAction = Callable[[Engine | InboxStore, argparse.Namespace], int]


def fail(command: str, message: str, status: int) -> int:
    """Print ``inboxguard COMMAND: message`` on stderr; return ``status``."""
    print(f"inboxguard {command}: {message}", file=sys.stderr)
    return status


def scrub(text: str, raw_url: str | None) -> str:
    """``text`` with the URL's password (and the URL itself) masked."""
    if not raw_url:
        return text
    text = text.replace(raw_url, redact(raw_url))
    try:
        url = make_url(raw_url)
    except Exception:  # an unparsable URL was refused before any message
        return text
    secrets = [str(url.password)] if url.password else []
    secrets += [str(v) for k, v in url.query.items() if SECRET_KEYS.search(k) and v]
    for secret in secrets:
        text = text.replace(secret, "***")
    return text


def run_on_database(
    command: str, args: argparse.Namespace, action: Action, *, read_only: bool
) -> int:
    """Run ``action`` on the engine of ``--db``.

    Exit 2 on bad input or configuration (no URL, a missing driver, a
    missing table, a bad prefix), 3 when the database cannot be reached or
    refuses, else the action's status.
    """
    raw = getattr(args, "db", None)
    try:
        engine = open_engine(args, read_only=read_only)
    except UsageError as error:
        return fail(command, str(error), EXIT_USAGE)
    try:
        return action(engine, args)
    except (UsageError, InboxGuardError) as error:
        return fail(command, scrub(str(error), raw), EXIT_USAGE)
    except OperationalError as error:
        shown = redact(engine.url)
        reason = scrub(str(error.orig), raw)
        return fail(command, f"cannot use the database {shown}: {reason}", EXIT_UNREACHABLE)
    except DBAPIError as error:
        reason = scrub(str(error.orig), raw)
        return fail(command, f"the database refused: {reason}", EXIT_UNREACHABLE)
    finally:
        engine.dispose()


def run_on_inbox(
    command: str, args: argparse.Namespace, action: InboxAction, *, read_only: bool
) -> int:
    """Run ``action`` on the Redis inbox of ``--redis`` (or
    ``$INBOXGUARD_REDIS_URL``), else on the engine of ``--db``, with the same
    exit statuses: 2 bad input, 3 the server cannot be reached or refuses."""
    try:
        url = redis_url(args)
    except UsageError as error:
        return fail(command, str(error), EXIT_USAGE)
    if url is None:
        return run_on_database(command, args, action, read_only=read_only)
    return _run_on_redis(command, url, args, action)


def _run_on_redis(command: str, url: str, args: argparse.Namespace, action: InboxAction) -> int:
    shown = redact(url)
    inbox = None
    try:
        inbox = open_redis(url, args.key_prefix)
        return action(inbox, args)
    except (UsageError, InboxGuardError) as error:
        return fail(command, scrub(str(error), url), EXIT_USAGE)
    except Exception as error:
        kind = error_kind(error)
        if kind is None:
            raise
        reason = scrub(str(error), url)
        if kind == "unreachable":
            return fail(command, f"cannot use the Redis server {shown}: {reason}", EXIT_UNREACHABLE)
        return fail(command, f"the Redis server {shown} refused: {reason}", EXIT_UNREACHABLE)
    finally:
        if inbox is not None:
            inbox.client.close()
