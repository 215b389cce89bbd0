"""P22: the dashboard's search shows a command's stored result as JSON
(``null``, ``true``, double quotes), not as a Python repr."""

from __future__ import annotations

import datetime as dt
import html

from sqlalchemy.orm import Session
from starlette.testclient import TestClient

import inboxguard


def test_p22_the_stored_result_is_shown_as_json(inbox: inboxguard.Inbox) -> None:
    with Session(inbox.engine) as session, session.begin():
        with inbox.guard(session, consumer="orders", command_id="o-77", payload={"n": 1}) as entry:
            entry.result = {"shipped": True, "label": None, "parcel": "p-1"}
    app = inboxguard.dashboard_app(
        inbox.engine,
        table_prefix=inbox.table_prefix,
        sample_every=dt.timedelta(seconds=30),
        allowed_hosts=["dash.local"],
    )
    with TestClient(app, base_url="http://dash.local") as client:
        page = client.get("/search", params={"q": "o-77"})
    assert page.status_code == 200
    text = html.unescape(page.text)
    assert '{"label": null, "parcel": "p-1", "shipped": true}' in text
    assert "'shipped': True" not in text
