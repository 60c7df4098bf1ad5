"""The operator inbox (``/inbox``): pending client-tool calls and approvals, answered from
a browser. Off by default; ``ServerSettings.inbox`` turns it on (docs/inbox.md)."""

from __future__ import annotations

from fastapi import FastAPI
from fastapi.staticfiles import StaticFiles

from ...errors import ConfigurationError
from ..context import ServerContext
from ..settings import MIN_SECRET_CHARS
from .routes import router
from .signin import OperatorSessions

__all__ = ["install"]


def install(app: FastAPI, ctx: ServerContext) -> None:
    """Add the inbox pages to ``app``; refuses a setup no operator could sign in to."""
    token = ctx.settings.operator_token
    if token is None and ctx.authenticate is None:
        raise ConfigurationError(
            "the inbox needs operator_token (DBOS_AGENTS_SERVER_OPERATOR_TOKEN) or an"
            " authenticate hook that answers the 'operate' operation"
        )
    if token is not None and len(token.get_secret_value()) < MIN_SECRET_CHARS:
        raise ConfigurationError(
            f"the operator token must have at least {MIN_SECRET_CHARS} characters"
        )
    app.state.dbos_agents_inbox = OperatorSessions(ctx.settings)
    app.include_router(router)
    app.mount(
        "/inbox/static",
        StaticFiles(packages=[("dbos_agents.server.inbox", "static")]),
        name="inbox-static",
    )
