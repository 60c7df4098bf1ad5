"""``AgentClient``: what every process that is not a worker uses. It never launches DBOS,
and importing it loads no workflow.

It needs only the database URL: starting or continuing a session enqueues the run on the
agent queue (any worker picks it up) in the same transaction that records the session row.
Every method turns a database that does not answer into ``DatabaseUnavailableError``
(``store/unavailable.py``). Reads of a live session (``events``, ``stream``, ``watch``,
``wait``) are in ``live.py``. ``for_identity`` and ``for_tenant`` return the same class
narrowed to a ``Scope``; ``AsyncAgentClient`` (``aio.py``) awaits these same methods.
"""

from __future__ import annotations

import contextlib

import sqlalchemy as sa
from dbos import DBOSClient

from .. import _dbos, storable
from ..errors import (
    AccessDeniedError,
    SessionNotFoundError,
)
from ..live import deltas as delta_rows
from ..live.loop_reads import LoopReads
from ..live.watch import Watches
from ..outcome import SessionInfo, SessionStatus
from ..records import (
    PageInput,
    QueuedRuns,
    TimelineEvent,
    ToolCallRecord,
)
from ..settings import Settings
from ..store import calls, queries, queued, timeline, workers
from ..store import pending as pending_rows
from ..store import sessions as session_rows
from ..store.db import create_sync_engine, ping, sqlalchemy_url
from ..store.locate import locate_database, log_located
from ..store.migrate import prepare_database
from ..store.traced import TracedDBOSClient
from ..store.unavailable import translate, translated
from .history import HistoryReads
from .live import LiveReads
from .lookups import Lookups
from .scope import Scope, seen
from .state import StateReads
from .waits import WaitActions


class AgentClient(LiveReads, HistoryReads, StateReads, Lookups, WaitActions):
    """Start sessions and read their state from any process that can reach Postgres."""

    def __init__(
        self, database_url: str | None = None, *, settings: Settings | None = None
    ) -> None:
        """With no ``database_url`` (nor ``DBOS_AGENTS_DATABASE_URL``): the database the CLI
        uses, the embedded one in ``.dbos_agents/`` included (``store/locate.py``)."""
        self.settings = s = settings or Settings()
        located = locate_database(s, database_url)
        log_located(located)
        url = located.url
        _dbos.configure(fast_paths=s.dbos_fast_paths)
        with translate(url):
            prepare_database(
                url, connect_timeout=s.connect_timeout_sec, system_schema=s.dbos_system_schema
            )
            self.dbos: DBOSClient = TracedDBOSClient(
                system_database_url=sqlalchemy_url(url),
                application_name=s.app_name,
                dbos_system_schema=s.dbos_system_schema,
            )
        self.database_url = url
        self.engine: sa.Engine = create_sync_engine(url, connect_timeout=s.connect_timeout_sec)
        self._scope: Scope | None = None
        self._owns = True
        self.watches = Watches(url, s.connect_timeout_sec, self.engine)
        """The async client's shared LISTEN connection (``watch.py``), opened on first use."""
        self.known_agents = workers.KnownAgents(
            self.engine, s.stale_after_sec, when_no_worker=s.start_when_no_worker
        )
        """The fleet's agents, for ``start``'s check (remembered for a second)."""
        self.loop_reads = LoopReads(url, s.connect_timeout_sec)
        """The async client's full reads of live streams, on its event loop (``loop_reads.py``)."""

    # --- scope --------------------------------------------------------------------------

    @property
    def scope(self) -> Scope | None:
        """Whose sessions this client may act on; ``None``: every session (admin)."""
        return self._scope

    @property
    def user_id(self) -> str | None:
        return self._scope.user_id if self._scope is not None else None

    @property
    def tenant_id(self) -> str | None:
        return self._scope.tenant_id if self._scope is not None else None

    def for_identity(self, user_id: str, tenant_id: str | None = None) -> AgentClient:
        """This client bound to one user (and tenant): what user-facing code should hold.
        Acting on another identity's session raises ``AccessDeniedError``."""
        return self._narrowed(Scope(user_id, tenant_id))

    def for_tenant(self, tenant_id: str) -> AgentClient:
        """This client bound to one tenant, every user of it (an operator's scope)."""
        return self._narrowed(Scope(None, tenant_id))

    def _narrowed(self, scope: Scope) -> AgentClient:
        if self._scope is not None:
            raise AccessDeniedError(
                None, f"this client is scoped to {self._scope}; scope the admin client instead"
            )
        narrowed = object.__new__(AgentClient)
        narrowed.__dict__.update(self.__dict__)  # the same pools, owned by the admin client
        narrowed._scope, narrowed._owns = scope, False
        return narrowed

    def __repr__(self) -> str:
        return f"AgentClient(scope={self._scope!r})"

    def _own(self, session_id: str) -> SessionInfo:
        """The session, if this client may act on it."""
        storable.check_id(session_id, "session_id")
        info = queries.get_session(self.engine, session_id, self.settings.dbos_system_schema)
        return seen(self._scope, session_id, info)

    def _filters(self, user_id: str | None, tenant_id: str | None) -> tuple[str | None, str | None]:
        storable.check_optional_id(user_id, "user_id")
        storable.check_optional_id(tenant_id, "tenant_id")
        return (
            (user_id, tenant_id) if self._scope is None else self._scope.narrow(user_id, tenant_id)
        )

    # --- lifecycle ----------------------------------------------------------------------

    def close(self) -> None:
        """Close the pools (a scoped client shares its admin client's: a no-op)."""
        if self._owns:
            self.watches.stop()
            self.loop_reads.close()
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

    # --- sessions -----------------------------------------------------------------------

    @translated
    def start(
        self,
        agent: str,
        message: str,
        *,
        session_id: str | None = None,
        user_id: str | None = None,
        tenant_id: str | None = None,
        page: PageInput | None = None,
    ) -> str:
        """Enqueue a new session (or a follow-up run of ``session_id``); returns the session
        id. A scoped client's new sessions are its own; a follow-up must be to one of them.
        ``page``: what a chat page posts with the run (its frontend tools, context, state;
        ``records.PageInput``), carried in the run's input; a declared tool named like the
        agent's own or a state its schema refuses is ``InvalidRequestError``, nothing
        stored (checked against what its workers publish: ``page_contract.py``).

        The run waits on its agent's queue until a worker that runs the agent takes it.
        An agent no worker runs or has run is refused (``UnknownAgentError``: workers
        publish their agents, ``store.workers.known_agents``, read at most once a second
        while it lets agents in); one whose workers are all down is queued, or refused with
        ``AgentUnavailableError`` under ``start_when_no_worker = "refuse"``.
        """
        user_id, tenant_id = self._filters(user_id, tenant_id)
        storable.check_id(agent, "agent")  # a malformed name is INVALID_REQUEST, not unknown
        refused = self.known_agents.refusing(agent)
        if refused is not None:
            raise refused
        self._check_page(agent, page)
        if session_id is not None and self._scope is not None:
            # An id no session has yet starts a new one under it.
            with contextlib.suppress(SessionNotFoundError):
                self._own(session_id)
        spec, _ = queries.start_run(
            self.engine,
            self.dbos,
            self.settings.queue_name,
            agent=agent,
            message=message,
            session_id=session_id,
            user_id=user_id,
            tenant_id=tenant_id,
            system_schema=self.settings.dbos_system_schema,
            page=page,
        )
        return spec["session_id"]

    @translated
    def send(self, session_id: str, message: str, *, page: PageInput | None = None) -> str:
        """Continue a finished session with a follow-up message (``page`` as in ``start``)."""
        info = self._own(session_id)
        self._check_page(info.agent, page)
        return queries.start_run(
            self.engine,
            self.dbos,
            self.settings.queue_name,
            agent=info.agent,
            message=message,
            session_id=session_id,
            user_id=info.user_id,
            tenant_id=info.tenant_id,
            system_schema=self.settings.dbos_system_schema,
            page=page,
        )[0]["session_id"]

    @translated
    def session(self, session_id: str) -> SessionInfo:
        return self._own(session_id)

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
        given; at most ``limit`` (1 to 1000). A scoped client sees its own only."""
        storable.check_optional_id(agent, "agent")
        user_id, tenant_id = self._filters(user_id, tenant_id)
        return session_rows.list_recent(
            self.engine,
            agent=agent,
            status=status,
            user_id=user_id,
            tenant_id=tenant_id,
            limit=storable.check_int(limit, "limit", 1, 1000),
            system_schema=self.settings.dbos_system_schema,
        )

    @translated
    def queued_runs(self) -> list[QueuedRuns]:
        """Per agent, the runs waiting on its queue for a worker (fleet-wide counts, as
        ``GET /metrics`` shows them): many, or old, where no live worker runs the agent."""
        s = self.settings
        return queued.queued_runs(
            self.engine, s.queue_name, s.dbos_system_schema, s.stale_after_sec
        )

    @translated
    def tool_calls(self, session_id: str) -> list[ToolCallRecord]:
        self._own(session_id)
        return calls.list_for_session(self.engine, session_id)

    @translated
    def timeline(self, session_id: str) -> list[TimelineEvent]:
        """The session's runs, model turns, tool calls and waits (its sub-agents' too), with
        their times, tokens and cost, from this database's records (``store/timeline.py``):
        where time and money went, without a tracing backend."""
        self._own(session_id)
        return timeline.read(self.engine, session_id)

    # --- tokens and housekeeping -------------------------------------------------------------

    @translated
    def token_generation(self, session_id: str) -> int:
        """The generation a session token must carry to be valid (see ``revoke_tokens``)."""
        storable.check_id(session_id, "session_id")
        row = session_rows.token_generation(self.engine, session_id)
        return int(seen(self._scope, session_id, row).token_generation)

    @translated
    def revoke_tokens(self, session_id: str) -> int:
        """Invalidate every session token issued so far for ``session_id`` (open event
        streams close); returns the new generation."""
        self._own(session_id)
        gen = session_rows.revoke_tokens(self.engine, session_id)
        if gen is None:
            raise SessionNotFoundError(session_id)
        return gen

    @translated
    def reap_tombstones(self, retention_seconds: float | None = None) -> int:
        """Delete settled pending rows older than the retention window (default 24 h);
        the admin client's alone."""
        if self._scope is not None:
            raise AccessDeniedError(None, "reaping tombstones is for the admin client")
        retention = (
            retention_seconds
            if retention_seconds is not None
            else self.settings.tombstone_retention_sec
        )
        return pending_rows.reap(self.engine, retention)

    @translated
    def reap_deltas(self, retention_seconds: float | None = None) -> int:
        """Delete the live-stream pieces of runs that ended longer ago than the retention
        window (default ``delta_retention_sec``, 24 h); their messages stay. The admin
        client's alone; a worker does it every ``reap_interval_sec``."""
        if self._scope is not None:
            raise AccessDeniedError(None, "reaping live-stream pieces is for the admin client")
        retention = (
            retention_seconds
            if retention_seconds is not None
            else self.settings.delta_retention_sec
        )
        return delta_rows.reap(self.engine, retention)
