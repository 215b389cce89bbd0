"""The settings a :class:`~inboxguard.RedisInbox` is built with, checked before use."""

from __future__ import annotations

import datetime as dt
import inspect

from inboxguard.errors import ConfigurationError

__all__ = ["check_client", "check_durations", "is_cluster", "is_coroutine"]


def check_client(client: object) -> None:
    """Refuse anything but a sync redis-py client (a pipeline, an asyncio client).

    Raises:
        ConfigurationError: naming what to pass instead.
    """
    needed = ("pipeline", "execute_command", "hgetall", "info")
    if all(hasattr(client, name) for name in needed) and not hasattr(client, "command_stack"):
        execute = client.execute_command  # type: ignore[attr-defined]
        if not is_coroutine(execute):
            return
    msg = (
        f"RedisInbox needs a sync redis-py client (redis.Redis or redis.RedisCluster), got"
        f" {type(client).__name__}; guard() takes pipelines of it, and guard_async() takes"
        " redis.asyncio pipelines on the same server"
    )
    raise ConfigurationError(msg)


def is_coroutine(fn: object) -> bool:
    """Whether ``fn`` is a coroutine function (an asyncio client's method)."""
    return inspect.iscoroutinefunction(fn)


def check_durations(lock_timeout: object, lease: object) -> None:
    """Refuse an unusable lock timeout or lease.

    Raises:
        ConfigurationError: naming the setting.
    """
    if lock_timeout is not None and (
        not isinstance(lock_timeout, dt.timedelta) or lock_timeout < dt.timedelta(0)
    ):
        msg = f"lock_timeout must be a non-negative timedelta or None, got {lock_timeout!r}"
        raise ConfigurationError(msg)
    if not isinstance(lease, dt.timedelta) or lease < dt.timedelta(milliseconds=1):
        msg = f"lease must be a timedelta of at least 1 ms, got {lease!r}"
        raise ConfigurationError(msg)


def is_cluster(client: object) -> bool:
    """Whether ``client`` is a redis-py ``RedisCluster`` (by class name: no import)."""
    return any(cls.__name__ == "RedisCluster" for cls in type(client).__mro__)
