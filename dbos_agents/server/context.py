"""What the routes share: settings, the ``AsyncAgentClient``, tokens, the hook, metrics."""

from __future__ import annotations

import hmac
from dataclasses import dataclass, field

from fastapi import HTTPException, Request

from ..client import AsyncAgentClient
from .auth import (
    Access,
    Authenticate,
    Operation,
    Principal,
    SessionTokens,
    TokenError,
    bearer_token,
    call_hook,
    unauthorized,
)
from .metrics import Metrics
from .schemas import SessionToken
from .settings import ServerSettings


@dataclass(frozen=True)
class Seen:
    """A session as the request read it already: whom it belongs to and the generation its
    tokens carry (``authorize`` then reads nothing itself)."""

    user_id: str | None
    tenant_id: str | None
    token_generation: int


@dataclass
class ServerContext:
    settings: ServerSettings
    tokens: SessionTokens | None
    authenticate: Authenticate | None
    metrics: Metrics
    client: AsyncAgentClient | None = None
    owns_client: bool = field(default=False)

    def agent_client(self) -> AsyncAgentClient:
        if self.client is None:  # only before startup or after shutdown
            raise HTTPException(503, "the server is not started")
        return self.client

    def new_session_token(self, session_id: str) -> SessionToken:
        """What a route that made a session answers: its first token (none without a
        secret)."""
        if self.tokens is None:
            return SessionToken(session_id=session_id, token=None, expires_at=None)
        issued = self.tokens.issue(session_id)
        return SessionToken(session_id=session_id, token=issued.token, expires_at=issued.expires_at)

    def acting(self, access: Access) -> AsyncAgentClient:
        """The client a request acts through: scoped to the signed-in user when the hook names
        one (another user's or tenant's session is then ``ACCESS_DENIED``); a session token is
        already bound to its one session, and a tenant-wide principal is checked by
        ``authorize`` against the session's tenant."""
        p = access.principal
        if p is not None and p.user_id is not None:
            return self.agent_client().for_identity(p.user_id, p.tenant_id)
        return self.agent_client()

    async def authorize(
        self,
        request: Request,
        operation: Operation,
        session_id: str | None,
        seen: Seen | None = None,
    ) -> Access:
        """Let the call in or raise 401/403 (see ``dbos_agents.server.auth``); ``seen``: the
        session as the request read it already."""
        if self.authenticate is not None:
            principal = await call_hook(self.authenticate, request, operation, session_id)
            if principal is not None:
                if session_id is not None:
                    await self.check_owner(principal, session_id, seen)
                return Access(via="hook", principal=principal)
        if session_id is None:
            if self.settings.allow_unauthenticated:
                return Access(via="anonymous")
            raise unauthorized("not authenticated")
        if self.tokens is None:
            if self.settings.allow_unauthenticated:
                return Access(via="anonymous")
            raise unauthorized("not authenticated")
        return await self._token_access(request, session_id, seen)

    async def _token_access(
        self, request: Request, session_id: str | None, seen: Seen | None = None
    ) -> Access:
        """A valid, unrevoked session token (for ``session_id`` when one is named)."""
        assert self.tokens is not None
        try:
            token = self.tokens.verify_full(bearer_token(request))
        except TokenError as exc:
            raise unauthorized(str(exc)) from None
        if session_id is not None and not hmac.compare_digest(
            token.session_id.encode(), session_id.encode()
        ):
            raise HTTPException(403, "this token is for another session")
        if seen is not None and session_id is not None:  # the token's own session, read
            current = seen.token_generation
        else:
            current = await self.agent_client().token_generation(token.session_id)
        if token.generation != current:
            raise unauthorized("token revoked")
        return Access(via="token", token=token)

    async def authorize_listing(self, request: Request) -> Access:
        """``GET /sessions``: the hook's principal (scoped by its user or tenant); else, on a
        server that issues tokens, a session token (its one session); else anonymous only
        where callers need no token at all."""
        if self.authenticate is not None:
            principal = await call_hook(self.authenticate, request, "list_sessions", None)
            if principal is not None:
                return Access(via="hook", principal=principal)
        if self.tokens is not None:
            return await self._token_access(request, None)
        if self.settings.allow_unauthenticated:
            return Access(via="anonymous")
        raise unauthorized("not authenticated")

    async def check_owner(self, principal: Principal, session_id: str, seen: Seen | None) -> None:
        """The principal's user and tenant, checked by the scoped client's one rule
        (``AccessDeniedError``: 403 ``ACCESS_DENIED``); a principal naming neither may act
        on any session."""
        client = self.agent_client()
        if principal.user_id is not None:
            scoped = client.for_identity(principal.user_id, principal.tenant_id)
        elif principal.tenant_id is not None:
            scoped = client.for_tenant(principal.tenant_id)
        else:
            return
        if seen is None:
            await scoped.session(session_id)
        elif scoped.scope is not None:
            scoped.scope.check(session_id, seen.user_id, seen.tenant_id)
