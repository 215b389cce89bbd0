"""S1-S4 at the HTTP level: read-only without a token; write actions only by a
same-site POST carrying the token in its body, confirmed, recorded with who
and why; escaped payloads; no database URL or password on any page."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy import create_engine
from sqlalchemy.engine import Engine, make_url
from starlette.testclient import TestClient

import inboxguard
from tests.dashboard.scenario import SCRIPT, Filled

TOKEN = "s3cret-operator-token"
PASSWORD = "hunter2-db-password"


@pytest.fixture(scope="module")
def engine(filled: tuple[str, str, Filled]) -> Iterator[Engine]:
    # PostgreSQL trusts local users, so the password is accepted and ignored:
    # it is there to prove no page ever shows it.
    url = make_url(filled[0]).set(password=PASSWORD)
    eng = create_engine(url)
    yield eng
    eng.dispose()


def _client(engine: Engine, prefix: str, token: str | None) -> TestClient:
    app = inboxguard.dashboard_app(
        engine,
        token=token,
        table_prefix=prefix,
        sample_every=dt.timedelta(seconds=30),
        allowed_hosts=["dash.local"],
    )
    return TestClient(app, base_url="http://dash.local", follow_redirects=False)


def _form(**fields: Any) -> dict[str, Any]:
    return {"who": "ana", "why": "payload fixed upstream", "confirm": "yes", **fields}


def test_s1_read_only_without_a_token(engine: Engine, filled: tuple[str, str, Filled]) -> None:
    _, prefix, made = filled
    record = made.quarantine["order-4"]
    with _client(engine, prefix, None) as client:
        front = client.get("/")
        assert front.status_code == 200
        assert "read-only" in front.text
        assert f"/quarantine/{record}/release" not in front.text
        assert client.get(f"/quarantine/{record}/release").status_code == 403
        refused = client.post(f"/quarantine/{record}/release", data=_form(token=TOKEN))
        assert refused.status_code == 403
    assert inboxguard.quarantine_show(engine, record, table_prefix=prefix).record.status == "open"


def test_s2_a_write_needs_the_token_in_the_body_a_same_site_post_and_a_confirmation(
    engine: Engine, filled: tuple[str, str, Filled]
) -> None:
    _, prefix, made = filled
    record = made.quarantine["order-4"]
    path = f"/quarantine/{record}/resolve"
    with _client(engine, prefix, TOKEN) as client:
        assert client.get(path).status_code == 200  # the confirmation page
        assert client.post(f"{path}?token={TOKEN}", data=_form()).status_code == 400
        assert client.post(path, data=_form(token="wrong-token")).status_code == 403
        assert client.post(path, data=_form()).status_code == 403  # no token at all
        cross = client.post(
            path, data=_form(token=TOKEN), headers={"origin": "http://evil.example"}
        )
        assert cross.status_code == 403
        fetch = client.post(path, data=_form(token=TOKEN), headers={"sec-fetch-site": "cross-site"})
        assert fetch.status_code == 403
        unconfirmed = client.post(path, data=_form(token=TOKEN, confirm=""))
        assert unconfirmed.status_code == 400
        assert "Tick the confirmation box" in unconfirmed.text
        assert client.post(path, data=_form(token=TOKEN, who="")).status_code == 400
        assert (
            inboxguard.quarantine_show(engine, record, table_prefix=prefix).record.status == "open"
        )
        done = client.post(path, data=_form(token=TOKEN), headers={"origin": "http://dash.local"})
        assert done.status_code == 303
        assert client.post(path, data=_form(token=TOKEN)).status_code == 404  # no longer open
        page = client.get(done.headers["location"])
    detail = inboxguard.quarantine_show(engine, record, table_prefix=prefix)
    assert detail.record.status != "open"
    [action] = detail.actions
    assert (action.action, action.actor, action.reason) == (
        "resolve",
        "ana",
        "payload fixed upstream",
    )
    assert "resolve by ana: payload fixed upstream" in page.text


def test_s3_payloads_are_escaped_and_no_secret_is_shown(
    engine: Engine, filled: tuple[str, str, Filled]
) -> None:
    _, prefix, made = filled
    with _client(engine, prefix, TOKEN) as client:
        pages = [
            client.get("/"),
            client.get(f"/quarantine/{made.quarantine['order-3']}"),
            client.get("/search", params={"q": "order-3"}),
            client.get("/search", params={"q": "<b>order</b>"}),
            client.get("/quarantine/999999"),
        ]
        long = client.get("/search", params={"q": "x" * 300})
    assert long.status_code == 400
    record = pages[1]
    assert SCRIPT not in record.text
    assert "&lt;script&gt;document.title=" in record.text
    assert "<b>order</b>" not in pages[3].text
    url = engine.url
    for page in pages:
        assert PASSWORD not in page.text
        assert str(url.host) not in page.text
        assert str(url.database) not in page.text
        assert "script-src" not in page.headers["content-security-policy"]  # none allowed
        assert page.headers["content-security-policy"].startswith("default-src 'none'")
        assert page.headers["x-frame-options"] == "DENY"


def test_s4_bad_settings_are_refused_with_the_fix(engine: Engine) -> None:
    with pytest.raises(inboxguard.ConfigurationError, match="at least 16 characters"):
        inboxguard.dashboard_app(engine, token="fifteen-chars!!")
    with pytest.raises(inboxguard.ConfigurationError, match="sample_every"):
        inboxguard.dashboard_app(engine, sample_every=dt.timedelta(0))


def test_s4_missing_tables_are_a_page_not_a_crash(engine: Engine) -> None:
    with _client(engine, "absent_", TOKEN) as client:
        front = client.get("/")
        found = client.get("/search", params={"q": "order-1"})
    assert front.status_code == 200
    assert "No inbox tables at this prefix" in front.text
    assert found.status_code in (200, 503)
    assert PASSWORD not in found.text
