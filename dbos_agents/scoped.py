"""``ScopedClient``: an ``AgentClient`` bound to one user (and tenant), or to one tenant.

User-facing code (an API handler acting for a signed-in user) should hold one of these
instead of the full client: every session it touches is checked to belong to its user and
tenant (``AccessDeniedError`` otherwise, before anything is read or changed), sessions it
starts are its own, and listings are filtered to it. A tenant scope
(``AgentClient.for_tenant``: an operator's, say) covers every user of one tenant. There is no way to switch identity on
it; ``AgentClient`` itself is the admin scope, for trusted scripts and the CLI. Raw SQL
over agent tables goes through an application role instead (``store/roles.py``), where
Postgres enforces the same rule.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING

from . import storable
from .delivery import Delivery
from .errors import AccessDeniedError, SessionNotFoundError
from .messages import JSONValue
from .outcome import SessionInfo, SessionStatus
from .records import (
    HistoryEntry,
    InterruptOutcome,
    PendingCall,
    PendingKind,
    SessionEvents,
    SubmitOutcome,
    ToolCallRecord,
)

if TYPE_CHECKING:
    from .client import AgentClient  # client.py imports this module


class ScopedClient:
    """The part of ``AgentClient`` one user, or one tenant, may use (see the module doc)."""

    def __init__(self, client: AgentClient, user_id: str | None, tenant_id: str | None) -> None:
        if user_id is None and tenant_id is None:
            raise ValueError("a scope names a user, a tenant or both")
        self._client = client
        self._user_id = storable.check_optional_id(user_id, "user_id")
        self._tenant_id = storable.check_optional_id(tenant_id, "tenant_id")

    @property
    def user_id(self) -> str | None:
        """The scope's user; ``None`` in a tenant scope (every user of the tenant)."""
        return self._user_id

    @property
    def tenant_id(self) -> str | None:
        return self._tenant_id

    def __repr__(self) -> str:
        return f"ScopedClient(user_id={self._user_id!r}, tenant_id={self._tenant_id!r})"

    def _own(self, session_id: str) -> SessionInfo:
        """The session, if it is this identity's; sub-agent sessions carry their root's
        user and tenant, so the same check covers them."""
        info = self._client.session(session_id)
        if (self._user_id is not None and info.user_id != self._user_id) or (
            self._tenant_id is not None and info.tenant_id != self._tenant_id
        ):
            raise AccessDeniedError(session_id)
        return info

    def start(self, agent: str, message: str, *, session_id: str | None = None) -> str:
        """A new session of this identity's (or a follow-up of one of its sessions)."""
        if session_id is not None:
            # An id no session has yet starts a new one under it: only an existing
            # session must be this identity's.
            with contextlib.suppress(SessionNotFoundError):
                self._own(session_id)
        return self._client.start(
            agent, message, session_id=session_id, user_id=self._user_id, tenant_id=self._tenant_id
        )

    def send(self, session_id: str, message: str) -> str:
        info = self._own(session_id)
        return self._client.start(info.agent, message, session_id=session_id)

    def session(self, session_id: str) -> SessionInfo:
        return self._own(session_id)

    def sessions(
        self, *, agent: str | None = None, status: SessionStatus | None = None, limit: int = 20
    ) -> list[SessionInfo]:
        """This identity's sessions, newest first."""
        return self._client.sessions(
            agent=agent,
            status=status,
            user_id=self._user_id,
            tenant_id=self._tenant_id,
            limit=limit,
        )

    def events(self, session_id: str, after_seq: int = 0) -> SessionEvents:
        self._own(session_id)
        return self._client.events(session_id, after_seq)

    def history(self, session_id: str) -> list[HistoryEntry]:
        self._own(session_id)
        return self._client.history(session_id)

    def tool_calls(self, session_id: str) -> list[ToolCallRecord]:
        self._own(session_id)
        return self._client.tool_calls(session_id)

    def pending(
        self,
        *,
        session_id: str | None = None,
        kind: PendingKind | None = None,
        include_resolved: bool = False,
        limit: int = 100,
    ) -> list[PendingCall]:
        """This identity's waits only."""
        if session_id is not None:
            self._own(session_id)
        return self._client.pending(
            session_id=session_id,
            user_id=self._user_id,
            tenant_id=self._tenant_id,
            kind=kind,
            include_resolved=include_resolved,
            limit=limit,
        )

    def submit_tool_result(
        self,
        session_id: str,
        tool_call_id: str,
        *,
        result: JSONValue = None,
        error: str | None = None,
    ) -> SubmitOutcome:
        self._own(session_id)
        return self._client.submit_tool_result(session_id, tool_call_id, result=result, error=error)

    def deliver(self, session_id: str, tool_call_id: str, delivery: Delivery) -> SubmitOutcome:
        self._own(session_id)
        return self._client.deliver(session_id, tool_call_id, delivery)

    def interrupt(self, session_id: str) -> InterruptOutcome:
        self._own(session_id)
        return self._client.interrupt(session_id)
