"""Hand a claimed workflow back to a queue, unrun, when this worker cannot run it.

A worker runs only some agents; a run reaches it anyway when it was enqueued on the shared
queue by an earlier release, or recovered onto DBOS's internal queue (which every worker
drains: a sub-agent's or a durable tool's workflow, started as a child with no queue of its
own, after a crash or an adoption). The session workflow then returns its row to the
queue of its agent, exactly as DBOS's recovery re-enqueues a dead executor's workflow
(``ENQUEUED``, no owner, no start time), guarded on this execution still owning it, and
its task ends by cancellation, for which DBOS records no outcome (as a parked wait's).

Private DBOS names used: ``GlobalParams.executor_id``, ``current_owner_xid`` (through
``parking.owner_xid``), the ``workflow_status`` table and ``_now_ms_sql`` of the system
database; ``internals._system_database``.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging

import sqlalchemy as sa
from dbos._sys_db import WorkflowStatusString

from .internals import _system_database
from .parking import owner_xid

_handing_back: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "dbos_agents_handing_back", default=False
)


class _DropHandBackWarning(logging.Filter):
    """DBOS warns about every cancelled workflow task; a handed-back one is not news."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not (
            _handing_back.get() and record.getMessage().startswith("Asyncio task cancelled")
        )


logging.getLogger("dbos").addFilter(_DropHandBackWarning())


async def hand_back(workflow_id: str, queue_name: str) -> bool:
    """Return ``workflow_id``, which this execution owns, to ``queue_name``; True when the
    row moved (False: it was no longer this execution's: cancelled, adopted, ended). Call
    it from the workflow's task, which must then end by raising ``asyncio.CancelledError``."""
    moved = await asyncio.to_thread(_move, workflow_id, queue_name)
    _handing_back.set(True)  # the task's own context: its cancellation is not news
    return moved


def _move(workflow_id: str, queue_name: str) -> bool:
    from dbos._utils import GlobalParams

    sys_db = _system_database()
    ws: sa.Table = sys_db.tables.workflow_status
    token = owner_xid(workflow_id)
    stmt = (
        sa.update(ws)
        .where(
            ws.c.workflow_uuid == workflow_id,
            ws.c.status == WorkflowStatusString.PENDING.value,
            ws.c.executor_id == GlobalParams.executor_id,
            ws.c.owner_xid.is_not_distinct_from(token) if token is not None else sa.true(),
        )
        .values(
            status=WorkflowStatusString.ENQUEUED.value,
            queue_name=queue_name,
            owner_xid=None,
            started_at_epoch_ms=None,
            updated_at=sys_db._now_ms_sql(),
        )
    )
    with sys_db.engine.begin() as conn:
        return bool(conn.execute(stmt).rowcount == 1)
