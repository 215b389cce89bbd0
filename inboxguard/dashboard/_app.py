"""The Starlette app: pages, the guarded write actions, the security headers.

Write actions (release or resolve a quarantine record) are POSTs that carry
the token in the form body; a token in the query string is refused, so a
link can never act, and a cross-site request is refused before the token is
looked at. Each action first shows a confirmation page, and records the
operator's name and reason through the read model.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import hmac
import logging
from collections.abc import AsyncIterator, Iterable
from typing import Any

from sqlalchemy.engine import Engine

from inboxguard.dashboard._history import History, chart
from inboxguard.dashboard._security import (
    ROOT,
    Stop,
    Throttle,
    cross_site,
    problem_with,
    secured,
)
from inboxguard.dashboard._views import (
    MAX_QUERY,
    age,
    as_json,
    overview,
    pretty,
    search,
    shown,
    when,
)
from inboxguard.errors import ConfigurationError, InboxGuardError
from inboxguard.operations import (
    quarantine_show,
    release_quarantine,
    resolve_quarantine,
    stats,
)

__all__ = ["build_app"]

logger = logging.getLogger("inboxguard.dashboard")

_EXTRA = "the dashboard needs the 'dashboard' extra: pip install 'inboxguard[dashboard]'"
_ACTIONS = {"release": release_quarantine, "resolve": resolve_quarantine}
_MIN_TOKEN = 16


def build_app(
    engine: Engine,
    *,
    token: str | None,
    table_prefix: str,
    sample_every: dt.timedelta,
    horizon: dt.timedelta | None,
    allowed_hosts: Iterable[str] = (),
) -> Any:
    """The ASGI app (see :func:`inboxguard.dashboard.dashboard_app`)."""
    try:
        import jinja2  # noqa: PLC0415
        import python_multipart  # noqa: F401, PLC0415
        from starlette.applications import Starlette  # noqa: PLC0415
        from starlette.routing import Mount, Route  # noqa: PLC0415
        from starlette.staticfiles import StaticFiles  # noqa: PLC0415
    except ImportError as missing:
        raise ConfigurationError(f"{_EXTRA} ({missing})") from None
    if token is not None and (not isinstance(token, str) or len(token) < _MIN_TOKEN):
        msg = (
            f"token must be a str of at least {_MIN_TOKEN} characters, or None (read-only);"
            " make one with: python -c 'import secrets; print(secrets.token_urlsafe(24))'"
        )
        raise ConfigurationError(msg)
    if not isinstance(sample_every, dt.timedelta) or sample_every <= dt.timedelta(0):
        msg = f"sample_every must be a positive timedelta, got {sample_every!r}"
        raise ConfigurationError(msg)
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("inboxguard.dashboard", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
    )
    env.filters.update(age=age, when=when, shown=shown, pretty=pretty, as_json=as_json)
    if isinstance(allowed_hosts, str):
        allowed_hosts = [allowed_hosts]
    site = _Site(engine, env, token, table_prefix, horizon, History())
    routes = [
        Route("/", site.front),
        Route("/search", site.search),
        Route("/quarantine/{record_id:int}", site.record),
        Route("/quarantine/{record_id:int}/{action:str}", site.confirm, methods=["GET"]),
        Route("/quarantine/{record_id:int}/{action:str}", site.act, methods=["POST"]),
        Mount("/static", app=StaticFiles(packages=[("inboxguard.dashboard", "static")])),
    ]

    @contextlib.asynccontextmanager
    async def lifespan(_: Any) -> AsyncIterator[None]:
        sampler = asyncio.create_task(site.sample_forever(sample_every.total_seconds()))
        try:
            yield
        finally:
            sampler.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await sampler

    app = Starlette(routes=routes, lifespan=lifespan, exception_handlers={500: site.crashed})
    return secured(app, allowed_hosts)


def _client(request: Any) -> str:
    """The address a request came from (the throttle's key)."""
    return request.client.host if request.client is not None else "unknown"


class _Site:
    """The pages of one dashboard, over one engine and table prefix."""

    def __init__(
        self,
        engine: Engine,
        env: Any,
        token: str | None,
        prefix: str,
        horizon: dt.timedelta | None,
        history: History,
    ) -> None:
        self.engine = engine
        self.env = env
        self.token = token
        self.prefix = prefix
        self.horizon = horizon
        self.history = history
        self.throttle = Throttle()

    # -- rendering ---------------------------------------------------------------------

    def page(self, name: str, status: int = 200, **values: Any) -> Any:
        from starlette.responses import HTMLResponse  # noqa: PLC0415

        shared = {
            "writable": self.token is not None,
            "prefix": self.prefix,
            "query": "",
            "root": ROOT.get(),
        }
        html = self.env.get_template(name).render({**shared, **values})
        return HTMLResponse(html, status_code=status)

    def message(self, status: int, title: str, text: str) -> Any:
        return self.page("message.html", status, title=title, text=self.scrub(text))

    def scrub(self, text: str) -> str:
        """``text`` without the database URL or its password."""
        url = self.engine.url
        for secret in (url.render_as_string(hide_password=False), url.password):
            if secret:
                text = text.replace(str(secret), "***")
        return text

    async def crashed(self, request: Any, error: Exception) -> Any:
        logger.error("dashboard page %s failed", request.url.path, exc_info=error)
        return self.message(500, "Something failed", "The page failed; see the server's log.")

    async def read(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        """Run a blocking read in a worker thread; a refusal becomes a page."""
        from starlette.concurrency import run_in_threadpool  # noqa: PLC0415

        return await run_in_threadpool(fn, *args, **kwargs)

    # -- pages ---------------------------------------------------------------------------

    async def front(self, request: Any) -> Any:
        raw = request.query_params.get("after", "")
        after = int(raw) if raw.isdigit() else None
        unknown_after = request.query_params.get("unknown_after") or None
        try:
            view = await self.read(
                overview,
                self.engine,
                self.prefix,
                self.history,
                after=after,
                unknown_after=unknown_after,
            )
        except ConfigurationError:
            text = "unknown_after is not a page cursor; follow the page's own next link."
            return self.message(400, "Bad page", text)
        except InboxGuardError as error:
            return self.message(503, "Cannot read the tables", str(error))
        return self.page(
            "overview.html",
            view=view,
            chart=chart(view.history),
            horizon=self.horizon,
            after=after,
            unknown_after=unknown_after,
        )

    async def search(self, request: Any) -> Any:
        query = request.query_params.get("q", "").strip()
        if not query:
            return self.page("search.html", query="", results=[], too_long=False)
        if len(query) > MAX_QUERY:
            return self.page("search.html", 400, query=query[:MAX_QUERY], results=[], too_long=True)
        try:
            results = await self.read(search, self.engine, self.prefix, query)
        except InboxGuardError as error:
            return self.message(503, "Cannot read the tables", str(error))
        return self.page("search.html", query=query, results=results, too_long=False)

    async def record(self, request: Any) -> Any:
        record_id = request.path_params["record_id"]
        detail = await self.read(quarantine_show, self.engine, record_id, table_prefix=self.prefix)
        if detail is None:
            return self.message(404, "No such record", f"No quarantine record has id {record_id}.")
        done = request.query_params.get("done")
        return self.page("record.html", detail=detail, done=done if done in _ACTIONS else None)

    async def confirm(self, request: Any) -> Any:
        record_id, action = request.path_params["record_id"], request.path_params["action"]
        try:
            self.check_action(action)
            detail = await self.open_record(record_id)
        except Stop as stop:
            return stop.response
        return self.page("confirm.html", detail=detail, action=action, problem=None)

    async def act(self, request: Any) -> Any:
        record_id, action = request.path_params["record_id"], request.path_params["action"]
        try:
            self.check_action(action)
            self.check_request(request)
            form = await request.form()
            self.check_token(str(form.get("token", "")), _client(request))
            who, why = str(form.get("who", "")).strip(), str(form.get("why", "")).strip()
            problem = problem_with(who, why, confirmed=form.get("confirm") == "yes")
            if problem is not None:
                detail = await self.open_record(record_id)
                return self.page("confirm.html", 400, detail=detail, action=action, problem=problem)
            done = await self.read(
                _ACTIONS[action],
                self.engine,
                record_id,
                actor=who,
                reason=why,
                table_prefix=self.prefix,
            )
            if done is None:
                raise Stop(self.no_open_record(record_id))
        except Stop as stop:
            return stop.response
        logger.info("dashboard: %s of quarantine record %s by %r: %s", action, record_id, who, why)
        from starlette.responses import RedirectResponse  # noqa: PLC0415

        root = ROOT.get()
        return RedirectResponse(f"{root}/quarantine/{record_id}?done={action}", status_code=303)

    def check_action(self, action: str) -> None:
        """Refuse an unknown action, and any action of a read-only dashboard."""
        if action not in _ACTIONS:
            raise Stop(self.message(404, "No such page", f"There is no {action!r} action."))
        if self.token is None:
            raise Stop(self.read_only())

    def check_request(self, request: Any) -> None:
        """Refuse fields in the URL and requests from another site."""
        if request.query_params:
            text = "Write actions take their fields from the form body, never the URL."
            raise Stop(self.message(400, "Refused", text))
        if cross_site(request):
            text = "A write action must come from this dashboard's own page."
            raise Stop(self.message(403, "Refused", text))

    def check_token(self, given: str, client: str) -> None:
        """Refuse a missing or wrong token (compared in constant time), and any
        token from a client that gave too many wrong ones lately (429)."""
        assert self.token is not None  # check_action ran first
        wait = self.throttle.wait(client)
        if wait > 0:
            text = f"Too many wrong tokens; nothing was changed. Try again in {wait:.0f} s."
            raise Stop(self.message(429, "Refused", text))
        if not hmac.compare_digest(given.encode(), self.token.encode()):
            self.throttle.failed(client)
            logger.warning("dashboard: a wrong token from %s", client)
            text = "The token is missing or wrong; nothing was changed."
            raise Stop(self.message(403, "Refused", text))

    async def open_record(self, record_id: int) -> Any:
        """The detail of an open quarantine record, or a 404 page."""
        detail = await self.read(quarantine_show, self.engine, record_id, table_prefix=self.prefix)
        if detail is None or detail.record.status != "open":
            raise Stop(self.no_open_record(record_id))
        return detail

    def no_open_record(self, record_id: int) -> Any:
        return self.message(404, "No open record", f"No open quarantine record has id {record_id}.")

    def read_only(self) -> Any:
        return self.message(
            403,
            "Read-only",
            "This dashboard was started without a token, so it changes nothing."
            " Start it with --token (or INBOXGUARD_DASHBOARD_TOKEN) to release or resolve records.",
        )

    async def sample_forever(self, every: float) -> None:
        """Record a reading of the outbox every ``every`` seconds, for the chart."""
        while True:
            try:
                reading = await self.read(stats, self.engine, table_prefix=self.prefix)
                self.history.add(reading)
            except Exception:
                logger.warning("dashboard: sampling the outbox failed", exc_info=True)
            await asyncio.sleep(every)
