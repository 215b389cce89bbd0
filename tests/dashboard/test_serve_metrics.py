"""M8: ``inboxguard serve-metrics`` reports the database-derived gauges of a
database the scenario runs filled, read at each scrape, without printing the
database URL; a database it cannot read is ``inboxguard_up 0``, not a crash."""

from __future__ import annotations

import datetime as dt
import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from sqlalchemy import create_engine

from inboxguard.cli.serve_metrics import database_collector
from tests.dashboard.scenario import CONSUMER, Filled
from tests.dashboard.test_browser import _free_port

ROOT = Path(__file__).resolve().parents[2]


def _scrape(engine: object, prefix: str, horizon: dt.timedelta | None = None) -> str:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(database_collector(engine, prefix, horizon))
    return generate_latest(registry).decode()


def test_m8_the_gauges_match_the_scenario(filled: tuple[str, str, Filled]) -> None:
    url, prefix, _ = filled
    engine = create_engine(url)
    try:
        text = _scrape(engine, prefix, dt.timedelta(days=30))
    finally:
        engine.dispose()
    assert "inboxguard_up 1.0" in text
    assert f'inboxguard_evidence_rows{{consumer="{CONSUMER}"}} 3.0' in text
    assert "inboxguard_outbox_backlog 1.0" in text
    assert 'inboxguard_effects{state="confirmed"} 1.0' in text
    assert 'inboxguard_effects{state="unknown"} 1.0' in text
    assert "inboxguard_evidence_horizon_seconds 2.592e+06" in text
    age = next(
        line for line in text.splitlines() if line.startswith("inboxguard_outbox_oldest_unsent")
    )
    assert float(age.split()[-1]) > 0


def test_m8_an_unreadable_database_is_up_0(tmp_path: Path) -> None:
    engine = create_engine(f"sqlite:///{tmp_path}/missing/dir/db.sqlite")
    assert "inboxguard_up 0.0" in _scrape(engine, "inboxguard_")


def test_m8_the_command_serves_them_over_http(filled: tuple[str, str, Filled]) -> None:
    url, prefix, _ = filled
    port = _free_port()
    command = [sys.executable, "-m", "inboxguard", "serve-metrics", "--port", str(port)]
    command += ["--prefix", prefix]
    env = {**os.environ, "INBOXGUARD_DB_URL": url}
    process = subprocess.Popen(command, env=env, cwd=ROOT, stderr=subprocess.PIPE)
    try:
        deadline, body = time.monotonic() + 20, ""
        while time.monotonic() < deadline and not body:
            if process.poll() is not None:
                pytest.fail(f"serve-metrics exited with {process.returncode}")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=1) as r:
                    body = r.read().decode()
            except OSError:
                time.sleep(0.1)
        assert "inboxguard_outbox_backlog 1.0" in body
    finally:
        process.terminate()
        _, err = process.communicate(timeout=10)
    assert process.returncode == 0
    assert url.encode() not in err
    assert b"serving metrics on http://127.0.0.1:" in err


def test_m8_the_same_figures_as_opentelemetry_gauges(filled: tuple[str, str, Filled]) -> None:
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader

    import inboxguard

    url, prefix, _ = filled
    engine = create_engine(url)
    reader = InMemoryMetricReader()
    meters = MeterProvider(metric_readers=[reader])
    try:
        inboxguard.observe_database(
            engine, table_prefix=prefix, horizon=dt.timedelta(days=30), meter_provider=meters
        )
        points = {
            (metric.name, tuple(sorted(dict(point.attributes).items()))): point.value
            for resource in reader.get_metrics_data().resource_metrics
            for scope in resource.scope_metrics
            for metric in scope.metrics
            for point in metric.data.data_points
        }
    finally:
        meters.shutdown()
        engine.dispose()
    assert points[("inboxguard.evidence.rows", (("inboxguard.consumer", CONSUMER),))] == 3
    assert points[("inboxguard.quarantine.open", (("inboxguard.consumer", CONSUMER),))] == 2
    assert points[("inboxguard.outbox.backlog", ())] == 1
    assert points[("inboxguard.effects.count", (("inboxguard.state", "unknown"),))] == 1
    assert points[("inboxguard.evidence.horizon", ())] == 30 * 86400
    assert points[("inboxguard.outbox.oldest_unsent_age", ())] > 0
