"""Each adapter page shows its settlement table exactly as the code declares it.

The table sits between ``<!-- settlement:NAME -->`` and
``<!-- /settlement:NAME -->``; ``python -m tests.docs.test_settlement_tables``
writes every one from the code.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from inboxguard.adapters._settlement import SettlementTable
from inboxguard.adapters.aio_pika._settlement import AIO_PIKA_SETTLEMENT
from inboxguard.adapters.celery._settlement import CELERY_SETTLEMENT
from inboxguard.adapters.dramatiq._settlement import DRAMATIQ_SETTLEMENT
from inboxguard.adapters.faststream._settlement import FASTSTREAM_SETTLEMENT
from inboxguard.adapters.kombu._settlement import KOMBU_SETTLEMENT

DOCS = Path(__file__).resolve().parents[2] / "docs"

#: (block name, page, table)
TABLES: list[tuple[str, Path, SettlementTable]] = [
    ("celery", DOCS / "adapters" / "celery.md", CELERY_SETTLEMENT),
    ("dramatiq", DOCS / "adapters" / "dramatiq.md", DRAMATIQ_SETTLEMENT),
    ("faststream", DOCS / "adapters" / "faststream.md", FASTSTREAM_SETTLEMENT),
    ("kombu", DOCS / "adapters" / "kombu.md", KOMBU_SETTLEMENT),
    ("aio_pika", DOCS / "adapters" / "asyncio.md", AIO_PIKA_SETTLEMENT),
]


def _block(name: str) -> re.Pattern[str]:
    return re.compile(
        rf"(<!-- settlement:{name} -->\n)(.*?)(<!-- /settlement:{name} -->)", re.DOTALL
    )


def rendered(name: str, page: Path) -> str:
    found = _block(name).search(page.read_text())
    assert found, f"{page}: no <!-- settlement:{name} --> block"
    return found.group(2)


@pytest.mark.parametrize(("name", "page", "table"), TABLES, ids=[t[0] for t in TABLES])
def test_the_page_shows_the_declared_settlement_table(
    name: str, page: Path, table: SettlementTable
) -> None:
    assert rendered(name, page) == table.markdown(), (
        f"{page.name}: the settlement table differs from the code;"
        " run python -m tests.docs.test_settlement_tables"
    )


def test_every_matrix_cell_names_a_test_of_the_suite() -> None:
    """``python -m tests.matrix`` runs tests that exist (no collection: the file
    defines the function), and the docs page has the block it writes."""
    from tests.matrix import BLOCK, CELLS, PAGE

    for cell in CELLS:
        assert f"def {cell.function}(" in cell.path.read_text(), cell.test
    assert BLOCK.search(PAGE.read_text())


def write() -> None:
    """Write every settlement block from the code."""
    for name, page, table in TABLES:
        body = table.markdown()
        text = page.read_text()
        page.write_text(_block(name).sub(lambda m, b=body: m.group(1) + b + m.group(3), text))


if __name__ == "__main__":
    write()
    sys.exit(0)
