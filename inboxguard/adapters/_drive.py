"""The two drivers of the delivery script (:mod:`._script`): sync and awaited.

Each sends the script the reply to its last request until it settles: a
:class:`~._script.Run` is performed by the framework's ``run`` (the error it
raises is the reply, None after a commit), a :class:`~._script.Record` by its
``record`` (whether a quarantine record holds the delivery). An error of a
``passthrough`` type (a framework's own control flow raised by the handler,
such as Celery's ``Retry`` or FastStream's ``AckMessage``) leaves unsettled,
as it came. Every decision is the script's; the framework then performs the
settlement's step with its own verbs.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from inboxguard.adapters._script import Record, Run, Script, Settlement

__all__ = ["drive", "drive_async"]


def drive(
    script: Script,
    run: Callable[[Run], object],
    record: Callable[[Record], bool],
    passthrough: tuple[type[BaseException], ...] = (),
) -> Settlement:
    """Perform the script's requests synchronously; return its settlement."""
    reply: Any = None
    try:
        while True:
            request = script.send(reply)
            if isinstance(request, Record):
                reply = record(request)
                continue
            try:
                run(request)
            except passthrough:
                raise
            except Exception as error:
                reply = error
            else:
                reply = None
    except StopIteration as done:
        settlement: Settlement = done.value
        return settlement
    finally:
        script.close()


async def drive_async(
    script: Script,
    run: Callable[[Run], Awaitable[object]],
    record: Callable[[Record], Awaitable[bool]],
    passthrough: tuple[type[BaseException], ...] = (),
) -> Settlement:
    """Perform the script's requests awaited; return its settlement."""
    reply: Any = None
    try:
        while True:
            request = script.send(reply)
            if isinstance(request, Record):
                reply = await record(request)
                continue
            try:
                await run(request)
            except passthrough:
                raise
            except Exception as error:
                reply = error
            else:
                reply = None
    except StopIteration as done:
        settlement: Settlement = done.value
        return settlement
    finally:
        script.close()
