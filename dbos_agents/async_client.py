"""``AsyncAgentClient``: ``AgentClient`` for async code (an HTTP server, an async script).

Why a second class and not ``*_async`` methods on ``AgentClient``: the two sets of method
names would double the sync client past what one class should hold, and an async caller
should not be one typo away from a blocking call on its event loop. Every method here has
the same name, arguments, errors and return type as its sync twin.

How: each call runs the sync client's method in a worker thread (``anyio.to_thread``,
the pool Starlette uses), so the store keeps one implementation and callers never hop
threads themselves. The sync client does the work, including turning a database that does
not answer into ``DatabaseUnavailableError``. A call once started runs to its end even if
the awaiting task is cancelled: a submit is never left half-done by a cancelled request.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from typing import Concatenate, ParamSpec, TypeVar

import anyio
import anyio.to_thread
import sqlalchemy as sa

from .client import AgentClient
from .delivery import Delivery
from .errors import SessionNotFoundError
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
from .store.db import ping
from .store.events import BATCH
from .store.unavailable import translate

P = ParamSpec("P")
T = TypeVar("T")


async def _off_loop(fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> T:
    return await anyio.to_thread.run_sync(functools.partial(fn, *args, **kwargs))


class AsyncAgentClient:
    """``AgentClient`` for async code; see the module doc.

    Make one with ``await AsyncAgentClient.connect(url)`` (or ``async with``), or wrap a
    sync client you already have with ``AsyncAgentClient(client)``: they share its
    connection pool, and ``aclose`` then leaves it open for its owner.
    """

    def __init__(self, client: AgentClient, *, owns_client: bool = False) -> None:
        self._sync = client
        self._owns = owns_client

    @classmethod
    async def connect(
        cls, database_url: str | None = None, *, settings: Settings | None = None
    ) -> AsyncAgentClient:
        """Connect (and bring the schema up to date) without blocking the event loop."""
        client = await _off_loop(AgentClient, database_url, settings=settings)
        return cls(client, owns_client=True)

    @property
    def sync(self) -> AgentClient:
        """The sync client underneath (for code that runs in a thread anyway)."""
        return self._sync

    @property
    def database_url(self) -> str:
        return self._sync.database_url

    @property
    def settings(self) -> Settings:
        return self._sync.settings

    async def aclose(self) -> None:
        if self._owns:
            await _off_loop(self._sync.close)

    async def __aenter__(self) -> AsyncAgentClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def for_identity(self, user_id: str, tenant_id: str | None = None) -> AsyncScopedClient:
        """This client bound to one user (and tenant); see ``ScopedClient``."""
        return AsyncScopedClient(self._sync.for_identity(user_id, tenant_id))

    def for_tenant(self, tenant_id: str) -> AsyncScopedClient:
        """This client bound to one tenant; see ``ScopedClient``."""
        return AsyncScopedClient(self._sync.for_tenant(tenant_id))

    async def offload(
        self, fn: Callable[Concatenate[sa.Engine, P], T], /, *args: P.args, **kwargs: P.kwargs
    ) -> T:
        """Run ``fn(engine, *args, **kwargs)``, a read of your own over this client's
        connection pool, off the event loop, with database errors translated (what the
        operator inbox uses for its listings)."""

        def call() -> T:
            with translate(self._sync.database_url):
                return fn(self._sync.engine, *args, **kwargs)

        return await _off_loop(call)

    async def ping(self) -> None:
        """Check that the database answers a query; raises ``DatabaseUnavailableError``."""
        await self.offload(ping)

    async def start(
        self,
        agent: str,
        message: str,
        *,
        session_id: str | None = None,
        user_id: str | None = None,
        tenant_id: str | None = None,
    ) -> str:
        return await _off_loop(
            self._sync.start,
            agent,
            message,
            session_id=session_id,
            user_id=user_id,
            tenant_id=tenant_id,
        )

    async def send(self, session_id: str, message: str) -> str:
        return await _off_loop(self._sync.send, session_id, message)

    async def session(self, session_id: str) -> SessionInfo:
        return await _off_loop(self._sync.session, session_id)

    async def sessions(
        self,
        *,
        agent: str | None = None,
        status: SessionStatus | None = None,
        user_id: str | None = None,
        tenant_id: str | None = None,
        limit: int = 20,
    ) -> list[SessionInfo]:
        return await _off_loop(
            self._sync.sessions,
            agent=agent,
            status=status,
            user_id=user_id,
            tenant_id=tenant_id,
            limit=limit,
        )

    async def events(
        self, session_id: str, after_seq: int = 0, *, limit: int = BATCH
    ) -> SessionEvents:
        return await _off_loop(self._sync.events, session_id, after_seq, limit=limit)

    async def history(self, session_id: str) -> list[HistoryEntry]:
        return await _off_loop(self._sync.history, session_id)

    async def tool_calls(self, session_id: str) -> list[ToolCallRecord]:
        return await _off_loop(self._sync.tool_calls, session_id)

    async def wait(
        self,
        session_id: str,
        *,
        timeout: float = 60.0,  # noqa: ASYNC109 -- the sync twin's signature
        poll: float = 0.1,
    ) -> SessionInfo:
        """Poll until the session's current run ends; raises ``TimeoutError``. Holds no
        thread between polls."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                info: SessionInfo | None = await self.session(session_id)
            except SessionNotFoundError:
                info = None
            if info is not None and info.status in TERMINAL:
                return info
            if time.monotonic() >= deadline:
                state = info.status if info else "not started"
                raise TimeoutError(f"session {session_id} still {state} after {timeout}s")
            await anyio.sleep(poll)

    async def submit_tool_result(
        self,
        session_id: str,
        tool_call_id: str,
        *,
        result: JSONValue = None,
        error: str | None = None,
    ) -> SubmitOutcome:
        return await _off_loop(
            self._sync.submit_tool_result, session_id, tool_call_id, result=result, error=error
        )

    async def submit_approval(
        self,
        session_id: str,
        tool_call_id: str,
        approved: bool,
        reason: str | None = None,
        *,
        decided_by: str | None = None,
    ) -> SubmitOutcome:
        return await _off_loop(
            self._sync.submit_approval,
            session_id,
            tool_call_id,
            approved,
            reason,
            decided_by=decided_by,
        )

    async def fail(self, session_id: str, tool_call_id: str, error: str) -> SubmitOutcome:
        return await _off_loop(self._sync.fail, session_id, tool_call_id, error)

    async def deliver(
        self, session_id: str, tool_call_id: str, delivery: Delivery
    ) -> SubmitOutcome:
        return await _off_loop(self._sync.deliver, session_id, tool_call_id, delivery)

    async def pending(
        self,
        *,
        session_id: str | None = None,
        tenant_id: str | None = None,
        user_id: str | None = None,
        kind: PendingKind | None = None,
        include_resolved: bool = False,
        limit: int = 100,
    ) -> list[PendingCall]:
        return await _off_loop(
            self._sync.pending,
            session_id=session_id,
            tenant_id=tenant_id,
            user_id=user_id,
            kind=kind,
            include_resolved=include_resolved,
            limit=limit,
        )

    async def interrupt(self, session_id: str) -> InterruptOutcome:
        return await _off_loop(self._sync.interrupt, session_id)

    async def token_generation(self, session_id: str) -> int:
        return await _off_loop(self._sync.token_generation, session_id)

    async def revoke_tokens(self, session_id: str) -> int:
        return await _off_loop(self._sync.revoke_tokens, session_id)

    async def reap_tombstones(self, retention_seconds: float | None = None) -> int:
        return await _off_loop(self._sync.reap_tombstones, retention_seconds)


class AsyncScopedClient:
    """``ScopedClient`` for async code: one user's (and tenant's), or one tenant's,
    sessions only."""

    def __init__(self, client: ScopedClient) -> None:
        self._sync = client

    @property
    def user_id(self) -> str | None:
        return self._sync.user_id

    @property
    def tenant_id(self) -> str | None:
        return self._sync.tenant_id

    def __repr__(self) -> str:
        return f"Async{self._sync!r}"

    async def start(self, agent: str, message: str, *, session_id: str | None = None) -> str:
        return await _off_loop(self._sync.start, agent, message, session_id=session_id)

    async def send(self, session_id: str, message: str) -> str:
        return await _off_loop(self._sync.send, session_id, message)

    async def session(self, session_id: str) -> SessionInfo:
        return await _off_loop(self._sync.session, session_id)

    async def sessions(
        self, *, agent: str | None = None, status: SessionStatus | None = None, limit: int = 20
    ) -> list[SessionInfo]:
        return await _off_loop(self._sync.sessions, agent=agent, status=status, limit=limit)

    async def events(self, session_id: str, after_seq: int = 0) -> SessionEvents:
        return await _off_loop(self._sync.events, session_id, after_seq)

    async def history(self, session_id: str) -> list[HistoryEntry]:
        return await _off_loop(self._sync.history, session_id)

    async def tool_calls(self, session_id: str) -> list[ToolCallRecord]:
        return await _off_loop(self._sync.tool_calls, session_id)

    async def pending(
        self,
        *,
        session_id: str | None = None,
        kind: PendingKind | None = None,
        include_resolved: bool = False,
        limit: int = 100,
    ) -> list[PendingCall]:
        return await _off_loop(
            self._sync.pending,
            session_id=session_id,
            kind=kind,
            include_resolved=include_resolved,
            limit=limit,
        )

    async def submit_tool_result(
        self,
        session_id: str,
        tool_call_id: str,
        *,
        result: JSONValue = None,
        error: str | None = None,
    ) -> SubmitOutcome:
        return await _off_loop(
            self._sync.submit_tool_result, session_id, tool_call_id, result=result, error=error
        )

    async def deliver(
        self, session_id: str, tool_call_id: str, delivery: Delivery
    ) -> SubmitOutcome:
        return await _off_loop(self._sync.deliver, session_id, tool_call_id, delivery)

    async def interrupt(self, session_id: str) -> InterruptOutcome:
        return await _off_loop(self._sync.interrupt, session_id)
