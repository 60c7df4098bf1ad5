"""``create_app(settings) -> FastAPI`` and ``serve``: the HTTP API over ``AsyncAgentClient``."""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from typing import Any

from fastapi import FastAPI, Response
from fastapi.middleware.cors import CORSMiddleware
from pydantic import SecretStr
from starlette.concurrency import run_in_threadpool

from ..client import AgentClient, AsyncAgentClient
from ..errors import ConfigurationError
from .ag_ui import router as ag_ui_router
from .ai_sdk import router as ai_sdk_router
from .auth import Authenticate, Clock, SessionTokens, load_authenticate
from .chat_page import install as install_chat_page
from .context import ServerContext
from .errors import install_error_handlers
from .fork_routes import router as fork_router
from .inbox import install as install_inbox
from .limits import BodyLimitMiddleware
from .metrics import CONTENT_TYPE, Metrics, MetricsMiddleware
from .preflight import RefusePreflights
from .routes import router
from .schemas import ErrorBody
from .settings import MIN_SECRET_CHARS, ServerSettings
from .state_routes import router as state_router
from .stream_end import CompleteCutStreams
from .tracing import TracingMiddleware

log = logging.getLogger("dbos_agents.server")

EXPOSED_HEADERS = ("x-dbos-agents-token", "x-dbos-agents-session", "x-vercel-ai-ui-message-stream")
"""Response headers a page on another origin may read: a new chat's session and token."""


def create_app(
    settings: ServerSettings,
    *,
    authenticate: Authenticate | None = None,
    client: AgentClient | AsyncAgentClient | None = None,
    clock: Clock = time.time,
) -> FastAPI:
    """The HTTP API. Refuses (``ConfigurationError``) to build an app with neither an
    ``authenticate`` hook nor ``allow_unauthenticated=True`` (see ``dbos_agents.server.auth``).

    ``client`` (sync or async) is used as given (and not closed); otherwise one is made at
    startup from ``settings.database_url`` and closed at shutdown. ``clock`` dates token expiry.
    """
    if authenticate is None and settings.authenticate:
        authenticate = load_authenticate(settings.authenticate)
    if authenticate is None and not settings.allow_unauthenticated:
        raise ConfigurationError(
            "refusing to start the HTTP server without authentication: pass an authenticate"
            " hook, or set allow_unauthenticated=True"
            " (DBOS_AGENTS_SERVER_ALLOW_UNAUTHENTICATED=1) for a trusted network"
        )
    secret = settings.secret.get_secret_value() if settings.secret is not None else None
    if secret is not None and len(secret) < MIN_SECRET_CHARS:
        raise ConfigurationError(
            f"the token secret must have at least {MIN_SECRET_CHARS} characters"
        )
    if client is None and settings.database_url is None:
        raise ConfigurationError(
            "the server needs a database_url (DBOS_AGENTS_SERVER_DATABASE_URL or"
            " DBOS_AGENTS_DATABASE_URL)"
        )
    if settings.allow_unauthenticated:
        log.warning(
            "allow_unauthenticated=True: anyone who reaches this server can start sessions%s",
            "" if secret else " and, with no token secret, read and drive every session",
            extra={"event": "server.unauthenticated"},
        )
    tokens = (
        SessionTokens(
            secret,
            settings.token_ttl_sec,
            max_lifetime_seconds=settings.token_max_lifetime_sec,
            clock=clock,
        )
        if secret
        else None
    )
    ctx = ServerContext(
        settings=settings,
        tokens=tokens,
        authenticate=authenticate,
        metrics=Metrics(),
        client=AsyncAgentClient(client) if isinstance(client, AgentClient) else client,
    )

    def pending_summary() -> tuple[int, float] | None:
        c = ctx.client
        return None if c is None else c.sync.inbox_summary()

    ctx.metrics.watch_pending(pending_summary)
    ctx.metrics.watch_queued(lambda: None if ctx.client is None else ctx.client.sync.queued_runs())
    running: list[Callable[[], AbstractAsyncContextManager[None]]] = []
    """What the lifespan enters after the client: the MCP session manager, when served."""

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        if ctx.client is None:
            url = settings.database_url
            assert url is not None
            ctx.client = await AsyncAgentClient.connect(url)
            ctx.owns_client = True
        try:
            async with AsyncExitStack() as stack:
                for run in running:
                    await stack.enter_async_context(run())
                yield
        finally:
            if ctx.owns_client and ctx.client is not None:
                await ctx.client.aclose()
                ctx.client = None

    app = FastAPI(
        title="dbos-agents",
        summary="Durable LLM agent sessions: start, follow, answer client tools and approvals.",
        version="1",
        lifespan=lifespan,
    )
    app.state.dbos_agents = ctx
    app.include_router(router)
    app.include_router(fork_router)
    app.include_router(state_router)
    app.include_router(ai_sdk_router)
    app.include_router(ag_ui_router)
    if settings.inbox:
        install_inbox(app, ctx)
    if settings.chat_page:
        install_chat_page(app)
    if settings.mcp:
        running.append(_install_mcp(app, ctx))
    if settings.metrics_enabled:

        @app.get("/metrics", tags=["operations"], response_class=Response)
        async def metrics() -> Response:
            """Prometheus text format; no auth (route templates and counts, never ids)."""
            # The pending gauges query the database: off the event loop.
            body = await run_in_threadpool(ctx.metrics.render)
            return Response(body, media_type=CONTENT_TYPE)

    install_error_handlers(app)
    app.add_middleware(BodyLimitMiddleware, max_body_bytes=settings.max_body_bytes)
    app.add_middleware(MetricsMiddleware, metrics=ctx.metrics)  # counts 411/413
    app.add_middleware(TracingMiddleware)  # a span per request (docs/traces.md)
    app.add_middleware(CompleteCutStreams)  # a stream cut by shutdown ends properly
    if settings.cors_origins:
        # Outermost: preflights are answered before anything else, errors carry the headers.
        app.add_middleware(
            CORSMiddleware,
            allow_origins=settings.cors_origins,
            allow_methods=["GET", "POST"],
            allow_headers=["authorization", "content-type", "last-event-id"],
            expose_headers=list(EXPOSED_HEADERS),
            max_age=600,
        )
    else:
        app.add_middleware(RefusePreflights)  # 403 saying what to set, not a bare 405
    _publish_400_not_422(app)
    return app


def _install_mcp(
    app: FastAPI, ctx: ServerContext
) -> Callable[[], AbstractAsyncContextManager[None]]:
    """``settings.mcp``: agents as MCP tools (``server/mcp/``, docs/mcp-serve.md). The
    ``mcp`` SDK is an optional extra, imported only here."""
    try:
        from .mcp.mount import install
    except ImportError as exc:
        if exc.name is None or exc.name.partition(".")[0] not in ("mcp", "mcp_types"):
            raise
        raise ConfigurationError(
            "serving agents as MCP tools (--mcp, DBOS_AGENTS_SERVER_MCP) needs the mcp SDK:"
            " pip install 'dbos-agents[mcp]'"
        ) from exc
    return install(app, ctx)


def _publish_400_not_422(app: FastAPI) -> None:
    """Malformed bodies answer 400 INVALID_REQUEST; say so in /openapi.json."""
    default = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is not None:
            return app.openapi_schema
        schema = default()
        for path in schema.get("paths", {}).values():
            for op in path.values():
                responses = op.get("responses", {})
                invalid = responses.pop("422", None)
                if invalid is not None and "400" not in responses:
                    responses["400"] = {
                        "description": "INVALID_REQUEST",
                        "content": {
                            "application/json": {
                                "schema": {"$ref": "#/components/schemas/ErrorBody"}
                            }
                        },
                    }
        components = schema.get("components", {}).get("schemas", {})
        if "ErrorBody" not in components:
            components["ErrorBody"] = ErrorBody.model_json_schema(
                ref_template="#/components/schemas/{model}"
            )
        for unused in ("HTTPValidationError", "ValidationError"):
            components.pop(unused, None)
        app.openapi_schema = schema
        return schema

    app.openapi = openapi  # type: ignore[method-assign]


SPAWN_ENV = "DBOS_AGENTS_SERVER_SPAWN_SETTINGS"
"""Where ``serve(workers=N)`` leaves the settings for the processes it starts (JSON)."""


def serve(
    settings: ServerSettings | None = None,
    authenticate: Authenticate | None = None,
    *,
    workers: int | None = None,
) -> None:
    """Run the API under uvicorn until SIGINT/SIGTERM (``dbos-agents serve``).

    ``workers`` (else ``settings.workers``) > 1 runs that many server processes on the one
    port (uvicorn's supervisor; each has its own connections and LISTEN), so one busy event
    loop no longer queues every request. They are started fresh, so the hook must come from
    ``settings.authenticate``.
    """
    import uvicorn

    settings = settings or ServerSettings()
    workers = settings.workers if workers is None else workers
    if workers < 1:
        raise ConfigurationError(f"workers must be at least 1, not {workers}")
    if workers == 1:
        app = create_app(settings, authenticate=authenticate)
        uvicorn.run(app, host=settings.host, port=settings.port, log_level=settings.log_level)
        return
    if authenticate is not None:
        raise ConfigurationError(
            "serve(workers > 1) starts new processes: name the authenticate hook as"
            " settings.authenticate ('module:function') instead of passing it"
        )
    create_app(settings)  # refuse a bad configuration here, not in every process
    os.environ[SPAWN_ENV] = _settings_json(settings)
    uvicorn.run(
        f"{__name__}:app_from_spawn",
        factory=True,
        workers=workers,
        host=settings.host,
        port=settings.port,
        log_level=settings.log_level,
    )


def app_from_spawn() -> FastAPI:
    """The app of one process started by ``serve(workers=N)``."""
    return create_app(ServerSettings.model_validate_json(os.environ[SPAWN_ENV]))


def _settings_json(settings: ServerSettings) -> str:
    data = settings.model_dump(mode="python")
    for name, value in data.items():
        if isinstance(value, SecretStr):
            data[name] = value.get_secret_value()
    return json.dumps(data)
