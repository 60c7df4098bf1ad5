"""``AgentClient``'s answers to waits: client-tool results, approvals, an operator's
failure, the open waits, and interrupts (a base class of ``AgentClient``, kept apart so
each module stays readable; ``submit.py`` holds the policy)."""

from __future__ import annotations

import sqlalchemy as sa
from dbos import DBOSClient

from ..delivery import ApprovalDelivery, Delivery, ErrorDelivery, ResultDelivery
from ..errors import InvalidRequestError
from ..messages import JSONValue
from ..outcome import SessionInfo
from ..records import InterruptOutcome, PendingCall, PendingKind, SubmitOutcome
from ..settings import Settings
from ..store import pending as pending_rows
from ..store.unavailable import translated
from . import submit
from .scope import Scope


class WaitActions:
    """See the module doc; ``AgentClient`` provides the attributes declared here."""

    engine: sa.Engine
    dbos: DBOSClient
    settings: Settings
    database_url: str
    _scope: Scope | None

    def _own(self, session_id: str) -> SessionInfo:
        raise NotImplementedError

    def _filters(self, user_id: str | None, tenant_id: str | None) -> tuple[str | None, str | None]:
        raise NotImplementedError

    @translated
    def submit_tool_result(
        self,
        session_id: str,
        tool_call_id: str,
        *,
        result: JSONValue = None,
        error: str | None = None,
    ) -> SubmitOutcome:
        """Answer a client-tool call, addressed by the *root* session id.

        Give ``result`` (validated against the tool's output schema; ``InvalidResultError``
        lists what is wrong) or ``error`` (a sentence the model will read; not validated).
        Returns ``accepted``, ``already_completed``, ``unknown_tool_call`` or
        ``late_answer_after_timeout``; submitting twice delivers once.
        """
        if error is not None and result is not None:
            raise InvalidRequestError("give either result or error, not both")
        delivery: Delivery = (
            ErrorDelivery(error=str(error)) if error is not None else ResultDelivery(result=result)
        )
        return self.deliver(session_id, tool_call_id, delivery)

    @translated
    def submit_approval(
        self,
        session_id: str,
        tool_call_id: str,
        approved: bool,
        reason: str | None = None,
        *,
        decided_by: str | None = None,
    ) -> SubmitOutcome:
        """Approve or deny an approval-gated tool call (root session id); ``decided_by``
        is stored with the decision and shown in ``pending(include_resolved=True)``."""
        if not isinstance(approved, bool):
            raise InvalidRequestError("approved must be true or false")
        delivery = ApprovalDelivery(approved=approved, reason=reason, decided_by=decided_by)
        return self.deliver(session_id, tool_call_id, delivery)

    @translated
    def fail(self, session_id: str, tool_call_id: str, error: str) -> SubmitOutcome:
        """Operator escape hatch: settle a stuck call of either kind with an error result."""
        return self.deliver(session_id, tool_call_id, ErrorDelivery(error=error))

    @translated
    def deliver(self, session_id: str, tool_call_id: str, delivery: Delivery) -> SubmitOutcome:
        """Submit a typed ``Delivery`` (what the HTTP server and scripts build)."""
        return submit.submit(
            self.engine,
            self.dbos,
            session_id=session_id,
            tool_call_id=tool_call_id,
            delivery=delivery,
            schema=self.settings.dbos_system_schema,
            scope=self._scope,
        )

    @translated
    def pending(
        self,
        *,
        session_id: str | None = None,
        tenant_id: str | None = None,
        user_id: str | None = None,
        kind: PendingKind | None = None,
        include_resolved: bool = False,
        limit: int = 100,
    ) -> list[PendingCall]:
        """Open waits, oldest deadline first; filter by root session, tenant, user or kind
        (a scoped client sees its own only)."""
        if session_id is not None:
            self._own(session_id)
        user_id, tenant_id = self._filters(user_id, tenant_id)
        return pending_rows.list_pending(
            self.engine,
            pending_rows.list_pending_stmt(
                session_id=session_id,
                tenant_id=tenant_id,
                user_id=user_id,
                kind=kind,
                include_resolved=include_resolved,
                limit=limit,
                system_schema=self.settings.dbos_system_schema,
            ),
        )

    @translated
    def interrupt(self, session_id: str) -> InterruptOutcome:
        """Stop a session and its sub-agents now; late submits get ``unknown_tool_call``.
        A new message continues the session afterwards."""
        return submit.interrupt(self.engine, self.dbos, session_id, self._scope)
