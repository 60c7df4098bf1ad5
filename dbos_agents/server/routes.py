"""Thin routes over ``AsyncAgentClient`` (they await it; no route hops threads itself);
errors are mapped in one place (``errors.py``)."""

from __future__ import annotations

import time
from typing import Annotated

from fastapi import APIRouter, Body, Header, HTTPException, Query, Request, Response, status
from fastapi.responses import JSONResponse
from sse_starlette import EventSourceResponse

from ..errors import DbosAgentsError, InvalidRequestError, UnknownAgentError
from ..events import Cursor
from ..outcome import SessionStatus
from ..records import SubmitOutcome
from .auth import Access, Operation, TokenError, unauthorized
from .context import ServerContext
from .errors import error_responses, unknown_tool_call
from .events import SEP, stream_events
from .follow import Limits
from .moves import approver
from .schemas import (
    Approval,
    CreateSession,
    Health,
    InterruptResult,
    MessageAccepted,
    PendingList,
    SendMessage,
    SessionList,
    SessionToken,
    SessionView,
    Submission,
    SubmitAccepted,
    TokensRevoked,
)

router = APIRouter()


def ctx_of(request: Request) -> ServerContext:
    ctx: ServerContext = request.app.state.dbos_agents
    return ctx


async def _authorize(
    request: Request, operation: Operation, session_id: str | None
) -> tuple[ServerContext, Access]:
    ctx = ctx_of(request)
    return ctx, await ctx.authorize(request, operation, session_id)


_SESSION_ERRORS = (400, 401, 403, 404, 411, 413)


@router.post(
    "/sessions",
    status_code=status.HTTP_201_CREATED,
    response_model=SessionToken,
    responses=error_responses(400, 401, 403, 404, 411, 413),
    tags=["sessions"],
)
async def create_session(request: Request, body: CreateSession) -> SessionToken:
    """Start a session (server-issued id) and get a token bound to it."""
    ctx, access = await _authorize(request, "create_session", None)
    allowed = ctx.settings.agents
    if allowed is not None and body.agent not in allowed:
        raise UnknownAgentError(body.agent, allowed)
    user_id, tenant_id = body.user_id, body.tenant_id
    p = access.principal
    if p is None and (user_id is not None or tenant_id is not None):
        # Anonymous mode (allow_unauthenticated): nobody vouches for these claims.
        raise InvalidRequestError(
            "an unauthenticated caller cannot set user_id or tenant_id; sign in"
        )
    if p is not None:
        for claimed, own in ((body.user_id, p.user_id), (body.tenant_id, p.tenant_id)):
            if claimed is not None and own is not None and claimed != own:
                raise HTTPException(403, "user_id/tenant_id differ from the authenticated ones")
        user_id = p.user_id or body.user_id
        tenant_id = p.tenant_id or body.tenant_id
    client = ctx.agent_client()
    sid = await client.start(body.agent, body.message, user_id=user_id, tenant_id=tenant_id)
    return ctx.new_session_token(sid)


@router.get(
    "/sessions",
    response_model=SessionList,
    responses=error_responses(400, 401, 403),
    tags=["sessions"],
)
async def list_sessions(
    request: Request,
    agent: str | None = None,
    status: SessionStatus | None = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 20,
) -> SessionList:
    """The caller's sessions, newest first: a signed-in user's own, a tenant principal's
    tenant's, everybody's for a principal that names neither; a session token's one session."""
    ctx = ctx_of(request)
    access = await ctx.authorize_listing(request)
    if access.token is not None:
        info = await ctx.agent_client().session(access.token.session_id)
        keep = (agent is None or info.agent == agent) and (status is None or info.status == status)
        return SessionList(sessions=[info] if keep else [])
    client = ctx.acting(access)
    p = access.principal
    if p is not None and p.user_id is None and p.tenant_id is not None:
        client = client.for_tenant(p.tenant_id)
    rows = await client.sessions(agent=agent, status=status, limit=limit)
    return SessionList(sessions=rows)


@router.post(
    "/sessions/{session_id}/messages",
    status_code=status.HTTP_202_ACCEPTED,
    response_model=MessageAccepted,
    responses=error_responses(*_SESSION_ERRORS, 409),
    tags=["sessions"],
)
async def send_message(request: Request, session_id: str, body: SendMessage) -> MessageAccepted:
    """Continue a session whose run has ended (409 while a run is going)."""
    ctx, access = await _authorize(request, "send_message", session_id)
    await ctx.acting(access).send(session_id, body.message)
    return MessageAccepted(session_id=session_id)


@router.get(
    "/sessions/{session_id}",
    response_model=SessionView,
    responses=error_responses(401, 403, 404),
    tags=["sessions"],
)
async def get_session(request: Request, session_id: str) -> SessionView:
    """The session's status, usage and transcript."""
    ctx, access = await _authorize(request, "read_session", session_id)
    client = ctx.acting(access)
    info = await client.session(session_id)
    history = await client.history(session_id)
    return SessionView(session=info, history=history)


@router.get(
    "/sessions/{session_id}/pending",
    response_model=PendingList,
    responses=error_responses(401, 403),
    tags=["submit"],
)
async def get_pending(request: Request, session_id: str) -> PendingList:
    """Open client-tool calls and approvals of this (root) session and its sub-agents."""
    ctx, access = await _authorize(request, "read_pending", session_id)
    rows = await ctx.acting(access).pending(session_id=session_id)
    return PendingList(pending=rows)


@router.post(
    "/sessions/{session_id}/submit-tool-result",
    response_model=SubmitAccepted,
    responses=error_responses(400, 401, 403, 404, 411, 413),
    tags=["submit"],
)
async def submit_tool_result(
    request: Request, session_id: str, body: Annotated[Submission, Body(title="Submission")]
) -> SubmitAccepted | JSONResponse:
    """Answer a client-tool call or an approval, addressed by the root session id.
    Idempotent: a second submit of the same call answers ``already_completed``."""
    approval = isinstance(body, Approval)
    ctx, access = await _authorize(
        request, "decide_approval" if approval else "submit_result", session_id
    )
    delivery = body.delivery()
    if isinstance(body, Approval):
        who = approver(ctx, access)  # approving is an authority of its own
        delivery = body.delivery(decided_by=who)
    client = ctx.acting(access)
    try:
        outcome: SubmitOutcome = await client.deliver(session_id, body.tool_call_id, delivery)
    except DbosAgentsError as exc:
        ctx.metrics.submits.labels(body.kind, exc.code).inc()
        raise
    ctx.metrics.submits.labels(body.kind, outcome.status).inc()
    if outcome.status == "unknown_tool_call":
        return unknown_tool_call(session_id, body.tool_call_id, outcome.reason)
    return SubmitAccepted(status=outcome.status)


@router.post(
    "/sessions/{session_id}/interrupt",
    response_model=InterruptResult,
    responses=error_responses(*_SESSION_ERRORS),
    tags=["sessions"],
)
async def interrupt(request: Request, session_id: str) -> InterruptResult:
    """Stop the session tree now; its open waits are cancelled. A new message continues it."""
    ctx, access = await _authorize(request, "interrupt", session_id)
    out = await ctx.acting(access).interrupt(session_id)
    return InterruptResult.model_validate(out.model_dump())


@router.post(
    "/sessions/{session_id}/token",
    response_model=SessionToken,
    responses=error_responses(*_SESSION_ERRORS),
    tags=["sessions"],
)
async def refresh_token(request: Request, session_id: str) -> SessionToken:
    """A fresh token for this session, for a caller that holds a valid one (or the hook's)."""
    ctx, access = await _authorize(request, "refresh_token", session_id)
    if ctx.tokens is None:
        raise HTTPException(404, "this server issues no tokens (no secret configured)")
    # A refresh keeps the chain's birth (and the generation just checked against the
    # session's): only the hook, a fresh sign-in, starts a new chain.
    if access.token is not None:
        born, generation = access.token.born, access.token.generation
    else:
        born = None
        generation = await ctx.agent_client().token_generation(session_id)
    try:
        issued = ctx.tokens.issue(session_id, born=born, generation=generation)
    except TokenError as exc:
        raise unauthorized(str(exc)) from None
    return SessionToken(session_id=session_id, token=issued.token, expires_at=issued.expires_at)


@router.post(
    "/sessions/{session_id}/revoke-tokens",
    response_model=TokensRevoked,
    responses=error_responses(*_SESSION_ERRORS),
    tags=["sessions"],
)
async def revoke_tokens(request: Request, session_id: str) -> TokensRevoked:
    """Invalidate every token issued for this session so far (a lost device, a logout
    everywhere); open event streams close. A new token then comes only from the hook."""
    ctx, _ = await _authorize(request, "revoke_tokens", session_id)
    generation = await ctx.agent_client().revoke_tokens(session_id)
    return TokensRevoked(session_id=session_id, token_generation=generation)


@router.get(
    "/sessions/{session_id}/events",
    response_class=EventSourceResponse,
    responses={
        200: {"content": {"text/event-stream": {}}, "description": "Server-sent events."},
        **error_responses(400, 401, 403, 404),
    },
    tags=["sessions"],
)
async def events(
    request: Request,
    session_id: str,
    offset: Annotated[
        str, Query(description='Resume after this cursor: "N" or "N.D" (an event\'s id).')
    ] = "0",
    follow: Annotated[bool, Query(description="Keep streaming; false closes at once.")] = True,
    last_event_id: Annotated[str | None, Header()] = None,
) -> EventSourceResponse:
    """The session's live log as server-sent events, resumable (see ``events.py``)."""
    ctx, access = await _authorize(request, "read_events", session_id)
    # A stream let in by a token ends when that token expires or is revoked.
    token = access.token
    after = Cursor.parse(last_event_id if last_event_id is not None else offset)
    # 404 (or 403 for another user's session) before the stream starts.
    await ctx.acting(access).session(session_id)
    s = ctx.settings
    clock = ctx.tokens.clock if ctx.tokens is not None else time.time
    body = stream_events(
        ctx.agent_client(), session_id, after, follow=follow, limits=Limits.of(s, token, clock)
    )
    return EventSourceResponse(
        body,
        headers={"Cache-Control": "no-cache"},
        ping=s.events_keepalive_sec,
        sep=SEP,
        send_timeout=s.events_send_timeout_sec,
    )


@router.get(
    "/healthz",
    response_model=Health,
    responses={503: {"model": Health, "description": "The database does not answer."}},
    tags=["operations"],
)
async def healthz(request: Request, response: Response) -> Health:
    """200 when the database answers a query; no auth."""
    ctx = ctx_of(request)
    try:
        await ctx.agent_client().ping()
    except Exception as exc:
        response.status_code = 503
        return Health(status="unavailable", database=type(exc).__name__)
    return Health(status="ok", database="ok")
