"""The Lua scripts of the Redis inbox: each one read-and-write that must not
interleave with another client's."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

__all__ = [
    "CLAIM",
    "FORGET",
    "QUARANTINE",
    "RELEASE",
    "RESOLVE",
    "Script",
    "no_script",
    "run_script",
    "run_script_async",
]


class Script:
    """A Lua script's source and SHA1 (for ``EVALSHA``)."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.sha = hashlib.sha1(source.encode(), usedforsecurity=False).hexdigest()


#: KEYS: evidence, lease; ARGV: token, lease milliseconds.
#: {"duplicate", digest, result-or-"", has-result "1"/"0", result_expires_at-or-""}
#: when evidence is stored; {"fresh"} once the lease is ours;
#: {"busy", lease PTTL in ms} while another delivery holds it.
CLAIM = Script("""
local e = redis.call('HMGET', KEYS[1], 'digest', 'result', 'result_expires_at')
if e[1] then
  local has = '0'
  if e[2] then has = '1' end
  return {'duplicate', e[1], e[2] or '', has, e[3] or ''}
end
if redis.call('SET', KEYS[2], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return {'fresh'}
end
return {'busy', tostring(redis.call('PTTL', KEYS[2]))}
""")

#: KEYS: lease; ARGV: token. Deletes the lease only while it is ours.
RELEASE = Script("""
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
""")

#: KEYS: sequence, index, identity; ARGV: record key prefix, consumer,
#: command_id, reason, incoming digest, stored digest or "", now, details or "".
#: Writes a new open record (no expiry), or counts a repeat of the same
#: refusal again and reopens it. Returns the record's id.
QUARANTINE = Script("""
local id = redis.call('GET', KEYS[3])
if id then
  local key = ARGV[1] .. id
  redis.call('HINCRBY', key, 'occurrences', 1)
  redis.call('HSET', key, 'last_seen_at', ARGV[7], 'status', 'open',
             'stored_digest', ARGV[6], 'details', ARGV[8])
  return tonumber(id)
end
id = redis.call('INCR', KEYS[1])
local key = ARGV[1] .. id
redis.call('HSET', key, 'id', id, 'consumer', ARGV[2], 'command_id', ARGV[3],
           'reason', ARGV[4], 'incoming_digest', ARGV[5], 'stored_digest', ARGV[6],
           'first_seen_at', ARGV[7], 'last_seen_at', ARGV[7], 'occurrences', 1,
           'status', 'open', 'details', ARGV[8])
redis.call('ZADD', KEYS[2], id, id)
redis.call('SET', KEYS[3], id)
return id
""")

#: KEYS: record. Marks an open record resolved; 1 when it was open, else 0.
RESOLVE = Script("""
if redis.call('HGET', KEYS[1], 'status') == 'open' then
  redis.call('HSET', KEYS[1], 'status', 'resolved')
  return 1
end
return 0
""")

#: KEYS: evidence; ARGV: the refused (incoming) digest. Deletes evidence that
#: refuses that digest (a payload mismatch's release), returning
#: {digest, processed_at}; {} when there is none or it holds that digest.
FORGET = Script("""
local e = redis.call('HMGET', KEYS[1], 'digest', 'processed_at')
if e[1] and e[1] ~= ARGV[1] then
  redis.call('DEL', KEYS[1])
  return {e[1], e[2] or ''}
end
return {}
""")


def run_script(conn: Any, script: Script, keys: Sequence[Any], args: Sequence[Any]) -> Any:
    """``EVALSHA``, loading the script with ``EVAL`` when the server lacks it."""
    try:
        return conn.execute_command("EVALSHA", script.sha, len(keys), *keys, *args)
    except Exception as error:
        if not no_script(error):
            raise
        return conn.execute_command("EVAL", script.source, len(keys), *keys, *args)


def no_script(error: Exception) -> bool:
    """The server does not have the script yet (redis-py's ``NoScriptError``)."""
    return type(error).__name__ == "NoScriptError" or "NOSCRIPT" in str(error)


async def run_script_async(
    conn: Any, script: Script, keys: Sequence[Any], args: Sequence[Any]
) -> Any:
    """:func:`run_script` on a redis.asyncio connection."""
    try:
        return await conn.execute_command("EVALSHA", script.sha, len(keys), *keys, *args)
    except Exception as error:
        if not no_script(error):
            raise
        return await conn.execute_command("EVAL", script.source, len(keys), *keys, *args)
