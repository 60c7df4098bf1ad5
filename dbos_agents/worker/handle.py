"""``SessionHandle``: a started run of a session, and how the worker waits for a run's end.

A run executing in this process hands its outcome over directly (``loop.outcomes``); any
other is announced by a NOTIFY as its row commits (``store.runs``), heard through this
process's one LISTEN connection (``live.listen``). A slow safety net re-reads the row and
asks DBOS whether the workflow ended without recording one. No caller polls.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from dbos import DBOS, WorkflowHandleAsync
from sqlalchemy.ext.asyncio import AsyncEngine

from ..errors import SessionNotFoundError
from ..live.listen import Listener
from ..loop import outcomes
from ..outcome import RunOutcome, SessionInfo
from ..records import HistoryEntry, ToolCallRecord
from ..store import pg, queries, runs
from ..store.runs import run_key

LOCAL_RESULT_GRACE_SEC = 1.0
"""How long ``result()`` of a run this worker's own start claimed waits for the outcome
handed over in process before it also reads the database; after it, a run that was
re-enqueued for another worker, or is simply long, is waited for as any other."""


@dataclass(frozen=True)
class Outcomes:
    """Waits for runs' outcomes in this worker (see the module doc)."""

    datasource: AsyncEngine
    listener: Listener
    recheck_sec: float

    async def wait(
        self, session_id: str, run_seq: int, workflow_id: str, persistent: bool, runs_here: bool
    ) -> RunOutcome:
        key = run_key(session_id, run_seq)
        local = outcomes.handover.waiter(key)
        try:
            if runs_here:  # claimed by this start: its outcome is handed over here
                await asyncio.wait({local}, timeout=LOCAL_RESULT_GRACE_SEC)
                if local.done():
                    return local.result()
            while True:
                note = self.listener.waiter(key)  # before the read: an end after it wakes us
                try:
                    async with pg.driver(self.datasource) as conn:
                        rows = await pg.fetch(conn, runs.read_stmt(session_id, run_seq))
                    if rows:
                        return runs.outcome_of(rows[0])
                    woken: set[asyncio.Future[Any]] = {local, note}
                    done, _ = await asyncio.wait(
                        woken, timeout=self.recheck_sec, return_when=asyncio.FIRST_COMPLETED
                    )
                    if local.done():
                        return local.result()
                    if not done:  # the safety net
                        ended = await _ended_without_outcome(
                            session_id, run_seq, workflow_id, persistent
                        )
                        if ended is not None:
                            return ended
                finally:
                    self.listener.discard(key, note)
        finally:
            outcomes.handover.discard(key, local)


async def _ended_without_outcome(
    session_id: str, run_seq: int, workflow_id: str, persistent: bool
) -> RunOutcome | None:
    """The outcome of a run whose workflow ended without recording one: cancelled by an
    interrupt while it waited, out of recovery attempts, or finished by a release that
    kept outcomes elsewhere. None while the workflow may still record it."""
    status = await DBOS.get_workflow_status_async(workflow_id)
    if status is None or status.status in ("PENDING", "ENQUEUED"):
        return None
    if status.status == "SUCCESS" and not persistent:
        handle: WorkflowHandleAsync[Any] = await DBOS.retrieve_workflow_async(workflow_id)
        return RunOutcome.model_validate(await handle.get_result())
    interrupted = status.status == "CANCELLED"
    return RunOutcome(
        session_id=session_id,
        run_seq=run_seq,
        status="interrupted" if interrupted else "failed",
        error=None if interrupted else f"the run's workflow ended as {status.status}",
    )


class SessionHandle:
    """A started run of a session: await its outcome, read its status and transcript."""

    def __init__(
        self,
        session_id: str,
        workflow_id: str,
        run_seq: int,
        *,
        engine: sa.Engine,
        outcomes: Outcomes,
        persistent: bool,
        runs_here: bool = False,
        system_schema: str | None = None,
    ) -> None:
        self.session_id = session_id
        self._system_schema = system_schema
        self.workflow_id = workflow_id
        self.run_seq = run_seq
        self._engine = engine
        self._outcomes = outcomes
        self._persistent = persistent
        self._runs_here = runs_here

    def __repr__(self) -> str:
        return f"SessionHandle({self.session_id!r}, workflow_id={self.workflow_id!r})"

    async def result(self) -> RunOutcome:
        """Wait for this run to end and return how it ended."""
        return await self._outcomes.wait(
            self.session_id, self.run_seq, self.workflow_id, self._persistent, self._runs_here
        )

    async def status(self) -> SessionInfo:
        info = await asyncio.to_thread(
            queries.get_session, self._engine, self.session_id, self._system_schema
        )
        if info is None:
            raise SessionNotFoundError(self.session_id)
        return info

    async def history(self) -> list[HistoryEntry]:
        return await asyncio.to_thread(queries.history, self._engine, self.session_id)

    async def tool_calls(self) -> list[ToolCallRecord]:
        return await asyncio.to_thread(queries.tool_calls, self._engine, self.session_id)
