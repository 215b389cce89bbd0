"""What the Redis server promises about the inbox's evidence, read from the
server itself: whether keys can be evicted, and how durable a committed
``EXEC`` is (AOF and its fsync policy, RDB snapshots, replicas)."""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from inboxguard._core.guarantee import Setting
from inboxguard.errors import ConfigurationError

__all__ = [
    "RedisDurability",
    "RedisDurabilityWarning",
    "check_eviction",
    "client_from_url",
    "describe_boundary",
    "error_kind",
    "read_durability",
    "volatile_problem",
    "warn_if_volatile",
]

_FSYNC_LOSS = {
    "always": "nothing acknowledged (fsync before each EXEC is acknowledged)",
    "everysec": "up to about one second of acknowledged commands",
    "no": "whatever the operating system had not yet flushed (tens of seconds)",
}


@dataclass(frozen=True, slots=True)
class RedisDurability:
    """How long a committed Redis inbox claim survives, as the server reported it.

    ``maxmemory_policy`` is the eviction policy (``noeviction`` keeps every
    key); ``appendonly`` and ``appendfsync`` say whether and how often the
    append-only file is synced; ``save`` is the RDB snapshot schedule (empty:
    none); ``role`` and ``replicas``: replication, which is asynchronous (a
    failover can lose acknowledged writes, ``WAIT`` aside). ``summary`` says
    what a server crash can lose, in one sentence. ``None`` means the server
    refused to tell (``CONFIG`` disabled on managed services).
    """

    maxmemory_policy: str | None
    appendonly: bool | None
    appendfsync: str | None
    save: str | None
    role: str | None
    replicas: int | None
    summary: str

    def as_dict(self) -> dict[str, Any]:
        """The fields as plain data (for the guarantee table and ``stats``)."""
        return asdict(self)


class RedisDurabilityWarning(UserWarning):
    """The Redis server keeps the inbox's evidence only in memory (AOF off, no
    RDB snapshot): a restart loses every claim, and every command whose
    message is delivered again afterwards is applied again. Issued by
    :class:`~inboxguard.RedisInbox` at construction and by its
    ``check_schema()``; ``inboxguard doctor`` reports it too."""


def volatile_problem(durability: RedisDurability) -> str | None:
    """What is wrong when the server keeps nothing on disk, else None (also
    when the server did not say)."""
    if durability.appendonly is not False or durability.save:
        return None
    return (
        "the Redis server keeps nothing on disk (appendonly no, no RDB save schedule):"
        " a restart loses every claim, and a command whose message is delivered again"
        " afterwards is applied again. Turn on the append-only file (CONFIG SET appendonly"
        " yes, and appendonly yes in redis.conf) or keep the inbox in a SQL database"
    )


def warn_if_volatile(client: Any, stacklevel: int = 3) -> RedisDurability:
    """Read the server's durability and warn (:class:`RedisDurabilityWarning`)
    when it keeps nothing on disk; return what was read."""
    durability = read_durability(client)
    problem = volatile_problem(durability)
    if problem is not None:
        warnings.warn(problem, RedisDurabilityWarning, stacklevel=stacklevel)
    return durability


def _text(value: Any) -> str | None:
    if value is None:
        return None
    return value.decode() if isinstance(value, bytes) else str(value)


def _config(client: Any, name: str) -> str | None:
    try:
        found = client.config_get(name)
    except Exception:  # CONFIG is often renamed or disabled on managed servers
        return None
    value = {_text(k): v for k, v in dict(found).items()}.get(name)
    return _text(value)


def _info(client: Any, section: str) -> Mapping[str, Any]:
    try:
        return dict(client.info(section))
    except Exception:
        return {}


def read_policy(client: Any) -> str | None:
    """The server's ``maxmemory-policy`` (INFO first: it works where CONFIG is disabled)."""
    return _text(_info(client, "memory").get("maxmemory_policy")) or _config(
        client, "maxmemory-policy"
    )


def check_eviction(client: Any, *, allow_eviction: bool) -> str | None:
    """Refuse a server that may evict keys, unless ``allow_eviction``; return the policy.

    Raises:
        ConfigurationError: ``maxmemory-policy`` is not ``noeviction`` (an
            ``allkeys-*`` or ``volatile-*`` policy would delete evidence, whose
            keys carry a TTL, under memory pressure, and the next delivery of
            the command would be applied again), or it cannot be read.
    """
    policy = read_policy(client)
    if policy == "noeviction" or allow_eviction:
        return policy
    if policy is None:
        msg = (
            "could not read the Redis server's maxmemory-policy (INFO memory and CONFIG GET"
            " both refused): an evicting policy would silently delete inbox evidence and let"
            " a command apply twice. Check it is noeviction, then pass allow_eviction=True"
            " to RedisInbox to accept the risk knowingly"
        )
    else:
        msg = (
            f"the Redis server's maxmemory-policy is {policy!r}: under memory pressure it"
            " may evict inbox evidence (its keys expire at the retention horizon, so"
            " volatile-* policies pick them too), and a redelivered command would then be"
            " applied twice. Set `CONFIG SET maxmemory-policy noeviction` (and"
            " maxmemory-policy noeviction in redis.conf), use a separate Redis for the"
            " inbox, or pass allow_eviction=True to RedisInbox to accept the risk knowingly"
        )
    raise ConfigurationError(msg)


def read_durability(client: Any) -> RedisDurability:
    """Read the eviction policy, persistence and replication of the server."""
    persistence = _info(client, "persistence")
    replication = _info(client, "replication")
    aof = persistence.get("aof_enabled")
    appendonly: bool | None = None if aof is None else bool(int(aof))
    if appendonly is None:
        raw = _config(client, "appendonly")
        appendonly = None if raw is None else raw == "yes"
    fsync = _config(client, "appendfsync")
    save = _config(client, "save")
    role = _text(replication.get("role"))
    replicas = replication.get("connected_slaves")
    policy = read_policy(client)
    return RedisDurability(
        maxmemory_policy=policy,
        appendonly=appendonly,
        appendfsync=fsync,
        save=save,
        role=role,
        replicas=None if replicas is None else int(replicas),
        summary=_summary(policy, appendonly, fsync, save),
    )


def _summary(
    policy: str | None, appendonly: bool | None, fsync: str | None, save: str | None
) -> str:
    if appendonly:
        loss = _FSYNC_LOSS.get(fsync or "", f"an amount set by appendfsync={fsync!r}")
        crash = f"AOF is on (appendfsync {fsync}): a server crash loses {loss}."
    elif appendonly is False and save:
        crash = f"AOF is off, RDB snapshots ({save!r}): a crash loses all since the last one."
    elif appendonly is False:
        crash = "No persistence (AOF off, no RDB snapshot): a restart loses everything."
    else:
        crash = "The server did not report its persistence settings."
    together = (
        " A claim and the consumer's writes are lost together (one EXEC), never one"
        " without the other; the lost commands' messages were already acknowledged."
        " Replication is asynchronous: a failover can lose acknowledged EXECs the same way."
    )
    evicts = "" if policy == "noeviction" else f" Eviction policy {policy!r} may delete evidence."
    return crash + together + evicts


def client_from_url(url: str) -> Any:
    """A sync ``redis.Redis`` client of ``url`` (for the operator commands).

    Raises:
        ImportError: the ``redis`` package is not installed.
        ValueError: ``url`` is not a Redis URL.
    """
    import redis  # noqa: PLC0415 - optional

    return redis.Redis.from_url(url)


def error_kind(error: BaseException) -> str | None:
    """``"unreachable"`` (connection or timeout), ``"refused"`` (any other
    Redis error) or None when ``error`` is not redis-py's."""
    try:
        from redis import exceptions  # noqa: PLC0415 - optional
    except ImportError:
        return None
    if isinstance(error, exceptions.ConnectionError | exceptions.TimeoutError):
        return "unreachable"
    return "refused" if isinstance(error, exceptions.RedisError) else None


#: What a Redis guarantee table states of the server's durability, read from it.
_STATED = ("maxmemory_policy", "appendonly", "appendfsync", "save", "role", "replicas")


def describe_boundary(
    durability: RedisDurability, key_prefix: str
) -> tuple[str, dict[str, Setting]]:
    """A Redis inbox's transaction boundary as its guarantee table states it."""
    found = durability.as_dict()
    settings: dict[str, Setting] = {"store": "redis", "key_prefix": key_prefix}
    settings.update({f"server.{name}": found[name] for name in _STATED})
    text = (
        "one Redis MULTI/EXEC (WATCH + lease): the evidence key (prefix"
        f" {key_prefix!r}) commits with the handler's queued writes in one EXEC,"
        f" or neither does; durability read from the server: {durability.summary}"
    )
    return text, settings
