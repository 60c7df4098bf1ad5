"""Every use of DBOS internals, in one place.

DBOS 3.4 has no public API for a few things operations need. Each function here names the
private DBOS object it relies on; ``tests/unit/test_dbos_compat.py`` fails loudly when a
DBOS upgrade moves or renames one, so an upgrade is a one-file review.

- ``cancel_workflows_in_transaction``: DBOS cancels a workflow in its own transaction
  (``SystemDatabase.cancel_workflows``); an interrupt must cancel in *ours*, so the session
  row, the pending rows and the cancellation commit together or not at all. Uses
  ``DBOSClient._sys_db.tables.workflow_status`` and mirrors the columns DBOS resets.
"""

from __future__ import annotations

import sqlalchemy as sa
from dbos import DBOSClient
from dbos._sys_db import WorkflowStatusString

FINISHED = (WorkflowStatusString.SUCCESS.value, WorkflowStatusString.ERROR.value)


def workflow_status_table(client: DBOSClient) -> sa.Table:
    """DBOS's ``workflow_status`` table object (schema-qualified as the client was built)."""
    table: sa.Table = client._sys_db.tables.workflow_status
    return table


def cancel_workflows_in_transaction(
    conn: sa.Connection, client: DBOSClient, workflow_ids: list[str]
) -> list[str]:
    """Cancel the given workflows inside the caller's transaction, exactly as
    ``DBOS.cancel_workflow`` does (status CANCELLED, off its queue, ownership token
    cleared), unless already finished. Returns the ids it cancelled."""
    if not workflow_ids:
        return []
    ws = workflow_status_table(client)
    now_ms = sa.cast(sa.func.extract("epoch", sa.func.now()) * 1000, sa.BigInteger)
    rows = conn.execute(
        sa.update(ws)
        .where(ws.c.workflow_uuid.in_(workflow_ids))
        .where(ws.c.status.notin_(FINISHED))
        .values(
            status=WorkflowStatusString.CANCELLED.value,
            owner_xid=None,
            queue_name=None,
            deduplication_id=None,
            started_at_epoch_ms=None,
            updated_at=now_ms,
            completed_at=now_ms,
        )
        .returning(ws.c.workflow_uuid)
    ).all()
    return [r[0] for r in rows]
