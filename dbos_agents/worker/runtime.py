"""``AgentRuntime``: the worker side. It launches DBOS and runs sessions on the agent queue."""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import Callable, Sequence

import sqlalchemy as sa
from dbos import DBOS, DBOSClient

from .. import _dbos
from ..agent import Agent
from ..errors import (
    ConfigurationError,
    RuntimeNotLaunchedError,
    SessionNotFoundError,
    UnknownAgentError,
)
from ..ids import agent_queue
from ..live import deltas
from ..live.listen import Listener
from ..loop import drain
from ..loop import workflow as _workflow  # noqa: F401  (registers the session workflow)
from ..loop.context import LoopContext, get_context, set_context
from ..loop.ledger import Ledger
from ..models.base import Model
from ..models.resolve import model_from
from ..outcome import RunSpec
from ..page_contract import contract_of
from ..settings import CLIENT_POOL_SIZE, SYNC_MAX_OVERFLOW, SYNC_POOL_SIZE, Settings
from ..store import pending, pg, queries, runs
from ..store.db import create_sync_engine, ensure_database, libpq_url, sqlalchemy_url
from ..store.locate import locate_database, log_located
from ..store.migrate import migrate
from ..store.traced import TracedDBOSClient
from .handle import Outcomes, SessionHandle
from .identity import ExecutorClaim
from .launch_config import datasource, dbos_config
from .parking import Parker
from .presence import ListenerWatch, Presence, presence_engine
from .starts import StartWatch

log = logging.getLogger("dbos_agents")


class AgentRuntime:
    """Runs agents durably. One per worker process: DBOS is a process-wide singleton.

    ``launch()`` checks the database answers (fast, naming the host), applies migrations,
    launches DBOS with the pinned ``application_version`` and ``executor_id`` (so this worker
    recovers its own unfinished sessions), and starts consuming the agent queue.
    """

    def __init__(
        self,
        agents: Sequence[Agent],
        model: Model | str | None = None,
        *,
        database_url: str | None = None,
        settings: Settings | None = None,
    ) -> None:
        self.settings = settings or Settings()
        if database_url is not None:
            self.settings = self.settings.model_copy(update={"database_url": database_url})
        family: dict[str, Agent] = {}
        for top in agents:
            for a in top.family():
                if family.setdefault(a.name, a) is not a:
                    raise ConfigurationError(f"two different agents are named {a.name!r}")
        model = None if model is None else model_from(model)
        if model is not None and not isinstance(model, Model):
            raise ConfigurationError(f"model {model!r} does not implement the Model protocol")
        if model is None and (bare := sorted(n for n, a in family.items() if a.model is None)):
            raise ConfigurationError(
                f"agents {', '.join(bare)} have no model of their own: give the runtime one"
                " (AgentRuntime(agents, model)), the default of every agent without its own"
            )
        self.agents = family
        """Every agent this worker can run, sub-agents included."""
        self.model = model
        self._engine: sa.Engine | None = None
        self._claim: ExecutorClaim | None = None
        self._client: DBOSClient | None = None
        self._presence: Presence | None = None
        self._listen_watch: ListenerWatch | None = None
        self._start_watch: StartWatch | None = None
        self._parker: Parker | None = None
        self._runs: Listener | None = None
        self._ledger: Ledger | None = None
        self._outcomes: Outcomes | None = None

    @property
    def queues(self) -> list[str]:
        """The DBOS queues this worker dequeues: one per agent it runs (sub-agents
        included), and the shared queue of runs enqueued before per-agent queues."""
        base = self.settings.queue_name
        return [base, *(agent_queue(base, name) for name in sorted(self.agents))]

    def _poll_sec(self) -> float:
        """Each queue's poll. DBOS polls every queue on a thread of its own, a query or two
        and a walk over the active workflows each time. Where starts are claimed as they are
        announced (fast paths, no worker limit) the poll is only a safety net, so its total
        rate is one queue's however many agents the worker runs; elsewhere the poll is what
        claims a start, and each queue keeps the configured interval."""
        poll = self.settings.queue_poll_sec()
        if _dbos.fast_paths() and self.settings.worker_concurrency is None:
            return poll * len(self.queues)
        return poll

    @property
    def executor_id(self) -> str | None:
        """The executor id this process holds (``worker/identity.py``); None before launch."""
        return self._claim.executor_id if self._claim is not None else None

    @property
    def database_url(self) -> str:
        if self.settings.database_url is None:
            raise ConfigurationError(
                "no database_url yet: launch() finds the embedded one, or pass one"
                " (DBOS_AGENTS_DATABASE_URL)"
            )
        return self.settings.database_url

    async def launch(self, *, on_adopted: Callable[[], None] | None = None) -> None:
        """Prepare the database and launch DBOS; recovers this worker's pending sessions.

        With ``on_adopted`` this process is a fleet worker: it registers its row *before*
        DBOS recovers anything (so an adopter's claim on the old row fails from here on),
        then heartbeats and adopts dead peers from a thread; ``on_adopted`` runs on that
        thread if this process learns its row was adopted (it must stop at once).
        """
        if self.settings.database_url is None:
            # The embedded database, as the CLI and AgentClient() find it (store/locate.py).
            located = await asyncio.to_thread(locate_database, self.settings)
            log_located(located)
            self.settings = self.settings.model_copy(update={"database_url": located.url})
        url = self.database_url
        s = self.settings
        _dbos.configure(fast_paths=s.dbos_fast_paths)
        await asyncio.to_thread(ensure_database, url, connect_timeout=s.connect_timeout_sec)
        engine = create_sync_engine(
            url,
            # Every connection the bound allows (Settings.max_database_connections counts
            # it) is kept once opened, as the datasource's: concurrent starts otherwise
            # close overflow connections on return and open new backends for the next.
            pool_size=SYNC_POOL_SIZE + SYNC_MAX_OVERFLOW,
            max_overflow=0,
            connect_timeout=s.connect_timeout_sec,
        )
        await asyncio.to_thread(migrate, engine)
        if self._claim is not None:  # an earlier launch of this runtime that failed
            await asyncio.to_thread(self._claim.release)
        claim = ExecutorClaim(url, s)
        executor_id = await asyncio.to_thread(claim.acquire)  # before DBOS recovers its work
        self._claim = claim
        if on_adopted is not None:
            self._presence = Presence(
                presence_engine(url, s),
                s,
                on_adopted,
                executor_id=executor_id,
                agents=sorted(self.agents),
                contracts={name: contract_of(a) for name, a in self.agents.items()},
            )
            await asyncio.to_thread(self._presence.register)
        DBOS(config=dbos_config(s, url, executor_id))
        ds = await datasource(s, url)
        pg.keep_on(asyncio.get_running_loop())  # where the workflows run (``store/pg``)
        # Parking needs the fast paths (``_dbos``): without them every wait stays in memory.
        self._parker = Parker(s.park_after() if _dbos.fast_paths() else None)
        self._ledger = Ledger(ds, s.stream_flush_sec)
        set_context(LoopContext(self.agents, self.model, s, self._ledger, self._parker))
        _dbos.before_launch()
        DBOS.listen_queues(self.queues)  # another service's agents are not ours to run
        DBOS.launch()
        _dbos.after_launch()
        poll = self._poll_sec()
        for queue in self.queues:
            await DBOS.register_queue_async(
                queue, worker_concurrency=s.worker_concurrency, polling_interval_sec=poll
            )
        self._client = await asyncio.to_thread(
            TracedDBOSClient,  # a start carries the caller's trace context
            system_database_url=sqlalchemy_url(url),
            application_name=s.app_name,
            dbos_system_schema=s.dbos_system_schema,
            system_database_pool_size=CLIENT_POOL_SIZE,
        )
        self._engine = engine
        self._runs = Listener(
            libpq_url(url), runs.CHANNEL, connect_timeout_sec=s.connect_timeout_sec
        )
        self._runs.start()
        get_context().run_ends.listener = self._runs
        self._outcomes = Outcomes(ds.engine, self._runs, s.result_recheck_sec)
        if _dbos.fast_paths():  # stock DBOS: its own per-waiter re-checks and queue poll
            self._listen_watch = ListenerWatch(recheck_sec=s.wake_recheck_interval_sec)
            self._listen_watch.start()
            self._start_watch = StartWatch(
                libpq_url(url), self.queues, connect_timeout_sec=s.connect_timeout_sec
            )
            self._start_watch.start()
        self._parker.start()
        claim.keep()
        if self._presence is not None:
            self._presence.start()
        log.info(
            f"worker {executor_id} launched: agents {', '.join(sorted(self.agents))}",
            extra={"event": "launched", "executor_id": executor_id},
        )

    def _require(self) -> tuple[sa.Engine, DBOSClient]:
        if self._engine is None or self._client is None:
            raise RuntimeNotLaunchedError("call `await runtime.launch()` first")
        return self._engine, self._client

    async def start(
        self,
        agent: str,
        message: str,
        *,
        session_id: str | None = None,
        user_id: str | None = None,
        tenant_id: str | None = None,
    ) -> SessionHandle:
        """Start a session with its first message, or continue ``session_id`` if it exists."""
        engine, client = self._require()
        if agent not in self.agents:
            raise UnknownAgentError(agent, list(self.agents))

        def start_run() -> tuple[RunSpec, str, bool]:
            local = self._local_claim(agent)
            started = queries.start_run(
                engine,
                client,
                self.settings.queue_name,
                agent=agent,
                message=message,
                session_id=session_id,
                user_id=user_id,
                tenant_id=tenant_id,
                claim=None if local is None else local.claim,
                system_schema=self.settings.dbos_system_schema,
            )
            if local is not None:
                local.execute()
            return (*started, local is not None and local.status is not None)

        spec, workflow_id, here = await asyncio.to_thread(start_run)
        sid = spec["session_id"]
        persistent = self.agents[agent].persistent
        return self._handle(sid, workflow_id, spec["run_seq"], persistent, runs_here=here)

    async def send(self, session_id: str, message: str) -> SessionHandle:
        """Continue a finished session with a follow-up message, as a new run."""
        engine, _ = self._require()
        schema = self.settings.dbos_system_schema
        info = await asyncio.to_thread(queries.get_session, engine, session_id, schema)
        if info is None:
            raise SessionNotFoundError(session_id)
        return await self.start(info.agent, message, session_id=session_id)

    def session(self, session_id: str) -> SessionHandle:
        """A handle on an existing session's latest run."""
        engine, _ = self._require()
        info = queries.get_session(engine, session_id, self.settings.dbos_system_schema)
        if info is None:
            raise SessionNotFoundError(session_id)
        agent = self.agents.get(info.agent)
        return self._handle(
            session_id, info.workflow_id, info.run_seq, agent is not None and agent.persistent
        )

    def _local_claim(self, agent: str) -> _dbos.LocalStart | None:
        """A claim for a run of ``agent`` this worker starts and executes at once, or None:
        the queue claims it (while draining, and where ``_dbos.local_start`` says so;
        deciding can read the database)."""
        if drain.is_draining():
            return None
        return _dbos.local_start(agent_queue(self.settings.queue_name, agent))

    def _handle(
        self,
        session_id: str,
        workflow_id: str,
        run_seq: int,
        persistent: bool,
        *,
        runs_here: bool = False,
    ) -> SessionHandle:
        engine, _ = self._require()
        assert self._outcomes is not None
        return SessionHandle(
            session_id,
            workflow_id,
            run_seq,
            engine=engine,
            outcomes=self._outcomes,
            persistent=persistent,
            runs_here=runs_here,
            system_schema=self.settings.dbos_system_schema,
        )

    async def reap_tombstones(self) -> int:
        """Delete settled pending calls older than ``tombstone_retention_sec``."""
        engine, _ = self._require()
        return await asyncio.to_thread(pending.reap, engine, self.settings.tombstone_retention_sec)

    async def reap_deltas(self) -> int:
        """Delete the live-stream pieces of ended runs older than ``delta_retention_sec``."""
        engine, _ = self._require()
        return await asyncio.to_thread(deltas.reap, engine, self.settings.delta_retention_sec)

    @property
    def parked(self) -> int:
        """Waits of this worker parked right now (``Settings.park_after_sec``)."""
        return self._parker.parked if self._parker is not None else 0

    @property
    def instance_id(self) -> str | None:
        """This process's token on its ``workers`` row (fleet workers only)."""
        return self._presence.instance_id if self._presence is not None else None

    async def drain(self, grace_sec: float) -> bool:
        """Stop dequeuing, let running steps finish and checkpoint within ``grace_sec``,
        park every workflow at its next step. The runtime stays intact (the context, DBOS,
        the datasource), so nothing that finishes is recorded as failed; heartbeats go on,
        so nobody adopts a draining worker. True when everything in flight finished."""
        _dbos.stop_dequeuing()
        drain.begin_drain()
        if self._presence is not None:
            self._presence.adopting = False
        return await drain.wait_idle(
            grace_sec, checkpointed=_dbos.checkpointed_steps, ended=_dbos.ended_workflows
        )

    async def leave(self) -> None:
        """After a drain: stop heartbeating and mark this worker's row stopped. The process
        must then exit without DBOS recording anything (see ``worker.serve_forever``)."""
        if self._presence is not None:
            presence, self._presence = self._presence, None
            await asyncio.to_thread(presence.stop)
            try:
                await asyncio.to_thread(presence.mark_stopped)
            except Exception as exc:
                log.warning("could not mark the worker stopped", extra={"error": str(exc)})
            presence.engine.dispose()

    async def shutdown(self, workflow_completion_timeout_sec: float = 0) -> None:
        """Stop DBOS in this process (tests, embedding); unfinished sessions recover at the
        next launch. DBOS stops first and the context goes last, so a workflow finishing a
        step during ``workflow_completion_timeout_sec`` still finds its runtime."""
        await self.leave()
        if any(a.mcp_servers for a in self.agents.values()):
            from ..mcp import wire

            await wire.close_all()  # stdio servers' processes end with their connections
        for watch in (self._listen_watch, self._start_watch):
            if watch is not None:
                await asyncio.to_thread(watch.stop)
        self._listen_watch = self._start_watch = None
        if self._runs is not None:
            await asyncio.to_thread(self._runs.stop)
            self._runs = self._outcomes = None
        if self._parker is not None:  # parked sessions stay PENDING: the next launch recovers them
            await asyncio.to_thread(self._parker.stop)
            self._parker = None
        # In a thread: the grace wait sleeps, and the loop must keep running the workflows
        # that are finishing their steps meanwhile.
        await asyncio.to_thread(
            DBOS.destroy, workflow_completion_timeout_sec=math.ceil(workflow_completion_timeout_sec)
        )
        if self._ledger is not None:
            await self._ledger.announcer.close()
            self._ledger = None
        await pg.close_idle()  # the hot path's kept connections, back to their pool
        set_context(None)
        if self._claim is not None:  # DBOS is gone: another process may take this id now
            self._claim.release()  # not in a thread: DBOS.destroy shut the loop's executor
            self._claim = None
        if self._client is not None:
            self._client.destroy()
        if self._engine is not None:
            self._engine.dispose()
        self._engine = self._client = None
