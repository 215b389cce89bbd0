"""The batch benchmark's peer: AWS Powertools' idempotency per record.

A batch consumer (one transaction a batch, the same UPDATE and INSERT a
message) wraps each record's handling in Powertools' ``idempotent_function``
on the local Redis, as its documentation shows for batch processing: an
in-progress record ``SET NX`` before the record's work and the completed
record ``SET`` after it, two Redis round trips a record, outside the
batch's transaction. ``guard_batch`` claims the whole batch in the
transaction instead (one statement on PostgreSQL). Needs the ``bench``
extra.
"""

from __future__ import annotations

import importlib.util
import os
import warnings
from collections.abc import Callable
from typing import Any

__all__ = ["REDIS_URL", "available", "per_record"]

REDIS_URL = os.environ.get("INBOXGUARD_REDIS_URL", "redis://127.0.0.1:6379/0")

# Outside Lambda, Powertools warns on every call that it has no Lambda context,
# and warns that its Redis class is to be renamed.
warnings.filterwarnings("ignore", message="Couldn't determine the remaining time left")
warnings.filterwarnings("ignore", category=DeprecationWarning, module="aws_lambda_powertools")


def available() -> bool:
    """Whether AWS Powertools is installed (``make .venv/.installed-bench``)."""
    return importlib.util.find_spec("aws_lambda_powertools") is not None


def per_record(
    apply: Callable[[Any, str], None], key_prefix: str
) -> tuple[Callable[[Any, str], object], Callable[[], None]]:
    """``handle(conn, command_id)``: ``apply(conn, command_id)`` inside
    Powertools' idempotency on Redis (keys under ``key_prefix``), and a
    function that deletes those keys and closes the client."""
    import redis
    from aws_lambda_powertools.utilities.idempotency import (
        IdempotencyConfig,
        idempotent_function,
    )
    from aws_lambda_powertools.utilities.idempotency.persistence.cache import (
        CachePersistenceLayer,
    )

    client = redis.Redis.from_url(REDIS_URL, decode_responses=True)
    config = IdempotencyConfig(event_key_jmespath="command_id", raise_on_no_idempotency_key=True)
    current: list[Any] = [None]  # the batch's connection, set around each record

    @idempotent_function(
        data_keyword_argument="command",
        persistence_store=CachePersistenceLayer(client=client),
        config=config,
        key_prefix=key_prefix,
    )
    def record(command: dict[str, Any]) -> dict[str, bool]:
        apply(current[0], command["command_id"])
        return {"ok": True}

    def handle(conn: Any, command_id: str) -> object:
        current[0] = conn
        return record(command={"command_id": command_id, "id": command_id})

    def close() -> None:
        keys = list(client.scan_iter(match=f"{key_prefix}*", count=1000))
        for start in range(0, len(keys), 500):
            client.delete(*keys[start : start + 500])
        client.close()

    return handle, close
