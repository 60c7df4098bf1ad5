"""Who may make an MCP call: the REST API's ``authenticate`` hook and tenant scoping.

The hook sees the HTTP request that carried the call and the REST operation it amounts
to: ``create_session`` for ``tools/list`` and for a call that starts a session,
``send_message`` for one that continues the session its ``_meta`` names (which then needs
the hook's principal or that session's bearer token, as ``POST /sessions/{id}/messages``
does), and on a retry ``submit_result`` / ``decide_approval`` for the answers it carries,
``read_session`` when it carries none. A principal is checked against the session's user
and tenant (``ACCESS_DENIED``) and scopes the client the call acts through. On a retry the
sealed ``requestState`` stands where a session token would (the caller got it from the
call that made or continued the session); the hook still comes first and may refuse.
Approvals need the hook's principal or ``tokens_may_approve``, as on the REST route.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from fastapi import Request

from ...client import AsyncAgentClient
from ..auth import Access, Operation, Principal, call_hook
from ..context import ServerContext


@dataclass(frozen=True)
class Caller:
    """A call let in: how, the client it acts through, and what it may answer."""

    access: Access
    client: AsyncAgentClient
    may_approve: bool

    @property
    def decided_by(self) -> str:
        p = self.access.principal
        return p.subject if p is not None else f"mcp-client ({self.access.via})"


def _caller(ctx: ServerContext, access: Access, approver: Principal | None) -> Caller:
    may = approver is not None or ctx.settings.tokens_may_approve
    return Caller(access, ctx.acting(access), may)


async def starting(ctx: ServerContext, request: Request) -> Caller:
    """A call that starts a session (and ``tools/list``)."""
    access = await ctx.authorize(request, "create_session", None)
    return _caller(ctx, access, access.principal)


async def continuing(ctx: ServerContext, request: Request, session_id: str) -> Caller:
    """A call that continues ``session_id`` (named in its ``_meta``)."""
    access = await ctx.authorize(request, "send_message", session_id)
    return _caller(ctx, access, access.principal)


async def retrying(
    ctx: ServerContext, request: Request, session_id: str, operations: Iterable[Operation]
) -> Caller:
    """A retry carrying a valid ``requestState`` for ``session_id`` (see the module doc)."""
    ops = sorted(set(operations)) or ["read_session"]
    vouched: dict[str, Principal] = {}
    if ctx.authenticate is not None:
        for op in ops:
            principal = await call_hook(ctx.authenticate, request, op, session_id)
            if principal is not None:
                await ctx.check_owner(principal, session_id, None)
                vouched[op] = principal
    first = next(iter(vouched.values()), None)
    access = Access(via="hook", principal=first) if first is not None else Access(via="token")
    approver = vouched.get("decide_approval") or (first if "decide_approval" not in ops else None)
    return _caller(ctx, access, approver)
