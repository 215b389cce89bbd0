"""The requests of the Redis guard flow (:mod:`._flow`) and the replies its
drivers (:mod:`._drive`, :mod:`._drive_async`) decode for it."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Generator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from inboxguard.inbox._records import InboxEntry
from inboxguard.inbox.redis._keys import CommandKeys

__all__ = [
    "POLL_INTERVAL",
    "Begin",
    "BlockExit",
    "ClaimLease",
    "Command",
    "Commit",
    "Found",
    "HandOver",
    "Inspect",
    "Pause",
    "RedisFlow",
    "Refuse",
    "Release",
    "Request",
    "SlotTable",
    "decoded_result",
    "found_from_hash",
    "found_from_reply",
]

#: How often a waiting delivery asks again whether the lease holder is done.
POLL_INTERVAL = 0.02

Command = tuple[Any, ...]


@dataclass(frozen=True, slots=True)
class Begin:
    """Check the caller's pipeline; reply None."""


@dataclass(frozen=True, slots=True)
class Refuse:
    """Write (or count again) a quarantine record outside the caller's
    transaction; reply True once written, False after logging it."""

    values: dict[str, Any]


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
class HandOver:
    """Start ``MULTI``, queue ``claim``, run the caller's block with ``entry``;
    reply a :class:`BlockExit`."""

    entry: InboxEntry
    claim: tuple[Command, ...]


@dataclass(frozen=True, slots=True)
class BlockExit:
    """How the block ended: ``kept`` when the pipeline is still in the ``MULTI``
    the guard started (with its claim queued first); ``queued``: the caller's
    commands; ``error``: what the block raised (the driver re-raises it)."""

    kept: bool
    queued: tuple[Command, ...] = ()
    error: Exception | None = None


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


Request = Begin | Refuse | ClaimLease | Pause | HandOver | SlotTable | Commit | Inspect | Release
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
