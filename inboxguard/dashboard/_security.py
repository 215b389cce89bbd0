"""The dashboard's request rules: the security headers every response
carries, the cross-site check, the checks of an action's form, and the
exception that stops a request with a ready answer."""

from __future__ import annotations

import contextvars
import time
from collections.abc import Iterable
from typing import Any

__all__ = [
    "HEADERS",
    "LOOPBACK_HOSTS",
    "ROOT",
    "Stop",
    "Throttle",
    "cross_site",
    "host_of",
    "problem_with",
    "secured",
]

#: The names a dashboard bound to this machine answers to without being told.
LOOPBACK_HOSTS = frozenset({"localhost", "127.0.0.1", "::1"})
#: The mount point (ASGI ``root_path``) of the request being answered.
ROOT: contextvars.ContextVar[str] = contextvars.ContextVar("inboxguard_dashboard_root", default="")

#: Headers on every response: no script, no framing, no sniffing, no caching.
HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self';"
        " frame-ancestors 'none'; base-uri 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
    "X-Frame-Options": "DENY",
}


class Stop(Exception):  # noqa: N818 - control flow, not an error
    """Stop handling a request and answer with ``response``."""

    def __init__(self, response: Any) -> None:
        super().__init__()
        self.response = response


def problem_with(who: str, why: str, *, confirmed: bool) -> str | None:
    """What is missing from an action's form (a name, a reason, the ticked
    confirmation), None when it is complete."""
    if not who or len(who) > 100:
        return "Give your name (at most 100 characters): it is recorded with the action."
    if not why or len(why) > 1000:
        return "Give the reason (at most 1000 characters): it is recorded with the action."
    if not confirmed:
        return "Tick the confirmation box to go ahead."
    return None


def cross_site(request: Any) -> bool:
    """A browser's request from another site (Fetch metadata, else Origin)."""
    site = request.headers.get("sec-fetch-site")
    if site is not None:
        return site not in ("same-origin", "none")
    origin = request.headers.get("origin")
    if origin is None:
        return False
    host = str(request.headers.get("host", ""))
    return str(origin).split("://", 1)[-1] != host


def host_of(scope: Any) -> str | None:
    """The host a request names in its ``Host`` header, lowercased, without
    the port (None when there is no header)."""
    for name, value in scope.get("headers", []):
        if name == b"host":
            host = str(value.decode("latin-1")).strip().lower()
            if host.startswith("["):  # [::1]:8080
                return host[1:].split("]", 1)[0]
            return host.rsplit(":", 1)[0] if host.count(":") == 1 else host
    return None


class Throttle:
    """At most ``limit`` wrong tokens per client in ``window`` seconds; past
    that, every action of that client is refused until the window has passed,
    whatever token it gives (so guessing costs a window per ``limit`` tries)."""

    def __init__(self, limit: int = 5, window: float = 60.0) -> None:
        self.limit = limit
        self.window = window
        self._failures: dict[str, list[float]] = {}

    def wait(self, client: str) -> float:
        """Seconds ``client`` must wait before its next try (0: it may try)."""
        now = time.monotonic()
        recent = [t for t in self._failures.get(client, []) if now - t < self.window]
        self._failures[client] = recent
        if len(recent) < self.limit:
            return 0.0
        return self.window - (now - recent[0])

    def failed(self, client: str) -> None:
        """Count a wrong token from ``client``."""
        self._failures.setdefault(client, []).append(time.monotonic())


def secured(app: Any, allowed_hosts: Iterable[str] = ()) -> Any:
    """Wrap ``app`` so every HTTP response carries the security headers, a
    request naming a host the dashboard was not started for is refused with
    400 (DNS rebinding: another site's page that resolves to this machine),
    and the mount point is known to the pages."""
    hosts = LOOPBACK_HOSTS | {h.strip().lower().strip("[]") for h in allowed_hosts}

    async def secured(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await app(scope, receive, send)
            return
        if host_of(scope) not in hosts:
            await _refuse_host(send)
            return
        ROOT.set(str(scope.get("root_path", "")).rstrip("/"))

        async def with_headers(message: Any) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                headers.extend((k.lower().encode(), v.encode()) for k, v in HEADERS.items())
                message = {**message, "headers": headers}
            await send(message)

        await app(scope, receive, with_headers)

    return secured


async def _refuse_host(send: Any) -> None:
    body = (
        b"This dashboard does not answer to that host name. Start it with"
        b" --allowed-host NAME for each name it is reached by.\n"
    )
    headers = [(k.lower().encode(), v.encode()) for k, v in HEADERS.items()]
    headers += [(b"content-type", b"text/plain; charset=utf-8")]
    headers += [(b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": 400, "headers": headers})
    await send({"type": "http.response.body", "body": body})
