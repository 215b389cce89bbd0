"""The requests of the Redis guard flow (:mod:`._flow`) and the replies its
drivers (:mod:`._drive`, :mod:`._drive_async`) decode for it.

The flow speaks the SQL guard's vocabulary (:mod:`inboxguard.inbox._flow`)
wherever the two stores do the same thing: :class:`Connect` (check the
caller's pipeline; reply None), :class:`WriteQuarantine` (a record outside
the caller's transaction, without a SQL statement), :class:`HandOver` and
:class:`BlockExit` (with the commands the block queued). The requests below
are what only a Redis pipeline does: the lease, ``MULTI``, the slot check,
``EXEC`` and the reads and releases beside it.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Generator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from inboxguard.inbox._flow import BlockExit, Connect, HandOver, WriteQuarantine
from inboxguard.inbox._records import InboxEntry
from inboxguard.inbox.redis._keys import CommandKeys

__all__ = [
    "POLL_INTERVAL",
    "BlockExit",
    "ClaimLease",
    "Command",
    "Commit",
    "Connect",
    "Found",
    "HandOver",
    "Inspect",
    "Multi",
    "Pause",
    "RedisFlow",
    "Release",
    "Request",
    "SlotTable",
    "WriteQuarantine",
    "decoded_result",
    "found_from_hash",
    "found_from_reply",
]

#: How often a waiting delivery asks again whether the lease holder is done.
POLL_INTERVAL = 0.02

Command = tuple[Any, ...]


@dataclass(frozen=True, slots=True)
class ClaimLease:
    """``WATCH`` the evidence key (once), then run the claim script; reply a :class:`Found`."""

    keys: CommandKeys
    token: str
    lease_ms: int


@dataclass(frozen=True, slots=True)
class Found:
    """What the claim script found: ``state`` is fresh, duplicate or busy."""

    state: str
    digest: str = ""
    result_json: str | None = None
    result_expires_at: dt.datetime | None = None
    lease_left_ms: int = 0


@dataclass(frozen=True, slots=True)
class Pause:
    """Sleep ``seconds``; reply None."""

    seconds: float


@dataclass(frozen=True, slots=True)
class Multi:
    """Start ``MULTI`` and queue ``claim`` first (the guard's mark that the
    queue is still its own); reply None. The :class:`HandOver` follows."""

    claim: tuple[Command, ...]


@dataclass(frozen=True, slots=True)
class SlotTable:
    """Reply the keys of each command in ``commands`` (the server's key
    positions; ``COMMAND GETKEYS`` for commands with movable keys)."""

    commands: tuple[Command, ...]


@dataclass(frozen=True, slots=True)
class Commit:
    """Queue ``extra`` and send ``EXEC``; reply True when applied, False when
    ``EXEC`` was aborted by a watched key (nothing applied)."""

    extra: tuple[Command, ...]


@dataclass(frozen=True, slots=True)
class Inspect:
    """Read the command's evidence outside the transaction; reply a :class:`Found`
    (state duplicate, or fresh when there is none)."""

    keys: CommandKeys


@dataclass(frozen=True, slots=True)
class Release:
    """Give the lease back if it is still ours; reply None."""

    keys: CommandKeys
    token: str


Request = (
    Connect
    | WriteQuarantine
    | ClaimLease
    | Pause
    | Multi
    | HandOver[InboxEntry]
    | SlotTable
    | Commit
    | Inspect
    | Release
)
RedisFlow = Generator[Request, Any, None]


def found_from_reply(reply: Sequence[Any]) -> Found:
    """Decode the claim script's reply (bytes or str)."""
    items = [item.decode() if isinstance(item, bytes) else item for item in reply]
    state = str(items[0])
    if state == "duplicate":
        return Found(
            state,
            digest=str(items[1]),
            result_json=str(items[2]) if items[3] == "1" else None,
            result_expires_at=dt.datetime.fromisoformat(items[4]) if items[4] else None,
        )
    if state == "busy":
        return Found(state, lease_left_ms=max(0, int(items[1])))
    return Found(state)


def found_from_hash(stored: Mapping[Any, Any]) -> Found:
    """Decode an evidence hash read by ``HGETALL`` (empty: no evidence)."""
    values = {
        (k.decode() if isinstance(k, bytes) else k): (v.decode() if isinstance(v, bytes) else v)
        for k, v in stored.items()
    }
    if "digest" not in values:
        return Found("fresh")
    expires = values.get("result_expires_at")
    return Found(
        "duplicate",
        digest=values["digest"],
        result_json=values.get("result"),
        result_expires_at=dt.datetime.fromisoformat(expires) if expires else None,
    )


def decoded_result(found: Found) -> Any:
    """The stored result of ``found`` as JSON, None when there is none."""
    return json.loads(found.result_json) if found.result_json is not None else None
