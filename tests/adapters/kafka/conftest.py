"""Fixtures of the Kafka suite: a tansu broker per test module, PostgreSQL, and a
topic and table prefix per test."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest
from sqlalchemy import create_engine

from integrations.payments import make_inbox
from tests.adapters.generic_support import Deliveries, reference_settings
from tests.adapters.kafka.support import KafkaSetup
from tests.adapters.kafka.tansu import WORKER_ENV, tansu
from tests.conftest import unique


@pytest.fixture(scope="module")
def kafka_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``host:port`` of a tansu broker of this module's own (memory storage)."""
    with tansu(tmp_path_factory.mktemp("tansu") / "tansu.log") as url:
        yield url


@pytest.fixture
def kafka_setup(kafka_url: str, pg_url: str, prefix: str, tmp_path: Path) -> Iterator[KafkaSetup]:
    """The reference Kafka worker's settings on this module's broker, a topic
    and table prefix of the test's own."""
    config, env = reference_settings(pg_url, f"kafka://{kafka_url}", prefix, tmp_path)
    config = replace(config, queue=unique("topic"))
    env["INBOXGUARD_QUEUE"] = config.queue
    env.update(WORKER_ENV)
    engine = create_engine(pg_url)
    inbox = make_inbox(engine, config)
    setup = KafkaSetup(
        config, engine, inbox, Deliveries(tmp_path / "deliveries.log"), tmp_path, env
    )
    try:
        yield setup
    finally:
        inbox.drop_schema()
        engine.dispose()
