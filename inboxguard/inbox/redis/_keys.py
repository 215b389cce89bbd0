"""Key names of a Redis inbox, and the Redis Cluster hash slot they live in.

Every key of one command (its evidence and its lease) carries one hash tag,
so they share a slot. The tag is a function of the command's identity
(consumer, command ID) and of nothing else: the command ID's own hash tag
when it has one (``"{acct-42}:t-1"``, by Redis's rule: the text between the
first ``{`` and the next ``}``), so the caller's keys tagged the same way
(``balance:{acct-42}``) land in the same slot and commit in the same
``EXEC`` on a cluster; otherwise a short hash of the consumer and command
ID. A ``hash_tag`` passed to the guard is only checked against the ID's:
a tag from outside the ID would make the same command, delivered with
another tag or none, a fresh one in other keys. The quarantine keys share
the tag ``{quarantine}`` of their own.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from inboxguard.errors import ConfigurationError

__all__ = [
    "CommandKeys",
    "KeySpace",
    "check_hash_tag",
    "check_key_prefix",
    "escape_pattern",
    "slot_of",
    "tag_of",
]

MAX_PREFIX = 64


def check_key_prefix(prefix: object) -> str:
    """Return a usable key prefix.

    Raises:
        ConfigurationError: not a str, empty, longer than 64 characters,
            non-printable, or containing ``{`` or ``}`` (the inbox's own hash
            tag must be the first one of each key).
    """
    if (
        not isinstance(prefix, str)
        or not prefix
        or len(prefix) > MAX_PREFIX
        or not prefix.isprintable()
        or "{" in prefix
        or "}" in prefix
    ):
        msg = (
            f"key_prefix must be a printable str of 1 to {MAX_PREFIX} characters without"
            f" '{{' or '}}', got {prefix!r}; e.g. key_prefix='inboxguard:'"
        )
        raise ConfigurationError(msg)
    return prefix


def check_hash_tag(tag: object) -> str:
    """Return a usable hash tag (the part between braces).

    Raises:
        ConfigurationError: not a non-empty printable str without braces.
    """
    if (
        not isinstance(tag, str)
        or not tag
        or len(tag) > 255
        or not tag.isprintable()
        or "{" in tag
        or "}" in tag
    ):
        msg = (
            "hash_tag must be the non-empty text between the braces of your own keys"
            f" (for 'balance:{{acct-42}}' pass hash_tag='acct-42'), got {tag!r}"
        )
        raise ConfigurationError(msg)
    return tag


@dataclass(frozen=True, slots=True)
class CommandKeys:
    """The keys of one command: its evidence hash and its lease string."""

    evidence: str
    lease: str
    tag: str


class KeySpace:
    """The key names under one prefix."""

    def __init__(self, prefix: str) -> None:
        self.prefix = check_key_prefix(prefix)
        base = f"{prefix}{{quarantine}}:"
        self.quarantine_seq = base + "seq"
        self.quarantine_index = base + "index"
        self.quarantine_record = base + "record:"
        self.quarantine_identity = base + "identity:"
        self.quarantine_replays = base + "replays:"
        self.quarantine_actions = base + "actions:"

    def command(self, consumer: str, command_id: str, hash_tag: str | None = None) -> CommandKeys:
        """The keys of (``consumer``, ``command_id``), tagged by the command ID's
        own hash tag, or by default.

        Raises:
            ConfigurationError: ``hash_tag`` is given and is not the command
                ID's own hash tag.
        """
        own = tag_of(command_id)
        if hash_tag is not None and check_hash_tag(hash_tag) != own:
            raise _outside_tag_error(command_id, hash_tag, own)
        tag = default_tag(consumer, command_id) if own is None else own
        # The lengths make the name unambiguous whatever the IDs contain.
        name = f"{len(consumer)}:{consumer}:{command_id}"
        return CommandKeys(
            evidence=f"{self.prefix}{{{tag}}}:evidence:{name}",
            lease=f"{self.prefix}{{{tag}}}:lease:{name}",
            tag=tag,
        )

    def evidence_pattern(self) -> str:
        """A SCAN pattern matching every evidence key of this prefix."""
        return f"{escape_pattern(self.prefix)}{{*}}:evidence:*"

    def quarantine_identity_key(
        self, consumer: str, command_id: str, reason: str, incoming: str
    ) -> str:
        """The key naming the record of one refusal identity (counted again on a repeat)."""
        return (
            f"{self.quarantine_identity}{len(consumer)}:{consumer}:{len(command_id)}:"
            f"{command_id}:{reason}:{incoming}"
        )


def tag_of(command_id: str) -> str | None:
    """The hash tag a Redis Cluster reads in ``command_id`` (the text between
    its first ``{`` and the next ``}``, if not empty), or None."""
    start = command_id.find("{")
    if start < 0:
        return None
    end = command_id.find("}", start + 1)
    if end <= start + 1:
        return None
    return command_id[start + 1 : end]


def _outside_tag_error(command_id: str, hash_tag: str, own: str | None) -> ConfigurationError:
    has = f"whose own hash tag is {{{own}}}" if own is not None else "which has no hash tag"
    msg = (
        f"hash_tag={hash_tag!r} is not part of command ID {command_id!r} ({has}): a tag from"
        " outside the ID would become part of the command's identity (the same command"
        " delivered with another tag, or none, would be stored in other keys and applied"
        f" again). Put the tag in the command ID, e.g. command_id='{{{hash_tag}}}:"
        f"{command_id}'; the inbox then reads it there (hash_tag= may be left out)"
    )
    return ConfigurationError(msg)


def default_tag(consumer: str, command_id: str) -> str:
    """The hash tag of a command's keys when the caller gives none."""
    raw = f"{consumer}\x00{command_id}".encode("utf-8", "surrogatepass")
    return hashlib.blake2b(raw, digest_size=8).hexdigest()


def slot_of(key: object) -> int:
    """The Redis Cluster hash slot of ``key`` (CRC16 of its hash tag, mod 16384)."""
    from redis.crc import key_slot  # noqa: PLC0415 - redis is optional

    if isinstance(key, str):
        key = key.encode("utf-8", "surrogatepass")
    elif isinstance(key, memoryview):
        key = key.tobytes()
    elif isinstance(key, int | float):
        key = repr(key).encode()
    if not isinstance(key, bytes):
        msg = f"cannot compute the hash slot of key {key!r}"
        raise ConfigurationError(msg)
    return int(key_slot(key))


def escape_pattern(text: str) -> str:
    """``text`` with the glob characters of SCAN MATCH escaped."""
    return "".join("\\" + c if c in "*?[]\\" else c for c in text)
