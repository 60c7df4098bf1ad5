"""A browser's CORS preflight to a server with no ``cors_origins``: answered 403 ``FORBIDDEN``
with what to set, instead of the 405 of a route that has no OPTIONS (the browser only says
"CORS error"; the answer in its network panel, or to curl, says why)."""

from __future__ import annotations

from starlette.datastructures import Headers
from starlette.types import ASGIApp, Receive, Scope, Send

from .errors import error_json

__all__ = ["RefusePreflights"]


class RefusePreflights:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] == "OPTIONS":
            headers = Headers(scope=scope)
            origin = headers.get("origin")
            if origin is not None and "access-control-request-method" in headers:
                message = (
                    f"cross-origin requests are off on this server (from {origin[:200]}): list"
                    " the page's origin in DBOS_AGENTS_SERVER_CORS_ORIGINS (cors_origins)"
                )
                await error_json(403, "FORBIDDEN", message)(scope, receive, send)
                return
        await self.app(scope, receive, send)
