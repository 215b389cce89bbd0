"""DJ5: `manage.py migrate` creates the library's own tables (the names of
INBOXGUARD["TABLE_PREFIX"], the columns and indexes of create_schema()), on
the configured database only; a project with its own prefix has no
migration to generate; the rest of the library (lookup, purge, the SQL
Inbox) reads what the Django store writes."""

from __future__ import annotations

import datetime as dt
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

from django.core.management import call_command
from django.db import connections, transaction
from django.test import override_settings
from sqlalchemy import create_engine, inspect

from inboxguard import Inbox, Outbox
from tests.conftest import FakeClock

ROOT = Path(__file__).resolve().parents[2]


def test_dj5_a_custom_prefix_migrates_with_no_migration_to_generate(tmp_path: Path) -> None:
    """In a process of its own (the prefix is read when the models load),
    which also checks that importing inboxguard.django loads no Django (DJ2)."""
    script = textwrap.dedent(
        f"""
        import sys
        import inboxguard.django
        assert "django" not in sys.modules, "importing the store imported Django"  # DJ2
        import datetime as dt
        import django
        from django.conf import settings
        from django.core.management import call_command
        settings.configure(
            USE_TZ=True,
            INSTALLED_APPS=["inboxguard.django"],
            DATABASES={{"default": {{"ENGINE": "django.db.backends.sqlite3",
                                    "NAME": {str(tmp_path / "p.db")!r}}}}},
            INBOXGUARD={{"RETENTION": dt.timedelta(days=1), "TABLE_PREFIX": "shop_"}},
        )
        django.setup()
        call_command("makemigrations", "inboxguard", "--check", "--dry-run")
        call_command("migrate", "inboxguard", verbosity=0)
        from inboxguard.django.models import QuarantineRecord
        assert QuarantineRecord._meta.db_table == "shop_quarantine"
        assert QuarantineRecord.objects.count() == 0
        """
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env, check=False
    )
    assert done.returncode == 0, done.stdout + done.stderr
    engine = create_engine(f"sqlite:///{tmp_path / 'p.db'}")
    Inbox(engine, retention=dt.timedelta(days=1), table_prefix="shop_").check_schema()
    Outbox(engine, table_prefix="shop_").check_schema()
    # Exactly the library's tables, with the library's indexes.
    reference = create_engine(f"sqlite:///{tmp_path / 'ref.db'}")
    Inbox(reference, retention=dt.timedelta(days=1), table_prefix="shop_").create_schema()
    Outbox(reference, table_prefix="shop_").create_schema()
    mine, theirs = inspect(engine), inspect(reference)
    for table in theirs.get_table_names():
        assert [c["name"] for c in mine.get_columns(table)] == [
            c["name"] for c in theirs.get_columns(table)
        ]
        assert sorted(i["name"] for i in mine.get_indexes(table)) == sorted(
            i["name"] for i in theirs.get_indexes(table)
        )
    engine.dispose()
    reference.dispose()


def test_dj5_migrate_creates_the_tables_on_the_configured_database_only(pg_url: str) -> None:
    from tests.django.support import PREFIX, add_alias

    alias = add_alias("postgresql", pg_url)
    engine = create_engine(pg_url)

    def tables() -> set[str]:
        return {t for t in inspect(engine).get_table_names() if t.startswith(PREFIX)}

    assert tables() == set()
    call_command("migrate", "inboxguard", database=alias, verbosity=0)
    assert tables() == set()  # INBOXGUARD["DATABASE"] is "default"
    call_command("migrate", "inboxguard", "zero", database=alias, verbosity=0)
    conf = {"RETENTION": dt.timedelta(days=1), "TABLE_PREFIX": PREFIX, "DATABASE": alias}
    with override_settings(INBOXGUARD=conf):
        call_command("migrate", "inboxguard", database=alias, verbosity=0)
        names = (
            "inbox",
            "quarantine",
            "watermark",
            "quarantine_replays",
            "quarantine_actions",
            "outbox",
        )
        assert tables() == {f"{PREFIX}{name}" for name in names}
        Inbox(engine, retention=dt.timedelta(days=1), table_prefix=PREFIX).check_schema()
        call_command("migrate", "inboxguard", "zero", database=alias, verbosity=0)
        assert tables() == set()
    connections[alias].close()
    engine.dispose()


def test_dj5_the_library_reads_and_purges_what_django_wrote(make_inbox: Any, alias: str) -> None:
    clock = FakeClock(dt.datetime(2026, 1, 1, tzinfo=dt.UTC))
    box = make_inbox(retention=dt.timedelta(days=1), clock=clock)
    for n in range(3):
        with transaction.atomic(using=alias):
            with box.guard(consumer="c", command_id=f"p-{n}", payload={"n": n}) as entry:
                entry.result = n
    sql = Inbox(box.engine, retention=dt.timedelta(days=1), table_prefix=box.table_prefix)
    assert sql.lookup("c", "p-1").result == 1
    assert sql.lookup("c", "p-1").expires_at == clock.now + dt.timedelta(days=1)
    assert box.purge(now=clock.now + dt.timedelta(hours=23)).deleted == 0
    report = box.purge(now=clock.now + dt.timedelta(days=1, seconds=1))
    assert report.deleted == 3
    assert box.lookup("c", "p-0") is None
