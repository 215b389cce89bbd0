"""The claim's ``WATCH`` and lease script in one write to the server.

The guard's claim on Redis is ``WATCH`` of the evidence key, then the lease
script (``EVALSHA``): two commands whose order matters (the watch must be in
place before the script reads the key) but whose replies the guard reads only
after both. On a plain redis-py pipeline (sync or asyncio) that is not yet
watching, :func:`watch_and_run` and :func:`watch_and_run_async` send the two
in one write and read both replies, so the claim costs one round trip instead
of two; the pipeline is then watching, exactly as after ``pipe.watch()``.

Anything else (a ``ClusterPipeline``, a pipeline already watching, a
connection that fails before the write is sent) takes the two-command path,
with redis-py's own retries. A connection lost after the write is handled as
redis-py handles an error while watching: the connection is dropped, the
pipeline reset, and ``WatchError`` raised, which the guard retries.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

from inboxguard.inbox.redis._scripts import Script, no_script, run_script, run_script_async

__all__ = ["watch_and_run", "watch_and_run_async"]


def _plain(pipe: Any, module: str) -> bool:
    found = sys.modules.get(module)
    return found is not None and type(pipe) is found.Pipeline and not pipe.watching


def _commands(key: Any, script: Script, keys: Sequence[Any], args: Sequence[Any]) -> list[Any]:
    return [("WATCH", key), ("EVALSHA", script.sha, len(keys), *keys, *args)]


def watch_and_run(
    pipe: Any, key: Any, script: Script, keys: Sequence[Any], args: Sequence[Any]
) -> Any:
    """``WATCH key``, then ``script`` over ``keys`` and ``args``, on ``pipe``;
    the script's reply."""
    if not _plain(pipe, "redis.client"):
        pipe.watch(key)
        return run_script(pipe, script, keys, args)
    conn = pipe.connection or _connection(pipe.connection_pool)
    pipe.connection = conn
    try:
        conn.send_packed_command(conn.pack_commands(_commands(key, script, keys, args)))
    except _lost():
        conn.disconnect()
        pipe.watch(key)  # redis-py's own path, with its retries
        return run_script(pipe, script, keys, args)
    try:
        pipe.parse_response(conn, "WATCH")  # the pipeline is watching from here
        try:
            return pipe.parse_response(conn, "EVALSHA")
        except _redis_error("ResponseError") as error:
            if not no_script(error):
                raise
        return pipe.execute_command("EVAL", script.source, len(keys), *keys, *args)
    except _lost() as error:
        conn.disconnect()
        pipe.reset()
        raise _redis_error("WatchError")(f"{type(error).__name__} while watching") from error


async def watch_and_run_async(
    pipe: Any, key: Any, script: Script, keys: Sequence[Any], args: Sequence[Any]
) -> Any:
    """:func:`watch_and_run` on a redis.asyncio pipeline."""
    if not _plain(pipe, "redis.asyncio.client"):
        await pipe.watch(key)
        return await run_script_async(pipe, script, keys, args)
    conn = pipe.connection or await _connection(pipe.connection_pool)
    pipe.connection = conn
    try:
        await conn.send_packed_command(conn.pack_commands(_commands(key, script, keys, args)))
    except _lost():
        await conn.disconnect()
        await pipe.watch(key)
        return await run_script_async(pipe, script, keys, args)
    try:
        await pipe.parse_response(conn, "WATCH")
        try:
            return await pipe.parse_response(conn, "EVALSHA")
        except _redis_error("ResponseError") as error:
            if not no_script(error):
                raise
        return await pipe.execute_command("EVAL", script.source, len(keys), *keys, *args)
    except _lost() as error:
        await conn.disconnect()
        await pipe.reset()
        raise _redis_error("WatchError")(f"{type(error).__name__} while watching") from error


def _connection(pool: Any) -> Any:
    """A connection of ``pool`` (redis-py before 5.3 wants a command name)."""
    try:
        return pool.get_connection()
    except TypeError:
        return pool.get_connection("WATCH")


def _lost() -> tuple[type[Exception], ...]:
    """The errors of a connection that broke (redis-py's and the socket's)."""
    return (_redis_error("ConnectionError"), _redis_error("TimeoutError"), OSError)


def _redis_error(name: str) -> type[Exception]:
    """redis-py's exception class ``name`` (redis is imported: a pipeline exists)."""
    error: type[Exception] = getattr(sys.modules["redis.exceptions"], name)
    return error
