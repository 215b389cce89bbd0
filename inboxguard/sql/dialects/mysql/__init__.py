"""MariaDB and MySQL (PyMySQL): every statement inboxguard runs on them.

Each module's docstring starts with a *Features* block: :mod:`.inbox` (``INSERT
IGNORE`` claim, per-statement lock wait on MariaDB, the watermark advance),
:mod:`.outbox` (``SKIP LOCKED`` pick, then lease) and :mod:`.purge`
(``GET_LOCK``, key-by-key batches at READ COMMITTED).
"""

from __future__ import annotations

from inboxguard.sql.dialects.base import Database
from inboxguard.sql.dialects.mysql.batch import MysqlBatch
from inboxguard.sql.dialects.mysql.boundary import commits_implicitly
from inboxguard.sql.dialects.mysql.charset import require_utf8mb4
from inboxguard.sql.dialects.mysql.inbox import MysqlInbox, MysqlWatermark
from inboxguard.sql.dialects.mysql.outbox import MysqlOutbox
from inboxguard.sql.dialects.mysql.purge import MysqlPurge

__all__ = ["DATABASE", "MysqlBatch", "MysqlInbox", "MysqlOutbox", "MysqlPurge", "MysqlWatermark"]

#: MariaDB 10.6+ or MySQL 8.0+ (``FOR UPDATE SKIP LOCKED``).
DATABASE = Database(
    label="MariaDB/MySQL",
    names=("mysql", "mariadb"),
    inbox=MysqlInbox,
    watermark=MysqlWatermark,
    purge=MysqlPurge,
    outbox=MysqlOutbox,
    batch=MysqlBatch,
    check=require_utf8mb4,
    ends_transaction=commits_implicitly,
)
