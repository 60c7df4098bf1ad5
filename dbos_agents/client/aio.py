"""``AsyncAgentClient``: ``AgentClient`` for async code (an HTTP server, an async script).

Its methods are ``AgentClient``'s own, awaited: each is declared here by name only
(``_awaited``), with the sync method's signature, documentation, errors and return type,
and runs in a worker thread (``anyio.to_thread``, the pool Starlette uses). Why a second
class and not ``*_async`` methods on ``AgentClient``: an async caller should not be one
typo away from a blocking call on its event loop. A call once started runs to its end
even if the awaiting task is cancelled: a submit is never left half-done by a cancelled
request. ``wait`` and ``stream`` hold no thread between their reads; what every request
and stream of a server calls holds none at all: ``read_events`` (a live stream's full
read), ``session``, ``token_generation`` and ``deliver``'s common case run on the loop
(``live/loop_reads.py``), unless the wrapped client's class overrides them.
"""

from __future__ import annotations

import functools
import math
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from contextlib import aclosing
from typing import Any, Concatenate, ParamSpec, TypeVar

import anyio
import anyio.to_thread
import sqlalchemy as sa

from .. import storable
from ..delivery import Delivery
from ..errors import SessionNotFoundError
from ..events import Cursor, SessionEvent
from ..live import follow as live
from ..live import log as event_log
from ..live.follow import EventBatch, cursor_of
from ..live.watch import AsyncSessionWatch, LiveWatch
from ..outcome import TERMINAL, SessionInfo
from ..records import SubmitOutcome
from ..settings import Settings
from ..store import pg
from ..store import sessions as session_rows
from ..store.db import ping
from ..store.unavailable import translate
from . import submit
from .scope import Scope, seen
from .state import AsyncStateReads
from .sync import AgentClient

P = ParamSpec("P")
T = TypeVar("T")


async def _off_loop(fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> T:
    return await anyio.to_thread.run_sync(functools.partial(fn, *args, **kwargs))


def _overridden(client: AgentClient, name: str) -> bool:
    """Whether the wrapped client's class replaces ``AgentClient.name`` (then that runs,
    in a thread, as every other method does)."""
    return getattr(type(client), name, None) is not getattr(AgentClient, name)


def _awaited(
    method: Callable[Concatenate[AgentClient, P], T],
) -> Callable[Concatenate[AsyncAgentClient, P], Coroutine[Any, Any, T]]:
    """``AgentClient.method``, awaited in a worker thread (looked up on the wrapped client,
    so a subclass's override is the one that runs)."""
    name = method.__name__

    @functools.wraps(method)
    async def call(self: AsyncAgentClient, /, *args: P.args, **kwargs: P.kwargs) -> T:
        bound: Callable[P, T] = getattr(self._sync, name)
        return await _off_loop(bound, *args, **kwargs)

    return call


class AsyncAgentClient(AsyncStateReads):
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

    @property
    def scope(self) -> Scope | None:
        return self._sync.scope

    @property
    def user_id(self) -> str | None:
        return self._sync.user_id

    @property
    def tenant_id(self) -> str | None:
        return self._sync.tenant_id

    def __repr__(self) -> str:
        return f"AsyncAgentClient(scope={self.scope!r})"

    async def aclose(self) -> None:
        if self._owns:
            await self._sync.loop_reads.aclose()
            await _off_loop(self._sync.close)

    async def __aenter__(self) -> AsyncAgentClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def for_identity(self, user_id: str, tenant_id: str | None = None) -> AsyncAgentClient:
        """This client bound to one user (and tenant); see ``AgentClient.for_identity``."""
        return AsyncAgentClient(self._sync.for_identity(user_id, tenant_id))

    def for_tenant(self, tenant_id: str) -> AsyncAgentClient:
        """This client bound to one tenant; see ``AgentClient.for_tenant``."""
        return AsyncAgentClient(self._sync.for_tenant(tenant_id))

    async def _offload(
        self, fn: Callable[Concatenate[sa.Engine, P], T], /, *args: P.args, **kwargs: P.kwargs
    ) -> T:
        """Run ``fn(engine, *args, **kwargs)``, a read of your own over this client's
        connection pool, off the event loop, with database errors translated."""

        def call() -> T:
            with translate(self._sync.database_url):
                return fn(self._sync.engine, *args, **kwargs)

        return await _off_loop(call)

    async def ping(self) -> None:
        """Check that the database answers a query; raises ``DatabaseUnavailableError``."""
        await self._offload(ping)

    start = _awaited(AgentClient.start)
    send = _awaited(AgentClient.send)
    sessions = _awaited(AgentClient.sessions)
    queued_runs = _awaited(AgentClient.queued_runs)
    events = _awaited(AgentClient.events)
    history = _awaited(AgentClient.history)
    usage = _awaited(AgentClient.usage)
    fork = _awaited(AgentClient.fork)
    tool_calls = _awaited(AgentClient.tool_calls)
    timeline = _awaited(AgentClient.timeline)
    submit_tool_result = _awaited(AgentClient.submit_tool_result)
    submit_approval = _awaited(AgentClient.submit_approval)
    fail = _awaited(AgentClient.fail)
    pending = _awaited(AgentClient.pending)
    interrupt = _awaited(AgentClient.interrupt)
    revoke_tokens = _awaited(AgentClient.revoke_tokens)
    reap_tombstones = _awaited(AgentClient.reap_tombstones)
    reap_deltas = _awaited(AgentClient.reap_deltas)
    run_outcome = _awaited(AgentClient.run_outcome)
    served_agents = _awaited(AgentClient.served_agents)
    inbox_open = _awaited(AgentClient.inbox_open)
    inbox_settled = _awaited(AgentClient.inbox_settled)
    inbox_session_calls = _awaited(AgentClient.inbox_session_calls)

    async def _on_loop(self, read: Callable[[pg.Driver], Awaitable[T]]) -> T:
        """Run ``read(connection)`` on a psycopg async connection of this event loop
        (autocommit; leave no transaction open), with database errors translated."""
        with translate(self.database_url):
            return await self._sync.loop_reads.run(read)

    async def deliver(
        self, session_id: str, tool_call_id: str, delivery: Delivery
    ) -> SubmitOutcome:
        """``AgentClient.deliver``: the common case (a waiting wait, a live run) on this
        event loop (``submit.submit_on``), every other case in a thread."""
        if _overridden(self._sync, "deliver"):
            return await _off_loop(self._sync.deliver, session_id, tool_call_id, delivery)
        sync = self._sync
        # Shielded as the thread-run calls are: a cancelled request still gets its answer
        # decided (never a submit whose caller cannot know whether it landed).
        with anyio.CancelScope(shield=True), translate(self.database_url):
            outcome = await submit.submit_on(
                self._on_loop,
                sync.engine,
                sync.dbos,
                session_id=session_id,
                tool_call_id=tool_call_id,
                delivery=delivery,
                schema=self.settings.dbos_system_schema,
                scope=self.scope,
            )
        return outcome

    async def token_generation(self, session_id: str) -> int:
        """``AgentClient.token_generation``, on this event loop: every request a session
        token lets in reads it."""
        if _overridden(self._sync, "token_generation"):
            return await _off_loop(self._sync.token_generation, session_id)
        storable.check_id(session_id, "session_id")
        row = await self._on_loop(lambda d: session_rows.token_generation_on(d, session_id))
        return int(seen(self.scope, session_id, row).token_generation)

    async def session(self, session_id: str) -> SessionInfo:
        """``AgentClient.session``, on this event loop (``live/loop_reads.py``): every chat-UI
        request reads its session first."""
        if _overridden(self._sync, "session"):
            return await _off_loop(self._sync.session, session_id)
        storable.check_id(session_id, "session_id")
        schema = self.settings.dbos_system_schema

        async def read(driver: pg.Driver) -> SessionInfo | None:
            return await session_rows.get_on(driver, session_id, schema)

        return seen(self.scope, session_id, await self._on_loop(read))

    async def session_with_runs(self, session_id: str) -> session_rows.WithRuns | None:
        """The session, the generation its tokens must carry and where its runs' messages
        lie in its transcript, in one read on this event loop (what a chat-UI request reads
        first); None: no such session. The caller authorizes what it shows (a session of
        another scope is refused)."""
        storable.check_id(session_id, "session_id")
        schema = self.settings.dbos_system_schema
        read = await self._on_loop(lambda d: session_rows.get_with_runs_on(d, session_id, schema))
        if read is not None and self.scope is not None:
            self.scope.check(session_id, read.info.user_id, read.info.tenant_id)
        return read

    async def read_events(
        self, session_id: str, after: str | Cursor | None = None, *, limit: int = event_log.BATCH
    ) -> EventBatch:
        """``AgentClient.read_events``, on this event loop (``live/loop_reads.py``): a live
        stream's full read takes no thread."""
        if _overridden(self._sync, "read_events"):
            return await _off_loop(self._sync.read_events, session_id, after, limit=limit)
        storable.check_id(session_id, "session_id")
        storable.check_int(limit, "limit", 1, event_log.BATCH)
        start = cursor_of(after)
        schema = self.settings.dbos_system_schema

        async def read(driver: pg.Driver) -> event_log.LogRead:
            return await event_log.read_log_async(driver, session_id, start, limit, schema)

        return self._sync._batch(session_id, await self._on_loop(read))

    async def watch(self, session_id: str, *, check: bool = True) -> AsyncSessionWatch:
        """A watch on the session (see ``AgentClient.watch``) on this client's one shared
        LISTEN connection: it holds no thread and no connection of its own. Close it (or
        use ``async with``) when done. ``check=False``: the caller has just read the
        session through this client's scope (no second read)."""
        if check:
            await self.session(session_id)
        watches = self._sync.watches
        listener = watches.started()
        if listener is None:
            listener = await _off_loop(watches.listener)
        return AsyncSessionWatch(listener, session_id)

    async def live_watch(self, session_id: str, *, check: bool = True) -> LiveWatch:
        """A live stream's wait (``LiveWatch``): a watch on the session and a subscription
        to this client's delta feed. Make it before the stream's first read."""
        watch = await self.watch(session_id, check=check)
        return LiveWatch(watch, self._sync.watches.feed, session_id)

    def stream(
        self,
        session_id: str,
        after: str | None = None,
        *,
        follow: bool = True,
        timeout: float | None = None,
        poll: float = 5.0,
    ) -> AsyncIterator[SessionEvent]:
        """``AgentClient.stream`` as an async iterator: it holds no thread while it waits
        (the client's shared LISTEN connection wakes it). Checks the session (and this
        client's scope) when iteration starts."""
        storable.check_id(session_id, "session_id")
        return self._streamed(session_id, cursor_of(after), follow, timeout, poll)

    async def _streamed(
        self, session_id: str, start: Cursor, follow: bool, for_sec: float | None, poll: float
    ) -> AsyncIterator[SessionEvent]:
        limits = live.Limits(poll, math.inf if for_sec is None else for_sec)

        async def read(cursor: Cursor) -> EventBatch:
            return await self.read_events(session_id, cursor)

        async with await self.live_watch(session_id) as watch:
            items = live.follow(read, watch, start, limits, keep_following=follow)
            async with aclosing(items):
                async for item in items:
                    if isinstance(item, live.Stop):
                        return
                    for event in item.events:
                        yield event

    async def wait(
        self,
        session_id: str,
        *,
        timeout: float = 60.0,  # noqa: ASYNC109 -- AgentClient.wait's signature
        poll: float = 5.0,
    ) -> SessionInfo:
        """Until the session's current run ends; raises ``TimeoutError``. Woken by the
        run's end (``poll`` is the safety net's interval); holds no thread meanwhile."""
        storable.check_id(session_id, "session_id")
        deadline = time.monotonic() + timeout
        listener = await _off_loop(self._sync.watches.listener)
        async with AsyncSessionWatch(listener, session_id) as w:
            while True:
                try:
                    info: SessionInfo | None = await self.session(session_id)
                except SessionNotFoundError:
                    info = None
                if info is not None and info.status in TERMINAL:
                    return info
                left = deadline - time.monotonic()
                if left <= 0:
                    state = info.status if info else "not started"
                    raise TimeoutError(f"session {session_id} still {state} after {timeout}s")
                await w.wait(min(poll, left))
