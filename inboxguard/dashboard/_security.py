"""The dashboard's request rules: the security headers every response
carries, the cross-site check, the checks of an action's form, and the
exception that stops a request with a ready answer."""

from __future__ import annotations

from typing import Any

__all__ = ["HEADERS", "Stop", "cross_site", "problem_with", "secured"]

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


def secured(app: Any) -> Any:
    """Wrap ``app`` so every HTTP response carries the security headers."""

    async def secured(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await app(scope, receive, send)
            return

        async def with_headers(message: Any) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                headers.extend((k.lower().encode(), v.encode()) for k, v in HEADERS.items())
                message = {**message, "headers": headers}
            await send(message)

        await app(scope, receive, with_headers)

    return secured
