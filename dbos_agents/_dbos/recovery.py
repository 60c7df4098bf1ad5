"""Recovery returns a dead executor's PENDING workflows to their queues in one statement
per thousand, not in DBOS's transaction per workflow.

DBOS recovers a restarted worker's (and an adopter's dead peers') workflows by re-enqueueing
each one (``SystemDatabase.reenqueue_for_recovery``): status ``ENQUEUED``, no owner, no start
time, the internal queue if it had none, guarded by ``PENDING`` on one of the dead
executors so that a workflow another executor already dequeued is left alone. After a
SIGKILL with 1,000 sessions in flight those 1,000 transactions were a tenth of the restarted
worker's profile, on a thread competing with the recovered sessions for the GIL, and they
trickled the workflows onto the queue over seconds. Here the same update, with the same
guard, runs for up to ``CHUNK`` ids at a time; the selection of workflows is DBOS's own
(``get_pending_workflows``). A sharded system database (rows addressed by shard key) and a
failed chunk keep DBOS's per-workflow path.

Private DBOS names used: ``dbos._dbos.startup_recovery_thread`` (replaced before launch),
``GlobalParams.executor_id``/``app_version``, ``INTERNAL_QUEUE_NAME``, the instance's
``background_thread_stop_events`` and ``_sys_db`` (``engine``, ``tables``,
``get_pending_workflows``), ``DBOS._recover_pending_workflows``; ``internals.sharded``.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

import sqlalchemy as sa
from dbos import _dbos as dbos_module
from dbos import _recovery
from dbos._sys_db import WorkflowStatusString
from dbos._utils import INTERNAL_QUEUE_NAME, GlobalParams

from .internals import _any_of, _system_database, sharded

log = logging.getLogger("dbos_agents")

CHUNK = 1000
"""Workflows per re-enqueue statement: one short transaction each, however many wait."""

_PENDING = WorkflowStatusString.PENDING.value
_ENQUEUED = WorkflowStatusString.ENQUEUED.value


def reenqueue(sys_db: Any, ids: list[str], executor_ids: list[str]) -> int:
    """DBOS's recovery re-enqueue for ``ids`` at once, ``CHUNK`` per transaction; returns
    how many rows it re-enqueued (a row another executor dequeued meanwhile is skipped)."""
    ws = sys_db.tables.workflow_status
    done = 0
    for i in range(0, len(ids), CHUNK):
        stmt = (
            sa.update(ws)
            .where(
                ws.c.workflow_uuid == _any_of(ids[i : i + CHUNK]),
                ws.c.status == _PENDING,
                ws.c.executor_id.in_(executor_ids),
            )
            .values(
                status=_ENQUEUED,
                owner_xid=None,
                started_at_epoch_ms=None,
                updated_at=sys_db._now_ms_sql(),
                queue_name=sa.func.coalesce(ws.c.queue_name, INTERNAL_QUEUE_NAME),
            )
        )
        with sys_db.engine.begin() as conn:
            done += conn.execute(stmt).rowcount
    return done


_dbos_startup_recovery = _recovery.startup_recovery_thread


def _startup_recovery(dbos: Any, pending: list[Any]) -> None:
    """``startup_recovery_thread`` (run on DBOS's executor at launch), in chunks."""
    if not pending or sharded(dbos._sys_db):
        _dbos_startup_recovery(dbos, pending)
        return
    stop = threading.Event()
    dbos.background_thread_stop_events.append(stop)
    executor_ids = [GlobalParams.executor_id]
    for i in range(0, len(pending), CHUNK):
        if stop.is_set():  # a drain began: the next launch recovers the rest
            return
        chunk = pending[i : i + CHUNK]
        try:
            reenqueue(dbos._sys_db, [p.workflow_id for p in chunk], executor_ids)
        except Exception:
            log.warning(
                "bulk recovery failed; recovering one by one",
                extra={"event": "recovery_fallback", "workflows": len(chunk)},
                exc_info=True,
            )
            _dbos_startup_recovery(dbos, chunk)


def install() -> None:
    """Use the chunked recovery at this process's next ``DBOS.launch()`` (call before it)."""
    setattr(dbos_module, "startup_recovery_thread", _startup_recovery)  # noqa: B010


def recover_pending_workflows(executor_ids: list[str]) -> list[str]:
    """Re-enqueue the PENDING workflows of ``executor_ids`` (this application version) on
    their queues, or DBOS's internal one; its dequeue admits exactly one runner per
    workflow. Returns their ids. (``DBOS._recover_pending_workflows``, in chunks.)"""
    sys_db = _system_database()
    if sharded(sys_db):
        from dbos import DBOS

        return [h.workflow_id for h in DBOS._recover_pending_workflows(executor_ids)]
    ids = [
        p.workflow_id
        for executor_id in executor_ids
        for p in sys_db.get_pending_workflows(executor_id, GlobalParams.app_version)
    ]
    reenqueue(sys_db, ids, executor_ids)
    log.info(
        f"re-enqueued {len(ids)} unfinished workflow(s) of {', '.join(executor_ids)}",
        extra={"event": "recovering", "executor_ids": executor_ids, "workflows": len(ids)},
    )
    return ids
