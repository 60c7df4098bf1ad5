"""A run the worker starts itself (``AgentRuntime.start``) is claimed by the transaction that
enqueues it, and executed as that transaction commits.

Through the queue, a local start paid for a ``NOTIFY``, a wake of the start watch, DBOS's
claim transaction (its latest-version check, a locking read and an update) and a read of
the claimed status: 14 of the 24 ms from ``start`` to the first model call (a trace of
``bench/start_latency.py``). Here the enqueuing transaction also runs the update DBOS's
claim runs (status ``PENDING``, this executor, a new ownership token, this version, its
start time, ``recovery_attempts + 1``) and reads DBOS's status back with it; after the
commit the worker executes it (``execute_dequeued_workflow``, as a queue claim does).

A crash between the commit and the execution leaves the run ``PENDING`` on this executor,
as after any claim: the restarted worker recovers it. It is used only where a queue claim
would be this worker's to make: DBOS launched here, not draining, a queue without limits
(a worker or global concurrency limit is counted by the queue thread alone), an unsharded
database, and this worker running the latest version (DBOS gives version-less workflows
to the latest one only; read at most once a second, like the queue's configuration).
Otherwise the start goes through the queue as before.
"""

from __future__ import annotations

import logging
from typing import Any

import sqlalchemy as sa
from dbos._sys_db import WorkflowStatusString

from .internals import _system_database, claims_without_limits, is_latest_version, sharded
from .parking import (
    NOW_MS,
    STATUS_COLUMNS,
    Claimed,
    execute_claimed,
    status_of,
    status_stmt,
)

log = logging.getLogger("dbos_agents")

_CLAIM = (
    "UPDATE {schema}.workflow_status AS ws SET status = :pending, owner_xid = :token,"
    " application_version = :version, executor_id = :executor, application_name = :app,"
    f" started_at_epoch_ms = {NOW_MS}, rate_limited = false,"
    f" recovery_attempts = ws.recovery_attempts + 1, updated_at = {NOW_MS}"
    " WHERE ws.workflow_uuid = :wf AND ws.status = :enqueued AND ws.queue_name = :queue"
    f" AND ws.workflow_timeout_ms IS NULL RETURNING {STATUS_COLUMNS}"
)


class LocalStart:
    """One start's claim: ``claim`` inside the enqueuing transaction, ``execute`` after it
    committed (a no-op when the claim matched nothing)."""

    def __init__(self, queue_name: str) -> None:
        from dbos._utils import generate_uuid

        self.queue_name = queue_name
        self.token = generate_uuid()
        self.status: dict[str, Any] | None = None

    def claim(self, conn: sa.Connection, workflow_id: str) -> bool:
        """Claim the workflow this transaction just enqueued; True when it did."""
        from dbos._utils import GlobalParams

        sys_db = _system_database()
        params = {
            "pending": WorkflowStatusString.PENDING.value,
            "enqueued": WorkflowStatusString.ENQUEUED.value,
            "token": self.token,
            "version": GlobalParams.app_version,
            "executor": GlobalParams.executor_id,
            "app": sys_db.app_name,
            "wf": workflow_id,
            "queue": self.queue_name,
        }
        row = conn.execute(status_stmt(sys_db, _CLAIM), params).first()
        if row is None:
            return False
        self.status = status_of(row)
        return True

    def execute(self) -> None:
        """Run the claimed workflow here; if DBOS refuses, return it to its queue (any
        worker's next claim takes it) rather than leave it to this worker's restart."""
        if self.status is None:
            return
        try:
            execute_claimed(Claimed(self.status, None, set()), self.token)
        except Exception:
            from dbos._utils import GlobalParams

            wf = self.status["workflow_uuid"]
            log.exception("local start failed; re-enqueued", extra={"workflow_id": wf})
            _system_database().reenqueue_for_recovery(
                wf, [GlobalParams.executor_id], self.queue_name
            )


def local_start(queue_name: str) -> LocalStart | None:
    """A claim for one start by this worker, or None where the queue must claim it (the
    caller also leaves it to the queue while draining)."""
    from dbos._utils import GlobalParams

    try:
        sys_db = _system_database()
    except Exception:  # DBOS not launched in this process
        return None
    if sharded(sys_db):
        return None
    if not claims_without_limits(queue_name):
        return None
    if not is_latest_version(sys_db, GlobalParams.app_version):
        return None
    return LocalStart(queue_name)
