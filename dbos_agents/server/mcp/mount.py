"""The SDK's MCP server and streamable HTTP session manager, mounted in the FastAPI app.

A lowlevel ``mcp.server.Server`` with two handlers (``tools/list``: the catalogue;
``tools/call``: ``call.AgentTool``) and the SDK's ``RequestStateBoundary`` as middleware.
The session manager routes each request by its protocol version: a 2026-07-28 request is
served on its own (no session, nothing kept between requests, so any number of ``serve``
processes behind a load balancer answer it); a handshake-era client gets the SDK's
stateful session, which lives in the process that made it while its connection lasts
(its mid-call questions need that; behind a balancer route it by ``Mcp-Session-Id``).
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from typing import Any

import mcp_types as types
from fastapi import FastAPI, HTTPException
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.server.streamable_http_manager import StreamableHTTPASGIApp, StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from starlette.routing import Route

from ...errors import DbosAgentsError
from ..context import ServerContext
from ..settings import ServerSettings
from . import access, state
from .call import AgentTool, http_request
from .catalogue import INPUT_SCHEMA, Catalogue
from .errors import mcp_error

LOOPBACK = ("127.0.0.1", "localhost", "::1")

INSTRUCTIONS = (
    "Each tool is a durable agent: call it with a message; the result is its final answer."
    " Pass _meta['io.dbos-agents/session-id'] (from an earlier result's _meta) to continue"
    " that session. While the agent waits on you (a client tool, an approval) the call asks"
    " for input (a form)."
)


def install(app: FastAPI, ctx: ServerContext) -> Callable[[], AbstractAsyncContextManager[None]]:
    """Mount the MCP endpoint at ``ctx.settings.mcp_path``; returns the session manager's
    ``run``, for the app's lifespan to enter. ``ConfigurationError`` for settings that
    cannot serve it (no secret, an ``mcp_agents`` entry that names no agent)."""
    settings = ctx.settings
    catalogue = Catalogue.of(settings)

    async def list_tools(
        rctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        try:
            caller = await access.starting(ctx, http_request(rctx))
            return types.ListToolsResult(tools=await catalogue.tools(caller.client))
        except (DbosAgentsError, HTTPException) as exc:
            raise mcp_error(exc) from None

    server: Server[Any] = Server(
        "dbos-agents",
        title="dbos-agents: durable agents as tools",
        instructions=INSTRUCTIONS,
        on_list_tools=list_tools,
        on_call_tool=AgentTool(ctx, catalogue),
        # Every tool takes the same input: the SDK's Mcp-Param check needs no listing.
        get_tool_input_schema=lambda name: INPUT_SCHEMA,
    )
    server.middleware.append(state.boundary(settings))
    manager = StreamableHTTPSessionManager(
        app=server,
        json_response=False,
        stateless=False,
        security_settings=transport_security(settings),
        max_request_body_size=settings.max_body_bytes,
    )
    # An ASGI app as the endpoint (all methods): the SDK's own apps route it so.
    app.router.routes.append(Route(settings.mcp_path, endpoint=StreamableHTTPASGIApp(manager)))
    return manager.run


def transport_security(settings: ServerSettings) -> TransportSecuritySettings | None:
    """The SDK's DNS-rebinding check, as its own apps set it: on for a server bound to
    loopback (Host must name loopback; Origin, when sent, loopback or ``cors_origins``),
    off otherwise (the authenticate hook guards a server others can reach)."""
    if settings.host not in LOOPBACK:
        return None
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=["127.0.0.1:*", "localhost:*", "[::1]:*"],
        allowed_origins=[
            "http://127.0.0.1:*",
            "http://localhost:*",
            "http://[::1]:*",
            *settings.cors_origins,
        ],
    )
