"""The inbox routes: sign-in, the list of pending calls, decisions, a session's history.

Every GET only reads; every POST checks the CSRF token tied to the sign-in before it does
anything. An operator sees and answers the calls of one tenant (or, with no tenant, all):
the list query filters by it, and every action and session page checks the session's
tenant first (``AccessDeniedError`` otherwise, before anything is read or sent).
"""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime
from typing import Annotated, Any
from urllib.parse import urlencode

from fastapi import APIRouter, Form, HTTPException, Request
from fastapi.responses import Response

from ...client import AsyncAgentClient
from ...client.lookups import INBOX_MAX_ROWS
from ...delivery import ApprovalDelivery, Delivery, ResultDelivery
from ...errors import AccessDeniedError, DbosAgentsError, InvalidRequestError
from ...outcome import SessionInfo
from ..auth import call_hook
from ..context import ServerContext
from . import timeline
from .signin import OPERATOR_NAME, OperatorSessions, Visitor
from .views import NOTICES, error_lines, outcome_key, page, see_other

log = logging.getLogger("dbos_agents.server.inbox")
router = APIRouter(prefix="/inbox", include_in_schema=False)
Field = Annotated[str, Form()]


def _ctx(request: Request) -> tuple[ServerContext, OperatorSessions]:
    return request.app.state.dbos_agents, request.app.state.dbos_agents_inbox


def _operator(request: Request) -> Visitor | None:
    visitor = _ctx(request)[1].read(request)
    return visitor if visitor is not None and visitor.operator is not None else None


def _refused(request: Request, status: int, message: str) -> Response:
    return page(request, "message.html", {"title": "Refused", "message": message}, status)


def _scope(client: AsyncAgentClient, visitor: Visitor) -> AsyncAgentClient:
    """What the operator may act through: the tenant's scope (another tenant's session
    raises ``AccessDeniedError`` before anything is read or sent), or, for an operator of
    every tenant, the client itself."""
    return client if visitor.tenant_id is None else client.for_tenant(visitor.tenant_id)


# --- sign-in -------------------------------------------------------------------------------


@router.get("/sign-in")
async def sign_in_form(request: Request) -> Response:
    _, sessions = _ctx(request)
    visitor = sessions.read(request)
    if visitor is not None and visitor.operator is not None:
        return see_other("/inbox")
    return _sign_in_page(request, visitor or sessions.fresh())


def _sign_in_page(
    request: Request, visitor: Visitor, error: str | None = None, status: int = 200
) -> Response:
    ctx, sessions = _ctx(request)
    response = page(
        request,
        "sign_in.html",
        {
            "csrf": sessions.csrf_token(visitor),
            "with_token": ctx.settings.operator_token is not None,
            "with_hook": ctx.authenticate is not None,
            "error": error,
        },
        status,
    )
    sessions.write(request, response, visitor)  # the pre-sign-in nonce the form is tied to
    return response


@router.post("/sign-in")
async def sign_in(
    request: Request, csrf: Field = "", name: Field = "", token: Field = ""
) -> Response:
    ctx, sessions = _ctx(request)
    visitor = sessions.read(request)
    if visitor is None or not sessions.csrf_ok(visitor, csrf):
        return _refused(request, 403, "The sign-in form expired; reload it and try again.")
    operator: str | None = None
    tenant: str | None = None
    if token and sessions.token_ok(ctx.settings, token):
        if not OPERATOR_NAME.match(name):
            return _sign_in_page(
                request, visitor, "Your name: letters, digits and . _ @ - (up to 64).", 400
            )
        operator, tenant = f"operator:{name}", ctx.settings.operator_tenant
    elif not token and ctx.authenticate is not None:
        try:
            principal = await call_hook(ctx.authenticate, request, "operate", None)
        except HTTPException as exc:
            log.warning("inbox sign-in refused", extra={"event": "inbox.sign_in_refused"})
            return _sign_in_page(request, visitor, f"Refused: {exc.detail}", exc.status_code)
        if principal is not None:
            operator, tenant = f"operator:{principal.subject}", principal.tenant_id
    if operator is None:
        log.warning("inbox sign-in refused", extra={"event": "inbox.sign_in_refused"})
        return _sign_in_page(request, visitor, "Not signed in: wrong operator token.", 401)
    log.info(
        "inbox sign-in",
        extra={"event": "inbox.sign_in", "operator": operator, "tenant_id": tenant},
    )
    response = see_other("/inbox")
    sessions.write(request, response, sessions.fresh(operator, tenant))  # a new nonce
    return response


@router.post("/sign-out")
async def sign_out(request: Request, csrf: Field = "") -> Response:
    _, sessions = _ctx(request)
    visitor = sessions.read(request)
    if not sessions.csrf_ok(visitor, csrf):
        return _refused(request, 403, "CSRF check failed; reload the page and try again.")
    response = see_other("/inbox/sign-in")
    sessions.write(request, response, sessions.fresh())
    return response


# --- the inbox -----------------------------------------------------------------------------


@router.get("")
async def inbox(
    request: Request, agent: str = "", tool: str = "", done: str = "", call: str = ""
) -> Response:
    visitor = _operator(request)
    if visitor is None:
        return see_other("/inbox/sign-in")
    return await _inbox_page(
        request, visitor, agent=agent, tool=tool, notice=NOTICES.get(done), call=call
    )


async def _inbox_page(
    request: Request,
    visitor: Visitor,
    *,
    agent: str = "",
    tool: str = "",
    notice: str | None = None,
    call: str = "",
    errors: list[str] | None = None,
    drafts: dict[str, str] | None = None,
    status: int = 200,
) -> Response:
    ctx, sessions = _ctx(request)
    client = ctx.agent_client()
    rows = await client.inbox_open(tenant_id=visitor.tenant_id)
    settled = await client.inbox_settled(tenant_id=visitor.tenant_id)
    # Runs no worker can take (fleet-wide counts, as /metrics shows): why a session is stuck.
    stalled = [q for q in await client.queued_runs() if not q.served]
    shown = [r for r in rows if agent in ("", r.agent) and tool in ("", r.tool)]
    context: dict[str, Any] = {
        "operator": visitor.operator,
        "tenant": visitor.tenant_id,
        "csrf": sessions.csrf_token(visitor),
        "rows": shown,
        # The count comes from the very rows listed: it cannot say 0 while calls wait.
        "waiting": len(rows),
        "truncated": len(rows) >= INBOX_MAX_ROWS,
        "agents": sorted({r.agent for r in rows} | ({agent} - {""})),
        "tools": sorted({r.tool for r in rows} | ({tool} - {""})),
        "agent": agent,
        "tool": tool,
        "settled": settled,
        "stalled": stalled,
        "notice": notice,
        "call": call,
        "errors": errors,
        "drafts": drafts or {},
        "now": datetime.now(UTC),
    }
    return page(request, "inbox.html", context, status)


async def _answer(
    request: Request,
    csrf: str,
    session_id: str,
    tool_call_id: str,
    delivery: Delivery | str,
    draft: str = "",
) -> Response:
    """Check the operator, the CSRF token and the tenant, then deliver (or show why not).
    A ``str`` delivery is a message saying why the form was refused before sending."""
    ctx, sessions = _ctx(request)
    visitor = sessions.read(request)
    if visitor is None or visitor.operator is None:
        return _refused(request, 403, "Not signed in.")
    if not sessions.csrf_ok(visitor, csrf):
        return _refused(request, 403, "CSRF check failed; reload the inbox and try again.")
    scope = _scope(ctx.agent_client(), visitor)
    kind = "approval" if isinstance(delivery, ApprovalDelivery) else "client-tool-result"
    try:
        await scope.session(session_id)  # the tenant check, before the form's own errors
        if isinstance(delivery, str):
            raise InvalidRequestError(delivery)
        outcome = await scope.deliver(session_id, tool_call_id, delivery)
    except AccessDeniedError as exc:
        return _refused(request, 403, str(exc))
    except DbosAgentsError as exc:
        ctx.metrics.submits.labels(kind, exc.code).inc()
        return await _inbox_page(
            request,
            visitor,
            call=f"{session_id}/{tool_call_id}",
            errors=error_lines(exc),
            drafts={f"{session_id}/{tool_call_id}": draft},
            status=400,
        )
    ctx.metrics.submits.labels(kind, outcome.status).inc()
    log.info(
        "inbox decision",
        extra={
            "event": "inbox.decision",
            "operator": visitor.operator,
            "session_id": session_id,
            "tool_call_id": tool_call_id,
            "outcome": outcome.status,
        },
    )
    done = {"done": outcome_key(outcome), "call": f"{session_id}/{tool_call_id}"}
    return see_other("/inbox?" + urlencode(done))


@router.post("/calls/{session_id}/{tool_call_id}/decide")
async def decide(
    request: Request,
    session_id: str,
    tool_call_id: str,
    csrf: Field = "",
    decision: Field = "",
    reason: Field = "",
) -> Response:
    visitor = _operator(request)
    delivery: Delivery | str
    if decision not in ("approve", "deny"):
        delivery = "choose approve or deny"
    elif decision == "deny" and not reason.strip():
        delivery = "a denial needs a reason (the agent reads it)"
    else:
        delivery = ApprovalDelivery(
            approved=decision == "approve",
            reason=reason.strip() or None,
            decided_by=visitor.operator if visitor is not None else None,
        )
    return await _answer(request, csrf, session_id, tool_call_id, delivery)


@router.post("/calls/{session_id}/{tool_call_id}/result")
async def submit_result(
    request: Request, session_id: str, tool_call_id: str, csrf: Field = "", result: Field = ""
) -> Response:
    delivery: Delivery | str
    try:
        delivery = ResultDelivery(result=json.loads(result))
    except ValueError as exc:
        delivery = f"the result is not valid JSON ({exc}); nothing was sent"
    return await _answer(request, csrf, session_id, tool_call_id, delivery, draft=result)


# --- a session -----------------------------------------------------------------------------


async def _visible(
    request: Request, session_id: str
) -> Response | tuple[Visitor, OperatorSessions, AsyncAgentClient, AsyncAgentClient, SessionInfo]:
    """A session page's visitor, sign-in store, client, the client narrowed to the visitor,
    and the session; or the page to answer instead (sign in, 403, 404)."""
    visitor = _operator(request)
    if visitor is None:
        return see_other("/inbox/sign-in")
    ctx, sessions = _ctx(request)
    client = ctx.agent_client()
    scope = _scope(client, visitor)
    try:
        info = await scope.session(session_id)
    except AccessDeniedError as exc:
        return _refused(request, 403, str(exc))
    except DbosAgentsError as exc:
        return _refused(request, 404, str(exc))
    return visitor, sessions, client, scope, info


@router.get("/sessions/{session_id}/timeline")
async def timeline_page(request: Request, session_id: str) -> Response:
    """Where a session's time and money went, from our own records (``timeline``)."""
    seen = await _visible(request, session_id)
    if isinstance(seen, Response):
        return seen
    visitor, sessions, _, scope, info = seen
    context = {
        "operator": visitor.operator,
        "tenant": visitor.tenant_id,
        "csrf": sessions.csrf_token(visitor),
        "info": info,
        "timeline": timeline.build(await scope.timeline(session_id), datetime.now(UTC)),
    }
    return page(request, "timeline.html", context)


@router.get("/sessions/{session_id}")
async def session_page(request: Request, session_id: str) -> Response:
    seen = await _visible(request, session_id)
    if isinstance(seen, Response):
        return seen
    visitor, sessions, client, scope, info = seen
    history = await scope.history(session_id)
    calls = await client.inbox_session_calls(info.root_session_id)
    if info.parent_session_id is not None:
        calls = [c for c in calls if c.owner_session_id == session_id]
    context = {
        "operator": visitor.operator,
        "tenant": visitor.tenant_id,
        "csrf": sessions.csrf_token(visitor),
        "info": info,
        "history": history,
        "calls": calls,
        "now": datetime.now(UTC),
    }
    return page(request, "session.html", context)
