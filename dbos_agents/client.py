"""``AgentClient``: what every process that is not a worker uses. It never launches DBOS.

It needs only the database URL: starting or continuing a session enqueues the run on the
agent queue (any worker picks it up) in the same transaction that records the session row.
Every method turns a database that does not answer into ``DatabaseUnavailableError``
(``store/unavailable.py``). ``AsyncAgentClient`` (``async_client.py``) is its async twin.
"""

from __future__ import annotations

import json
import time

import sqlalchemy as sa
from dbos import DBOSClient

from . import _dbos, storable
from .delivery import ApprovalDelivery, Delivery, ErrorDelivery, ResultDelivery
from .errors import ConfigurationError, InvalidRequestError, SessionNotFoundError
from .messages import JSONValue
from .outcome import TERMINAL, SessionInfo, SessionStatus
from .records import (
    HistoryEntry,
    InterruptOutcome,
    PendingCall,
    PendingKind,
    SessionEvents,
    SubmitOutcome,
    ToolCallRecord,
)
from .scoped import ScopedClient
from .settings import Settings
from .store import events as event_log
from .store import queries, submit
from .store import sessions as session_rows
from .store.db import create_sync_engine, ping, sqlalchemy_url
from .store.migrate import prepare_database
from .store.unavailable import translate, translated


class AgentClient:
    """Start sessions and read their state from any process that can reach Postgres."""

    def __init__(
        self, database_url: str | None = None, *, settings: Settings | None = None
    ) -> None:
        self.settings = settings or Settings()
        url = database_url or self.settings.database_url
        if url is None:
            raise ConfigurationError(
                "AgentClient needs a database_url (or DBOS_AGENTS_DATABASE_URL)"
            )
        s = self.settings
        _dbos.configure(fast_paths=s.dbos_fast_paths)
        with translate(url):
            prepare_database(
                url, connect_timeout=s.connect_timeout_sec, system_schema=s.dbos_system_schema
            )
            self.dbos = DBOSClient(
                system_database_url=sqlalchemy_url(url),
                application_name=s.app_name,
                dbos_system_schema=s.dbos_system_schema,
            )
        self.database_url = url
        self.engine: sa.Engine = create_sync_engine(
            url, connect_timeout=self.settings.connect_timeout_sec
        )

    def for_identity(self, user_id: str, tenant_id: str | None = None) -> ScopedClient:
        """This client bound to one user (and tenant): what user-facing code should hold.
        Acting on another identity's session raises ``AccessDeniedError``."""
        return ScopedClient(self, user_id, tenant_id)

    def for_tenant(self, tenant_id: str) -> ScopedClient:
        """This client bound to one tenant, every user of it (an operator's scope)."""
        return ScopedClient(self, None, tenant_id)

    def close(self) -> None:
        self.dbos.destroy()
        self.engine.dispose()

    def __enter__(self) -> AgentClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @translated
    def ping(self) -> None:
        """Check that the database answers a query; raises ``DatabaseUnavailableError``."""
        ping(self.engine)

    @translated
    def start(
        self,
        agent: str,
        message: str,
        *,
        session_id: str | None = None,
        user_id: str | None = None,
        tenant_id: str | None = None,
    ) -> str:
        """Enqueue a new session (or a follow-up run of ``session_id``); returns the session id.

        The agent name is checked by the worker that runs it (this process has no registry).
        """
        spec, _ = queries.start_run(
            self.engine,
            self.dbos,
            self.settings.queue_name,
            agent=agent,
            message=message,
            session_id=session_id,
            user_id=user_id,
            tenant_id=tenant_id,
        )
        return spec["session_id"]

    @translated
    def send(self, session_id: str, message: str) -> str:
        """Continue a finished session with a follow-up message."""
        info = self.session(session_id)
        return self.start(info.agent, message, session_id=session_id)

    @translated
    def session(self, session_id: str) -> SessionInfo:
        storable.check_id(session_id, "session_id")
        info = queries.get_session(self.engine, session_id)
        if info is None:
            raise SessionNotFoundError(session_id)
        return info

    @translated
    def sessions(
        self,
        *,
        agent: str | None = None,
        status: SessionStatus | None = None,
        user_id: str | None = None,
        tenant_id: str | None = None,
        limit: int = 20,
    ) -> list[SessionInfo]:
        """Sessions newest first (sub-agent sessions included), each filter applied when
        given; at most ``limit`` (1 to 1000)."""
        for value, what in ((agent, "agent"), (user_id, "user_id"), (tenant_id, "tenant_id")):
            storable.check_optional_id(value, what)
        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= 1000:
            raise InvalidRequestError(f"limit must be an int from 1 to 1000, got {limit!r}")
        return session_rows.list_recent(
            self.engine,
            agent=agent,
            status=status,
            user_id=user_id,
            tenant_id=tenant_id,
            limit=limit,
        )

    @translated
    def events(
        self, session_id: str, after_seq: int = 0, *, limit: int = event_log.BATCH
    ) -> SessionEvents:
        """The session's status, then up to ``limit`` messages with ``seq > after_seq``
        (what ``dbos-agents follow`` and the HTTP event stream poll). ``status`` is
        ``None`` when there is no such session; a full batch means read again."""
        storable.check_id(session_id, "session_id")
        if isinstance(after_seq, bool) or not isinstance(after_seq, int) or after_seq < 0:
            raise InvalidRequestError(f"after_seq must be an int >= 0, got {after_seq!r}")
        if (
            isinstance(limit, bool)
            or not isinstance(limit, int)
            or not 1 <= limit <= event_log.BATCH
        ):
            raise InvalidRequestError(f"limit must be an int from 1 to {event_log.BATCH}")
        return event_log.read_since(self.engine, session_id, after_seq, limit)

    @translated
    def history(self, session_id: str) -> list[HistoryEntry]:
        return queries.history(self.engine, storable.check_id(session_id, "session_id"))

    @translated
    def tool_calls(self, session_id: str) -> list[ToolCallRecord]:
        return queries.tool_calls(self.engine, storable.check_id(session_id, "session_id"))

    @translated
    def wait(self, session_id: str, *, timeout: float = 60.0, poll: float = 0.1) -> SessionInfo:
        """Poll until the session's current run ends; raises ``TimeoutError``."""
        deadline = time.monotonic() + timeout
        while True:
            info = session_rows.get(self.engine, session_id)
            if info is not None and info.status in TERMINAL:
                return info
            if time.monotonic() >= deadline:
                state = info.status if info else "not started"
                raise TimeoutError(f"session {session_id} still {state} after {timeout}s")
            time.sleep(poll)

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
        return self._submit(session_id, tool_call_id, delivery)

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
        return self._submit(session_id, tool_call_id, delivery)

    @translated
    def fail(self, session_id: str, tool_call_id: str, error: str) -> SubmitOutcome:
        """Operator escape hatch: settle a stuck call of either kind with an error result."""
        return self._submit(session_id, tool_call_id, ErrorDelivery(error=error))

    @translated
    def deliver(self, session_id: str, tool_call_id: str, delivery: Delivery) -> SubmitOutcome:
        """Submit a typed ``Delivery`` (what the HTTP server and scripts build)."""
        return self._submit(session_id, tool_call_id, delivery)

    def _submit(self, session_id: str, tool_call_id: str, delivery: Delivery) -> SubmitOutcome:
        try:
            json.dumps(delivery.model_dump(mode="json"))
        except (TypeError, ValueError) as exc:
            raise InvalidRequestError(f"the submission is not JSON-serializable: {exc}") from exc
        return submit.submit(
            self.engine,
            self.dbos,
            session_id=session_id,
            tool_call_id=tool_call_id,
            delivery=delivery,
            schema=self.settings.dbos_system_schema,
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
        """Open waits, oldest deadline first; filter by root session, tenant, user or kind."""
        storable.check_optional_id(session_id, "session_id")
        storable.check_optional_id(tenant_id, "tenant_id")
        storable.check_optional_id(user_id, "user_id")
        return submit.pending(
            self.engine,
            self.settings.dbos_system_schema,
            session_id=session_id,
            tenant_id=tenant_id,
            user_id=user_id,
            kind=kind,
            include_resolved=include_resolved,
            limit=limit,
        )

    @translated
    def interrupt(self, session_id: str) -> InterruptOutcome:
        """Stop a session and its sub-agents now; late submits get ``unknown_tool_call``.
        A new message continues the session afterwards."""
        return submit.interrupt(self.engine, self.dbos, session_id)

    @translated
    def token_generation(self, session_id: str) -> int:
        """The generation a session token must carry to be valid (see ``revoke_tokens``)."""
        gen = session_rows.token_generation(
            self.engine, storable.check_id(session_id, "session_id")
        )
        if gen is None:
            raise SessionNotFoundError(session_id)
        return gen

    @translated
    def revoke_tokens(self, session_id: str) -> int:
        """Invalidate every session token issued so far for ``session_id`` (open event
        streams close); returns the new generation."""
        gen = session_rows.revoke_tokens(self.engine, storable.check_id(session_id, "session_id"))
        if gen is None:
            raise SessionNotFoundError(session_id)
        return gen

    @translated
    def reap_tombstones(self, retention_seconds: float | None = None) -> int:
        """Delete settled pending rows older than the retention window (default 24 h)."""
        retention = (
            retention_seconds
            if retention_seconds is not None
            else self.settings.tombstone_retention_sec
        )
        return submit.reap_tombstones(self.engine, retention)
