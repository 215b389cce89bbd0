"""The operator screen as an ASGI app of your own (``inboxguard dashboard``
serves the same app with uvicorn). Run with ``--serve`` to open it on :8080."""

import datetime as dt
import os
import sys
import tempfile

from sqlalchemy import create_engine

import inboxguard

url = os.environ.get("INBOXGUARD_DB_URL") or f"sqlite:///{tempfile.mkdtemp()}/demo.db"
engine = create_engine(url)
inboxguard.Inbox(engine, retention=dt.timedelta(days=7)).create_schema()

app = inboxguard.dashboard_app(
    engine,
    token=os.environ.get("INBOXGUARD_DASHBOARD_TOKEN"),  # None: read-only
    horizon=dt.timedelta(days=7),
)

if "--serve" in sys.argv:
    import uvicorn

    uvicorn.run(app, host="127.0.0.1", port=8080)
else:
    print("built", type(app).__name__, "- run with --serve to open it")
