"""MariaDB/MySQL connections must speak utf8mb4.

On a connection whose character set is narrower (``utf8mb3``, ``latin1``), the
server replaces each character it cannot convert with ``?``, and ``INSERT
IGNORE`` (the claim, the watermark, the outbox add) turns that conversion error
into a warning: ``ticket-😀`` would be stored as ``ticket-????`` and a genuine
``ticket-????`` then skipped as its duplicate. So the connection's character
set is checked before any statement runs on it. SQLAlchemy reads it from the
driver when the engine first connects (every connection of an engine is made
with the same arguments), so the check costs no round trip.
"""

from __future__ import annotations

from sqlalchemy.engine import Dialect as SaDialect

from inboxguard.errors import ConfigurationError

__all__ = ["require_utf8mb4"]

#: The only character set that holds every character of an identity.
_REQUIRED = "utf8mb4"


def require_utf8mb4(sa_dialect: SaDialect) -> None:
    """Refuse a MariaDB/MySQL engine whose connections do not use utf8mb4.

    An engine that has not connected yet is let through; it is checked on the
    first statement inboxguard runs on one of its connections.

    Raises:
        ConfigurationError: the connection character set is not utf8mb4.
    """
    charset = getattr(sa_dialect, "_connection_charset", None)
    if charset is None or str(charset).lower() == _REQUIRED:
        return
    msg = (
        f"the MariaDB/MySQL connection uses the character set {charset!r}, which cannot"
        " hold every character of a command ID: the server would store '?' instead and"
        " INSERT IGNORE would hide it, so two different IDs could become one; connect"
        " with utf8mb4: add ?charset=utf8mb4 to the database URL"
    )
    raise ConfigurationError(msg)
