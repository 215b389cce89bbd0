"""Engines the adapters know are made safe across a fork.

A worker's start-up check (and the app's own import-time code) opens pooled
connections in the parent process. A prefork pool (Celery's, Dramatiq's
worker processes, ``multiprocessing``) forks children that inherit those
pools; two processes talking on one socket interleave their statements and
can commit each other's transactions. SQLAlchemy's answer ("Using Connection
Pools with Multiprocessing or os.fork()") is ``engine.dispose(close=False)``
in the child before it connects: the inherited connections are dropped
without being closed (closing them would end the parent's sessions too).

:func:`track` records the engines behind an inbox and its session factory;
:func:`release_in_parent` closes what the parent's checks opened, before
the pool forks; every forked child starts on a fresh pool of each tracked
engine (``os.register_at_fork``), whichever pool forked it. Imports no
framework.
"""

from __future__ import annotations

import os
import threading
import weakref
from typing import Any

from sqlalchemy.engine import Engine

__all__ = ["engines_of", "release_in_parent", "track", "tracked"]

_engines: weakref.WeakSet[Engine] = weakref.WeakSet()
_lock = threading.Lock()
_hooked = False


def engines_of(inbox: Any, session_factory: Any = None) -> list[Engine]:
    """The SQLAlchemy engines behind ``inbox`` and ``session_factory``
    (a ``sessionmaker``'s ``bind``); none for a Redis or Django store."""
    found: list[Engine] = []
    for candidate in (
        getattr(inbox, "engine", None),
        getattr(getattr(inbox, "engine", None), "sync_engine", None),
        getattr(session_factory, "kw", {}).get("bind") if session_factory else None,
    ):
        engine = getattr(candidate, "sync_engine", candidate)
        if isinstance(engine, Engine) and engine not in found:
            found.append(engine)
    return found


def track(engines: list[Engine]) -> None:
    """Give each forked child of this process a fresh pool of ``engines``."""
    global _hooked  # noqa: PLW0603 - one at-fork hook per process
    with _lock:
        for engine in engines:
            _engines.add(engine)
        if not _hooked:
            os.register_at_fork(after_in_child=_fresh_pools)
            _hooked = True


def tracked() -> list[Engine]:
    """The engines a forked child gets a fresh pool of."""
    return list(_engines)


def release_in_parent() -> None:
    """Close the pooled connections of every tracked engine (the parent's
    own, opened by the start-up checks), so no child inherits them."""
    for engine in tracked():
        engine.dispose()


def _fresh_pools() -> None:
    # In the child: drop the inherited connections without closing them (the
    # parent may still use them); the child's first checkout connects anew.
    for engine in list(_engines):
        engine.dispose(close=False)
