"""S9-S11: who can reach the screen, and from where.

S9: only the hosts the dashboard was started for are answered (DNS
rebinding gets 400). S10: wrong tokens are throttled (429 after five, even
for the right one) and a token is at least 16 characters. S11: mounted
under a path, every link, form and the stylesheet stay under it. S12: the
quarantine queue pages through every open record and shows the total. S14:
so do the effects stuck in ``unknown``.
"""

from __future__ import annotations

import datetime as dt
import html
import re
from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy import create_engine, insert
from sqlalchemy.engine import Engine
from starlette.applications import Starlette
from starlette.routing import Mount
from starlette.testclient import TestClient

import inboxguard
from inboxguard.sql.tables import effect_tables
from tests.conftest import unique
from tests.dashboard.scenario import Filled

TOKEN = "s3cret-operator-token"


@pytest.fixture(scope="module")
def engine(filled: tuple[str, str, Filled]) -> Iterator[Engine]:
    eng = create_engine(filled[0])
    yield eng
    eng.dispose()


def _app(engine: Engine, prefix: str, **kwargs: Any) -> Any:
    return inboxguard.dashboard_app(
        engine, token=TOKEN, table_prefix=prefix, sample_every=dt.timedelta(seconds=30), **kwargs
    )


def _form(**fields: Any) -> dict[str, Any]:
    return {"who": "ana", "why": "payload fixed upstream", "confirm": "yes", **fields}


@pytest.mark.parametrize(
    ("host", "status"),
    [
        ("127.0.0.1:8080", 200),
        ("localhost", 200),
        ("[::1]:8080", 200),
        ("ops.internal:443", 200),
        ("evil.example", 400),
        ("127.0.0.1.evil.example", 400),
        ("", 400),
    ],
)
def test_s9_only_the_hosts_it_was_started_for_are_answered(
    engine: Engine, filled: tuple[str, str, Filled], host: str, status: int
) -> None:
    app = _app(engine, filled[1], allowed_hosts=["ops.internal"])
    with TestClient(app, base_url="http://127.0.0.1", follow_redirects=False) as client:
        page = client.get("/", headers={"host": host})
        assert page.status_code == status
        if status == 400:
            assert "--allowed-host" in page.text
            assert filled[1] not in page.text  # nothing of the tables is read out
            assert page.headers["x-frame-options"] == "DENY"


def test_s10_wrong_tokens_are_throttled_and_short_tokens_refused(
    engine: Engine, filled: tuple[str, str, Filled]
) -> None:
    _, prefix, made = filled
    record = made.quarantine["order-4"]
    path = f"/quarantine/{record}/release"
    with TestClient(_app(engine, prefix), base_url="http://localhost") as client:
        for n in range(5):
            assert client.post(path, data=_form(token=f"wrong-token-{n:04d}")).status_code == 403
        # Now even the right token is refused for a while: guessing is slow.
        refused = client.post(path, data=_form(token=TOKEN))
        assert refused.status_code == 429
        assert "Too many wrong tokens" in refused.text
    detail = inboxguard.quarantine_show(engine, record, table_prefix=prefix)
    assert detail is not None
    assert detail.record.status == "open"
    with pytest.raises(inboxguard.ConfigurationError, match="at least 16 characters"):
        inboxguard.dashboard_app(engine, token="x" * 15)


def test_s11_mounted_under_a_path_links_forms_and_styles_stay_under_it(
    engine: Engine, filled: tuple[str, str, Filled]
) -> None:
    _, prefix, made = filled
    record = made.quarantine["order-4"]
    outer = Starlette(routes=[Mount("/ops", app=_app(engine, prefix))])
    with TestClient(outer, base_url="http://localhost", follow_redirects=False) as client:
        pages = [client.get("/ops/"), client.get(f"/ops/quarantine/{record}/resolve")]
        for page in pages:
            assert page.status_code == 200
            links = re.findall(r'(?:href|action|src)="([^"]+)"', page.text)
            assert links
            assert all(link.startswith("/ops/") for link in links if link.startswith("/")), links
        assert client.get("/ops/static/style.css").status_code == 200
        assert f'action="/ops/quarantine/{record}/resolve"' in pages[1].text


def test_s12_the_quarantine_queue_pages_through_every_open_record_with_a_total(
    pg_url: str,
) -> None:
    engine = create_engine(pg_url)
    prefix = unique("q") + "_"
    inbox = inboxguard.Inbox(engine, table_prefix=prefix, retention=dt.timedelta(days=1))
    inbox.create_schema()
    try:
        for n in range(55):
            inbox.quarantine_delivery(
                consumer="billing",
                command_id=f"c-{n}",
                payload={"n": n},
                reason=inboxguard.QuarantineReason.RETRIES_EXHAUSTED,
            )
        seen: list[str] = []
        with TestClient(_app(engine, prefix), base_url="http://localhost") as client:
            path: str | None = "/"
            while path is not None:
                page = client.get(path)
                assert page.status_code == 200
                assert "shown of 55 open" in page.text
                seen += re.findall(r'<tr><td><a href="/quarantine/(\d+)">', page.text)
                found = re.search(r'id="next-page" href="([^"]+)"', page.text)
                path = found.group(1).replace("&amp;", "&") if found else None
        assert len(seen) == len(set(seen)) == 55
    finally:
        inbox.drop_schema()
        engine.dispose()


def _unknown_effects(engine: Engine, prefix: str, count: int) -> list[str]:
    """``count`` effects left ``unknown``, thirty at a time updated at the same
    instant (so a page can end inside a run of equal times), and two confirmed ones."""
    ledger = inboxguard.EffectLedger(engine, table_prefix=prefix)
    ledger.create_schema()
    base = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    rows = []
    for n in range(count + 2):
        at = base + dt.timedelta(seconds=n // 30)
        rows.append(
            {
                "effect_key": f"invoice-{n}/charge",
                "provider": "sandbox",
                "digest": "0" * 64,
                "state": "unknown" if n < count else "confirmed",
                "version": 2,
                "fencing_token": 1,
                "attempts": 1,
                "first_sent_at": at,
                "created_at": at,
                "updated_at": at,
            }
        )
    with engine.begin() as conn:
        conn.execute(insert(effect_tables(prefix).effects), rows)
    return [r["effect_key"] for r in rows[:count]]


def test_s14_the_unknown_effects_page_through_every_one_with_a_total(pg_url: str) -> None:
    engine = create_engine(pg_url)
    prefix = unique("u") + "_"
    keys = _unknown_effects(engine, prefix, 120)
    try:
        seen: list[str] = []
        pages = 0
        with TestClient(_app(engine, prefix), base_url="http://localhost") as client:
            path: str | None = "/"
            while path is not None and pages < 10:  # a next link that never ends stops here
                page = client.get(path)
                assert page.status_code == 200
                pages += 1
                assert "shown of 120 unknown" in page.text
                table = page.text.split('id="unknown-effects"', 1)[1].split("</table>", 1)[0]
                seen += re.findall(r'<tr><td><a href="/search\?q=[^"]+">([^<]+)</a>', table)
                found = re.search(r'id="next-unknown" href="([^"]+)"', page.text)
                path = html.unescape(found.group(1)) if found else None
            assert client.get("/?unknown_after=not-a-cursor").status_code == 400
        assert pages == 3  # 50, 50, 20
        assert len(seen) == len(set(seen)) == 120
        assert set(seen) == set(keys)
    finally:
        inboxguard.EffectLedger(engine, table_prefix=prefix).drop_schema()
        engine.dispose()
